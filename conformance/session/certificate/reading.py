"""Reading a certificate's fields as untrusted data: the bounds, the one-line errors, and the
readers of the structured fields the schema names (``schema.py``).

A certificate travels between people like a case file (docs/robustness.md, "Certificates"), so
each value is checked for type and bounds before anything reads it; a refusal is one
``CertificateError`` line naming the field (``field WHERE must be WANT, got VALUE``).
"""

from __future__ import annotations

import math
from typing import Any, Literal, Optional, Sequence, Union

from ftspec.impls.api import ACCUMULATION_KEYS, ALL_VARIANTS, REFUSAL_MODES, WIDER, Limits
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import VariantSet, _parse_value

from ...forensics.identify import project
from ..separation import DTYPES as LISTED_DTYPES
from ..separation import change_text

#: the bounds a certificate is read under, besides those of every untrusted JSON file
#: (``casefile.JSON_LIMITS``: nesting depth, objects and arrays, digits of a number)
LIMITS = {
    "bytes": 32 << 20,  # the file (a certificate of 136 cells and 2,600 fixture replays is about 1.5 MB)
    "results": 20_000,  # cells: 34 algorithms x 4 dtypes x 64 devices is 8,704
    "fixtures": 200_000,  # fixture replays: 652 cases x 2 dtypes x 64 devices is 83,456
    "devices": 64,  # device names in a list
    "variants": 1_000,  # declared variant sets
    "text": 1_000,  # characters of a target, name, version or device name
    "examples": 10**9,  # examples of one cell
}
#: the bounds on the settings ``--reproduce`` takes from a certificate (``recorded_settings``)
REPRODUCE_LIMITS = {
    "examples": 10_000,  # per search: the thorough profile's
    "seconds": 600.0,  # per search: the thorough profile's extra-round ceiling
    "call_timeout": 600.0,  # per implementation call
    "shards": 64,
    "seed": 2**64 - 1,
}
#: the fields of a cell's ``indistinguishable`` record (separation.py), and the bounds on its counts
LISTING_FIELDS = ("under", "cases", "alternatives", "separated", "same", "untestable", "complete")
LISTING_LIMITS = {"cases": 64, "alternatives": 1_000, "count": 10_000, "change": 200}


class CertificateError(ValueError):
    """A file that is not an intact, consistent ftspec certificate (a one-line reason)."""


class Malformed(CertificateError):
    """A field of the wrong type or out of bounds."""


def show(value: Any) -> str:
    """A value from the file, shown on one line and short (repr: quotes, escapes control characters)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def bad(where: str, want: str, value: Any) -> Malformed:
    return Malformed(f"field {where} must be {want}, got {show(value)}")


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x: Any) -> bool:
    """A finite JSON number (not a boolean)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def is_text(x: Any, limit: int = LIMITS["text"]) -> bool:
    """A short, printable string (no control character, no line break)."""
    return isinstance(x, str) and 0 < len(x) <= limit and x.isprintable()


def names(value: Any, where: str, allowed: Optional[Sequence[str]] = None, *, optional: bool = False,
          limit: int = LIMITS["devices"]) -> Optional[list[str]]:
    """A list of distinct short names (of ``allowed`` when given); None when ``optional`` and absent."""
    if value is None and optional:
        return None
    what = f"a list of names from {', '.join(allowed)}" if allowed is not None and len(allowed) <= 8 else (
        "a list of registry algorithm names" if allowed is not None else "a list of short printable names")
    if (not isinstance(value, list) or len(value) > max(limit, len(allowed or ()))
            or not all(is_text(v) and (allowed is None or v in allowed) for v in value)
            or len(set(value)) != len(value)):
        raise bad(where, what, value)
    return value


