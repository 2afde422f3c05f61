"""``ftspec bench speed``: how fast the harness runs, and where the time goes.

- ``throughput``: for each implementation alone and each algorithm, one
  search of ``examples`` examples at one dtype; examples per second, and the
  shares of the total spent computing the spec's reference (binary64 plus
  the Monte Carlo tolerances), in implementation calls (conversions
  included) and in the harness itself (drawing cases with Hypothesis,
  rounding, judging, shrinking). Measured by ``RunResult.reference_seconds``
  and ``RunResult.implementation_seconds``.
- ``rate``: examples per second of one implementation over every algorithm
  it implements at float32 and float64 in one process (the harness's
  throughput figure: numpy, same seed, same strategies), with CPU seconds
  beside the wall time (on a shared machine the CPU time is the steadier
  figure) and the share of the reference (binary64 plus Monte Carlo
  tolerances).
- ``growth``: the spec's cost at 2× ℓ, 2× d_e or 2× L over its cost at 1×,
  for a few entries (binary64 evaluation alone, and the full reference with
  its tolerances), beside the ratio the arithmetic's order predicts
  (``expected_cost``: attention ≈ d²ℓ + ℓ²d).
- ``xdist``: wall time of a pytest command with and without ``-n 2``
  (pytest-xdist), as a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Optional, Sequence

__all__ = ["BLOCK_ENTRIES", "GROWTH_ENTRIES", "blocks", "expected_cost", "growth", "plain_checks", "rate",
           "throughput", "xdist"]


def throughput(impls: Sequence[str] = ("numpy", "torch", "jax"), *, examples: int = 8, dtype: str = "float32",
               algorithms: Optional[Sequence[str]] = None, seed: int = 0, progress: Any = None) -> list[dict[str, Any]]:
    from ftspec.conformance.running.config import RunConfig
    from ftspec.conformance.running.runner import Runner
    from ftspec.impls.discovery import load
    from ftspec.spec.registry import REGISTRY

    names = list(algorithms or REGISTRY)


    rows = []
    for impl_name in impls:
        impl = load(impl_name)
        for name in names:
            if name not in impl.algorithms or dtype not in impl.dtypes:
                continue
            with tempfile.TemporaryDirectory(prefix="ftspec-speed-") as scratch:
                runner = Runner([(impl_name, impl)], RunConfig(seed=seed, examples=examples, case_dir=scratch,
                                devices=tuple(impl.devices())[:1]))
                result = runner.run([name], [dtype])
            cell = next(c for c in result.cells if c.algorithm == name)
            total = result.seconds
            ref = result.reference_seconds
            imp = sum(result.implementation_seconds.values())
            row = {"impl": impl_name, "algorithm": name, "dtype": dtype, "status": cell.status.value,
                   "examples": cell.examples, "seconds": total,
                   "per_second": cell.examples / total if total > 0 else None,
                   "reference": ref / total if total else None, "implementation": imp / total if total else None,
                   "harness": max(total - ref - imp, 0.0) / total if total else None}
            rows.append(row)
            if progress:
                progress(row)
    return rows


def rate(impl_name: str = "numpy", dtypes: Sequence[str] = ("float32", "float64"), *, examples: int = 20,
         seed: int = 0, algorithms: Optional[Sequence[str]] = None) -> dict[str, Any]:
    """Examples per second of ``impl_name`` alone over all its algorithms at ``dtypes``: one
    ``Runner`` in this process, ``examples`` per search, the default profile's strategies."""
    from ftspec.conformance.running.config import RunConfig
    from ftspec.conformance.running.results import Status
    from ftspec.conformance.running.runner import Runner
    from ftspec.impls.discovery import load
    from ftspec.spec.registry import REGISTRY

    impl = load(impl_name)
    names = [n for n in (algorithms or REGISTRY) if n in impl.algorithms]
    with tempfile.TemporaryDirectory(prefix="ftspec-rate-") as scratch:
        runner = Runner([(impl_name, impl)], RunConfig(seed=seed, examples=examples, case_dir=scratch,
                        devices=tuple(impl.devices())[:1]))
        wall, cpu = time.perf_counter(), time.process_time()
        result = runner.run(names, list(dtypes))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    done = sum(c.examples for c in result.cells)
    return {"impl": impl_name, "dtypes": list(dtypes), "algorithms": len(names), "examples_per_search": examples,
            "seed": seed, "examples": done, "seconds": wall, "cpu_seconds": cpu,
            "per_second": done / wall if wall > 0 else None, "per_cpu_second": done / cpu if cpu > 0 else None,
            "reference_seconds": result.reference_seconds,
            "reference_share": result.reference_seconds / wall if wall > 0 else None,
            "not_passing": sorted(f"{c.algorithm}/{c.dtype}: {c.status}" for c in result.cells
                                  if c.status != Status.PASS)}


