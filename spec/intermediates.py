"""Named intermediate values: what the spec computes on the way to an output.

A user comparing an implementation step by step reads the values the spec computes on the way
(an attention head's Q, K, V, scores and weights, a norm's μ and σ, an MLP's hidden layer, each
residual sum), named hierarchically: one call of ``d_transformer`` records ``embedding``,
``layers.0.attn.heads.1.A``, ``layers.0.norm1.mu``, ``layers.0``, ..., ``final_norm``,
``logits``: the names of the intermediates contract (docs/plugins.md, "Named intermediates"),
where every name and its meaning is listed.

How the names are attached: around each spec function, not on its numbered lines. The spec's
algorithms are decorated with ``@algorithm(name, names=...)``; ``names`` is a function of the
call's own arguments (read only while a caller records) that returns the declaration of the
function's intermediates: for each sub-algorithm it calls (a decorated function: ``mh_attention``,
``norm_columns``, ``mlp``, the residual sum ``linalg.add``, ``add_bias``, ...), the names of its
calls in the order this function makes them, as a tuple (None: that call is no intermediate;
calls past the tuple's end are none either) or a pattern with ``{}`` for the call's index
(``"layers.{}"``). So a layer's body reads as Algorithm 10's lines (spec/layers.py ``_layer``),

    X̃[:, t] ← layer_norm(X[:, t] | γ¹, β¹)      X_tilde = norm(X, W.gamma1, W.beta1)  # line 5
    X ← X + MHAttention(X̃, X̃ | W_l, Mask)      X = add(X, MHAttention(X_tilde, X_tilde))  # line 6

and its declaration (``layers._sublayer_names``) says that its calls of ``norm_columns`` are
``norm1`` and ``norm2``, of ``mh_attention`` ``attn``, of ``mlp`` ``mlp``, of ``add`` ``res1`` and
``res2``. A named call runs in its own scope
(what the callee records is named ``<name>.<its name>``: ``attn.heads.0.Q``) and its result is
recorded under the name when it returns, so values come in the order computed. Only calls the
declaring function makes itself are named: a decorated function called inside a named one (the
``add`` inside an MLP) belongs to that one's declaration, not to its caller's; plain helpers
(closures such as a layer's ``MLP`` and ``norm``, private functions) are transparent.

Why a declaration per sub-call rather than capturing local variables (a trace function reading
``X`` as it is rebound): the paper's symbols are rebound line after line (X four times in a
layer, Q by QK-norm, RoPE and the scale placements), so a name for "the value of X after line 6"
would have to count assignments, and a trace function slows every frame of the evaluation and
breaks under debuggers and coverage tools. A call of a named sub-algorithm is what each line of
the paper is; counting the calls of each sub-algorithm (not all calls in one sequence) keeps a
declaration short and indifferent to the calls it does not name (masks, padding). Values a leaf
algorithm computes inside one line (an attention head's scores and weights, a norm's μ and σ, the
embedding's token columns) are recorded where they are computed, with ``record``, on lines of
their own. A declaration is read only while recording, and only the declaring function's calls of
the declared sub-algorithms are counted, so an order that depends on the variant (post-LN names
the attention before ``norm1``, pre-LN after it) needs no declaration of its own: the k-th call of
``norm_columns`` is ``norm{k}`` in both; where the set of calls differs (a sandwich's output
norms, a final norm that is off), the declaration is a function of the variant.

Nothing is recorded unless a caller asks for it: a decorated call looks at one context variable
for the recorder (and, for a named algorithm, one for the error context, as the ``with
errors.in_algorithm`` block it replaces did) and runs the plain function, so the spec's
arithmetic, and its cost, are those of the plain code. A caller collects the values with::

    with recorded() as values:
        out = evaluate(...)
    # values: {name: value}, in the order computed, in the number system used

Only forward computations record (``spec.evaluation.intermediates`` takes the component, layer and
architecture entries): a name recorded twice is a naming mistake and raises. Recording never
changes the arithmetic: no value is computed for the recorder alone except copies of lists, and
assembling a matrix from columns already computed, so the Monte Carlo lanes of an evaluation are
the same recorded or not.

``step``, ``kept`` and ``scope`` name a value by a call on the line itself; the spec no longer
uses them (a declaration names it instead), and they stay for callers outside the paper's lines.
"""

from __future__ import annotations

import contextvars
import functools
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, TypeVar, Union

from .errors import _algorithm

