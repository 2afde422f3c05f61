"""The one exception type the spec raises for bad input.

Every refusal names the algorithm, the argument, what was expected and what
was given, so that a caller never has to read a traceback to learn which of
its arrays was wrong.
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Iterator

__all__ = ["SpecError", "current_algorithm", "in_algorithm"]

_algorithm: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "ftspec_spec_algorithm", default=None
)


class SpecError(ValueError):
    """Bad input to a spec algorithm.

    Attributes mirror the message: ``algorithm`` (registry name, or the
    function being evaluated), ``argument`` (input, parameter or
    hyperparameter name), ``expected`` and ``given`` (human-readable).
    """

    def __init__(
        self,
        argument: str,
        expected: str,
        given: str,
        *,
        algorithm: str | None = None,
    ) -> None:
        self.algorithm = algorithm or _algorithm.get() or "spec"
        self.argument = argument
        self.expected = expected
        self.given = given
        super().__init__(
            f"{self.algorithm}: argument {argument!r}: expected {expected}; given {given}"
        )


def current_algorithm() -> str | None:
    """Name of the outermost spec algorithm being evaluated, if any."""
    return _algorithm.get()


@contextmanager
def in_algorithm(name: str) -> Iterator[None]:
    """Attribute errors raised inside to ``name`` (the outermost call wins)."""
    if _algorithm.get() is not None:
        yield
        return
    token = _algorithm.set(name)
    try:
        yield
    finally:
        _algorithm.reset(token)