#: layers, models and training entries whose speed ``blocks`` compares
BLOCK_ENTRIES = ("layer_norm", "attention", "mh_attention", "gpt2_layer", "d_transformer", "d_loss", "d_gradient",
                 "d_training")


def _call_seconds(impl: Any, name: str, dtype: str, repeat: int = 20) -> float:
    """The best time of one plain call of ``impl``'s ``name`` on the entry's default case, no harness."""
    from ftspec.conformance.core.calling import native_dtype
    from ftspec.conformance.core.case import Case
    from ftspec.conformance.core.examining import rounded
    from ftspec.impls.api import Context
    from ftspec.spec.entry import Kind
    from ftspec.spec.registry import entry

    e = entry(name)
    case = Case.build(name, dtype=dtype)
    p = rounded(case, dtype)
    device = list(impl.devices())[0]
    ctx = Context(name, dtype, device, case.hyper, case.variant)
    kinds = {s.name: s.kind for s in e.inputs}
    inputs = {k: impl.from_numpy(v, native_dtype(kinds[k], dtype), device) for k, v in p.inputs.items()}
    params = {k: impl.from_numpy(v, native_dtype(Kind.REAL, dtype), device) for k, v in p.params.items()}
    fn = impl.algorithms[name]
    return _time(lambda: fn(inputs, params, ctx), repeat)


def blocks(impl_name: str = "numpy", *, examples: int = 64, dtype: str = "float32",
           algorithms: Sequence[str] = BLOCK_ENTRIES, seed: int = 0, progress: Any = None) -> list[dict[str, Any]]:
    """One search of ``examples`` examples per algorithm, back to back in this process: one value set
    per drawn case (the code path before blocks) and the default profile's block; examples per
    second of each, their ratio, the shares of the reference and of the implementation, and the
    reference's time per example against one plain call of the implementation."""
    from ftspec.conformance.core.profiles import profile
    from ftspec.conformance.running.config import RunConfig
    from ftspec.conformance.running.runner import Runner
    from ftspec.impls.discovery import load

    impl = load(impl_name)
    block = profile("default").block
    rows = []
    for name in algorithms:
        if name not in impl.algorithms:
            continue
        row: dict[str, Any] = {"impl": impl_name, "algorithm": name, "dtype": dtype, "block_size": block,
                               "call_seconds": _call_seconds(impl, name, dtype)}
        for label, size in (("one", 1), ("block", block)):
            with tempfile.TemporaryDirectory(prefix="ftspec-blocks-") as scratch:
                runner = Runner([(impl_name, impl)], RunConfig(seed=seed, examples=examples, case_dir=scratch,
                                devices=tuple(impl.devices())[:1], block=size))
                started = time.perf_counter()
                result = runner.run([name], [dtype])
                wall = time.perf_counter() - started
            (cell,) = [c for c in result.cells if c.algorithm == name]
            imp = sum(result.implementation_seconds.values())
            row[label] = {"status": cell.status.value, "examples": cell.examples, "seconds": wall,
                          "per_second": cell.examples / wall if wall > 0 else None,
                          "reference": result.reference_seconds / wall if wall else None,
                          "implementation": imp / wall if wall else None,
                          "reference_per_example": result.reference_seconds / cell.examples if cell.examples else None}
        one, blk = row["one"]["per_second"], row["block"]["per_second"]
        row["speedup"] = blk / one if one and blk else None
        per = row["block"]["reference_per_example"]
        row["reference_over_call"] = per / row["call_seconds"] if per and row["call_seconds"] > 0 else None
        rows.append(row)
        if progress:
            progress(row)
    return rows


