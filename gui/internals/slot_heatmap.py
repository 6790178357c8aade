"""SlotHeatmapView: the whole hash-slot table of one index file at a glance.

Left, every slot binned to the pixels available (max or mean chain length per bin, slot
numbers running left to right, then down); right, how many slots have each chain length
next to what a uniform hash would give at the same load (Poisson with mean entries /
slots), with the counts in a table. "used" shows how many slots of each pixel are in use,
read from the slot table alone; it is also what the map shows at once while the chain
lengths of a new file (every used entry must be read) are computed on a worker.
Re-binning on resize works on the cached lengths. A click on the map picks the bin's
longest chain and emits `slotActivated(file, slot)`.

Drawing: the image is float32 with explicit levels (pyqtgraph never scans it), the
colour-scale maximum comes with the binned image, and the histogram's range is set from
the known extent instead of an autoRange over the bars."""
from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QCursor, QFont, QImage
from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QHeaderView, QLabel, QSplitter, QTableWidget,
                               QTableWidgetItem, QToolTip, QVBoxLayout, QWidget)

from engine import analysis as A

from . import heatmap as H
from gui.plot_theme import ink, mid, paper
from gui.workers import Background, RefreshWhenShown

pg.setConfigOptions(imageAxisOrder="row-major")

LOG_FLOOR = -0.5           # log10 baseline of the histogram bars: a count of 1 still shows
COLORMAP = "inferno"
LABEL_CELLS_UP_TO = 256    # write the chain length into each pixel-cell when there are this few
DOTS_UP_TO = 20000         # sparse maps: draw used bins as dots too, or single pixels vanish


class IndexedImageItem(pg.ImageItem):
    """An ImageItem for an 8-bit index image (H.heat_indices) and a fixed 256-colour table,
    converted once per image by Qt (Indexed8 to premultiplied ARGB32, the painter's own
    format: a table lookup in C, 2.5x numpy's take with its index cast) and painted as is,
    with no per-paint conversion and no float scaling."""

    def __init__(self, colors: np.ndarray):
        super().__init__(axisOrder="row-major")
        lut = np.ascontiguousarray(colors, dtype=np.uint32)                # (256, 4) RGBA
        self._table = [int(x) for x in (lut[:, 3] << 24) | (lut[:, 0] << 16) | (lut[:, 1] << 8) | lut[:, 2]]

    def render(self):
        img = self.image
        if img is None or img.size == 0 or img.dtype != np.uint8 or img.ndim != 2:
            return super().render()
        img = np.ascontiguousarray(img)
        rows, cols = img.shape
        indexed = QImage(img.data, cols, rows, cols, QImage.Format.Format_Indexed8)
        indexed.setColorTable(self._table)
        self.qimage = indexed.convertToFormat(QImage.Format.Format_ARGB32_Premultiplied)   # owns its pixels
        self._renderRequired = False
        self._unrenderable = False


class SlotResult:
    """What one index file's slot view needs, computed on a worker."""

    def __init__(self, name: str, lengths: np.ndarray, entries: int, index_count: int,
                 counts: np.ndarray | None = None):
        self.name = name
        self.lengths = lengths
        self.entries = entries
        self.index_count = index_count
        if counts is None:
            counts = np.bincount(lengths, minlength=1)
        self.histogram = A.chain_histogram(lengths, entries, counts)
        self.stats = A.slot_stats(lengths, entries, counts=counts)


def heatmap_for(f, lengths: np.ndarray, width: int, height: int, how: str) -> H.SlotHeatmap:
    """The picture for one "pixel shows" choice: chain lengths (max, mean) or used slots."""
    if how == "used":
        return H.slot_occupancy(f, width, height)
    return H.slot_heatmap(lengths, width, height, how)


def compute_slots(f, width: int, height: int, how: str) -> tuple[SlotResult, H.SlotHeatmap]:
    lengths, counts = A.chain_census(f)
    res = SlotResult(f.name, lengths, max(0, f.header.indexCount - 1), f.header.indexCount, counts)
    return res, heatmap_for(f, lengths, width, height, how)


def _axis_style(p: pg.PlotItem) -> None:
    font = QFont()
    font.setPointSize(8)
    for ax in ("left", "bottom"):
        a = p.getAxis(ax)
        a.setTextPen(ink())
        a.setPen(mid())
        a.setStyle(tickFont=font)
        a.enableAutoSIPrefix(False)


