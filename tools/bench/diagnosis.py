"""How often a failure names its cause (``ftspec bench diagnosis``; a section of ``make bench``).

Three measurements on the bug zoo, each a real search (``Runner``, the harness's own judge), so
every figure is what a user sees on the shrunk case:

- **conventions**: every mutant whose bug is a catalogue convention
  (``CONVENTIONS``: the switch values the output must be said to match), searched on its bench
  targets at its dtypes; hit = a match of the failure's diagnosis contains the expected change;
- **first divergence**: every mutant whose bug sits in one place of a whole model
  (``DIVERGES``), searched on one model at float64; hit = the failure's first divergence names
  that layer and sublayer (``divergence.expected_matches``);
- **distinct failures**: the combined mutants (``COMBINED``), with their expected
  checks and places; hit = every check reported, every place named by a reported failure's first
  divergence or its "also departs" list, each failure with its own case file;
- **names** (``--zoo``): every value mutant of the first zoo (``names_plan("first")``) and every
  mutant of the second (tools/zoo/second.py), on their bench entries (and their model) at float64
  and float32; each failing cell whose failure is a value check is sorted into one of ``CLASSES``
  (``classify``): is the convention named the bug, and for a bug no convention describes, is none
  named? Model cells also check the first divergence against the place the bug sits.

The expected values come from the catalogue's description of each bug, written here by hand,
never from the code under test. Distinct-failure searches are off in the first two (they count
first failures), on in the third.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from ftspec.conformance.core.status import Status

__all__ = ["CLASSES", "COMBINED", "CONVENTIONS", "DIVERGES", "FIRST_EXPECTED", "classify", "names_plan",
           "run_diagnosis", "summarise", "summarise_names"]

_EPS = {"epsilon_placement": "inside_root"}
#: mutant -> the change its failure must be said to match ({switch or "input Mask": value})
CONVENTIONS: dict[str, dict[str, Any]] = {
    "epsilon-added": {"epsilon": 1e-5, **_EPS},
    "epsilon-1e-12": {"epsilon": 1e-12, **_EPS},
    "epsilon-outside-root": {"epsilon_placement": "outside_root"},
    "epsilon-fixed-1e-6": {"epsilon": 1e-6},
    "torch-layer-norm-default-eps": {"epsilon": 1e-5, **_EPS},
    "variance-unbiased": {"variance": "unbiased"},
    "gelu-tanh": {"activation": "gelu_tanh"},
    "relu-as-gelu": {"activation": "gelu_erf"},
    "scale-missing": {"attn_scale": "none"},
    "scale-sqrt-d-model": {"attn_scale": "sqrt_d_model"},
    "embedding-scale-ignored": {"embedding_scale": "one"},
    "post-ln-as-pre": {"norm_placement": "pre"},
    "final-norm-missing": {"final_norm": "none"},
    "logit-bias-ignored": {"logit_bias": False},
    "causal-alignment-ignored": {"causal_alignment": "top_left"},
    "empty-query-nan": {"empty_query": "nan"},
    "mask-polarity-inverted": {"input Mask": "inverted (True = blocked)"},
    "torch-mask-polarity": {"input Mask": "inverted (True = blocked)"},
    "mask-transposed": {"input Mask": "transposed ([query, key])"},
    "rms-norm-subtracts-mean": {"norm": "layer_norm"},
}

#: mutant -> (model searched, where the model first departs: "where/sublayer", "a|b": either)
DIVERGES: dict[str, tuple[str, str]] = {
    "epsilon-added": ("d_transformer", "layer 0/norm"),
    "variance-unbiased": ("e_transformer", "layer 0/norm"),
    "layer-norm-over-tokens": ("d_transformer", "layer 0/norm"),
    "layer-norm-whole-matrix": ("ed_transformer", "encoder layer 0/norm"),
    "torch-layer-norm-default-eps": ("d_transformer", "layer 0/norm"),
    "scale-missing": ("e_transformer", "layer 0/self-attention"),
    "scale-sqrt-d-model": ("e_transformer", "layer 0/self-attention"),
    "scale-applied-twice": ("e_transformer", "layer 0/self-attention"),
    "softmax-over-queries": ("e_transformer", "layer 0/self-attention"),
    "heads-interleaved": ("d_transformer", "layer 0/self-attention"),
    "mask-polarity-inverted": ("d_transformer", "layer 0/self-attention"),
    "causal-mask-one-future": ("d_transformer", "layer 0/self-attention"),
    "causal-mask-excludes-self": ("ed_transformer", "decoder layer 0/self-attention"),
    "gpt2-mask-dropped": ("d_transformer", "layer 0/self-attention"),
    "cross-attention-to-self": ("ed_transformer", "decoder layer 0/cross-attention"),
    "torch-sdpa-default-scale": ("e_transformer", "layer 0/self-attention"),
    "gelu-tanh": ("d_transformer", "layer 0/MLP activation"),
    # the activation is shared by the layers' MLP and the head (Algorithm 9 line 10): a shrunk case may
    # show it first in either
    "gelu-sigmoid": ("e_transformer", "layer 0/MLP activation|head"),
    "relu-as-gelu": ("ed_transformer", "encoder layer 0/MLP activation"),
    "gelu-erf-approximation": ("d_transformer", "layer 0/MLP activation"),
    "mlp-bias-wrong-axis": ("e_transformer", "layer 0/MLP"),
    "pre-ln-residual-normalised": ("d_transformer", "layer 0/residual"),
    "post-ln-residual-dropped": ("e_transformer", "layer 0/residual"),
    "post-ln-as-pre": ("e_transformer", "layer 0/residual"),
    "embedding-scale-ignored": ("d_transformer", "embedding"),
    "layers-share-parameters": ("e_transformer", "layer 1"),
    "final-norm-missing": ("d_transformer", "final norm"),
    "bert-head-relu": ("e_transformer", "head"),
    "tied-unembedding-untransposed": ("d_transformer", "unembedding"),
    "logit-bias-ignored": ("d_transformer", "unembedding"),
    "unembedding-softmax-over-tokens": ("d_transformer", "unembedding"),
}

#: combined mutant -> (model searched, the checks its independent bugs fail, the places its value bugs
#: sit: each must be named by a reported failure's first divergence or its "also departs" list)
COMBINED: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "two-bugs-short-crash-epsilon": ("d_transformer", ("exception", "spec"), ("layer 0/norm",)),
    "three-bugs-residual-softmax-crash": ("d_transformer", ("exception", "spec"), ("layer 0/residual", "unembedding")),
}


def _named(diagnosis: Optional[Mapping[str, Any]], want: Mapping[str, Any]) -> bool:
    for m in (diagnosis or {}).get("matches") or []:
        if all(k in m["changes"] and m["changes"][k] == v for k, v in want.items()):
            return True
    return False


def _run(mutant_id: str, algorithms: Sequence[str], dtypes: Sequence[str], examples: int, seed: int,
         distinct: int, zoo: str = "first") -> Any:
    import warnings

    from ftspec.conformance.running.config import RunConfig
    from ftspec.conformance.running.runner import Runner
    from ftspec.tools.zoo import build

    warnings.filterwarnings("ignore")
    m = _mutant(zoo, mutant_id)
    impl = build(m)
    with tempfile.TemporaryDirectory(prefix="ftspec-bench-diag-") as tmp:
        runner = Runner([(f"mutant:{m.id}", impl)], RunConfig(seed=seed, case_dir=tmp, examples=examples))
        runner.distinct_failures = distinct
        result = runner.run(list(algorithms), [d for d in dtypes if d in impl.dtypes])
        files = [c.failure.case_file for c in result.cells if c.failure] + \
                [f["case_file"] for c in result.cells for f in c.more_failures]
        exist = all(f and Path(f).is_file() for f in files)
    return result, exist


def _mutant(zoo: str, mutant_id: str) -> Any:
    if zoo == "second":
        from ftspec.tools.zoo.second import second_mutant

        return second_mutant(mutant_id)
    from ftspec.tools.zoo import mutant

    return mutant(mutant_id)


def _task(args: tuple) -> dict[str, Any]:
    if args[0] == "names":
        return _names_task(args)
    kind, mutant_id, examples, seed = args
    started = time.perf_counter()
    try:
        from ftspec.tools.zoo import mutant

        m = mutant(mutant_id)
        if kind == "convention":
            result, _ = _run(mutant_id, m.targets, m.dtypes, examples, seed, 0)
            cells = []
            for c in result.cells:
                d = c.failure.diagnosis if c.failure else None
                cells.append({"algorithm": c.algorithm, "dtype": c.dtype, "status": c.status.value,
                              "check": c.failure.check if c.failure else None,
                              "named": _named(d, CONVENTIONS[mutant_id]),
                              "summary": _summary(d), "seconds": (d or {}).get("seconds")})
            return {"kind": kind, "id": mutant_id, "want": CONVENTIONS[mutant_id], "cells": cells,
                    "seconds": time.perf_counter() - started}
        if kind == "divergence":
            from ftspec.conformance.forensics.divergence import expected_matches

            model, want = DIVERGES[mutant_id]
            result, _ = _run(mutant_id, [model], ["float64"], examples, seed, 0)
            c = next(x for x in result.cells if x.algorithm == model)
            div = ((c.failure.diagnosis or {}).get("divergence") if c.failure else None) or {}
            got = f"{div.get('where', '')}/{div.get('sublayer', '')}".rstrip("/")
            return {"kind": kind, "id": mutant_id, "model": model, "want": want, "status": c.status.value,
                    "check": c.failure.check if c.failure else None, "got": got,
                    "hit": bool(div) and expected_matches(want, div), "detail": div.get("detail", ""),
                    "locate_seconds": div.get("seconds"), "seconds": time.perf_counter() - started}
        from ftspec.conformance.forensics.distinct_failures import describe, signature_of_failure
        from ftspec.conformance.forensics.divergence import expected_matches

        model, checks, places = COMBINED[mutant_id]
        result, exist = _run(mutant_id, [model], ["float64"], examples, seed, 4)
        c = next(x for x in result.cells if x.algorithm == model)
        failures = ([{"check": c.failure.check, "diagnosis": c.failure.diagnosis}] if c.failure else []) \
            + list(c.more_failures)
        found = [f["check"] for f in failures]
        named = []  # every place a failure names: its first divergence and what also departs on its own
        for f in failures:
            div = (f.get("diagnosis") or {}).get("divergence") or {}
            named.append(div)
            named += [{"where": w, "sublayer": ""} for w in div.get("also", [])]
        located = [p for p in places if any(expected_matches(p, n) for n in named if n)]
        sigs = ([describe(signature_of_failure(c.failure))] if c.failure else []) + \
            [f["signature"] for f in c.more_failures]
        return {"kind": kind, "id": mutant_id, "model": model, "want": list(checks), "places": list(places),
                "found": found, "located": located, "signatures": sigs, "case_files": exist,
                "hit": set(checks) <= set(found) and len(located) == len(places) and exist,
                "seconds": time.perf_counter() - started}
    except Exception as exc:  # noqa: BLE001 - one mutant's problem must not end the bench
        return {"kind": kind, "id": mutant_id, "error": f"{type(exc).__name__}: {exc}",
                "seconds": time.perf_counter() - started}


def _summary(d: Optional[Mapping[str, Any]]) -> str:
    if not d:
        return ""
    ms = d.get("matches") or []
    if not ms:
        return "no neighbouring set fits"
    return ", ".join(f"{k}={v}" for k, v in ms[0]["changes"].items())


# -- names: is the convention named the bug? ---------------------------------------------------------

#: the checks whose failure is about the output's values (their failures carry a diagnosis)
VALUE_CHECKS = ("spec", "nan", "overflow", "refusal")
#: how a failing cell's diagnosis is sorted (``classify``); an ambiguous diagnosis is not a claim
#: about which of its matches comes first, so ``right-ambiguous`` takes precedence over ``right-first``
CLASSES = ("right-first", "right-ambiguous", "right-not-first", "wrong", "nothing-fits")
#: the dtypes the names measurement runs at
NAMES_DTYPES = ("float64", "float32")
#: registry families whose entries a names search covers (forward values; losses by name)
_NAMES_FAMILIES = ("component", "layer", "architecture")

#: first-zoo value mutants outside ``CONVENTIONS`` whose bug is nevertheless a catalogue change
#: (written from the bug's description; every other first-zoo mutant outside ``CONVENTIONS`` is
#: a bug no convention describes)
FIRST_EXPECTED: dict[str, dict[str, Any]] = {
    "layer-norm-naive-variance": {"variance": "one_pass"},  # E[x²] − E[x]² is the one-pass variance
    # ε = the dtype's machine epsilon inside the root: no catalogue ε equals it, its placement must be named
    "torch-rms-norm-eps-none": {"epsilon_placement": "inside_root"},
}
#: first-zoo mutants left out of the names measurement, and why
NAMES_LEFT_OUT: dict[str, str] = {
    "torch-sdpa-default-scale": "the convention it matches depends on the declared attn_scale (none: "
                                "sqrt_d_attn; otherwise none fits), which one table entry cannot state",
    "nondeterministic-variance": "only the determinism check sees it (not a value failure)",
}


def _names_entries(m: Any, model: Optional[str]) -> tuple[str, ...]:
    """The entries a names search covers: the mutant's bench targets that compute forward values
    (and losses), then its model."""
    from ftspec.spec.registry import entry

    keep = [t for t in m.targets if entry(t).family in _NAMES_FAMILIES or t.endswith("_loss")]
    if model and model not in keep:
        keep.append(model)
    return tuple(keep)


def names_plan(zoo: str) -> dict[str, dict[str, Any]]:
    """mutant id -> {"want": expected change or None, "entries": searched entries, "place":
    (model, where) or None} for the first or the second zoo."""
    plan: dict[str, dict[str, Any]] = {}
    if zoo == "second":
        from ftspec.tools.zoo.second import EXPECTED, PLACES, SECOND

        for i, m in SECOND.items():
            place = PLACES.get(i)
            plan[i] = {"want": EXPECTED[i], "entries": _names_entries(m, place[0] if place else None),
                       "place": place}
        return plan
    if zoo != "first":
        raise ValueError(f"unknown zoo {zoo!r}; expected 'first' or 'second'")
    from ftspec.tools.zoo import MUTANTS

    for i, m in MUTANTS.items():
        if m.kind != "numerics" or "combined" in m.tags or i in NAMES_LEFT_OUT:
            continue
        place = DIVERGES.get(i)
        entries = _names_entries(m, place[0] if place else None)
        if entries:
            plan[i] = {"want": CONVENTIONS.get(i, FIRST_EXPECTED.get(i)), "entries": entries, "place": place}
    return plan


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return math.isclose(float(got), want, rel_tol=1e-9, abs_tol=0.0)
    return bool(got == want)


def _contains(match: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    changes = match.get("changes") or {}
    return all(k in changes and _same(changes[k], v) for k, v in want.items())


def classify(diagnosis: Optional[Mapping[str, Any]], want: Optional[Mapping[str, Any]]) -> str:
    """One of ``CLASSES`` for a failure's diagnosis (``Diagnosis.to_dict``) when the bug is the
    catalogue change ``want`` (None: a bug no convention describes, so any match is wrong)."""
    matches = list((diagnosis or {}).get("matches") or [])
    if not matches:
        return "nothing-fits"
    if want is None:
        return "wrong"
    hits = [_contains(m, want) for m in matches]
    if not any(hits):
        return "wrong"
    if (diagnosis or {}).get("ambiguous"):
        return "right-ambiguous"
    return "right-first" if hits[0] else "right-not-first"


def expressible(algorithm: str, want: Mapping[str, Any]) -> bool:
    """Whether the catalogue change ``want`` can be named on ``algorithm`` at all: its switches are
    the entry's, an input reading (``"input Mask"``) names one of its inputs. Where it cannot (a
    mask bug inside a layer that builds its own causal mask), the bug is no convention of that
    entry, and naming one is wrong, as for any bug outside the catalogue."""
    from ftspec.spec.registry import REGISTRY

    e = REGISTRY[algorithm]
    inputs = {s.name for s in e.inputs}
    switches = set(e.switches)
    return all((k[len("input "):] in inputs) if k.startswith("input ") else k in switches for k in want)


def place_for(want: str, hyper: Optional[Mapping[str, Any]]) -> Optional[str]:
    """``want`` with ``{last}`` replaced by the case's last layer (L − 1); None when it needs the
    case's sizes and they are unknown."""
    if "{last}" not in want:
        return want
    if not hyper or "L" not in hyper:
        return None
    return want.replace("{last}", str(int(hyper["L"]) - 1))


