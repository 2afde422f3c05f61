"""Every number system runs the same spec code and keeps its promise.

The spec is written once against ``spec.numbers.NumberSystem``; five systems
implement it: binary64 (``FLOAT``), mpmath (``MpNumbers``), running error
bounds (``TrackedNumbers``), reverse-mode tapes (``GradNumbers``) and the
harness's Monte Carlo arithmetic (``conformance.rounding.MonteCarloNumbers``).
Here each of them evaluates a few registry entries through ``spec.evaluate``
(layer norm, masked attention, a GPT-2 layer with the erf and the tanh GELU)
on small random inputs, and what each system promises is checked against
the others:

- tracked values are the binary64 values, bit for bit, and so are a tape's;
- binary64 lies within the tracked bound of the exact answer (mpmath at 60
  digits): |float − exact| ≤ 2·u·e + η·(a + 1), u = 2⁻⁵³, η = 2⁻¹⁰⁷⁴ (the
  factor 2 covers rounding the exact value and second-order terms, as in
  test_precision.py);
- Monte Carlo lane 0 is a binary64 evaluation (left-to-right sums, so it may
  differ from FLOAT's correctly rounded sums in the last bits: it is held to
  the same bound), and every perturbed lane, which rounds every operation
  with float32's u, lies within the tracked bound taken at that u;
- the perturbation is live: some lane differs from lane 0.
"""

from __future__ import annotations

import math
import random
from typing import Any, Iterator

import pytest

from ftspec.conformance.core.rounding import Lanes, MonteCarloNumbers
from ftspec.spec import FLOAT, PAPER, MpNumbers, NumberSystem, TrackedNumbers, VariantSet, evaluate, preset
from ftspec.spec import numbers as numbers_mod
from ftspec.spec.autodiff import GradNumbers
from ftspec.spec.numbers import Tracked
from ftspec.spec.registry import entry

U64, ETA64 = 2.0**-53, 2.0**-1074
U32, ETA32 = 2.0**-24, 2.0**-126  # float32: unit roundoff, smallest normal (flush-to-zero)

#: (entry, hyperparameters, variant): GELU is reached through the GPT-2 layer
CASES = [
    ("layer_norm", {"d_e": 5, "ell": 3}, PAPER),
    ("attention", {"d_x": 3, "d_z": 4, "d_attn": 2, "d_out": 3, "ell_x": 3, "ell_z": 4}, PAPER),
    ("gpt2_layer", {"H": 2, "d_e": 4, "d_attn": 2, "d_mid": 2, "d_mlp": 6, "ell": 3}, PAPER),
    ("gpt2_layer", {"H": 2, "d_e": 4, "d_attn": 2, "d_mid": 2, "d_mlp": 6, "ell": 3}, preset("hf-gpt2")),
]
IDS = [f"{name}-{'paper' if v == PAPER else 'hf-gpt2'}" for name, _, v in CASES]


def _values(shape: tuple[int, ...], rng: random.Random) -> Any:
    if len(shape) == 1:
        return [rng.uniform(-1.0, 1.0) for _ in range(shape[0])]
    return [_values(shape[1:], rng) for _ in range(shape[0])]


def _problem(name: str, hyper: dict[str, int], variant: VariantSet, seed: int) -> tuple[dict, dict]:
    """Random real inputs and parameters in [-1, 1]; a mask with a key for every query."""
    e = entry(name)
    rng = random.Random(seed)
    inputs: dict[str, Any] = {}
    for spec, shape in zip(e.inputs, e.input_shapes(hyper).values(), strict=True):
        if spec.is_real:
            inputs[spec.name] = _values(shape, rng)
        else:  # Mask (ℓ_z, ℓ_x): key t_z visible to query t_x iff t_z ≤ t_x (row 0 always)
            inputs[spec.name] = [[int(tz <= tx) for tx in range(shape[1])] for tz in range(shape[0])]
    params = {k: _values(shape, rng) for k, shape in e.param_shapes(hyper, variant).items()}
    return inputs, params


def _leaves(x: Any) -> Iterator[Any]:
    if isinstance(x, list):
        for item in x:
            yield from _leaves(item)
    else:
        yield x


