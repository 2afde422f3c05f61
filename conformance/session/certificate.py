"""Certificates: a publishable record of what was tested and what it showed.

JSON (schema ``ftspec-certificate/2``) with a Markdown rendering. The
verdict (``conformance/core/verdict.py``) rests on the per-cell results the
certificate records.

A certificate is data that travels between people, like a case file, so
reading one treats it as untrusted input (docs/robustness.md,
"Certificates"): ``casefile.read_untrusted_json`` reads it (a regular file
of at most ``LIMITS["bytes"]``, no FIFO or device, bounded nesting, objects
and arrays, and digits per number), then every field ``--verify`` and
``--reproduce`` read is checked for type and bounds (``_check_schema``)
before anything else; each refusal is one ``CertificateError`` line naming
the file and the field. ``ftspec certify --verify FILE`` then checks:

- the ``content_hash`` (sha256 of the canonical JSON of every other field,
  keys sorted, no spaces) matches. This detects accidental damage (a
  truncated download, an editor's reformatting) and nothing more: anyone
  can edit a certificate and compute a new hash. It proves no authorship;
- the certificate is consistent: the verdict re-derived from the recorded
  cells and fixture replays equals the recorded one; every algorithm ×
  dtype × device the implementation declares (within the recorded
  selection) has exactly one cell; a passing cell carries no failure and an
  error ratio that is a number from 0 to 1 (NaN, negative and infinite
  ratios never pass), and so does an ``ok`` fixture replay; the
  per-algorithm summary and the examples counts agree with the cells; the
  minimum is the recorded profile's; when the certificate names this
  installation's fixture set, every fixture replay its selection calls for
  (counted from the recorded declarations, by the replay's own rule) is
  recorded. An edit that flips a verdict must therefore also rewrite the
  results it rests on.

What ``--verify`` cannot detect is a forgery that is consistent with
itself: results rewritten wholesale, with summaries, fixture replays and
hash to match. What would show the results themselves are true is running
them again: ``ftspec certify --reproduce FILE --impl NAME`` runs the
implementation named on the command line (the target the certificate
records is shown, never imported) with the recorded seed and settings,
bounded by ``REPRODUCE_LIMITS`` (``jobs`` and ``in_process`` are never taken
from the file), and compares the verdicts cell by cell
(``session.reproduce``). The searches are seeded, so the same versions on a
machine of the same speed draw the same examples; a time cap makes the
example count depend on speed, so a slower machine may run fewer.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import shlex
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Optional, Sequence, Union

from ftspec.impls.api import (ACCUMULATION_KEYS, ALL_VARIANTS, FLOAT_DTYPES, REFUSAL_MODES, WIDER, Implementation,
                               Limits, select_devices)
from ftspec.spec import SPEC_VERSION
from ftspec.spec.registry import REGISTRY
from ftspec.spec.variants import VariantSet, _parse_value

from ..core.casefile import read_untrusted_json
from ..core.blocks import MAX_BLOCK
from ..core.profiles import PROFILES
from .report import cell_dict, environment, write_json
from .separation import DTYPES as LISTED_DTYPES
from .separation import FRACTION, MIN_SECONDS, change_text, listings
from ..running.runner import RunResult
from ..core.tolerances import table
from ..core.verdict import FIXTURE_LEVELS, VERDICTS, NothingTested, derive, exit_code, narrowing
from ..forensics.identify import project

__all__ = ["CERTIFICATE_SCHEMA", "LIMITS", "REPRODUCE_LIMITS", "Certificate", "CertificateError", "build",
           "check_reproduction", "consistency", "content_hash", "listing_lines", "load", "recorded_settings",
           "recorded_target",
           "render_markdown", "reproduce_command", "verify"]

CERTIFICATE_SCHEMA = "ftspec-certificate/2"

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
#: a cell's status (conformance/running/runner.py)
STATUSES = ("pass", "fail", "not implemented", "no examples", "error")


class CertificateError(ValueError):
    """A file that is not an intact, consistent ftspec certificate (a one-line reason)."""


def _canonical(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode()


def content_hash(doc: dict[str, Any]) -> str:
    body = {k: v for k, v in doc.items() if k != "content_hash"}
    return hashlib.sha256(_canonical(body)).hexdigest()


def _number(value: Any) -> float:
    try:
        return float(value)  # numbers, and "inf" / "-inf" / "nan" as reports write them
    except (TypeError, ValueError):
        return math.inf


def _algorithm_verdict(cells: list[dict[str, Any]], minimum: int) -> str:
    if not cells:
        return "not run"
    if any(c["status"] in ("fail", "error") for c in cells):
        return "fail"
    if any(int(c["examples"]) < minimum for c in cells):
        return "inconclusive"
    return "pass"


def _examples_run(cells: list[dict[str, Any]]) -> dict[str, Any]:
    counts = [int(c["examples"]) for c in cells if c["status"] != "not implemented"]
    if not counts:
        return {"cells": 0, "total": 0, "min": 0, "median": 0, "max": 0}
    return {"cells": len(counts), "total": sum(counts), "min": min(counts), "median": statistics.median(counts),
            "max": max(counts)}


def build(label: str, impl: Implementation, result: RunResult, *, settings: Any = None,
          issued: Optional[_dt.datetime] = None) -> dict[str, Any]:
    """The certificate of ``result`` (judged by ``session``: ``result.verdict`` is set)."""
    implemented = [a for a in REGISTRY if a in impl.algorithms]
    missing = [a for a in REGISTRY if a not in impl.algorithms]
    results = [cell_dict(c) for c in result.cells if c.impl == label]
    # what a pass at bfloat16 or float16 cannot tell apart (separation.py), per cell, measured on the
    # passing examples its search kept (cells on several devices searched together: the fullest)
    kept: dict[tuple[str, str], list] = {}
    for cell in result.cells:
        if cell.impl == label and cell.status == "pass" and len(cell.sample) > len(kept.get((cell.algorithm,
                                                                                               cell.dtype), [])):
            kept[(cell.algorithm, cell.dtype)] = list(cell.sample)
    listed = listings(impl, [(c["algorithm"], c["dtype"]) for c in results if c["status"] == "pass"],
                      seconds=max(MIN_SECONDS, FRACTION * float(result.seconds or 0.0)), samples=kept)
    for c in results:
        c["indistinguishable"] = listed.get((c["algorithm"], c["dtype"])) if c["status"] == "pass" else None
    per_algorithm = {}
    chosen = result.selection.get("algorithms")
    for name in implemented:
        if chosen is not None and name not in chosen:
            continue
        mine = [c for c in results if c["algorithm"] == name and c["status"] != "not implemented"]
        worst = max((_number(c["worst_ratio"]) for c in mine), default=0.0)
        per_algorithm[name] = {
            "paper": REGISTRY[name].title,
            "verdict": _algorithm_verdict(mine, result.minimum),
            "examples": sum(int(c["examples"]) for c in mine),
            "worst_ratio": worst if math.isfinite(worst) else "inf",
        }
    selection = dict(result.selection)
    selection["narrowed"] = narrowing(selection, selection.get("declared", {}))
    doc: dict[str, Any] = {
        "schema": CERTIFICATE_SCHEMA,
        "subject": {
            "target": label,
            "name": impl.name,
            "version": impl.version,
            "description": impl.description,
            "precision": impl.precision,
            "accumulation": impl.mixed_precision(),
            # how it refuses what the spec refuses (issue 39): "raise", "nan", or {algorithm: mode}
            "refuses_by": (str(impl.refuses_by) if isinstance(impl.refuses_by, str)
                           else {a: impl.refuses_by_for(a) for a in impl.algorithms}),
            "dtypes": list(impl.dtypes),
            "dtypes_by_algorithm": {a: list(impl.dtypes_for(a)) for a in impl.algorithms
                                    if a in impl.dtypes_by_algorithm},
            "limits": _limits(impl, list(per_algorithm)),
        },
        "verdict": result.verdict,
        "reasons": list(result.reasons),
        "spec_version": SPEC_VERSION,
        "variants": _variants_record(impl),
        "coverage": {
            "implemented": implemented,
            "not_implemented": missing,
            "fraction": f"{len(implemented)}/{len(REGISTRY)}",
        },
        "selection": selection,
        "algorithms": per_algorithm,
        "results": results,
        "fixtures": [f.to_dict() for f in result.fixtures],
        "run": {
            "profile": result.profile,
            "seed": result.seed,
            "settings": settings.recorded() if settings is not None else None,
            "examples_per_search": selection.get("examples_per_search"),
            "seconds_per_search": selection.get("seconds_per_search"),
            "minimum": result.minimum,
            "examples_run": _examples_run(results),
            "extension": result.extension or None,
            "interrupted": result.interrupted,
            "seconds": round(result.seconds, 3),
            "jobs": result.jobs,
            "fixture_selection": result.fixture_selection,
            "fixtures_outside_limits": _fixtures_outside(impl, list(per_algorithm), result.fixture_selection),
            "fixture_set": _fixture_set(),
            "generated": {f"{a}/{d}": n for (a, d), n in sorted(result.generated.items())},
        },
        "tolerances": table(),
        "environment": environment([(label, impl)]),
        "issued": (issued or _dt.datetime.now(_dt.timezone.utc)).isoformat(timespec="seconds"),
    }
    doc["content_hash"] = content_hash(doc)
    return doc


def _fixture_set() -> Optional[dict[str, Any]]:
    """The golden fixture set the run replayed from (``--verify`` counts the replays against it)."""
    from ..core.fixture_files import FixtureError, load_manifest

    try:
        manifest = load_manifest()
    except FixtureError:
        return None
    return {"manifest_sha256": manifest.get("manifest_sha256"), "spec_version": manifest.get("spec_version"),
            "cases": len(manifest.get("cases", []))}


def _variants_record(impl: Implementation) -> Any:
    """The declared variant sets: "all" or [set record, ...] when they are the same for every
    algorithm; {implemented algorithm: "all" | [set record, ...]} when the plugin declares them per
    algorithm (a "*" key spelled out for each algorithm it covers)."""
    def one(declared: Any) -> Any:
        if declared == ALL_VARIANTS:
            return ALL_VARIANTS
        return [{"name": v.describe(), "hash": v.hash, "json": json.loads(v.to_json())} for v in declared]

    if not impl.per_algorithm:
        return one(impl.variants_for(""))
    return {a: one(impl.variants_for(a)) for a in REGISTRY if a in impl.algorithms}


def _limits(impl: Implementation, algorithms: list[str]) -> Optional[dict[str, Any]]:
    """{algorithm: declared limits} for the algorithms certified under limits (None: no limits, the
    certificate covers every shape the spec draws)."""
    out = {a: impl.limits_for(a).to_dict() for a in algorithms if not impl.limits_for(a).unconstrained}
    return out or None


def _fixtures_outside(impl: Implementation, algorithms: list[str], selection: str) -> int:
    """How many golden fixture cases of ``algorithms`` (of those the run selected) lie outside the
    implementation's limits: not replayed on it, counted here, never failed."""
    if selection == "none" or all(impl.limits_for(a).unconstrained for a in algorithms):
        return 0
    from ..running.fixture_replay import sample_cases
    from ..core.fixture_files import FixtureError, load_manifest

    try:
        records = [r for r in load_manifest().get("cases", []) if r.get("algorithm") in algorithms]
    except FixtureError:
        return 0
    chosen = set(sample_cases(records)) if selection == "sample" else {str(r.get("id")) for r in records}
    return sum(1 for r in records if str(r.get("id")) in chosen
               and not impl.admits(str(r["algorithm"]), {k: int(v) for k, v in r.get("hyper", {}).items()}))