__all__ = ["Names", "algorithm", "intermediate", "kept", "record", "recorded", "recording", "scope", "step",
           "with_statistics"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: a declaration: for each sub-algorithm (a decorated function), the names of its calls in order
#: (None: not an intermediate), or one pattern whose ``{}`` is the call's index among them
Names = Mapping[Callable[..., Any], Union[str, Sequence[Optional[str]]]]


class _Frame:
    """One decorated call while recording: its declaration and how many calls of each
    sub-algorithm it has made so far."""

    __slots__ = ("names", "seen")

    def __init__(self, names: Optional[Names]) -> None:
        self.names = names
        self.seen: dict[Callable[..., Any], int] = {}

    def name_of(self, callee: Callable[..., Any]) -> Optional[str]:
        """The name of this frame's next call of ``callee``, if it declares one."""
        if self.names is None:
            return None
        declared = self.names.get(callee)
        if declared is None:
            return None
        k = self.seen.get(callee, 0)
        self.seen[callee] = k + 1
        if isinstance(declared, str):
            return declared.format(k)
        return declared[k] if k < len(declared) else None


class _Recorder:
    __slots__ = ("values", "prefix", "frames")

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.prefix: list[str] = []
        self.frames: list[_Frame] = []

    def name(self, name: str) -> str:
        return ".".join(self.prefix + [name])

    def keep(self, name: str, value: Any) -> None:
        full = self.name(name)
        if full in self.values:
            raise RuntimeError(f"spec intermediates: {full!r} recorded twice (a naming mistake in the spec)")
        self.values[full] = _copy(value)

    def call(self, callee: Callable[..., Any], algorithm: Optional[str], names: Optional[Callable[..., Names]],
             f: Callable[..., T], args: Any, kwargs: Any) -> T:
        """``f(*args, **kwargs)`` (the decorated ``callee``) named as its caller declares."""
        label = self.frames[-1].name_of(callee) if self.frames else None
        self.frames.append(_Frame(names(*args, **kwargs) if names is not None else None))
        if label is not None:
            self.prefix.append(label)
        try:
            out = _attributed(algorithm, f, args, kwargs)
        finally:
            self.frames.pop()
            if label is not None:
                self.prefix.pop()
        if label is not None:
            self.keep(label, out)
        return out


_current: contextvars.ContextVar[Optional[_Recorder]] = contextvars.ContextVar("ftspec_spec_recorder",
                                                                                 default=None)


def _attributed(algorithm: Optional[str], f: Callable[..., T], args: Any, kwargs: Any) -> T:
    """f(*args, **kwargs) with errors attributed to ``algorithm`` unless an outer call is (the
    outermost call wins: ``errors.in_algorithm``)."""
    if algorithm is None or _algorithm.get() is not None:
        return f(*args, **kwargs)
    token = _algorithm.set(algorithm)
    try:
        return f(*args, **kwargs)
    finally:
        _algorithm.reset(token)


def algorithm(name: Optional[str], names: Optional[Callable[..., Names]] = None) -> Callable[[F], F]:
    """Decorate a spec algorithm: errors raised inside are attributed to ``name`` (the outermost
    decorated call wins, as ``errors.in_algorithm``; None attributes nothing), its result may be
    named by its caller's declaration, and ``names`` (called with the same arguments, only while
    recording) declares the names of the sub-algorithm calls it makes (module docstring)."""
    def decorate(f: F) -> F:
        @functools.wraps(f)
        def run(*args: Any, **kwargs: Any) -> Any:
            r = _current.get()
            if r is not None:
                return r.call(run, name, names, f, args, kwargs)
            if name is None or _algorithm.get() is not None:  # attributed already (the outermost call wins)
                return f(*args, **kwargs)
            token = _algorithm.set(name)
            try:
                return f(*args, **kwargs)
            finally:
                _algorithm.reset(token)
        return run  # type: ignore[return-value]
    return decorate


def intermediate(f: F) -> F:
    """A function whose result a caller's declaration may name (``linalg.add``, ``add_bias``, ...):
    ``algorithm(None)``, attributing no errors of its own."""
    return algorithm(None)(f)


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
    if r is not None:
        r.keep(name, value)


def with_statistics(map_columns: Callable[[Callable[[Any], Any], Any], Any], f: Callable[[Any], tuple],
                    X: Any, names: Sequence[str]) -> Any:
    """``map_columns(lambda e: f(e)[0], X)``, and while recording each of f's further results
    (a statistic per column: a norm's μ and σ) recorded under ``names``, as the vector of its
    columns' values. ``map_columns`` may run the columns as one batch (``numbers.Batched``), so the
    statistics ride below each column's output and are split off after: the same numbers, no
    other arithmetic."""
    if _current.get() is None or not X or not X[0]:
        return map_columns(lambda e: f(e)[0], X)
    both = map_columns(lambda e: (lambda r: list(r[0]) + list(r[1:]))(f(e)), X)
    d = len(both) - len(names)
    for i, name in enumerate(names):
        record(name, both[d + i])
    return both[:d]


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
    """f(*args, **kwargs) inside ``scope(name)``, its result recorded as ``name`` (the name on the
    line itself; the spec declares its names instead: ``algorithm``)."""
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
