"""The value styles, and which of them an entry can show under a variant.

- "well-scaled": weights N(0, 1/fan_in), γ ≈ 1, small biases and β,
  embeddings and real inputs N(0, 1).
- "large-logits": as well-scaled, then each head's W_q, b_q, W_k, b_k scaled
  so the largest |score| (after the variant's scale, over unmasked entries)
  is a drawn target, and W_u, b_u (or the tied W_e) so the largest |logit|
  is; targets are log-uniform in ``MAGNITUDES[dtype].scores`` (past exp's
  overflow in float16/float32, finite in the dtype).
- "near-constant": columns c + small deviations in inputs and embedding
  tables that reach a norm (relative spread 10^U(log10 s_min, −1), s_min
  per dtype so the spread survives rounding).
- "wide-range": values ±10^U(lo, hi) across several orders of magnitude;
  weights N(0, 1/fan_in) times 10^U; γ, β and biases ±10^U.
- "sparse": as well-scaled, then some rows of each MLP's first weight matrix
  and the matching biases are exactly 0 (a pruned model): those hidden
  units see a pre-activation of exactly 0, where ReLU'(0) = 0 and GELU'(0) =
  1/2 matter.
- "near-epsilon": the columns that reach a norm (inputs, embedding tables)
  have mean 0 and a mean square 10^U(``Magnitudes.quiet``) around the ε
  values drawn (1e-12 to 1e-3; float16 from 1e-6, below which squares
  underflow), biases and β 1e-3·N(0, 1): ε then moves the
  normalised value by a large fraction, so a wrong ε (1e-6 for 1e-5, a
  missing one) shows at bfloat16 and float16 too (LLaMA's ε 1e-6 claimed for
  1e-5 went uncaught before, 2026-12-05).
- "subnormal": well-scaled, then the output moved into the dtype's
  subnormal range (largest |output| log-uniform from 16 subnormal spacings
  to the smallest normal): through the last parameters the output is linear
  in (checked on the spec: doubling them doubles the output), or, for
  softmax outputs fed by an input (the unembedding), logits large enough
  that the smallest probabilities are subnormal (in about half the cases).
  Entries whose output carries an input through a residual (pre-LN layers)
  have no such parameters and stay well-scaled; whole models are not drawn
  in it (their logits' stand-in aim misses, and logits of ±50 at bfloat16
  on a two-wide final norm made a near-tie of its column, which the Monte
  Carlo lanes did not reproduce, a false failure of PyTorch) (finding 1).

Entries that update parameters (a ``rate`` input: SGD steps, training
loops) are drawn well-scaled (or sparse, which only zeroes weights): a step amplifies a large gradient into
large weights that the next forward pass carries out of a small dtype's
range. Their loss and gradient entries show every style the model shows,
except that gradients in float16 (``available_styles(..., dtype=)``) are
not large-logits (the gradient of a saturated softmax, back through a
narrow norm, leaves float16's range) nor wide-range (a small γ makes the
next norm's variance tiny, and √'s derivative there leaves float16's range
in the Monte Carlo lanes: no tolerance can be derived).
Entries with sampled outputs (``Entry.trace``) get, under "well-scaled",
an unembedding scaled so the largest |logit| is 10^U(log10 2, log10 8)
(``SAMPLING_LOGITS``): distributions that depend on the context, neither
flat nor one-hot.
"""

from __future__ import annotations

from typing import Mapping, Optional

from ftspec.spec.registry import Entry
from ftspec.spec.variants import VariantSet

from ..value_flow import differentiates, logit_site, norms, real_inputs, score_sites, symbolic_schema, tables, updates
from ..values import SAMPLING_LOGITS, STYLES, check_style

__all__ = ["SAMPLING_LOGITS", "STYLES", "available_styles", "check_style"]


def available_styles(entry: Entry, variant: VariantSet, hyper: Mapping[str, int],
                     dtype: Optional[str] = None) -> tuple[str, ...]:
    """The styles that change something for ``entry`` under ``variant``, in
    ``STYLES`` order (``dtype``: the case's, where it matters)."""
    schema = symbolic_schema(entry, variant, hyper)
    reals = real_inputs(entry)
    sparse = ("sparse",) if any(name.endswith(("W_mlp1", "W_mlp3")) for name in schema) else ()
    if (not schema and not reals) or updates(entry):
        return ("well-scaled",) + (sparse if schema else ())
    out = ["well-scaled"]
    fragile = dtype == "float16" and differentiates(entry)
    if (score_sites(entry, variant, hyper) or logit_site(entry, variant, hyper)) and not fragile:
        out.append("large-logits")
    widths = {n.width for n in norms(entry, variant, hyper)}
    if any(s.shape and s.shape[0] in widths for s in reals) or any(schema[t][0] in widths for t in tables(schema)):
        out.append("near-constant")
    if not fragile:
        out.append("wide-range")
    out.extend(sparse)
    quiet = "near-constant" in out and "epsilon" in entry.switches and not differentiates(entry)
    if quiet:
        out.append("near-epsilon")
    site = logit_site(entry, variant, hyper)
    if entry.family not in ("training", "inference") and (site is None or site.source is not None):
        out.append("subnormal")
    return tuple(out)
