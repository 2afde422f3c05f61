"""Named intermediate values: what the spec computes on the way to an output.

The spec's functions call ``record(name, value)`` for the values a user may
want to compare step by step (an attention head's Q, K, V, scores and
weights, a norm's μ and σ, an MLP's hidden layer, each residual sum) and
run their sub-computations inside ``scope(name)``, which prefixes every name
recorded inside with ``name.``; ``step(name, f, ...)`` runs f in its scope
and records f's result under the scope's own name; ``kept(name, value)``
records a value where it is computed and returns it. So one call of
``d_transformer`` records ``embedding``, ``layers.0.attn.heads.1.A``,
``layers.0.norm1.mu``, ``layers.0``, ..., ``final_norm``, ``logits``: the
names of the intermediates contract (docs/plugins.md, "Named
intermediates"), where every name and its meaning is listed.

Nothing is recorded unless a caller asks for it: ``record`` and ``scope``
look at one context variable and return (a ``with`` on a shared object
that does nothing), so the spec's arithmetic, and its cost, are those of
the plain code. A caller collects the values with::

    with recorded() as values:
        out = evaluate(...)
    # values: {name: value}, in the order computed, in the number system used

Only forward computations record (``spec.evaluation.intermediates`` takes
the component, layer and architecture entries): a name recorded twice is a
naming mistake and raises. Recording never changes the arithmetic: no
value is computed for the recorder alone except copies of lists, and
assembling a matrix from columns already computed, so the Monte Carlo
lanes of an evaluation are the same recorded or not.
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, TypeVar

__all__ = ["kept", "record", "recorded", "recording", "scope", "step"]

T = TypeVar("T")


class _Recorder:
    __slots__ = ("values", "prefix")

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.prefix: list[str] = []

    def name(self, name: str) -> str:
        return ".".join(self.prefix + [name])


_current: contextvars.ContextVar[Optional[_Recorder]] = contextvars.ContextVar("ftspec_spec_recorder",
                                                                                 default=None)


class _Nothing:
    """The context manager ``scope`` returns when nothing is recorded."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


_NOTHING = _Nothing()


class _Scope:
    __slots__ = ("recorder", "name")

    def __init__(self, recorder: _Recorder, name: str) -> None:
        self.recorder, self.name = recorder, name

    def __enter__(self) -> None:
        self.recorder.prefix.append(self.name)

    def __exit__(self, *exc: Any) -> None:
        self.recorder.prefix.pop()


def recording() -> bool:
    """Whether a caller is collecting intermediates (``recorded``)."""
    return _current.get() is not None


def _copy(value: Any) -> Any:
    """The nested lists of ``value`` copied (numbers shared: every number system's are immutable)."""
    if isinstance(value, (list, tuple)):
        return [_copy(v) for v in value]
    return value


def record(name: str, value: Any) -> None:
    """Keep ``value`` (a number or nested lists of numbers) as the intermediate ``name`` of the
    current scope. A no-op unless a caller is recording."""
    r = _current.get()
    if r is None:
        return
    full = r.name(name)
    if full in r.values:
        raise RuntimeError(f"spec intermediates: {full!r} recorded twice (a naming mistake in the spec)")
    r.values[full] = _copy(value)


def kept(name: str, value: T) -> T:
    """``record(name, value)``, returning ``value`` (for a value recorded where it is computed)."""
    if _current.get() is not None:
        record(name, value)
    return value


def scope(name: str) -> Any:
    """A context manager: names recorded inside are ``name.<their name>``. A no-op unless recording."""
    r = _current.get()
    return _NOTHING if r is None else _Scope(r, name)


def step(name: str, f: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """f(*args, **kwargs) inside ``scope(name)``, its result recorded as ``name``."""
    r = _current.get()
    if r is None:
        return f(*args, **kwargs)
    with _Scope(r, name):
        out = f(*args, **kwargs)
    record(name, out)
    return out


@contextmanager
def recorded() -> Iterator[dict[str, Any]]:
    """Collect every intermediate recorded inside: yields the dict that fills, {name: value} in the
    order computed. An inner ``recorded`` collects its own (the outer one sees none of them)."""
    r = _Recorder()
    token = _current.set(r)
    try:
        yield r.values
    finally:
        _current.reset(token)
