"""The certificate's schema as data: a table of its fields, each with its type and bounds, in the
order of the certificate's fields, and ``check``, the one function that reads a document against it.

``--verify`` and ``--reproduce`` read only fields this table names, and only after ``check`` has
passed, so checking consistency cannot raise on a hostile file (docs/robustness.md,
"Certificates"). The first field that breaks the table is the one-line refusal
(``field WHERE must be WANT, got VALUE``); fields are checked in the table's order, the rows of
an array one after another, so the refusal names the first bad field a reader would meet.

A field is ``Field(key, kind, default)``: ``default`` is the value of an absent key (fields
added after the first certificates of this schema). The kinds:

- ``Test(ok, want)``: a value ``ok`` accepts; ``OneOf(values)``: one of a list of names;
  ``Whole(lo, hi)``: a whole number in bounds, ``hi`` a number or a sibling field's key;
- ``Names(allowed)``: a list of distinct short names, of ``allowed`` when given (a ``Ref`` to
  an earlier field: of the names that field lists);
- ``Obj(fields)``: a JSON object and its fields; ``Rows(limit, fields)``: an array of at most
  ``limit`` objects, each with those fields; ``Entries(value)``: an object whose keys are free
  (or of ``keys``) and whose values are all of one kind;
- ``Record(read)``: a structured field with its own reader (``reading.py``: limits, variant
  sets, accumulation, refusal modes, a cell's listing), which raises its own one-line errors;
  what it returns is kept, by path, for the fields after it;
- ``Rule(check)``: a check across fields, at its place in the order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Collection, NamedTuple, Optional, Sequence, Union

from ftspec.impls.api import FLOAT_DTYPES
from ftspec.spec.registry import REGISTRY

from ...core.profiles import PROFILES
from ...core.verdict import FIXTURE_LEVELS, VERDICTS
from .reading import (LIMITS, REPRODUCE_LIMITS, Malformed, bad, check_accumulation, check_listing, check_refuses_by,
                      is_int, is_text, limits_of, names, show, variant_sets)

CERTIFICATE_SCHEMA = "ftspec-certificate/2"
#: a cell's status (conformance/running/runner.py)
STATUSES = ("pass", "fail", "not implemented", "no examples", "error")


class At(NamedTuple):
    """Where a ``Record`` is read: its path, the object holding it, what earlier records returned."""

    where: str
    row: dict[str, Any]
    parsed: dict[str, Any]


@dataclass(frozen=True)
class Test:
    ok: Callable[[Any], bool]
    want: str


@dataclass(frozen=True)
class OneOf:
    values: Collection[str]
    want: str = ""  # "" : "one of a, b, c"


@dataclass(frozen=True)
class Whole:
    lo: int
    hi: Union[float, str]  # a bound, or the key of a sibling field whose value is the bound
    want: str = ""  # "": "a whole number from lo to hi"
    null: bool = False


@dataclass(frozen=True)
class Ref:
    """The value of an earlier field, by its dotted path from the document's top."""

    path: str


@dataclass(frozen=True)
class Names:
    allowed: Union[None, Sequence[str], Ref] = None
    optional: bool = False  # null (or absent) passes


@dataclass(frozen=True)
class Record:
    read: Callable[[Any, At], Any]


@dataclass(frozen=True)
class Field:
    key: str
    kind: "Kind"
    default: Any = None


@dataclass(frozen=True)
class Rule:
    check: Callable[[dict[str, Any], dict[str, Any]], None]


@dataclass(frozen=True)
class Obj:
    fields: tuple[Union[Field, Rule], ...] = ()
    optional: bool = False  # null (or absent) passes, as an empty object


@dataclass(frozen=True)
class Rows:
    limit: int
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Entries:
    value: "Kind"
    keys: Optional[Collection[str]] = None  # the keys allowed (None: any)
    key_want: Optional[str] = None  # a key not allowed, in words (None: reported as a bad entry)
    want: str = "a JSON object"
    most: Optional[int] = None  # entries at most
    shown: bool = False  # an entry's path shows its key quoted (keys not yet known to be names)


Kind = Union[Test, OneOf, Whole, Names, Record, Obj, Rows, Entries]

