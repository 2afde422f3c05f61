"""Checks that only the JAX plugin needs: devices, jit, differentiability, global config."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[2]

# Runs in a fresh interpreter: XLA_FLAGS must be set before jax is first imported.
_TWO_DEVICES = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    import numpy as np
    from ftspec.impls.discovery import load
    from ftspec.conformance.core.calling import to_native
    from ftspec.impls.api import Context
    from ftspec.spec import PAPER
    from ftspec.spec.registry import REGISTRY
    from tests.impls.cases import make_case

    impl = load("jax")
    names = impl.devices()
    assert [n for n in names if ":" in n] == ["cpu:0", "cpu:1"], names

    import jax
    cpus = jax.devices("cpu")
    x = impl.from_numpy(np.arange(3.0), "float32", "cpu:1")
    assert x.devices() == {{cpus[1]}}, x.devices()

    variant = PAPER.replace(positions="sinusoidal_vaswani", empty_query="zeros")
    for name, batched in (("mh_attention", True), ("ed_transformer", False), ("unidirectional_mask", False)):
        entry = REGISTRY[name]
        case = make_case(entry, variant, empty_query=(name == "mh_attention"))
        inputs = {{k: np.stack([v, v]) for k, v in case.inputs.items()}} if batched else case.inputs
        results = {{}}
        for i, dev in enumerate(("cpu:0", "cpu:1")):
            out = impl.algorithms[name](
                to_native(impl, entry, inputs, "float64", dev),
                to_native(impl, entry, case.params, "float64", dev, params=True),
                Context(name, "float64", dev, case.hyper, variant, batched))
            out = out if isinstance(out, dict) else {{entry.outputs[0].name: out}}
            for k, v in out.items():  # the result lives on the requested device
                assert v.devices() == {{cpus[i]}}, (name, k, dev, v.devices())
            results[dev] = {{k: impl.to_numpy(v) for k, v in out.items()}}
        for k, v in results["cpu:0"].items():
            np.testing.assert_array_equal(results["cpu:1"][k], v, err_msg=f"{{name}} {{k}}")
    print("OK", names)
    """
)


def test_two_host_devices_give_identical_results():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, "-c", _TWO_DEVICES.format(root=str(ROOT))], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK ['cpu:0', 'cpu:1']" in proc.stdout, proc.stdout  # each device once


def test_plugin_sets_x64_and_highest_precision():
    from ftspec.impls.discovery import load

    impl = load("jax")
    import jax

    assert jax.config.jax_enable_x64
    assert jax.config.jax_default_matmul_precision == "highest"
    assert impl.precision == "highest"
    x = impl.from_numpy(np.array([1, 2], dtype=np.int64), "int64", "cpu")
    assert str(x.dtype) == "int64"
    b = impl.from_numpy(np.array([1.0, 2.5]), "bfloat16", "cpu")
    assert str(b.dtype) == "bfloat16" and impl.to_numpy(b).dtype == np.float32


@pytest.mark.parametrize("name", ["mh_attention", "decoder_layer", "e_transformer", "ed_transformer"])
def test_jit_equals_eager(name):
    """The jitted default and the eager path (FTSPEC_JAX_JIT=0) compute the same thing."""
    from ftspec.impls.discovery import load
    from ftspec.impls.jax import boundary
    from ftspec.spec import PAPER
    from ftspec.spec.registry import REGISTRY

    from .cases import make_case

    impl = load("jax")
    entry = REGISTRY[name]
    case = make_case(entry, PAPER.replace(norm_placement="pre", empty_query="uniform"), empty_query=True)
    cfg = boundary.Config(tuple(sorted(case.hyper.items())), case.variant, "float64")
    inputs = {k: impl.from_numpy(v, str(v.dtype) if v.dtype != np.float64 else "float64", "cpu")
              for k, v in case.inputs.items()}
    params = {k: impl.from_numpy(v, "float64", "cpu") for k, v in case.params.items()}
    for batched in (False, True):
        ins = {k: np.stack([v, v]) for k, v in inputs.items()} if batched else inputs
        eager = boundary.runner(name, cfg, batched, use_jit=False)(ins, params)
        jitted = boundary.runner(name, cfg, batched, use_jit=True)(ins, params)
        for k in eager:
            np.testing.assert_allclose(np.asarray(jitted[k]), np.asarray(eager[k]), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name,variant", [
    ("d_transformer", {}),
    ("ed_transformer", {"norm_placement": "pre", "final_norm": "final", "unembedding": "tied"}),
    ("mh_attention", {"empty_query": "zeros"}),
    ("mh_attention", {"empty_query": "uniform"}),
])
def test_gradients_are_finite(name, variant):
    """jax.grad through the boundary (flat names in, flat names out); an empty query under
    zeros/uniform must not poison the gradient with 0/0."""
    import jax
    import jax.numpy as jnp

    from ftspec.impls.discovery import load
    from ftspec.impls.jax import boundary
    from ftspec.spec import PAPER
    from ftspec.spec.registry import REGISTRY

    from .cases import make_case

    load("jax")  # the plugin turns on float64
    entry = REGISTRY[name]
    v = PAPER.replace(**variant)
    case = make_case(entry, v, empty_query="Mask" in case_inputs(entry))
    cfg = boundary.Config(tuple(sorted(case.hyper.items())), v, "float64")
    params = {k: jnp.asarray(p) for k, p in case.params.items()}

    def loss(params):
        out = boundary.run(name, case.inputs, params, cfg, batched=False)
        return sum(jnp.sum(jnp.log(o) if name.endswith("transformer") else o ** 2) for o in out.values())

    grads = jax.jit(jax.grad(loss))(params)
    assert set(grads) == set(params)
    for k, g in grads.items():
        assert np.all(np.isfinite(np.asarray(g))), k
    assert any(np.any(np.asarray(g) != 0) for g in grads.values())


def case_inputs(entry):
    return {s.name for s in entry.inputs}


_MAPPING_BUDGET = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    import jax.numpy as jnp
    from ftspec.impls.jax import boundary

    before = boundary.memory_mappings()
    boundary.MAX_MAPPINGS = before + 300
    peak = 0
    for i in range(60):  # 60 functions, 4 shapes each: ~1,500 mappings held without a budget
        fn = boundary.jitted(("budget-test", i), lambda: (lambda x: jnp.tanh(x @ x.T)))
        for n in range(1, 5):
            fn(jnp.ones((2, n))).block_until_ready()
        peak = max(peak, boundary.memory_mappings())
    print("before", before, "peak", peak, "cached", len(boundary._jitted))
    # between checks (every 8 calls) at most 8 functions' executables are added
    assert peak - before < 300 + 8 * 4 * 12, (before, peak)
    assert len(boundary._jitted) < 60
    """
)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="counts memory mappings in /proc (Linux)")
def test_memory_mappings_are_bounded():
    """The jit cache drops its oldest functions while the process holds more than MAX_MAPPINGS
    memory mappings, and their executables' mappings go with them (past vm.max_map_count,
    XLA's next compile aborts the process)."""
    code = _MAPPING_BUDGET.format(root=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "FTSPEC_JAX_JIT": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
