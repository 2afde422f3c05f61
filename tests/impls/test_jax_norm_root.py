"""The JAX plugin's norms divide by a square root, as written, not by XLA's rsqrt: the compiled
float32 RMSnorm and LayerNorm hold a ``sqrt`` and a ``divide`` and no ``rsqrt``.

XLA's simplifier rewrites x / sqrt(v) as x · rsqrt(v), whose float32 CPU kernel is a few ulps off where
sqrt and the division are each correctly rounded; behind a norm of a sublayer's output alone (Gemma 2's
sandwich, res_post) at d_e = 1 a cancelling residual sum magnified that past the derived bound
(default float32 searches of d_transformer under gemma+norm_placement=res_post and =sandwich, seeds 0
and 4: up to 7 times the bound). ``components._root`` keeps the square root behind an optimisation
barrier; without it this test fails (the rewrite is XLA's default).
"""

from __future__ import annotations

import pytest

from ftspec.spec.variants import PAPER

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


@pytest.mark.parametrize("norm,placement", [("rms_norm", "inside_root"), ("layer_norm", "inside_root"),
                                            ("rms_norm", "none")])
def test_the_compiled_norm_divides_by_a_square_root(norm, placement):
    from ftspec.impls.jax.components import norm as jax_norm

    v = PAPER.replace(norm=norm, epsilon=1e-6 if placement != "none" else 0.0, epsilon_placement=placement)
    X = jnp.ones((3, 4), dtype=jnp.float32)
    hlo = jax.jit(lambda x: jax_norm(x, None, v)).lower(X).compile().as_text()
    ops = {line.split("=", 1)[1].split("(", 1)[0].split()[-1] for line in hlo.splitlines() if " = " in line}
    assert "sqrt" in ops and "divide" in ops and "rsqrt" not in ops, sorted(ops)
