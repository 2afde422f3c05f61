"""Exported graphs, cached per structure, and the sessions that run them.

What a user does, step by step (torch 2.13.0, onnx 1.23.2, onnxscript 0.7.2,
onnxruntime 1.32.0):

1. ``torch.onnx.export(module, args, dynamo=True, opset_version=OPSET)``:
   the dynamo exporter (torch.export, then onnxscript's torchlib), opset 20;
2. the exporter's own graph optimisation, ``optimize=True`` by default
   (``onnxscript.optimizer.optimize_ir`` then ``rewriter.onnx_fusions.fuse``,
   torch/onnx/_internal/exporter/_onnx_program.py ``ONNXProgram.optimize``);
3. for the fused plugin, ``onnxruntime.transformers.optimizer.optimize_model``
   with the model type, head count and width, at its default options
   except where an entry states otherwise (``Fusion.opt_level``);
4. ``onnxruntime.InferenceSession`` on the CPU execution provider at its
   default graph optimisation level (ORT_ENABLE_ALL), one intra-op thread.

Export (1) costs about a second per structure (``EXPORT_SECONDS`` keeps the
measurements), so it runs once per structure: the module's class, the
dtype and every shape but the symbolic axes (the batch; cached decoding's
token and cache lengths: ``dynamic_shapes``). Its result is kept unoptimised (``optimize=False``),
where every parameter is still an initializer named by its module path
(``m.self_attn.in_proj_weight``); step 2 would fold transposes into
anonymous initializers and merge equal ones, after which a parameter could
no longer be found by name. Each call then writes its own parameters into
those initializers (every parameter must be found, or the call fails: a
stale weight would otherwise pass silently) and runs steps 2-4 on the
result, so the graph a session runs is the one ``optimize=True`` would have
exported with those weights (about 0.1 s a call).

Nothing here computes the algorithm: the maths is torch.nn's as exported,
then ONNX Runtime's kernels.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Mapping, Optional, Sequence

import numpy as np

__all__ = ["OPSET", "EXPORT_SECONDS", "FUSED_OPS", "Fusion", "run_exported", "exported_model", "exported_session"]

#: The opset every graph is exported at: torch 2.13.0's dynamo exporter default (checked: the
#: exported model's ``opset_import`` is ai.onnx 20 when none is given), stated explicitly.
OPSET = 20

#: Seconds each structure's export took, {structure key: seconds} (measured, for docs/libraries.md).
EXPORT_SECONDS: dict[Hashable, float] = {}
#: The fused operators ``optimize_model`` reported per structure, {structure key: {op: count}} for
#: the counts above zero (``OnnxModel.get_fused_operator_statistics``).
FUSED_OPS: dict[Hashable, dict[str, int]] = {}

_EXPORTED: dict[Hashable, bytes] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Fusion:
    """How ``optimize_model`` is called: the model type and, where the graph has attention, the
    head count and width a user passes (0 lets the optimizer detect them)."""

    model_type: str = "bert"
    num_heads: int = 0
    hidden_size: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)
    #: ``optimize_model``'s opt_level: None is its default for the model type (1 for bert and
    #: gpt2: ONNX Runtime's basic optimisations run and are saved before the fusions), 0 skips
    #: that pass (what ``e_transformer`` needs: docs/libraries.md, "A fused BERT does not load")
    opt_level: Optional[int] = None


def _quiet() -> contextlib.ExitStack:
    """The exporter prints its progress to stdout and logs every skipped constant fold: neither is
    the plugin's to show (a worker's output would reach the user's terminal)."""
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    # ... nor the transformer optimizer's warnings (float16 on CPU, symbolic shape inference), logged
    # by loggers named after its modules: every record below ERROR is dropped while this holds
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    stack.callback(logging.disable, previous)
    return stack


def _export(module: Any, args: tuple, dynamic_shapes: Any = None) -> bytes:
    import torch

    with _quiet(), torch.no_grad():
        program = torch.onnx.export(module, args, dynamo=True, opset_version=OPSET, optimize=False,
                                    verbose=False, external_data=False, dynamic_shapes=dynamic_shapes)
    assert program is not None
    return program.model_proto.SerializeToString()


