"""Refusals as data, checked: an implementation must refuse what the spec refuses.

Every registry entry lists what its spec refuses (``Entry.refusals``,
``spec/refusals.py``): an out-of-range token, a zero-variance column into a
norm without ε, a query with no key, a sequence longer than ℓ_max, ... For
one member (an implementation on a device), one case the spec accepts and a
dtype, ``check_refusals`` turns the case into each refused one in turn,
rounds it to the dtype, confirms that the spec refuses it there, and calls
the implementation (``execute.call_member``: the call timeout, the NumPy
conversion). How it must refuse is what it declares
(``Implementation.refuses_by``):

- ``"raise"`` (the default): raise, any ``Exception``; returning anything,
  finite numbers or NaN, is a ``refusal`` finding (one that returned NaN is
  told, in the same line, that it may declare ``refuses_by="nan"``), and so
  is ending the process (``SystemExit``) instead of raising, or a
  ``Warning`` that the warnings filters turned into an error (under
  pytest's ``-W error`` NumPy's "invalid value encountered in divide" would
  otherwise pass for a refusal).
- ``"nan"``: a GPU or jit-compiled kernel cannot raise on a value without a
  host check; IEEE arithmetic gives it NaN (0/0 for a constant column into
  a norm without ε). It passes when every output element the refused input
  reaches is NaN (``reach``); a finite number or an infinity there, or an
  output that cannot hold NaN (tokens), is a ``refusal`` finding. Raising is
  accepted too (a shape the framework rejects raises whatever the kernel).

Where the refused input reaches (``reach``): for a query with no key, the
elements the spec itself makes NaN under ``empty_query="nan"``; otherwise
the elements of the spec's binary64 outputs that move when the elements
the refusal changed (a column, a token) are moved instead to other values
the spec accepts (``PROBES`` perturbations: reals by a random amount, token
IDs to other IDs of the same input, one of several mask entries flipped).
Where no such move can be made (the refused case has other sizes: a
sequence longer than ℓ_max, a width of 1 under unbiased variance), every
element of every output must be NaN.

A refusal is not checked (``skipped``, with the reason) where it does not
apply: the variant set does not call for it (its ``when``), the member does
not declare that variant set, the case or the refused case lies outside the
sizes the implementation declares (``Implementation.limits_for``; e.g.
``d_e = 1`` against ``d_e = H*d_attn`` with H = 2), the case cannot be made
into a refused one, or the spec accepts the refused case once rounded to
the dtype.

``Member.refusals`` remembers the refusals a member has passed for an
(algorithm, dtype, variant set): a search checks each once. One that has
failed there once is checked again on every later case, whatever those
cases do, so re-running the failing case (Hypothesis shrinking it, or
replaying it) fails again rather than being skipped.

The runner's hook is ``check_refusals_into(outcome, member, case, dtype,
timeout=...)`` after ``execute.examine``: it adds the findings to the
outcome's judgement (and ``"refusal"`` to its checks) when the outcome
passed so far.

A drawn case can also be refused as it is: a query with no key it may attend
to under ``empty_query="error"`` (``refused_empty_query``). Such a case has no
reference to compare with; the spec's refusal is the expected answer, and
``expect_refusal`` calls the member on it: raising passes, returning is a
``refusal`` finding. The search (conformance/running/runner.py) and the
replay of its case file (conformance/running/replay.py) both judge it so,
so a printed reproducer replays what the search found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from ftspec.spec import SpecError, evaluate
from ftspec.spec.entry import BOOLEAN_KINDS, INTEGER_KINDS
from ftspec.spec.refusals import Refusal, Refused
from ftspec.spec.registry import Entry

from .calling import Prepared, earlier_hang, note_hang
from .case import Case
from .examining import rounded
from .execute import CallTimeout, Member, Outcome, PluginExit, call_member, describe_exception
from .findings import Finding

__all__ = ["PROBES", "REFUSED", "RETURNED", "SEARCH_EXCLUDES", "SKIPPED", "TIMEOUT", "TRANSFORMED", "RefusalCheck",
           "answered_refusals", "check_refusals", "check_refusals_into", "expect_refusal", "reach",
           "refusal_findings", "refused_case", "refused_empty_query"]

#: statuses of a ``RefusalCheck``
REFUSED, RETURNED, TIMEOUT, SKIPPED = "refused", "returned", "timeout", "skipped"


@dataclass
class RefusalCheck:
    """One refusal of one entry on one member: what happened, and the finding when it failed."""

    refusal: str  # the refusal's name (spec/refusals.py)
    status: str  # refused | returned | timeout | skipped
    detail: str  # what the implementation raised, the finding's message, or why it was skipped
    finding: Optional[Finding] = None

    @property
    def ok(self) -> bool:
        return self.finding is None


def _arrays(entry: Entry, refused: Refused) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The refused case as NumPy arrays of the harness's dtypes (tokens int64, masks bool, reals float64)."""
    kinds = {s.name: s.kind for s in entry.inputs}

    def array(value: Any, kind: Any) -> np.ndarray:
        if kind in INTEGER_KINDS:
            return np.asarray(value, dtype=np.int64)
        if kind in BOOLEAN_KINDS:
            return np.asarray(value, dtype=np.bool_)
        return np.asarray(value, dtype=np.float64)

    inputs = {k: array(v, kinds[k]) for k, v in refused.inputs.items()}
    params = {k: np.asarray(v, dtype=np.float64) for k, v in refused.params.items()}
    return inputs, params