def _changes_text(changes: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in changes.items())


def _names_cell(c: Any, want: Optional[Mapping[str, Any]], place: Optional[tuple[str, str]]) -> dict[str, Any]:
    from ftspec.conformance.forensics.divergence import expected_matches
    from ftspec.conformance.running.results import Status

    f = c.failure
    d = f.diagnosis if f else None
    value = bool(f) and c.status == Status.FAIL and f.check in VALUE_CHECKS
    want = want if want is None or expressible(c.algorithm, want) else None
    catalogue = want is not None
    cell: dict[str, Any] = {
        "algorithm": c.algorithm, "dtype": c.dtype, "status": c.status.value, "check": f.check if f else None,
        "class": classify(d, want) if value else None, "diagnosed": d is not None,
        "summary": _summary(d), "ambiguous": bool((d or {}).get("ambiguous")),
        "matches": [_changes_text(m.get("changes") or {}) for m in ((d or {}).get("matches") or [])[:4]],
        "seconds": (d or {}).get("seconds"), "evaluated": (d or {}).get("evaluated"),
        "gave_up": (d or {}).get("gave_up"), "screened": (d or {}).get("screened"), "pairs": (d or {}).get("pairs"),
        "catalogue": catalogue}
    if place and c.algorithm == place[0] and f is not None and c.status == Status.FAIL:
        div = (d or {}).get("divergence") or {}
        where = place_for(place[1], f.case.hyper if f.case is not None else None)
        cell["place"] = where or place[1]
        cell["got"] = f"{div.get('where', '')}/{div.get('sublayer', '')}".rstrip("/")
        cell["place_hit"] = bool(div) and where is not None and expected_matches(where, div)
    return cell