# -- reading a certificate: untrusted data, like a case file ------------------------------------

def _show(value: Any) -> str:
    """A value from the file, shown on one line and short (repr: quotes, escapes control characters)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_text(x: Any, limit: int = LIMITS["text"]) -> bool:
    """A short, printable string (no control character, no line break)."""
    return isinstance(x, str) and 0 < len(x) <= limit and x.isprintable()


class _Malformed(CertificateError):
    """A field of the wrong type or out of bounds."""


def _bad(where: str, want: str, value: Any) -> _Malformed:
    return _Malformed(f"field {where} must be {want}, got {_show(value)}")


def _obj(parent: dict[str, Any], key: str, where: str, *, optional: bool = False) -> dict[str, Any]:
    value = parent.get(key)
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise _bad(where, "a JSON object", value)
    return value


def _rows(value: Any, where: str, limit: int) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise _bad(where, "a JSON array", value)
    if len(value) > limit:
        raise _Malformed(f"field {where} has {len(value)} rows; at most {limit} are allowed")
    for i, row in enumerate(value):
        if not isinstance(row, dict):
            raise _bad(f"{where}[{i}]", "a JSON object", row)
    return value


def _names(value: Any, where: str, allowed: Optional[Sequence[str]] = None, *, optional: bool = False,
           limit: int = LIMITS["devices"]) -> Optional[list[str]]:
    """A list of distinct short names (of ``allowed`` when given); None when ``optional`` and absent."""
    if value is None and optional:
        return None
    what = f"a list of names from {', '.join(allowed)}" if allowed is not None and len(allowed) <= 8 else (
        "a list of registry algorithm names" if allowed is not None else "a list of short printable names")
    if (not isinstance(value, list) or len(value) > max(limit, len(allowed or ()))
            or not all(_is_text(v) and (allowed is None or v in allowed) for v in value)
            or len(set(value)) != len(value)):
        raise _bad(where, what, value)
    return value


def _limits_of(value: Any) -> dict[str, Limits]:
    """{algorithm: Limits} of a certificate's ``subject.limits`` (null: none), read as untrusted data
    (``Limits.from_dict``: every field's type and bounds, each side parsed, every name a
    hyperparameter of the registry); ``_Malformed`` names the first field that is not."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not set(value) <= set(REGISTRY):
        raise _bad("subject.limits", "null or an object keyed by registry algorithm names", value)
    known = {n for e in REGISTRY.values() for n in e.hyper}
    out = {}
    for name, d in value.items():
        where = f"subject.limits.{name}"
        if not isinstance(d, dict):
            raise _bad(where, "a JSON object", d)
        try:
            limits = Limits.from_dict(d)
        except ValueError as exc:
            raise _Malformed(f"field {where} is not a declaration of limits: {str(exc)[:200]}") from None
        unknown = sorted(limits.names() - known)
        if unknown:
            raise _Malformed(f"field {where} names unknown hyperparameters: {_show(unknown)}")
        out[name] = limits
    return out


