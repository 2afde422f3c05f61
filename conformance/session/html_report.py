"""A run report or a certificate as one self-contained HTML page, with plots.

``write_html(report, path)`` takes the JSON-able form ``ftspec run
--json-report`` writes (``ftspec-report/1``) or a certificate
(``ftspec-certificate/2``) and writes one file that needs nothing else: no
script, no stylesheet or font from elsewhere, the plots inline SVG drawn by
matplotlib (the ``report`` extra; imported only here, and only when a page
is made). The page holds the verdict and why, a table of every cell
(examples, worst error/bound), per algorithm a plot of error/bound over the
examples of each cell (the first ``RATIOS_KEPT`` examples a cell recorded,
``ratios`` in the report), every failure with its message, reproducer, case
file and diagnosis, and, for a model or layer whose failure was walked
(forensics/divergence/), the checks along its pieces drawn in order with
the first divergence named. docs/reports.md, "HTML report", says what each
part is read from.
"""

from __future__ import annotations

import html
import io
import math
import re
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from .errors import SessionError
from .junit import report_view
from ..core.status import Status

__all__ = ["render_html", "require_matplotlib", "write_html"]

#: error/bound is drawn linearly from 0 to this, logarithmically above (symlog): a pass reads as how
#: close it came to the bound, a failure of 1e13 still fits on the same axes
LINEAR_UP_TO = 1.0

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:72rem;margin:1rem auto;padding:0 1rem;color:#222}
h1{font-size:1.5rem}h2{font-size:1.25rem;border-bottom:1px solid #ccc;margin-top:2rem}h3{font-size:1.05rem}
table{border-collapse:collapse;font-size:.9rem}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.verdict{font-size:1.2rem;font-weight:bold;padding:.3rem .6rem;display:inline-block}
.conformant,.pass{background:#dff0d8}.non-conformant,.fail,.error{background:#f2dede}
.partial,.inconclusive,.short{background:#fcf8e3}.not-implemented,.no-examples{background:#eee}
pre{background:#f6f6f6;padding:.4rem;white-space:pre-wrap;word-break:break-all}
figure{margin:.5rem 0}figure svg{max-width:100%;height:auto}
"""


def require_matplotlib() -> None:
    """SessionError (one line) when matplotlib, which draws the plots, is not installed."""
    try:
        import matplotlib  # noqa: F401 - only whether it imports
    except ImportError:
        raise SessionError("--html needs matplotlib to draw its plots: pip install 'ftspec[report]'") from None


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _ratio(value: Any) -> str:
    x = _number(value)
    return f"{x:.3g}" if math.isfinite(x) else _e(value)


def _slug(*parts: Any) -> str:
    """An id or class name: letters, digits, ``_.-`` ("non-conformant", "not-implemented")."""
    return "-".join(re.sub(r"[^A-Za-z0-9_.-]+", "-", str(p)) for p in parts)


def _short(cell: Mapping[str, Any], minimum: int) -> bool:
    return (cell.get("status") == Status.PASS and int(cell.get("examples") or 0) < minimum
            and not cell.get("exhausted"))


def _svg(fig: Any) -> str:
    """``fig`` as an inline ``<svg>`` element: text kept as text, no XML prologue, metadata or
    namespace URIs (an HTML page's inline SVG needs none, and a page that names no address
    fetches nothing)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "ftspec"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    text = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)
    return re.sub(r' d="([^"]*)"', lambda m: f' d="{_short_path(m.group(1))}"', text)


def _short_path(d: str) -> str:
    """SVG path data in fewer bytes, the same shape to a tenth of a point: matplotlib writes up to
    six decimals, a line per point and an ``L`` before each; pairs after a moveto are linetos
    anyway (SVG 1.1, 8.3.2), so a path of straight lines drops them."""
    d = re.sub(r"(\d+\.\d)\d+", r"\1", " ".join(d.split()))
    if not re.search(r"[CcQqSsTtAaHhVv]", d):
        d = d.replace(" L ", " ")
    return d


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    # a fixed layout: constrained layout or a tight bounding box measured every label and took
    # two thirds of the time (47 figures of 12 cells: 47 s)
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=0.6 / width, right=1 - 0.15 / width, bottom=0.5 / height, top=1 - 0.45 / height,
                        wspace=0.25)
    return fig


def _axes_scale(ax: Any, top: float) -> None:
    """Symlog from 0 to past ``top``, the bound dashed; at most about six labelled ticks (symlog's own
    locator labels every decade, a column of 16 for a failure of 1e16)."""
    high = max(1.2, top * 1.5)
    decades = max(0, math.ceil(math.log10(high)))
    # the linear part [0, 1] keeps about a fifth of the height however many decades a failure spans
    ax.set_yscale("symlog", linthresh=LINEAR_UP_TO, linscale=max(1.0, decades / 4))
    ax.set_ylim(0.0, high)
    step = max(1, math.ceil(decades / 4))
    ticks = [0.0, 0.5, 1.0] + [10.0 ** k for k in range(step, decades + 1, step)]
    ax.set_yticks(ticks, ["0", "0.5", "1"] + [f"1e{k}" for k in range(step, decades + 1, step)])
    ax.axhline(1.0, color="#c00", lw=0.8, ls="--")


def _cells_plot(algorithm: str, cells: Sequence[Mapping[str, Any]]) -> Optional[str]:
    """One panel per dtype, one line per implementation@device: error/bound of each recorded
    example in the order judged; an example beyond the bound marked, an infinite one at the top."""
    drawn = [c for c in cells if c.get("ratios")]
    if not drawn:
        return None
    dtypes = list(dict.fromkeys(str(c.get("dtype")) for c in drawn))
    fig = _figure(3.0 * len(dtypes) + 0.6, 2.4)
    axes = fig.subplots(1, len(dtypes), squeeze=False)[0]
    for ax, dtype in zip(axes, dtypes):
        finite_top = 1.0
        mine = [c for c in drawn if str(c.get("dtype")) == dtype]
        for c in mine:
            values = [_number(r) for r in c["ratios"]]
            finite_top = max([finite_top, *(v for v in values if math.isfinite(v))])
        for c in mine:
            values = [_number(r) for r in c["ratios"]]
            xs = list(range(1, len(values) + 1))
            label = f"{c.get('implementation')}@{c.get('device')}"
            shown = [v if math.isfinite(v) else math.nan for v in values]
            line = ax.plot(xs, shown, lw=1.0, label=label)[0]
            over = [(x, v) for x, v in zip(xs, values) if v > 1.0 and math.isfinite(v)]
            if over:
                ax.plot(*zip(*over), ls="none", marker="x", ms=4, color=line.get_color())
            infinite = [x for x, v in zip(xs, values) if v == math.inf]
            if infinite:
                ax.plot(infinite, [finite_top * 1.4] * len(infinite), ls="none", marker="^", ms=4,
                        color=line.get_color())
        _axes_scale(ax, finite_top)
        ax.set_title(dtype, fontsize=9)
        ax.set_xlabel("example", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="upper right")
    axes[0].set_ylabel("error / bound", fontsize=8)
    fig.suptitle(algorithm, fontsize=9)
    return _svg(fig)


def _divergence_plot(divergence: Mapping[str, Any]) -> Optional[str]:
    """The walk's checks in the order made (embedding, layers, final norm, ..., the model under
    each configuration): error/bound per check, the failing ones red, the bound dashed."""
    checks = [c for c in divergence.get("checks") or [] if isinstance(c, Mapping)]
    if not checks:
        return None
    labels = [f"{c.get('where')}" + (f"\n{str(c.get('config'))[:24]}" if c.get("config") not in (None, "", "as given")
                                     else "") for c in checks]
    values = [_number(c.get("ratio")) for c in checks]
    finite = [v for v in values if math.isfinite(v)]
    top = max([1.0, *finite])
    heights = [v if math.isfinite(v) else top * 1.4 for v in values]
    fig = _figure(max(4.0, 0.55 * len(checks) + 1.0), 2.8)
    ax = fig.subplots()
    ax.bar(range(len(checks)), heights, color=["#2a7" if c.get("ok") else "#c33" for c in checks])
    _axes_scale(ax, top)
    ax.set_xticks(range(len(checks)), labels, rotation=60, ha="right", fontsize=6)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_ylabel("error / bound", fontsize=8)
    where = divergence.get("where") or "not located"
    ax.set_title(f"first divergence: {where}" + (f", {divergence['sublayer']}" if divergence.get("sublayer") else ""),
                 fontsize=9)
    return _svg(fig)


def _status_class(cell: Mapping[str, Any], minimum: int) -> str:
    return "short" if _short(cell, minimum) else _slug(cell.get("status"))


def _failure_html(failure: Mapping[str, Any], plots: bool = True) -> list[str]:
    out = [f"<p><b>check {_e(failure.get('check'))}</b>: {_e(failure.get('message'))}</p>"]
    if failure.get("reproducer"):
        out.append(f"<p>reproducer:</p><pre>{_e(failure['reproducer'])}</pre>")
    if failure.get("case_file"):
        out.append(f"<p>case file: <code>{_e(failure['case_file'])}</code></p>")
    for refusal in failure.get("refusals") or []:
        text = refusal.get("message", refusal) if isinstance(refusal, Mapping) else refusal
        out.append(f"<p>refusal answered: {_e(text)}</p>")
    diagnosis = failure.get("diagnosis") or {}
    matches = diagnosis.get("matches") or []
    if matches:
        out.append(f"<p>the output matches the declared set ({_e(diagnosis.get('declared'))}) with:</p><ul>")
        for m in matches:
            changes = ", ".join(f"{k}={v}" for k, v in (m.get("changes") or {}).items())
            out.append(f"<li><code>{_e(changes)}</code> (error/bound {_ratio(m.get('ratio'))})</li>")
        out.append("</ul>")
    elif diagnosis and not diagnosis.get("divergence"):
        out.append("<p>no neighbouring variant set matches the output</p>")
    divergence = diagnosis.get("divergence") or {}
    if divergence:
        where = divergence.get("where") or "not located"
        sub = f", {divergence['sublayer']}" if divergence.get("sublayer") else ""
        out.append(f"<p>first divergence: <b>{_e(where)}{_e(sub)}</b>. {_e(divergence.get('detail') or '')}</p>")
        if divergence.get("also"):
            out.append(f"<p>also departing on their own: {_e(', '.join(map(str, divergence['also'])))}</p>")
        svg = _divergence_plot(divergence) if plots else None
        if svg:
            out.append(f"<figure>{svg}</figure>")
    return out


def _cell_title(c: Mapping[str, Any]) -> str:
    return f"{c.get('algorithm')} · {c.get('implementation')} · {c.get('dtype')} · {c.get('device')}"


def render_html(report: Mapping[str, Any]) -> str:
    """The page of ``report`` (a run report or a certificate, as plain data)."""
    require_matplotlib()
    view = report_view(report)
    minimum = view["minimum"]
    cells = [c for c in view["cells"] if isinstance(c, Mapping)]
    subject = report.get("subject") if view["command"] == "certify" else None
    title = (f"ftspec certificate: {subject.get('name')} {subject.get('version')}" if isinstance(subject, Mapping)
             else "ftspec run")
    verdict = str(view["verdict"])
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{_e(title)}: {_e(verdict)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>{_e(title)}</h1>", f'<p class="verdict {_slug(verdict)}">{_e(verdict)}</p>']
    if view["reasons"]:
        out.append("<p>Why not conformant:</p><ul>" + "".join(f"<li>{_e(r)}</li>" for r in view["reasons"])
                   + "</ul>")
    facts = [("spec", view["spec_version"]), ("profile", view["profile"]), ("seed", view["seed"]),
             ("minimum examples per cell", minimum), ("started" if view["command"] == "run" else "issued",
                                                      view["started"]),
             ("search time (s)", view["seconds"])]
    if isinstance(subject, Mapping):
        facts = [("target", subject.get("target")), ("coverage", (report.get("coverage") or {}).get("fraction")),
                 ("content hash", report.get("content_hash"))] + facts
    out.append("<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts) + "</table>")
    for b in view["broken"]:
        out.append(f'<p class="error">plugin {_e(b.get("name"))} failed to load: {_e(b.get("error"))}</p>')

    out.append("<h2>Cells</h2><table><tr><th>algorithm</th><th>implementation</th><th>dtype</th><th>device</th>"
               "<th>status</th><th>examples</th><th>worst error/bound</th></tr>")
    for c in cells:
        status = str(c.get("status"))
        shown = f"{status} (inconclusive: fewer than {minimum})" if _short(c, minimum) else status
        if c.get("failure"):
            anchor = _slug("fail", c.get("algorithm"), c.get("implementation"), c.get("dtype"), c.get("device"))
            shown = f'<a href="#{anchor}">{_e(shown)}</a>'
        else:
            shown = _e(shown)
        out.append(f'<tr class="{_status_class(c, minimum)}"><td>{_e(c.get("algorithm"))}</td>'
                   f'<td>{_e(c.get("implementation"))}</td><td>{_e(c.get("dtype"))}</td><td>{_e(c.get("device"))}'
                   f'</td><td>{shown}</td><td class="n">{_e(c.get("examples"))}</td>'
                   f'<td class="n">{_ratio(c.get("worst_ratio"))}</td></tr>')
    out.append("</table>")

    out.append("<h2>Error/bound over the examples</h2><p>Each line is one cell: the error/bound of each example "
               "it recorded (at most the first 200), in the order judged; the dashed line is the bound (1), "
               "linear below it and logarithmic above; × an example beyond the bound, ▲ an infinite one.</p>")
    by_algorithm: dict[str, list[Mapping[str, Any]]] = {}
    for c in cells:
        by_algorithm.setdefault(str(c.get("algorithm")), []).append(c)
    unplotted = []
    for algorithm, mine in by_algorithm.items():
        svg = _cells_plot(algorithm, mine)
        if svg is None:
            unplotted.append(algorithm)
            continue
        out.append(f'<section id="{_slug("alg", algorithm)}"><h3>{_e(algorithm)}</h3><figure>{svg}</figure>'
                   "</section>")
    if unplotted:
        out.append(f"<p>No recorded examples to draw (not implemented, none run, or a report written before "
                   f"ratios were recorded): {_e(', '.join(unplotted))}</p>")

    failing = [c for c in cells if c.get("failure") or c.get("status") in (Status.FAIL, Status.ERROR)]
    out.append(f"<h2>Failures ({len(failing)})</h2>")
    if not failing:
        out.append("<p>None.</p>")
    for c in failing:
        anchor = _slug("fail", c.get("algorithm"), c.get("implementation"), c.get("dtype"), c.get("device"))
        out.append(f'<section id="{anchor}"><h3>{_e(_cell_title(c))}: {_e(c.get("status"))}</h3>')
        if c.get("note"):
            out.append(f"<p>{_e(c['note'])}</p>")
        if c.get("failure"):
            out += _failure_html(c["failure"])
        for i, other in enumerate(c.get("more_failures") or [], 1):
            out.append(f"<h4>further failure {i}: {_e(other.get('signature') or other.get('check'))}</h4>")
            out += _failure_html(other)
        out.append("</section>")

    fixtures = [f for f in view["fixtures"] if isinstance(f, Mapping)]
    bad = [f for f in fixtures if not f.get("ok")]
    out.append(f"<h2>Golden fixture replays</h2><p>{len(fixtures)} replayed, {len(bad)} failed.</p>")
    if bad:
        out.append("<table><tr><th>case</th><th>implementation</th><th>dtype</th><th>device</th>"
                   "<th>error/bound</th><th>message</th></tr>")
        for f in bad:
            out.append(f"<tr class=\"fail\"><td>{_e(f.get('case'))}</td><td>"
                       f"{_e(f.get('implementation', f.get('impl')))}</td><td>{_e(f.get('dtype'))}</td>"
                       f"<td>{_e(f.get('device'))}</td><td class=\"n\">{_ratio(f.get('ratio'))}</td>"
                       f"<td>{_e(f.get('message'))}</td></tr>")
        out.append("</table>")
    out.append("<p>Made by ftspec from the report's data (docs/reports.md, \"HTML report\").</p></body></html>")
    return "\n".join(out) + "\n"


def write_html(report: Mapping[str, Any], path: Path | str) -> Path:
    """Write ``report`` (run report or certificate, plain data) as one self-contained HTML page."""
    text = render_html(report)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