def _names_task(args: tuple) -> dict[str, Any]:
    _, zoo, mutant_id, examples, seed = args
    started = time.perf_counter()
    try:
        job = names_plan(zoo)[mutant_id]
        result, _ = _run(mutant_id, job["entries"], NAMES_DTYPES, examples, seed, 0, zoo=zoo)
        cells = [_names_cell(c, job["want"], job["place"]) for c in result.cells]
        return {"kind": "names", "zoo": zoo, "id": mutant_id, "want": job["want"],
                "place": list(job["place"]) if job["place"] else None, "cells": cells,
                "seconds": time.perf_counter() - started}
    except Exception as exc:  # noqa: BLE001 - one mutant's problem must not end the bench
        return {"kind": "names", "zoo": zoo, "id": mutant_id, "error": f"{type(exc).__name__}: {exc}",
                "seconds": time.perf_counter() - started}


def _names_tasks(zoo: str, examples: int, seed: int, only: Optional[Sequence[str]]) -> list[tuple]:
    zoos = ("first", "second") if zoo == "both" else (zoo,)
    if any(z not in ("first", "second") for z in zoos):
        raise ValueError(f"unknown zoo {zoo!r}; expected first, second or both")
    return [("names", z, i, examples, seed) for z in zoos for i in names_plan(z) if not only or i in only]