def refused_case(case: Case, name: str) -> Optional[Case]:
    """``case`` transformed as its entry's refusal ``name`` says (the case a ``refusal`` finding is
    about), or None when that refusal does not turn this case into one the spec refuses."""
    entry = case.entry
    for refusal in entry.refusals:
        if refusal.name != name:
            continue
        refused = refusal.apply(entry, case.hyper, case.variant, case.spec_inputs(), case.spec_params())
        if refused is None:
            return None
        inputs, params = _arrays(entry, refused)
        return Case(case.algorithm, dict(refused.hyper), case.variant, inputs, params, [], case.style)
    return None


def _returned(refusal: Refusal, message: str) -> RefusalCheck:
    """The implementation answered a case the spec refuses: a ``refusal`` finding naming the refusal."""
    return RefusalCheck(refusal.name, RETURNED, message, Finding("refusal", message, TRANSFORMED, refusal=refusal.name))


def _skip(refusal: Refusal, why: str) -> RefusalCheck:
    return RefusalCheck(refusal.name, SKIPPED, why)


#: perturbations of the refused elements whose effect on the spec's outputs is where they reach
PROBES = 2

Arrays = Mapping[str, np.ndarray]


def _evaluated(entry: Entry, inputs: Arrays, params: Arrays, hyper: Mapping[str, int], variant: Any
               ) -> Optional[dict[str, np.ndarray]]:
    """The spec's binary64 outputs (None where it refuses)."""
    try:
        raw = evaluate(entry.name, {k: np.asarray(v).tolist() for k, v in inputs.items()},
                       {k: np.asarray(v).tolist() for k, v in params.items()}, hyper=dict(hyper), variant=variant)
    except (SpecError, ValueError, KeyError, ZeroDivisionError, OverflowError):
        return None
    return {k: np.asarray(v) for k, v in raw.items()}


def _moved(a: np.ndarray, r: np.ndarray, changed: np.ndarray, probe: int, hyper: Mapping[str, int]
           ) -> Optional[np.ndarray]:
    """``a`` with the ``changed`` elements (where the refused ``r`` differs) moved to other values than
    ``a``'s and ``r``'s: reals by a random amount of their scale, integers to another value the same
    input holds (token IDs: another ID below N_V), booleans one of several flipped as ``r`` has it
    (None: no such move)."""
    rng = np.random.default_rng(probe)
    out = a.copy()
    where = np.argwhere(changed)
    if a.dtype.kind == "f":
        scale = max(float(np.max(np.abs(a))) if a.size else 0.0, 1e-3)
        step = scale * (0.25 + rng.random(len(where)))
        # odd probes flip the sign as well: a norm over one entry (d_e = 1) keeps only the sign of
        # its input, so a shift alone moved no output and every element was taken as reached
        # (a correct NaN-refusing RMSnorm failed on its other, finite, column: 2026-12-07)
        out[changed] = -a[changed] - np.copysign(step, a[changed]) if probe % 2 else a[changed] + step
        return out
    if a.dtype.kind in "iu":
        values = [int(v) for v in np.unique(a)]
        if len(values) < 2 and int(hyper.get("N_V", 0)) > 1:
            values = list(range(int(hyper["N_V"])))
        for idx in map(tuple, where):
            others = [v for v in values if v != int(a[idx]) and v != int(r[idx])]
            if not others:
                return None
            out[idx] = others[int(rng.integers(len(others)))]
        return out
    if a.dtype.kind == "b" and len(where) >= 2:  # one flipped as the refusal has it, the others kept
        idx = tuple(where[probe % len(where)])
        out[idx] = r[idx]
        return out
    return None


