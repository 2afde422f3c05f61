"""The HTML report (conformance/session/html_report.py, ``--html``).

Parsed with html.parser: every cell of the JSON is a row of the cells table, every failure's
message and reproducer is on the page, each algorithm with recorded examples has its inline SVG,
and nothing refers outside the file (no script, no stylesheet or image from an address: every
href is a fragment). The plots draw the report's ratios: checked on the figures themselves.
"""

from __future__ import annotations

import math
import sys
from html.parser import HTMLParser

import pytest

from ftspec.conformance.session import html_report
from ftspec.conformance.session.errors import SessionError

from .report_samples import DIVERGENCE, failures, sample_report


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.svgs = 0
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "svg":
            self.svgs += 1
        elif tag == "tr":
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    page.close()
    return page


def assert_html_holds(report: dict, text: str) -> None:
    """Every cell a row, every failure's message and reproducer on the page, nothing fetched."""
    page = parse(text)
    words = " ".join(page.text)
    rows = [r for r in page.rows if len(r) == 7]
    cells = report.get("cells") or report.get("results")
    for cell in cells:
        want = [cell["algorithm"], cell["implementation"], cell["dtype"], cell["device"]]
        assert any(r[:4] == want and r[4].startswith(cell["status"]) and r[5] == str(cell["examples"])
                   for r in rows), want
    assert len(rows) == len(cells)
    for failure in failures(report):
        assert failure["message"] in words, failure["message"]
        assert failure["reproducer"] in words, failure["reproducer"]
    plotted = {c["algorithm"] for c in cells if c.get("ratios")}
    assert page.svgs >= len(plotted) and plotted
    assert "<script" not in text.lower() and "http" not in text.lower() and "@import" not in text
    for tag, attrs in page.tags:
        assert tag not in ("link", "img", "iframe", "object", "embed"), tag
        for name in ("href", "src", "xlink:href"):
            assert attrs.get(name) is None or attrs[name].startswith("#"), (tag, attrs)


def test_every_cell_and_failure_of_a_report_is_on_the_page(tmp_path):
    report = sample_report()
    text = html_report.write_html(report, tmp_path / "out" / "run.html").read_text(encoding="utf-8")
    assert_html_holds(report, text)
    page = parse(text)
    words = " ".join(page.text)
    assert "non-conformant" in words and report["reasons"][0] in words
    assert 'class="verdict non-conformant"' in text  # the page's own style colours it
    assert "first divergence: layer 1, norm" in words  # the walk's first departing piece, named
    assert "fewer than 5" in words  # the cell short of the minimum says it is inconclusive
    assert "raised ValueError" in words and "failed to load" in words
    assert "d_transformer-paper" in words  # the failing fixture replay
    # one figure per algorithm with recorded examples, one for the divergence walk
    assert page.svgs == len({c["algorithm"] for c in report["cells"] if c["ratios"]}) + 1


def test_the_plots_draw_each_cell_s_ratios(monkeypatch):
    """A line per cell through its recorded error/bound per example; the walk's checks as bars."""
    figures = []
    real = html_report._svg
    monkeypatch.setattr(html_report, "_svg", lambda fig: (figures.append(fig), real(fig))[1])
    report = sample_report()
    html_report.render_html(report)
    drawn = {}
    for fig in figures:
        for ax in fig.axes:
            for line in ax.get_lines():
                if line.get_label().startswith("_"):  # the bound's line and markers
                    continue
                drawn[(fig.get_suptitle(), ax.get_title(), line.get_label())] = list(line.get_ydata())
    for cell in report["cells"]:
        if not cell["ratios"]:
            continue
        ys = drawn[(cell["algorithm"], cell["dtype"], f"{cell['implementation']}@{cell['device']}")]
        want = [float(r) for r in cell["ratios"]]
        assert [y for y in ys if not math.isnan(y)] == [w for w in want if math.isfinite(w)]
    bars = [fig for fig in figures if any(ax.patches for ax in fig.axes)]
    assert len(bars) == 1
    heights = [p.get_height() for p in bars[0].axes[0].patches]
    assert heights[:3] == [c["ratio"] for c in DIVERGENCE["checks"][:3]]
    assert heights[3] > max(heights[:3])  # the infinite one drawn above every finite one
    colours = [p.get_facecolor() for p in bars[0].axes[0].patches]
    assert colours[0] == colours[1] != colours[2] == colours[3]  # passing and departing told apart


def test_without_matplotlib_one_line_and_nothing_runs(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(SessionError, match=r"^--html needs matplotlib .*ftspec\[report\]'$"):
        html_report.require_matplotlib()
    from ftspec.tools.cli import main

    called = []
    monkeypatch.setattr("ftspec.conformance.session.commands.run", lambda *a, **k: called.append(a))
    assert main(["run", "--impl", "numpy", "--html", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "matplotlib" in err and not called
