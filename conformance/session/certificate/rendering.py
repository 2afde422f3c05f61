"""Rendering a certificate: its Markdown page (``render_markdown``) and the lines saying what its
low-precision cells cannot tell apart (``listing_lines``, also printed by ``ftspec certify``)."""

from __future__ import annotations

import re
import textwrap
from typing import Any, Optional, Sequence

from ...core.status import Status
from .reading import limits_of


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



def describe_limits(limits: Optional[dict[str, Any]], outside: int) -> str:
    """The shapes the certificate covers, from its recorded ``subject.limits``."""
    if not limits:
        return "none declared (every shape the spec draws)"
    parts = [f"{name}: {lim.describe()}" for name, lim in limits_of(limits).items()]
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
    wrap = _AtCommas(width, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False)
    return textwrap.wrap(head, width) + [line for item in items for line in wrap.wrap(item)]


class _AtCommas(textwrap.TextWrapper):
    """Breaks lines at spaces and after the commas of a variant set's name (``a=1,b=2``, one word
    to ``textwrap``), never inside a value: ``epsilon=1e-06`` was cut after its hyphen and a long
    name wherever the width fell."""

    wordsep_simple_re = re.compile(r"(\s+|(?<=,)(?=[^\s,]))")


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
        f"- Within limits: {describe_limits(s.get('limits'), run.get('fixtures_outside_limits', 0))}",
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
        if r["status"] == Status.NOT_IMPLEMENTED:
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