def limits_of(value: Any) -> dict[str, Limits]:
    """{algorithm: Limits} of a certificate's ``subject.limits`` (null: none), read as untrusted data
    (``Limits.from_dict``: every field's type and bounds, each side parsed, every name a
    hyperparameter of the registry); ``Malformed`` names the first field that is not."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not set(value) <= set(REGISTRY):
        raise bad("subject.limits", "null or an object keyed by registry algorithm names", value)
    known = {n for e in REGISTRY.values() for n in e.hyper}
    out = {}
    for name, d in value.items():
        where = f"subject.limits.{name}"
        if not isinstance(d, dict):
            raise bad(where, "a JSON object", d)
        try:
            limits = Limits.from_dict(d)
        except ValueError as exc:
            raise Malformed(f"field {where} is not a declaration of limits: {str(exc)[:200]}") from None
        unknown = sorted(limits.names() - known)
        if unknown:
            raise Malformed(f"field {where} names unknown hyperparameters: {show(unknown)}")
        out[name] = limits
    return out


def _variant_list(value: Any, where: str, room: int) -> Union[Literal["all"], list[VariantSet]]:
    """"all" or [VariantSet, ...] from a list of at most ``room`` set records."""
    if value == ALL_VARIANTS:
        return ALL_VARIANTS
    if not isinstance(value, list) or len(value) > room:
        raise bad(where, f'"all" or a list of at most {room} variant sets', value)
    out = []
    for i, v in enumerate(value):
        data = v.get("json") if isinstance(v, dict) else None
        if not isinstance(data, dict):
            raise bad(f"{where}[{i}].json", "an object of variant switches", data)
        try:
            out.append(VariantSet.from_json(data))
        except Exception as exc:  # noqa: BLE001 - any refusal of the switches is one line
            raise Malformed(f"field {where}[{i}].json is not a variant set: {type(exc).__name__}: "
                            f"{show(str(exc))}") from None
    return out


def variant_sets(value: Any) -> Any:
    """The declared variant sets: "all", [VariantSet, ...], or, declared per algorithm,
    {registry algorithm: "all" | [VariantSet, ...]} (at most ``LIMITS["variants"]`` sets in all)."""
    if not isinstance(value, dict):
        return _variant_list(value, "variants", LIMITS["variants"])
    if not value or not all(isinstance(k, str) and k in REGISTRY for k in value):
        raise bad("variants", '"all", a list of variant sets, or an object keyed by registry algorithm names', value)
    out: dict[str, Any] = {}
    room = LIMITS["variants"]
    for name, declared in value.items():
        out[name] = _variant_list(declared, f"variants.{name}", room)
        room -= 0 if out[name] == ALL_VARIANTS else len(out[name])
    return out


def check_accumulation(value: Any, dtypes: list[str]) -> None:
    """``subject.accumulation`` (absent in certificates made before mixed precision): {declared dtype:
    {"accumulate" | "softmax": the dtype or a wider format}} (``Implementation.accumulation``)."""
    if value is None:
        return
    where = "subject.accumulation"
    if not isinstance(value, dict) or not all(isinstance(d, str) and d in dtypes for d in value):
        raise bad(where, "an object keyed by the subject's dtypes", value)
    for dtype, formats in value.items():
        if not (isinstance(formats, dict) and set(formats) <= set(ACCUMULATION_KEYS)
                and all(isinstance(f, str) and f in WIDER[dtype] for f in formats.values())):
            raise bad(f"{where}.{dtype}", f"an object of {' and '.join(ACCUMULATION_KEYS)}, each one of "
                      f"{', '.join(WIDER[dtype])}", formats)


def check_refuses_by(value: Any) -> None:
    """``subject.refuses_by``: one of ``REFUSAL_MODES``, or {registry algorithm: mode}."""
    modes = " or ".join(f'"{m}"' for m in REFUSAL_MODES)
    if isinstance(value, str):
        if value not in REFUSAL_MODES:
            raise bad("subject.refuses_by", modes, value)
        return
    if not isinstance(value, dict) or len(value) > len(REGISTRY):
        raise bad("subject.refuses_by", f"{modes}, or an object of registry algorithms", value)
    for algorithm, mode in value.items():
        if algorithm not in REGISTRY or mode not in REFUSAL_MODES:
            raise bad(f"subject.refuses_by.{show(str(algorithm))}", f"a registry algorithm mapped to {modes}", mode)


def check_listing(value: Any, where: str, algorithm: str, dtype: str, declared: Any) -> None:
    """A cell's ``indistinguishable`` record read as untrusted data: null, or (at bfloat16 and float16
    only) the fields ``separation.indistinguishable`` writes: the set it was measured under, a
    declared set of the algorithm (projected on the switches it reads); counts within bounds; each
    alternative a ``switch=value[,switch=value]`` change of that set in switches the algorithm
    reads, listed once, with a ratio from 0 to 1 (within the bound: that is what the list claims)."""
    if value is None:
        return
    if dtype not in LISTED_DTYPES:
        raise bad(where, f"null at {dtype} (only {' and '.join(LISTED_DTYPES)} cells list what they cannot tell "
                  "apart)", value)
    if not isinstance(value, dict) or set(value) != set(LISTING_FIELDS):
        raise bad(where, f"an object with the fields {', '.join(LISTING_FIELDS)}", value)
    under = value["under"]
    if not (isinstance(under, dict) and is_text(under.get("name")) and isinstance(under.get("json"), dict)):
        raise bad(f"{where}.under", "an object with a name and the json of a variant set", under)
    try:
        base = VariantSet.from_json(under["json"])
    except Exception as exc:  # noqa: BLE001 - any refusal of the switches is one line
        raise Malformed(f"field {where}.under.json is not a variant set: {type(exc).__name__}: "
                        f"{show(str(exc))}") from None
    entry = REGISTRY[algorithm]
    sets = declared.get(algorithm, ALL_VARIANTS) if isinstance(declared, dict) else declared
    if sets != ALL_VARIANTS and base not in [project(v, entry) for v in sets]:
        raise Malformed(f"field {where}.under is {show(base.describe())}, not a set declared for {algorithm}")
    for key in ("cases", "separated", "same", "untestable"):
        most = LISTING_LIMITS["cases" if key == "cases" else "count"]
        if not (is_int(value[key]) and 0 <= value[key] <= most):
            raise bad(f"{where}.{key}", f"a whole number from 0 to {most}", value[key])
    if not isinstance(value["complete"], bool):
        raise bad(f"{where}.complete", "true or false", value["complete"])
    rows = value["alternatives"]
    if not isinstance(rows, list) or len(rows) > LISTING_LIMITS["alternatives"]:
        raise bad(f"{where}.alternatives", f"a list of at most {LISTING_LIMITS['alternatives']} alternatives", rows)
    seen: set[str] = set()
    for i, row in enumerate(rows):
        at = f"{where}.alternatives[{i}]"
        if not isinstance(row, dict) or set(row) != {"change", "ratio"}:
            raise bad(at, "an object with the fields change and ratio", row)
        change, ratio = row["change"], row["ratio"]
        if not is_text(change, LISTING_LIMITS["change"]):
            raise bad(f"{at}.change", "switch=value[,switch=value]", change)
        changes: dict[str, Any] = {}
        for item in change.split(","):
            key, eq, raw = item.partition("=")
            if not eq or key not in entry.switches or key in changes:
                raise bad(f"{at}.change", f"switch=value[,switch=value] of switches {algorithm} reads", change)
            try:
                changes[key] = _parse_value(key, raw)
                moved = base.replace(**changes) if len(changes) == len(change.split(",")) else None
            except ValueError as exc:
                raise Malformed(f"field {at}.change {show(change)} is not a change of the set: "
                                f"{show(str(exc))}") from None
        if moved is None or moved == base or any(getattr(base, k) == v for k, v in changes.items()):
            raise bad(f"{at}.change", f"a change of {base.describe()}", change)
        if change_text(changes) in seen:
            raise Malformed(f"field {at}.change {show(change)} is listed twice")
        seen.add(change_text(changes))
        if not (isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and math.isfinite(ratio)
                and 0.0 <= ratio <= 1.0):
            raise bad(f"{at}.ratio", "a number from 0 to 1 (an alternative the bound separates is not listed)", ratio)
