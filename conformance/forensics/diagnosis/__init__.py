"""Naming the likely cause of a failure: which convention the output matches.

A failing cell usually means that the implementation follows another
convention than the one declared (ε inside the root, an unbiased variance,
GELU's tanh form, no score scale, zeros for an empty query, ...). The spec
can evaluate every convention, so on the shrunk case the harness evaluates
it under the *neighbouring* variant sets and says which of them the
implementation's output agrees with, judged exactly as the search judges
(``tolerances.reference`` at the cell's dtype, ``judge.judge``):

1. every single-switch change of the declared set (each value of each switch
   the entry reads; ε with each placement and each value of
   ``values.EPSILON_CANDIDATES``: the strategies' values, 1e-4 and the
   machine epsilons of float32 and float64, moved together as one switch);
2. the named presets, projected onto the entry's switches;
3. only if none of those fits every case tried: every pair of single changes,
   ranked by what each single change did to the output on the case (the pair
   whose two moves, added, land closest to the output first) and screened on
   the spec's binary64 values (a pair no closer to the output than half the
   declared set's distance cannot fit, bound or not); the pairs that pass are
   evaluated with their bounds.

A set **fits** only if it explains the numbers, not merely if nothing is left to
fail (``_Site.explains``):

- every output the declared set finds wrong is compared under it, with the same
  shape (a set that drops or reshapes the failing output is no match: without
  ``b_k``, a gradient bug seen only in ``grad b_k`` is no longer compared);
- the output agrees with it as the search judges (within its own bound);
- where the output fails the declared set, its bound is below half the
  output's own size (a set whose bound is vacuous on the case, as one-pass
  variance on a nearly constant column at float32, fits anything), and it is
  at least twice as close to the output as the declared set at the worst
  failing element (it resolves the departure it claims to explain).

A set that fits the shrunk case must fit every other failing example the
search kept (the cell's worst among them), and when more than one set fits, the
implementation is called again on fresh cases of the same structure and at the
entry's default sizes (a shrunk case at d_e = 2 lets unrelated sets give the
same numbers) until one remains: the others are excluded, or the diagnosis says
that it is **ambiguous** between the survivors (no case tried separates them).
A change that moves nothing on the cases tried (β of a norm that has none,
``norm_placement='paper'`` where it is ``'pre'``) is taken out of a set, and a
set left with none is no alternative. When no set fits, an output within the
bound of a narrower dtype (the declared set with that dtype's arithmetic) is
named as "computes in float32 inside", whether or not its values are float32
ones (a norm on ``x.float()`` multiplied by a float64 weight); otherwise the
closest set is shown with its error/bound factor.

The search is bounded (``seconds`` and ``evaluations``: the evaluations with a
bound) and says when it gave up, with how many pairs it screened of how many.
It also describes the shrunk case's salient structure in words (an empty
query column, a constant column, a repeated token, ℓ = 1, ...), since that is
often what makes two conventions differ. For a model, layer, loss, gradient
or step it adds where the implementation first departs from the spec
(``conformance/forensics/divergence/``: which layer, which sublayer). Everything is
plain data (``Diagnosis.to_dict``) for the JSON report and certificates.

One idea a module: ``search`` (``diagnose``: the budget, the records of the sets evaluated),
``candidates`` (the sets and readings tried, and the parameters a set takes), ``site`` (one
case the sets are judged on, and what makes a set explain its numbers), ``confirmation`` (the
other failing examples and the fresh cases), ``pairs``, ``lower`` (a lower precision inside),
``structure`` (the case in words), ``result`` (``Diagnosis`` and its lines) and ``hook`` (the
runner's ``diagnose_failure``, with the first divergence).
"""

from __future__ import annotations

from .confirmation import FAILING_KEPT
from .hook import DIAGNOSED_CHECKS, LOCATED_CHECKS, diagnose_failure
from .result import Diagnosis, number
from .search import diagnose
from .structure import structure

__all__ = ["DIAGNOSED_CHECKS", "FAILING_KEPT", "LOCATED_CHECKS", "Diagnosis", "diagnose", "diagnose_failure", "number",
           "structure"]
