"""Replaying a saved case file against an implementation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ftspec.impls.discovery import load_target

from .calling import Prepared
from .casefile import read_case
from .execute import Member, examine
from .tolerances import reference

__all__ = ["Verdict", "replay"]


@dataclass
class Verdict:
    ok: bool
    text: str
    ratio: float


def replay(path: Path | str, *, impl: Optional[str] = None, dtype: Optional[str] = None,
           device: Optional[str] = None, timeout: float = 60.0) -> Verdict:
    """Judge ``impl`` (default: the one recorded) on the case in ``path``."""
    case, doc = read_case(path)
    label = impl or doc.get("impl")
    dtype = dtype or doc.get("dtype") or "float64"
    device = device or doc.get("device") or "cpu"
    if not label:
        raise ValueError(f"{path}: no implementation recorded; pass --impl")
    implementation = load_target(label)
    entry = case.entry
    prepared = Prepared(entry, case.inputs, case.params, dtype)
    ref = reference(entry, prepared.inputs, prepared.params, hyper=case.hyper, variant=case.variant,
                    dtype=dtype, precision=implementation.precision)
    batch = []
    for extra in case.batch:
        p = Prepared(entry, extra, case.params, dtype)
        batch.append((p.inputs, reference(entry, p.inputs, p.params, hyper=case.hyper, variant=case.variant,
                                          dtype=dtype, precision=implementation.precision)))
    outcome = examine(Member(label, implementation, device), case, prepared.inputs, prepared.params, ref,
                      dtype=dtype, timeout=timeout, batch=batch)
    head = f"{case.algorithm}: {label} at {dtype} on {device}\n  case: {case.describe()}"
    if outcome.judgement.ok:
        return Verdict(True, f"{head}\n  conforms (worst error/bound {outcome.judgement.ratio:.3g})",
                       outcome.judgement.ratio)
    lines = [f"  {f.check}: {f.message}" for f in outcome.judgement.findings]
    return Verdict(False, head + "\n" + "\n".join(lines), outcome.judgement.ratio)
