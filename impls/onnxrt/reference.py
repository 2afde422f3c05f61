"""The ONNX standard's own semantics as a second specification (plugin ``onnx-reference``).

Each entry is a graph written here from standard operators (no exporter, no contrib ops), in the
spec's column layout where the operators allow it, and run by ``onnx.reference.ReferenceEvaluator``
(onnx 1.23.2, onnx/reference/ops/: op_layer_normalization.py, op_rms_normalization.py,
op_softmax.py, op_attention.py, op_gelu.py, the rest NumPy one-liners). The parameters are graph
inputs, so one evaluator serves every call of one structure (entry, dtype, rank, heads).

- ``layer_norm``: LayerNormalization (opset 17), axis −1 on Xᵀ, ``epsilon`` at the attribute's
  default, 1e-5 (``REFERENCE_EPS``; the paper has no ε: the standard's default is what an ONNX
  user gets), ``stash_type`` at its default 1.
- ``rms_norm``: RMSNormalization (opset 23), axis −1 on Xᵀ, ``epsilon`` at its default 1e-5.
- ``attention``: Algorithm 4 line by line: MatMul and Add for q, k, v (lines 1-3), MatMul for
  kᵀq (line 4), Div by Sqrt(d_attn) (line 4's scale), Where(Mask, S, −inf) (line 5),
  Softmax over the keys (axis −2, line 6), MatMul v·A (line 6).
- ``mh_attention``: the opset-23 ``Attention`` operator on 3-D (batch, ℓ, H·d) projections
  with q_num_heads = kv_num_heads = H and a boolean attn_mask, then W_o; the projections are
  MatMul against each matrix the heads' W_q (W_k, W_v) stacked, as Concat in the graph.
- ``encoder_layer``, ``bert_layer``, ``gpt2_layer``: the layers (Algorithms 8 and 10) from
  LayerNormalization, Attention (is_causal = 1 for GPT-2), MatMul, Add, Relu / Gelu
  (opset 20, approximate "none").
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper

from ftspec.impls.api import Context

__all__ = ["REFERENCE_ALGORITHMS", "REFERENCE_EPS", "REFERENCE_OPSET", "evaluator"]

#: The opset of every reference graph: 23, the first with Attention and RMSNormalization.
REFERENCE_OPSET = 23
#: The ε of LayerNormalization and RMSNormalization when the attribute is left out (the standard's
#: default, onnx/defs/nn/defs.cc); the graphs here leave it out.
REFERENCE_EPS = 1e-5

In = Mapping[str, np.ndarray]
Fn = Callable[[In, In, Context], Any]

_ELEM = {"float64": TensorProto.DOUBLE, "float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}
_EVALUATORS: dict[tuple, Any] = {}
_LOCK = threading.Lock()


class _Graph:
    """A small graph builder: named inputs, nodes with fresh output names, one output."""

    def __init__(self, dtype: str, shapes: Mapping[str, tuple[int, ...]]) -> None:
        self.shapes = shapes
        self.elem = _ELEM[dtype]
        self.np = np.dtype(dtype)
        self.inputs: list[Any] = []
        self.nodes: list[Any] = []
        self.count = 0

    def input(self, name: str, elem: Any = None) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, self.elem if elem is None else elem,
                                                         self.shapes[name]))
        return name

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        self.count += 1
        out = f"t{self.count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def const(self, value: Any, dtype: Any = None) -> str:
        array = np.asarray(value, dtype=self.np if dtype is None else dtype)
        self.count += 1
        name = f"c{self.count}"
        self.nodes.append(helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(array, name)))
        return name

    def model(self, output: str, rank: int) -> onnx.ModelProto:
        """The model whose output is ``output``, of ``rank`` axes (the checker needs the rank)."""
        graph = helper.make_graph(self.nodes, "ftspec", self.inputs,
                                  [helper.make_tensor_value_info(output, self.elem, [None] * rank)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", REFERENCE_OPSET)])
        onnx.checker.check_model(model)
        return model


def evaluator(key: tuple, build: Callable[[], onnx.ModelProto]) -> Any:
    """One ``ReferenceEvaluator`` per structure."""
    from onnx.reference import ReferenceEvaluator

    with _LOCK:
        ev = _EVALUATORS.get(key)
    if ev is None:
        ev = ReferenceEvaluator(build())
        with _LOCK:
            _EVALUATORS[key] = ev
    return ev


def _swap(rank: int) -> list[int]:
    """The permutation that swaps the last two axes."""
    return list(range(rank - 2)) + [rank - 1, rank - 2]


def _rows(g: _Graph, X: str, batched: bool) -> str:
    """Canonical (…, d, ℓ) → (N, ℓ, d) (a batch of one when unbatched)."""
    R = g.op("Transpose", X, perm=_swap(3 if batched else 2))
    return R if batched else g.op("Unsqueeze", R, g.const([0], np.int64))


def _cols(g: _Graph, Y: str, batched: bool) -> str:
    """(N, ℓ, d) → canonical (…, d, ℓ)."""
    Y = Y if batched else g.op("Squeeze", Y, g.const([0], np.int64))
    return g.op("Transpose", Y, perm=_swap(3 if batched else 2))


def _linear(g: _Graph, X: str, W: str, b: str) -> str:
    """Rows (…, ℓ, d_in) → X Wᵀ + b (…, ℓ, d_out): W is out × in, as the spec stores it."""
    return g.op("Add", g.op("MatMul", X, g.op("Transpose", W, perm=[1, 0])), b)


def _stacked(g: _Graph, prefix: str, H: int, name: str) -> str:
    """The heads' ``name`` stacked head-major along axis 0 (Concat of graph inputs)."""
    return g.op("Concat", *[g.input(f"{prefix}heads.{h}.{name}") for h in range(H)], axis=0)


