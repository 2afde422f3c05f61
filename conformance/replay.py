"""Replaying a saved case file against an implementation.

A case file is untrusted input (it may come from anyone): it is validated
by ``casefile.read_case`` before anything is allocated, and the
implementation it names is only shown, never imported; the user names the
one to run. Any dtype or device in the file is checked against the
implementation's own lists before use.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

import numpy as np

from ftspec.impls.discovery import load_target

from .calling import Prepared
from .casefile import read_case
from .execute import Member, examine
from .tolerances import Reference, reference

__all__ = ["ReplayError", "Verdict", "replay"]


@dataclass
class Verdict:
    ok: bool
    text: str
    ratio: float


class ReplayError(ValueError):
    """The replay cannot be made as asked (one-line message)."""


def replay(path: Path | str, *, impl: str, dtype: Optional[str] = None,
           device: Optional[str] = None, timeout: float = 60.0) -> Verdict:
    """Judge ``impl`` (a registered name or ``module:object`` the user gives; never the name the
    file records) on the case in ``path``."""
    case, doc = read_case(path)
    if not impl:
        raise ReplayError(f"{path}: name the implementation to run with --impl (the file records "
                          f"{doc.get('impl')!r}; it is not loaded from the file)")
    implementation = load_target(impl)
    label = impl
    dtype = dtype or doc.get("dtype") or "float64"
    if dtype not in tuple(implementation.dtypes):
        raise ReplayError(f"{path}: {label} does not declare dtype {dtype!r} (it declares "
                          f"{', '.join(implementation.dtypes)})")
    devices = [str(d) for d in implementation.devices()]
    device = device or doc.get("device") or "cpu"
    if device not in devices:
        raise ReplayError(f"{path}: {label} has no device {device!r} (it lists {', '.join(devices) or 'none'})")
    if case.algorithm not in implementation.algorithms:
        raise ReplayError(f"{path}: {label} does not implement {case.algorithm}")
    entry = case.entry
    prepared = Prepared(entry, case.inputs, case.params, dtype)
    ref = reference(entry, prepared.inputs, prepared.params, hyper=case.hyper, variant=case.variant,
                    dtype=dtype, precision=implementation.precision)
    batch: list[tuple[Mapping[str, np.ndarray], Reference]] = []
    for extra in case.batch:
        p = Prepared(entry, extra, case.params, dtype)
        batch.append((p.inputs, reference(entry, p.inputs, p.params, hyper=case.hyper, variant=case.variant,
                                          dtype=dtype, precision=implementation.precision)))
    outcome = examine(Member(label, implementation, device), case, prepared.inputs, prepared.params, ref,
                      dtype=dtype, timeout=timeout, batch=batch)
    recorded = doc.get("impl")
    head = (f"{case.algorithm}: {label} at {dtype} on {device}\n  case: {case.describe()}\n"
            f"  recorded for: {recorded!r} (shown only; the file's implementation is never loaded)")
    if outcome.judgement.ok:
        return Verdict(True, f"{head}\n  conforms (worst error/bound {outcome.judgement.ratio:.3g})",
                       outcome.judgement.ratio)
    lines = [f"  {f.check}: {f.message}" for f in outcome.judgement.findings]
    return Verdict(False, head + "\n" + "\n".join(lines), outcome.judgement.ratio)
