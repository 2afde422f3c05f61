"""Misbehaving implementations get a failed verdict for the algorithm they
break, with a clear message, and the run carries on with the rest."""

from __future__ import annotations

import time

from ..support import failed, run_mutant

OTHERS = ["attention", "sinusoidal_paper"]  # correct in every mutant: must still pass


def _check(result, algorithm: str, check: str, needle: str) -> None:
    assert failed(result) == {algorithm: check}, failed(result)
    cell = next(c for c in result.cells if c.algorithm == algorithm)
    report = cell.failure.report
    assert algorithm in report and cell.impl in report and "float32" in report and "cpu" in report
    assert needle in report, report
    assert "ftspec replay" in report  # ends with a reproducer
    others = [c for c in result.cells if c.algorithm in OTHERS]
    assert others and all(c.status == "pass" and c.examples > 0 for c in others)


def test_returns_nan(tmp_path):
    _check(run_mutant("returns-nan", ["layer_norm", *OTHERS], ["float32"], tmp_path, examples=15),
           "layer_norm", "nan", "NaN")


def test_wrong_shape_and_dtype(tmp_path):
    _check(run_mutant("wrong-shape", ["layer_norm", *OTHERS], ["float32"], tmp_path, examples=15),
           "layer_norm", "shape", "shape")
    _check(run_mutant("wrong-dtype", ["rms_norm", *OTHERS], ["float32"], tmp_path, examples=15),
           "rms_norm", "dtype", "dtype float64")


def test_mutates_its_input(tmp_path):
    _check(run_mutant("mutates-input", ["layer_norm", *OTHERS], ["float32"], tmp_path, examples=15),
           "layer_norm", "mutation", "changed its argument 'X'")


def test_raises(tmp_path):
    _check(run_mutant("raises", ["unembedding", *OTHERS], ["float32"], tmp_path, examples=15),
           "unembedding", "exception", "RuntimeError: this plugin has a bug")


def test_hangs_is_abandoned_after_the_call_timeout(tmp_path):
    start = time.monotonic()
    result = run_mutant("hangs", ["rms_norm", *OTHERS], ["float32"], tmp_path, examples=15, timeout=1.0)
    _check(result, "rms_norm", "timeout", "no result after 1 s")
    # the hang was abandoned once, not waited for on every example
    assert time.monotonic() - start < 60
    cell = next(c for c in result.cells if c.algorithm == "rms_norm")
    assert cell.examples == 1


def test_not_implemented_is_not_a_failure(tmp_path):
    import dataclasses

    from ftspec.impls.discovery import load

    from ..support import run

    base = load("numpy")
    partial = dataclasses.replace(base, name="partial",
                                  algorithms={k: v for k, v in base.algorithms.items() if k != "attention"})
    result = run([("partial", partial)], ["attention", "layer_norm"], ["float64"], tmp_path, examples=5)
    statuses = {c.algorithm: c.status for c in result.cells}
    assert statuses == {"attention": "not implemented", "layer_norm": "pass"}
    assert result.ok
