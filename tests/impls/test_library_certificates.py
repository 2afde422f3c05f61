"""The libraries the README names (torch.nn, Hugging Face transformers, Flax) are certified at the
quick profile through the door a user walks through (``ftspec certify NAME`` in a subprocess), and
each is conformant under the variant set it declares: the claim docs/libraries.md publishes. ``make
test`` certifies torch.nn so; transformers and Flax with ``FTSPEC_ALL_LIBRARIES=1`` (``NAMED``).

Their other plugins (other paths of the same modules: MultiheadAttention's need_weights=True, the
transformer layers' fast path, sdpa attention, ...) are judged in-process by their own test files, a
few small cases each, and certified in full by ``make bench`` (``ftspec bench libraries``): one CLI
certification per plugin would cost minutes of ``make test``. A plugin whose library is not installed
is skipped with the install command (``make test`` installs every extra, so none is skipped there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ftspec.impls.discovery import discover, load_record

pytestmark = pytest.mark.slow

FTSPEC = Path(sys.executable).with_name("ftspec")
#: Flax's CLI certification (40 CPU-seconds: a JAX compile per case) left ``make test`` when spec
#: 2.3.0 pushed it past its budget: Flax is searched through the session in-process by
#: tests/impls/test_flax.py, and certified by ``make bench`` (docs/libraries.md's table);
#: ``FTSPEC_ALL_LIBRARIES=1`` certifies it here too. transformers' (21 s) left it for the same reason
#: at spec 2.6.0 (make test at 13-15 min): its plugins' entries are judged in-process by
#: tests/impls/test_hf.py, test_hf_llama.py and test_hf_families.py, and ``make bench`` certifies them
NAMED = ("torch-nn",) + (("transformers", "flax") if os.environ.get("FTSPEC_ALL_LIBRARIES") else ())


@pytest.mark.parametrize("name", NAMED)
def test_library_plugin_is_conformant_at_the_quick_profile(name, tmp_path):
    record = discover().get(name)
    assert record is not None, f"{name} is not registered (pyproject.toml entry points)"
    load_record(record)
    if record.impl is None and "No module named" in (record.error or ""):
        pytest.skip(f"{name}: library not installed ({record.hint})")
    assert record.impl is not None, f"{name} failed to load: {record.error}"
    out = tmp_path / "cert"
    proc = subprocess.run([str(FTSPEC), "certify", name, "--profile", "quick", "--jobs", "1", "--quiet",
                           "--out", str(out), "--case-dir", str(tmp_path / "cases")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    doc = json.loads((out / "certificate.json").read_text()) if (out / "certificate.json").exists() else {}
    bad = [f"{c['algorithm']} {c['dtype']} {c['device']}: {c['status']}"
           + (f" ({c['failure']['message'].splitlines()[0]})" if c.get("failure") else "")
           for c in doc.get("results", []) if c["status"] not in ("pass", "not implemented")]
    assert proc.returncode == 0 and doc.get("verdict") == "conformant", (
        f"ftspec certify {name} exited {proc.returncode}: {doc.get('verdict')}: {doc.get('reasons')}; {bad}\n"
        f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    impl = record.impl
    cells = {(c["algorithm"], c["dtype"]) for c in doc["results"] if c["status"] == "pass"}
    # every declared cell searched: each algorithm at its own dtypes (``dtypes_by_algorithm``: Llama's
    # entries at float32 and below), and the certificate says which
    assert cells == {(a, d) for a in impl.algorithms for d in impl.dtypes_for(a)}
    assert doc["subject"].get("dtypes_by_algorithm", {}) == {
        a: list(impl.dtypes_for(a)) for a in impl.algorithms if a in impl.dtypes_by_algorithm}
    assert all(int(c["examples"]) >= 10 for c in doc["results"] if c["status"] == "pass")  # certify minimum
    if impl.per_algorithm:  # what was declared, per algorithm (transformers: GPT-2 and BERT)
        assert {a: [v["hash"] for v in sets] for a, sets in doc["variants"].items()} == {
            a: [v.hash for v in sets] for a, sets in impl.declared_variants().items()}
    else:
        assert [v["hash"] for v in doc["variants"]] == [v.hash for v in impl.variants]
