"""conformance/core/portable_math.py: accurate, C99's special values, and the same bits under any CPU dispatch."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys

import mpmath
import numpy as np
import pytest

from ftspec.conformance.core import portable_math as pm

MP = mpmath.MPContext()
MP.prec = 160

#: (function, mpmath's, arguments, largest error allowed in ulps of the correctly rounded result)
_RNG = np.random.default_rng(20261125)
CASES = {
    "exp": (pm.exp, MP.exp, np.concatenate([_RNG.uniform(-745, 709.7, 400), _RNG.uniform(-2, 2, 400)]), 1.0),
    "log": (pm.log, MP.log, np.concatenate([np.exp(_RNG.uniform(-700, 700, 400)), _RNG.uniform(0.5, 2, 400),
                                            [5e-324, 1e-310]]), 1.0),
    "expm1": (pm.expm1, MP.expm1, np.concatenate([_RNG.uniform(-40, 709, 400), _RNG.uniform(-1, 1, 400)]), 1.0),
    "tanh": (pm.tanh, MP.tanh, np.concatenate([_RNG.uniform(-25, 25, 400), _RNG.uniform(-1.2, 1.2, 400),
                                               _RNG.uniform(-1e-5, 1e-5, 100)]), 1.5),
    "erf": (pm.erf, MP.erf, np.concatenate([_RNG.uniform(-7, 7, 400), _RNG.uniform(-1.3, 1.3, 400),
                                             _RNG.uniform(-1e-9, 1e-9, 100)]), 1.0),
    "sin": (pm.sin, MP.sin, np.concatenate([_RNG.uniform(-1e4, 1e4, 400), _RNG.uniform(-4, 4, 400),
                                             [1e7, -3e10, 1e22]]), 1.5),
    "cos": (pm.cos, MP.cos, np.concatenate([_RNG.uniform(-1e4, 1e4, 400), _RNG.uniform(-4, 4, 400),
                                             [1e7, -3e10, 1e22]]), 1.5),
}


def _worst_ulps(got: np.ndarray, want: list) -> float:
    worst = 0.0
    for g, ref in zip(got, want):
        r = float(ref)
        if r == 0 or not math.isfinite(r):
            assert float(g) == r
            continue
        worst = max(worst, float(abs(MP.mpf(float(g)) - ref)) / math.ulp(r))
    return worst


@pytest.mark.parametrize("name", sorted(CASES))
def test_within_its_error_bound_of_the_exact_value(name):
    f, exact, x, bound = CASES[name]
    worst = _worst_ulps(f(x), [exact(MP.mpf(float(v))) for v in x])
    assert worst <= bound, f"{name}: {worst:.3f} ulp"
    # the measure can fail: results two ulps off are seen beyond the bound
    assert _worst_ulps(f(x) * (1 + 4 * 2.0**-53), [exact(MP.mpf(float(v))) for v in x]) > bound


@pytest.mark.parametrize("e_range,bound", [((0.0, 1.0), 1.5), ((-20.0, 20.0), 2.0)])
def test_pow_within_its_error_bound(e_range, bound):
    """The sinusoids' 10000^(2i/d) (exponents in [0, 1]) and a wider range."""
    b = np.concatenate([np.full(300, 10000.0), _RNG.uniform(0.01, 100, 300)])
    e = _RNG.uniform(*e_range, 600)
    worst = _worst_ulps(pm.pow(b, e), [MP.power(MP.mpf(float(x)), MP.mpf(float(y))) for x, y in zip(b, e)])
    assert worst <= bound


SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 710.0, -746.0, 1e300, -1e300, 1.0, -1.0]


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "erf", "sin", "cos", "expm1"])
def test_special_values_are_libms(name):
    """Zeros (with their sign), infinities, NaN, subnormals and overflow as C99's libm gives them."""
    f = getattr(pm, name)
    got = f(np.array(SPECIAL))
    for x, g in zip(SPECIAL, got):
        try:
            want = getattr(math, name)(x)
        except OverflowError:  # C99: an overflowing result is inf
            want = math.inf
        except ValueError:  # CPython refuses where C99 returns log(0) = −inf, else NaN
            want = -math.inf if name == "log" and x == 0 else math.nan
        if math.isnan(want):
            assert math.isnan(g), (name, x, g)
        else:
            assert g == want and math.copysign(1, g) == math.copysign(1, want) or \
                abs(g - want) <= math.ulp(want), (name, x, g, want)


def test_pow_special_values_follow_c99():
    values = [0.0, -0.0, math.inf, -math.inf, math.nan, 2.0, -2.0, 1.0, -1.0, 0.5, -0.5]
    for b in values:
        for e in [0.0, -0.0, 1.0, -1.0, 2.0, 3.0, -3.0, 0.5, -0.5, math.inf, -math.inf, math.nan, 2.0**1000]:
            g = float(pm.pow(b, e))
            try:
                want = math.pow(b, e)
            except ValueError:  # CPython refuses where C99 returns ±inf (a zero base) or NaN
                odd = math.isfinite(e) and e == math.floor(e) and math.fmod(e, 2.0) != 0
                want = math.copysign(math.inf, b if odd else 1.0) if b == 0 else math.nan
            except OverflowError:
                want = math.inf
            if math.isnan(want):
                assert math.isnan(g), (b, e, g)
            else:
                assert g == want and math.copysign(1, g) == math.copysign(1, want) or \
                    abs(g - want) <= 2 * math.ulp(want), (b, e, g, want)


_PROBE = """
import hashlib, json, numpy as np
from ftspec.conformance.core import portable_math as pm
x = np.random.default_rng(7).uniform(-30, 30, 50000)
mine = b"".join(f(x).tobytes() for f in (pm.exp, pm.expm1, pm.tanh, pm.erf, pm.sin, pm.cos))
mine += pm.log(np.abs(x)).tobytes() + pm.pow(np.abs(x), x / 30).tobytes()
numpys = np.exp(x).tobytes() + np.tanh(x).tobytes() + np.sin(x).tobytes() + np.power(np.abs(x), x / 30).tobytes()
print(json.dumps([hashlib.sha256(mine).hexdigest(), hashlib.sha256(numpys).hexdigest()]))
"""


def dispatch_off() -> str | None:
    """NPY_DISABLE_CPU_FEATURES value that turns off the best SIMD group this CPU has (None: none can be)."""
    from numpy._core._multiarray_umath import __cpu_features__ as have

    for feature, group in (("AVX512F", "X86_V4"), ("AVX2", "X86_V3 X86_V4"), ("ASIMDHP", "ASIMDHP ASIMDDP ASIMDFHM"),
                           ("VSX3", "VSX3 VSX4")):
        if have.get(feature):
            return group
    return None


def _probe(env_extra: dict[str, str]) -> list[str]:
    env = {**os.environ, **env_extra}
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_same_bits_under_another_cpu_dispatch():
    """The functions give the same bits with NumPy's best SIMD paths turned off; NumPy's own exp,
    tanh, sin and power are shown to change on such machines (then this test checks something)."""
    off = dispatch_off()
    if off is None:
        pytest.skip("this CPU has no SIMD group NumPy can turn off")
    normal, reduced = _probe({"NPY_DISABLE_CPU_FEATURES": ""}), _probe({"NPY_DISABLE_CPU_FEATURES": off})
    assert normal[0] == reduced[0], "portable_math changed its results with NumPy's CPU dispatch"
    # our own results, in this process, are those of the probe: the same function of the bits
    x = np.random.default_rng(7).uniform(-30, 30, 50000)
    here = b"".join(f(x).tobytes() for f in (pm.exp, pm.expm1, pm.tanh, pm.erf, pm.sin, pm.cos))
    here += pm.log(np.abs(x)).tobytes() + pm.pow(np.abs(x), x / 30).tobytes()
    assert hashlib.sha256(here).hexdigest() == normal[0]
