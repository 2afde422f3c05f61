"""docs/benchmarks.md from the bench's results (one JSON-able dictionary).

The results dictionary has optional sections ``power`` (records and their
summary and the baselines' calibration), ``false_failures``, ``speed``
(``throughput``, ``growth``, ``xdist``) and ``meta`` (date, machine,
versions, budgets); ``markdown(results)`` renders whatever is present.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import sys
from typing import Any, Optional

from ftspec.conformance.core.status import Status

from .speed import GROWTH_BAND

__all__ = ["markdown", "meta"]

def meta(budgets: dict[str, Any]) -> dict[str, Any]:
    from ftspec.conformance.session.report import package_versions
    from ftspec.spec import SPEC_VERSION

    versions = package_versions()

    return {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "platform": platform.platform(), "machine": platform.machine(), "processor": platform.processor(),
            "cpus": os.cpu_count(), "python": sys.version.split()[0], "spec_version": SPEC_VERSION,
            "versions": versions, "budgets": budgets}


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100.0 * k / n:.0f}%)" if n else "–"


def _s(x: Optional[float], digits: int = 2) -> str:
    if x is None:
        return "–"
    if x >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}f}"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in r) + " |")
    return out


def _short_case(c: Optional[dict[str, Any]]) -> str:
    if not c:
        return "–"
    hyper = ", ".join(f"{k}={v}" for k, v in c["hyper"].items())
    return f"{c['scalars']} scalars ({c['algorithm']}, {c['dtype']}: {hyper})"


def _cell_text(rec: dict[str, Any], section: str, dtype: str) -> str:
    cells = [c for c in rec.get(section, {}).get("cells", []) if c["dtype"] == dtype]
    if not cells:
        return "–"
    fails = [c for c in cells if c["status"] == Status.FAIL]
    if fails:
        return "killed (" + ", ".join(sorted({c.get("check", "?") for c in fails})) + ")"
    if any(c["status"] == Status.ERROR for c in cells):
        return "harness error"
    if all(c["status"] == Status.NO_EXAMPLES for c in cells):
        return "no examples"
    return "survived"


def _power(out: list[str], results: dict[str, Any]) -> None:
    power = results["power"]
    s = power["summary"]
    recs = {r["id"]: r for r in power["records"] if "error" not in r}
    rows_by_id = {r["id"]: r for r in s["rows"] if "error" not in r}
    score = s["score"]
    out += ["## Mutation score", ""]
    out.append(f"**{_pct(score['killed'], score['non_equivalent'])}** of the mutants that are not equivalent at "
               f"every dtype they run at are killed by the harness ({s['mutants']} mutants run, of {len(_zoo())} "
               f"in the zoo; a mutant is killed when some search of an algorithm it breaks fails; each runs at "
               f"float64 and float32, and float16 too where its bug bites in low precision).")
    out.append("")
    out += _table(["dtype", "killed / non-equivalent at that dtype"],
                  [[d, _pct(v["killed"], v["mutants"])] for d, v in s["by_dtype"].items()])
    out.append("")
    tk, te = s["time_to_kill"], s["examples_to_kill"]
    out.append(f"Time to kill (seconds from the start of a search to its first failing example, before "
               f"shrinking; the fastest search of each killed mutant): median **{_s(tk['median'])} s**, 90th "
               f"percentile **{_s(tk['p90'])} s**, max **{_s(tk['max'])} s** over {tk['n']} killed mutants. "
               f"Examples until the first failure: median {_s(te['median'], 0)}, 90th percentile "
               f"{_s(te['p90'], 0)}, max {te['max']}. Shrunk counterexamples: median "
               f"{_s(s['counterexample_scalars']['median'], 0)} scalars (inputs, parameters and batch), max "
               f"{s['counterexample_scalars']['max']}.")
    out += ["", "### Per algorithm", "",
            "Mutants whose searched algorithms (`targets`) include the entry, and how many of them fail a search "
            "of that entry.", ""]
    out += _table(["algorithm", "family", "killed / mutants"],
                  [[a, _family(a), _pct(v["killed"], v["mutants"])] for a, v in s["by_algorithm"].items()])
    out += ["", "### Per family", ""]
    out += _table(["family (of the first target)", "killed / mutants"],
                  [[f, _pct(v["killed"], v["mutants"])] for f, v in sorted(s["by_family"].items())])

    out += ["", "## Baselines", "",
            "Each baseline runs on the same mutants and algorithms. A baseline's kill counts only where the same "
            "judgement passes the correct plugin the mutant was built from (otherwise it cannot tell the bug from "
            "correct code); `raw` counts every failure.", ""]
    b = s["baselines"]
    cal = power.get("calibration")
    labels = {
        "assert_close": "assert_close: the same Hypothesis searches (strategies, seed, budget, every other check) "
                        "judged with `torch.testing.assert_close`'s default rtol/atol instead of the derived "
                        "tolerances",
        "fixtures": "fixtures, ftspec's tolerances: the golden fixtures of the targeted algorithms at float64 and "
                    "float32, each output within the harness's derived bound; no search",
        "fixtures_assert_close": "fixtures, assert_close tolerances: the same fixtures within torch's default "
                                 "rtol/atol, as ONNX's backend tests use their fixtures",
    }
    rows = []
    for key, text in labels.items():
        if key not in b:
            continue
        x = b[key]
        rows.append([text, _pct(x["killed"], x["mutants"]), x["raw_killed"],
                     ", ".join(f"`{i}`" for i in x["missed_by_baseline_caught_by_harness"]) or "none",
                     ", ".join(f"`{i}`" for i in x["caught_by_baseline_missed_by_harness"]) or "none"])
    out += _table(["baseline", "kills (credible)", "raw", "caught by the harness, missed by it",
                   "caught by it, missed by the harness"], rows)
    if cal:
        fails = [c for c in cal["assert_close"]["cells"] if c["status"] == Status.FAIL]
        out += ["", f"The baselines on the correct plugins: assert_close fails {len(fails)} of "
                f"{len(cal['assert_close']['cells'])} searches of correct code ("
                + (", ".join(f"{c['impl']} {c['algorithm']} {c['dtype']}" for c in fails) or "none") + "); "
                + "; ".join(f"fixtures with {'ftspec' if k == 'fixtures' else 'assert_close'} tolerances fail "
                            + ", ".join(f"{base} on {len(v)} replays" for base, v in cal[k].items())
                            for k in ("fixtures", "fixtures_assert_close")) + "."]

    out += ["", "## The zoo", "",
            "One row per mutant: the algorithms searched (of those it breaks), the verdict at each dtype "
            "(the check that failed first), time and examples to the first failure, the smallest shrunk "
            "counterexample, and the baselines' verdicts. `≡` marks dtypes where the mutant is declared "
            "equivalent.", ""]
    rows = []
    for mid, rec in recs.items():
        r = rows_by_id[mid]
        verdicts = []
        for d in rec["dtypes"]:
            v = _cell_text(rec, "harness", d)
            verdicts.append(f"{d}: {v}{' ≡' if d in rec['equivalent'] else ''}")
        ac = ("; ".join(f"{d}: {_cell_text(rec, 'assert_close', d)}" for d in rec["dtypes"])
              if "assert_close" in rec else "–")
        fxt = "; ".join(_fixture_text(rec.get(k)) for k in ("fixtures", "fixtures_assert_close"))
        rows.append([f"`{mid}`", rec["description"], ", ".join(rec["targets"]), "<br>".join(verdicts),
                     _s(r["time_to_kill"]), r["examples_to_kill"] if r["examples_to_kill"] is not None else "–",
                     _short_case(r["counterexample"]), ac, fxt])
    out += _table(["mutant", "bug", "searched", "harness", "ttk (s)", "examples", "counterexample",
                   "assert_close", "fixtures (ftspec bounds; assert_close)"], rows)
    out += ["", "### Where each bug is and where it comes from", ""]
    rows = []
    for mid, rec in recs.items():
        m = _zoo().get(mid)
        how = rec.get("edit") or (m.edit if m is not None else "") or rec["kind"] + " wrapper"
        rows.append([f"`{mid}`", how, rec["base"],
                     ", ".join(rec["breaks"]) if len(rec["breaks"]) <= 4 else f"{len(rec['breaks'])} entries",
                     rec["source"] or "–"])
    out += _table(["mutant", "injected as", "base", "breaks", "seen in"], rows)

    out += ["", "## Survivors", ""]
    from ftspec.tools.zoo import MUTANTS

    surv = []
    for mid in s["survivors"]:
        rec = recs[mid]
        m = MUTANTS.get(mid)
        if rows_by_id[mid]["harness"]["equivalent_everywhere"]:
            reason = "equivalent: " + (rec["equivalence"] or "declared equivalent at every dtype run")
        elif m is not None and m.note:
            reason = m.note
        else:
            reason = "**unexplained: a gap the harness must close**"
        surv.append([f"`{mid}`", reason])
    out += _table(["mutant", "why it survives"], surv) if surv else ["None."]
    partial = s.get("partial_survivors") or {}
    if partial:
        out += ["", "Killed, but not at every dtype where it is not declared equivalent (the dtypes it survived "
                "at; a gap or a limit of the dtype, see the notes):", ""]
        for mid, ds in partial.items():
            m = MUTANTS.get(mid)
            note = "; ".join(x for x in (m.equivalence, m.note) if x) if m is not None else ""
            out.append(f"- `{mid}` survived at {', '.join(ds)}" + (f": {note}" if note else ""))
    kwe = s.get("killed_where_equivalent") or {}
    if kwe:
        out += ["", "Killed at a dtype where declared equivalent (each one is explained in the zoo notes "
                "below or is a finding):", ""]
        for mid, ds in kwe.items():
            m = MUTANTS.get(mid)
            out.append(f"- `{mid}` at {', '.join(ds)}" + (f": {m.note}" if m is not None and m.note else ""))
    ff = results.get("false_failures")
    if ff:
        bad = {(c["impl"], c["algorithm"], c["dtype"]) for c in ff["cells"] if c["status"] == Status.FAIL}
        doubtful = sorted({f"`{mid}` ({c['algorithm']} {c['dtype']})" for mid, rec in recs.items()
                           for c in rec["harness"]["cells"]
                           if c["status"] == Status.FAIL and (rec["base"], c["algorithm"], c["dtype"]) in bad})
        out += ["", "Kills on an (algorithm, dtype) where the correct base implementation also failed the "
                "false-failure run below (such a kill may not be the mutant's bug): "
                + (", ".join(doubtful) or "none") + "."]
    if s["errors"]:
        out += ["", "Mutants whose bench run raised (harness problems):", ""]
        out += [f"- `{e['id']}`: {e['error']}" for e in s["errors"]]
    harness_errors = [(rid, c) for rid, rec in recs.items() for c in rec["harness"]["cells"]
                      if c["status"] == Status.ERROR]
    if harness_errors:
        out += ["", "Searches that ended in a harness error (not counted as kills):", ""]
        out += [f"- `{rid}` {c['algorithm']} {c['dtype']}: {c['note'][:200]}" for rid, c in harness_errors]


def _fixture_text(fx: Optional[dict[str, Any]]) -> str:
    if not fx:
        return "–"
    if fx["ran"] == 0:
        return "no fixtures"
    return f"killed ({fx['failed']}/{fx['ran']})" if fx["killed"] else f"survived ({fx['ran']})"


def _zoo() -> dict[str, Any]:
    from ftspec.tools.zoo import MUTANTS

    return MUTANTS


def _family(name: str) -> str:
    from ftspec.spec.registry import entry

    return entry(name).family


def _false_failures(out: list[str], ff: dict[str, Any], cal: Optional[dict[str, Any]] = None) -> None:
    out += ["## False failures", "",
            f"The three correct implementations together, `{ff['profile']}` profile capped at "
            f"**{ff['examples_cap']} examples per search** (seed {ff['seed']}), every registry entry at "
            f"every dtype each supports: **{ff['examples']} implementation-examples ran, "
            f"{len(ff['failed_cells'])} searches failed** ({_s(ff['seconds'], 0)} s)"
            + (f"; {len(ff['error_cells'])} searches did not run (below)" if ff["error_cells"] else "") + ".", ""]
    by: dict[tuple[str, str, str], list[int]] = {}
    for c in ff["cells"]:
        if c["status"] == Status.NOT_IMPLEMENTED:
            continue
        k = by.setdefault((c["impl"], c.get("device", "cpu"), c["dtype"]), [0, 0, 0, 0])
        k[0] += c["examples"]
        k[1] += c["status"] == Status.FAIL
        k[2] += c["status"] in (Status.ERROR, Status.NO_EXAMPLES)
        k[3] += 1
    out += _table(["implementation", "device", "dtype", "examples", "failed searches", "did not run", "searches"],
                  [[i, dev, d, v[0], v[1], v[2], v[3]] for (i, dev, d), v in sorted(by.items())])
    if ff["failed_cells"]:
        out += ["", "Failures:", ""]
        for c in ff["failed_cells"]:
            out.append(f"- {c['impl']} {c['algorithm']} {c['dtype']} ({c.get('check')}): {c.get('message', '')[:240]}"
                       f" — {c.get('case', '')[:200]}")
    if ff["error_cells"]:
        out += ["", "Searches that did not run (harness error or every case refused), grouped by reason:", ""]
        groups: dict[str, list[str]] = {}
        for c in ff["error_cells"]:
            groups.setdefault(f"{c['status']}: {c['note'][:160]}".replace(repr(c["algorithm"]), "<entry>"),
                              []).append(c["algorithm"])
        for reason, algs in groups.items():
            names = sorted(set(algs))
            out.append(f"- {len(algs)} searches ({', '.join(names)}): {reason}")
    if cal and cal.get("fixtures"):
        out += ["", "Golden fixtures of the zoo's targeted algorithms replayed on the correct base plugins (the "
                "baselines' calibration), with ftspec's tolerances: "
                + "; ".join(f"{base}: {len(v)} failing replays" + (f" ({', '.join(v[:8])})" if v else "")
                            for base, v in cal["fixtures"].items()) + "."]
    fx = ff.get("fixtures")
    if fx:
        out += ["", f"Golden fixture replays on the same implementations: {fx['ran']} ran, {len(fx['failed'])} failed."]
        for f in fx["failed"][:20]:
            out.append(f"- {f['implementation']} {f['case']} {f['dtype']}: {f['message'][:200]}")


def _speed(out: list[str], speed: dict[str, Any]) -> None:
    out += ["## Speed", ""]
    tp = speed.get("throughput")
    if tp:
        ex = tp[0]["examples"] if tp else 0
        out += [f"One search per implementation alone and algorithm at {tp[0]['dtype']}, default profile, "
                f"{speed.get('throughput_examples', ex)} examples: examples per second, and the shares of the "
                "time spent computing the spec's reference (binary64 and the Monte Carlo tolerances), in "
                "implementation calls (conversions included), and in the harness itself (Hypothesis, rounding, "
                "judging).", ""]
        impls = sorted({r["impl"] for r in tp}, key=["numpy", "torch", "jax"].index)
        algs = list(dict.fromkeys(r["algorithm"] for r in tp))
        by = {(r["impl"], r["algorithm"]): r for r in tp}
        rows = []
        for a in algs:
            row = [a]
            for i in impls:
                r = by.get((i, a))
                if r is None:
                    row.append("–")
                elif r["status"] in (Status.ERROR, Status.NO_EXAMPLES):
                    row.append(r["status"])
                else:
                    row.append(f"{_s(r['per_second'], 1)} ex/s ({_share(r)})")
            rows.append(row)
        out += _table(["algorithm"] + [f"{i}: ex/s (spec / impl / harness)" for i in impls], rows)
        tot: dict[str, tuple[float, float, float]] = {}  # impl -> (ex/s, spec share, impl share)
        for i in impls:
            rs = [r for r in tp if r["impl"] == i and r["status"] not in (Status.ERROR, Status.NO_EXAMPLES)]
            T = sum(r["seconds"] for r in rs)
            if T:
                tot[i] = (sum(r["examples"] for r in rs) / T,
                          sum(r["reference"] * r["seconds"] for r in rs) / T,
                          sum(r["implementation"] * r["seconds"] for r in rs) / T)
        out += ["", "Over all algorithms: " + "; ".join(
            f"{i} {_s(v[0], 1)} ex/s, spec {100 * v[1]:.0f}% / implementation {100 * v[2]:.0f}% / harness "
            f"{100 * (1 - v[1] - v[2]):.0f}%" for i, v in tot.items() if v[0]) + "."]
    _blocks(out, speed.get("blocks"), speed.get("plain"))
    _levels(out, speed.get("levels"))
    rt = speed.get("rate")
    if rt:
        out += ["", f"### {rt['impl']} over every algorithm", "",
                f"One process, {rt['impl']} alone, its {rt['algorithms']} algorithms at "
                f"{' and '.join(rt['dtypes'])}, {rt['examples_per_search']} examples per search (seed "
                f"{rt['seed']}): **{_s(rt['per_second'], 1)} examples per second** ({rt['examples']} examples in "
                f"{_s(rt['seconds'], 0)} s), {_s(rt['per_cpu_second'], 1)} per CPU second; the reference "
                f"(binary64 and Monte Carlo tolerances) took {100 * (rt['reference_share'] or 0):.0f}% of the "
                f"time." + (f" Not passing: {', '.join(rt['not_passing'])}." if rt["not_passing"] else "")]
    gr = speed.get("growth")
    if gr:
        lo, hi = GROWTH_BAND
        out += ["", "### The spec's cost as the problem grows", "",
                "Seconds of one evaluation (best of 3) at the base sizes, and the ratio at twice ℓ (every "
                "sequence length), twice d_e (every model width) or twice L (layers), measured for the binary64 "
                "evaluation (`spec`) and for the reference with its 32-lane Monte Carlo tolerances (what the "
                "harness pays per example), beside the ratio of the arithmetic's leading terms (`order`: "
                "attention d²ℓ + ℓ²d, layer norm dℓ, a model L layers plus N_V d_e ℓ; "
                "`tools/bench/speed.py` `expected_cost`). A spec ratio outside "
                f"{lo}-{hi}× of the order's is marked ✗; per-call overheads pull a small evaluation's ratio "
                "below the order's.", ""]

        def cell(g: dict[str, Any], what: str) -> str:
            if g.get(f"spec_ratio_{what}") is None:
                return "–"
            mark = {True: "", False: " ✗", None: ""}[g.get(f"as_expected_{what}")]
            order = g.get(f"expected_ratio_{what}")
            return (f"{_s(g[f'spec_ratio_{what}'])} / {_s(g[f'reference_ratio_{what}'])}"
                    + (f" (order {_s(order)})" if order else "") + mark)

        rows = [[g["algorithm"], ", ".join(f"{k}={v}" for k, v in g["base"].items()), _s(g["spec_1x"], 4),
                 _s(g["reference_1x"], 3), cell(g, "ell"), cell(g, "d_e"), cell(g, "L")] for g in gr]
        out += _table(["algorithm", "base sizes", "spec 1× (s)", "reference 1× (s)", "2ℓ/1×: spec / reference",
                       "2d_e/1×", "2L/1×"], rows)
    xd = speed.get("xdist")
    if xd:
        out += ["", "### pytest-xdist", "",
                f"`{xd['command']}` on {xd['cpus']} CPUs: serial {_s(xd['serial']['seconds'], 0)} s "
                f"(exit {xd['serial']['returncode']}), with `-n {xd['workers']}` "
                f"{_s(xd['parallel']['seconds'], 0)} s (exit {xd['parallel']['returncode']}): speed-up "
                f"**{_s(xd['speedup'])}×**."]
        for label in ("serial", "parallel"):
            if xd[label]["tail"]:
                out.append(f"- {label}: `{xd[label]['tail'][-1]}`")


def _blocks(out: list[str], rows: Optional[list[dict[str, Any]]], plain: Any) -> None:
    """The section "Blocks": examples per second with blocks and with one value set per draw."""
    if rows:
        b = rows[0]
        out += ["", "### Blocks", "",
                f"One search per algorithm, numpy at {rows[0]['dtype']}, default profile's sizes, "
                f"{b['one']['examples']} examples, back to back in one process: one value set per drawn case (the "
                f"code path before blocks) against blocks of {rows[0].get('block_size', 8)} value sets sharing one "
                "evaluation "
                "of the spec (docs/tolerances.md, \"Blocks\"). `ref/call`: the reference's time per example "
                "over one plain call of the plugin on the entry's default case; `impl`: the share of the "
                "search spent in the plugin's calls (conversions and the harness's call thread included).", ""]
        table = [[r["algorithm"], f"{_s(r['one']['per_second'], 1)}", f"{_s(r['block']['per_second'], 1)}",
                  f"{_s(r['speedup'], 1)}×", f"{_s(r['reference_over_call'], 0)}×",
                  f"{100 * (r['one']['implementation'] or 0):.0f}% → {100 * (r['block']['implementation'] or 0):.0f}%"]
                 for r in rows]
        out += _table(["algorithm", "ex/s, one", "ex/s, block", "speed-up", "ref/call", "impl"], table)
    if plain:
        rows = plain if isinstance(plain, list) else []
        out += ["", "### Against a plain check", "",
                "What a user would write without ftspec (`tools/bench/speed.py` `plain_checks`): Hypothesis "
                "draws each size up to the largest the default strategies draw and a seed, NumPy draws the "
                "inputs and parameters, the NumPy plugin at float64 is the reference and `numpy.allclose` "
                "judges; beside it ftspec's search of the same entry with the same plugin and the same count, "
                "back to back in one process. Target: ftspec at least 0.5× on each.", ""]
        out += _table(["algorithm", "plain ex/s", "ftspec ex/s", "ftspec / plain", "ftspec's reference share"],
                      [[r["algorithm"], _s(r["plain"]["per_second"], 0), _s(r["ftspec"]["per_second"], 0),
                        f"**{_s(r['ratio'])}×**",
                        f"{100 * r['ftspec']['reference_seconds'] / r['ftspec']['seconds']:.0f}%"
                        if r["ftspec"]["seconds"] else "–"] for r in rows])


def _levels(out: list[str], rows: Optional[list[dict[str, Any]]]) -> None:
    """The (level, operation) groups of each entry's computation (``tools/bench/levels.py``)."""
    if not rows:
        return
    out += ["", "### The computation's levels", "",
            "The scalar operations of each entry's binary64 evaluation at the sizes above, its levels (a "
            "result's level is one more than its arguments' highest) and its (level, operation) groups "
            "(`tools/bench/levels.py`): the fewest array operations a replay of a recorded structure, level "
            "by level, would need (issue 36's trace-once evaluator), against the NumPy calls of a walk of "
            "the spec per block today.", ""]
    out += _table(["algorithm", "scalar operations", "levels", "(level, operation) groups"],
                  [[r["algorithm"], f"{r['operations']:,}", r["levels"], r["groups"]] for r in rows])


