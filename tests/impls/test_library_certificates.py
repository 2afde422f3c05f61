"""Every bundled library plugin (torch.nn, Hugging Face transformers, Flax) is certified at the quick
profile, as a user certifies it (``ftspec certify NAME``), and is conformant under the variant set it
declares: the claim docs/libraries.md publishes. A plugin whose library is not installed is skipped
with the install command (``make test`` installs every extra, so none is skipped there)."""

from __future__ import annotations

import pytest

from ftspec.conformance.session import Settings, certify
from ftspec.impls.discovery import discover, load_record
from ftspec.tools.bench.libraries import library_plugins

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", library_plugins())
def test_library_plugin_is_conformant_at_the_quick_profile(name):
    record = load_record(discover()[name])
    if record.impl is None and record.hint and "No module named" in (record.error or ""):
        pytest.skip(f"{name}: library not installed ({record.hint})")
    assert record.impl is not None, f"{name} failed to load: {record.error}"
    cert = certify(name, Settings(profile="quick", jobs=1))
    doc = cert.doc
    bad = [f"{c['algorithm']} {c['dtype']} {c['device']}: {c['status']}"
           + (f" ({c['failure']['message'].splitlines()[0]})" if c.get("failure") else "")
           for c in doc["results"] if c["status"] not in ("pass", "not implemented")]
    assert cert.verdict == "conformant", f"{name}: {cert.verdict}: {doc['reasons']}; {bad}"
    ran = [c for c in doc["results"] if c["status"] == "pass"]
    assert ran and all(int(c["examples"]) >= 10 for c in ran)  # the quick profile's certify minimum
