"""A hand-built run report holding every kind of cell, failure and fixture replay, for the JUnit
and HTML tests (a real run has only some of them; ``test_junit.py`` checks once that a real
report's cells have the keys these have, so the sample cannot drift from the schema).
"""

from __future__ import annotations

import copy
from typing import Any

MINIMUM = 5

_CELL = {"paper": "Algorithm 6", "out_of_range": 0, "checks": {"spec": 6, "determinism": 6},
         "ambiguous_samples": 0, "undetermined_elements": 0, "note": None, "exhausted": None, "failure": None,
         "more_failures": [], "ratios": []}

DIVERGENCE = {"where": "layer 1", "sublayer": "norm", "detail": "gpt2_layer departs on the spec's input",
              "also": ["final norm"], "candidates": [], "unchecked": [], "intermediate": "",
              "checks": [{"where": "embedding", "entry": "embedding", "config": "as given", "ok": True,
                          "ratio": 0.1, "note": ""},
                         {"where": "layer 0", "entry": "gpt2_layer", "config": "as given", "ok": True,
                          "ratio": 0.2, "note": ""},
                         {"where": "layer 1", "entry": "gpt2_layer", "config": "as given", "ok": False,
                          "ratio": 3.0e5, "note": "output 'Y' departs"},
                         {"where": "model", "entry": "d_transformer", "config": "the whole model", "ok": False,
                          "ratio": "inf", "note": "non-finite"}],
              "gave_up": False, "seconds": 0.3}


def _cell(algorithm: str, impl: str, dtype: str, status: str, examples: int, worst: Any, ratios: list,
          **more: Any) -> dict[str, Any]:
    cell = copy.deepcopy(_CELL)
    cell.update(algorithm=algorithm, implementation=impl, dtype=dtype, device="cpu", status=status,
                examples=examples, worst_ratio=worst, ratios=ratios, **more)
    return cell


def sample_report() -> dict[str, Any]:
    """A fresh ``ftspec-report/1`` dict: pass, pass short of the minimum, pass exhausted below it,
    fail (diagnosis, divergence, a further failure), error, not implemented, no examples; a passing
    and a failing fixture replay; a plugin that failed to load."""
    failure = {"check": "spec", "message": "output 'P': 3 of 12 entries outside the tolerance <&> \x01",
               "case_file": "reports/cases/d_transformer-bad-float32-cpu-1a2b.json",
               "reproducer": "ftspec replay reports/cases/d_transformer-bad-float32-cpu-1a2b.json --impl bad "
                             "--dtype float32 --device cpu",
               "shrunk": True, "refusals": [],
               "diagnosis": {"declared": "phuong-hutter", "matches": [
                   {"changes": {"epsilon": 1e-05}, "declared": {"epsilon": 0.0}, "presets": [], "ratio": 0.06}],
                   "divergence": DIVERGENCE}}
    further = {"check": "exception", "message": "raised ValueError: shapes (3,) and (4,) not aligned",
               "case_file": "reports/cases/d_transformer-bad-float32-cpu-9f9f.json",
               "reproducer": "ftspec replay reports/cases/d_transformer-bad-float32-cpu-9f9f.json --impl bad",
               "shrunk": True, "diagnosis": None, "signature": "check exception; raises ValueError"}
    cells = [
        _cell("layer_norm", "good", "float32", "pass", 6, 0.4, [0.1, 0.4, 0.0, 0.25, 0.3, 0.2]),
        _cell("layer_norm", "good", "float16", "pass", 3, 0.5, [0.5, 0.2, 0.1]),  # short of the minimum
        _cell("unidirectional_mask", "good", "float32", "pass", 2, 0.0, [0.0, 0.0], exhausted=2),
        _cell("d_transformer", "bad", "float32", "fail", 4, "inf", [0.2, 3.0e5, "inf", 0.1],
              failure=failure, more_failures=[further]),
        _cell("d_transformer", "bad", "float16", "error", 0, 0.0, [],
              note="the worker was lost: exit code -9"),
        _cell("rms_norm", "bad", "float32", "not implemented", 0, 0.0, [], checks={}),
        _cell("attention", "good", "float32", "no examples", 0, 0.0, [], note="not run: interrupted",
              checks={}),
    ]
    fixtures = [
        {"case": "layer_norm-paper", "algorithm": "layer_norm", "variant": "", "implementation": "good",
         "dtype": "float32", "device": "cpu", "ok": True, "ratio": 0.2, "message": "", "checks": ["spec"],
         "seconds": 0.012, "declared_variant": "", "bounds": "stored"},
        {"case": "d_transformer-paper", "algorithm": "d_transformer", "variant": "", "implementation": "bad",
         "dtype": "float32", "device": "cpu", "ok": False, "ratio": 41.0,
         "message": "output 'P': error/bound 41 at [0, 2]", "checks": ["spec"], "seconds": 0.5,
         "declared_variant": "", "bounds": "stored"},
    ]
    return {"schema": "ftspec-report/1", "spec_version": "2.3.0", "profile": "quick", "seed": 7,
            "started": "2026-12-06T17:00:00+01:00", "seconds": 12.5, "jobs": 0, "fixture_selection": "sample",
            "ok": False, "verdict": "non-conformant",
            "reasons": ["d_transformer bad float32 cpu: fail (2 distinct failures)"], "interrupted": False,
            "minimum": MINIMUM, "selection": {}, "extension": None,
            "broken": [{"name": "gone", "error": "ModuleNotFoundError: No module named 'gone'"}],
            "tolerances": {}, "environment": {}, "cells": cells, "searches": [], "fixtures": fixtures}


def failures(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every failure of the report's cells, further failures included."""
    cells = report.get("cells") or report.get("results") or []
    out = []
    for c in cells:
        if c.get("failure"):
            out.append(c["failure"])
        out += c.get("more_failures") or []
    return out