def _mha_rows(g: _Graph, X: str, Z: str, prefix: str, H: int, mask: str | None = None, causal: bool = False) -> str:
    """Alg. 5 on rows (N, ℓ, d) through the opset-23 Attention operator; masks [query, key]."""
    Q = _linear(g, X, _stacked(g, prefix, H, "W_q"), _stacked(g, prefix, H, "b_q"))
    K = _linear(g, Z, _stacked(g, prefix, H, "W_k"), _stacked(g, prefix, H, "b_k"))
    V = _linear(g, Z, _stacked(g, prefix, H, "W_v"), _stacked(g, prefix, H, "b_v"))
    inputs = [Q, K, V] + ([mask] if mask is not None else [])
    Y = g.op("Attention", *inputs, q_num_heads=H, kv_num_heads=H, is_causal=int(causal))
    return _linear(g, Y, g.input(prefix + "W_o"), g.input(prefix + "b_o"))


def _norm_rows(g: _Graph, X: str, k: str) -> str:
    return g.op("LayerNormalization", X, g.input(f"gamma{k}"), g.input(f"beta{k}"), axis=-1)


def _feeds(g_inputs: Sequence[str], i: In, p: In) -> dict[str, np.ndarray]:
    both = {**i, **p}
    return {name: both[name] for name in g_inputs}


def _run(key: tuple, build: Callable[[], onnx.ModelProto], i: In, p: In) -> np.ndarray:
    ev = evaluator(key, build)
    return ev.run(None, _feeds(ev.input_names, i, p))[0]


def layer_norm(i: In, p: In, ctx: Context) -> Any:
    """Alg. 6: LayerNormalization over the features of Xᵀ, ε the standard's default."""
    rank = i["X"].ndim

    def build() -> onnx.ModelProto:
        g = _graph(ctx, i, p)
        Xt = g.op("Transpose", g.input("X"), perm=_swap(rank))
        Y = g.op("LayerNormalization", Xt, g.input("gamma"), g.input("beta"), axis=-1)
        return g.model(g.op("Transpose", Y, perm=_swap(rank)), rank)

    return _run(("layer_norm", ctx.dtype, rank), build, i, p)


def rms_norm(i: In, p: In, ctx: Context) -> Any:
    """RMSnorm: RMSNormalization over the features of Xᵀ, ε the standard's default."""
    rank = i["X"].ndim

    def build() -> onnx.ModelProto:
        g = _graph(ctx, i, p)
        Xt = g.op("Transpose", g.input("X"), perm=_swap(rank))
        Y = g.op("RMSNormalization", Xt, g.input("gamma"), axis=-1)
        return g.model(g.op("Transpose", Y, perm=_swap(rank)), rank)

    return _run(("rms_norm", ctx.dtype, rank), build, i, p)


