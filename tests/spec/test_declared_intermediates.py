"""Intermediates declared around a spec function, not written on its lines (issue 37).

``spec/intermediates.py``: ``@algorithm(name, names=...)`` attributes errors to the outermost
algorithm (as ``errors.in_algorithm`` does) and names the sub-algorithm calls a function makes
itself, by its declaration, while a caller records. Checked on small functions of the test's own:
the k-th call of each declared callee gets the k-th name (a pattern's ``{}`` the index, None or a
call past the tuple none); a named call's own records are scoped under its name and its result
follows them; a callee's inner calls belong to its declaration, not its caller's; nothing is kept
and nothing is declared when no one records. Then the spec itself: its layer, architecture and
attention lines carry no record, kept, step or scope call and no ``with in_algorithm`` block.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ftspec.spec.errors import SpecError, in_algorithm
from ftspec.spec.intermediates import algorithm, intermediate, record, recorded, recording

SPEC = Path(__file__).resolve().parents[2] / "spec"


@intermediate
def plus_one(x: int) -> int:
    return x + 1


@algorithm(None)
def noting(x: int) -> int:
    record("inside", x)
    return plus_one(x)  # its own call: no declaration of its own names it


declared_calls: list[tuple[Any, ...]] = []


def _names(x: int) -> Any:
    declared_calls.append((x,))
    return {plus_one: ("a", None, "c"), noting: "n.{}"}


@algorithm(None, names=_names)
def body(x: int) -> int:
    for _ in range(4):
        x = plus_one(x)  # a, (none), c, then past the tuple: none
    x = noting(x)  # n.0
    return noting(x)  # n.1


@algorithm("inner")
def inner() -> None:
    raise SpecError("x", "something", "nothing")


@algorithm("outer")
def outer() -> None:
    inner()


def test_each_declared_call_is_named_in_order_and_its_records_are_scoped():
    with recorded() as values:
        out = body(0)
    assert out == 6
    assert values == {"a": 1, "c": 3, "n.0.inside": 4, "n.0": 5, "n.1.inside": 5, "n.1": 6}
    assert list(values) == ["a", "c", "n.0.inside", "n.0", "n.1.inside", "n.1"]  # the order computed


def test_a_callees_inner_calls_are_not_named_by_its_callers_declaration():
    @algorithm(None, names=lambda x: {plus_one: ("p",), noting: ("n",)})
    def top(x: int) -> int:
        return plus_one(noting(x))  # noting's own plus_one is not "p"

    with recorded() as values:
        assert top(10) == 12
    assert values == {"n.inside": 10, "n": 11, "p": 12}


def test_nothing_is_recorded_or_declared_when_no_one_records():
    declared_calls.clear()
    assert not recording() and body(0) == 6
    assert declared_calls == []  # the declaration is read only while recording
    with recorded():
        body(0)
    assert declared_calls == [(0,)]


def test_a_name_declared_twice_is_a_naming_mistake():
    @algorithm(None, names=lambda: {plus_one: "same"})
    def twice() -> int:
        return plus_one(plus_one(0))

    assert twice() == 2
    with pytest.raises(RuntimeError, match="'same' recorded twice"), recorded():
        twice()


@pytest.mark.parametrize("recording_on", [False, True])
def test_errors_are_attributed_to_the_outermost_algorithm(recording_on):
    def run(f: Any) -> str:
        with pytest.raises(SpecError) as err:
            if recording_on:
                with recorded():
                    f()
            else:
                f()
        return str(err.value)

    assert run(inner).startswith("inner: argument 'x'")
    assert run(outer).startswith("outer: argument 'x'")

    def evaluated() -> None:
        with in_algorithm("entry"):
            outer()

    assert run(evaluated).startswith("entry: argument 'x'")


INSTRUMENTATION = re.compile(r"(^|[^_.\w])(record|kept|step|scope)\(")


@pytest.mark.parametrize("module", ["layers.py", "architectures.py"])
def test_the_layer_and_model_lines_carry_no_instrumentation(module):
    text = (SPEC / module).read_text(encoding="utf-8")
    calls = [line.strip() for line in text.splitlines() if INSTRUMENTATION.search(line)]
    assert calls == []


def test_attention_records_only_what_it_computes_inline():
    """Algorithm 4's scores, S and A and Algorithm 3's values are computed inside its lines (no
    call of their own to declare); everything else in attention.py is declared."""
    text = (SPEC / "attention.py").read_text(encoding="utf-8")
    names = re.findall(r"(?:^|[^_.\w])(?:record|kept|step|scope)\(\"(\w+)\"", text)
    assert sorted(names) == sorted(["q", "K", "V", "scores", "S", "A", "scores", "S", "A"])


def test_no_spec_algorithm_opens_an_error_context_on_its_lines():
    blocks = {p.name: p.read_text(encoding="utf-8").count("with in_algorithm(") for p in SPEC.glob("*.py")}
    assert {k: v for k, v in blocks.items() if v} == {"evaluation.py": 2}  # the evaluator's, per entry name