class SlotHeatmapView(RefreshWhenShown, QWidget):
    slotActivated = Signal(str, int)     # index file name, slot
    updated = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._store = None
        self._dirty = False
        self._want: str | None = None
        self._cache: dict[tuple[str, int], SlotResult] = {}
        self.result: SlotResult | None = None
        self.heat: H.SlotHeatmap | None = None
        self.background = Background(self)
        self.background.failed.connect(lambda ch, text: self.stats_label.setText(
            "Could not compute chain lengths:\n" + text.strip().splitlines()[-1]))
        # controls
        self.files = QComboBox()
        self.files.setMinimumWidth(300)
        self.files.currentIndexChanged.connect(self._file_changed)
        self.how = QComboBox()
        self.how.addItems(["max", "mean", "used"])
        self.how.setToolTip("What a pixel holding several slots shows: the max or mean chain length, "
                            "or how many of its slots are used (from the slot table alone)")
        self.how.currentIndexChanged.connect(lambda *_: self._rebin())
        self.log = QCheckBox("log counts")
        self.log.setChecked(True)
        self.log.toggled.connect(lambda *_: self._draw_histogram())
        self.stats_label = QLabel("No store open.")
        self.stats_label.setWordWrap(True)
        self.stats_label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        # heat map
        self.heat_widget = pg.GraphicsLayoutWidget()
        self.heat_widget.setBackground(paper())
        self.heat_plot = self.heat_widget.addPlot(row=0, col=0)
        self.heat_plot.setMenuEnabled(False)
        self.heat_plot.hideButtons()    # no auto-range "A" on the map's corner: the map always fits
        self.heat_plot.invertY(True)
        self.heat_plot.setAspectLocked(False)
        self.heat_plot.hideAxis("bottom")
        self.heat_plot.hideAxis("left")
        self.heat_plot.setTitle("slot table", color=ink(), size="10pt")
        # an 8-bit indexed image (H.heat_indices) with a fixed colour table: 0..254 the colour
        # map, 255 transparent; painting it is a QImage of the indices, no per-pixel work
        self.cmap = pg.colormap.get(COLORMAP)
        lut = np.zeros((256, 4), dtype=np.uint8)
        lut[:255] = self.cmap.getLookupTable(0.0, 1.0, 255, alpha=True)
        self.image = IndexedImageItem(lut)
        self.heat_plot.addItem(self.image)
        self.dots = pg.ScatterPlotItem(pen=pg.mkPen(255, 255, 255, 150, width=1), size=7, pxMode=True)
        self.heat_plot.addItem(self.dots)
        self.cell_labels: list[pg.TextItem] = []
        self.colorbar = pg.ColorBarItem(values=(0, 1), colorMap=self.cmap, label="chain length",
                                        interactive=False, colorMapMenu=False)
        self.heat_plot.layout.addItem(self.colorbar, 2, 5)     # what setImageItem(insert_in=) does,
        self.heat_plot.layout.setColumnFixedWidth(4, 5)        # without tying the image's levels to it
        self._titles: dict[object, str] = {}
        self.colorbar.getAxis("right").setTextPen(ink())
        # histogram
        self.hist_widget = pg.PlotWidget(background=paper())
        self.hist_plot = self.hist_widget.getPlotItem()
        self.hist_plot.setMenuEnabled(False)
        _axis_style(self.hist_plot)
        self.hist_plot.setTitle("chain lengths vs uniform hash (Poisson)", color=ink(), size="10pt")
        self.hist_plot.setLabel("bottom", "chain length", color=ink())
        self.hist_plot.showGrid(y=True, alpha=0.2)
        self.legend = self.hist_plot.addLegend(offset=(-10, 10), labelTextColor=ink())
        self.obs_bars = pg.BarGraphItem(x=[], height=[], width=0.4, brush=(31, 119, 180), pen=None, name="slots")
        self.exp_bars = pg.BarGraphItem(x=[], height=[], width=0.4, brush=(255, 127, 14, 200), pen=None,
                                        name="Poisson (same load)")
        self.hist_plot.addItem(self.obs_bars)
        self.hist_plot.addItem(self.exp_bars)
        self.table = QTableWidget(0, 3)
        self.table.setHorizontalHeaderLabels(["chain length", "slots", "Poisson"])
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.Stretch)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.setToolTip("Red rows: far more slots than a uniform hash gives at this load "
                              "(repeated keys, a skewed hash or an overloaded file)")
        # layout
        top = QHBoxLayout()
        top.addWidget(QLabel("Index file:"))
        top.addWidget(self.files)
        top.addWidget(QLabel("pixel shows"))
        top.addWidget(self.how)
        top.addWidget(self.log)
        top.addStretch(1)
        right = QSplitter(Qt.Vertical)
        right.addWidget(self.hist_widget)
        right.addWidget(self.table)
        right.setSizes([400, 220])
        split = QSplitter(Qt.Horizontal)
        split.addWidget(self.heat_widget)
        split.addWidget(right)
        split.setSizes([600, 500])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.stats_label)
        lay.addWidget(split, 1)
        self._rebin_timer = QTimer(self)
        self._rebin_timer.setSingleShot(True)
        self._rebin_timer.setInterval(60)
        self._rebin_timer.timeout.connect(self._rebin)
        self.heat_plot.vb.sigResized.connect(lambda *_: self._rebin_timer.start())
        self.heat_widget.scene().sigMouseMoved.connect(self._hover)
        self.heat_widget.scene().sigMouseClicked.connect(self._clicked)

    # ---- store and file ----------------------------------------------------------------------
    def set_store(self, store) -> None:
        self.background.cancel()
        self._store = store
        self._cache.clear()
        self._want = None
        self.result = self.heat = None
        self.image.clear()
        self.files.blockSignals(True)
        self.files.clear()
        self._names: list[str] = []
        if store is not None:
            for f in store.index.files:
                self.files.addItem(f"{f.name}   ({max(0, f.header.indexCount - 1):,} entries)")
                self._names.append(f.name)
        self.files.blockSignals(False)
        self.stats_label.setText("No store open." if store is None else
                                 ("No index files." if not self._names else "Computing chain lengths…"))
        self.mark_stale(store is not None)

    def refresh(self) -> None:
        if self._store is None:
            return
        self._dirty = False
        name = self._want or (self._names[0] if self._names else None)
        if name is not None:
            self.select_file(name)

    def index_file(self, name: str):
        if self._store is None:
            return None
        return next((f for f in self._store.index.files if f.name == name), None)

    def select_file(self, name: str) -> None:
        self._want = name
        f = self.index_file(name)
        if f is None:
            return
        i = self._names.index(name)
        if i != self.files.currentIndex():
            self.files.blockSignals(True)
            self.files.setCurrentIndex(i)
            self.files.blockSignals(False)
        w, h = self._budget()
        how = self.how.currentText()
        hit = self._cache.get((name, f.header.indexCount))
        if hit is not None:
            self.background.cancel("slots")
            self._apply((hit, heatmap_for(f, hit.lengths, w, h, how)))
            return
        # the slot table alone gives the occupancy at once; chain lengths need every entry
        self.result = None
        self._show_heat(H.slot_occupancy(f, w, h), f.slot_num, " (chain lengths being computed)")
        self.stats_label.setText(f"Computing the chain length of {f.slot_num:,} slots of {name}…")
        self.background.submit("slots", compute_slots, f, w, h, how, on_done=self._apply)

    def _file_changed(self, i: int) -> None:
        if 0 <= i < len(self._names):
            self.select_file(self._names[i])

    def _budget(self) -> tuple[int, int]:
        vb = self.heat_plot.vb
        return max(64, int(vb.width())), max(48, int(vb.height()))

    # ---- drawing ---------------------------------------------------------------------------------
    def _apply(self, pair) -> None:
        res, heat = pair
        self._cache[(res.name, res.index_count)] = res
        self.result = res
        self._show_heat(heat)
        self._draw_histogram()
        self._fill_table()
        self._set_stats()
        self.updated.emit()

    def _rebin(self) -> None:
        if self.result is None:
            return
        w, h = self._budget()
        f = self.index_file(self.result.name) if self.how.currentText() == "used" else None
        if self.how.currentText() == "used" and f is None:
            return
        self._show_heat(heatmap_for(f, self.result.lengths, w, h, self.how.currentText()))

    def _show_heat(self, heat: H.SlotHeatmap, slots: int | None = None, note: str = "") -> None:
        self.heat = heat
        top = heat.top
        self.image.setImage(H.heat_indices(heat), autoLevels=False)
        rows, cols = heat.image.shape
        self.image.setRect(QRectF(0, 0, cols, rows))
        if self.colorbar.levels() != (0, top):
            self.colorbar.setLevels((0, top))
        self._set_once(self.colorbar.getAxis("left").setLabel,
                       "used slots" if heat.how == "used" else "chain length", "colorbar")
        self.heat_plot.vb.setRange(xRange=(0, cols), yRange=(0, rows), padding=0)
        for t in self.cell_labels:
            self.heat_plot.removeItem(t)
        self.cell_labels = []
        flat = heat.image.ravel()[:heat.bins]
        n_used = 0
        if heat.slots_per_bin > 1:
            n_used = heat.nonzero_bins if heat.nonzero_bins >= 0 else np.count_nonzero(flat)
        sparse = heat.slots_per_bin > 1 and n_used <= DOTS_UP_TO and n_used < 0.02 * heat.bins
        slots = slots if slots is not None else (self.result.stats.slots if self.result is not None else 0)
        what = "used slots" if heat.how == "used" else f"{heat.how} chain length"
        self._heat_slots = slots
        if heat.bins <= LABEL_CELLS_UP_TO:
            for b in range(heat.bins):
                r, c = divmod(b, cols)
                v = flat[b]
                t = pg.TextItem(f"#{heat.slot_range(r, c)[0]}\n{v:g}", anchor=(0.5, 0.5),
                                color=(255, 255, 255) if v < 0.6 * top else (0, 0, 0))
                t.setPos(c + 0.5, r + 0.5)
                self.heat_plot.addItem(t)
                self.cell_labels.append(t)
            note += "; cells: #slot / " + ("used slots" if heat.how == "used" else "chain length")
        if sparse:
            used = np.flatnonzero(flat)
            r, c = np.divmod(used, cols)
            lut = self.cmap.getLookupTable(0.0, 1.0, 256, alpha=False)
            colors = lut[np.clip((flat[used] / top * 255).astype(int), 0, 255)]
            self.dots.setData(x=c + 0.5, y=r + 0.5, brush=[pg.mkBrush(*col) for col in colors])
            note += "; sparse: used pixels drawn as dots"
        else:
            self.dots.clear()
        self.dots.setVisible(bool(sparse))   # an empty scatter item still costs a paint pass
        self._set_once(lambda t: self.heat_plot.setTitle(t, color=ink(), size="10pt"),
                       f"{slots:,} slots, {heat.slots_per_bin:,} per pixel ({what}){note}", "title")

    def _set_once(self, setter, text: str, key=None) -> None:
        """Call setter(text) unless the same text was set last time (a label's setHtml and
        the layout it triggers cost more than the rest of a re-bin)."""
        key = key or setter
        if self._titles.get(key) != text:
            self._titles[key] = text
            setter(text)

    def _draw_histogram(self) -> None:
        if self.result is None:
            return
        h = self.result.histogram
        k = h.lengths.astype(np.float64)
        obs = h.observed.astype(np.float64)
        exp = h.expected
        if self.log.isChecked():
            def tf(v):
                with np.errstate(divide="ignore"):
                    y = np.log10(np.where(v > 0, v, np.nan))
                return np.where(np.isfinite(y) & (y > LOG_FLOOR), y - LOG_FLOOR, 0.0)
            self.obs_bars.setOpts(x=k - 0.2, height=tf(obs), y0=LOG_FLOOR)
            self.exp_bars.setOpts(x=k + 0.2, height=tf(exp), y0=LOG_FLOOR)
            top = int(np.ceil(np.log10(max(obs.max(), exp.max(), 1))))
            self.hist_plot.getAxis("left").setTicks([[(float(e), f"{10 ** e:,}") for e in range(top + 1)], []])
            self.hist_plot.setLabel("left", "slots (log scale)", color=ink())
            y_range = (LOG_FLOOR, max(0.0, float(np.log10(max(obs.max(), exp.max(), 1.0)))))
        else:
            self.obs_bars.setOpts(x=k - 0.2, height=obs, y0=0)
            self.exp_bars.setOpts(x=k + 0.2, height=exp, y0=0)
            self.hist_plot.getAxis("left").setTicks(None)
            self.hist_plot.setLabel("left", "slots", color=ink())
            y_range = (0.0, float(max(obs.max(), exp.max(), 1.0)))
        self.hist_plot.getAxis("bottom").setTicks(
            [[(float(v), str(int(v))) for v in k[::max(1, len(k) // 25)]], []])
        # the extent is known: no autoRange walking the bars' bounds
        self.hist_plot.vb.setRange(xRange=(-0.4, float(k[-1]) + 0.4), yRange=y_range)

    def _fill_table(self) -> None:
        rows = self.result.histogram.rows()
        self.table.setRowCount(len(rows))
        for r, (k, o, e) in enumerate(rows):
            items = [QTableWidgetItem(f"{k}"), QTableWidgetItem(f"{o:,}"),
                     QTableWidgetItem(f"{e:,.1f}" if e >= 0.05 else f"{e:.2g}")]
            # counts far above what a uniform hash gives (a skewed or overloaded index) in red
            if o > e + 4 * np.sqrt(e + 1):
                for it in items:
                    it.setForeground(QBrush(QColor(200, 0, 0)))
            for c, it in enumerate(items):
                it.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                self.table.setItem(r, c, it)

    def _set_stats(self) -> None:
        res = self.result
        s = res.stats
        f = self.index_file(res.name)
        hsc = f.header.hashSlotCount if f is not None else 0
        longest = ", ".join(f"slot {slot:,} ({n})" for slot, n in s.longest) or "-"
        warn = ""
        if s.reachable != s.entries:
            warn = (f"<br><span style='color:#c00'>{s.entries - s.reachable:,} entries are not reachable from any "
                    f"slot (broken or overwritten chains)</span>" if s.reachable < s.entries else
                    f"<br><span style='color:#c00'>walks meet {s.reachable:,} entries for {s.entries:,} written "
                    f"(shared tails or cycles)</span>")
        self.stats_label.setText(
            f"<b>{html.escape(res.name)}</b>: {s.entries:,} entries in {s.slots:,} slots, "
            f"load factor <b>{s.load:.4g}</b>; used slots <b>{s.used_slots:,}</b> "
            f"({100.0 * s.used_slots / s.slots:.2f}%; a uniform hash expects {s.expected_used:,.1f}); "
            f"header hashSlotCount {hsc:,}; mean chain of a used slot {s.mean_used:.3g}; "
            f"longest chains: {longest}. Click the map to walk a chain." + warn)

    # ---- interaction -------------------------------------------------------------------------------
    def bin_at(self, row: int, col: int) -> tuple[int, int] | None:
        return self.heat.slot_range(row, col) if self.heat is not None else None

    def activate_pixel(self, row: int, col: int) -> int | None:
        """Emit slotActivated for the longest chain in the pixel's bin; returns the slot."""
        rng = self.bin_at(row, col)
        if rng is None or self.result is None:
            return None
        slot = A.longest_slot_in(self.result.lengths, *rng)
        self.slotActivated.emit(self.result.name, slot)
        return slot

    def _pixel(self, scene_pos):
        if self.heat is None or not self.heat_plot.vb.sceneBoundingRect().contains(scene_pos):
            return None
        p = self.heat_plot.vb.mapSceneToView(scene_pos)
        row, col = int(np.floor(p.y())), int(np.floor(p.x()))
        return (row, col) if self.bin_at(row, col) is not None else None

    def describe_pixel(self, row: int, col: int) -> str:
        lo, hi = self.bin_at(row, col)
        if self.result is None or self.heat.how == "used":
            hi = min(hi, self._heat_slots)
            used = int(self.heat.image.ravel()[row * self.heat.image.shape[1] + col])
            return f"slots {lo:,} – {hi - 1:,}: {used:,} used of {hi - lo:,}" if hi - lo > 1 else \
                f"slot {lo:,}: {'used' if used else 'empty'}"
        hi = min(hi, len(self.result.lengths))
        seg = self.result.lengths[lo:hi]
        best = A.longest_slot_in(self.result.lengths, lo, hi)
        if hi - lo == 1:
            return f"slot {lo:,}: chain length {int(seg[0])}"
        return (f"slots {lo:,} – {hi - 1:,}: longest chain {int(seg.max())} (slot {best:,}), "
                f"mean {seg.mean():.3g}, used {int(np.count_nonzero(seg)):,} of {hi - lo:,}")

    def _hover(self, scene_pos) -> None:
        px = self._pixel(scene_pos)
        if px is None:
            return
        QToolTip.showText(QCursor.pos(), self.describe_pixel(*px), self.heat_widget)

    def _clicked(self, ev) -> None:
        if ev.button() != Qt.LeftButton:
            return
        px = self._pixel(ev.scenePos())
        if px is not None:
            self.activate_pixel(*px)