def attention(i: In, p: In, ctx: Context) -> Any:
    """Alg. 4 line by line in the column layout (module docstring)."""
    rank = i["X"].ndim
    d_attn = ctx.hyper["d_attn"]

    def build() -> onnx.ModelProto:
        g = _graph(ctx, i, p)
        X, Z, M = g.input("X"), g.input("Z"), g.input("Mask", TensorProto.BOOL)

        def proj(W: str, b: str, S: str) -> str:  # W S + b 1ᵀ, columns
            return g.op("Add", g.op("MatMul", g.input(W), S), g.op("Unsqueeze", g.input(b), g.const([-1], np.int64)))

        Q, K, V = proj("W_q", "b_q", X), proj("W_k", "b_k", Z), proj("W_v", "b_v", Z)
        S = g.op("MatMul", g.op("Transpose", K, perm=_swap(rank)), Q)  # (…, ℓ_z, ℓ_x)
        S = g.op("Div", S, g.op("Sqrt", g.const(float(d_attn))))
        S = g.op("Where", M, S, g.const(-np.inf))
        return g.model(g.op("MatMul", V, g.op("Softmax", S, axis=-2)), rank)

    return _run(("attention", ctx.dtype, rank, d_attn), build, i, p)


def mh_attention(i: In, p: In, ctx: Context) -> Any:
    """Alg. 5 through the opset-23 Attention operator (module docstring)."""
    batched, H = ctx.batched, ctx.hyper["H"]

    def build() -> onnx.ModelProto:
        g = _graph(ctx, i, p)
        X, Z = _rows(g, g.input("X"), batched), _rows(g, g.input("Z"), batched)
        M = g.op("Transpose", g.input("Mask", TensorProto.BOOL), perm=_swap(3 if batched else 2))  # [query, key]
        M = g.op("Unsqueeze", M, g.const([1] if batched else [0, 1], np.int64))  # (N|1, 1, ℓ_x, ℓ_z)
        return g.model(_cols(g, _mha_rows(g, X, Z, "", H, mask=M), batched), 3 if batched else 2)

    return _run(("mh_attention", ctx.dtype, batched, H), build, i, p)


def _layer(name: str, pre: bool, activation: str, causal: bool) -> Fn:
    io = "Z" if name == "encoder_layer" else "X"

    def fn(i: In, p: In, ctx: Context) -> Any:
        batched, H = ctx.batched, ctx.hyper["H"]

        def build() -> onnx.ModelProto:
            g = _graph(ctx, i, p)
            X = _rows(g, g.input(io), batched)  # (N, ℓ, d_e)

            def mha(Y: str) -> str:
                return _mha_rows(g, Y, Y, "attn.", H, causal=causal)

            def mlp(Y: str) -> str:
                Hid = _linear(g, Y, g.input("W_mlp1"), g.input("b_mlp1"))
                Hid = g.op("Relu", Hid) if activation == "relu" else g.op("Gelu", Hid, approximate="none")
                return _linear(g, Hid, g.input("W_mlp2"), g.input("b_mlp2"))

            if pre:  # Alg. 10 lines 5-8
                X = g.op("Add", X, mha(_norm_rows(g, X, "1")))
                X = g.op("Add", X, mlp(_norm_rows(g, X, "2")))
            else:  # Alg. 8 lines 5-8
                X = _norm_rows(g, g.op("Add", X, mha(X)), "1")
                X = _norm_rows(g, g.op("Add", X, mlp(X)), "2")
            return g.model(_cols(g, X, batched), 3 if batched else 2)

        return _run((name, ctx.dtype, batched, H), build, i, p)

    fn.__name__ = name
    return fn


def _graph(ctx: Context, i: In, p: In) -> _Graph:
    return _Graph(ctx.dtype, {k: tuple(v.shape) for k, v in {**i, **p}.items()})


REFERENCE_ALGORITHMS: dict[str, Fn] = {
    "layer_norm": layer_norm,
    "rms_norm": rms_norm,
    "attention": attention,
    "mh_attention": mh_attention,
    "encoder_layer": _layer("encoder_layer", False, "relu", False),
    "bert_layer": _layer("bert_layer", False, "gelu", False),
    "gpt2_layer": _layer("gpt2_layer", True, "gelu", True),
}

