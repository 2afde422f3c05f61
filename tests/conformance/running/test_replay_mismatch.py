"""``ftspec replay`` of a case recorded under something the implementation does not declare (issue 22).

A case recorded under a variant set the plugin does not declare once crashed ``replay --impl
torch-nn`` with ``KeyError: 'gamma'`` (or judged torch.nn under ε = 0, a false finding), and a case
recorded on ``cpu`` needed ``--device cpu:0`` to replay on JAX or Flax. Now: the variant set must be
declared, or differ from a declared one only in switches that change rounding (the case then runs
under the declared one); ``cpu`` and ``cpu:0`` name one device; anything else is refused with one
line that says what to run instead. The plugins here are small NumPy ones, loaded by their
``module:object`` label; one test reproduces the issue on the bundled torch-nn and JAX plugins.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np
import pytest

from ftspec.conformance.core.case import Case
from ftspec.conformance.core.casefile import write_case
from ftspec.conformance.running.replay import ReplayError, replay, same_device
from ftspec.impls.api import Context, Implementation, Limits
from ftspec.spec.variants import PAPER, parse
from ftspec.tools.cli import main

HERE = __name__
#: (algorithm, device, variant) of every call the plugins here receive
CALLS: list[tuple[str, str, str]] = []


def _layer_norm(inputs, params, ctx: Context):
    """Correct under any set with ε = 0 and the affine map; needs γ and β, as torch.nn's does.
    Refuses a zero-variance column, as the spec does with no ε."""
    CALLS.append((ctx.algorithm, ctx.device, ctx.variant.describe()))
    X = inputs["X"]
    if np.all(X == X[..., :1, :], axis=-2).any():
        raise ValueError("layer_norm: a column of zero variance and no epsilon")
    m = X.mean(axis=-2, keepdims=True)
    v = ((X - m) ** 2).mean(axis=-2, keepdims=True)
    return (X - m) / np.sqrt(v) * params["gamma"][:, None] + params["beta"][:, None]


def _plugin(name: str, variants, devices=("cpu",), dtypes=("float64", "float32"), limits=Limits()):
    return Implementation(name=name, version="0", algorithms={"layer_norm": _layer_norm}, dtypes=dtypes,
                          devices=lambda: list(devices), from_numpy=lambda a, dtype, device: np.array(a, dtype=dtype),
                          to_numpy=np.asarray, variants=variants, limits=limits)


paper_cpu = _plugin("paper-cpu", [PAPER])
paper_cpu0 = _plugin("paper-cpu0", [PAPER], devices=("cpu:0",))
one_pass = _plugin("one-pass", [parse("phuong-hutter+variance=one_pass")])  # same mathematics, other rounding
tiny = _plugin("tiny", [PAPER], limits=Limits(maximum={"d_e": 2}))


def label(name: str) -> str:
    return f"{HERE}:{name}"


@pytest.fixture(autouse=True)
def _fresh_calls():
    CALLS.clear()


def _case(tmp_path: Path, variant=PAPER, **meta) -> Path:
    case = Case.build("layer_norm", {"d_e": 3, "ell": 2}, variant)
    meta = {"impl": "someone:else", "dtype": "float64", "device": "cpu", **meta}
    return write_case(case, tmp_path / "cases" / "c.json", **meta)


def _replay(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["replay", *argv])
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), err


def _refused(capsys, *argv: str) -> str:
    code, out, err = _replay(capsys, *argv)
    assert code == 2, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not CALLS, "a refused replay must not call the plugin"
    return err.strip()


def test_a_variant_set_the_plugin_does_not_declare_is_refused_and_never_called(tmp_path, capsys):
    path = _case(tmp_path, parse("phuong-hutter+affine=none"))  # no gamma, no beta: KeyError in the plugin
    err = _refused(capsys, str(path), "--impl", label("paper_cpu"))
    assert "does not declare the case's variant set phuong-hutter+affine=none" in err
    assert "affine: none vs scale_shift" in err  # the switch that keeps it apart, both values
    assert f"ftspec replay {shlex.quote(str(path))} --impl numpy" in err  # what to run instead
    assert "KeyError" not in err


def test_a_set_that_differs_only_in_rounding_runs_under_the_declared_one(tmp_path, capsys):
    """variance=one_pass is biased variance computed in one pass: the same mathematics, so the case
    replays under the set the plugin declares (the fixture replay's rule), and says so."""
    code, out, err = _replay(capsys, str(_case(tmp_path)), "--impl", label("one_pass"))
    assert code == 0 and not err, (out, err)
    assert "recorded under phuong-hutter; run under" in out and "conforms" in out
    assert {v for _, _, v in CALLS} == {"phuong-hutter+variance=one_pass"}  # called only under what it declares


@pytest.mark.parametrize("recorded, plugin, asked", [
    ("cpu", "paper_cpu0", None),  # recorded by PyTorch, replayed on a JAX-style name
    ("cpu:0", "paper_cpu", None),  # and the other way round
    ("cpu", "paper_cpu0", "cpu"),  # --device cpu given by hand
])
def test_cpu_and_cpu_0_name_one_device(tmp_path, capsys, recorded, plugin, asked):
    argv = [str(_case(tmp_path, device=recorded)), "--impl", label(plugin)] + (["--device", asked] if asked else [])
    code, out, err = _replay(capsys, *argv)
    listed = "cpu:0" if plugin == "paper_cpu0" else "cpu"
    assert code == 0 and not err, (out, err)
    assert f"on {listed} (" in out and "the same device" in out
    assert CALLS and {d for _, d, _ in CALLS} == {listed}  # the plugin gets the name it lists


def test_a_device_the_plugin_lacks_is_refused_with_the_device_to_use(tmp_path, capsys):
    path = _case(tmp_path, device="cuda:1")
    err = _refused(capsys, str(path), "--impl", label("paper_cpu"))
    assert "has no device 'cuda:1' (the device the case was recorded on) (it lists cpu)" in err
    assert err.endswith(f"choose one: ftspec replay {shlex.quote(str(path))} --impl {label('paper_cpu')} --device cpu")


def test_a_dtype_the_plugin_lacks_is_refused_with_the_dtype_to_use(tmp_path, capsys):
    err = _refused(capsys, str(_case(tmp_path, dtype="bfloat16")), "--impl", label("paper_cpu"))
    assert "does not declare dtype 'bfloat16' (the dtype the case was recorded at)" in err
    assert err.endswith("--dtype float64")


def test_a_case_outside_the_plugins_limits_is_refused(tmp_path, capsys):
    err = _refused(capsys, str(_case(tmp_path)), "--impl", label("tiny"))
    assert "lies outside" in err and "d_e <= 2" in err


@pytest.mark.parametrize("a, b, same", [
    ("cpu", "cpu:0", True), ("cpu:0", "cpu", True), ("cuda", "cuda:0", True), ("cpu:0", "cpu:0", True),
    ("cpu", "cpu:1", False), ("cuda:1", "cuda", False), ("cpu", "cuda:0", False), ("cpu:0", "gpu:0", False),
])
def test_same_device(a, b, same):
    assert same_device(a, b) is same


def test_the_bundled_plugins_of_the_issue(tmp_path):
    """torch-nn on a case without γ (its KeyError), and JAX (cpu:0) on a case recorded on cpu."""
    path = _case(tmp_path, parse("phuong-hutter+affine=none"))
    with pytest.raises(ReplayError, match=r"torch-nn does not declare the case's variant set .*affine: none vs "
                                          r"scale_shift.*--impl numpy$"):
        replay(path, impl="torch-nn")
    verdict = replay(_case(tmp_path, device="cpu"), impl="jax")
    assert verdict.ok and "on cpu:0 (recorded on 'cpu': the same device)" in verdict.text
