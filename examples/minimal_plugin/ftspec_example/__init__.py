"""A minimal ftspec plugin (docs/plugins.md walks through it).

It implements two registry entries, ``layer_norm`` and ``rms_norm``
(Algorithm 6 and its RMS variant), for the paper's variant set only, in
float64 and float32 on the CPU. Everything else is "not implemented", which
certification reports as coverage, not as failure.

The paper's norms have no ε, so the spec refuses a column of zero variance
(line 3 would divide by √0); a plugin must refuse it too, by raising, never
by returning NaN.
"""

from __future__ import annotations

import numpy as np

from ftspec.impls.api import Context, Implementation
from ftspec.spec.variants import PAPER


def layer_norm(inputs, params, ctx: Context):
    """Algorithm 6 on every column of X (d_e, ell): tokens are columns."""
    X = inputs["X"]  # (..., d_e, ell)
    if np.all(X == X[..., :1, :], axis=-2).any():  # equal entries: zero variance, whatever the rounding
        raise ValueError("layer_norm: a column of zero variance (no ε: line 3 would divide by √0)")
    m = X.mean(axis=-2, keepdims=True)  # line 1
    v = ((X - m) ** 2).mean(axis=-2, keepdims=True)  # line 2: biased variance
    gamma = params["gamma"][:, None]  # (d_e, 1): broadcast over tokens
    beta = params["beta"][:, None]
    return (X - m) / np.sqrt(v) * gamma + beta  # line 3


def rms_norm(inputs, params, ctx: Context):
    """RMSnorm: the paper's layer_norm with m = 0 and β = 0."""
    X = inputs["X"]
    if np.all(X == 0, axis=-2).any():
        raise ValueError("rms_norm: a column of zeros (no ε: it would divide by √0)")
    v = (X * X).mean(axis=-2, keepdims=True)
    return X / np.sqrt(v) * params["gamma"][:, None]


implementation = Implementation(
    name="example",
    version="0.1.0",
    algorithms={"layer_norm": layer_norm, "rms_norm": rms_norm},
    dtypes=("float64", "float32"),
    devices=lambda: ["cpu"],
    from_numpy=lambda array, dtype, device: np.array(array, dtype=dtype),
    to_numpy=lambda value: np.asarray(value),
    variants=[PAPER],  # the paper's conventions only
    description="minimal example plugin from docs/plugins.md",
)
