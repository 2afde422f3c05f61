"""The boundary that the library plugins built on PyTorch share (``hf``: Hugging Face transformers,
``torch_nn``: torch.nn itself): the dtypes by name, the devices, the NumPy ↔ tensor copies, and
the process settings they run under.

Only the crossing between the harness's NumPy arrays and the library's tensors lives here: the
maths of each plugin stays its library's. The bundled ``torch`` plugin keeps its own copy on
purpose (the bundled implementations import nothing from each other, docs/development.md).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

#: the dtypes a case names, as torch dtypes (int64 token ids, bool masks)
DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
          "float16": torch.float16, "int64": torch.int64, "bool": torch.bool}


def configure() -> None:
    """Threads and precision as in the ``torch`` plugin: one intra-op thread by default
    (``FTSPEC_TORCH_THREADS``: cases are tiny, and more threads only contend), and float32
    matmuls at "highest" (no TF32: a float32 result is a float32 computation)."""
    torch.set_float32_matmul_precision("highest")
    torch.set_num_threads(int(os.environ.get("FTSPEC_TORCH_THREADS", "1")))


def devices() -> list[str]:
    """cpu, and each CUDA device when there is one."""
    out = ["cpu"]
    if torch.cuda.is_available():
        out += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return out


def from_numpy(array: Any, dtype: str, device: str) -> torch.Tensor:
    """A NumPy array → a fresh tensor of ``dtype`` on ``device`` (exact: the
    harness sends values representable in ``dtype``)."""
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPES)}")
    return torch.from_numpy(np.array(array, copy=True, order="C")).to(dtype=DTYPES[dtype], device=device)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor → NumPy, value for value (bfloat16 upcast to float32)."""
    t = t.detach().cpu()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()
