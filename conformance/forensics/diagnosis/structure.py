"""The shrunk case's salient structure in words (an empty query column, a constant column, ...)."""

from __future__ import annotations


import numpy as np

from ftspec.spec.entry import Kind
from ftspec.spec.registry import Entry

from ...core.case import Case


def structure(entry: Entry, case: Case, limit: int = 8) -> list[str]:
    """The shrunk case's salient features: sizes of 1, empty or full mask columns, constant or
    zero columns, repeated tokens, ties in a distribution, zero parameters."""
    out: list[str] = []
    kinds = {s.name: s.kind for s in entry.inputs}
    for name, value in case.inputs.items():
        a = np.asarray(value)
        kind = kinds.get(name)
        if kind == Kind.MASK and a.ndim == 2 and a.size:
            out.extend(_mask_words(name, a.astype(bool)))
        elif kind == Kind.TOKEN and a.size:
            out.extend(_token_words(name, a))
        elif a.dtype.kind == "f" and a.size:
            out.extend(_real_words(name, a))
    for name, value in case.params.items():
        a = np.asarray(value)
        if a.size and not np.any(a):
            out.append(f"parameter {name} is all zeros")
    ones = [k for k, v in case.hyper.items() if v == 1]
    if ones:  # sizes last: the features above are usually what separates two conventions
        out.append(" = ".join(ones) + " = 1")
    if len(out) > limit:
        out = out[:limit] + [f"and {len(out) - limit} more"]
    return out


def _mask_words(name: str, m: np.ndarray) -> list[str]:
    words = []
    empty = [int(t) for t in np.flatnonzero(~m.any(axis=0))]
    if empty:
        words.append(f"{name} query column{'s' if len(empty) > 1 else ''} {_list(empty)} "
                     f"{'are' if len(empty) > 1 else 'is'} empty (no key to attend to)")
    if m.all():
        words.append(f"{name} is all True (every query sees every key)")
    return words


def _token_words(name: str, a: np.ndarray) -> list[str]:
    flat = a.reshape(-1)
    values, counts = np.unique(flat, return_counts=True)
    rep = [int(v) for v, c in zip(values, counts) if c > 1]
    return [f"token{'s' if len(rep) > 1 else ''} {_list(rep)} repeated in {name}"] if rep else []


def _real_words(name: str, a: np.ndarray) -> list[str]:
    words = []
    if not np.all(np.isfinite(a)):
        words.append(f"{name} holds non-finite values")
        return words
    if a.ndim == 1:
        if a.size > 1 and np.unique(a).size < a.size:
            words.append(f"ties in {name} (repeated values)")
        if not np.any(a):
            words.append(f"{name} is all zeros")
        return words
    if a.ndim != 2:
        return words
    rows, cols = a.shape
    if rows == 1:
        words.append(f"{name} has one row (each column constant)")
        return words
    zero = [int(t) for t in np.flatnonzero(~a.any(axis=0))]
    if zero:
        words.append(f"{name} column{'s' if len(zero) > 1 else ''} {_list(zero)} all zeros")
    spread = a.max(axis=0) - a.min(axis=0)
    scale = np.maximum(np.abs(a).max(axis=0), np.finfo(float).tiny)
    const = [int(t) for t in np.flatnonzero((spread == 0) & a.any(axis=0))]
    if const:
        words.append(f"{name} column{'s' if len(const) > 1 else ''} {_list(const)} constant (zero variance)")
    near = [int(t) for t in np.flatnonzero((spread > 0) & (spread <= 1e-3 * scale))]
    if near:
        words.append(f"{name} column{'s' if len(near) > 1 else ''} {_list(near)} nearly constant "
                     f"(spread at most 1e-3 of the values)")
    if cols > 1 and np.all(a == a[:, :1]):
        words.append(f"every column of {name} is the same")
    return words


def _list(xs: list[int], limit: int = 6) -> str:
    shown = ", ".join(str(x) for x in xs[:limit])
    return shown + (f", ... ({len(xs)} in all)" if len(xs) > limit else "")
