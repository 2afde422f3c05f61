"""The boundary the PyTorch library plugins share (impls/_torch_boundary.py): one home.

``hf`` (transformers) and ``torch_nn`` (torch.nn) cross between the harness's NumPy arrays and
the library's tensors the same way; that crossing is written once, both plugins use it, and the
bundled implementations (numpy, torch, jax) keep their own (they import nothing shared beyond
the contract: tests/test_import_graph.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ftspec.impls import _torch_boundary as boundary  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_every_torch_nn_plugin_crosses_through_the_shared_boundary():
    import ftspec.impls.torch_nn as torch_nn

    plugins = [getattr(torch_nn, n) for n in torch_nn.__all__ if n.startswith("implementation")]
    assert len(plugins) >= 8
    for impl in plugins:
        assert (impl.from_numpy, impl.to_numpy, impl.devices) == (boundary.from_numpy, boundary.to_numpy,
                                                                  boundary.devices), impl.name


def test_every_transformers_plugin_crosses_through_the_shared_boundary():
    pytest.importorskip("transformers")
    import ftspec.impls.hf as hf

    from importlib.metadata import entry_points

    plugins = [getattr(hf, n) for n in hf.__all__ if n.startswith("implementation")]
    registered = [ep for ep in entry_points(group="ftspec.impls") if ep.value.startswith("ftspec.impls.hf:")]
    # every plugin the package offers is registered, and the other way round (none left out of the check)
    assert sorted(ep.value.split(":")[1] for ep in registered) == sorted(
        n for n in hf.__all__ if n.startswith("implementation")) and len(plugins) >= 4
    for impl in plugins:
        assert (impl.from_numpy, impl.to_numpy, impl.devices) == (boundary.from_numpy, boundary.to_numpy,
                                                                  boundary.devices), impl.name


def test_no_plugin_keeps_its_own_copy_of_the_crossing():
    """The two library plugins define none of the boundary's functions again (the copy this module
    replaced), and no bundled implementation imports the shared one."""
    for name in ("hf", "torch_nn"):
        for path in sorted((ROOT / "impls" / name).rglob("*.py")):
            defined = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
            assert not defined & {"from_numpy", "to_numpy", "devices"}, path
    for name in ("numpy", "torch", "jax"):
        for path in sorted((ROOT / "impls" / name).rglob("*.py")):
            assert "_torch_boundary" not in path.read_text(), path


@pytest.mark.parametrize("dtype", sorted(boundary.DTYPES))
def test_values_cross_both_ways_unchanged(dtype):
    # values every dtype holds exactly (small integers, halves), so the round trip must be exact
    values = np.array([[0, 1], [1, 0]], dtype=bool) if dtype == "bool" else np.array([[0.5, -2.0], [3.0, 1.0]])
    if dtype == "int64":
        values = values.astype(np.int64)
    t = boundary.from_numpy(values, dtype, "cpu")
    assert t.dtype == boundary.DTYPES[dtype] and t.device.type == "cpu"
    back = boundary.to_numpy(t)
    np.testing.assert_array_equal(back, values)
    assert back.dtype == (np.float32 if dtype == "bfloat16" else values.dtype if dtype in ("bool", "int64")
                          else np.dtype(dtype))


def test_from_numpy_copies_and_refuses_an_unknown_dtype():
    values = np.array([1.0, 2.0])
    t = boundary.from_numpy(values, "float64", "cpu")
    values[0] = 9.0  # the tensor is a fresh copy: the harness may reuse its arrays
    assert t[0].item() == 1.0
    with pytest.raises(ValueError, match="unknown dtype 'float8'"):
        boundary.from_numpy(values, "float8", "cpu")