ARRAY = Test(lambda v: isinstance(v, list), "a JSON array")
FLAG = Test(lambda v: isinstance(v, bool), "true or false")
#: a recorded ratio: a number, or "inf" / "nan" as reports write them (judged in verifying.py)
RATIO = Test(lambda v: isinstance(v, (int, float, str)) and not isinstance(v, bool), "a number")
OBJECT_OR_NULL = Test(lambda v: v is None or isinstance(v, dict), "null or a JSON object")
TEXT = Test(is_text, "a printable string")
NAME = Test(is_text, f"a printable string of at most {LIMITS['text']} characters")
ALGORITHMS = tuple(REGISTRY)
DEVICES = Test(lambda v: isinstance(v, list) and len(v) <= LIMITS["devices"]
               and all(isinstance(d, str) and len(d) <= LIMITS["text"] for d in v),
               f"a list of at most {LIMITS['devices']} device names")


def _variants_cover_implemented(doc: dict[str, Any], parsed: dict[str, Any]) -> None:
    variants, implemented = parsed["variants"], doc["coverage"]["implemented"]
    if isinstance(variants, dict) and set(variants) != set(implemented):
        raise Malformed(f"field variants declares sets for {show(sorted(variants))}, not for exactly the "
                        f"implemented algorithms ({show(sorted(implemented))})")


#: every field ``--verify`` and ``--reproduce`` read, in the order of the certificate's fields
CERTIFICATE = Obj((
    Field("content_hash", Test(lambda v: isinstance(v, str) and len(v) == 64, "64 hex digits")),
    Field("verdict", OneOf(VERDICTS)),
    Field("reasons", ARRAY),
    Field("spec_version", Test(lambda v: is_text(v, 100), "a version string")),
    Field("subject", Obj((
        Field("target", NAME),
        Field("name", NAME),
        Field("version", NAME),
        Field("dtypes", Names(FLOAT_DTYPES)),
        # absent in certificates before spec 2.2.0
        Field("dtypes_by_algorithm", Entries(Names(Ref("subject.dtypes")), keys=ALGORITHMS,
                                             key_want="registry algorithms as keys",
                                             want="a JSON object of registry algorithms", most=len(REGISTRY)),
              default={}),
        Field("limits", Record(lambda v, at: limits_of(v))),
        Field("accumulation", Record(lambda v, at: check_accumulation(v, at.row["dtypes"]))),
        # absent in certificates before refusal modes were recorded: raising
        Field("refuses_by", Record(lambda v, at: check_refuses_by(v)), default="raise"),
    ))),
    Field("variants", Record(lambda v, at: variant_sets(v))),
    Field("coverage", Obj((
        Field("implemented", Names(ALGORITHMS)),
        Field("not_implemented", Names(ALGORITHMS)),
    ))),
    Rule(_variants_cover_implemented),
    Field("selection", Obj((
        Field("algorithms", Names(ALGORITHMS, optional=True)),
        Field("dtypes", Names(FLOAT_DTYPES, optional=True)),
        Field("devices", Names(optional=True)),
        Field("fixtures", OneOf(FIXTURE_LEVELS)),
        Field("fixtures_required", OneOf(FIXTURE_LEVELS)),
        Field("declared", Obj((
            Field("algorithms", Names(ALGORITHMS)),
            Field("dtypes", Names(FLOAT_DTYPES)),
            Field("devices", Names(), default=[]),
        ))),
    ))),
    Field("algorithms", Entries(Test(lambda v: isinstance(v, dict), "a summary of a registry algorithm"),
                                keys=ALGORITHMS, shown=True)),
    Field("results", Rows(LIMITS["results"], (
        Field("algorithm", OneOf(ALGORITHMS, "a registry algorithm name")),
        Field("dtype", OneOf(FLOAT_DTYPES)),
        Field("implementation", TEXT),
        Field("device", TEXT),
        Field("status", OneOf(STATUSES)),
        Field("examples", Whole(0, LIMITS["examples"])),
        Field("worst_ratio", RATIO),
        Field("failure", OBJECT_OR_NULL),
        Field("note", Test(lambda v: v is None or isinstance(v, str), "null or a string")),
        Field("more_failures", ARRAY, default=[]),
        Field("exhausted", Whole(1, "examples", "null or a whole number from 1 to the cell's examples", null=True)),
        Field("indistinguishable", Record(lambda v, at: check_listing(v, at.where, at.row["algorithm"],
                                                                      at.row["dtype"], at.parsed["variants"]))),
    ))),
    Field("fixtures", Rows(LIMITS["fixtures"], (
        Field("case", TEXT),
        Field("algorithm", TEXT),
        Field("dtype", TEXT),
        Field("device", TEXT),
        Field("ok", FLAG),
        Field("ratio", RATIO),
    ))),
    Field("run", Obj((
        Field("profile", OneOf(tuple(PROFILES))),
        Field("seed", Whole(0, REPRODUCE_LIMITS["seed"])),
        Field("minimum", Whole(0, LIMITS["examples"])),
        Field("interrupted", FLAG, default=False),
        Field("settings", OBJECT_OR_NULL),
        Field("fixture_set", OBJECT_OR_NULL),
        Field("extension", OBJECT_OR_NULL),
        Field("examples_run", Obj()),
    ))),
    Field("environment", Obj((
        Field("packages", Obj(optional=True)),
        Field("implementations", Entries(Obj((Field("devices", DEVICES, default=[]),)), shown=True)),
    ))),
))


