"""``ftspec bench libraries``: certify every bundled library plugin and tabulate the results.

The library plugins are the bundled entry points that wrap a real library
at its boundary (torch.nn, Hugging Face transformers, Flax); the project's
own independent implementations (``discovery.INDEPENDENT``) are not among
them. Each is certified exactly as a user would certify it
(``session.certify``, the code under ``ftspec certify NAME``), and the
results become the generated part of docs/libraries.md: one row per plugin
and entry with the library version, the variant set switch by switch, the
verdict per dtype, the examples run, the worst error/bound and the time,
then every failure with its case, its likely cause and its reproducer.

The generated part sits between two marker lines, so the hand-written
sections of docs/libraries.md (what each plugin wraps, findings checked in
float64) stay as they are when the table is regenerated.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ftspec.conformance.core.status import Status
from ftspec.impls.discovery import INDEPENDENT, discover, load_record
from ftspec.spec.variants import PAPER, VariantSet

__all__ = ["BEGIN", "END", "certify_libraries", "library_plugins", "markdown", "write_into"]

BEGIN = "<!-- ftspec bench libraries: generated table, begin (do not edit by hand) -->"
END = "<!-- ftspec bench libraries: generated table, end -->"

DTYPE_ORDER = ("float64", "float32", "bfloat16", "float16")


def library_plugins() -> list[str]:
    """The registered bundled plugins that wrap a library, by name."""
    return sorted(name for name, rec in discover().items() if rec.bundled and name not in INDEPENDENT)


def _not_loadable(name: str) -> Optional[str]:
    rec = discover().get(name)
    if rec is None:
        return "not registered"
    load_record(rec)
    if rec.impl is None:
        return f"not installed ({rec.error}){'; ' + rec.hint if rec.hint else ''}"
    return None


def certify_libraries(names: Optional[Sequence[str]] = None, *, profile: str = "quick", seed: int = 0,
                      jobs: Optional[int] = None,
                      progress: Optional[Callable[[str], None]] = None) -> list[dict[str, Any]]:
    """Certify each library plugin (all of them by default): a record per plugin, plain values only."""
    from ftspec.conformance.session.commands import SessionError, Settings, certify

    say = progress or (lambda _msg: None)
    records: list[dict[str, Any]] = []
    chosen = list(names) if names else library_plugins()
    for i, name in enumerate(chosen, 1):
        why = _not_loadable(name)
        if why is not None:
            say(f"[{i}/{len(chosen)}] {name}: skipped, {why}")
            records.append({"plugin": name, "skipped": why})
            continue
        say(f"[{i}/{len(chosen)}] {name}: certifying at the {profile} profile")
        started = time.perf_counter()
        try:
            cert = certify(name, Settings(profile=profile, seed=seed, jobs=jobs))
        except SessionError as exc:
            records.append({"plugin": name, "skipped": f"could not be certified: {exc}"})
            continue
        seconds = time.perf_counter() - started
        say(f"[{i}/{len(chosen)}] {name}: {cert.verdict} ({seconds:.0f} s)")
        records.append({"plugin": name, "seconds": round(seconds, 1), "certificate": cert.doc})
    return records


def _switches(variants: Any) -> str:
    """The declared variant set(s), switch by switch (the paper's choices left out); declared per
    algorithm ({algorithm: sets}), the algorithms that share theirs before them."""
    if isinstance(variants, str):
        return variants
    if isinstance(variants, dict):
        groups: dict[str, list[str]] = {}
        for algorithm, declared in variants.items():
            groups.setdefault(_switches(declared), []).append(algorithm)
        return "; ".join(f"{', '.join(algorithms)}: {text}" for text, algorithms in groups.items())
    out = []
    for v in variants:
        changes = VariantSet.from_json(v["json"]).differences(PAPER)
        out.append(", ".join(f"`{k}={_short(val)}`" for k, val in sorted(changes.items())) or "the paper's")
    return "; ".join(out)


def _short(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _ratio(r: Any) -> str:
    try:
        x = float(r)
    except (TypeError, ValueError):
        return str(r)
    return f"{x:.3g}"


def _rows(rec: dict[str, Any]) -> list[list[str]]:
    doc = rec["certificate"]
    subject = doc["subject"]
    cells = [c for c in doc["results"] if c["status"] != Status.NOT_IMPLEMENTED]
    rows = []
    for algorithm in dict.fromkeys(c["algorithm"] for c in cells):
        mine = [c for c in cells if c["algorithm"] == algorithm]
        by_dtype = []
        for dtype in DTYPE_ORDER:
            statuses = sorted({c["status"] for c in mine if c["dtype"] == dtype})
            if statuses:
                by_dtype.append(f"{dtype}: {'/'.join(statuses)}")
        examples = [int(c["examples"]) for c in mine]
        worst = max((float(c["worst_ratio"]) for c in mine), default=0.0)
        rows.append([f"`{rec['plugin']}`", f"{subject['version']}", algorithm, "; ".join(by_dtype),
                     f"{min(examples)}-{max(examples)}" if examples else "0", _ratio(worst)])
    return rows


def _failures(rec: dict[str, Any]) -> list[str]:
    out = []
    for c in rec["certificate"]["results"]:
        f = c.get("failure")
        if not f:
            continue
        first = (f.get("message") or "").strip().splitlines()[:1]
        out.append(f"- `{rec['plugin']}` {c['algorithm']} {c['dtype']} {c['device']}: check `{f['check']}`"
                   + (f": {first[0]}" if first else ""))
        if f.get("diagnosis"):
            out.append(f"  - likely cause: {_diagnosis_line(f['diagnosis'])}")
        if f.get("reproducer"):
            out.append(f"  - reproduce: `{f['reproducer']}`")
    return out


def _diagnosis_line(d: dict[str, Any]) -> str:
    matches = d.get("matches") or []
    if not matches:
        return "no neighbouring variant set fits"
    parts = [", ".join(f"{k}={_short(v)}" for k, v in sorted(m.get("changes", {}).items())) for m in matches[:3]]
    return "the output matches " + " or ".join(p or "the declared set" for p in parts)


def markdown(records: list[dict[str, Any]], *, profile: str = "quick", seed: int = 0) -> str:
    """The generated section of docs/libraries.md (between ``BEGIN`` and ``END``)."""
    lines = [BEGIN, "", f"### Results (`ftspec bench libraries`, profile {profile}, seed {seed})", ""]
    certified = [r for r in records if "certificate" in r]
    lines += ["| plugin | verdict | variant set (switches that differ from the paper) | examples per cell "
              "| time |", "|---|---|---|---|---|"]
    for r in certified:
        doc = r["certificate"]
        ex = doc["run"]["examples_run"]
        lines.append(f"| `{r['plugin']}` | {doc['verdict']} | {_switches(doc['variants'])} | "
                     f"{ex['min']}-{ex['max']} (median {ex['median']}) | {r['seconds']:.0f} s |")
    for r in records:
        if "skipped" in r:
            lines.append(f"| `{r['plugin']}` | not run | {r['skipped']} | - | - |")
    lines += ["", "| plugin | library version | entry | verdict per dtype | examples | worst error/bound |",
              "|---|---|---|---|---|---|"]
    for r in certified:
        lines += ["| " + " | ".join(row) + " |" for row in _rows(r)]
    failures = [line for r in certified for line in _failures(r)]
    lines += ["", "Failures:" if failures else "No failures.", ""] + failures + ([""] if failures else [])
    lines.append(END)
    return "\n".join(lines) + "\n"


def write_into(path: Path | str, section: str) -> Path:
    """Replace the generated section of ``path`` (or append it when the file has none)."""
    path = Path(path)
    text = path.read_text() if path.exists() else "# Library plugins\n"
    if BEGIN in text and END in text:
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        text = head + section.rstrip("\n") + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)
    return path