def _variant_list(value: Any, where: str, room: int) -> Union[Literal["all"], list[VariantSet]]:
    """"all" or [VariantSet, ...] from a list of at most ``room`` set records."""
    if value == ALL_VARIANTS:
        return ALL_VARIANTS
    if not isinstance(value, list) or len(value) > room:
        raise _bad(where, f'"all" or a list of at most {room} variant sets', value)
    out = []
    for i, v in enumerate(value):
        data = v.get("json") if isinstance(v, dict) else None
        if not isinstance(data, dict):
            raise _bad(f"{where}[{i}].json", "an object of variant switches", data)
        try:
            out.append(VariantSet.from_json(data))
        except Exception as exc:  # noqa: BLE001 - any refusal of the switches is one line
            raise _Malformed(f"field {where}[{i}].json is not a variant set: {type(exc).__name__}: "
                             f"{_show(str(exc))}") from None
    return out


def _variant_sets(value: Any) -> Any:
    """The declared variant sets: "all", [VariantSet, ...], or, declared per algorithm,
    {registry algorithm: "all" | [VariantSet, ...]} (at most ``LIMITS["variants"]`` sets in all)."""
    if not isinstance(value, dict):
        return _variant_list(value, "variants", LIMITS["variants"])
    if not value or not all(isinstance(k, str) and k in REGISTRY for k in value):
        raise _bad("variants", '"all", a list of variant sets, or an object keyed by registry algorithm names',
                   value)
    out: dict[str, Any] = {}
    room = LIMITS["variants"]
    for name, declared in value.items():
        out[name] = _variant_list(declared, f"variants.{name}", room)
        room -= 0 if out[name] == ALL_VARIANTS else len(out[name])
    return out


def _check_accumulation(value: Any, dtypes: list[str]) -> None:
    """``subject.accumulation`` (absent in certificates made before mixed precision): {declared dtype:
    {"accumulate" | "softmax": the dtype or a wider format}} (``Implementation.accumulation``)."""
    if value is None:
        return
    where = "subject.accumulation"
    if not isinstance(value, dict) or not all(isinstance(d, str) and d in dtypes for d in value):
        raise _bad(where, "an object keyed by the subject's dtypes", value)
    for dtype, formats in value.items():
        if not (isinstance(formats, dict) and set(formats) <= set(ACCUMULATION_KEYS)
                and all(isinstance(f, str) and f in WIDER[dtype] for f in formats.values())):
            raise _bad(f"{where}.{dtype}", f"an object of {' and '.join(ACCUMULATION_KEYS)}, each one of "
                       f"{', '.join(WIDER[dtype])}", formats)


def _check_refuses_by(value: Any) -> None:
    """``subject.refuses_by``: one of ``REFUSAL_MODES``, or {registry algorithm: mode}."""
    modes = " or ".join(f'"{m}"' for m in REFUSAL_MODES)
    if isinstance(value, str):
        if value not in REFUSAL_MODES:
            raise _bad("subject.refuses_by", modes, value)
        return
    if not isinstance(value, dict) or len(value) > len(REGISTRY):
        raise _bad("subject.refuses_by", f"{modes}, or an object of registry algorithms", value)
    for algorithm, mode in value.items():
        if algorithm not in REGISTRY or mode not in REFUSAL_MODES:
            raise _bad(f"subject.refuses_by.{_show(str(algorithm))}", f"a registry algorithm mapped to {modes}", mode)


def _refusal_text(value: Any) -> str:
    """How the subject refuses what the spec refuses, in words (``subject.refuses_by``)."""
    nan = "returning NaN in every output the refused input reaches (declared `refuses_by=\"nan\"`)"
    if not isinstance(value, dict):
        return nan if value == "nan" else "raising an exception"
    by_nan = sorted(a for a, m in value.items() if m == "nan")
    if not by_nan:
        return "raising an exception"
    if len(by_nan) == len(value):
        return nan
    return f"{nan} at {', '.join(by_nan)}; raising an exception at the others"


#: the fields of a cell's ``indistinguishable`` record (separation.py), and the bounds on its counts
LISTING_FIELDS = ("under", "cases", "alternatives", "separated", "same", "untestable", "complete")
LISTING_LIMITS = {"cases": 64, "alternatives": 1_000, "count": 10_000, "change": 200}


def _check_listing(value: Any, where: str, algorithm: str, dtype: str, declared: Any) -> None:
    """A cell's ``indistinguishable`` record read as untrusted data: null, or (at bfloat16 and float16
    only) the fields ``separation.indistinguishable`` writes: the set it was measured under, a
    declared set of the algorithm (projected on the switches it reads); counts within bounds; each
    alternative a ``switch=value[,switch=value]`` change of that set in switches the algorithm
    reads, listed once, with a ratio from 0 to 1 (within the bound: that is what the list claims)."""
    if value is None:
        return
    if dtype not in LISTED_DTYPES:
        raise _bad(where, f"null at {dtype} (only {' and '.join(LISTED_DTYPES)} cells list what they cannot tell "
                   "apart)", value)
    if not isinstance(value, dict) or set(value) != set(LISTING_FIELDS):
        raise _bad(where, f"an object with the fields {', '.join(LISTING_FIELDS)}", value)
    under = value["under"]
    if not (isinstance(under, dict) and _is_text(under.get("name")) and isinstance(under.get("json"), dict)):
        raise _bad(f"{where}.under", "an object with a name and the json of a variant set", under)
    try:
        base = VariantSet.from_json(under["json"])
    except Exception as exc:  # noqa: BLE001 - any refusal of the switches is one line
        raise _Malformed(f"field {where}.under.json is not a variant set: {type(exc).__name__}: "
                         f"{_show(str(exc))}") from None
    entry = REGISTRY[algorithm]
    sets = declared.get(algorithm, ALL_VARIANTS) if isinstance(declared, dict) else declared
    if sets != ALL_VARIANTS and base not in [project(v, entry) for v in sets]:
        raise _Malformed(f"field {where}.under is {_show(base.describe())}, not a set declared for {algorithm}")
    for key in ("cases", "separated", "same", "untestable"):
        most = LISTING_LIMITS["cases" if key == "cases" else "count"]
        if not (_is_int(value[key]) and 0 <= value[key] <= most):
            raise _bad(f"{where}.{key}", f"a whole number from 0 to {most}", value[key])
    if not isinstance(value["complete"], bool):
        raise _bad(f"{where}.complete", "true or false", value["complete"])
    rows = value["alternatives"]
    if not isinstance(rows, list) or len(rows) > LISTING_LIMITS["alternatives"]:
        raise _bad(f"{where}.alternatives", f"a list of at most {LISTING_LIMITS['alternatives']} alternatives", rows)
    seen: set[str] = set()
    for i, row in enumerate(rows):
        at = f"{where}.alternatives[{i}]"
        if not isinstance(row, dict) or set(row) != {"change", "ratio"}:
            raise _bad(at, "an object with the fields change and ratio", row)
        change, ratio = row["change"], row["ratio"]
        if not _is_text(change, LISTING_LIMITS["change"]):
            raise _bad(f"{at}.change", "switch=value[,switch=value]", change)
        changes: dict[str, Any] = {}
        for item in change.split(","):
            key, eq, raw = item.partition("=")
            if not eq or key not in entry.switches or key in changes:
                raise _bad(f"{at}.change", f"switch=value[,switch=value] of switches {algorithm} reads", change)
            try:
                changes[key] = _parse_value(key, raw)
                moved = base.replace(**changes) if len(changes) == len(change.split(",")) else None
            except ValueError as exc:
                raise _Malformed(f"field {at}.change {_show(change)} is not a change of the set: "
                                 f"{_show(str(exc))}") from None
        if moved is None or moved == base or any(getattr(base, k) == v for k, v in changes.items()):
            raise _bad(f"{at}.change", f"a change of {base.describe()}", change)
        if change_text(changes) in seen:
            raise _Malformed(f"field {at}.change {_show(change)} is listed twice")
        seen.add(change_text(changes))
        if not (isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and math.isfinite(ratio)
                and 0.0 <= ratio <= 1.0):
            raise _bad(f"{at}.ratio", "a number from 0 to 1 (an alternative the bound separates is not listed)",
                       ratio)


