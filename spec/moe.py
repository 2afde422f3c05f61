"""A sparse mixture-of-experts MLP (Mixtral, Qwen2-MoE): the registry entry ``moe_mlp``.

The paper has no experts; this is the MLP that Mixtral (Jiang et al. 2024, "Mixtral of Experts",
§2.1) and Qwen2-MoE put where Algorithm 10's line 8 has its one MLP. Sources, Hugging Face
transformers 5.24:

- ``models/mixtral/modeling_mixtral.py``: ``MixtralTopKRouter.forward`` (router_logits =
  F.linear(x, weight), no bias; softmax over all experts; ``torch.topk`` of the probabilities;
  ``router_top_value /= router_top_value.sum(dim=-1, keepdim=True)``), ``MixtralExperts.forward``
  (each chosen expert's ``act_fn(gate) * up`` then ``down_proj``, times its weight, accumulated by
  ``index_add_`` expert by expert in index order), ``MixtralSparseMoeBlock``;
- ``models/qwen2_moe/modeling_qwen2_moe.py``: ``Qwen2MoeTopKRouter.forward`` (the same router,
  renormalising only under ``norm_topk_prob``, whose ``Qwen2MoeConfig`` default is False),
  ``Qwen2MoeSparseMoeBlock.forward`` (a ``shared_expert`` MLP for every token, scaled by
  ``F.sigmoid(shared_expert_gate(x))``, a ``Linear(hidden_size, 1, bias=False)``, and added).

Per token column x ∈ R^{d_e} of X, with E experts and k chosen (1 ≤ k ≤ E):

1. r ← W_g x                                  (router logits, E)
2. p ← softmax(r)                             (over all E experts)
3. T ← the k indices of the largest p_i       (refused where the k-th and (k+1)-th largest tie;
                                              read from r: ``chosen_experts``)
4. w_i ← p_i, or p_i / Σ_{j∈T} p_j under ``moe_topk_norm``   (i ∈ T)
5. y ← Σ_{i∈T} w_i · FFN_i(x),  FFN_i(x) = W_2^i (silu(W_1^i x) ⊙ W_3^i x)   (SwiGLU, no biases)
6. y ← y + σ(w_sᵀ x) · FFN_s(x)               (under ``moe_shared``: the shared expert)

Line 3's set is undefined where p has a tie across its k-th place: ``torch.topk``'s order among
equal values is unspecified, so an implementation may route such a token either way; the spec
refuses the case (``SpecError`` naming ``W_g``; a refusal as data, ``tie_refusal``). Ties inside T,
or among the experts left out, change nothing and are accepted. Line 5 sums the chosen experts in
increasing index order (Mixtral's loop over ``expert_hit``), a rounding-only choice.

The routed experts' weights are stacked on their rows (columns for W_2), as Mixtral stores them on
a leading expert axis (``MixtralExperts.gate_up_proj`` of shape (E, 2·d_mlp, d_e), ``down_proj``
(E, d_e, d_mlp)), flattened to matrices named after Mixtral's w1, w3, w2 (Mistral's reference code;
the layers' W_mlp1, W_mlp1_lin, W_mlp2): ``W_1`` ∈ R^{E·d_mlp×d_e} holds W_1^i (the gate half) in
rows i·d_mlp … (i+1)·d_mlp − 1, ``W_3`` likewise W_3^i (the up half), and ``W_2`` ∈
R^{d_e×E·d_mlp} holds W_2^i in those columns; each expert is ``spec.layers.mlp``'s gated form
(``mlp="gated"``, silu, no biases). The shared expert is ``shared.W_1``, ``shared.W_3``
(d_mlp × d_e), ``shared.W_2`` (d_e × d_mlp) and its gate ``W_shared_gate`` (1 × d_e). Qwen2-MoE's
shared expert may be wider than the routed ones (``shared_expert_intermediate_size``): here both are
d_mlp wide, the same mathematics at one width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from . import numbers
from .errors import SpecError
from .functions import softmax
from .intermediates import Names, algorithm, record
from .layers import mlp
from .linalg import Matrix, column, map_matrix, matmul, shape
from .variants import PAPER, VariantSet

__all__ = ["Expert", "MoEParams", "chosen_experts", "moe_mlp", "moe_params", "moe_schema", "sigmoid", "top_k_fits"]


@dataclass(frozen=True)
class Expert:
    """One gated MLP expert: W_1 ∈ R^{d_mlp×d_e} (through silu), W_3 ∈ R^{d_mlp×d_e} (the linear
    branch), W_2 ∈ R^{d_e×d_mlp}."""

    W_1: Matrix
    W_3: Matrix
    W_2: Matrix


@dataclass(frozen=True)
class MoEParams:
    """The router W_g ∈ R^{E×d_e}, the E routed experts, and under ``moe_shared`` the shared expert
    and its gate W_shared_gate ∈ R^{1×d_e}."""

    W_g: Matrix
    experts: tuple[Expert, ...]
    shared: Optional[Expert] = None
    W_shared_gate: Optional[Matrix] = None


def sigmoid(x: Any) -> Any:
    """σ(x) = 1 / (1 + exp(−x)), as exp(x) / (1 + exp(x)) for x < 0 (no overflow either way)."""
    N = numbers.current()

    def nonnegative(x: Any) -> Any:
        return N.num(1) / (N.num(1) + N.exp(-x))

    def negative(x: Any) -> Any:
        e = N.exp(x)
        return e / (N.num(1) + e)

    return numbers.by_sign(x, nonnegative, negative)


def chosen_experts(r: list[Any], k: int, t: int = 0) -> list[int]:
    """Line 3: the indices of the k largest router probabilities, in increasing index order, read
    from the logits r: softmax is strictly increasing in each logit, so p_i > p_j exactly where
    r_i > r_j, and a tie of p is a tie of r (a rounded p may tie where r does not: p underflows to
    0 for logits about 745 below the largest in binary64, 104 in binary32, and experts of weight 0 tie
    there harmlessly). Refused (``SpecError`` naming ``W_g``) where the k-th largest logit equals
    the (k+1)-th: the chosen set is then not determined (``t``: the token's position)."""
    E = len(r)
    order = sorted(range(E), key=lambda i: r[i], reverse=True)  # a stable sort: ties keep index order
    if k < E and not r[order[k - 1]] > r[order[k]]:
        N = numbers.current()
        raise SpecError("W_g", f"router logits of token t={t} with no tie across the top-k boundary "
                        f"(k={k}: the chosen experts would be undetermined)",
                        f"r = {[N.to_float(x) for x in r]} ties at places {k} and {k + 1}")
    return sorted(order[:k])


def _expert(X: Matrix, W: Expert) -> Matrix:
    """Line 5's FFN_i on every column: W_2 (silu(W_1 X) ⊙ W_3 X), ``spec.layers.mlp``'s gated form."""
    return mlp(X, W.W_1, None, W.W_2, None, "silu", lin=(W.W_3, None))


def _times(a: Any, b: Any) -> Any:
    return a * b


def _plus(a: Any, b: Any) -> Any:
    return a + b


def _moe_names(X: Matrix, W: MoEParams, k: int, *, variant: VariantSet = PAPER) -> Names:
    """``moe_mlp``'s intermediates (``spec/intermediates.py``): router (line 1's logits, E × ℓ),
    weights (line 4's, E × ℓ, 0 for an expert not chosen), experts.{i} (FFN_i of every column, with
    its gated MLP's pre, act, lin, hidden: ``spec.layers._mlp_names``), and under ``moe_shared``
    shared_gate (σ(w_sᵀx), ℓ) and shared (FFN_s)."""
    return {mlp: tuple(f"experts.{i}" for i in range(len(W.experts))) + ("shared",)}


@algorithm("moe_mlp", names=_moe_names)
def moe_mlp(X: Matrix, W: MoEParams, k: int, *, variant: VariantSet = PAPER) -> Matrix:
    """Lines 1-6 of the module docstring for every column of X ∈ R^{d_e×ℓ}: Y ∈ R^{d_e×ℓ}.

    Each expert is evaluated on every column and weighted by 0 where it is not chosen: the same
    numbers as evaluating it on its tokens alone (a product by 0 is 0, and adding 0 is exact),
    with one code path for every column."""
    N = numbers.current()
    E = len(W.experts)
    if not 1 <= k <= E:
        raise SpecError("k", f"a number of chosen experts 1 ≤ k ≤ E = {E}", f"k = {k}")
    d_e, ell = shape(X)
    R = matmul(W.W_g, X)  # line 1: (E, ℓ)
    record("router", R)
    G = [[N.num(0)] * ell for _ in range(E)]  # line 4's weights, 0 for an expert not chosen
    for t in range(ell):
        r = column(R, t)
        p = softmax(r)  # line 2
        T = chosen_experts(r, k, t)  # line 3
        total = N.fsum([p[i] for i in T]) if variant.moe_topk_norm else None
        for i in T:
            G[i][t] = p[i] / total if total is not None else p[i]  # line 4
    record("weights", G)
    Y: Optional[Matrix] = None
    for i, expert in enumerate(W.experts):  # line 5, in increasing expert index
        weighted = map_matrix(_times, _expert(X, expert), [G[i]] * d_e)
        Y = weighted if Y is None else map_matrix(_plus, Y, weighted)
    assert Y is not None  # E ≥ k ≥ 1
    if variant.moe_shared:  # line 6
        if W.shared is None or W.W_shared_gate is None:
            raise SpecError("shared", "the shared expert and its gate (moe_shared=True)", "none")
        gate = [sigmoid(g) for g in matmul(W.W_shared_gate, X)[0]]  # (ℓ,)
        record("shared_gate", gate)
        Y = map_matrix(_plus, Y, map_matrix(_times, _expert(X, W.shared), [gate] * d_e))
    return Y


def moe_schema(hyper: Any, variant: VariantSet) -> dict[str, Any]:
    """The flat parameter names and shapes (module docstring): W_g (E × d_e), the stacked experts
    W_1, W_3 (E·d_mlp × d_e) and W_2 (d_e × E·d_mlp), then under ``moe_shared`` the
    shared expert's (d_mlp × d_e, d_mlp × d_e, d_e × d_mlp) and its gate W_shared_gate (1 × d_e)."""
    s: dict[str, Any] = {"W_g": ("E", "d_e"), "W_1": ("E*d_mlp", "d_e"), "W_3": ("E*d_mlp", "d_e"),
                         "W_2": ("d_e", "E*d_mlp")}
    if variant.moe_shared:
        s.update({"shared.W_1": ("d_mlp", "d_e"), "shared.W_3": ("d_mlp", "d_e"),
                  "shared.W_2": ("d_e", "d_mlp"), "W_shared_gate": (1, "d_e")})
    return s


def moe_params(flat: Any, E: int, d_mlp: int) -> MoEParams:
    """The flat parameters of ``moe_schema`` as a ``MoEParams``: expert i's rows (columns of W_2)
    i·d_mlp … (i+1)·d_mlp − 1."""
    def rows(M: Matrix, i: int) -> Matrix:
        return M[i * d_mlp:(i + 1) * d_mlp]

    experts = tuple(Expert(rows(flat["W_1"], i), rows(flat["W_3"], i),
                           [r[i * d_mlp:(i + 1) * d_mlp] for r in flat["W_2"]]) for i in range(E))
    shared = Expert(flat["shared.W_1"], flat["shared.W_3"], flat["shared.W_2"]) \
        if "shared.W_1" in flat else None
    return MoEParams(flat["W_g"], experts, shared, flat.get("W_shared_gate"))


def top_k_fits(hyper: Any, variant: VariantSet) -> None:
    """The entry's check: 1 ≤ k ≤ E (k experts chosen out of E)."""
    if hyper["k"] > hyper["E"]:
        raise SpecError("k", f"at most E = {hyper['E']} chosen experts", f"k = {hyper['k']}")