def reach(entry: Entry, variant: Any, hyper: Mapping[str, int], refused: tuple[Arrays, Arrays],
          accepted: Optional[tuple[Arrays, Arrays, Mapping[str, int]]] = None) -> Optional[dict[str, np.ndarray]]:
    """Per output of ``entry``, the elements (bool arrays) that the refused input reaches, for a case
    the spec refuses (``refused``: its inputs and parameters, at ``hyper``), made from the case the
    spec accepts ``accepted`` (its inputs, parameters and sizes; None: drawn refused as it is); None
    where no probe could find them: then every element counts (the module docstring)."""
    inputs, params = refused
    if "empty_query" in entry.switches and getattr(variant, "empty_query", None) == "error":
        # the spec's own NaN for a query with no key
        got = _evaluated(entry, inputs, params, hyper, variant.replace(empty_query="nan"))
        if got is not None:
            found = {k: np.isnan(v) if v.dtype.kind == "f" else np.zeros(v.shape, bool) for k, v in got.items()}
            if any(v.any() for v in found.values()):
                return found
    if accepted is None:
        return None
    a_inputs, a_params, a_hyper = accepted
    same = (dict(a_hyper) == dict(hyper) and set(a_inputs) == set(inputs) and set(a_params) == set(params)
            and all(np.shape(a_inputs[k]) == np.shape(inputs[k]) for k in inputs)
            and all(np.shape(a_params[k]) == np.shape(params[k]) for k in params))
    if not same:
        return None
    base = _evaluated(entry, a_inputs, a_params, hyper, variant)
    if base is None:
        return None
    found = {k: np.zeros(v.shape, bool) for k, v in base.items()}
    probed = False
    for probe in range(PROBES):
        moved: list[dict[str, np.ndarray]] = []
        for accepted_arrays, refused_arrays in ((a_inputs, inputs), (a_params, params)):
            group = {}
            for k, a in accepted_arrays.items():
                a, r = np.asarray(a), np.asarray(refused_arrays[k])
                changed = a != r
                if changed.any():
                    new = _moved(a, r, changed, probe, hyper)
                    if new is None:
                        return None
                    a = new
                group[k] = a
            moved.append(group)
        got = _evaluated(entry, moved[0], moved[1], hyper, variant)
        if got is None or set(got) != set(base):
            continue
        probed = True
        for k, v in got.items():
            if v.shape != base[k].shape:
                return None
            with np.errstate(invalid="ignore"):
                found[k] |= (v != base[k]) & ~(np.isnan(v) & np.isnan(base[k]) if v.dtype.kind == "f" else False)
    if not probed or not any(v.any() for v in found.values()):
        return None
    return found


def _not_nan(outputs: Mapping[str, np.ndarray], reached: Optional[Mapping[str, np.ndarray]]) -> str:
    """The first output element the refused input reaches that is not NaN, in words ("" when every
    one is NaN; ``reached`` None: every element of every output)."""
    for name, got in outputs.items():
        g = np.asarray(got)
        where = np.ones(g.shape, bool) if reached is None else reached.get(name)
        if where is None:
            continue
        if where.shape != g.shape:
            where = np.ones(g.shape, bool)
        if not where.any():
            continue
        if g.dtype.kind != "f":
            return f"output {name} holds {g.dtype} values, which cannot be NaN (such an output must raise)"
        bad = where & ~np.isnan(g)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            return f"{name}{list(idx)} = {float(g[idx]):.6g}"
    return ""