def _with_weights(blob: bytes, module: Any) -> Any:
    """The exported ModelProto with ``module``'s current parameters and buffers written into the
    initializers of the same name; every parameter must be one."""
    import onnx
    from onnx import numpy_helper

    model = onnx.ModelProto()
    model.ParseFromString(blob)
    state = {k: v.detach().cpu().numpy() for k, v in module.state_dict().items()}
    found = set()
    for init in model.graph.initializer:
        if init.name in state:
            value = state[init.name]
            old = numpy_helper.to_array(init)
            if old.shape != value.shape or old.dtype != value.dtype:
                raise RuntimeError(f"initializer {init.name}: exported {old.dtype}{old.shape}, "
                                   f"given {value.dtype}{value.shape}")
            init.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(value), init.name))
            found.add(init.name)
    # a tied parameter (GPT-2's wte and lm_head) is one tensor under several names, and the export
    # keeps one of them: it is loaded when any of its names was found
    names: dict[int, set[str]] = {}
    for k, v in module.state_dict(keep_vars=True).items():
        names.setdefault(id(v), set()).add(k)
    missing = sorted(k for k, v in module.named_parameters() if not names.get(id(v), {k}) & found)
    if missing:
        raise RuntimeError(f"exported graph has no initializer for {missing}: cannot load this call's weights")
    return model


def exported_model(key: Hashable, build: Callable[[], Any], args: tuple, dynamic_shapes: Any = None) -> Any:
    """Step 1 (cached per ``key``) and step 2 for the module ``build()`` makes with this call's
    weights: the ModelProto a user's ``torch.onnx.export(..., dynamo=True)`` gives; with
    ``dynamic_shapes`` (torch.export's, per forward argument, a mapping or a tuple) those axes are
    symbolic in the graph, so ``key`` need not hold their sizes."""
    from onnx_ir import serde
    from torch.onnx._internal.exporter._onnx_program import onnxscript_apis

    module = build()
    with _LOCK:
        blob = _EXPORTED.get(key)
    if blob is None:
        started = time.perf_counter()
        blob = _export(module, args, dynamic_shapes)
        with _LOCK:
            EXPORT_SECONDS[key] = time.perf_counter() - started
            _EXPORTED[key] = blob
    model = _with_weights(blob, module)
    with _quiet():
        ir_model = serde.deserialize_model(model)
        onnxscript_apis.optimize(ir_model)
        return serde.serialize_model(ir_model)


def _fused(key: Hashable, model: Any, fusion: Fusion) -> Any:
    """Step 3: ``optimize_model`` at its defaults for the model type unless ``fusion`` says
    otherwise (opt_level None: ORT's basic optimisations first for bert and gpt2); records which
    fused operators fired."""
    import onnx
    from onnxruntime.transformers import optimizer  # type: ignore[import-untyped]
    from onnxruntime.transformers.fusion_options import FusionOptions  # type: ignore[import-untyped]

    options = FusionOptions(fusion.model_type)
    for name, value in fusion.options.items():
        setattr(options, name, value)
    # Given a ModelProto, optimize_model's ORT pass (opt_level 1) hands every initializer's data to
    # the session as an external initializer (``extract_raw_data_from_model``), and ORT's shape
    # inference then cannot read a Reshape's shape: "Cannot parse data from external tensors"
    # (onnxruntime 1.32.0). A model file, the path users take, works.
    with _quiet(), tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        onnx.save(model, path)
        optimized = optimizer.optimize_model(path, model_type=fusion.model_type, num_heads=fusion.num_heads,
                                             hidden_size=fusion.hidden_size, optimization_options=options,
                                             opt_level=fusion.opt_level, use_gpu=False)
    stats = {op: n for op, n in optimized.get_fused_operator_statistics().items() if n}
    with _LOCK:
        FUSED_OPS[key] = stats
    return optimized.model


def session(model: Any) -> Any:
    """Step 4: a CPU session at ORT's default optimisation level, one thread (the machine is
    shared; one thread also keeps the reduction order fixed from call to call)."""
    import onnxruntime as ort  # type: ignore[import-untyped]

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 4  # fatal only: a kernel's error is raised, not also printed
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def exported_session(key: Hashable, build: Callable[[], Any], args: tuple, fusion: Optional[Fusion] = None,
                     dynamic_shapes: Any = None) -> Any:
    """Export (cached), load this call's weights, optimise, fuse when ``fusion`` is given: the
    session (steps 1-4), for a caller that runs it more than once (``cached_decoding``)."""
    model = exported_model(key, build, args, dynamic_shapes)
    if fusion is not None:
        model = _fused(key, model, fusion)
    return session(model)


def run_exported(key: Hashable, build: Callable[[], Any], args: tuple, feeds: Sequence[np.ndarray],
                 fusion: Optional[Fusion] = None, dynamic_shapes: Any = None) -> np.ndarray:
    """Export (cached), load this call's weights, optimise, fuse when ``fusion`` is given, and run
    the graph on ``feeds`` (in the order of the graph's inputs); the first output."""
    sess = exported_session(key, build, args, fusion, dynamic_shapes)
    names = [i.name for i in sess.get_inputs()]
    if len(names) != len(feeds):
        raise RuntimeError(f"graph inputs {names}, given {len(feeds)} arrays")
    return sess.run(None, dict(zip(names, feeds)))[0]
