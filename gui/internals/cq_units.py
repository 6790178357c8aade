"""CqUnitsView: one ConsumeQueue's units against queue offset.

Four plots share the queue-offset axis: commitLogOffset (how the queue interleaves with the
others in the commitlog), unit size, tagsCode, and the referenced record's store time
(traffic over time). 64-bit values are plotted relative to a base shown in the axis label
(pyqtgraph axes are float64); curves clip to the view and peak-downsample, so millions of
units pan and zoom smoothly. Drag the shaded region to select queue offsets; click a point
to open its message."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from engine import analysis as A
from .colors import topic_colors
from gui.timefmt import format_ms_readable
from gui.plot_theme import ink, mid, paper
from gui.workers import Background, RefreshWhenShown

pg.setConfigOptions(imageAxisOrder="row-major")

SYMBOLS_UP_TO = 3000          # draw point symbols while a queue has at most this many units
BIG_TAGS = 1 << 40            # tagsCode beyond this (delivery times, ext addresses): plot relative


class PlainAxis(pg.AxisItem):
    """Ticks as plain numbers with digit grouping (600,000,000, never 6e+08): offsets are
    integers, and only a tick spacing below 1 earns decimals."""

    def tickStrings(self, values, scale, spacing):
        step = spacing * scale
        places = 0 if step >= 1 else min(9, int(np.ceil(-np.log10(max(step, 1e-12)))))
        return [f"{v * scale:,.{places}f}" for v in values]


class CqUnitsView(RefreshWhenShown, QWidget):
    openRequested = Signal("qint64")                            # commitlog offset of a clicked unit
    queueOffsetsSelected = Signal(str, int, "qint64", "qint64")  # topic, queueId, first, end (exclusive)
    updated = Signal()

    PLOTS = ("phy", "size", "tags", "time")

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._store = None
        self.utc = False
        self._dirty = False
        self._want: tuple[str, int] | None = None
        self.series: A.QueueSeries | None = None
        self.bases: dict[str, int] = {}
        self.background = Background(self)
        self.background.failed.connect(lambda ch, text: self.summary.setText(
            "Could not read the queue:\n" + text.strip().splitlines()[-1]))
        self.combo = QComboBox()
        self.combo.setMinimumWidth(320)
        self.combo.currentIndexChanged.connect(self._combo_changed)
        self.summary = QLabel("No store open.")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.glw = pg.GraphicsLayoutWidget()
        self.glw.setBackground(paper())
        font = QFont()
        font.setPointSize(8)
        self.plots: dict[str, pg.PlotItem] = {}
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.regions: dict[str, pg.LinearRegionItem] = {}
        for i, name in enumerate(self.PLOTS):
            p = self.glw.addPlot(row=i, col=0, axisItems={"left": PlainAxis("left"), "bottom": PlainAxis("bottom")})
            p.setMenuEnabled(False)
            p.showGrid(x=True, y=True, alpha=0.2)
            for ax in ("left", "bottom"):
                a = p.getAxis(ax)
                a.setPen(mid())
                a.setTextPen(ink())   # after setPen: the axis label takes the text colour
                a.setStyle(tickFont=font)
                a.enableAutoSIPrefix(False)
            p.getAxis("left").setWidth(110)
            if i:
                p.setXLink(self.plots[self.PLOTS[0]])
            c = p.plot([], [])
            c.setClipToView(True)
            c.setDownsampling(auto=True, method="peak")
            c.sigPointsClicked.connect(self._points_clicked)
            r = pg.LinearRegionItem(values=(0, 0), brush=(255, 193, 7, 50), pen=pg.mkPen((230, 150, 0), width=1))
            r.setZValue(-10)
            r.sigRegionChanged.connect(self._region_moved)
            r.sigRegionChangeFinished.connect(self._region_done)
            p.addItem(r)
            self.plots[name], self.curves[name], self.regions[name] = p, c, r
        self.plots["time"].setLabel("bottom", "queue offset", color=ink())
        self._syncing = False
        top = QHBoxLayout()
        top.addWidget(QLabel("Queue:"))
        top.addWidget(self.combo)
        self.selection_label = QLabel()
        top.addWidget(self.selection_label, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.summary)
        lay.addWidget(self.glw, 1)
        self.glw.scene().sigMouseClicked.connect(self._scene_clicked)

    # ---- store and queue selection ---------------------------------------------------------
    def set_utc(self, utc: bool) -> None:
        self.utc = utc
        if self.series is not None and self._store is not None:
            s = self.series
            self._set_summary(s, s.phy_offsets[~s.fillers], s.store_times >= 0)

    def set_store(self, store) -> None:
        self.background.cancel()
        self._store = store
        self.series = None
        self.combo.blockSignals(True)
        self.combo.clear()
        self._queues: list[tuple[str, int]] = []
        self._want = None
        if store is not None:
            colors = topic_colors(sorted({t for t, _ in store.queues}))
            self._colors = colors
            for (t, q), cq in sorted(store.queues.items()):
                self.combo.addItem(f"{t} / {q}   ({cq.max_offset - cq.min_offset:,} units)")
                self._queues.append((t, q))
        self.combo.blockSignals(False)
        for c in self.curves.values():
            c.setData([], [])
        self.summary.setText("No store open." if store is None else "Choose a queue.")
        self.mark_stale(store is not None)

    def refresh(self) -> None:
        if self._store is None:
            return
        self._dirty = False
        want = self._want
        if want is None:
            want = self.default_queue()
        if want is not None:
            self.select_queue(*want)

    def default_queue(self) -> tuple[str, int] | None:
        """The queue with the most units."""
        if not self._store or not self._store.queues:
            return None
        return max(self._store.queues.items(), key=lambda kv: (kv[1].max_offset - kv[1].min_offset, kv[0]))[0]

    def select_queue(self, topic: str, queue_id: int) -> None:
        """Show (topic, queueId); the units and store times are read in the background."""
        self._want = (topic, queue_id)
        if self._store is None:
            return
        i = self._queues.index((topic, queue_id)) if (topic, queue_id) in self._queues else -1
        if i >= 0 and i != self.combo.currentIndex():
            self.combo.blockSignals(True)
            self.combo.setCurrentIndex(i)
            self.combo.blockSignals(False)
        self.summary.setText(f"Reading {topic} / {queue_id}…")
        store = self._store
        self.background.submit("series", A.queue_series, store, topic, queue_id, on_done=self._apply)

    def _combo_changed(self, i: int) -> None:
        if 0 <= i < len(self._queues):
            self.select_queue(*self._queues[i])

    # ---- drawing ---------------------------------------------------------------------------
    def _apply(self, s: A.QueueSeries) -> None:
        self.series = s
        n = len(s)
        x = s.queue_offsets.astype(np.float64)
        ok = ~s.fillers
        valid_phy = s.phy_offsets[ok]
        phy_base = int(self._store.commitlog.min_offset) if self._store is not None else 0
        times_ok = s.store_times >= 0
        t_base = int(s.store_times[times_ok].min()) if times_ok.any() else 0
        tags_ok = s.tags_codes[ok]
        tags_base = int(tags_ok.min()) if tags_ok.size and np.abs(tags_ok).max() > BIG_TAGS else 0
        self.bases = {"phy": phy_base, "time": t_base, "tags": tags_base}
        color = getattr(self, "_colors", {}).get(s.topic, (31, 119, 180))
        pen = pg.mkPen(color, width=1.5)
        sym = dict(symbol="o", symbolSize=4, symbolBrush=color, symbolPen=None) if n <= SYMBOLS_UP_TO else {}

        def y_of(values, base, valid):
            y = (values - base).astype(np.float64)
            y[~valid] = np.nan
            return y
        ys = {
            "phy": y_of(s.phy_offsets, phy_base, ok),
            "size": y_of(s.sizes.astype(np.int64), 0, ok),
            "tags": y_of(s.tags_codes, tags_base, ok),
            "time": y_of(s.store_times, t_base, times_ok) / 1000.0,
        }
        dots = dict(symbol="o", symbolSize=4 if n <= SYMBOLS_UP_TO else 2, symbolBrush=color, symbolPen=None)
        for name, c in self.curves.items():
            if name == "tags":   # hashes are categories, not a trend: points only
                c.setData(x, ys[name], pen=None, **dots)
            else:
                c.setData(x, ys[name], pen=pen, connect="finite", **sym)

        def rel(base: int, what: str) -> str:
            return f"{what} − {base:,}" if base else what
        self.plots["phy"].setLabel("left", rel(phy_base, "commitLogOffset"), color=ink())
        self.plots["size"].setLabel("left", "unit size (bytes)", color=ink())
        self.plots["tags"].setLabel("left", rel(tags_base, "tagsCode"), color=ink())
        self.plots["time"].setLabel("left", "store time − t0 (s)", color=ink())
        lo, hi = (int(s.queue_offsets[0]), int(s.queue_offsets[-1]) + 1) if n else (0, 1)
        for p in self.plots.values():
            p.setLimits(xMin=lo - 1, xMax=hi + 1)
            p.enableAutoRange(axis="y")
        self.plots["phy"].setXRange(lo - 0.5, hi - 0.5, padding=0.01)
        first = lo + (hi - lo) // 4
        self.set_selection(first, min(hi, first + max(1, (hi - lo) // 10)), emit=False)
        self._set_summary(s, valid_phy, times_ok)
        self.updated.emit()

    def _set_summary(self, s: A.QueueSeries, valid_phy: np.ndarray, times_ok: np.ndarray) -> None:
        n = len(s)
        if not n:
            self.summary.setText(f"{s.topic} / {s.queue_id}: no units.")
            return
        cq = self._store.find_queue(s.topic, s.queue_id) if self._store else None
        files = len(cq.queue.files) if cq else 0
        t = s.store_times[times_ok]
        span = (f"store time t0 = {format_ms_readable(int(t.min()), self.utc)} – "
                f"{format_ms_readable(int(t.max()), self.utc)} ({(t.max() - t.min()) / 1000:,.1f} s)"
                if t.size else "no readable store times")
        distinct = len(np.unique(s.tags_codes[~s.fillers]))
        gaps = int(np.count_nonzero(~times_ok & ~s.fillers))
        self.summary.setText(
            f"<b>{s.topic} / {s.queue_id}</b>: queue offsets {int(s.queue_offsets[0]):,} – {int(s.queue_offsets[-1]):,} "
            f"({n:,} units {f'in {files} files' if files or cq is None else 'in RocksDB'}"
            + (f", {int(s.fillers.sum()):,} filler units" if s.fillers.any() else "") + "); "
            f"commitLogOffset {int(valid_phy.min()) if valid_phy.size else 0:,} – "
            f"{int(valid_phy.max()) if valid_phy.size else 0:,}; {span}; {distinct:,} distinct tagsCodes"
            + (f"; <span style='color:#c00'>{gaps:,} units whose record cannot be read</span>" if gaps else ""))

    # ---- selection ---------------------------------------------------------------------------
    def set_selection(self, first: int, end: int, emit: bool = True) -> None:
        """Select queue offsets [first, end)."""
        self._syncing = True
        for r in self.regions.values():
            r.setRegion((first - 0.5, end - 0.5))
        self._syncing = False
        if emit:
            self._region_done(self.regions["time"])
        elif self.series is not None:
            self._show_selection(*self.selected_range())

    def _show_selection(self, first: int, end: int) -> None:
        self.selection_label.setText(
            f"  selected queue offsets {first:,} – {end - 1:,} ({end - first:,} units): drag the band to change; "
            "double-click a point to open its message")

    def selected_range(self) -> tuple[int, int]:
        """Queue offsets [first, end) inside the region, clamped to the queue."""
        lo, hi = self.regions["time"].getRegion()
        first, end = int(np.ceil(lo)), int(np.floor(hi)) + 1
        if self.series is not None and len(self.series):
            q0, q1 = int(self.series.queue_offsets[0]), int(self.series.queue_offsets[-1]) + 1
            first, end = max(first, q0), min(end, q1)
        return first, max(first, end)

    def _region_moved(self, region) -> None:
        if self._syncing:
            return
        self._syncing = True
        for r in self.regions.values():
            if r is not region:
                r.setRegion(region.getRegion())
        self._syncing = False

    def _region_done(self, region) -> None:
        if self._syncing or self.series is None:
            return
        first, end = self.selected_range()
        self._show_selection(first, end)
        self.queueOffsetsSelected.emit(self.series.topic, self.series.queue_id, first, end)

    # ---- opening ----------------------------------------------------------------------------
    def open_queue_offset(self, q: int) -> int | None:
        s = self.series
        if s is None or not len(s):
            return None
        i = q - int(s.queue_offsets[0])
        if not 0 <= i < len(s) or s.fillers[i]:
            return None
        phy = int(s.phy_offsets[i])
        self.openRequested.emit(phy)
        return phy

    def _points_clicked(self, item, points, ev=None) -> None:
        if len(points):
            self.open_queue_offset(int(round(points[0].pos().x())))

    def _scene_clicked(self, ev) -> None:
        if ev.button() != Qt.LeftButton or not ev.double():
            return
        for p in self.plots.values():
            if p.vb.sceneBoundingRect().contains(ev.scenePos()):
                self.open_queue_offset(int(round(p.vb.mapSceneToView(ev.scenePos()).x())))
                return
