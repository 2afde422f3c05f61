"""Parameter ablations: a block's (or a layer's) parameters changed so that a piece says nothing.

Silenced: the output weights 0 (what is left is the residual path and, post-LN, the norms);
zeroed: every weight of the sublayer 0; equal scores: W_q = 0; another value for a parameter
(``_other``) to ask whether an output moves with it.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from .walk import Block, _blocks, _strip


def _output_weights(params: Mapping[str, np.ndarray], b: Block) -> tuple[str, str]:
    """The block's output weight and bias: W_o, b_o; the MLP's second W, b; under ``mlp="one_layer"``
    (no second W) its last layer's, the last ``mlp_hidden.{k}`` or else W1, b1: zero, they give
    act(0) = 0 (ReLU, GELU, SiLU), so the MLP is silent as well."""
    if b.attn:
        return b.attn + "W_o", b.attn + "b_o"
    if f"W_mlp{b.mlp[1]}" in params or f"W_mlp{b.mlp[0]}" not in params:
        return f"W_mlp{b.mlp[1]}", f"b_mlp{b.mlp[1]}"
    hidden = [int(k.split(".")[1]) for k in params if k.startswith("mlp_hidden.") and k.endswith(".W")]
    if hidden:
        return f"mlp_hidden.{max(hidden)}.W", f"mlp_hidden.{max(hidden)}.b"
    return f"W_mlp{b.mlp[0]}", f"b_mlp{b.mlp[0]}"


def _silenced(params: dict[str, np.ndarray], b: Block) -> dict[str, np.ndarray]:
    """The block's f made zero: its output weights (W_o, b_o or the MLP's second W, b; ``_output_weights``)
    set to 0."""
    keys = _output_weights(params, b)
    return {**params, **{k: np.zeros_like(params[k]) for k in keys if k in params}}


def _zeroed(params: dict[str, np.ndarray], b: Block) -> dict[str, np.ndarray]:
    """Every weight and bias of the block's f set to 0 (its norm kept): f is 0 whatever it reads
    (scores all 0 and values 0; an MLP's second W 0, or under ``mlp="one_layer"`` act(0) = 0)."""
    mlp = {f"{w}_mlp{i}{lin}" for w in ("W", "b") for i in b.mlp for lin in ("", "_lin")}
    mine = [k for k in params if (k.startswith(b.attn) if b.attn else
                                  k in mlp or k.startswith("mlp_hidden."))]
    return {**params, **{k: np.zeros_like(params[k]) for k in mine}}


def _other(v: np.ndarray) -> np.ndarray:
    """Another value for a parameter: reversed, negated, doubled and shifted (no entry stays)."""
    v = np.asarray(v, dtype=np.float64)
    return -2.0 * v[::-1] + 0.75


def _equal_scores(params: dict[str, np.ndarray], b: Block) -> dict[str, np.ndarray]:
    """The attention block ``b`` with W_q = 0 (and b_q = 0): every score is 0, every allowed key gets
    the same weight, so the scale, W_q, W_k and the softmax of varying scores play no part."""
    head = b.attn + "heads."
    return {k: (np.zeros_like(v) if k.startswith(head) and k.rsplit(".", 1)[-1] in ("W_q", "b_q") else v)
            for k, v in params.items()}


def _silence_layer(params: dict[str, np.ndarray], prefix: str, layer: str) -> dict[str, np.ndarray]:
    p = _strip(params, prefix)
    for b in _blocks(layer):
        p = _silenced(p, b)
    return {**params, **{prefix + k: v for k, v in p.items()}}


def _unsilenceable(note: str) -> bool:
    """Whether a check's note says the implementation raised or returned NaN."""
    return note.startswith("raised ") or "NaN" in note or " nan" in note
