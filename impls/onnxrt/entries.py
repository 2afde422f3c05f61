"""The registry entries of ``onnxruntime`` and ``onnxruntime-fused``: torch.nn modules a user
would export, holding ftspec's parameters, exported and run by ONNX Runtime (``graphs``).

The modules are the ones the ``torch-nn`` and ``torch-nn-layers`` plugins call (torch 2.13.0,
nn/modules/normalization.py LayerNorm, nn/modules/activation.py MultiheadAttention,
nn/functional.py scaled_dot_product_attention, nn/modules/transformer.py
TransformerEncoderLayer), loaded by the same adapter (``ftspec.impls.torch_nn.adapter``), in
torch's row layout with a batch axis (an unbatched call is a batch of one). Each exported graph
takes the call's inputs as its graph inputs, in the module's layout; the weights are
initializers. The whole models are Hugging Face's (transformers 5.24.0, GPT2LMHeadModel and
BertForMaskedLM; LlamaRMSNorm, LlamaAttention, LlamaDecoderLayer and LlamaForCausalLM), built
and loaded by ``ftspec.impls.hf.adapter``. Only the Llama entries read ``ctx.variant``: its ε,
RoPE base and kv_group configure the model (``adapter.llama_config``), as in the
``transformers`` plugin.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ftspec.impls.api import Context
from ftspec.impls.torch_nn import adapter as A

from .graphs import Fusion, exported_session, run_exported

__all__ = ["algorithms", "LAYER_EPS", "E_TRANSFORMER_OPT_LEVEL", "STATIC_BATCH"]

In = Mapping[str, np.ndarray]
Fn = Callable[[In, In, Context], Any]
#: ``optimize_model``'s opt_level for the fused BertForMaskedLM: its default (None: 1, ONNX
#: Runtime's basic pass before the fusions). On a graph with a fixed batch axis ONNX Runtime 1.32.0
#: refuses to load the result at ORT_ENABLE_EXTENDED and above (its MatMulAddFusion adds an
#: initializer whose name the saved graph already holds: "Attempt to replace the existing
#: tensor"), always at L = 1 (docs/libraries.md gives the reproduction), and the plugin used 0
#: (no ORT pass); with the symbolic batch axis (``_run``) the default's graph loads
E_TRANSFORMER_OPT_LEVEL: Optional[int] = None
#: torch.nn.LayerNorm's default ε, the one every module here has (exported as the
#: LayerNormalization node's ``epsilon`` attribute)
LAYER_EPS = 1e-5


def _t(p: In, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(np.array(v, copy=True)).to(dtype) for k, v in p.items()}


def _rows(X: np.ndarray, batched: bool) -> np.ndarray:
    """Canonical (…, d, ℓ) → (N, ℓ, d), a batch of one when unbatched."""
    R = np.swapaxes(X, -1, -2)
    return np.ascontiguousarray(R if batched else R[None])


def _cols(Y: np.ndarray, batched: bool) -> np.ndarray:
    """(N, ℓ, d) → canonical (…, d, ℓ)."""
    return np.swapaxes(Y if batched else Y[0], -1, -2)


def _key(name: str, ctx: Context, *arrays: np.ndarray) -> tuple:
    """A structure: the entry, the dtype, every size (they fix the parameters' shapes) and every
    graph input's shape but its batch axis (symbolic in the graph: ``_run``)."""
    return (name, ctx.dtype, tuple(sorted(ctx.hyper.items()))) + tuple(a.shape[1:] for a in arrays)


#: The batch axis of every exported graph, symbolic (``torch.export.Dim``): one export serves an
#: unbatched call (a batch of one) and a batch of any size
_MAX_BATCH = 4096


#: (entry, dtype) whose graph keeps a fixed batch axis, one export per batch size: with a symbolic
#: batch axis, ONNX Runtime 1.32.0 crashes (SIGSEGV) creating the session at its default level,
#: inside NchwcTransformer (the session loads with it disabled, or at ORT_ENABLE_EXTENDED), for
#: the float16 exports of MultiheadAttention and the causal pre-LN encoder layer (docs/libraries.md)
STATIC_BATCH = frozenset({("mh_attention", "float16"), ("gpt2_layer", "float16")})


def _run(key: tuple, build: Callable[[], nn.Module], feeds: list[np.ndarray], fusion: Optional[Fusion],
         per_row: Optional[tuple[int, ...]] = None) -> np.ndarray:
    """``run_exported`` with axis 0 of every graph input symbolic, N (``per_row[k]`` · N for input
    k: MultiheadAttention's (N·H, ℓ_x, ℓ_z) mask). Traced at a batch of two, each input repeated:
    torch.export specialises an axis of size 1 (its 0/1 specialisation), so a batch of one would
    fix N = 1 in the graph. ``STATIC_BATCH``: exported at the call's own shapes instead."""
    if key[:2] in STATIC_BATCH:
        return run_exported(key + tuple(f.shape[0] for f in feeds), build,
                            tuple(torch.from_numpy(f) for f in feeds), feeds, fusion)
    # not named "N": a derived dim's name goes through sympy, where N is a function (numeric eval)
    N = torch.export.Dim("batch", min=1, max=_MAX_BATCH)
    rows = per_row or (1,) * len(feeds)
    traced = tuple(torch.from_numpy(np.ascontiguousarray(np.concatenate([f, f]))) for f in feeds)
    shapes = tuple({0: N if r == 1 else N * r} for r in rows)
    return run_exported(key, build, traced, feeds, fusion, dynamic_shapes=shapes)


class _LayerNorm(nn.Module):
    def __init__(self, d_e: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.m = nn.LayerNorm(d_e, eps=LAYER_EPS, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.m(x)


class _Attention(nn.Module):
    """Algorithm 4 as torch code is written: three ``nn.Linear`` and
    ``F.scaled_dot_product_attention`` with a boolean mask [query, key], True = may attend."""

    def __init__(self, d_x: int, d_z: int, d_attn: int, d_out: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.q = nn.Linear(d_x, d_attn, dtype=dtype)
        self.k = nn.Linear(d_z, d_attn, dtype=dtype)
        self.v = nn.Linear(d_z, d_out, dtype=dtype)

    def forward(self, x: torch.Tensor, z: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # one head axis: the exporter translates 4-D SDPA only (torchlib asserts "only 4D query,
        # key, and value are supported")
        q, k, v = (t.unsqueeze(1) for t in (self.q(x), self.k(z), self.v(z)))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.unsqueeze(1)).squeeze(1)


class _MHA(nn.Module):
    """``nn.MultiheadAttention(..., need_weights=False)`` with a boolean attn_mask, True = blocked,
    (N·H, ℓ_x, ℓ_z)."""

    def __init__(self, d_x: int, d_z: int, H: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.m = nn.MultiheadAttention(d_x, H, kdim=d_z, vdim=d_z, batch_first=True, dtype=dtype)

    def forward(self, x: torch.Tensor, z: torch.Tensor, blocked: torch.Tensor) -> torch.Tensor:
        return self.m(x, z, z, attn_mask=blocked, need_weights=False)[0]


class _Layer(nn.Module):
    """``nn.TransformerEncoderLayer`` (dropout 0, batch_first), with the causal src_mask built
    inside forward (what a GPT-style model does) when ``causal``."""

    def __init__(self, d_e: int, H: int, d_mlp: int, norm_first: bool, activation: str, causal: bool,
                 dtype: torch.dtype) -> None:
        super().__init__()
        self.causal = causal
        self.m = nn.TransformerEncoderLayer(d_e, H, dim_feedforward=d_mlp, dropout=0.0, activation=activation,
                                            layer_norm_eps=LAYER_EPS, batch_first=True, norm_first=norm_first,
                                            dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ell = x.shape[-2]
        mask = torch.ones(ell, ell, dtype=torch.bool).triu(1) if self.causal else None  # True = blocked
        return self.m(x, src_mask=mask)


def _fusion(fused: bool, model_type: str = "bert", H: int = 0, hidden: int = 0) -> Optional[Fusion]:
    return Fusion(model_type, H, hidden) if fused else None


def _layer_norm(fused: bool) -> Fn:
    def layer_norm(i: In, p: In, ctx: Context) -> Any:
        """Alg. 6 via ``nn.LayerNorm(d_e)`` (ε 1e-5), exported: one LayerNormalization node."""
        dt = getattr(torch, ctx.dtype)
        X = _rows(i["X"], ctx.batched)  # (N, ℓ, d_e)

        def build() -> nn.Module:
            m = _LayerNorm(ctx.hyper["d_e"], dt)
            A.load_norm(m.m, _t(p, dt))
            return m.train(False)  # eval mode: no dropout

        Y = _run(_key("layer_norm", ctx, X), build, [X], _fusion(fused))
        return _cols(Y, ctx.batched)
    return layer_norm


def _attention(fused: bool) -> Fn:
    def attention(i: In, p: In, ctx: Context) -> Any:
        """Alg. 4: ``nn.Linear`` projections and SDPA with a boolean mask, exported."""
        dt = getattr(torch, ctx.dtype)
        X, Z = _rows(i["X"], ctx.batched), _rows(i["Z"], ctx.batched)  # (N, ℓ_x, d_x), (N, ℓ_z, d_z)
        M = np.ascontiguousarray(_rows(i["Mask"], ctx.batched))  # (N, ℓ_x, ℓ_z): [query, key], True = may attend
        h = ctx.hyper

        def build() -> nn.Module:
            m = _Attention(h["d_x"], h["d_z"], h["d_attn"], h["d_out"], dt)
            w = _t(p, dt)
            for lin, n in ((m.q, "q"), (m.k, "k"), (m.v, "v")):
                A.load_linear(lin, w[f"W_{n}"], w[f"b_{n}"])
            return m.train(False)  # eval mode: no dropout

        Y = _run(_key("attention", ctx, X, Z, M), build, [X, Z, M], _fusion(fused))
        return _cols(Y, ctx.batched)
    return attention


def _mh_attention(fused: bool) -> Fn:
    def mh_attention(i: In, p: In, ctx: Context) -> Any:
        """Alg. 5: ``nn.MultiheadAttention(..., need_weights=False)``, exported."""
        dt = getattr(torch, ctx.dtype)
        h = ctx.hyper
        X, Z = _rows(i["X"], ctx.batched), _rows(i["Z"], ctx.batched)
        M = i["Mask"] if ctx.batched else i["Mask"][None]  # (N, ℓ_z, ℓ_x)
        blocked = np.ascontiguousarray(
            np.repeat(~np.swapaxes(M, -1, -2), h["H"], axis=0))  # (N·H, ℓ_x, ℓ_z), True = blocked

        def build() -> nn.Module:
            m = _MHA(h["d_x"], h["d_z"], h["H"], dt)
            A.copy_mha(m.m, _t(p, dt), h["H"])
            return m.train(False)  # eval mode: no dropout

        Y = _run(_key("mh_attention", ctx, X, Z, blocked), build, [X, Z, blocked],
                 _fusion(fused, "bert", h["H"], h["d_x"]), per_row=(1, 1, h["H"]))
        return _cols(Y, ctx.batched)
    return mh_attention


def _layer(name: str, norm_first: bool, activation: str, causal: bool, fused: bool) -> Fn:
    io = "Z" if name == "encoder_layer" else "X"

    def fn(i: In, p: In, ctx: Context) -> Any:
        dt = getattr(torch, ctx.dtype)
        h = ctx.hyper
        X = _rows(i[io], ctx.batched)  # (N, ℓ, d_e)

        def build() -> nn.Module:
            m = _Layer(h["d_e"], h["H"], h["d_mlp"], norm_first, activation, causal, dt)
            w = _t(p, dt)
            A.copy_mha(m.m.self_attn, A.sub(w, "attn."), h["H"])
            A.load_norm(m.m.norm1, {"gamma": w["gamma1"], "beta": w["beta1"]})
            A.load_norm(m.m.norm2, {"gamma": w["gamma2"], "beta": w["beta2"]})
            A.load_linear(m.m.linear1, w["W_mlp1"], w["b_mlp1"])
            A.load_linear(m.m.linear2, w["W_mlp2"], w["b_mlp2"])
            return m.train(False)  # eval mode: no dropout

        Y = _run(_key(name, ctx, X), build, [X], _fusion(fused, "bert", h["H"], h["d_e"]))
        return _cols(Y, ctx.batched)

    fn.__name__ = name
    fn.__doc__ = (f"nn.TransformerEncoderLayer(norm_first={norm_first}, activation={activation!r})"
                  f"{' with a causal src_mask' if causal else ''}, exported.")
    return fn


class _GPT2(nn.Module):
    """Hugging Face ``GPT2LMHeadModel`` (its default attention, "sdpa") and the softmax over the
    vocabulary a user of its logits applies: P, Algorithm 10's output, as one exported graph."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        from transformers import GPT2LMHeadModel

        self.m = GPT2LMHeadModel(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.m(input_ids=x, use_cache=False).logits, dim=-1)


def _d_transformer(fused: bool) -> Fn:
    def d_transformer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 10: ``GPT2LMHeadModel`` (transformers, randomly initialised from a tiny config, then
        loaded with ftspec's parameters by ``ftspec.impls.hf.adapter``), exported with its softmax.
        Fused with model type "bert": "gpt2" raises IndexError in ``Gpt2OnnxModel.postprocess`` on
        this export (its lm_head Gemm has no bias input; onnxruntime 1.32.0)."""
        from ftspec.impls.hf import adapter as HA

        dt = getattr(torch, ctx.dtype)
        h = ctx.hyper
        x = np.ascontiguousarray(i["x"] if ctx.batched else i["x"][None])  # (N, ℓ) token IDs
        # ONNX Gather takes a negative index from the back (the standard's Gather), so the graph
        # embeds token −1 as token N_V − 1 where torch raises: refused here, at the boundary, as a
        # server in front of the graph must (docs/libraries.md); IDs ≥ N_V make ORT raise anyway
        HA.check_tokens(torch.from_numpy(x), h)

        def build() -> nn.Module:
            m = _GPT2(HA.gpt2_config(h, "sdpa"))
            HA.load(m.m, HA.gpt2_lm_weights(_t(p, dt), h["L"], h["H"]), dt, "cpu")
            return m.train(False)  # eval mode: no dropout

        P = _run(_key("d_transformer", ctx, x), build, [x], _fusion(fused, "bert", h["H"], h["d_e"]))  # (N, ℓ, N_V)
        return _cols(P, ctx.batched)
    return d_transformer


class _Bert(nn.Module):
    """Hugging Face ``BertForMaskedLM`` (default "sdpa" attention) and the softmax over the
    vocabulary: P, Algorithm 9's output, as one exported graph."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        from transformers import BertForMaskedLM

        self.m = BertForMaskedLM(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.m(input_ids=x).logits, dim=-1)


def _e_transformer(fused: bool) -> Fn:
    def e_transformer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 9: ``BertForMaskedLM`` (tiny config, ftspec's parameters loaded by
        ``ftspec.impls.hf.adapter``), exported with its softmax; fused with model type "bert" at
        ``E_TRANSFORMER_OPT_LEVEL``."""
        from ftspec.impls.hf import adapter as HA

        dt = getattr(torch, ctx.dtype)
        h = ctx.hyper
        x = np.ascontiguousarray(i["x"] if ctx.batched else i["x"][None])  # (N, ℓ) token IDs
        HA.check_tokens(torch.from_numpy(x), h)  # Gather reads −1 from the back (d_transformer)

        def build() -> nn.Module:
            m = _Bert(HA.bert_config(h, "sdpa"))
            HA.load(m.m, HA.bert_mlm_weights(_t(p, dt), h["L"], h["H"]), dt, "cpu")
            return m.train(False)  # eval mode: no dropout

        fusion = Fusion("bert", h["H"], h["d_e"], opt_level=E_TRANSFORMER_OPT_LEVEL) if fused else None
        P = _run(_key("e_transformer", ctx, x), build, [x], fusion)  # (N, ℓ, N_V)
        return _cols(P, ctx.batched)
    return e_transformer


# --------------------------------------------------------------------------
# Hugging Face Llama (transformers 5.24.0, models/llama/modeling_llama.py), built as the
# ``transformers-sdpa`` plugin builds it (``ftspec.impls.hf.adapter.llama_config``: the declared
# set's ε, rope_base and kv_group; its default attention, "sdpa")
# --------------------------------------------------------------------------

def _llama_key(name: str, ctx: Context, *arrays: np.ndarray) -> tuple:
    """``_key`` plus what a Llama config takes from the declared set: the kv heads (they fix the
    k/v weights' shapes), ε and the RoPE base (both constants of the exported graph)."""
    v = ctx.variant
    return _key(name, ctx, *arrays) + (v.kv_group, v.epsilon, v.rope_base)


def _pad(i: In, batched: bool) -> np.ndarray:
    """The 2-D attention mask a tokenizer returns, (N, ℓ) int64: 1 = a token, 0 = padding."""
    pad = np.asarray(i["pad"]).astype(np.int64)
    return np.ascontiguousarray(pad if batched else pad[None])


class _LlamaRMSNorm(nn.Module):
    def __init__(self, d_e: int, eps: float) -> None:
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaRMSNorm

        self.m = LlamaRMSNorm(d_e, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.m(x)


class _LlamaBlock(nn.Module):
    """``LlamaAttention`` or ``LlamaDecoderLayer`` called as ``LlamaModel.forward`` calls it:
    (cos, sin) from ``LlamaRotaryEmbedding`` at positions 0 … ℓ−1 and the causal ∧ padding mask
    from ``create_causal_mask`` with the 2-D padding mask, both computed inside the graph."""

    def __init__(self, block: nn.Module, config: Any) -> None:
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

        self.config = config
        self.block = block
        # built after the block was cast: inv_freq stays float32, as the library makes it
        self.rotary = LlamaRotaryEmbedding(config)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        from transformers.masking_utils import create_causal_mask

        positions = torch.arange(x.shape[1]).unsqueeze(0)  # (1, ℓ)
        mask = create_causal_mask(config=self.config, inputs_embeds=x, attention_mask=pad, cache=None,
                                  position_ids=positions)
        out = self.block(x, attention_mask=mask, position_embeddings=self.rotary(x, positions))
        return out[0] if isinstance(out, tuple) else out  # LlamaAttention returns (output, weights)


class _LlamaLM(nn.Module):
    """``LlamaForCausalLM(input_ids, attention_mask=pad)`` and the softmax over the vocabulary: P,
    Algorithm 10's output with padding, as one exported graph."""

    def __init__(self, config: Any, dtype: torch.dtype) -> None:
        super().__init__()
        from transformers import LlamaForCausalLM

        # built in its dtype (as the transformers plugin does): RoPE's inv_freq stays float32
        self.m = LlamaForCausalLM._from_config(config, dtype=dtype)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.m(input_ids=x, attention_mask=pad, use_cache=False).logits, dim=-1)


def _llama_fusion(fused: bool, h: Mapping[str, int]) -> Optional[Fusion]:
    """Model type "gpt2": what ONNX Runtime's own Llama exporter passes to ``optimize_model``
    (onnxruntime/transformers/models/llama/convert_to_onnx.py); "qwen3" (opt_level 0) and "bert"
    fire the same fusions on these graphs (docs/libraries.md)."""
    return Fusion("gpt2", h["H"], h["d_e"]) if fused else None


def _llama_rms_norm(fused: bool) -> Fn:
    def rms_norm(i: In, p: In, ctx: Context) -> Any:
        """RMSnorm via ``LlamaRMSNorm(d_e, eps=ε)`` (computes in float32 whatever its dtype),
        exported."""
        dt = getattr(torch, ctx.dtype)
        X = _rows(i["X"], ctx.batched)  # (N, ℓ, d_e)

        def build() -> nn.Module:
            m = _LlamaRMSNorm(ctx.hyper["d_e"], ctx.variant.epsilon).to(dt)
            with torch.no_grad():
                m.m.weight.copy_(torch.from_numpy(np.array(p["gamma"], copy=True)).to(dt))
            return m.train(False)

        Y = _run(_llama_key("llama_rms_norm", ctx, X), build, [X], _llama_fusion(fused, {"H": 0, "d_e": 0}))
        return _cols(Y, ctx.batched)
    return rms_norm


def _llama_block(name: str, fused: bool) -> Fn:
    layer = name == "padded_gpt2_layer"

    def fn(i: In, p: In, ctx: Context) -> Any:
        from transformers.models.llama.modeling_llama import LlamaAttention, LlamaDecoderLayer

        from ftspec.impls.hf import adapter as HA

        dt = getattr(torch, ctx.dtype)
        h, v = ctx.hyper, ctx.variant
        X = _rows(i["X"], ctx.batched)  # (N, ℓ, d_e)
        pad = _pad(i, ctx.batched)

        def build() -> nn.Module:
            config = HA.llama_config(h, "sdpa", v)
            w = _t(p, dt)
            if layer:
                block: nn.Module = LlamaDecoderLayer(config, layer_idx=0)
                weights = HA.llama_attention_weights(w, h["H"], v.kv_group, "attn.", "self_attn.") | {
                    "input_layernorm.weight": w["gamma1"], "post_attention_layernorm.weight": w["gamma2"],
                    "mlp.gate_proj.weight": w["W_mlp1"], "mlp.up_proj.weight": w["W_mlp1_lin"],
                    "mlp.down_proj.weight": w["W_mlp2"]}
            else:
                block = LlamaAttention(config, layer_idx=0)
                weights = HA.llama_attention_weights(w, h["H"], v.kv_group)
            HA.load(block, weights, dt, "cpu")
            return _LlamaBlock(block, config).train(False)

        Y = _run(_llama_key(name, ctx, X, pad), build, [X, pad], _llama_fusion(fused, h))
        return _cols(Y, ctx.batched)

    fn.__name__ = name
    fn.__doc__ = (f"{'LlamaDecoderLayer' if layer else 'LlamaAttention'} (sdpa) with RoPE at positions "
                  "0 … ℓ−1 and create_causal_mask's causal ∧ padding mask, exported.")
    return fn


def _llama_lm(fused: bool) -> Fn:
    def padded_d_transformer(i: In, p: In, ctx: Context) -> Any:
        """Alg. 10 with padding: ``LlamaForCausalLM(input_ids, attention_mask=pad)`` (sdpa;
        positions are the column indexes, the model's default), exported with its softmax."""
        from ftspec.impls.hf import adapter as HA

        dt = getattr(torch, ctx.dtype)
        h, v = ctx.hyper, ctx.variant
        x = np.ascontiguousarray(i["x"] if ctx.batched else i["x"][None])  # (N, ℓ) token IDs
        HA.check_tokens(torch.from_numpy(x), h)  # Gather reads −1 from the back (d_transformer)
        pad = _pad(i, ctx.batched)

        def build() -> nn.Module:
            m = _LlamaLM(HA.llama_config(h, "sdpa", v), dt)
            HA.load(m.m, HA.llama_lm_weights(_t(p, dt), h["L"], h["H"], v.kv_group), dt, "cpu", cast=False)
            return m.train(False)

        P = _run(_llama_key("padded_d_transformer", ctx, x, pad), build, [x, pad],
                         _llama_fusion(fused, h))  # (N, ℓ, N_V)
        return _cols(P, ctx.batched)
    return padded_d_transformer


class _LlamaStep(nn.Module):
    """One call of ``generate``'s loop as a graph: ``LlamaForCausalLM(ids, past_key_values=cache,
    use_cache=True)`` with the cache given as tensors, past keys and values (L, 1, kv heads, p,
    d_head), and returned as the present ones (p + s positions) beside the softmax over the
    vocabulary. The cache is a ``DynamicCache`` filled from the past tensors inside forward, so the
    model takes its positions (p … p+s−1) and its causal mask from the cache's length, as
    ``generate`` has it. The prefill is the same graph with p = 0 (the sequence and past axes are
    symbolic: one export serves the prefill and every step)."""

    def __init__(self, config: Any, dtype: torch.dtype) -> None:
        super().__init__()
        from transformers import LlamaForCausalLM

        self.m = LlamaForCausalLM._from_config(config, dtype=dtype)

    def forward(self, ids: torch.Tensor, past_k: torch.Tensor, past_v: torch.Tensor) -> tuple:
        from transformers import DynamicCache

        cache = DynamicCache(config=self.m.config)
        for layer in range(past_k.shape[0]):
            cache.update(past_k[layer], past_v[layer], layer)
        logits = self.m(input_ids=ids, past_key_values=cache, use_cache=True).logits
        keys = torch.stack([c.keys for c in cache.layers])
        values = torch.stack([c.values for c in cache.layers])
        return torch.softmax(logits, dim=-1), keys, values


def _cached_decoding(fused: bool) -> Fn:
    def cached_decoding(i: In, p: In, ctx: Context) -> Any:
        """Alg. 10 as ``generate`` runs it, exported (``_LlamaStep``): the prefill x[:n] with an
        empty cache (p = 0), then each later token alone with the keys and values the previous
        run returned, the session kept between runs. One export per structure; the token count
        and the cache length are symbolic axes (torch.export ``Dim``)."""
        from ftspec.impls.hf import adapter as HA

        dt = getattr(torch, ctx.dtype)
        h, v = ctx.hyper, ctx.variant
        xs = np.asarray(i["x"]).astype(np.int64).reshape(-1, np.shape(i["x"])[-1])  # (B, ℓ)
        ns = np.asarray(i["n_prefill"]).astype(np.int64).reshape(-1)  # (B,)
        HA.check_tokens(torch.from_numpy(xs), h)  # Gather reads −1 from the back (d_transformer)
        ell = xs.shape[-1]
        for n in ns.tolist():
            if not 1 <= n <= ell:
                raise ValueError(f"n_prefill: {n} tokens to prefill of a sequence of {ell}")
        config = HA.llama_config(h, "sdpa", v)
        past = (h["L"], 1, config.num_key_value_heads, 3, config.head_dim)  # traced at p = 3, s = 2

        def build() -> nn.Module:
            m = _LlamaStep(config, dt)
            HA.load(m.m, HA.llama_lm_weights(_t(p, dt), h["L"], h["H"], v.kv_group), dt, "cpu", cast=False)
            return m.train(False)

        s, t = torch.export.Dim("s", min=1, max=4096), torch.export.Dim("p", min=0, max=4096)
        args = (torch.zeros((1, 2), dtype=torch.int64), torch.zeros(past, dtype=dt), torch.zeros(past, dtype=dt))
        # ℓ and every input shape are symbolic: the key holds the sizes that fix the parameters
        sizes = {k: n_ for k, n_ in h.items() if k != "ell"}
        key = ("cached_decoding", ctx.dtype, tuple(sorted(sizes.items())), v.kv_group, v.epsilon, v.rope_base)
        sess = exported_session(key, build, args, _llama_fusion(fused, h),
                                dynamic_shapes={"ids": {1: s}, "past_k": {3: t}, "past_v": {3: t}})
        out = []
        # batching is not declared (__init__._LIMITS); were it, each sequence would be decoded alone
        for x, n in zip(xs, ns.tolist()):
            K = np.zeros(past[:3] + (0, past[4]), dtype=_np_dtype(ctx.dtype))  # the empty cache: p = 0
            V = K.copy()
            columns = []
            for lo, hi in [(0, n)] + [(t_, t_ + 1) for t_ in range(n, ell)]:
                P, K, V = sess.run(None, {"ids": x[None, lo:hi], "past_k": K, "past_v": V})  # P: (1, hi − lo, N_V)
                columns.append(P[0])
            if K.shape[3] != ell:
                raise RuntimeError(f"onnxrt: the cache holds {K.shape[3]} positions, not {ell}")
            out.append(np.swapaxes(np.concatenate(columns), -1, -2))  # (N_V, ℓ)
        return np.stack(out) if ctx.batched else out[0]
    return cached_decoding


def _np_dtype(dtype: str) -> Any:
    return {"float64": np.float64, "float32": np.float32, "float16": np.float16}[dtype]


def algorithms(fused: bool) -> dict[str, Fn]:
    """The entries of one plugin: the torch.nn graphs, fused by ``optimize_model`` or not."""
    return {
        "layer_norm": _layer_norm(fused),
        "attention": _attention(fused),
        "mh_attention": _mh_attention(fused),
        "encoder_layer": _layer("encoder_layer", False, "relu", False, fused),
        "bert_layer": _layer("bert_layer", False, "gelu", False, fused),
        "gpt2_layer": _layer("gpt2_layer", True, "gelu", True, fused),
        "d_transformer": _d_transformer(fused),
        "e_transformer": _e_transformer(fused),
        "rms_norm": _llama_rms_norm(fused),
        "padded_causal_self_attention": _llama_block("padded_causal_self_attention", fused),
        "padded_gpt2_layer": _llama_block("padded_gpt2_layer", fused),
        "padded_d_transformer": _llama_lm(fused),
        "cached_decoding": _cached_decoding(fused),
    }