def _has_nan(outputs: Mapping[str, np.ndarray]) -> bool:
    return any(np.asarray(v).dtype.kind == "f" and bool(np.isnan(np.asarray(v)).any()) for v in outputs.values())


def _answered(m: Member, entry: Entry, name: str, spec_says: str, outputs: Mapping[str, np.ndarray],
              reached: Callable[[], Optional[dict[str, np.ndarray]]]) -> tuple[str, str]:
    """(status, message) of a member that returned on a case the spec refuses (refusal ``name``; the
    spec's reason ``spec_says``): REFUSED where it declares ``refuses_by="nan"`` and every element
    the refused input reaches (``reached()``) is NaN, else RETURNED with the finding's one line."""
    if m.impl.refuses_by_for(entry.name) == "nan":
        bad = _not_nan(outputs, reached())
        if not bad:
            return REFUSED, f"returned NaN where the spec refuses ({name}), as declared (refuses_by='nan')"
        return RETURNED, (f"returned a number where the spec refuses: {name} ({spec_says}): {bad}; declared "
                          "refuses_by='nan', so every output the refused input reaches must be NaN")
    if _has_nan(outputs):
        return RETURNED, (f"returned NaN where the spec refuses: {name} ({spec_says}); the implementation must "
                          "raise, or declare refuses_by='nan' if this is how your kernel refuses (docs/plugins.md)")
    return RETURNED, f"returned a result for a case the spec refuses: {name} ({spec_says}); the implementation must " \
                     "raise"


def _check_one(m: Member, entry: Entry, case: Case, refusal: Refusal, dtype: str, timeout: float,
               spec_inputs: Mapping[str, Any], spec_params: Mapping[str, Any]) -> RefusalCheck:
    impl, variant = m.impl, case.variant
    if not refusal.applies(variant):
        return _skip(refusal, f"applies only where {refusal.condition()}")
    if not impl.supports(variant, entry.name):
        return _skip(refusal, f"the implementation does not declare the variant set {variant.describe()}")
    limits = impl.limits_for(entry.name)
    if not limits.admits(case.hyper):
        return _skip(refusal, f"the case lies outside the implementation's limits ({limits.describe()})")
    refused = refusal.apply(entry, case.hyper, variant, spec_inputs, spec_params)
    if refused is None:
        return _skip(refusal, "this case cannot be made into one the spec refuses this way")
    if not limits.admits(refused.hyper):
        changed = ", ".join(f"{k} = {v}" for k, v in refused.hyper.items() if case.hyper.get(k) != v)
        return _skip(refusal, f"{changed} lies outside the implementation's limits ({limits.describe()})")
    inputs, params = _arrays(entry, refused)
    prepared = rounded(entry, dtype, inputs=inputs, params=params)
    try:
        evaluate(entry.name, prepared.spec_inputs(), prepared.spec_params(), hyper=refused.hyper, variant=variant)
    except SpecError as exc:
        reason = str(exc)
    else:
        return _skip(refusal, f"the spec accepts the refused case once rounded to {dtype}")
    try:
        outputs, _ = call_member(m, entry, prepared.inputs, prepared.params, case, dtype, timeout, False,
                                 hyper=refused.hyper)
    except CallTimeout as exc:
        message = f"a call on a case the spec refuses ({refusal.name}): {exc}"
        return RefusalCheck(refusal.name, TIMEOUT, message, Finding("timeout", message))
    except PluginExit as exc:
        message = (f"{describe_exception(exc)} on a case the spec refuses ({refusal.name}); the implementation "
                   "must raise an ordinary exception")
        return _returned(refusal, message)
    except Warning as exc:  # a warning the filters made an error (pytest's "error"): it computed on
        message = (f"{describe_exception(exc)} (a warning the warnings filter turned into an error) on a case "
                   f"the spec refuses ({refusal.name}); the implementation must raise an exception of its own")
        return _returned(refusal, message)
    except Exception as exc:  # noqa: BLE001 - raising, whatever the exception, is what the spec asks for
        return RefusalCheck(refusal.name, REFUSED, describe_exception(exc))
    status, message = _answered(m, entry, refusal.name, f"the spec: {reason}", outputs,
                                lambda: reach(entry, variant, refused.hyper, (inputs, params),
                                              (case.inputs, case.params, case.hyper)))
    return RefusalCheck(refusal.name, REFUSED, message) if status == REFUSED else _returned(refusal, message)


