"""A shim the bench applies while the harness does not yet run staged entries.

``conformance.case.Case.entry`` looks names up in ``REGISTRY`` only, so every
search of a staged entry (training and inference, Algorithms 11-15) ends in
``KeyError`` although the strategies draw its cases. Until the staged entries
are merged into ``REGISTRY`` (or ``Case.entry`` uses ``registry.entry``),
``ensure_staged_entries()`` makes ``Case.entry`` fall back to
``ftspec.spec.registry.entry`` for staged names, in this process only. It
does nothing once the harness resolves staged names itself, and says whether
it was needed (reports record that).
"""

from __future__ import annotations

__all__ = ["ensure_staged_entries"]

_APPLIED = {"shim": False}


def ensure_staged_entries() -> bool:
    """Apply the fallback if the harness needs it; True when the shim is in effect."""
    from ftspec.conformance import case as case_module
    from ftspec.spec.registry import STAGED, entry
    from ftspec.spec.variants import PAPER

    if _APPLIED["shim"] or not STAGED:
        return _APPLIED["shim"]
    name = next(iter(STAGED))
    try:
        case_module.Case(name, {}, PAPER, {}, {}).entry
        return False  # the harness resolves staged entries itself
    except KeyError:
        pass
    original = case_module.Case.entry

    def resolved(self):  # type: ignore[no-untyped-def]
        try:
            return original.fget(self)
        except KeyError:
            return entry(self.algorithm)

    case_module.Case.entry = property(resolved)
    _APPLIED["shim"] = True
    return True
