"""Metamorphic checks: properties that relate an implementation to itself.

- SGD with η = 0 leaves every parameter unchanged, bit for bit (SGD steps and
  training loops), where the spec defines that case: η = 0 changes the
  training trajectory, and at the unchanged θ a later step's gradient may be
  undefined (an ε-free norm of a zero-variance column), where θ − 0·∇ is
  no number at all.
- The gradient of a parameter the loss cannot reach is exactly zero: the
  columns of W_e of tokens absent from the example (when W_u is not tied to
  W_e) and the columns of a learned W_p beyond the sequence lengths.
- DInference's first token is what the implementation's own ``sample``
  draws from the last column of its own ``d_transformer`` (DInference with
  ℓ_gen = 1 samples from the last column of DTransformer).
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ftspec.spec import SpecError, evaluate
from ftspec.spec.registry import entry as registry_entry

from .case import Case
from .judge import Finding, Judgement
from .tolerances import Reference

__all__ = ["metamorphic"]

Call = Callable[[str, Mapping[str, np.ndarray], Mapping[str, np.ndarray]], dict[str, np.ndarray]]


def _defined(case: Case, inputs, params) -> bool:
    """Whether the spec (binary64) accepts ``case`` with these inputs."""
    try:
        evaluate(case.algorithm, {k: v.tolist() for k, v in inputs.items()},
                 {k: v.tolist() for k, v in params.items()}, hyper=dict(case.hyper), variant=case.variant)
    except SpecError:
        return False
    return True


def _eta_zero(case: Case, inputs, params, call: Call) -> Judgement:
    j = Judgement()
    out = call(case.algorithm, {**inputs, "eta": np.zeros_like(inputs["eta"])}, params)
    for name, value in params.items():
        got = out[f"theta.{name}"].astype(np.float64)
        if not np.array_equal(got, value):
            at = tuple(int(i) for i in np.argwhere(got != value)[0])
            j.findings.append(Finding("metamorphic", f"with η = 0 parameter {name!r} changed at {list(at)}: "
                                      f"{value[at]!r} became {got[at]!r}"))
            break
    return j


def _unreachable(case: Case, inputs, outputs: Mapping[str, np.ndarray]) -> Judgement:
    """Gradient entries: W_e columns of absent tokens, W_p columns beyond the length."""
    j = Judgement()
    tokens = set()
    for name in ("x", "z", "mask_token"):
        if name in inputs:
            tokens |= {int(t) for t in np.ravel(inputs[name])}
    lengths = [np.shape(inputs[n])[-1] for n in ("x", "z") if n in inputs]
    regions = []
    if "grad.W_e" in outputs and case.variant.unembedding == "separate":
        absent = [v for v in range(outputs["grad.W_e"].shape[-1]) if v not in tokens]
        regions.append(("W_e", (Ellipsis, absent), f"columns of tokens absent from the example {absent}"))
    if "grad.W_p" in outputs and lengths:
        beyond = list(range(max(lengths), outputs["grad.W_p"].shape[-1]))
        regions.append(("W_p", (Ellipsis, beyond), f"position columns {beyond} beyond the sequence"))
    for name, index, what in regions:
        region = outputs[f"grad.{name}"][index]
        if region.size and np.any(region != 0):
            j.findings.append(Finding("metamorphic", f"the gradient of {name} is not exactly zero on {what}, "
                                      f"which the loss cannot reach: max |g| = {np.max(np.abs(region)):.3g}"))
    return j


def _first_token(case: Case, inputs, params, outputs, call: Call, ref: Reference,
                 has: Callable[[str], bool]) -> Judgement:
    j = Judgement()
    if not (has("d_transformer") and has("sample")):
        return j
    P = call("d_transformer", {"x": inputs["x"]}, params)["P"]  # (N_V, ell)
    y = call("sample", {"p": P[:, -1], "u": inputs["u"][0], "tau": inputs["tau"]}, {})["y"]
    first = int(np.ravel(outputs["y"])[0])
    if int(y) != first:
        # both are acceptable only if the spec's step-0 distribution accepts both (a CDF boundary)
        alt = dict(outputs)
        alt["y"] = np.array([int(y)] + [int(t) for t in np.ravel(outputs["y"])[1:]], dtype=np.int64)
        verdict = ref.sampled(alt) if ref.sampled else Judgement(findings=[Finding("metamorphic", "")])
        if not verdict.ok or verdict.ambiguous == 0:
            j.findings.append(Finding("metamorphic", f"d_inference's first token is {first}, but sample() on the "
                                      f"last column of this implementation's d_transformer gives {int(y)}"))
    return j


def metamorphic(case: Case, inputs: Mapping[str, np.ndarray], params: Mapping[str, np.ndarray],
                outputs: Mapping[str, np.ndarray], ref: Reference, call: Call,
                has: Callable[[str], bool]) -> tuple[Judgement, list[str]]:
    """The metamorphic checks that apply to ``case``; returns (judgement, names of checks run)."""
    j, ran = Judgement(), []
    name = case.algorithm
    if name.endswith(("_sgd_step", "_training")) and _defined(case, {**inputs, "eta": np.zeros_like(inputs["eta"])},
                                                              params):
        j.add(_eta_zero(case, inputs, params, call))
        ran.append("eta-zero")
    if name.endswith("_gradient"):
        j.add(_unreachable(case, inputs, outputs))
        ran.append("unreachable-zero")
    if name == "d_inference":
        before = len(j.findings)
        j.add(_first_token(case, inputs, params, outputs, call, ref, has))
        if has("d_transformer") and has("sample") and len(j.findings) == before:
            ran.append("first-token")
    return j, ran


def entry_outputs(name: str, hyper, variant) -> list[str]:
    return [s.name for s in registry_entry(name).output_specs(hyper, variant)]