def check_refusals(m: Member, case: Case, dtype: str, *, timeout: float,
                   remember: bool = False, exclude: frozenset[str] = frozenset()) -> list[RefusalCheck]:
    """Every refusal of ``case``'s entry on member ``m`` at ``dtype`` (``case``: one the spec accepts,
    before rounding). Nothing when the member lacks the algorithm or the dtype, or when a call of
    it hung before (``calling.skipping_hangs``). ``remember``: skip the refusals the member has
    passed before for this algorithm, dtype and variant set, and remember the ones it passes."""
    entry = case.entry
    if entry.name not in m.impl.algorithms or dtype not in m.impl.dtypes:
        return []
    if earlier_hang(m.label, entry.name, m.device) is not None:
        return []
    spec_inputs, spec_params = case.spec_inputs(), case.spec_params()
    out = []
    for refusal in entry.refusals:
        if refusal.name in exclude:
            continue
        key = (entry.name, dtype, case.variant.hash, refusal.name)
        if remember and m.refusals.get(key):
            out.append(_skip(refusal, "passed before in this search"))
            continue
        result = _check_one(m, entry, case, refusal, dtype, timeout, spec_inputs, spec_params)
        out.append(result)
        if remember and result.status != SKIPPED:
            m.refusals[key] = m.refusals.get(key, True) and result.ok  # a failure is never forgotten
        if result.status == TIMEOUT:  # the rest would only wait for the same hang
            note_hang(m.label, entry.name, m.device, f"hung at {dtype}: {result.detail}")
            break
    return out


def refusal_findings(m: Member, case: Case, dtype: str, *, timeout: float, remember: bool = False) -> list[Finding]:
    """The findings of ``check_refusals`` (empty: the member refused everything it was asked to)."""
    return [r.finding for r in check_refusals(m, case, dtype, timeout=timeout, remember=remember)
            if r.finding is not None]


#: the ``output`` of a refusal finding: the case recorded is the one the spec accepts, which passed;
#: the finding is about that case transformed as the refusal says (replay transforms it again), so
#: no diagnosis of the recorded case's values applies
TRANSFORMED = "(the case, transformed as the spec refuses)"

#: refusals the searches leave to the sweep of tests/conformance/core/test_refusals.py: the shape
#: contract. At an axis of length 1 (d_e = 1, d_z = 1) a parameter one entry longer broadcasts in
#: every NumPy-semantics framework, so a plugin refuses it only by restating the spec's shape
#: schema; the bundled JAX plugin does not (measured: attention, mh_attention, unembedding and
#: basic_single_query_attention at d = 1), and a search would fail it on the shape contract, not
#: on its numbers. The value refusals (ranges, zero variance, lengths) are searched.
SEARCH_EXCLUDES = frozenset({"a parameter one entry too long"})


def check_refusals_into(outcome: Outcome, m: Member, case: Case, dtype: str, *, timeout: float) -> None:
    """The runner's hook: after ``execute.examine`` passed a case, check the refusals of its entry
    (once per member, algorithm, dtype and variant set: ``Member.refusals``), less
    ``SEARCH_EXCLUDES``, and add the findings to ``outcome``; a hang marks the outcome timed out."""
    if not outcome.judgement.ok or outcome.timed_out:
        return
    results = check_refusals(m, case, dtype, timeout=timeout, remember=True, exclude=SEARCH_EXCLUDES)
    for r in results:
        if r.status == REFUSED:
            outcome.checks.append("refusal")
        if r.finding is not None:
            outcome.judgement.findings.append(r.finding)
            outcome.timed_out = outcome.timed_out or r.status == TIMEOUT