def _run(name: str, hyper: dict[str, int], variant: VariantSet, seed: int,
         numbers: NumberSystem) -> dict[str, list[Any]]:
    inputs, params = _problem(name, hyper, variant, seed)
    out = evaluate(name, inputs, params, hyper=hyper, variant=variant, numbers=numbers)
    return {k: list(_leaves(v)) for k, v in out.items()}


def _where(system: str, name: str, variant: VariantSet, seed: int, output: str, i: int) -> str:
    preset_name = "paper" if variant == PAPER else "hf-gpt2"
    return (f"{system} on {name} ({preset_name}, seed {seed}), output {output}[{i}] (flattened); reproduce: "
            f"pytest 'tests/spec/test_number_systems.py' -k '{name}'")


SYSTEMS = {
    "float": lambda: FLOAT,
    "mpmath": lambda: MpNumbers(60),
    "tracked": TrackedNumbers,
    "grad": lambda: GradNumbers(FLOAT),
    "montecarlo": lambda: MonteCarloNumbers(u=U32, eta=ETA32, lanes=8, seed=0),
}


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_each_system_implements_the_protocol(system: str) -> None:
    ns = SYSTEMS[system]()
    assert isinstance(ns, NumberSystem), f"{system} lacks a NumberSystem member"
    with numbers_mod.using(ns):
        assert numbers_mod.current() is ns
    assert numbers_mod.current() is FLOAT


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(("name", "hyper", "variant"), CASES, ids=IDS)
def test_systems_agree_within_their_promises(name: str, hyper: dict[str, int], variant: VariantSet,
                                             seed: int) -> None:
    flt = _run(name, hyper, variant, seed, FLOAT)
    exact = _run(name, hyper, variant, seed, MpNumbers(60))
    tracked = _run(name, hyper, variant, seed, TrackedNumbers())
    grad = _run(name, hyper, variant, seed, GradNumbers(FLOAT))
    mc = _run(name, hyper, variant, seed, MonteCarloNumbers(u=U32, eta=ETA32, lanes=8, seed=seed))
    assert flt.keys() == exact.keys() == tracked.keys() == grad.keys() == mc.keys()
    moved = False
    for output, f_values in flt.items():
        for i, f in enumerate(f_values):
            t, m, g, lanes = tracked[output][i], float(exact[output][i]), grad[output][i], mc[output][i]
            assert isinstance(t, Tracked) and isinstance(lanes, Lanes)
            assert t.v == f and math.copysign(1, t.v) == math.copysign(1, f), (
                f"tracked value {t.v!r} is not the binary64 value {f!r}: " + _where("tracked", name, variant, seed,
                                                                                   output, i))
            assert g.ns.to_float(g) == f, (
                f"tape value {g.ns.to_float(g)!r} is not the binary64 value {f!r}: "
                + _where("grad", name, variant, seed, output, i))
            bound64 = 2 * U64 * t.e + ETA64 * (t.a + 1)
            assert abs(f - m) <= bound64, (
                f"|float − exact| = {abs(f - m):.3g} exceeds the tracked bound {bound64:.3g} (float {f!r}, exact "
                f"{m!r}): " + _where("float", name, variant, seed, output, i))
            lane0 = float(lanes.x[0])
            assert abs(lane0 - m) <= bound64, (
                f"Monte Carlo lane 0 = {lane0!r} is {abs(lane0 - m):.3g} from the exact {m!r}, beyond the binary64 "
                f"bound {bound64:.3g}: " + _where("montecarlo", name, variant, seed, output, i))
            bound32 = 2 * U32 * t.e + ETA32 * (t.a + 1)
            worst = max(abs(float(x) - m) for x in lanes.x[1:])
            assert worst <= bound32, (
                f"a Monte Carlo lane is {worst:.3g} from the exact {m!r}, beyond the tracked bound at float32's u, "
                f"{bound32:.3g}: " + _where("montecarlo", name, variant, seed, output, i))
            moved = moved or bool((lanes.x[1:] != lanes.x[0]).any())
    assert moved, f"no Monte Carlo lane moved from lane 0 on {name}: the perturbations are not applied"
