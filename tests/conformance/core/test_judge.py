"""The judge on scalar (0-d) outputs: a sampled token and a loss."""

from __future__ import annotations

import numpy as np

from ftspec.conformance.core.judge import judge
from ftspec.conformance.core.tolerances import Reference
from ftspec.spec.registry import REGISTRY


def _ref(entry, outputs, bound):
    specs = tuple(entry.outputs)
    return Reference(outputs=outputs, bound=bound, spread=bound, max_intermediate=1.0, in_range=True,
                     dtype="float64", precision="highest", specs=specs)


def test_a_differing_scalar_token_is_a_failure():
    entry = REGISTRY["sample"]
    ref = _ref(entry, {"y": np.array(2)}, {"y": np.zeros(())})
    assert judge(entry, {"y": np.array(2)}, ref).ok
    j = judge(entry, {"y": np.array(5)}, ref)
    assert not j.ok and "'y' differs at 1 of 1" in j.findings[0].message


def test_a_scalar_loss_is_judged_against_its_bound():
    entry = REGISTRY["d_loss"]
    ref = _ref(entry, {"loss": np.array(3.0)}, {"loss": np.array(1e-12)})
    assert judge(entry, {"loss": np.array(3.0 + 5e-13)}, ref).ok
    j = judge(entry, {"loss": np.array(3.0 + 5e-12)}, ref)
    assert not j.ok and j.findings[0].check == "spec" and j.ratio > 1


def test_the_eta_zero_check_runs_only_where_the_spec_defines_eta_zero(monkeypatch):
    """η = 0 changes a training loop's trajectory; where the spec refuses that case (a gradient
    0/0 at the unchanged θ), θ − 0·∇ is no number and the check must not run."""
    import ftspec.conformance.core.metamorphic as M
    from ftspec.spec import PAPER, SpecError
    from ftspec.impls.discovery import load

    from tests.impls.cases import make_case

    impl = load("numpy")
    from ftspec.conformance.core.case import Case

    entry = REGISTRY["d_sgd_step"]
    fixed = make_case(entry, PAPER)
    case = Case("d_sgd_step", fixed.hyper, PAPER, fixed.inputs, fixed.params)
    calls = []

    def call(name, inputs, params):
        calls.append(float(inputs["eta"]))
        from ftspec.conformance.core.calling import call as run
        return run(impl, REGISTRY[name], inputs, params, hyper=case.hyper, variant=PAPER, dtype="float64",
                   device="cpu")

    _, ran = M.metamorphic(case, case.inputs, case.params, {}, None, call, lambda n: True)
    assert ran == ["eta-zero"] and calls == [0.0]

    def refuses(*args, **kwargs):
        raise SpecError("X", "a column with nonzero variance", "variance 0", algorithm="layer_norm")

    monkeypatch.setattr(M, "evaluate", refuses)
    calls.clear()
    _, ran = M.metamorphic(case, case.inputs, case.params, {}, None, call, lambda n: True)
    assert ran == [] and calls == []
