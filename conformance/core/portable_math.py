"""Elementary functions that give the same bits on every CPU.

Why: the Monte Carlo lanes (``conformance/core/rounding.py``) evaluate exp, log,
tanh, erf, sin, cos and pow on float64 arrays. NumPy picks the SIMD code of
its own float64 ``exp``, ``log``, ``power``, ``sin``, ``cos`` and ``tanh`` at
run time by CPU (AVX-512 has its own, which differs from the AVX2 and libm
results in the last bit for about 5% of arguments), and libm's results
depend on whether the processor has FMA. At float64 a last-bit change moves
a lane by as much as the rounding being modelled, so the stored float64
bounds of the golden fixtures changed from machine to machine (263 of 652
cases on an AVX-512 Xeon).

How: every function below is written with IEEE-754 basic operations only
(``+ − × ÷``, each correctly rounded by the standard on every processor,
and NumPy applies each ufunc call as one operation, so no multiply-add is
ever fused), plus operations that are exact (comparisons, ``abs``,
``rint``/``floor``, ``frexp``/``ldexp``, clearing bits of the significand).
Each result is therefore a fixed function of its argument's bits: the same
on x86-64 with or without AVX-512, on ARM64, and under any NumPy dispatch.
The one path that is not vectorised, sin and cos of arguments beyond
2^19·π/2 (never reached by the spec's sinusoids), reduces the argument
exactly with ``mpmath`` in pure Python, which is deterministic too.

The algorithms are fdlibm's (Sun Microsystems, 1993; the same methods as
glibc's older and musl's implementations), whose error analyses bound each
below one ulp; their constants are the published fdlibm coefficients.
``pow`` is exp(e · log b) with log b carried in two doubles, within about
1.5 ulp where |e · log b| < 710. The branches are taken per element with
``np.where`` (every branch is evaluated on the whole array: an unused
branch may overflow harmlessly, hence ``errstate``).
``tests/conformance/core/test_portable_math.py`` checks the error bounds against
mpmath, the special values against NumPy, and the same bits under another
CPU dispatch (``NPY_DISABLE_CPU_FEATURES``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["cos", "erf", "exp", "expm1", "log", "pow", "sin", "tanh"]

_F64 = np.float64

# -- exp (fdlibm e_exp.c) ------------------------------------------------------
_LN2_HI = 6.93147180369123816490e-01  # 0x3fe62e42 fee00000: k·LN2_HI exact for |k| < 2^21
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
_EXP_P = (1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05,
          -1.65339022054652515390e-06, 4.13813679705723846039e-08)
_EXP_OVER = 7.09782712893383973096e02  # above: inf
_EXP_UNDER = -7.45133219101941108420e02  # below: 0

# -- log (fdlibm e_log.c) -------------------------------------------------------
_LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
       2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
       1.479819860511658591e-01)
_SQRT_HALF = 0.7071067811865476

# -- expm1 (fdlibm s_expm1.c) -------------------------------------------------------
_EXPM1_Q = (-3.33333333333331316428e-02, 1.58730158725481460165e-03, -7.93650757867487942473e-05,
            4.00821782732936239552e-06, -2.01099218183624371326e-07)

# -- erf (fdlibm s_erf.c) -------------------------------------------------------------
_ERX = 8.45062911510467529297e-01
_EFX = 1.28379167095512586316e-01
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
       1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
       1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e01,
       -6.23753324503260060396e01, -1.62396669462573470355e02, -1.84605092906711035994e02,
       -8.12874355063065934246e01, -9.81432934416914548592e00)
_SA = (1.96512716674392571292e01, 1.37657754143519042600e02, 4.34565877475229228821e02,
       6.45387271733267880336e02, 4.29008140027567833386e02, 1.08635005541779435134e02,
       6.57024977031928170135e00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e01,
       -1.60636384855821916062e02, -6.37566443368389627722e02, -1.02509513161107724954e03,
       -4.83519191608651397019e02)
_SB = (3.03380607434824582924e01, 3.25792512996573918826e02, 1.53672958608443695994e03,
       3.19985821950859553908e03, 2.55305040643316442583e03, 4.74528541206955367215e02,
       -2.24409524465858183362e01)
_ERF_SPLIT = float(np.uint64(0x4006DB6E00000000).view(_F64))  # fdlibm's 1/0.35, as its high word

# -- sin, cos (fdlibm k_sin.c, k_cos.c, e_rem_pio2.c) ------------------------------------
_S = (-1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04,
      2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10)
_C = (4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05,
      -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11)
_INV_PIO2 = 6.36619772367581382433e-01
_PIO2 = ((1.57079632673412561417e00, 6.07710050650619224932e-11),  # 33 bits of π/2, and the rest
         (6.07710050630396597660e-11, 2.02226624879595063154e-21),  # the next 33 bits, and the rest
         (2.02226624871116645580e-21, 8.47842766036889956997e-32))
#: beyond this |x| the three-step reduction loses bits: exact reduction instead
_MEDIUM = 2.0**19 * (math.pi / 2)

_LOW_WORD = np.uint64(0xFFFFFFFF00000000)


def _f(x: Any) -> np.ndarray:
    return np.array(x, dtype=_F64)  # a fresh array (the callers write into it)


def _poly(x: np.ndarray, coeffs: tuple[float, ...]) -> np.ndarray:
    """c0 + x·(c1 + x·(c2 + ...)) by Horner's rule, one rounding per operation."""
    acc = np.full_like(x, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = c + x * acc
    return acc


def _high_word(x: np.ndarray) -> np.ndarray:
    """x with the low 32 bits of its significand cleared (exact)."""
    return (np.ascontiguousarray(x).view(np.uint64) & _LOW_WORD).view(_F64)


def _scale(y: np.ndarray, k: np.ndarray) -> np.ndarray:
    """y · 2^k, rounded once (``ldexp`` is exact unless the result is subnormal)."""
    return np.ldexp(y, k.astype(np.int32))


def exp(x: Any) -> np.ndarray:
    """e^x (fdlibm ``__ieee754_exp``: x = k ln2 + r, |r| ≤ ln2/2, a rational approximation on r)."""
    x = _f(x)
    with np.errstate(all="ignore"):
        ok = (x <= _EXP_OVER) & (x >= _EXP_UNDER)  # False for NaN
        xs = np.where(ok, x, 0.0)
        k = np.rint(xs * _INV_LN2)
        hi = xs - k * _LN2_HI  # exact
        lo = k * _LN2_LO
        r = hi - lo
        rr = r * r
        c = r - rr * _poly(rr, _EXP_P)
        y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
        out = _scale(y, k)
        out = np.where(ok, out, np.where(x > _EXP_OVER, np.inf, 0.0))
        return np.where(np.isnan(x), x, out)


def _log_parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For x > 0 finite, fdlibm's pieces of ln x: x = 2^k (1 + f) with √½ ≤ 1 + f < √2 (f exact),
    and log(1 + f) = f − (f²/2 − s(f²/2 + R(s²))), s = f/(2 + f). Returns (k, f, f²/2, s(f²/2 + R))."""
    m, e = np.frexp(x)  # x = m 2^e, ½ ≤ m < 1: exact, subnormals included
    low = m < _SQRT_HALF
    m = np.where(low, m * 2.0, m)  # exact
    k = (e - low).astype(_F64)
    f = m - 1.0  # exact (Sterbenz)
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    R = z * _poly(w, _LG[0::2]) + w * _poly(w, _LG[1::2])
    hfsq = 0.5 * f * f
    return k, f, hfsq, s * (hfsq + R)


def log(x: Any) -> np.ndarray:
    """ln x (fdlibm ``__ieee754_log``: k ln2_hi − ((f²/2 − (s(f²/2 + R) + k ln2_lo)) − f))."""
    x = _f(x)
    with np.errstate(all="ignore"):
        ok = (x > 0) & (x < np.inf)
        k, f, hfsq, sR = _log_parts(np.where(ok, x, 1.0))
        out = k * _LN2_HI - ((hfsq - (sR + k * _LN2_LO)) - f)
        special = np.where(x == 0, -np.inf, np.where(x == np.inf, np.inf, np.nan))
        return np.where(ok, out, special)


def expm1(x: Any) -> np.ndarray:
    """e^x − 1 (fdlibm ``expm1``), accurate near 0; used by ``tanh``."""
    x = _f(x)
    with np.errstate(all="ignore"):
        big = x > _EXP_OVER
        neg_big = x < -56.0 * _LN2_HI  # e^x − 1 rounds to −1
        ok = ~(big | neg_big | np.isnan(x))
        xs = np.where(ok, x, 0.0)
        reduce = np.abs(xs) > 0.5 * 6.93147180559945286227e-01
        k = np.where(reduce, np.rint(xs * _INV_LN2), 0.0)
        hi = xs - k * _LN2_HI
        lo = k * _LN2_LO
        r = np.where(reduce, hi - lo, xs)
        c = np.where(reduce, (hi - r) - lo, 0.0)
        hfx = 0.5 * r
        hxs = r * hfx
        r1 = 1.0 + hxs * _poly(hxs, _EXPM1_Q)
        t = 3.0 - r1 * hfx
        e = hxs * ((r1 - t) / (6.0 - r * t))
        small = r - (r * e - hxs)  # k = 0
        e = (r * (e - c) - c) - hxs
        k_m1 = 0.5 * (r - e) - 0.5
        k_1 = np.where(r < -0.25, -2.0 * (e - (r + 0.5)), 1.0 + 2.0 * (r - e))
        ki = k.astype(np.int32)
        wide = _scale(1.0 - (e - r), k) - 1.0  # k ≤ −2 or k > 56
        kc = np.clip(ki, 0, 1023)
        mid_low = _scale((1.0 - np.ldexp(1.0, -kc)) - (e - r), k)  # 2 ≤ k < 20
        mid_high = _scale((r - (e + np.ldexp(1.0, -kc))) + 1.0, k)  # 20 ≤ k ≤ 56
        out = np.select([k == 0, k == -1, k == 1, (k <= -2) | (k > 56), k < 20],
                        [small, k_m1, k_1, wide, mid_low], mid_high)
        out = np.where(ok, out, np.where(big, np.inf, np.where(neg_big, -1.0, x)))
        return out


_TANH_SERIES_BELOW = 0.55


def _tanh_series() -> tuple[float, ...]:
    """c_n of tanh x = x + x³ Σ c_n x^(2n) (c_n = 2^(2m)(2^(2m) − 1) B_(2m)/(2m)!, m = n + 2),
    exact in rational arithmetic and rounded once each: the same on every machine. At
    |x| < 0.55 the terms fall by a factor ≤ 0.12 each, so 18 reach 2^-60 of x."""
    from fractions import Fraction

    bern = [Fraction(1)]  # B_0..B_40 by the classical recurrence, exactly
    for m in range(1, 41):
        bern.append(-sum((math.comb(m + 1, j) * bern[j] for j in range(m)), Fraction(0)) / (m + 1))
    return tuple(float(2 ** (2 * m) * (2 ** (2 * m) - 1) * bern[2 * m] / math.factorial(2 * m))
                 for m in range(2, 20))


_TANH_C = _tanh_series()


def tanh(x: Any) -> np.ndarray:
    """tanh x: x + x³ P(x²) (its Taylor series, every coefficient correctly rounded) below 0.55;
    above, fdlibm's 1 − 2/(expm1(2|x|) + 2), and ±1 from 22 on."""
    x = _f(x)
    with np.errstate(all="ignore"):
        a = np.abs(x)
        z = a * a
        series = a + (a * z) * _poly(z, _TANH_C)
        t = expm1(2.0 * np.minimum(a, 22.0))
        z = np.where(a < _TANH_SERIES_BELOW, series, 1.0 - 2.0 / (t + 2.0))
        z = np.where(a >= 22.0, 1.0, z)
        out = np.copysign(z, x)
        return np.where(np.isnan(x), x, out)


def erf(x: Any) -> np.ndarray:
    """erf x (fdlibm ``erf``: rational approximations on [0, 0.84375), [0.84375, 1.25),
    [1.25, 1/0.35), [1/0.35, 6), then ±1)."""
    x = _f(x)
    with np.errstate(all="ignore"):
        a = np.abs(x)
        # |x| < 0.84375: x + x·P(x²)/Q(x²)
        z = x * x
        y = _poly(z, _PP) / (1.0 + z * _poly(z, _QQ))
        near0 = np.where(a < 2.0**-28, x + _EFX * x, x + x * y)
        # 0.84375 ≤ |x| < 1.25: erx + P(s)/Q(s), s = |x| − 1
        s = a - 1.0
        near1 = _ERX + _poly(s, _PA) / (1.0 + s * _poly(s, _QA))
        # 1.25 ≤ |x| < 6: 1 − exp(−z² − 0.5625) exp((z − a)(z + a) + R/S)/a, z = a to 21 bits
        a_tail = np.where((a >= 1.25) & (a < 6.0), a, 2.0)
        w = 1.0 / (a_tail * a_tail)
        first = a_tail < _ERF_SPLIT
        R = np.where(first, _poly(w, _RA), _poly(w, _RB))
        S = 1.0 + w * np.where(first, _poly(w, _SA), _poly(w, _SB))
        zt = _high_word(a_tail)
        r = exp(-zt * zt - 0.5625) * exp((zt - a_tail) * (zt + a_tail) + R / S)
        tail = 1.0 - r / a_tail
        mag = np.select([a < 1.25, a < 6.0], [near1, tail], 1.0)
        out = np.where(a < 0.84375, near0, np.copysign(mag, x))
        return np.where(np.isnan(x), x, out)


def _reduce(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x − n π/2 = y0 + y1 with |y0 + y1| ≤ π/4 (fdlibm's medium-size reduction, all three steps),
    for |x| ≤ ``_MEDIUM``; returns (n mod 4, y0, y1)."""
    t = np.abs(x)
    n = np.floor(t * _INV_PIO2 + 0.5)
    n = np.where(t <= math.pi / 4, 0.0, n)
    (p1, p1t), (p2, p2t), (p3, p3t) = _PIO2
    r = t - n * p1  # exact: n < 2^20 and p1 has 33 bits
    w = n * p1t
    for p, pt in ((p2, p2t), (p3, p3t)):
        t0 = r
        w = n * p
        r = t0 - w
        w = n * pt - ((t0 - r) - w)
    y0 = r - w
    y1 = (r - y0) - w
    small = n == 0  # |x| ≤ π/4: no reduction (keeps the sign of −0)
    y0 = np.where(small, t, y0)
    y1 = np.where(small, 0.0, y1)
    neg = np.signbit(x)
    y0 = np.where(neg, -y0, y0)
    y1 = np.where(neg, -y1, y1)
    q = np.mod(np.where(neg, -n, n), 4.0)
    return q, y0, y1


def _k_sin(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    z = x * x
    v = z * x
    r = _poly(z, _S[1:])
    return x - ((z * (0.5 * y - v * r) - y) - v * _S[0])


def _k_cos(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    z = x * x
    r = z * _poly(z, _C)
    a = np.abs(x)
    qx = np.where(a > 0.78125, 0.28125, _high_word(a) * 0.25)  # |x|/4 to 21 bits: 1 − qx is exact
    near = 1.0 - (0.5 * z - (z * r - x * y))
    far = (1.0 - qx) - ((0.5 * z - qx) - (z * r - x * y))
    return np.where(a < 0.3, near, far)


def _exact_reduce(v: float) -> tuple[float, float, float]:
    """(n mod 4, y0, y1) for a huge |v|: v − n π/2 with π to enough digits (mpmath, pure Python)."""
    import mpmath

    ctx = mpmath.MPContext()
    ctx.prec = 160 + max(0, math.frexp(v)[1])
    half_pi = ctx.pi / 2
    n = ctx.nint(ctx.mpf(v) / half_pi)
    rest = ctx.mpf(v) - n * half_pi
    y0 = float(rest)
    return float(int(n) % 4), y0, float(rest - y0)


def _sincos(x: Any, shift: int) -> np.ndarray:
    x = _f(x)
    with np.errstate(all="ignore"):
        finite = np.isfinite(x)
        medium = np.abs(x) <= _MEDIUM
        q, y0, y1 = _reduce(np.where(medium & finite, x, 0.0))
        huge = np.flatnonzero(finite & ~medium)
        if huge.size:  # never from the spec's sinusoids: exact reduction, element by element
            flat_q, flat_0, flat_1 = q.reshape(-1), y0.reshape(-1), y1.reshape(-1)
            for i in huge:
                flat_q[i], flat_0[i], flat_1[i] = _exact_reduce(float(x.reshape(-1)[i]))
        q = np.mod(q + shift, 4.0)  # cos x = sin(x + π/2)
        s, c = _k_sin(y0, y1), _k_cos(y0, y1)
        out = np.select([q == 0, q == 1, q == 2], [s, c, -s], -c)
        return np.where(finite, out, np.nan)


def sin(x: Any) -> np.ndarray:
    """sin x (fdlibm: x = n π/2 + y, then the kernel sine or cosine of y by n mod 4)."""
    return _sincos(x, 0)


def cos(x: Any) -> np.ndarray:
    """cos x (fdlibm: x = n π/2 + y, then the kernel cosine or sine of y by n mod 4)."""
    return _sincos(x, 1)


def _two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a·b = p + e exactly (Dekker 1971, Veltkamp's split: no fused multiply-add needed)."""
    p = a * b
    ca, cb = 134217729.0 * a, 134217729.0 * b
    ah, bh = ca - (ca - a), cb - (cb - b)
    al, bl = a - ah, b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a + b = s + e exactly (Knuth's TwoSum)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def pow(base: Any, exponent: Any) -> np.ndarray:
    """b^e = exp(e · ln|b|), with ln|b| = k ln2_hi + (f − f²/2) + (s(f²/2 + R) + k ln2_lo) carried in
    three doubles (fdlibm's pieces; f²/2 and f − f²/2 exact by ``_two_prod`` and ``_two_sum``) and
    the product with e exact, so that the error stays near exp's own (about 1 ulp + 0.05|e| ulp).

    A zero, negative, infinite or NaN base or exponent takes C99's special values (Annex F; exact
    results, see ``_special_pow``); a negative base with an integer exponent the sign of (−1)^e."""
    b, e = np.broadcast_arrays(_f(base), _f(exponent))
    b, e = np.array(b), np.array(e)
    with np.errstate(all="ignore"):
        a = np.abs(b)
        integer = np.floor(e) == e
        ok = (a > 0) & (a < np.inf) & (np.abs(e) < 2.0**900) & ((b > 0) | integer)
        aa = np.where(ok, a, 2.0)
        ee = np.where(ok, e, 1.0)
        k, f, _, sR = _log_parts(aa)
        h1, h2 = _two_prod(f, f)
        l1, l1e = _two_sum(f, -0.5 * h1)  # halving is exact
        lo = ((l1e - 0.5 * h2) + sR) + k * _LN2_LO
        p1, e1 = _two_prod(ee, k * _LN2_HI)  # k ln2_hi exact
        p2, e2 = _two_prod(ee, l1)
        s, es = _two_sum(p1, p2)
        tail = ((es + e1) + e2) + ee * lo
        y = s + tail
        y_lo = (s - y) + tail
        ey = exp(y)
        mag = np.where(aa == 1.0, 1.0, ey + ey * y_lo)
        odd = integer & (np.mod(np.abs(ee), 2.0) == 1.0)
        out = np.where((b < 0) & odd, -mag, mag)
        bad = np.flatnonzero(~ok)
        if bad.size:
            flat, fb, fe = out.reshape(-1), b.reshape(-1), e.reshape(-1)
            for i in bad:
                flat[i] = _special_pow(float(fb[i]), float(fe[i]))
        return out


def _special_pow(b: float, e: float) -> float:
    """C99 Annex F's pow for a zero, negative, infinite or NaN argument, or |e| ≥ 2^900."""
    if e == 0 or b == 1:
        return 1.0
    if math.isnan(b) or math.isnan(e):
        return math.nan
    odd = math.isfinite(e) and e == math.floor(e) and math.fmod(e, 2.0) != 0
    if b == 0:
        return math.copysign(0.0 if e > 0 else math.inf, b if odd else 1.0)
    if math.isinf(e):
        if abs(b) == 1:
            return 1.0
        return math.inf if (abs(b) > 1) == (e > 0) else 0.0
    if math.isinf(b):
        return math.copysign(math.inf if e > 0 else 0.0, b if odd else 1.0)
    if b < 0 and e != math.floor(e):
        return math.nan
    # a finite base and |e| ≥ 2^900 (an even integer): overflow or underflow, or 1
    a = abs(b)
    if a == 1:
        return 1.0
    return math.inf if (a > 1) == (e > 0) else 0.0
