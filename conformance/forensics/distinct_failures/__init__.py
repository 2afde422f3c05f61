"""Every distinct failure of a cell, not only the smallest one a search shrinks to.

A search stops an implementation at its first failure and shrinks it. An
implementation with several independent bugs then shows one of them: the
one the smallest case reaches (a softmax axis at ℓ = ℓ_max = 1) hides the
others (a residual taken from the normalised input, a crash whenever
ℓ < ℓ_max) until it is fixed.

After the first failure, ``search_distinct`` keeps searching for that
implementation for failures whose *signature* differs from every failure
found so far:

- the check that failed (``spec``, ``nan``, ``exception``, ``refusal``, ...);
- for an exception, its type;
- for a value check of a model (its loss, gradient, step) or a layer, the
  **places** where it departs (``places_of``): every piece of code that
  departs *on its own*, found with ``divergence``'s public ``locate``:

  * each step of the model (embedding, each layer, final and head norms,
    unembedding) is checked through the implementation's own entry, fed the
    spec's value at its input: a bug upstream or downstream of a step
    cannot make that step depart;
  * inside every departing layer, ``locate`` names the first sublayer that
    departs; that sublayer is then *silenced* (its output weights W_o, b_o
    or the MLP's second W, b set to 0: whatever its code does, it adds
    zero) and the layer located again, until it agrees or what departs
    cannot be silenced (a norm, the residual path). A pre-LN layer whose
    norm departs has its residual path checked on its own as well: with
    every sublayer silenced the spec's layer is X + 0 = X and reads no norm;
  * a place is named by the *kind* of code it is (``PLACE_KINDS``), never by
    a layer index or a stack: the code of one layer entry runs in every
    layer, one norm entry in every norm, one attention in self- and
    cross-attention. ``model`` is the model's own code (it departs while
    every entry agrees): whole-model ablations may name different places
    for it on different cases, so they are one place;

- otherwise (entries that are no model or layer) where it first departs and
  the simplest variant set the output matches (``diagnosis/``).

Each failure is reported for **one** place (the cell's first failure: the
first place its case departs at, in the walk's order), and covers it. A
failing example is new when it departs at a place no failure covers
(``fresh_places``); an example that departs at a covered place as well is
passed over (``ISOLATION_TRIES`` per round; a round that ends so is followed
by one that takes such an example) while one that departs at new places
only is looked for, and while the new failure is shrunk a candidate
counts only if it departs at one of its new places (and, when it was found
alone, at no covered one): its shrunk case file shows the new bug, alone
where the search could find it so. Each report then says the place it is
reported for ("distinct failure: reported for where its case departs at
..."), since its first divergence may name another.

Why this does not report one bug twice. A place departs on its own only
through a bug in its own code (each piece judged on the spec's values, a
silenced sublayer adding nothing), so a failure at a new place has a bug
there that no earlier failure was reported for. One bug could still show
at two places in two ways, and both are closed: code one entry runs in many
places is one place (the kinds above); code that two kinds share (a GELU
helper behind the MLP and the ETransformer's head, seen as ``MLP`` and as
``model``) is merged when one variant set explains both failures
(``explanations``: the sets that fit each failure's own case, those the
diagnosis excluded on other cases of the cell included, since those cases
may carry the other bug), provided one of the two diagnoses kept that set
(``one_bug``): a set both excluded fits each tiny shrunk case vacuously
(``embedding_norm=True`` on a d_e = 2 case) and would merge a missing
score scale into a residual bug. An example whose places cannot be found is no
new failure, and a reported failure whose places cannot be found covers all
of them. The price is paid on the side of silence: two bugs of one kind
(two norm bugs, two in the model's own code, one explained by the other's
convention) are reported as one failure.

A failing example whose signature is already known counts as passing for
this search, and so does, while one new failure is being shrunk, a failure
with yet another signature (found in the next round). Whether a failing
example is new is decided as cheaply as possible: by its check and
exception type, else by its places, else (for at most
``DIAGNOSED_SIGNATURES`` examples) by a short diagnosis
(``SIGNATURE_SECONDS``). When every failure found departs at a residual
path or a norm (which hide a pre-LN layer's sublayers from its probes),
one more round draws the entry under each norm placement (``PLACEMENTS``),
where such a bug's code is not run. The search draws at least ``MIN_EXAMPLES``
examples (shrinking the first failure may have spent the cell's budget:
this search is forensics, like the diagnosis, and bounded by time), and
stops after ``MAX_DISTINCT`` further failures, after ``SATURATION`` failing
examples in a row that are all known, after ``SECONDS`` (a shrink the time
cap interrupts reports the smallest case seen so far, marked not shrunk),
or when its examples are spent. Batched calls are not made here (the first
search already checked batching).

One idea a module: ``signatures`` (a failure's signature, when two are the same, the variant
sets that explain one), ``places`` (every place a failing example departs at), ``ledger``
(``_Ledger``: what the search knows across rounds, and whether a failure is new), ``rounds``
(``_DistinctSearch``: one Hypothesis search per round) and ``search`` (``search_distinct``, the
runner's call, and the records of the failures it finds).
"""

from __future__ import annotations

from .ledger import DIAGNOSED_SIGNATURES, ISOLATION_TRIES
from .places import KNOWN_PLACES_SECONDS, PLACES_SECONDS, places_of
from .rounds import SATURATION, SIGNATURE_SECONDS
from .search import MAX_DISTINCT, MIN_EXAMPLES, SECONDS, search_distinct
from .signatures import (ALL, PLACE_KINDS, Signature, describe, explanations, fresh_places, same, signature,
                         signature_of_failure)

__all__ = ["ALL", "DIAGNOSED_SIGNATURES", "ISOLATION_TRIES", "KNOWN_PLACES_SECONDS", "MAX_DISTINCT", "MIN_EXAMPLES",
           "PLACES_SECONDS", "PLACE_KINDS", "SATURATION", "SECONDS", "SIGNATURE_SECONDS", "Signature", "describe",
           "explanations", "fresh_places", "places_of", "same", "search_distinct", "signature", "signature_of_failure"]
