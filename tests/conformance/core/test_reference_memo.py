"""Inside ``tolerances.keeping_references`` (a run, a replay, a diagnosis), ``reference`` keeps the
references it evaluated last: asked again for the same arguments it gives the same object without
evaluating the spec again, and anything a reference depends on (values, sizes, variant set, dtype,
precision, lanes) gives another one. Outside, every call evaluates."""

from __future__ import annotations

import numpy as np
import pytest

from ftspec.conformance.core import tolerances
from ftspec.conformance.core.case import Case
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import PAPER

from ..support import counted_evaluations


def _case(seed: int = 0) -> Case:
    return Case.build(REGISTRY["layer_norm"], dict(REGISTRY["layer_norm"].sizes), variant=PAPER, seed=seed)


def _ref(case: Case, **kw):
    how = dict(hyper=case.hyper, variant=case.variant, dtype="float32", precision="highest")
    return tolerances.reference(REGISTRY[case.algorithm], case.inputs, case.params, **{**how, **kw})


@tolerances.keeping_references()
def test_the_same_arguments_are_evaluated_once_and_anything_else_again(monkeypatch):
    evaluated = counted_evaluations(monkeypatch)
    case = _case(123457)
    first = _ref(case)
    assert _ref(case) is first and len(evaluated) == 1
    # the same values in fresh arrays are the same arguments
    same = Case(case.algorithm, dict(case.hyper), case.variant, {k: v.copy() for k, v in case.inputs.items()},
                {k: v.copy() for k, v in case.params.items()})
    assert _ref(same) is first and len(evaluated) == 1
    others = [_ref(case, dtype="float16"), _ref(case, precision="tf32"), _ref(case, lanes=tolerances.SCREEN_LANES),
              _ref(case, variant=PAPER.replace(epsilon=1e-5, epsilon_placement="inside_root")), _ref(_case(7))]
    assert len(evaluated) == 1 + len(others) and all(o is not first for o in others)
    moved = dict(case.params)
    name = next(iter(moved))
    moved[name] = np.nextafter(moved[name], np.inf)  # one last bit of one parameter
    assert _ref(Case(case.algorithm, dict(case.hyper), case.variant, case.inputs, moved)) is not first


@tolerances.keeping_references()
def test_a_kept_reference_cannot_be_changed_in_place():
    ref = _ref(_case(99))
    for group in (ref.outputs, ref.bound, ref.spread):
        for v in group.values():
            with pytest.raises(ValueError):
                v[...] = 0


@tolerances.keeping_references()
def test_a_refusal_is_kept_too_and_raised_each_time(monkeypatch):
    evaluated = counted_evaluations(monkeypatch)
    case = _case(5)
    flat = {k: (np.full_like(v, 2.0) if k == "X" else v) for k, v in case.inputs.items()}  # zero variance
    for _ in range(2):
        with pytest.raises(tolerances.SpecError):
            _ref(Case(case.algorithm, dict(case.hyper), case.variant, flat, case.params))
    assert len(evaluated) == 1


def test_outside_a_scope_every_call_evaluates_and_a_scope_ends_with_its_references(monkeypatch):
    """A test that changes the tolerance model between two calls (tests/conformance/
    test_false_failures.py) must see the change: nothing is kept outside a scope, and a scope's
    references go with it."""
    evaluated = counted_evaluations(monkeypatch)
    case = _case(31)
    first = _ref(case)
    assert _ref(case) is not first and len(evaluated) == 2
    with tolerances.keeping_references():
        inside = _ref(case)
        with tolerances.keeping_references():  # nested: the outer scope's references
            assert _ref(case) is inside
    assert len(evaluated) == 3
    with tolerances.keeping_references():
        assert _ref(case) is not inside and len(evaluated) == 4


def test_a_scope_is_its_threads_own(monkeypatch):
    """A Dask worker runs searches in threads: each thread keeps its own references (a scope that
    one thread closes never empties another's, and no thread reads another's)."""
    import threading

    evaluated = counted_evaluations(monkeypatch)
    case = _case(41)
    seen: dict[str, object] = {}

    def other():
        seen["first"], seen["again"] = _ref(case), _ref(case)  # no scope in this thread: evaluated twice

    with tolerances.keeping_references():
        mine = _ref(case)
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert _ref(case) is mine
    assert seen["first"] is not seen["again"] and len(evaluated) == 3