def _key(r: Mapping[str, Any]) -> tuple:
    return (r["kind"], r.get("zoo", ""), r["id"])


def run_diagnosis(examples: int = 30, seed: int = 0, jobs: int = 1,
                  progress: Optional[Callable[[dict[str, Any]], None]] = None,
                  only: Optional[Sequence[str]] = None, zoo: Optional[str] = None,
                  only_names: bool = False) -> dict[str, Any]:
    """Every measurement above; ``only``: restrict to these mutant ids. ``zoo`` ("first", "second"
    or "both"): also the names measurement on that zoo (None: not run); ``only_names``: that one
    alone (on both zoos unless ``zoo`` says otherwise)."""
    from ftspec.tools.zoo import MUTANTS

    tasks: list[tuple] = []
    if not only_names:
        tasks = [("convention", i, examples, seed) for i in CONVENTIONS]
        tasks += [("divergence", i, examples, seed) for i in DIVERGES]
        tasks += [("distinct", i, examples, seed) for i in COMBINED]
        tasks = [t for t in tasks if t[1] in MUTANTS and (not only or t[1] in only)]
    if zoo or only_names:
        tasks += _names_tasks(zoo or "both", examples, seed, only)
    started = time.perf_counter()
    records: list[dict[str, Any]] = []
    if jobs <= 1:
        for t in tasks:
            records.append(_task(t))
            if progress:
                progress(records[-1])
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(_task, t) for t in tasks]
            for f in as_completed(futures):
                records.append(f.result())
                if progress:
                    progress(records[-1])
    order = {(t[0], t[1] if t[0] == "names" else "", t[-3]): n for n, t in enumerate(tasks)}
    records.sort(key=lambda r: order[_key(r)])
    out = {"records": records, "summary": summarise(records), "examples": examples, "seed": seed,
           "seconds": time.perf_counter() - started}
    if any(r["kind"] == "names" for r in records):
        out["names"] = summarise_names(records)
    return out