#: the entries whose plain check ``plain_checks`` writes (the baseline the speed target is stated against)
PLAIN_ENTRIES = ("layer_norm", "mh_attention", "gpt2_layer", "d_transformer", "d_gradient")


def plain_checks(examples: int = 200, *, seed: int = 0, dtype: str = "float32",
                 algorithms: Sequence[str] = PLAIN_ENTRIES) -> list[dict[str, Any]]:
    """The baseline a user would write instead of ftspec, per entry, beside ftspec's own search of
    it (same plugin, same count, back to back): Hypothesis draws each size between 1 and the
    largest the default strategies draw (``GROWTH_ENTRIES``; ℓ at most ℓ_max) and a seed, NumPy
    draws the real inputs and parameters (standard normal; tokens uniform, masks all ones), the
    NumPy plugin at float64 on the same rounded values is the reference, the plugin at ``dtype``
    is judged by ``numpy.allclose`` (rtol 1e-3, atol 1e-4; a mismatch is counted, not raised, so
    both run every example; a refusal ends the example, as ``assume`` would). Examples per second
    of each and their ratio."""
    import numpy as np
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    from ftspec.conformance.running.config import RunConfig
    from ftspec.conformance.running.runner import Runner
    from ftspec.impls.api import Context
    from ftspec.impls.discovery import load
    from ftspec.spec.entry import Kind
    from ftspec.spec.params import resolve_shape
    from ftspec.spec.registry import entry
    from ftspec.spec.variants import PAPER

    impl = load("numpy")
    rows = []
    for name in algorithms:
        e, fn, top = entry(name), impl.algorithms[name], GROWTH_ENTRIES.get(name) or PLAIN_SIZES[name]
        count, mismatched, refused = [0], [0], [0]

        @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @hypothesis_seed(seed)
        @given(st.fixed_dictionaries({k: st.integers(1, v) for k, v in top.items()}), st.integers(0, 2**32 - 1))
        def check(hyper: dict[str, int], s: int) -> None:
            if "ell_max" in hyper:
                hyper["ell"] = min(hyper["ell"], hyper["ell_max"])
            rng = np.random.default_rng(s)
            inputs: dict[str, Any] = {}
            for spec in e.inputs:
                shape = resolve_shape(spec.shape, hyper)
                if spec.kind == Kind.TOKEN:
                    inputs[spec.name] = rng.integers(0, hyper["N_V"], shape)
                elif spec.kind == Kind.MASK:
                    inputs[spec.name] = np.ones(shape, dtype=bool)
                else:
                    inputs[spec.name] = rng.standard_normal(shape).astype(dtype)
            params = {k: rng.standard_normal(resolve_shape(shape, hyper)).astype(dtype)
                      for k, shape in e.param_schema(hyper, PAPER).items()}
            wide = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in inputs.items()}
            try:
                want = fn(wide, {k: v.astype(np.float64) for k, v in params.items()},
                          Context(name, "float64", "cpu", hyper, PAPER))
                got = fn(inputs, params, Context(name, dtype, "cpu", hyper, PAPER))
            except ValueError:  # the plugin refuses (a width-1 layer norm): a user's ``assume``
                refused[0] += 1
                return
            pairs = [(got[k], want[k]) for k in want] if isinstance(want, dict) else [(got, want)]
            same = all(np.allclose(np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64), rtol=1e-3,
                                   atol=1e-4) for g, w in pairs)
            mismatched[0] += not same
            count[0] += 1

        started = time.perf_counter()
        check()
        plain_wall = time.perf_counter() - started
        with tempfile.TemporaryDirectory(prefix="ftspec-plain-") as scratch:
            runner = Runner([("numpy", impl)], RunConfig(seed=seed, examples=examples, case_dir=scratch,
                            devices=("cpu",)))
            started = time.perf_counter()
            result = runner.run([name], [dtype])
            wall = time.perf_counter() - started
        done = sum(c.examples for c in result.cells)
        plain_rate, ftspec_rate = count[0] / plain_wall, done / wall
        rows.append({"algorithm": name, "dtype": dtype,
                     "plain": {"examples": count[0], "seconds": plain_wall, "per_second": plain_rate,
                               "mismatched": mismatched[0], "refused": refused[0]},
                     "ftspec": {"examples": done, "seconds": wall, "per_second": ftspec_rate,
                                "block_size": runner.block, "reference_seconds": result.reference_seconds},
                     "ratio": ftspec_rate / plain_rate})
    return rows