def _check_schema(doc: dict[str, Any]) -> None:
    """The fields ``--verify`` and ``--reproduce`` read have their types and bounds (``_Malformed``
    names the first that does not): after this, checking consistency cannot raise. Long on purpose:
    one flat list of field checks, in the order of the certificate's fields, reads as its schema."""
    if not (isinstance(doc.get("content_hash"), str) and len(doc["content_hash"]) == 64):
        raise _bad("content_hash", "64 hex digits", doc.get("content_hash"))
    if doc.get("verdict") not in VERDICTS:
        raise _bad("verdict", f"one of {', '.join(VERDICTS)}", doc.get("verdict"))
    if not isinstance(doc.get("reasons"), list):
        raise _bad("reasons", "a JSON array", doc.get("reasons"))
    if not _is_text(doc.get("spec_version"), 100):
        raise _bad("spec_version", "a version string", doc.get("spec_version"))
    subject = _obj(doc, "subject", "subject")
    for key in ("target", "name", "version"):
        if not _is_text(subject.get(key)):
            raise _bad(f"subject.{key}", f"a printable string of at most {LIMITS['text']} characters",
                       subject.get(key))
    _names(subject.get("dtypes"), "subject.dtypes", FLOAT_DTYPES)
    narrowed = subject.get("dtypes_by_algorithm", {})  # absent in certificates before spec 2.2.0
    if not isinstance(narrowed, dict) or len(narrowed) > len(REGISTRY):
        raise _bad("subject.dtypes_by_algorithm", "a JSON object of registry algorithms", narrowed)
    for algorithm, listed in narrowed.items():
        if algorithm not in REGISTRY:
            raise _bad("subject.dtypes_by_algorithm", "registry algorithms as keys", algorithm)
        _names(listed, f"subject.dtypes_by_algorithm.{algorithm}", subject["dtypes"])
    _limits_of(subject.get("limits"))
    _check_accumulation(subject.get("accumulation"), subject["dtypes"])
    _check_refuses_by(subject.get("refuses_by", "raise"))  # absent in certificates before issue 39: raising
    variants = _variant_sets(doc.get("variants"))
    coverage = _obj(doc, "coverage", "coverage")
    _names(coverage.get("implemented"), "coverage.implemented", list(REGISTRY))
    _names(coverage.get("not_implemented"), "coverage.not_implemented", list(REGISTRY))
    if isinstance(variants, dict) and set(variants) != set(coverage["implemented"]):
        raise _Malformed(f"field variants declares sets for {_show(sorted(variants))}, not for exactly the "
                         f"implemented algorithms ({_show(sorted(coverage['implemented']))})")
    selection = _obj(doc, "selection", "selection")
    _names(selection.get("algorithms"), "selection.algorithms", list(REGISTRY), optional=True)
    _names(selection.get("dtypes"), "selection.dtypes", FLOAT_DTYPES, optional=True)
    _names(selection.get("devices"), "selection.devices", optional=True)
    for key in ("fixtures", "fixtures_required"):
        if selection.get(key) not in FIXTURE_LEVELS:
            raise _bad(f"selection.{key}", f"one of {', '.join(FIXTURE_LEVELS)}", selection.get(key))
    declared = _obj(selection, "declared", "selection.declared")
    _names(declared.get("algorithms"), "selection.declared.algorithms", list(REGISTRY))
    _names(declared.get("dtypes"), "selection.declared.dtypes", FLOAT_DTYPES)
    _names(declared.get("devices", []), "selection.declared.devices")
    summaries = _obj(doc, "algorithms", "algorithms")
    for name, summary in summaries.items():
        if name not in REGISTRY or not isinstance(summary, dict):
            raise _bad(f"algorithms.{_show(name)}", "a summary of a registry algorithm", summary)
    for i, c in enumerate(_rows(doc.get("results"), "results", LIMITS["results"])):
        where = f"results[{i}]"
        if c.get("algorithm") not in REGISTRY:
            raise _bad(f"{where}.algorithm", "a registry algorithm name", c.get("algorithm"))
        if c.get("dtype") not in FLOAT_DTYPES:
            raise _bad(f"{where}.dtype", f"one of {', '.join(FLOAT_DTYPES)}", c.get("dtype"))
        for key in ("implementation", "device"):
            if not _is_text(c.get(key)):
                raise _bad(f"{where}.{key}", "a printable string", c.get(key))
        if c.get("status") not in STATUSES:
            raise _bad(f"{where}.status", f"one of {', '.join(STATUSES)}", c.get("status"))
        if not (_is_int(c.get("examples")) and 0 <= c["examples"] <= LIMITS["examples"]):
            raise _bad(f"{where}.examples", f"a whole number from 0 to {LIMITS['examples']}", c.get("examples"))
        if not isinstance(c.get("worst_ratio"), (int, float, str)) or isinstance(c.get("worst_ratio"), bool):
            raise _bad(f"{where}.worst_ratio", "a number", c.get("worst_ratio"))
        if c.get("failure") is not None and not isinstance(c.get("failure"), dict):
            raise _bad(f"{where}.failure", "null or a JSON object", c.get("failure"))
        if c.get("note") is not None and not isinstance(c.get("note"), str):
            raise _bad(f"{where}.note", "null or a string", c.get("note"))
        if not isinstance(c.get("more_failures", []), list):
            raise _bad(f"{where}.more_failures", "a JSON array", c.get("more_failures"))
        exhausted = c.get("exhausted")
        if exhausted is not None and not (_is_int(exhausted) and 0 < exhausted <= c["examples"]):
            raise _bad(f"{where}.exhausted", "null or a whole number from 1 to the cell's examples", exhausted)
        _check_listing(c.get("indistinguishable"), f"{where}.indistinguishable", c["algorithm"], c["dtype"],
                       variants)
    for i, f in enumerate(_rows(doc.get("fixtures"), "fixtures", LIMITS["fixtures"])):
        where = f"fixtures[{i}]"
        for key in ("case", "algorithm", "dtype", "device"):
            if not _is_text(f.get(key)):
                raise _bad(f"{where}.{key}", "a printable string", f.get(key))
        if not isinstance(f.get("ok"), bool):
            raise _bad(f"{where}.ok", "true or false", f.get("ok"))
        if not isinstance(f.get("ratio"), (int, float, str)) or isinstance(f.get("ratio"), bool):
            raise _bad(f"{where}.ratio", "a number", f.get("ratio"))
    run = _obj(doc, "run", "run")
    if run.get("profile") not in PROFILES:
        raise _bad("run.profile", f"one of {', '.join(PROFILES)}", run.get("profile"))
    if not (_is_int(run.get("seed")) and 0 <= run["seed"] <= REPRODUCE_LIMITS["seed"]):
        raise _bad("run.seed", f"a whole number from 0 to {REPRODUCE_LIMITS['seed']}", run.get("seed"))
    if not (_is_int(run.get("minimum")) and 0 <= run["minimum"] <= LIMITS["examples"]):
        raise _bad("run.minimum", f"a whole number from 0 to {LIMITS['examples']}", run.get("minimum"))
    if not isinstance(run.get("interrupted", False), bool):
        raise _bad("run.interrupted", "true or false", run.get("interrupted"))
    for key in ("settings", "fixture_set", "extension"):
        if run.get(key) is not None and not isinstance(run.get(key), dict):
            raise _bad(f"run.{key}", "null or a JSON object", run.get(key))
    if not isinstance(run.get("examples_run"), dict):
        raise _bad("run.examples_run", "a JSON object", run.get("examples_run"))
    environment = _obj(doc, "environment", "environment")
    _obj(environment, "packages", "environment.packages", optional=True)
    for label, record in _obj(environment, "implementations", "environment.implementations").items():
        if not isinstance(record, dict):
            raise _bad(f"environment.implementations.{_show(label)}", "a JSON object", record)
        devices = record.get("devices", [])
        if not isinstance(devices, list) or len(devices) > LIMITS["devices"] or not all(
                isinstance(d, str) and len(d) <= LIMITS["text"] for d in devices):
            raise _bad(f"environment.implementations.{_show(label)}.devices",
                       f"a list of at most {LIMITS['devices']} device names", devices)


