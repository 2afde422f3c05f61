"""The diagnosis as a record: ``Diagnosis``, its report lines, and the plain form of the search's records.

``Diagnosis`` is what ``diagnose`` returns and what the JSON report and certificates carry
(``Diagnosis.to_dict``); ``_conclude`` turns the search's records into its matches and near misses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import numpy as np

#: where nothing fits, the closest set is shown with its error/bound factor, and beyond this factor
#: marked as no hint (a set off by 1e10 tolerances explains nothing); the JSON has the three closest
NEAREST_SHOWN = 100.0


def number(x: Any) -> str:
    """A number as plain text: ``-1.06`` or ``1e-05``, never ``np.float64(...)``."""
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    try:
        return repr(float(x))
    except (TypeError, ValueError):
        return str(x)


def _value(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _changes_text(changes: Mapping[str, Any]) -> str:
    return ", ".join(f"{k[len('input '):]} {v}" if k.startswith("input ") else f"{k} = {_value(v)}"
                     for k, v in changes.items())


def _items(rec: Mapping[str, Any]) -> frozenset:
    """A record's set as (switch, value) pairs: only the changes that differ from the declared set (a
    single ε change lists the declared placement beside the new ε; a preset lists only what
    differs), with the input reading, so that two records of one set compare equal."""
    reading = rec.get("_reading")
    extra = {(f"input {reading[0]}", reading[1])} if reading else set()
    return frozenset({(k, str(v)) for k, v in rec["_changes"].items()} | extra)


def _simplest(matches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The matches no other match explains with fewer changes (a subset of its changes, as listed: ε
    with its placement is one change, so ε = 1e-6 inside the root and ε = 1e-6 outside it are two
    alternatives, not one and a refinement)."""
    def listed(m: Mapping[str, Any]) -> set:
        return {(k, str(v)) for k, v in m["changes"].items()}

    return [m for m in matches if not any(listed(o) < listed(m) for o in matches)]


@dataclass
class Diagnosis:
    """What the search found; every field is plain data (JSON-ready)."""

    algorithm: str
    dtype: str
    declared: str  # the declared variant set (``VariantSet.describe``)
    #: sets the output agrees with: {"changes": {switch: value}, "declared": {switch: declared value},
    #: "presets": [names], "ratio": worst error/bound}
    matches: list[dict[str, Any]] = field(default_factory=list)
    #: the closest sets that do not fit (same keys), at most three
    near_misses: list[dict[str, Any]] = field(default_factory=list)
    structure: list[str] = field(default_factory=list)  # the case's salient features, in words
    searched: list[str] = field(default_factory=list)  # "single switches", "presets", "pairs"
    evaluated: int = 0  # variant sets evaluated
    candidates: int = 0  # variant sets the search had planned
    #: pairs of single changes screened on the spec's binary64 values (no bound needed to rule out a
    #: pair that is no closer to the output than the declared set), and pairs there were
    screened: int = 0
    pairs: int = 0
    gave_up: bool = False  # the time or evaluation budget ended the search early
    #: False when a repeat call's output agrees with the declared set (the failure did not recur)
    recurred: bool = True
    seconds: float = 0.0
    budget: dict[str, Any] = field(default_factory=dict)  # {"seconds": s, "evaluations": n}
    #: where a model or layer first departs (conformance/forensics/divergence/), or None
    divergence: Optional[dict[str, Any]] = None
    divergence_lines: list[str] = field(default_factory=list)
    #: more than one set fits and no case tried separates them: ``matches`` are the survivors
    ambiguous: bool = False
    #: what the confirmation on other cases did: {"failing": examples the search kept, "fresh": fresh
    #: cases tried, "excluded": [{"changes", "by"}]} (empty when one set fit at once)
    confirmed: dict[str, Any] = field(default_factory=dict)
    #: the narrowest dtype whose bound the output lies within, when no set fits (else None)
    lower_precision: Optional[str] = None
    #: whether every output is also a value of ``lower_precision`` (computed there and widened at the
    #: end), rather than only within its bound (computed there inside: a norm on ``x.float()``)
    lower_values: bool = False
    #: the other narrower dtypes whose bound the outputs also lie within (the case cannot tell them apart)
    lower_also: list[str] = field(default_factory=list)
    #: narrower dtypes whose bound held on the failing examples but not on a fresh case (where the
    #: narrower arithmetic would hold as well: so not the cause), with that case's label
    lower_refuted: list[dict[str, str]] = field(default_factory=list)
    #: the case diagnosed when it is not the failure's recorded one (a refusal's transformed case)
    on: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm, "dtype": self.dtype, "declared": self.declared,
            "matches": self.matches, "near_misses": self.near_misses, "structure": self.structure,
            "searched": self.searched, "evaluated": self.evaluated, "candidates": self.candidates,
            "screened": self.screened, "pairs": self.pairs,
            "gave_up": self.gave_up, "recurred": self.recurred, "seconds": round(self.seconds, 3),
            "budget": self.budget, "divergence": self.divergence, "ambiguous": self.ambiguous,
            "confirmed": self.confirmed, "lower_precision": self.lower_precision,
            "lower_values": self.lower_values, "lower_also": self.lower_also,
            "lower_refuted": self.lower_refuted, "on": self.on,
        }

    def summary(self) -> str:
        """One line: the matched conventions, or that none fits."""
        if not self.recurred:
            return ("none needed: a repeat call's output agrees with the declared set (the failure did not "
                    "recur: nondeterministic or state-dependent)")
        if self.matches:
            parts = []
            simplest = _simplest(self.matches)
            for m in simplest[:4]:
                names = m["presets"][:3] + ([f"{len(m['presets']) - 3} more"] if len(m["presets"]) > 3 else [])
                also = f" (preset {', '.join(names)})" if names else ""
                if m.get("parameters"):  # the parameter set differs under it: say how it was fitted
                    fitted = m["parameters"][:3] + (["..."] if len(m["parameters"]) > 3 else [])
                    also += f" [parameters: {', '.join(fitted)}]"
                parts.append(f"{_changes_text(m['changes'])}{also}; declared: {_changes_text(m['declared'])}")
            more = f" (and {len(simplest) - 4} more)" if len(simplest) > 4 else ""
            if self.ambiguous and len(simplest) > 1:
                return ("ambiguous between " + " | and ".join(parts) + more
                        + " (each fits every case tried; none separates them)")
            return "matches " + " | or ".join(parts) + more
        if self.lower_precision:
            low = self.lower_precision
            # outputs that are the narrower dtype's values are its fingerprint; outputs of the declared
            # dtype within its bound are that or a departure smaller than its rounding: both are said
            how = (f"its outputs are {low} values; no neighbouring variant set fits" if self.lower_values
                   else f"its outputs are {self.dtype} values carrying {low} rounding, or a departure "
                        f"smaller than that rounding which no neighbouring variant set states")
            also = "".join(f" (or {a}: within its bound too)" for a in self.lower_also)
            refuted = "".join(f"; not {r['dtype']}: outside its bound on {r['by'].split(' (')[0]}"
                              for r in self.lower_refuted[:1])
            return (f"computes in {low} inside{also}: the output lies within {low}'s bound (the declared "
                    f"set with {low} arithmetic), not within {self.dtype}'s; {how}{refuted}")
        text = f"no neighbouring variant set fits (declared {self.declared})"
        if self.lower_refuted:  # a lower precision that only the failing examples' bounds allowed
            r = self.lower_refuted[0]
            text += (f"; not {r['dtype']} inside: within its bound on the failing example, outside it on "
                     f"{r['by'].split(' (')[0]}")
        if self.near_misses and self.near_misses[0].get("excluded"):
            n = self.near_misses[0]
            text += f"; {_changes_text(n['changes'])} is within its bound but excluded: {n['excluded']}"
        elif self.near_misses:  # the closest set, with its factor: how far from fitting it is
            n = self.near_misses[0]
            far = "" if float(n["ratio"]) <= NEAREST_SHOWN else ", no hint"  # the JSON form: "inf" too
            text += f"; closest: {_changes_text(n['changes'])} (error/bound {_ratio(n['ratio'])}{far})"
        return text

    def lines(self) -> list[str]:
        """The report's lines (without indentation)."""
        if not self.searched and self.divergence is not None:  # a located exception: no variant search
            return list(self.divergence_lines)
        out = [f"likely cause: {self.summary()}"]
        if self.on:
            out.append(f"diagnosed on {self.on}")
        if self.structure:
            out.append("case structure: " + "; ".join(self.structure))
        how = " + ".join(self.searched) or "nothing"
        pairs = f", {self.screened} of {self.pairs} pairs screened" if self.pairs else ""
        tail = (f"gave up after {self.seconds:.1f} s, {self.evaluated} of {self.candidates} variant sets "
                f"evaluated{pairs}" if self.gave_up
                else f"{self.evaluated} variant sets evaluated{pairs} in {self.seconds:.1f} s")
        out.append(f"(searched {how}; {tail})")
        c = self.confirmed
        if c:
            out.append(f"(confirmed on {c['failing']} other failing example{'s' if c['failing'] != 1 else ''} "
                       f"and {c['fresh']} fresh case{'s' if c['fresh'] != 1 else ''}; "
                       f"{len(c['excluded'])} set{'s' if len(c['excluded']) != 1 else ''} excluded)")
        return out + list(self.divergence_lines)


