"""``ftspec bench libraries``: which plugins it certifies, the table it writes, and that the table
keeps the hand-written parts of docs/libraries.md."""

from __future__ import annotations

from ftspec.conformance.session.commands import Settings, certify
from ftspec.impls.discovery import INDEPENDENT, discover
from ftspec.tools.bench.libraries import BEGIN, END, library_plugins, markdown, write_into


def test_library_plugins_are_the_bundled_ones_that_are_not_independent_implementations():
    names = library_plugins()
    bundled = {n for n, r in discover().items() if r.bundled}
    assert "torch-nn" in names
    assert not set(INDEPENDENT) & set(names)
    assert set(names) == bundled - set(INDEPENDENT)


def _record(plugin: str) -> dict:
    cert = certify(plugin, Settings(profile="quick", algorithms=("rms_norm",), dtypes=("float64",),
                                    examples=3, in_process=True, fixtures="none"))
    return {"plugin": plugin, "seconds": 1.0, "certificate": cert.doc}


def test_the_table_names_version_switches_and_verdict_per_dtype():
    rec = _record("torch-nn-rms-default-f64")
    text = markdown([rec, {"plugin": "flax", "skipped": "not installed (No module named 'flax')"}])
    assert text.startswith(BEGIN) and text.rstrip().endswith(END)
    row = next(line for line in text.splitlines() if line.startswith("| `torch-nn-rms-default-f64` | torch"))
    assert "rms_norm" in row and "float64: pass" in row
    assert "`norm=rms_norm`" in text and "`epsilon_placement=inside_root`" in text
    assert "`epsilon=2.22045e-16`" in text  # finfo(float64).eps, the declared ε
    assert "| `flax` | not run | not installed" in text


def test_a_failure_is_listed_with_its_check_and_reproducer():
    rec = _record("torch-nn-rms-default-f64")
    cell = next(c for c in rec["certificate"]["results"] if c["status"] == "pass")
    cell.update(status="fail", failure={"check": "output", "message": "rms_norm: output differs\nmore",
                                        "reproducer": "ftspec run --replay case.json", "diagnosis": {
                                            "matches": [{"changes": {"epsilon": 1e-05}}]}})
    text = markdown([rec])
    assert "check `output`: rms_norm: output differs" in text
    assert "likely cause: the output matches epsilon=1e-05" in text
    assert "reproduce: `ftspec run --replay case.json`" in text


def test_write_into_replaces_only_the_generated_section(tmp_path):
    doc = tmp_path / "libraries.md"
    doc.write_text(f"# Library plugins\n\nhand-written before\n\n{BEGIN}\nold table\n{END}\n\nhand-written after\n")
    write_into(doc, f"{BEGIN}\nnew table\n{END}\n")
    text = doc.read_text()
    assert "old table" not in text and "new table" in text
    assert text.index("hand-written before") < text.index("new table") < text.index("hand-written after")
    fresh = tmp_path / "none.md"
    fresh.write_text("# Library plugins\n\nprose\n")
    write_into(fresh, f"{BEGIN}\ntable\n{END}\n")
    assert fresh.read_text().endswith(f"{BEGIN}\ntable\n{END}\n") and "prose" in fresh.read_text()


def test_sets_declared_per_algorithm_are_tabulated_per_algorithm():
    """The merged transformers plugin records {algorithm: sets}: the table names the algorithms that
    share theirs before the switches."""
    import json

    from ftspec.spec.variants import preset
    from ftspec.tools.bench.libraries import _switches

    def record(name):
        return [{"name": name, "json": json.loads(preset(name).to_json())}]

    text = _switches({"layer_norm": record("hf-gpt2"), "gpt2_layer": record("hf-gpt2"),
                      "bert_layer": record("hf-bert")})
    gpt2, bert = text.split("; bert_layer: ")
    assert gpt2.startswith("layer_norm, gpt2_layer: ") and "`activation=gelu_tanh`" in gpt2
    assert "`activation=gelu_erf`" in bert and "`epsilon=1e-12`" in bert
    assert _switches("all") == "all"
