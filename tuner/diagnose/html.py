"""A standalone HTML report of a trace diagnosis: split table, timeline plot, kernels, findings.

One file, no script and no external asset (the plot is inline SVG), so it opens offline and
can be attached to a ticket.
"""

from __future__ import annotations

from html import escape

from slotune.tuner.diagnose._split import TimeSplit
from slotune.tuner.diagnose._trace import OpKind
from slotune.tuner.diagnose.trace import TraceDiagnosis

_COLORS = {
    OpKind.COMPUTE: "#4c78a8",
    OpKind.COMM: "#f58518",
    OpKind.MEMSET: "#72b7b2",
    OpKind.HTOD: "#e45756",
    OpKind.DTOH: "#b279a2",
    OpKind.DTOD: "#ff9da6",
    OpKind.PTOP: "#9d755d",
    OpKind.MEMCPY_OTHER: "#bab0ac",
}
_WIDTH = 1100
_ROW = 18


def trace_html(result: TraceDiagnosis) -> str:
    """The report as one HTML document."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>slotune diagnose: {escape(result.source)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        "td:first-child,th:first-child{text-align:left}.f{margin:1em 0}</style></head><body>",
        f"<h1>GPU time: {escape(result.source)}</h1>",
        _split_table((result.overall, *result.windows)),
        _split_bars_svg((result.overall, *result.windows)),
        "<h2>Timeline (first device)</h2>",
        _timeline_svg(result),
        _legend(),
        "<h2>Top kernels</h2>",
        _kernel_table(result),
        "<h2>Findings</h2>",
    ]
    for f in result.findings:
        evidence = ", ".join(f"{escape(k)}={escape(_num(v))}" for k, v in f.evidence.items())
        parts.append(
            f"<div class='f'><b>{escape(f.severity.value)} {escape(f.code)}</b>: "
            f"{escape(f.title)}<br>evidence: {evidence}<br>remedy: {escape(f.remedy)}"
            + (f"<br>parameters: {escape(', '.join(f.parameters))}" if f.parameters else "")
            + (f"<br><code>{escape(f.tune_command)}</code>" if f.tune_command else "")
            + "</div>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)


def _split_table(splits: tuple[TimeSplit, ...]) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "window",
            "total ms",
            "compute ms",
            "exposed memcpy ms",
            "exposed comm ms",
            "idle ms",
            "idle while host launches ms",
        )
    )
    rows = "".join(
        f"<tr><td>{escape(s.name)}</td>"
        + "".join(
            f"<td>{v:,.3f}</td>"
            for v in (
                s.total_ms,
                s.compute_ms,
                s.exposed_memcpy_ms,
                s.exposed_comm_ms,
                s.idle_ms,
                s.host_idle_ms,
            )
        )
        + "</tr>"
        for s in splits
    )
    return f"<table><tr>{head}</tr>{rows}</table>"


def _timeline_svg(result: TraceDiagnosis) -> str:
    ops = result.timeline
    if not ops:
        return "<p>no operations</p>"
    span = max(end for _, end, _ in ops) or 1.0
    present = sorted({kind for _, _, kind in ops})
    lanes = {OpKind(k): i for i, k in enumerate(present)}
    height = _ROW * len(lanes) + 30
    rects = []
    for start, end, kind in ops:
        x = start / span * _WIDTH
        w = max((end - start) / span * _WIDTH, 0.5)
        y = lanes[OpKind(kind)] * _ROW
        rects.append(
            f"<rect x='{x:.2f}' y='{y}' width='{w:.2f}' height='{_ROW - 4}' "
            f"fill='{_COLORS[OpKind(kind)]}'/>"
        )
    labels = "".join(
        f"<text x='{_WIDTH + 6}' y='{i * _ROW + 12}' font-size='11'>{k.name.lower()}</text>"
        for k, i in lanes.items()
    )
    axis = f"<text x='0' y='{height - 8}' font-size='11'>0 ms</text>" + (
        f"<text x='{_WIDTH - 80}' y='{height - 8}' font-size='11'>{span:,.1f} ms</text>"
    )
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{_WIDTH + 90}' height='{height}'>"
        + "".join(rects)
        + labels
        + axis
        + "</svg>"
    )


_BAR_PARTS = (
    ("compute", "#4c78a8"),
    ("exposed comm", "#f58518"),
    ("exposed memcpy", "#e45756"),
    ("exposed memset", "#72b7b2"),
    ("idle", "#dddddd"),
)


def _split_bars_svg(splits: tuple[TimeSplit, ...]) -> str:
    """One stacked bar per window: where its time went, as shares (readable at any span)."""
    label_w, bar_w, row = 160, 800, 20
    rows = []
    for i, s in enumerate(splits[:200]):
        parts = (
            s.compute_ms,
            s.exposed_comm_ms,
            s.exposed_memcpy_ms,
            s.exposed_memset_ms or 0.0,
            s.idle_ms,
        )
        x = float(label_w)
        y = i * row
        rows.append(f"<text x='0' y='{y + 14}' font-size='11'>{escape(s.name)}</text>")
        for (name, color), ms in zip(_BAR_PARTS, parts, strict=True):
            w = s.share(ms) * bar_w
            if w > 0:
                rows.append(
                    f"<rect x='{x:.2f}' y='{y}' width='{w:.2f}' height='{row - 4}' fill='{color}'>"
                    f"<title>{name}: {ms:,.3f} ms ({s.share(ms):.1%})</title></rect>"
                )
            x += w
    legend = " ".join(f"<span style='color:{c}'>&#9632;</span> {n}" for n, c in _BAR_PARTS)
    height = row * min(len(splits), 200)
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{label_w + bar_w}' height='{height}'>"
        + "".join(rows)
        + f"</svg><p>{legend}</p>"
    )


def _num(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _legend() -> str:
    return (
        "<p>"
        + " ".join(
            f"<span style='color:{c}'>&#9632;</span> {k.name.lower()}" for k, c in _COLORS.items()
        )
        + "</p>"
    )


def _kernel_table(result: TraceDiagnosis) -> str:
    rows = "".join(
        f"<tr><td>{escape(k.name[:90])}</td><td>{k.category.value}</td><td>{k.count:,}</td>"
        f"<td>{k.total_ms:,.3f}</td><td>{k.busy_share:.1%}</td></tr>"
        for k in result.kernels
    )
    return (
        "<table><tr><th>kernel</th><th>category</th><th>count</th><th>total ms</th>"
        f"<th>busy share</th></tr>{rows}</table>"
    )