def summarise_names(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per zoo and dtype: the classes of the failing value cells (catalogue bugs and the rest
    apart), first-divergence hits; every wrong name; the time per diagnosis."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    wrong, seconds, evaluated = [], [], []
    gave_up, screened, pairs = 0, 0, 0
    for r in records:
        if r["kind"] != "names" or "error" in r:
            continue
        for c in r["cells"]:
            # per cell: a catalogue change the cell's entry cannot express counts as no convention
            group = "catalogue" if c.get("catalogue", r["want"] is not None) else "other"
            row = table.setdefault(r["zoo"], {}).setdefault(c["dtype"], {
                "cells": 0, "failing": 0, "value": 0, "undiagnosed": 0, "places": 0, "place_hits": 0,
                "catalogue": dict.fromkeys(CLASSES, 0), "other": dict.fromkeys(CLASSES, 0)})
            row["cells"] += 1
            row["failing"] += c["status"] == Status.FAIL
            if "place" in c:
                row["places"] += 1
                row["place_hits"] += bool(c["place_hit"])
            if c["class"] is None:
                continue
            row["value"] += 1
            row["undiagnosed"] += not c["diagnosed"]
            row[group][c["class"]] += 1
            if c["seconds"] is not None:
                seconds.append(float(c["seconds"]))
                evaluated.append(int(c["evaluated"] or 0))
                # a search the budget cut short, and the pairs it screened of those there were
                gave_up += bool(c.get("gave_up"))
                screened += int(c.get("screened") or 0)
                pairs += int(c.get("pairs") or 0)
            if c["class"] == "wrong":
                wrong.append({"zoo": r["zoo"], "id": r["id"], "algorithm": c["algorithm"], "dtype": c["dtype"],
                              "check": c["check"], "summary": " or ".join(c["matches"]),
                              "want": _changes_text(r["want"]) if r["want"] else "(no convention)"})
    times = {"diagnoses": len(seconds),
             "median_s": statistics.median(seconds) if seconds else None, "max_s": max(seconds, default=None),
             "median_evaluated": statistics.median(evaluated) if evaluated else None,
             "max_evaluated": max(evaluated, default=None), "gave_up": gave_up, "screened": screened,
             "pairs": pairs}
    errors = [f"names {r.get('zoo')} {r['id']}: {r['error']}" for r in records
              if r["kind"] == "names" and "error" in r]
    return {"table": table, "wrong": wrong, "times": times, "errors": errors}


def summarise(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    conv = [c for r in records if r["kind"] == "convention" and "error" not in r for c in r["cells"]]
    failing = [c for c in conv if c["status"] == Status.FAIL]
    div = [r for r in records if r["kind"] == "divergence" and "error" not in r]
    div_failing = [r for r in div if r["status"] == Status.FAIL]
    dist = [r for r in records if r["kind"] == "distinct" and "error" not in r]
    return {
        "convention_cells": len(conv), "convention_failing": len(failing),
        "convention_named": sum(c["named"] for c in failing),
        "divergence_mutants": len(div), "divergence_failing": len(div_failing),
        "divergence_hits": sum(r["hit"] for r in div_failing),
        "distinct_mutants": len(dist), "distinct_hits": sum(r["hit"] for r in dist),
        "errors": [f"{r['kind']} {r['id']}: {r['error']}" for r in records if "error" in r],
    }


def markdown(out: list[str], diag: Mapping[str, Any]) -> None:
    """The section of docs/benchmarks.md (tools/bench/report.py calls it): the first three
    measurements when they ran, then the names measurement when it ran."""
    if any(r["kind"] != "names" for r in diag["records"]):
        _markdown_first(out, diag)
    if any(r["kind"] == "names" for r in diag["records"]):
        names_markdown(out, diag)


def _markdown_first(out: list[str], diag: Mapping[str, Any]) -> None:
    s = diag["summary"]

    def pct(k: int, n: int) -> str:
        return f"{k} of {n} ({100.0 * k / n:.0f}%)" if n else "none"

    out += ["## Diagnosis: does a failure name its cause?", "",
            f"Bug-zoo searches of {diag['examples']} examples, seed {diag['seed']}, distinct-failure search off "
            f"except for the combined mutants ({diag['seconds']:.0f} s in all; `tools/bench/diagnosis.py`, expected "
            "values written from each bug's description).", "",
            f"- **Convention named**: in {pct(s['convention_named'], s['convention_failing'])} "
            f"failing cells of the {len(CONVENTIONS)} mutants whose bug is a catalogue convention "
            f"({s['convention_cells'] - s['convention_failing']} of {s['convention_cells']} cells did not fail).",
            f"- **First divergence**: the right layer and sublayer in "
            f"{pct(s['divergence_hits'], s['divergence_failing'])} failing whole-model searches "
            f"({s['divergence_mutants'] - s['divergence_failing']} of {s['divergence_mutants']} did not fail).",
            "- **Every distinct failure**: every bug reported for "
            f"{pct(s['distinct_hits'], s['distinct_mutants'])} combined mutants.", ""]
    if s["errors"]:
        out += ["Errors: " + "; ".join(s["errors"]), ""]
    rows = []
    for r in diag["records"]:
        if r["kind"] != "convention" or "error" in r:
            continue
        for c in r["cells"]:
            mark = "-" if c["status"] != Status.FAIL else ("yes" if c["named"] else "**no**")
            rows.append(f"| {r['id']} | {c['algorithm']} | {c['dtype']} | {c['status']} | {mark} | "
                        f"{c['summary'] or '-'} |")
    out += ["| convention mutant | target | dtype | cell | named | first match |", "|---|---|---|---|---|---|"]
    out += rows + [""]
    out += ["| whole-model mutant | model (float64) | expected | first divergence | hit |", "|---|---|---|---|---|"]
    for r in diag["records"]:
        if r["kind"] != "divergence" or "error" in r:
            continue
        hit = "-" if r["status"] != Status.FAIL else ("yes" if r["hit"] else "**no**")
        got = r["got"] or (f"({r['check']} check: not located)" if r["check"] else "(passed)")
        want = r["want"].replace("|", " or ")
        out.append(f"| {r['id']} | {r['model']} | {want} | {got} | {hit} |")
    out.append("")
    for r in diag["records"]:
        if r["kind"] == "distinct" and "error" not in r:
            out.append(f"- `{r['id']}` on {r['model']}: {len(r['found'])} failures reported "
                       f"({' | '.join(r['signatures'])}); expected checks {', '.join(r['want'])} and places "
                       f"{', '.join(r['places'])}: {'all reported' if r['hit'] else '**not all reported**'}.")
    out.append("")


def names_markdown(out: list[str], diag: Mapping[str, Any]) -> None:
    """The names section: class counts per zoo and dtype, every wrong name, time per diagnosis."""
    n = summarise_names(diag["records"])  # recomputed: saved results render with today's rules
    runs = [r for r in diag["records"] if r["kind"] == "names"]
    count = {z: sum(r.get("zoo") == z for r in runs) for z in ("first", "second")}
    out += ["## Diagnosis: is the convention named the bug?", "",
            f"Each mutant of the first zoo with a value bug ({count['first']}) and of the second zoo "
            f"({count['second']}, tools/zoo/second.py, mostly bugs no convention describes), searched on its "
            f"bench entries and its model at float64 and float32 ({diag['examples']} examples, seed "
            f"{diag['seed']}, distinct-failure search off). Every failing cell whose failure is a value check "
            "is sorted by its diagnosis: **right first** (the first match is the bug), **right, ambiguous** "
            "(marked ambiguous, the bug among the matches), **right, not first**, **wrong** (a convention named "
            "that is not the bug; for a bug no convention describes, any match), **nothing fits** (no match). "
            "Catalogue bugs and the rest are counted apart (catalogue / other; a catalogue bug on an entry that "
            "cannot express it, a mask read the wrong way inside a layer that builds its own mask, counts with the "
            "rest); a failure with no diagnosis "
            "(the refusal check's) counts as nothing fits and is also counted on its own. First divergence: "
            "the failing model cells whose first divergence names the place the bug sits.", "",
            "| zoo | dtype | value failures | no diagnosis | right first | right, ambiguous | right, not first "
            "| wrong | nothing fits | first divergence |", "|---|---|---|---|---|---|---|---|---|---|"]
    for zoo, by_dtype in n["table"].items():
        for dtype, row in by_dtype.items():
            cells = [f"{row['catalogue'][k]} / {row['other'][k]}" for k in CLASSES]
            wrong = sum(row[g]["wrong"] for g in ("catalogue", "other"))
            cells[3] = f"**{cells[3]}**" if wrong else cells[3]
            places = f"{row['place_hits']} of {row['places']}" if row["places"] else "-"
            out.append(f"| {zoo} | {dtype} | {row['value']} | {row['undiagnosed']} | " + " | ".join(cells)
                       + f" | {places} |")
    t = n["times"]
    if t["diagnoses"]:
        out += ["", f"Time per diagnosis ({t['diagnoses']} diagnoses): median {t['median_s']:.2f} s, max "
                    f"{t['max_s']:.2f} s; variant sets evaluated: median {t['median_evaluated']:.0f}, max "
                    f"{t['max_evaluated']}; cut short by the budget: {t.get('gave_up', 0)} of {t['diagnoses']}"
                    + (f"; pairs screened: {t['screened']} of {t['pairs']}" if t.get("pairs") else "") + "."]
    if n["errors"]:
        out += ["", "Errors: " + "; ".join(n["errors"])]
    out += [""]
    if n["wrong"]:
        out += ["Wrong names:", "", "| zoo | mutant | cell | check | bug | named |", "|---|---|---|---|---|---|"]
        out += [f"| {w['zoo']} | {w['id']} | {w['algorithm']} {w['dtype']} | {w['check']} | {w['want']} | "
                f"{w['summary']} |" for w in n["wrong"]]
        out.append("")