def _share(r: dict[str, Any]) -> str:
    if r["reference"] is None:
        return "–"
    return f"{100 * r['reference']:.0f}/{100 * r['implementation']:.0f}/{100 * r['harness']:.0f}%"


def markdown(results: dict[str, Any]) -> str:
    m = results["meta"]
    out = ["# Benchmarks: ftspec's power and speed", "",
           "<!-- generated by `ftspec bench all --write docs/benchmarks.md` (also `make bench`); do not edit -->", "",
           f"Generated {m['date']} on {m['platform']} ({m['machine']}, {m['cpus']} CPUs), Python {m['python']}, "
           f"spec {m['spec_version']}; " + ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v) + ".", "",
           f"Load average (1, 5, 15 min) before the run: {m.get('load_before')}, after: {m.get('load_after')} "
           "(the machine may be shared; timings are wall-clock).", "",
           "What this measures: a **bug zoo** of mutant implementations (`tools/zoo`), each a correct bundled "
           "plugin with one realistic bug injected, run through the same `Runner` as `ftspec certify`; two "
           "baselines on the same zoo; the correct implementations at the thorough profile (false failures); "
           "and the harness's speed. Budgets of this run:", ""]
    for k, v in m["budgets"].items():
        out.append(f"- {k}: {v}")
    out.append("")
    if "power" in results:
        _power(out, results)
        out.append("")
    if "false_failures" in results:
        _false_failures(out, results["false_failures"], (results.get("power") or {}).get("calibration"))
        out.append("")
    if "speed" in results:
        _speed(out, results["speed"])
        out.append("")
    if "diagnosis" in results:  # tools/bench/diagnosis.py: conventions, first divergence, distinct failures
        from .diagnosis import markdown as diagnosis_markdown

        diagnosis_markdown(out, results["diagnosis"])
    out += ["## Regenerating", "",
            "    ftspec bench all --write docs/benchmarks.md     # or: make bench",
            "    ftspec bench power --mutant gelu-tanh --examples 20   # one mutant",
            "    ftspec bench speed --no-xdist",
            "    ftspec bench diagnosis --mutant gelu-tanh      # the diagnosis hit rates",
            "",
            "`ftspec bench all --json PATH` also keeps the raw results; `ftspec bench render PATH --write FILE` "
            "renders them again.", ""]
    return "\n".join(out)
