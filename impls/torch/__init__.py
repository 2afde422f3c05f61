"""The PyTorch implementation of the formal algorithms (plugin ``torch``).

Written the way PyTorch code is written: sequences in PyTorch's native row
layout (batch, seq, features), ``F.linear`` with out × in weights (the
paper's orientation), ``F.layer_norm``/``F.rms_norm``, ``F.gelu``,
``torch.softmax``, heads packed into one projection and batched over, and
``F.scaled_dot_product_attention`` where its definition is the variant's.
The conversion to and from the spec's canonical layout (tokens are columns,
Mask indexed [t_z, t_x]) lives in one module, ``adapter``.

Modules: ``adapter`` (layouts and parameter packing), ``components``
(Alg. 1-7, with RoPE and grouped-query attention inside Alg. 4-5, and the
key/value-cache self-attention), ``layers`` (Alg. 8-10 layers, with
padding masks), ``architectures`` (Alg. 8-10, up to the logits, and Alg. 10
decoded with a key/value cache), ``models`` (flat parameters → architectures),
``training`` (Alg. 11-13: ``F.cross_entropy`` losses summed over
positions, ``torch.autograd.grad`` gradients, SGD loops), ``inference``
(Alg. 14-15: inverse-CDF sampling with ``cumsum`` + ``searchsorted``),
``entries`` (the registry calling convention).

Precision: importing this plugin sets ``torch.set_float32_matmul_precision(
"highest")`` and turns TF32 off for CUDA matmuls and cuDNN, so float32
matrix products are full float32 (``precision="highest"``). TF32 would be a
separate, named precision tier with its own tolerances, not this plugin.
These are process-wide PyTorch settings.

Threads: importing this plugin sets ``torch.set_num_threads`` to
``FTSPEC_TORCH_THREADS`` (default 1). Conformance cases are tiny tensors, for
which waking an intra-op thread pool costs far more than the arithmetic:
measured on a loaded 2-core machine, one DTransformer call took 253 ms with
PyTorch's default 2 threads and 2 ms with 1.

Dtypes: float64, float32, bfloat16 and float16 are computed in that dtype,
with whatever internal accumulation PyTorch's kernels use (e.g. float32
opmath for half types). The fixed sinusoid tables are built in float64 and
rounded once to the call's dtype.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from ftspec.impls.api import FLOAT_DTYPES, Implementation

from .entries import ALGORITHMS as _ENTRIES
from .moe import moe_mlp

#: the registry entries: entries.py's, and the mixture-of-experts MLP (moe.py, spec 2.11)
ALGORITHMS = {**_ENTRIES, "moe_mlp": moe_mlp}

__all__ = ["devices", "from_numpy", "implementation", "to_numpy"]

torch.set_float32_matmul_precision("highest")
torch.set_num_threads(int(os.environ.get("FTSPEC_TORCH_THREADS", "1")))
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

_DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "int64": torch.int64,
    "bool": torch.bool,
}


def devices() -> list[str]:
    """The devices this process can use: cpu, each CUDA device, and mps."""
    out = ["cpu"]
    if torch.cuda.is_available():
        out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append("mps")
    return out


def from_numpy(array, dtype: str, device: str) -> torch.Tensor:
    """A NumPy array → a tensor of ``dtype`` on ``device``.

    Converted on the CPU first: MPS has no float64, and the values are
    exactly representable in ``dtype`` anyway, so the cast is exact. The
    array is copied (C order; 0-d stays 0-d), so the tensor never aliases
    the caller's buffer."""
    if dtype not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(_DTYPES)}")
    t = torch.from_numpy(np.array(array, copy=True, order="C")).to(dtype=_DTYPES[dtype])
    return t.to(device=device)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor → a NumPy array, value for value (bfloat16 upcast to float32)."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy()


implementation = Implementation(
    name="torch",
    version=f"0.1.0+torch{torch.__version__}",
    algorithms=ALGORITHMS,
    dtypes=FLOAT_DTYPES,
    devices=devices,
    from_numpy=from_numpy,
    to_numpy=to_numpy,
    variants="all",
    precision="highest",
    description="PyTorch: native (batch, seq, features) layout behind a tested adapter; F.linear, "
                "F.layer_norm, SDPA",
    extra={"torch": torch.__version__},
)
