"""Identifying the conventions an implementation follows (``ftspec identify``).

Finding which convention a library uses used to mean certifying one candidate
variant set after another. The spec evaluates every named convention, so
instead: run the implementation once on each of a handful of *designed* cases
of an entry, then evaluate the spec under candidate variant sets and judge the
recorded outputs against each, exactly as the search judges
(``tolerances.reference`` at the dtype and the implementation's precision tier,
then ``judge.judge``). The implementation's own declaration is used only to
call it (a call needs a variant set in its ``Context``, and the parameters it
is given follow that set's structure); the inference ignores it.

The cases are chosen for what separates conventions, not drawn at random
(``designed_cases``): well-scaled values, near-constant columns (the variance
is tiny relative to the values there, so ε's placement and the variance's
divisor show), wide-range values, the first case times 2⁻¹⁰ (a variance near
1e-6, which ε = 1e-5 or 1e-6 dominates even at bfloat16), for an entry with a
mask an empty query column (the ``empty_query`` settings differ only there),
for one with ℓ_z and ℓ_x a case with ℓ_z ≠ ℓ_x (the causal alignments), and for
one with rotary positions or grouped key/value heads a case with d_attn ≥ 4,
two key/value heads and ℓ ≥ 3 (the pairings, bases and head orders).

The search (``Identifier.run``) does not certify every combination:

1. a base: the paper's set and each preset projected onto the entry's
   switches, the one that fits best;
2. coordinate passes: each switch in turn (ε with its placement, one
   group), every value with the others held, the best-fitting value adopted
   (fewer cases outside the bound, or as many and the errors a decade
   closer); repeated to a fixed point;
3. at the fixed point every value of every switch is judged with the others
   held: *consistent* (within the bound on every case), *excluded* (outside
   on some case, and some case *separates* it from every consistent value:
   their intervals, spec value ± bound, are disjoint there, so no output
   could fit both: ``separates``), *not separated* (outside only where the
   intervals overlap: still possible), *cannot tell* (a table's candidate
   that could not be bounded), or not testable (it needs parameters the
   implementation does not take).

A switch with one consistent value and every other excluded by a separating
case is decided; values that are the same computation at the entry count as
one (``same_here``: "paper" with the one value it stands for, RoPE's base
without rotary, the key/value order with one group, β under RMSnorm).
Otherwise it is *undecided: no case separates* those values at this dtype
(``same_outputs`` says when the spec's outputs are even bit-identical on
every case; with no value excluded, the switch never acted). The switches
one rotary pair, one key/value head or one position cannot show
(``HEAD_SWITCHES``) get a case built on purpose at sizes that separate them
(``separating_hyper``; at head width 2 identify once recommended
``rotary='half'`` for two interleaved-RoPE LLaMA codes). The merge over
entries (``merge_all``) writes no default and no still-possible declared
value as a change, and names the switches no case separates rather than
picking one. When nothing fits, the set reported is
only the nearest, and ``Identity.fits`` is False. ε is continuous: its
candidates are a finite list (``EPSILON_CANDIDATES``) and the report says so.
Switches that change the parameter set (``attn_bias``, ``affine``,
``mlp_bias``, ``logit_bias``, ``unembedding``, ...) are tested only by
dropping parameters the implementation was given (an implementation that
ignores its biases fits the set without them); a value that needs parameters
the implementation does not take is not testable, and its structure comes
from the declaration: the output says so.

The same engine judges published numbers (``identify_table.py``): only the
observation and its judge differ (``Observation.judge``).

One idea a module: ``switches`` (the switches as searched and their values), ``observations``
(``Observation``, ``Fit`` and ``separates``), ``identifier`` (``Identifier``: the base, the
coordinate passes and the verdict per switch), ``results`` (``GroupResult``, ``Identity``),
``cases`` (the designed cases and ``separating_hyper``), ``implementation`` (``observe``,
``identify`` and ``search`` over one entry) and ``merging`` (the merge over entries).
"""

from __future__ import annotations

from ...core.values import EPSILON_CANDIDATES
from .cases import HEAD_SWITCHES, designed_cases, separating_hyper
from .identifier import EVALUATIONS, SECONDS, Identifier, same_here
from .implementation import call_variant, case_hyper as case_hyper, identify, observe, project, search
from .merging import Merged, merge, merge_all
from .observations import Fit, Observation, separates
from .results import GroupResult, Identity, expression
from .switches import IdentifyError, groups, options, value_text

__all__ = ["EPSILON_CANDIDATES", "EVALUATIONS", "HEAD_SWITCHES", "SECONDS", "Fit", "GroupResult", "Identity",
           "IdentifyError", "Identifier", "Merged", "Observation", "call_variant", "designed_cases", "expression",
           "groups", "identify", "merge", "merge_all", "observe", "options", "project", "same_here", "search",
           "separates", "separating_hyper", "value_text"]