def _ratio(value: Any) -> float:
    """A recorded error ratio as a float: a number, or "inf" / "-inf" / "nan" as reports write
    them; anything else is NaN (never a pass)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "-inf", "nan", "infinity", "-infinity"):
        return float(value)
    return math.nan


def _passing_ratio(value: Any) -> bool:
    """Whether a recorded ratio may stand beside a pass: a finite number from 0 to 1 (NaN, a
    negative or an infinite ratio never passes)."""
    r = _ratio(value)
    return math.isfinite(r) and 0.0 <= r <= 1.0


def _expected_fixtures(doc: dict[str, Any]) -> tuple[Optional[set[tuple[str, str, str]]], str]:
    """The (case, dtype, device) fixture replays the certificate's selection calls for, from this
    installation's golden fixtures and the implementation's declarations as the certificate records
    them (the replay's own rule, ``fixture_replay._covers``); None with the reason when they cannot
    be counted here."""
    from ftspec.impls.api import Implementation

    from ..running.fixture_replay import DTYPES, _covers, _Target, sample_cases
    from ..core.fixture_files import FixtureError, load_manifest

    run, selection, subject = doc["run"], doc["selection"], doc["subject"]
    recorded = (run.get("fixture_set") or {}).get("manifest_sha256")
    try:
        manifest = load_manifest()
    except FixtureError as exc:
        return None, f"this installation's golden fixtures cannot be read ({exc})"
    if recorded != manifest.get("manifest_sha256"):
        shown = f"{recorded[:16]}…" if isinstance(recorded, str) and _is_text(recorded, 64) else _show(recorded)
        return None, (f"the certificate was made with fixture set {shown}, this installation has "
                      f"{str(manifest.get('manifest_sha256'))[:16]}…")
    found = doc["environment"]["implementations"].get(subject["target"], {}).get("devices", [])
    devices = select_devices([str(d) for d in found], selection.get("devices"))
    implemented = list(doc["coverage"]["implemented"])
    shadow = Implementation(
        name=subject["name"], version=subject["version"], algorithms={a: _never for a in implemented},
        dtypes=tuple(subject["dtypes"]), devices=lambda: devices, from_numpy=_never, to_numpy=_never,
        variants=_variant_sets(doc["variants"]), limits=_limits_of(subject.get("limits")))
    target = _Target(subject["target"], shadow, devices)
    records = [r for r in manifest.get("cases", [])
               if selection.get("algorithms") is None or r.get("algorithm") in selection["algorithms"]]
    chosen = set(sample_cases(records)) if selection["fixtures"] == "sample" else {r.get("id") for r in records}
    dtypes = [d for d in DTYPES if selection.get("dtypes") is None or d in selection["dtypes"]]
    table = manifest.get("variants", {})
    variants: dict[str, Optional[VariantSet]] = {}
    expected: set[tuple[str, str, str]] = set()
    for r in records:
        if r.get("id") not in chosen:
            continue
        key = str(r.get("variant"))
        if key not in variants:
            try:
                variants[key] = VariantSet.from_json(table[key]["json"])
            except Exception:  # noqa: BLE001 - not in a manifest that passed its checksum; not counted
                variants[key] = None
        hyper = {k: int(v) for k, v in r.get("hyper", {}).items()}
        for dtype in dtypes:
            variant = variants[key]
            if variant is not None and _covers(target, str(r["algorithm"]), dtype, variant, hyper) is not None:
                expected.update((str(r["id"]), dtype, device) for device in devices)
    return expected, ""


def _never(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a certificate's recorded declarations are data: nothing is called")


def _fixture_problems(doc: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(problems, notes) of the fixture replays against what the selection calls for."""
    run, selection = doc["run"], doc["selection"]
    fixtures = doc["fixtures"]
    from ..running.fixture_replay import DTYPES

    if selection["fixtures"] == "none" or run.get("interrupted"):
        return [], []
    if selection.get("dtypes") is not None and not set(selection["dtypes"]) & set(DTYPES):
        return [], []  # no fixture dtype selected: nothing is replayed
    found = doc["environment"]["implementations"].get(doc["subject"]["target"], {}).get("devices", [])
    if any(str(d).startswith("error") for d in found) or any(f["device"] == "-" and not f["ok"] for f in fixtures):
        return [], []  # the replay failed as a whole (no devices, no fixtures): failed records say so
    if run.get("fixture_set") is None:
        return [f"it names no fixture set (run.fixture_set), so the fixture replays its {selection['fixtures']!r} "
                "selection calls for cannot be counted"], []
    expected, why = _expected_fixtures(doc)
    if expected is None:
        return [], [f"fixture replays not counted: {why}"]
    have = {(f["case"], f["dtype"], f["device"]) for f in fixtures}
    missing = sorted(expected - have)
    if missing:
        return [f"{len(missing)} of the {len(expected)} fixture replays its {selection['fixtures']!r} selection "
                f"calls for are not recorded (it records {len(fixtures)}), e.g. {' '.join(missing[0])}"], []
    return [], []


def _problems(doc: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(every way the certificate contradicts itself, notes on what could not be checked here).
    Long on purpose: one list of independent checks, each a few lines, in the order docs/reports.md
    gives them; split, they would only pass the same two lists around."""
    try:
        _check_schema(doc)
    except _Malformed as exc:
        return [str(exc)], []
    results, fixtures = doc["results"], doc["fixtures"]
    run, selection, subject = doc["run"], doc["selection"], doc["subject"]
    minimum, declared, label = run["minimum"], selection["declared"], subject["target"]
    problems: list[str] = []
    prof = PROFILES[run["profile"]]
    if minimum < prof.certify_minimum:
        problems.append(f"minimum {minimum} is below the {prof.name} profile's {prof.certify_minimum}")
    if selection["fixtures_required"] != "all":
        problems.append("a certificate requires every golden fixture, the record says "
                        f"{selection['fixtures_required']!r}")
    if run.get("fixture_selection", selection["fixtures"]) != selection["fixtures"]:
        problems.append(f"run.fixture_selection {_show(run.get('fixture_selection'))} is not the selection's "
                        f"{selection['fixtures']!r}")
    if list(declared["algorithms"]) != list(doc["coverage"]["implemented"]):
        problems.append("the declared algorithms differ from the coverage")
    if list(declared["dtypes"]) != list(subject["dtypes"]):
        problems.append("the declared dtypes differ from the subject's")
    try:
        verdict, _ = derive(results, fixtures, minimum=minimum, selection=selection, declared=declared,
                            interrupted=bool(run.get("interrupted")))
    except NothingTested as exc:
        verdict = f"none ({exc})"
    if verdict != doc["verdict"]:
        problems.append(f"the recorded verdict {doc['verdict']!r} is not what the results give ({verdict!r})")
    seen: set[tuple[str, str, str]] = set()
    for c in results:
        key = (c["algorithm"], c["dtype"], c["device"])
        where = " ".join(key)
        if key in seen:
            problems.append(f"{where}: more than one result")
        seen.add(key)
        if c["implementation"] != label:
            problems.append(f"{where}: a result of {_show(c['implementation'])}, not of the subject {label!r}")
        if c["status"] == "pass" and c.get("failure") is not None:
            problems.append(f"{where}: 'pass' with a failure recorded")
        if c["status"] == "pass" and not _passing_ratio(c["worst_ratio"]):
            problems.append(f"{where}: 'pass' with an error ratio of {_show(c['worst_ratio'])}, not a number from 0 "
                            "to 1 (a ratio above 1, NaN, negative or infinite never passes)")
        if c["status"] == "fail" and c.get("failure") is None and not c.get("note"):
            problems.append(f"{where}: 'fail' with no failure recorded")
    for f in fixtures:
        if f["ok"] and not _passing_ratio(f["ratio"]):
            problems.append(f"fixture {f['case']} {f['dtype']}: 'ok' with an error ratio of {_show(f['ratio'])}, "
                            "not a number from 0 to 1 (a ratio above 1, NaN, negative or infinite never passes)")
    # every selected declared algorithm × dtype × device has its cell
    algorithms = [a for a in declared["algorithms"]
                  if selection.get("algorithms") is None or a in selection["algorithms"]]
    dtypes = [d for d in declared["dtypes"] if selection.get("dtypes") is None or d in selection["dtypes"]]
    found = doc["environment"]["implementations"].get(label, {}).get("devices", [])
    if any(str(d).startswith("error") for d in found) and not any(c["status"] == "error" for c in results):
        problems.append("the implementation's devices are recorded as an error, but no cell records one")
    if not any(str(d).startswith("error") for d in found) and not run.get("interrupted"):
        devices = select_devices([str(d) for d in found], selection.get("devices"))
        lacking = [f"{a} {d} {v}" for a in algorithms for d in dtypes for v in devices if (a, d, v) not in seen]
        if lacking:
            problems.append(f"no result for {len(lacking)} declared cells, e.g. {lacking[0]}")
    summaries = doc["algorithms"]
    wanted = [a for a in doc["coverage"]["implemented"]
              if selection.get("algorithms") is None or a in selection["algorithms"]]
    if set(summaries) != set(wanted):
        odd = sorted(set(summaries) ^ set(wanted))
        problems.append(f"the per-algorithm summaries do not match the selected algorithms ({', '.join(odd[:3])})")
    by_algorithm: dict[str, list[dict[str, Any]]] = {}
    for c in results:
        if c["status"] != "not implemented":
            by_algorithm.setdefault(c["algorithm"], []).append(c)
    for name, summary in summaries.items():
        mine = by_algorithm.get(name, [])
        if summary.get("verdict") != _algorithm_verdict(mine, minimum):
            problems.append(f"{name}: the summary verdict {_show(summary.get('verdict'))} disagrees with its cells")
        if summary.get("examples") != sum(c["examples"] for c in mine):
            problems.append(f"{name}: the summary's examples disagree with its cells")
    if run["examples_run"] != json.loads(json.dumps(_examples_run(results))):
        problems.append("the examples run disagree with the cells")
    more, notes = _fixture_problems(doc)
    return problems + more, notes


def consistency(doc: dict[str, Any]) -> list[str]:
    """Every way the certificate contradicts itself or breaks its schema (empty: consistent)."""
    return _problems(doc)[0]


def _load(path: Path | str) -> tuple[dict[str, Any], list[str]]:
    path = Path(path)
    try:
        doc = read_untrusted_json(path, what="certificate", limit=LIMITS["bytes"], error=CertificateError)
        if not isinstance(doc, dict):
            raise CertificateError(f"not an ftspec certificate (a JSON {type(doc).__name__})")
        if doc.get("schema") != CERTIFICATE_SCHEMA:
            raise CertificateError(f"not an ftspec certificate of schema {CERTIFICATE_SCHEMA} "
                                   f"(schema {_show(doc.get('schema'))})")
        want, got = doc.get("content_hash"), content_hash(doc)
        if want != got:
            raise CertificateError(f"content hash mismatch: recorded {_show(want)}, computed {got} (the certificate "
                                   "was changed after it was issued)")
        try:
            _check_schema(doc)
        except _Malformed as exc:
            raise CertificateError(f"malformed certificate: {exc}") from None
        problems, notes = _problems(doc)
        if problems:
            raise CertificateError(f"inconsistent certificate ({len(problems)} problem{'s' * (len(problems) != 1)}): "
                                   + "; ".join(problems[:3]))
    except CertificateError as exc:
        raise CertificateError(" ".join(f"{path}: {exc}".split())) from None
    return doc, notes


def load(path: Path | str) -> dict[str, Any]:
    """An intact, consistent certificate, read as untrusted input (``LIMITS``); CertificateError
    (one line, naming the file) says why not."""
    return _load(path)[0]


def verify(path: Path | str) -> tuple[bool, str]:
    """(intact and consistent?, a one-line message)."""
    try:
        doc, notes = _load(path)
    except CertificateError as exc:
        return False, str(exc)
    s = doc["subject"]
    return True, (f"intact and consistent: {s['name']} {s['version']} is {doc['verdict']} "
                  f"(spec {doc['spec_version']})" + "".join(f"; {n}" for n in notes) + "; this shows the certificate "
                  "agrees with itself, not that its results are true (a forgery can agree with itself): "
                  f"`{reproduce_command(path, 'NAME')}` runs them again")


def _setting(raw: dict[str, Any], key: str, ok: Callable[[Any], bool], want: str) -> Any:
    value = raw.get(key)
    if value is not None and not ok(value):
        raise _Malformed(f"field run.settings.{key} must be null or {want}, got {_show(value)}")
    return value


def recorded_settings(doc: dict[str, Any]) -> dict[str, Any]:
    """``Settings`` keywords that repeat the certified run, read as untrusted data and bounded
    (``REPRODUCE_LIMITS``): profile, seed, selection, examples, seconds, call timeout, fixtures,
    shards and block. ``jobs`` and ``in_process`` are never taken from the file (how the reproduction runs is
    the caller's choice: worker processes unless told otherwise), nor is anything it does not know.
    Raises CertificateError (one line) for a value out of its bounds."""
    run = doc["run"]
    raw = run.get("settings") or {}
    if not isinstance(raw, dict):
        raise _bad("run.settings", "null or a JSON object", raw)
    lim = REPRODUCE_LIMITS
    profile = raw.get("profile", run["profile"])
    if profile != run["profile"] or profile not in PROFILES:
        raise _Malformed(f"field run.settings.profile {_show(profile)} is not the run's profile "
                         f"{_show(run['profile'])}")
    seed = raw.get("seed", run["seed"])
    if seed != run["seed"] or not (_is_int(seed) and 0 <= seed <= lim["seed"]):
        raise _Malformed(f"field run.settings.seed {_show(seed)} is not the run's seed {_show(run['seed'])}")
    out: dict[str, Any] = {"profile": profile, "seed": seed}
    for key, allowed in (("algorithms", list(REGISTRY)), ("dtypes", list(FLOAT_DTYPES)), ("devices", None)):
        names = _names(raw.get(key), f"run.settings.{key}", allowed, optional=True)
        out[key] = tuple(names) if names else None
    out["examples"] = _setting(raw, "examples", lambda v: _is_int(v) and 1 <= v <= lim["examples"],
                               f"a whole number from 1 to {lim['examples']}")
    out["seconds"] = _setting(raw, "seconds", lambda v: _is_number(v) and 0 <= v <= lim["seconds"],
                              f"a number of seconds from 0 (no cap) to {lim['seconds']:g}")
    out["call_timeout"] = _setting(raw, "call_timeout", lambda v: _is_number(v) and 0 < v <= lim["call_timeout"],
                                   f"a number of seconds above 0, at most {lim['call_timeout']:g}")
    out["fixtures"] = _setting(raw, "fixtures", lambda v: v in FIXTURE_LEVELS, f"one of {', '.join(FIXTURE_LEVELS)}")
    out["shards"] = _setting(raw, "shards", lambda v: _is_int(v) and 1 <= v <= lim["shards"],
                             f"a whole number from 1 to {lim['shards']}")
    # a certificate written before blocks drew one value set per case
    out["block"] = _setting(raw, "block", lambda v: _is_int(v) and 1 <= v <= MAX_BLOCK,
                            f"a whole number from 1 to {MAX_BLOCK}") or 1
    return out


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def recorded_target(doc: dict[str, Any]) -> str:
    """The implementation the certificate records: text to show, never a module to import."""
    return str(doc["subject"]["target"])


def reproduce_command(path: Path | str, impl: str) -> str:
    """The command that reproduces the certificate at ``path`` on ``impl`` (quoted for a shell)."""
    return f"ftspec certify --reproduce {shlex.quote(str(path))} --impl {shlex.quote(impl)}"


def check_reproduction(path: Path | str, impl: Optional[str]) -> dict[str, Any]:
    """The certificate at ``path``, ready to be reproduced on ``impl``: intact, consistent, its
    recorded settings within bounds (``recorded_settings``), and an implementation named by the
    caller. The target the certificate records is never imported: without ``impl`` the
    CertificateError shows it as text with the command that would run it."""
    doc = load(path)
    try:
        recorded_settings(doc)
    except CertificateError as exc:
        raise CertificateError(f"{path}: {exc}") from None
    if not impl:
        target = recorded_target(doc)
        raise CertificateError(f"{path}: name the implementation to run with --impl; the certificate records "
                               f"{target!r}, which is never imported from the file; to run that one, type: "
                               f"{reproduce_command(path, target)}")
    return doc


@dataclass
class Certificate:
    """A certificate document, with the run it came from when it was made here."""

    doc: dict[str, Any]
    result: Optional[RunResult] = None

    @property
    def verdict(self) -> str:
        return str(self.doc["verdict"])

    @property
    def exit_code(self) -> int:
        return exit_code(self.verdict)

    def markdown(self) -> str:
        return render_markdown(self.doc)

    def write_json(self, path: Path | str) -> Path:
        return write_json(path, self.doc)

    def write_markdown(self, path: Path | str) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.markdown())
        return path

    def write(self, directory: Path | str) -> tuple[Path, Path]:
        """``certificate.json`` and ``certificate.md`` in ``directory``."""
        directory = Path(directory)
        return self.write_json(directory / "certificate.json"), self.write_markdown(directory / "certificate.md")


def _describe_limits(limits: Optional[dict[str, Any]], outside: int) -> str:
    """The shapes the certificate covers, from its recorded ``subject.limits``."""
    if not limits:
        return "none declared (every shape the spec draws)"
    parts = [f"{name}: {lim.describe()}" for name, lim in _limits_of(limits).items()]
    return ("; ".join(parts) + f" (only cases within them were drawn; {outside} golden fixture cases outside "
            "them were not replayed)")


def _variants_text(variants: Any) -> str:
    """The recorded variant sets on one line: "all", "a, b", or, per algorithm, the algorithms
    sharing their sets before them: "d_transformer, gpt2_layer: hf-gpt2; bert_layer: hf-bert"."""
    def names(declared: Any) -> str:
        return declared if isinstance(declared, str) else ", ".join(v["name"] for v in declared)

    if not isinstance(variants, dict):
        return names(variants)
    groups: dict[str, list[str]] = {}
    for algorithm, declared in variants.items():
        groups.setdefault(names(declared), []).append(algorithm)
    return "; ".join(f"{', '.join(algorithms)}: {sets}" for sets, algorithms in groups.items())


def listing_lines(results: Sequence[dict[str, Any]], *, width: Optional[int] = None,
                  most: Optional[int] = None) -> list[str]:
    """What the certificate's bfloat16 and float16 cells cannot tell apart (``indistinguishable``), one
    item per algorithm and dtype (cells on several devices share it): the alternatives with their
    difference/bound ratio, at most ``most`` of them (the rest counted; with ``most``, the cells that
    list nothing are counted, not shown), wrapped to ``width`` columns (None: one line each, for
    Markdown). Empty when no cell has a listing."""
    import textwrap

    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for c in results:
        record = c.get("indistinguishable")
        if isinstance(record, dict) and (c["algorithm"], c["dtype"]) not in seen:
            seen[(c["algorithm"], c["dtype"])] = record
    if not seen:
        return []
    items, quiet, unmeasured, unkept = [], 0, 0, 0
    for (algorithm, dtype), r in seen.items():
        alts = r["alternatives"]
        if most is not None and not alts:  # the short form: only the cells that list something
            quiet += bool(r["cases"])
            unmeasured += not r["cases"] and not r["complete"]
            unkept += not r["cases"] and bool(r["complete"])
            continue
        shown = alts if most is None else alts[:most]
        text = ", ".join(f"{a['change']} ({a['ratio']:.2g})" for a in shown)
        if len(shown) < len(alts):
            text += f", and {len(alts) - len(shown)} more"
        if not alts:
            text = "nothing" if r["cases"] else ("not measured (time budget)" if not r["complete"]
                                                 else "not measured (no passing example kept)")
        scope = f"under {r['under']['name']}, {r['cases']} passing example{'s' * (r['cases'] != 1)}" + (
            "" if r["complete"] else ", cut short by the time budget")
        items.append(f"{algorithm} at {dtype} ({scope}): {text}")
    head = ("Cannot tell apart: single switch changes of the declared set that stay within the bound on every "
            "passing example kept from the search (none of them separates it), with the largest difference/bound "
            "(docs/reports.md, \"What a certificate cannot tell apart\").")
    if quiet or unmeasured or unkept:
        items.append(", ".join(([f"{quiet} other cell{'s list' if quiet != 1 else ' lists'} nothing"] if quiet else [])
                               + ([f"{unmeasured} not measured within the time budget"] if unmeasured else [])
                               + ([f"{unkept} with no passing example kept"] if unkept else []))
                     + " (the certificate's Markdown lists every cell)")
    if width is None:
        return [head, ""] + [f"- {item}" for item in items]
    return (textwrap.wrap(head, width) + [line for item in items
                                          for line in textwrap.wrap(item, width, initial_indent="  ",
                                                                    subsequent_indent="    ")])


def render_markdown(doc: dict[str, Any]) -> str:
    s = doc["subject"]
    run = doc["run"]
    ex = run["examples_run"]
    sel = doc["selection"]
    variants = _variants_text(doc["variants"])
    missing = doc["coverage"]["not_implemented"]
    lines = [
        f"# ftspec certificate: {s['name']} {s['version']}",
        "",
        f"**Verdict: {doc['verdict']}** against the ftspec spec {doc['spec_version']} "
        f"(Phuong & Hutter, *Formal Algorithms for Transformers*, 2022).",
        "",
    ]
    if doc.get("reasons"):
        lines += [f"Why not conformant: {'; '.join(doc['reasons'][:5])}"
                  + (f" (and {len(doc['reasons']) - 5} more)" if len(doc["reasons"]) > 5 else ""), ""]
    lines += [
        f"- Target: `{s['target']}`; precision tier `{s['precision']}`; dtypes {', '.join(s['dtypes'])}"
        + "".join(f"; at {d}: accumulation in {a.get('accumulate', d)}, softmax in {a.get('softmax', d)}"
                  for d, a in (s.get("accumulation") or {}).items()),
        f"- Variant sets: {variants}",
        f"- Refuses what the spec refuses by {_refusal_text(s.get('refuses_by', 'raise'))}",
        f"- Within limits: {_describe_limits(s.get('limits'), run.get('fixtures_outside_limits', 0))}",
        f"- Coverage: {doc['coverage']['fraction']} algorithms"
        + (f" (not implemented: {', '.join(missing)})" if missing else ""),
        f"- Selection: {'; '.join(sel.get('narrowed') or []) or 'everything the implementation declares'}",
        f"- Examples run: {ex['total']} over {ex['cells']} cells (per cell: min {ex['min']}, median {ex['median']}, "
        f"max {ex['max']}); at least {run['minimum']} per cell required",
        f"- Run: profile `{run['profile']}`, seed {run['seed']}, {run['examples_per_search']} examples per search"
        + (f" capped at {run['seconds_per_search']} s" if run.get("seconds_per_search") else "")
        + (f", an extra round (seed {run['extension']['seed']}, at most {run['extension']['seconds']} s) for "
           f"{len(run['extension']['searches'])} searches" if run.get("extension") else "")
        + f", {run['seconds']} s" + (", **interrupted**" if run.get("interrupted") else ""),
        f"- Tolerances: Monte Carlo arithmetic, {doc['tolerances']['lanes']} lanes, safety factor "
        f"{sorted(set(doc['tolerances']['safety'].values()))} (docs/tolerances.md)",
        f"- Issued {doc['issued']}; content hash `{doc['content_hash']}` (detects accidental damage, not "
        "authorship: anyone can edit the file and compute a new hash)",
        "- What checking this certificate shows: `ftspec certify --verify certificate.json` finds damage and "
        "contradictions (a verdict its results do not give, a missing cell, a pass with an error ratio above 1 "
        "or not a number, fixture replays its selection calls for that are not recorded). It cannot find a "
        "forgery that agrees with itself: the results above are what the file says. Only "
        "`ftspec certify --reproduce certificate.json --impl NAME`, which runs the implementation you name "
        "with the recorded seed and settings, shows whether they are true.",
        "",
        "| algorithm | paper | dtype | device | examples | verdict | worst error/bound |",
        "|---|---|---|---|---:|---|---:|",
    ]
    for r in doc["results"]:
        if r["status"] == "not implemented":
            continue
        ratio = r["worst_ratio"]
        ratio = f"{ratio:.3g}" if isinstance(ratio, (int, float)) else ratio
        lines.append(f"| {r['algorithm']} | {r['paper']} | {r['dtype']} | {r['device']} | {r['examples']} | "
                     f"{r['status']} | {ratio} |")
    failures = [r for r in doc["results"] if r.get("failure")]
    if failures:
        lines += ["", "## Failures", ""]
        for r in failures:
            f = r["failure"]
            lines += [f"- **{r['algorithm']}** at {r['dtype']} on {r['device']} ({f['check']}): {f['message']}",
                      f"  - reproduce: `{f['reproducer']}`"]
    listed = listing_lines(doc["results"])
    if listed:
        lines += ["", "## What the dtype cannot tell apart", ""] + listed
    if doc.get("fixtures"):
        bad = [f for f in doc["fixtures"] if not f.get("ok", True)]
        lines += ["", "## Golden fixtures", "", f"{len(doc['fixtures']) - len(bad)} of {len(doc['fixtures'])} "
                  f"fixture replays pass ({run['fixture_selection']} fixtures)."]
        other = [f for f in doc["fixtures"] if f.get("declared_variant")]
        if other:  # conformance/running/fixture_replay.py: same mathematics under the plugin's own declared set
            live = sum(f.get("bounds") == "live" for f in other)
            lines.append(f"{len(other)} of them ran under the declared variant set, not the fixture's "
                         f"(the sets differ only in switches that change rounding or that the algorithm "
                         f"does not read); {live} with a bound derived for the declared set.")
        for f in bad:
            lines.append(f"- {f.get('case')} at {f.get('dtype')} on {f.get('device')}: {f.get('message')}")
    env = doc["environment"]
    lines += ["", "## Environment", "", f"Python {env['python']} on {env['platform']}; "
              + ", ".join(f"{k} {v}" for k, v in env["packages"].items() if v)]
    return "\n".join(lines) + "\n"