def check(doc: dict[str, Any], schema: Obj = CERTIFICATE) -> dict[str, Any]:
    """``doc`` read against ``schema``: ``Malformed`` names the first field that breaks it; else
    {path: value} of what its ``Record`` fields returned (the parsed variant sets, limits, ...)."""
    parsed: dict[str, Any] = {}

    def resolve(ref: Ref) -> Any:
        value: Any = doc
        for key in ref.path.split("."):
            value = value[key]
        return value

    def visit(kind: Kind, value: Any, where: str, row: dict[str, Any]) -> None:
        if isinstance(kind, Test):
            if not kind.ok(value):
                raise bad(where, kind.want, value)
        elif isinstance(kind, OneOf):
            # a name is a string: an array or object (unhashable) is refused like any other value
            if not (isinstance(value, str) and value in kind.values):
                raise bad(where, kind.want or f"one of {', '.join(kind.values)}", value)
        elif isinstance(kind, Whole):
            hi = row[kind.hi] if isinstance(kind.hi, str) else kind.hi
            if not ((kind.null and value is None) or (is_int(value) and kind.lo <= value <= hi)):
                raise bad(where, kind.want or f"a whole number from {kind.lo} to {hi}", value)
        elif isinstance(kind, Names):
            allowed = resolve(kind.allowed) if isinstance(kind.allowed, Ref) else kind.allowed
            names(value, where, allowed, optional=kind.optional)
        elif isinstance(kind, Record):
            parsed[where] = kind.read(value, At(where, row, parsed))
        elif isinstance(kind, Obj):
            if value is None and kind.optional:
                value = {}
            if not isinstance(value, dict):
                raise bad(where, "a JSON object", value)
            for f in kind.fields:
                if isinstance(f, Rule):
                    f.check(doc, parsed)
                else:
                    visit(f.kind, value.get(f.key, f.default), f"{where}.{f.key}" if where else f.key, value)
        elif isinstance(kind, Rows):
            if not isinstance(value, list):
                raise bad(where, "a JSON array", value)
            if len(value) > kind.limit:
                raise Malformed(f"field {where} has {len(value)} rows; at most {kind.limit} are allowed")
            for i, item in enumerate(value):  # every row an object before any row's fields are read
                if not isinstance(item, dict):
                    raise bad(f"{where}[{i}]", "a JSON object", item)
            for i, item in enumerate(value):
                for f in kind.fields:
                    visit(f.kind, item.get(f.key, f.default), f"{where}[{i}].{f.key}", item)
        elif isinstance(kind, Entries):
            if not isinstance(value, dict) or (kind.most is not None and len(value) > kind.most):
                raise bad(where, kind.want, value)
            for key, item in value.items():
                at = f"{where}.{show(key) if kind.shown else key}"
                if kind.keys is not None and key not in kind.keys:
                    if kind.key_want is not None:
                        raise bad(where, kind.key_want, key)
                    raise bad(at, kind.value.want if isinstance(kind.value, Test) else "an entry", item)
                visit(kind.value, item, at, value)
        else:  # pragma: no cover - a kind added to ``Kind`` and not here
            raise TypeError(f"unknown kind of field {kind!r}")

    visit(schema, doc, "", doc)
    return parsed
