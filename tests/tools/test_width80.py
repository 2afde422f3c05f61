"""What a newcomer reads at 80 columns (issue 22): no table cuts a name.

rich fitted tables to the terminal by cutting cells: ``ftspec list`` showed the variant set as
"phuong-hu…" and missing algorithms as "token_embe…", and the run summary "d_inferen…" and
"ed_infere…", so two rows could read the same. Each table is rendered here at 80 columns with the
longest names the project has (every registry entry, the longest bundled plugin names, variant sets,
versions and fixture ids); every name must appear whole, as one token, and no line may pass 80
characters. The same tables at 200 columns keep their one-row-per-cell layout.
"""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

import ftspec.tools.console as console_module
from ftspec.conformance.running.fixture_replay import FixtureResult
from ftspec.conformance.running.runner import Cell, Failure, RunResult
from ftspec.spec.registry import REGISTRY
from ftspec.tools.cli import main
from ftspec.tools.cmd_list import listing_view
from ftspec.tools.console import summary_table
from ftspec.tools.console_fixtures import fixture_table

WIDTH = 80
IMPLS = ("numpy", "jax", "torch-nn-layers-fast-pre", "transformers-bert-sdpa")
DEVICES = {"numpy": "cpu", "jax": "cpu:0", "torch-nn-layers-fast-pre": "cuda:0", "transformers-bert-sdpa": "cpu"}
DTYPES = ("float64", "bfloat16")
VARIANT = ("phuong-hutter+activation=relu,empty_query=zeros,epsilon=1e-05,epsilon_placement=inside_root,"
           "norm_placement=pre,scale_placement=query")
VERSION = "transformers5.24.0+torch2.13.0+cpu"


def narrow(width: int = WIDTH) -> Console:
    return Console(width=width, record=True, color_system=None, emoji=False, highlight=False, file=io.StringIO())


def render(renderable, width: int = WIDTH) -> str:
    out = narrow(width)
    out.print(renderable)
    return out.export_text()


def tokens(text: str) -> set[str]:
    """Every name-like run of characters: a name cut ("d_inferen…") or folded over two lines is
    not among them."""
    return set(re.findall(r"[\w.:+=-]+", text))


def assert_whole(text: str, names, width: int = WIDTH) -> None:
    missing = sorted(set(names) - tokens(text))
    assert not missing, f"cut or missing: {missing}\n{text}"
    assert "…" not in text, text
    long = [line for line in text.splitlines() if len(line) > width]
    assert not long, f"{len(long)} lines over {width} characters, e.g. {long[0]!r}"


def _result() -> RunResult:
    cells = [Cell(a, impl, dtype, DEVICES[impl], status="pass", examples=100, worst_ratio=0.1)
             for a in REGISTRY for impl in IMPLS[:2] for dtype in DTYPES]
    cells += [Cell(a, impl, "float32", DEVICES[impl], status="pass", examples=7, worst_ratio=0.2)
              for a in ("basic_single_query_attention", "encoder_layer") for impl in IMPLS[2:]]
    cells.append(Cell("d_inference", IMPLS[2], "float16", "cuda:0", status="fail", examples=3, worst_ratio=2e12,
                      failure=Failure("determinism", "m", None, None, "r", "report")))
    cells.append(Cell("ed_inference", IMPLS[3], "float16", "cpu", status="not implemented"))
    return RunResult(cells=cells, profile="default", seed=0, seconds=1.0, minimum=50)


def test_the_run_summary_cuts_no_name():
    text = render(summary_table(_result()))
    assert_whole(text, [*REGISTRY, *IMPLS, *DTYPES, "float32", "float16", *DEVICES.values(), "determinism"])
    assert "transformers-bert-sdpa does not implement ed_inference" in " ".join(text.split())


def test_the_run_summary_keeps_one_row_per_cell_where_it_fits():
    lines = render(summary_table(_result()), width=200).splitlines()
    assert any("basic_single_query_attention" in line and "torch-nn-layers-fast-pre" in line and "float32" in line
               for line in lines)


def _fixture_results() -> list[FixtureResult]:
    ids = sorted((f"{a}--switch-scale_placement-query_key_sqrt" for a in REGISTRY), key=len)[-8:]
    out = [FixtureResult(i, i.split("--")[0], impl, "float32", DEVICES[impl], False, 3.0, f"spec: off by {n}")
           for n, i in enumerate(ids) for impl in IMPLS[2:]]
    out += [FixtureResult("layer_norm--paper", "layer_norm", "numpy", "float64", "cpu", True, 0.5)]
    return out


def test_the_fixture_table_cuts_no_case_id():
    results = _fixture_results()
    text = render(fixture_table(results))
    shown = [r.case for r in results if not r.ok and r.impl == IMPLS[2]][:6]  # SHOWN per row, then "and N more"
    assert_whole(text, [*IMPLS[2:], "numpy", "float32", "float64", "cuda:0", *shown])
    assert "and 2 more" in text


@pytest.mark.parametrize("labels", [["ftspec_example:implementation"],
                                    ["ftspec_example:implementation", "another_vendor_module:implementation"]])
def test_the_fixture_table_cuts_no_module_object_label(labels):
    """A plugin certified as ``module:object`` is labelled so: the table cut
    "ftspec_example:imple…" at 80 columns (issue 35). The name moves to the title (one plugin) or a
    numbered key below (several); every row keeps its dtype and counts."""
    results = [FixtureResult("layer_norm--paper", "layer_norm", label, dtype, "cpu", True, 0.1)
               for label in labels for dtype in ("float32", "float64")]
    results.append(FixtureResult("rms_norm--edge-constant-column", "rms_norm", labels[-1], "float32", "cpu", False,
                                 2.0, "spec: off"))
    text = render(fixture_table(results))
    assert_whole(text, [*labels, "float32", "float64", "rms_norm--edge-constant-column"])
    assert f"Golden fixtures{'' if len(labels) > 1 else ' of ' + labels[0]}:" in " ".join(text.split())
    if len(labels) > 1:
        assert all(f"impl {i}: {label}" in text for i, label in enumerate(sorted(labels), 1)), text


