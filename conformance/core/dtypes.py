"""Floating-point formats: rounding NumPy data into them, and their constants.

bfloat16 is not a NumPy dtype; values rounded to it are carried in float64
(or float32) arrays, which hold them exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FORMATS", "Format", "round_to"]


@dataclass(frozen=True)
class Format:
    name: str
    mantissa_bits: int  # significand precision p, implicit bit included
    max: float  # largest finite value
    tiny: float  # smallest positive normal
    numpy: str  # NumPy dtype that carries it exactly

    @property
    def u(self) -> float:
        """Unit roundoff 2^-p: the relative error bound of round-to-nearest."""
        return 2.0 ** -self.mantissa_bits


FORMATS: dict[str, Format] = {
    "float64": Format("float64", 53, float(np.finfo(np.float64).max), float(np.finfo(np.float64).tiny), "float64"),
    "float32": Format("float32", 24, float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny), "float32"),
    "bfloat16": Format("bfloat16", 8, 3.3895313892515355e38, 1.1754943508222875e-38, "float32"),
    "float16": Format("float16", 11, 65504.0, 6.103515625e-05, "float16"),
}


def _round_bfloat16(x: np.ndarray) -> np.ndarray:
    """Round float64 to the nearest bfloat16 (ties to even), via float32 bits."""
    f32 = np.asarray(x, dtype=np.float64).astype(np.float32)
    bits = f32.view(np.uint32).astype(np.uint64)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    out = ((bits + rounding) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    return out.astype(np.float64)


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """x rounded to ``dtype`` and returned as float64 (exactly representable)."""
    x = np.asarray(x, dtype=np.float64)
    if dtype == "float64":
        return x.copy()
    if dtype == "bfloat16":
        return _round_bfloat16(x)
    return x.astype(FORMATS[dtype].numpy).astype(np.float64)
