"""Algorithm 7: unembedding, and its column-wise form that ends Algorithms 8-10."""

from __future__ import annotations

from typing import Optional

from .errors import SpecError
from .functions import softcap, softmax, softmax_columns
from .intermediates import algorithm, record
from .linalg import Matrix, Vector, add_bias, matmul, matvec, shape, transpose
from .variants import PAPER, VariantSet

__all__ = ["logits", "unembed", "unembedding", "unembedding_matrix"]


@algorithm("unembedding")
def unembedding(e: Vector, W_u: Matrix, b_u: Optional[Vector] = None) -> Vector:
    """Algorithm 7: p ← softmax(W_u e), W_u ∈ R^{N_V×d_e}.

    1. return p = softmax(W_u e)

    Variant ``logit_bias``: p = softmax(W_u e + b_u).
    """
    logits = matvec(W_u, e)
    if b_u is not None:
        if len(b_u) != len(logits):
            raise SpecError("b_u", f"a vector of length N_V={len(logits)}", f"length {len(b_u)}")
        logits = [z + b for z, b in zip(logits, b_u)]
    record("logits", logits)
    return softmax(logits)  # line 1


def unembedding_matrix(W_u: Optional[Matrix], W_e: Optional[Matrix], variant: VariantSet = PAPER) -> Matrix:
    """W_u itself, or W_eᵀ when ``unembedding="tied"``."""
    if variant.unembedding == "tied":
        if W_e is None:
            raise SpecError("W_e", "a matrix (unembedding='tied' uses W_u = W_eᵀ)", "None")
        return transpose(W_e)
    if W_u is None:
        raise SpecError("W_u", "a matrix (unembedding='separate')", "None")
    return W_u


@algorithm("unembedding")
def logits(X: Matrix, W_u: Matrix, b_u: Optional[Vector] = None, variant: VariantSet = PAPER) -> Matrix:
    """W_u X (+ b_u 1ᵀ): the argument of the final softmax of Algorithms 7-10 and of the losses
    (the intermediate ``logits``).

    Variant ``logit_softcap`` = c > 0 (Gemma 2): each logit z becomes c·tanh(z/c)
    (``functions.softcap``), after the bias and before the softmax and the loss; the intermediate
    ``logits`` is the capped value, what the softmax reads. Source: Hugging Face transformers 5.24
    models/gemma2/modeling_gemma2.py, ``Gemma2ForCausalLM.forward``: ``logits = self.lm_head(...)``,
    then ``logits / final_logit_softcapping``, ``torch.tanh``, ``* final_logit_softcapping``,
    before the loss; Gemma2Config's ``final_logit_softcapping`` is 30.0."""
    n_v, d = shape(W_u)
    if shape(X)[0] != d:
        raise SpecError("X", f"{d} rows (W_u is {n_v}x{d})", f"{shape(X)[0]} rows")
    Z = add_bias(matmul(W_u, X), b_u)
    if variant.logit_softcap:
        c = variant.logit_softcap
        Z = [[softcap(z, c) for z in row] for row in Z]
    record("logits", Z)
    return Z


def unembed(X: Matrix, W_u: Matrix, b_u: Optional[Vector] = None, variant: VariantSet = PAPER) -> Matrix:
    """The last line of Algorithms 8-10: P ← softmax(W_u X) (+ b_u 1ᵀ), column-wise Algorithm 7
    (capped by ``logit_softcap``: ``logits``)."""
    return softmax_columns(logits(X, W_u, b_u, variant))