#: sizes of the plain checks' entries that ``GROWTH_ENTRIES`` does not list
PLAIN_SIZES = {"mh_attention": {"H": 2, "d_x": 16, "d_z": 16, "d_attn": 6, "d_mid": 6, "d_out": 16, "ell_x": 8,
                                "ell_z": 8}}


#: (entry, base hyperparameters): the largest sizes the strategies draw (default budget)
GROWTH_ENTRIES = {
    "attention": {"d_x": 16, "d_z": 16, "d_attn": 6, "d_out": 16, "ell_x": 8, "ell_z": 8},
    "layer_norm": {"d_e": 16, "ell": 8},
    "gpt2_layer": {"H": 2, "d_e": 16, "d_attn": 6, "d_mid": 6, "d_mlp": 32, "ell": 8},
    "d_transformer": {"N_V": 24, "ell_max": 16, "L": 2, "H": 2, "d_e": 16, "d_attn": 6, "d_mid": 6, "d_mlp": 32,
                      "ell": 8},
    "d_gradient": {"N_V": 24, "ell_max": 16, "L": 1, "H": 2, "d_e": 16, "d_attn": 6, "d_mid": 6, "d_mlp": 32,
                   "ell": 8},
}


#: what is doubled: every sequence length, every model width (head widths unchanged), the layers
DOUBLINGS = {"ell": ("ell", "ell_x", "ell_z"), "d_e": ("d_e", "d_x", "d_z", "d_out"), "L": ("L",)}


def _doubled(hyper: dict[str, int], what: str) -> dict[str, int]:
    return {k: 2 * v if k in DOUBLINGS[what] else v for k, v in hyper.items()}


def _attention_cost(d_x: int, d_z: int, d_attn: int, d_out: int, ell_x: int, ell_z: int) -> int:
    """Multiply-adds of Algorithm 4: the projections (d²ℓ) and the scores and their use (ℓ²d)."""
    projections = d_attn * d_x * ell_x + d_attn * d_z * ell_z + d_out * d_z * ell_z
    return projections + d_attn * ell_x * ell_z + d_out * ell_x * ell_z


def _layer_cost(h: dict[str, int]) -> int:
    """One GPT-2 layer: H heads, W_o, the MLP and two layer norms, at ℓ tokens of width d_e."""
    d, ell = h["d_e"], h["ell"]
    heads = h["H"] * _attention_cost(d, d, h["d_attn"], h["d_mid"], ell, ell)
    return heads + d * h["H"] * h["d_mid"] * ell + 2 * h["d_mlp"] * d * ell + 2 * d * ell


