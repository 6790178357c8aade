"""TimerWheelView: the 5.x timer wheel (`timerwheel`) at a glance, beside the index slot map.

Top left, all slotsTotal x 2 slots binned to the pixels available (units per slot, max per
pixel; the same indexed-image heat map as the index slot view), the read clock's slot marked;
below, the occupied slots by slot time around timercheck's read clock: grey slots the dequeue
has processed, orange ones still due. Right, the occupied slots as a lazy table; selecting one
lists its unit chain (lastPos back through prevPos), double-click opens the record its newest
unit schedules. Slots are never cleared after delivery (STORE_FORMAT_5X 1.3), so a processed
slot still shows its units."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QLabel, QPlainTextEdit, QSplitter, QTableView, \
    QVBoxLayout, QWidget

from engine.format.timer_layout import unit_kind

from . import heatmap as H
from gui.plot_theme import ink, paper
from .slot_heatmap import COLORMAP, DOTS_UP_TO, IndexedImageItem, _axis_style
from gui.models.columns_model import ColumnsModel
from gui.timefmt import format_ms_readable
from gui.workers import Background, RefreshWhenShown

PROCESSED = QColor(150, 150, 150)
DUE = QColor(255, 127, 14)
BARS_UP_TO = 5000          # occupied slots drawn as bars up to this many, else as a curve
CHAIN_LINES = 500          # units listed for a selected slot


def wheel_data(ts) -> tuple:
    """On a worker: the occupied slots, units per slot for every slot, and the summary (the first
    call reads the wheel's data extents and detects the precision)."""
    occ = ts.wheel.occupied
    nums = np.zeros(ts.slots, dtype=np.int32)
    nums[occ["index"]] = np.maximum(occ["num"], 0)
    return occ, nums, ts.summary()


class WheelSlotModel(ColumnsModel):
    """The occupied slots (WHEEL_SLOT_NATIVE rows), cells made on demand."""
    COLUMNS = ["slot", "slot time", "firstPos", "lastPos", "num", "state"]

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows = np.empty(0)
        self.precision = 1000
        self.last_read = -1
        self.utc = False

    def set_rows(self, rows: np.ndarray, precision: int, last_read: int) -> None:
        self.beginResetModel()
        self.rows, self.precision, self.last_read = rows, precision, last_read
        self.endResetModel()

    def processed(self, r) -> bool:
        return self.last_read >= 0 and int(r["time"]) * self.precision <= self.last_read

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid():
            return None
        r = self.rows[index.row()]
        c = index.column()
        if role == Qt.DisplayRole:
            if c == 0:
                return f"{int(r['index']):,}"
            if c == 1:
                return format_ms_readable(int(r["time"]) * self.precision, self.utc)
            if c == 5:
                return "—" if self.last_read < 0 else ("processed" if self.processed(r) else "due")
            return str(int(r[("firstPos", "lastPos", "num")[c - 2]]))
        if role == Qt.ForegroundRole and c == 5 and self.last_read >= 0:
            return QBrush(PROCESSED.darker(130) if self.processed(r) else DUE.darker(120))
        if role == Qt.TextAlignmentRole and c != 1 and c != 5:
            return int(Qt.AlignRight | Qt.AlignVCenter)
        return None


class TimerWheelView(RefreshWhenShown, QWidget):
    openRequested = Signal("qint64")    # commitlog offset of the record a slot's newest unit schedules
    updated = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._store = None
        self._dirty = False
        self.timer = None
        self.heat: H.SlotHeatmap | None = None
        self.nums: np.ndarray | None = None
        self.background = Background(self)
        self.background.failed.connect(lambda ch, text: self.summary.setText(
            "Could not read the timer wheel:\n" + text.strip().splitlines()[-1]))
        self.summary = QLabel("No store open.")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextSelectableByMouse)
        # the whole wheel: an 8-bit indexed heat map, as the index slot view draws its slots
        self.heat_widget = pg.GraphicsLayoutWidget()
        self.heat_widget.setBackground(paper())
        self.heat_plot = self.heat_widget.addPlot(row=0, col=0)
        self.heat_plot.setMenuEnabled(False)
        self.heat_plot.hideButtons()    # no auto-range "A" on the map's corner: the map always fits
        self.heat_plot.invertY(True)
        self.heat_plot.hideAxis("bottom")
        self.heat_plot.hideAxis("left")
        self.cmap = pg.colormap.get(COLORMAP)
        lut = np.zeros((256, 4), dtype=np.uint8)
        lut[:255] = self.cmap.getLookupTable(0.0, 1.0, 255, alpha=True)
        lut[0] = (236, 236, 240, 255)    # empty slots: a light grey, so the wheel's extent shows
        self.image = IndexedImageItem(lut)
        self.heat_plot.addItem(self.image)
        self.dots = pg.ScatterPlotItem(pen=pg.mkPen(40, 40, 40, 200, width=1), size=9, pxMode=True)
        self.clock = pg.ScatterPlotItem(symbol="t", size=14, pen=pg.mkPen(20, 90, 200, width=2), brush=None,
                                        pxMode=True)
        self.heat_plot.addItem(self.dots)
        self.heat_plot.addItem(self.clock)
        # the occupied slots by time, around the read clock
        self.bars_widget = pg.PlotWidget(background=paper())
        self.bars_plot = self.bars_widget.getPlotItem()
        self.bars_plot.setMenuEnabled(False)
        _axis_style(self.bars_plot)
        self.bars_plot.showGrid(y=True, alpha=0.2)
        self.bars_plot.setLabel("left", "units in slot (num)", color=ink())
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.8)
        self.curve = self.bars_plot.plot([], [], pen=pg.mkPen(DUE, width=1))
        self.bars_plot.addItem(self.bars)
        self.clock_line = pg.InfiniteLine(angle=90, pen=pg.mkPen(20, 90, 200, width=2), label="read clock",
                                          labelOpts={"position": 0.92, "color": (20, 90, 200)})
        self.bars_plot.addItem(self.clock_line)
        # the occupied slots as a table, and the chain of the selected one
        self.model = WheelSlotModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.selectionModel().currentRowChanged.connect(lambda cur, _: self.show_chain(cur.row()))
        self.table.doubleClicked.connect(lambda ix: self.open_slot(ix.row()))
        self.chain = QPlainTextEdit()
        self.chain.setReadOnly(True)
        self.chain.setLineWrapMode(QPlainTextEdit.NoWrap)
        f = QFont("monospace")
        f.setStyleHint(QFont.Monospace)
        self.chain.setFont(f)
        left = QSplitter(Qt.Vertical)
        left.addWidget(self.heat_widget)
        left.addWidget(self.bars_widget)
        left.setSizes([330, 300])
        right = QSplitter(Qt.Vertical)
        right.addWidget(self.table)
        right.addWidget(self.chain)
        right.setSizes([380, 250])
        split = QSplitter(Qt.Horizontal)
        split.addWidget(left)
        split.addWidget(right)
        split.setSizes([520, 580])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.summary)
        lay.addWidget(split, 1)
        self._rebin_timer = QTimer(self)
        self._rebin_timer.setSingleShot(True)
        self._rebin_timer.setInterval(60)
        self._rebin_timer.timeout.connect(self._draw_heat)
        self.heat_plot.vb.sigResized.connect(lambda *_: self._rebin_timer.start())

    # ---- store --------------------------------------------------------------------------------------
    def set_store(self, store) -> None:
        self.background.cancel()
        self._store = store
        self.timer = store.timer if store is not None else None
        self.nums = self.heat = None
        self.image.clear()
        self.dots.clear()
        self.clock.clear()
        self.model.set_rows(np.empty(0), 1000, -1)
        self.chain.setPlainText("")
        self.summary.setText("No store open." if store is None else
                             "This store has no timer store." if self.timer is None else "Reading the wheel…")
        self.mark_stale(self.timer is not None)

    def set_utc(self, utc: bool) -> None:
        self.model.utc = utc
        self.model.layoutChanged.emit()

    def refresh(self) -> None:
        self._dirty = False
        ts = self.timer
        if ts is None or ts.wheel is None:
            if ts is not None:
                self.summary.setText("This timer store has no timerwheel file.")
            return
        self.background.submit("wheel", wheel_data, ts, on_done=self._apply)

    def _apply(self, data: tuple) -> None:
        occ, self.nums, s = data
        ts = self.timer
        self.model.set_rows(occ, ts.precision_ms, ts.last_read_time_ms)
        self._draw_heat()
        self._draw_bars()
        read = ts.last_read_time_ms
        due = int(np.count_nonzero(occ["time"] * ts.precision_ms > read)) if read >= 0 else None
        self.summary.setText(
            f"<b>timerwheel</b>: {ts.slots:,} slots ({s['wheelFileSize']:,} bytes: 2 laps of "
            f"{ts.slots // 2 * ts.precision_ms / 86_400_000:g} days at {ts.precision_ms} ms, precision from the {s['precisionSource']}); <b>{len(occ):,}</b> slots occupied"
            + (f", {due:,} of them due after the read clock ({format_ms_readable(read, self.model.utc)}, "
               f"timercheck lastReadTimeMs)" if due is not None else "; no timercheck: the read clock is unknown")
            + f". timerlog: {s['timerlogUnits']:,} units in {len(s['timerlogFiles'])} file(s) of "
              f"{s['timerlogFileSize'] or 0:,} bytes. Slots are never cleared after delivery.")
        self.updated.emit()

    # ---- drawing --------------------------------------------------------------------------------------
    def _budget(self) -> tuple[int, int]:
        vb = self.heat_plot.vb
        return max(64, int(vb.width())), max(48, int(vb.height()))

    def _draw_heat(self) -> None:
        if self.nums is None or not len(self.nums):
            return
        w, h = self._budget()
        heat = H.slot_heatmap(self.nums, w, h, "max")
        self.heat = heat
        self.image.setImage(H.heat_indices(heat), autoLevels=False)
        rows, cols = heat.image.shape
        self.image.setRect(QRectF(0, 0, cols, rows))
        self.heat_plot.vb.setRange(xRange=(0, cols), yRange=(0, rows), padding=0)
        flat = heat.image.ravel()[:heat.bins]
        used = np.flatnonzero(flat)
        if heat.slots_per_bin > 1 and len(used) <= DOTS_UP_TO:   # single lit pixels would vanish
            r, c = np.divmod(used, cols)
            lut = self.cmap.getLookupTable(0.0, 1.0, 256, alpha=False)
            colors = lut[np.clip((flat[used] / heat.top * 255).astype(int), 0, 255)]
            self.dots.setData(x=c + 0.5, y=r + 0.5, brush=[pg.mkBrush(*col) for col in colors])
        else:
            self.dots.clear()
        ts = self.timer
        if ts is not None and ts.last_read_time_ms >= 0:
            r, c = divmod(ts.slot_of(ts.last_read_time_ms) // heat.slots_per_bin, cols)
            self.clock.setData(x=[c + 0.5], y=[r + 0.5])
        self.heat_plot.setTitle(f"all {len(self.nums):,} slots, {heat.slots_per_bin:,} per pixel (max units per "
                                f"slot, top {heat.top:g}); ▲ read clock", color=ink(), size="9pt")

    def _draw_bars(self) -> None:
        ts = self.timer
        occ = ts.wheel.occupied
        order = np.argsort(occ["time"], kind="stable")
        t_ms = occ["time"][order].astype(np.int64) * ts.precision_ms
        num = occ["num"][order].astype(np.float64)
        read = ts.last_read_time_ms
        base = read if read >= 0 else (int(t_ms[0]) if len(t_ms) else 0)
        x = (t_ms - base) / 1000.0
        self.bars_plot.setLabel("bottom", "slot time, s from the read clock" if read >= 0 else
                                "slot time, s from the first occupied slot", color=ink())
        width = max(ts.precision_ms / 1000.0 * 0.8, 1e-3)
        if len(x) <= BARS_UP_TO:
            brushes = [pg.mkBrush(PROCESSED if (read >= 0 and t <= read) else DUE) for t in t_ms.tolist()]
            self.bars.setOpts(x=x, height=num, width=width, brushes=brushes, pen=None)
            self.curve.setData([], [])
        else:
            self.bars.setOpts(x=[], height=[], width=width)
            self.curve.setData(x, num)
        self.clock_line.setVisible(read >= 0)
        self.clock_line.setPos(0)
        if len(x):
            lo, hi = float(min(x.min(), 0.0)), float(max(x.max(), 0.0))
            pad = max(1.0, (hi - lo) * 0.03)
            self.bars_plot.vb.setRange(xRange=(lo - pad, hi + pad), yRange=(0, float(num.max()) * 1.1), padding=0)
        self.bars_plot.setTitle(f"occupied slots by time: grey processed, orange due ({len(x):,} slots)",
                                color=ink(), size="9pt")

    # ---- a slot's chain ----------------------------------------------------------------------------------
    def slot_units(self, row: int) -> list:
        ts = self.timer
        if ts is None or ts.timerlog is None or not (0 <= row < len(self.model.rows)):
            return []
        chain = ts.timerlog.chain(int(self.model.rows[row]["lastPos"]), CHAIN_LINES)
        return [ts.timerlog.unit_at(p) for p in chain]

    def show_chain(self, row: int) -> None:
        if not (0 <= row < len(self.model.rows)):
            self.chain.setPlainText("")
            return
        r = self.model.rows[row]
        units = self.slot_units(row)
        lines = [f"slot {int(r['index']):,}: {int(r['num'])} unit(s), chain from lastPos {int(r['lastPos'])} "
                 f"back through prevPos (newest first); double-click a slot to open its newest record", ""]
        lines += [f"pos {int(u['pos']):>9}  {unit_kind(int(u['magic'])):<6}  -> record {int(u['offsetPy']):>10} "
                  f"({int(u['sizePy'])} B)  written {format_ms_readable(int(u['currWriteTimeMs']), self.model.utc)} "
                  f"+{int(u['delayTime'])} ms" for u in units]
        if len(units) < int(r["num"]):
            lines.append(f"... {int(r['num']) - len(units)} more not listed (or not in the timerlog)")
        self.chain.setPlainText("\n".join(lines))

    def open_slot(self, row: int) -> None:
        units = self.slot_units(row)
        if units:
            self.openRequested.emit(int(units[0]["offsetPy"]))

    def select_slot(self, slot: int) -> bool:
        hit = np.flatnonzero(self.model.rows["index"] == slot) if len(self.model.rows) else []
        if not len(hit):
            return False
        self.table.selectRow(int(hit[0]))
        return True