def refused_empty_query(entry: Entry, case: Case, exc: SpecError) -> bool:
    """Whether the spec refused ``case`` because a query has no key under ``empty_query="error"``:
    a refusal an implementation must share (it raises too), unlike input the strategies should not
    have drawn."""
    if "empty_query" not in entry.switches or getattr(case.variant, "empty_query", None) != "error":
        return False
    mask = case.inputs.get("Mask")
    if mask is None or getattr(exc, "argument", None) != "Mask":
        return False
    mask = np.asarray(mask, dtype=bool)
    return mask.ndim == 2 and not mask.any(axis=0).all()


def _empty_query_name(entry: Entry) -> Optional[str]:
    """The name of ``entry``'s refusal of a query with no key in Mask (spec/refusals.py), if it lists one:
    a drawn empty query and the transformed one are one kind of refusal."""
    return next((r.name for r in entry.refusals if r.argument == "Mask"), None)


def expect_refusal(m: Member, case: Case, prepared: Prepared, refusal: SpecError, dtype: str, *,
                   timeout: float) -> RefusalCheck:
    """Call member ``m`` on ``case``, which the spec refuses as it is (``refused_empty_query``;
    ``refusal``: the spec's SpecError): raising, any ``Exception``, is the expected answer; returning
    (or ending the process, or a warning made an error, as in ``_check_one``) is a ``refusal``
    finding; a hang is a ``timeout`` finding. The runner and the case-file replay both judge it here."""
    entry = case.entry
    name = _empty_query_name(entry) or "a query with no key"
    returned = (f"returned a result for a case the spec refuses: {refusal.given} of Mask under "
                "empty_query='error' (a query with no key it may attend to); the implementation must raise")
    try:
        outputs, _ = call_member(m, entry, prepared.inputs, prepared.params, case, dtype, timeout, False)
    except CallTimeout as exc:
        message = f"a call on a case the spec refuses ({name}): {exc}"
        return RefusalCheck(name, TIMEOUT, message, Finding("timeout", f"call {exc}"))
    except PluginExit as exc:
        message = f"{describe_exception(exc)} on a case the spec refuses ({name}); the implementation must raise"
        return RefusalCheck(name, RETURNED, message, Finding("refusal", message, refusal=name))
    except Warning as exc:  # a warning the filters made an error: it computed on (as ``_check_one``)
        message = (f"{describe_exception(exc)} (a warning the warnings filter turned into an error) on a case "
                   f"the spec refuses ({name}); the implementation must raise an exception of its own")
        return RefusalCheck(name, RETURNED, message, Finding("refusal", message, refusal=name))
    except Exception as exc:  # noqa: BLE001 - raising, whatever the exception, is what the spec asks for
        return RefusalCheck(name, REFUSED, describe_exception(exc))
    if m.impl.refuses_by_for(entry.name) == "raise" and not _has_nan(outputs):
        return RefusalCheck(name, RETURNED, returned, Finding("refusal", returned, refusal=name))
    status, message = _answered(m, entry, name, f"{refusal.given} of Mask under empty_query='error'", outputs,
                                lambda: reach(entry, case.variant, case.hyper, (prepared.inputs, prepared.params)))
    if status == REFUSED:
        return RefusalCheck(name, REFUSED, message)
    return RefusalCheck(name, RETURNED, message, Finding("refusal", message, refusal=name))


def answered_refusals(m: Member, case: Case, dtype: str, *, timeout: float,
                      found: Sequence[Finding] = ()) -> list[Finding]:
    """Every refusal of ``case``'s entry that member ``m`` answers instead of raising, each kind once (by
    refusal name), in the order found: the ``refusal`` findings ``found`` (the search's), then those a
    fresh check of every refusal on ``case`` adds (``check_refusals``, less ``SEARCH_EXCLUDES``; not
    remembered). One certify round then reports every refusal gap of a cell, not one per round."""
    out: dict[str, Finding] = {}
    for f in found:
        if f.check == "refusal":
            out.setdefault(f.refusal or f.message, f)
    for r in check_refusals(m, case, dtype, timeout=timeout, exclude=SEARCH_EXCLUDES):
        if r.status == RETURNED and r.finding is not None:
            out.setdefault(r.refusal, r.finding)
    return list(out.values())