def _rows(timeout: float = 60.0) -> list[dict]:
    row = {"name": "torch-nn-layers-fast-pre", "loaded": True, "version": VERSION, "devices": ["cpu", "cuda:0"],
           "dtypes": ["float64", "float32", "bfloat16", "float16"], "variants": [VARIANT, "hf-bert"],
           "algorithms": ["encoder_layer", "gpt2_layer"], "missing": [a for a in REGISTRY if a not in
                                                                       ("encoder_layer", "gpt2_layer")],
           "coverage": "2/34", "limits": {"encoder_layer": "d_attn = d_mid, d_e = H*d_attn, H <= 2, H >= 2"}}
    most = dict(row, name="transformers-bert-sdpa", algorithms=list(REGISTRY)[:-2], missing=list(REGISTRY)[-2:],
                coverage="32/34", limits={})
    every = dict(row, name="numpy", variants="all", algorithms=list(REGISTRY), missing=[], coverage="34/34", limits={},
                 mixed_precision=MIXED, dtypes_by_algorithm={"padded_ed_transformer": ["float32", "bfloat16"],
                                                             "rms_norm": ["float32", "bfloat16"]})
    broken = {"name": "broken-plugin", "loaded": False, "error": "ModuleNotFoundError: No module named 'x'",
              "hint": "pip install x"}
    merged = dict(row, name="transformers", algorithms=list(PER_ALGORITHM),
                  missing=[a for a in REGISTRY if a not in PER_ALGORITHM], coverage="5/34", limits={},
                  variants={a: [v] for a, v in PER_ALGORITHM.items()})
    return [row, most, every, broken, merged]


#: a mixed-precision declaration as ``listing`` gives it (``Implementation.mixed_precision``)
MIXED = {"bfloat16": {"accumulate": "float32", "softmax": "float32"},
         "float16": {"accumulate": "float32", "softmax": "float16"}}


def test_the_listing_shows_mixed_precision_and_dtypes_per_algorithm():
    """A plugin's wider accumulation and softmax formats stand by their dtype, and the algorithms
    declared at fewer dtypes are listed with theirs: at 80 columns, nothing cut."""
    text = render(listing_view(_rows()[2:3]))
    flat = " ".join(line.split("│")[3].strip() for line in text.splitlines() if line.count("│") == 4)
    assert "bfloat16 (accumulate float32, softmax float32)" in flat, flat
    assert ", float16 (accumulate float32) " in flat, flat  # its softmax is float16's own: not shown
    assert "padded_ed_transformer, rms_norm: float32, bfloat16" in flat, flat
    assert_whole(text, ["padded_ed_transformer", "rms_norm:", "bfloat16", "float32"])


#: ``ftspec list``'s row of a plugin that declares its variant sets per algorithm (the merged transformers)
PER_ALGORITHM = {"d_transformer": "hf-gpt2", "gpt2_layer": "hf-gpt2", "layer_norm": "hf-gpt2",
                 "e_transformer": "hf-bert", "bert_layer": VARIANT}


def test_the_listing_cuts_no_name():
    text = render(listing_view(_rows()))
    switches = VARIANT.partition("+")[2].split(",")
    assert_whole(text, ["torch-nn-layers-fast-pre", "transformers-bert-sdpa", "numpy", "broken-plugin", VERSION,
                        "cuda:0", "bfloat16", "phuong-hutter", *switches, "hf-bert", "encoder_layer", "gpt2_layer",
                        *list(REGISTRY)[-2:], "transformers", "hf-gpt2", *PER_ALGORITHM])
    assert "failed to load" in text and "pip install x" in text


def test_variant_sets_per_algorithm_read_in_80_columns():
    """The algorithms that share their sets on a line ending in ":", the sets indented below."""
    text = render(listing_view(_rows()[-1:]))
    assert_whole(text, ["transformers", "hf-gpt2", "hf-bert", *PER_ALGORITHM, *VARIANT.partition("+")[2].split(",")])
    cells = [line.split("│")[3].rstrip() for line in text.splitlines() if line.count("│") == 4]
    start = cells.index(" d_transformer, gpt2_layer, layer_norm:")
    assert cells[start:start + 5] == [" d_transformer, gpt2_layer, layer_norm:", "   hf-gpt2", " e_transformer:",
                                      "   hf-bert", " bert_layer:"], cells


def test_ftspec_list_at_80_columns(monkeypatch, capsys):
    """The command itself, with the console it prints to 80 columns wide and a fixed listing."""
    monkeypatch.setattr("ftspec.impls.discovery.listing", _rows)
    out = narrow()
    monkeypatch.setattr(console_module, "console", out)
    assert main(["list", "--long"]) == 1  # one plugin failed to load
    assert_whole(out.export_text(), ["torch-nn-layers-fast-pre", VERSION, "phuong-hutter"])


@pytest.mark.parametrize("argv", [["spec", "algorithms"]])
def test_ftspec_spec_at_80_columns(monkeypatch, argv):
    out = narrow()
    monkeypatch.setattr(console_module, "console", out)
    assert main(argv) == 0
    assert_whole(out.export_text(), REGISTRY)