def _ratio(r: Any) -> str:
    r = float(r)  # the JSON form writes an infinite ratio as "inf"
    return f"{r:.3g}" if math.isfinite(r) else "inf"


def _conclude(d: Diagnosis, recs: list[dict[str, Any]]) -> None:
    """The matches (fewest changes first) and the three nearest misses among the evaluated sets."""
    recs = [r for r in recs if not r.get("_merged")]  # one record per set: its duplicates are merged
    fits = [r for r in recs if r["fits"]]
    # fewest changes first, a set needing made-up parameters after one that needs none
    fits.sort(key=lambda r: (bool(r.get("parameters")), len(r["changes"]), r["ratio"]))
    d.matches = [_public(r) for r in fits]
    misses = [r for r in recs if not r["fits"] and math.isfinite(r["ratio"])]
    # a set another case excluded first, one the case could not tell before one whose bound is vacuous,
    # then the closest by its error/bound factor
    misses.sort(key=lambda r: (not r.get("excluded"), "vacuous" in r.get("excluded", ""), r["ratio"]))
    d.near_misses = [_public(r) for r in misses[:3]]
    if not d.gave_up:  # every planned set was evaluated (a preset equal to a single change counts once)
        d.candidates = d.evaluated


def _public(rec: Mapping[str, Any]) -> dict[str, Any]:
    def plain(v: Any) -> Any:
        return float(v) if isinstance(v, float) else v

    r = rec["ratio"]
    return {"changes": {k: plain(v) for k, v in rec["changes"].items()},
            "declared": {k: plain(v) for k, v in rec["declared"].items()},
            "presets": list(rec["presets"]), "ratio": float(r) if math.isfinite(r) else "inf",
            **({"parameters": list(rec["parameters"])} if rec.get("parameters") else {}),
            **({"refused": True} if rec.get("refused") else {}),
            **({"excluded": rec["excluded"]} if rec.get("excluded") else {}),
            **({"possible": rec["possible"]} if rec.get("possible") else {})}
