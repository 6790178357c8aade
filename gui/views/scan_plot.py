"""The scan panel's plots: traffic over time, the size distribution and messages per topic,
with a category axis whose bar names never overlap."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics

PLOT_PEN_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf"]


class CategoryAxis(pg.AxisItem):
    """A bottom axis naming bars 0..n-1, whose labels never overlap: when names are wider than
    a bar, labels alternate between two lines (each gets the width of two bars), are elided in
    the middle to that width (full names in `labels` and the table), and when bars are too
    narrow even for that, only every k-th bar is named. Recomputed on every resize and zoom
    (tickValues gets the axis length)."""
    MIN_LABEL_PX = 40
    GAP_PX = 8

    def __init__(self, labels: list[str] | None = None, **kw):
        super().__init__("bottom", **kw)
        self.labels: list[str] = list(labels or [])
        self._px_per_label = 80.0
        self._step = 1


    def _metrics(self):
        return QFontMetrics(self.style.get("tickFont") or QFont())

    def tickValues(self, minVal, maxVal, size):
        n = len(self.labels)
        if n == 0 or size <= 0 or maxVal <= minVal:
            return []
        lo, hi = max(0, int(np.ceil(minVal))), min(n - 1, int(np.floor(maxVal)))
        if hi < lo:
            return []
        px_per_bar = size / (maxVal - minVal)
        step = max(1, int(np.ceil(self.MIN_LABEL_PX / max(px_per_bar, 1e-9))))
        self._px_per_label, self._step = px_per_bar * step, step
        first = lo + (-lo) % step
        return [(float(step), [float(v) for v in range(first, hi + 1, step)])]

    def layout_labels(self, values) -> list[tuple[int, str]]:
        """(line 0 or 1, elided text) for each tick value."""
        fm = self._metrics()
        idx = [int(round(v)) for v in values]
        texts = [self.labels[i] if 0 <= i < len(self.labels) else "" for i in idx]
        one_line = int(self._px_per_label) - self.GAP_PX
        stagger = len(texts) > 1 and max(fm.horizontalAdvance(t) for t in texts) > one_line
        width = max(8, int(2 * self._px_per_label) - self.GAP_PX if stagger else one_line)
        return [((i // self._step) % 2 if stagger else 0, fm.elidedText(t, Qt.ElideMiddle, width))
                for i, t in zip(idx, texts)]

    def tickStrings(self, values, scale, spacing):
        return [("\n" + t if line else t) for line, t in self.layout_labels(values)]


def plot_result(p: pg.PlotWidget, result, bucket_ms: int | None) -> bool:
    """Draw `result` on `p` where a plot fits the job; returns whether it did."""
    p.clear()
    if p.plotItem.legend is not None:
        p.plotItem.legend.clear()
    rows = result.rows
    shown = True
    headroom = 0.0
    if result.job == "traffic" and rows:
        several = len(_brokers(rows)) > 1   # one line per broker and topic: never merged points
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for r in rows:
            series = f"{r['broker']}: {r['topic']}" if several else r["topic"]
            by_topic.setdefault(series, []).append((r["bucketStart"], r["messages"]))
        p.setAxisItems({"bottom": pg.DateAxisItem(utcOffset=0)})
        top = sorted(by_topic, key=lambda t: -sum(m for _, m in by_topic[t]))[:len(PLOT_PEN_COLORS)]
        lo, hi = min(r["bucketStart"] for r in rows), max(r["bucketStart"] for r in rows)
        step = bucket_ms or 0
        dense = step > 0 and (hi - lo) // step < 200_000
        headroom = 0.0
        for i, t in enumerate(top):
            pts = dict(by_topic[t])
            if dense:   # a bucket without messages is a zero, not a gap to draw across
                xs = np.arange(lo, hi + step, step, dtype=np.int64)
                y = np.array([pts.get(int(b), 0) for b in xs], dtype=np.float64)
            else:
                xs = np.array(sorted(pts), dtype=np.int64)
                y = np.array([pts[int(b)] for b in xs], dtype=np.float64)
            x = xs.astype(np.float64) / 1000
            name = t if len(t) <= 32 else t[:15] + "…" + t[-16:]
            p.plot(x, y, pen=pg.mkPen(PLOT_PEN_COLORS[i], width=2), symbol="o", symbolSize=4,
                   symbolBrush=PLOT_PEN_COLORS[i], name=name)
            headroom = max(headroom, float(y.max()) if len(y) else 0.0)
        if p.plotItem.legend is not None:
            p.plotItem.legend.setColumnCount(2 if len(top) > 4 else 1)
        legend_rows = (len(top) + 1) // 2 if len(top) > 4 else len(top)
        headroom *= 1.05 + 0.08 * legend_rows   # the legend sits above the curves, not on them
        p.setLabel("left", "messages per bucket")
        p.setLabel("bottom", "store time (UTC)")
    elif result.job == "size-histogram" and rows:
        sizes = sorted({r["sizeFrom"] for r in rows})
        p.setAxisItems({"bottom": CategoryAxis([_size_label(v) for v in sizes])})
        _grouped_bars(p, rows, "sizeFrom", sizes, "#1f77b4")
        p.setLabel("left", "messages")
        p.setLabel("bottom", "record size (from)")
    elif result.job == "topic-stats" and rows and not any("queueId" in r for r in rows):
        totals: dict[str, int] = {}
        for r in rows:
            totals[r["topic"]] = totals.get(r["topic"], 0) + r["messages"]
        topics = list(totals) if len(_brokers(rows)) == 1 else sorted(totals)
        p.setAxisItems({"bottom": CategoryAxis(topics)})
        _grouped_bars(p, rows, "topic", topics, "#2ca02c")
        p.setLabel("left", "messages")
        p.setLabel("bottom", "topic")
    elif result.job == "fates" and rows:
        from .fates_plot import plot_fates
        plot_fates(p, rows, CategoryAxis)
    else:
        shown = False
    legend = p.plotItem.legend
    if legend is not None:   # an empty legend still draws its frame
        legend.setVisible(bool(legend.items))
    p.setVisible(shown)
    if shown:
        p.autoRange()
        if result.job == "traffic" and headroom > 0:
            p.setYRange(0, headroom, padding=0)
    return shown


def _brokers(rows: list[dict]) -> list:
    """The brokers of a many-store result in row order ([None] for one store)."""
    return list(dict.fromkeys(r.get("broker") for r in rows)) or [None]


def _grouped_bars(p: pg.PlotWidget, rows: list[dict], key: str, categories: list, color: str) -> None:
    """Messages per category: one bar each, or with several brokers a group per category,
    a bar (and a legend entry) per broker side by side."""
    brokers = _brokers(rows)
    index = {c: i for i, c in enumerate(categories)}
    width = 0.8 / len(brokers)
    for b_i, broker in enumerate(brokers):
        y = np.zeros(len(categories), dtype=np.float64)
        for r in rows:
            if r.get("broker") == broker:
                y[index[r[key]]] += r["messages"]
        x = np.arange(len(categories), dtype=np.float64) - 0.4 + (b_i + 0.5) * width
        brush = color if len(brokers) == 1 else PLOT_PEN_COLORS[b_i % len(PLOT_PEN_COLORS)]
        bars = pg.BarGraphItem(x=x, height=y, width=width, brush=brush)
        p.addItem(bars)
        if len(brokers) > 1 and p.plotItem.legend is not None:
            p.plotItem.legend.addItem(bars, str(broker))


def _size_label(n: int) -> str:
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n // k} {unit}"
    return f"{n} B"
