"""What a runner keeps while it searches one (algorithm, dtype): the spec's
references, evaluated once per distinct value set and shared by every search
of the task, and what each member answered, for the peer comparison
(conformance/running/runner.py; the search reads and adds to both).

The references are keyed by the case's inputs' and parameters' digests
(``search_keys._prepared_digests``) with the entry, dtype, precision, lanes,
variant set and sizes; a refusal of the spec (SpecError, ToleranceModelError)
is kept as the answer and raised again.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

from ftspec.spec import SpecError
from ftspec.spec.registry import Entry

from ..core.calling import Prepared
from ..core.case import Case
from ..core.tolerances import LANES, SCREEN_LANES, Reference, ToleranceModelError, reference, references
from .search_keys import _prepared_digests

__all__ = ["CACHE_CASES", "ReferenceCache"]

#: distinct cases whose references (and outputs, for the peer comparison) a runner keeps per
#: (algorithm, dtype): the first ones are kept, later ones not, so an implementation searched
#: after another finds the cases they share in the same order
CACHE_CASES = 4096


class ReferenceCache:
    """The references and outputs a runner keeps for the (algorithm, dtype) being searched, and
    what evaluating the references cost (``evaluations``: cache misses; ``seconds``)."""

    def __init__(self) -> None:
        self.refs: dict[tuple, Any] = {}  # references of the (algorithm, dtype) being searched
        #: case key -> {member key: (outputs, reference)}: what each implementation answered
        self.outputs: dict[tuple, dict[tuple[str, str], tuple[dict, Reference]]] = {}
        self.evaluations = 0  # references computed (cache misses), for tests and reports
        self.seconds = 0.0

    def clear(self) -> None:
        """Forget the cases kept: a case of one (algorithm, dtype) never meets another's."""
        self.refs.clear()
        self.outputs.clear()

    def one(self, entry: Entry, prepared: Prepared, case: Case, dtype: str, precision: str) -> Reference:
        """``Runner.reference_for``: the spec's reference of a prepared case at ``LANES``, evaluated
        once; raises the spec's refusal as the first evaluation did."""
        key = (entry.name, dtype, precision, LANES, case.variant.hash, tuple(sorted(case.hyper.items())),
               *_prepared_digests(prepared))
        if key in self.refs:
            value = self.refs[key]
        else:
            started = time.perf_counter()
            self.evaluations += 1
            try:
                value = reference(entry, prepared.inputs, prepared.params, hyper=case.hyper,
                                  variant=case.variant, dtype=dtype, precision=precision)
            except (SpecError, ToleranceModelError) as exc:
                value = exc
            finally:
                self.seconds += time.perf_counter() - started
            if len(self.refs) < CACHE_CASES:  # the first ones: see CACHE_CASES
                self.refs[key] = value
        if isinstance(value, (SpecError, ToleranceModelError)):
            raise value
        return value

    def many(self, entry: Entry, prepared: Sequence[Prepared], case: Case, dtype: str, precision: str,
             lanes: int = SCREEN_LANES) -> list[Any]:
        """``Runner.references_for``: each value set's reference at ``lanes`` (a Reference or the
        exception it raises); those not kept are evaluated together (``tolerances.references``)."""
        keys = [(entry.name, dtype, precision, lanes, case.variant.hash, tuple(sorted(case.hyper.items())),
                 *_prepared_digests(p)) for p in prepared]
        missing = [i for i, k in enumerate(keys) if k not in self.refs]
        if missing:
            started = time.perf_counter()
            self.evaluations += len(missing)
            try:
                found = references(entry, [(prepared[i].inputs, prepared[i].params) for i in missing],
                                   hyper=case.hyper, variant=case.variant, dtype=dtype, precision=precision,
                                   lanes=lanes)
            finally:
                self.seconds += time.perf_counter() - started
            fresh = dict(zip(missing, found))
            for i, value in fresh.items():
                if len(self.refs) < CACHE_CASES:
                    self.refs[keys[i]] = value
        return [self.refs[k] if k in self.refs else fresh[i] for i, k in enumerate(keys)]