def expected_cost(name: str, h: dict[str, int]) -> int:
    """The order of an entry's arithmetic (multiply-adds, leading terms) at hyperparameters ``h``:
    attention ≈ d²ℓ + ℓ²d, layer norm d ℓ, a model L layers plus the unembedding N_V d_e ℓ (a
    gradient costs a constant multiple of its forward pass, Griewank & Walther ch. 3)."""
    if name == "attention":
        return _attention_cost(h["d_x"], h["d_z"], h["d_attn"], h["d_out"], h["ell_x"], h["ell_z"])
    if name == "layer_norm":
        return h["d_e"] * h["ell"]
    if name == "gpt2_layer":
        return _layer_cost(h)
    if name in ("d_transformer", "d_gradient"):
        return h["L"] * _layer_cost(h) + h["N_V"] * h["d_e"] * h["ell"] + 2 * h["d_e"] * h["ell"]
    raise KeyError(f"no cost model for {name!r}")


#: measured/expected ratios outside this band are flagged: per-call overheads of Python pull a
#: small evaluation's ratio below the arithmetic's (which is the asymptote)
GROWTH_BAND = (0.5, 1.5)


def _time(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def growth(entries: Optional[dict[str, dict[str, int]]] = None, *, repeat: int = 3,
           dtype: str = "float32") -> list[dict[str, Any]]:
    """Seconds of the spec (binary64) and of the full reference at 1× and at 2× ℓ, d_e and (where the
    entry has it) L, best of ``repeat``; beside each ratio the ratio of ``expected_cost``."""
    from ftspec.conformance.core.examining import rounded
    from ftspec.conformance.core.tolerances import reference
    from ftspec.spec import evaluate
    from ftspec.spec.registry import entry as registry_entry
    from ftspec.tools.zoo.witness import fixed_case

    rows = []
    for name, base in (entries or GROWTH_ENTRIES).items():
        e = registry_entry(name)
        row: dict[str, Any] = {"algorithm": name, "base": base}
        doublings = [w for w in DOUBLINGS if any(k in base for k in DOUBLINGS[w])]
        for label, hyper in [("1x", base)] + [(f"2x_{w}", _doubled(base, w)) for w in doublings]:
            case = fixed_case(name, hyper=hyper)
            p = rounded(case, dtype)
            spec_in = {k: v.tolist() for k, v in p.inputs.items()}
            spec_par = {k: v.tolist() for k, v in p.params.items()}
            row[f"spec_{label}"] = _time(lambda: evaluate(name, spec_in, spec_par, hyper=case.hyper,
                                                          variant=case.variant), repeat)
            row[f"reference_{label}"] = _time(lambda: reference(e, p.inputs, p.params, hyper=case.hyper,
                                                                variant=case.variant, dtype=dtype), repeat)
        for what in DOUBLINGS:
            for kind in ("spec", "reference"):
                row[f"{kind}_ratio_{what}"] = (row[f"{kind}_2x_{what}"] / row[f"{kind}_1x"]
                                               if what in doublings else None)
            try:
                expected = expected_cost(name, _doubled(base, what)) / expected_cost(name, base)
            except KeyError:
                expected = None
            row[f"expected_ratio_{what}"] = expected if what in doublings else None
            measured = row[f"spec_ratio_{what}"]
            row[f"as_expected_{what}"] = (None if measured is None or expected is None else
                                          GROWTH_BAND[0] <= measured / expected <= GROWTH_BAND[1])
        rows.append(row)
    return rows


def xdist(command: Sequence[str] = ("-m", "pytest", "tests", "-x", "-q"), *, workers: int = 2,
          timeout: float = 7200.0, cwd: Optional[str] = None) -> dict[str, Any]:
    """Wall time of ``python COMMAND`` without and with ``-n workers``; the ratio serial / parallel."""
    out: dict[str, Any] = {"command": " ".join(["python", *command]), "workers": workers,
                           "cpus": os.cpu_count()}
    for label, extra in (("serial", ["-p", "no:xdist"]), ("parallel", ["-n", str(workers)])):
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, *command, *extra], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout)
        out[label] = {"seconds": time.perf_counter() - t, "returncode": proc.returncode,
                      "tail": proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []}
    s, p = out["serial"]["seconds"], out["parallel"]["seconds"]
    out["speedup"] = s / p if p else None
    return out
