"""A pyqtgraph plot of horizontal file bars, one row per file, x = fraction of the file.

Each row is a `Segments` run-length map over [0, size). Rows have a fixed height (ROW_PX), so
their names stay readable however many files there are: a scroll bar (and the mouse wheel)
moves through the rows, Ctrl+wheel or a drag zooms and pans along the files, and nothing zooms
the rows themselves. Only the visible rows and x range are drawn, at the view's pixel width,
as one RGBA image: a bar is re-sampled from its segments whenever the range or size changes,
so a 1 GiB file with a million records costs no more to draw than a tiny one."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, QTimer
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QHBoxLayout, QScrollBar, QWidget

from engine import analysis as A

from gui.plot_theme import ink, mid, paper

SUB_ROWS = 10          # image rows per file row: 2 transparent, 7 bar, 1 transparent
BAR_SUB_ROWS = slice(2, 9)
ROW_PX = 20            # pixels per file row, at any number of files: labels never pile up
WHEEL_ROWS = 3         # rows per wheel step
CHROME_PX = 100        # a chart's title and x axis, beside its rows
ZOOM_BELOW = 0.25      # when every bar is used less than this, start zoomed to the used part


class PercentAxis(pg.AxisItem):
    """x axis in percent of the file, with enough digits for deep zooms."""

    def tickStrings(self, values, scale, spacing):
        digits = max(0, int(np.ceil(-np.log10(max(spacing * 100, 1e-12)))))
        return [f"{v * 100:.{digits}f}%" for v in values]


class RowsViewBox(pg.ViewBox):
    """The wheel scrolls the rows; Ctrl+wheel zooms along the files (never across the rows)."""

    def __init__(self, chart: "BarChart"):
        super().__init__(invertY=True)
        self.chart = chart
        self.setMouseEnabled(x=True, y=False)

    def wheelEvent(self, ev, axis=None):
        if ev.modifiers() & Qt.ControlModifier:
            super().wheelEvent(ev, axis=0)
            return
        steps = ev.delta() / 120 if hasattr(ev, "delta") else 0
        self.chart.scroll_rows(-int(np.sign(steps)) * max(1, int(abs(steps))) * WHEEL_ROWS)
        ev.accept()


@dataclass
class BarRow:
    label: str
    segments: A.Segments
    size: int                                  # x = position / size
    numbers: dict = field(default_factory=dict)  # what the tooltip tells, for tests and callers
    describe: Callable[[int], str] | None = None   # position -> tooltip text
    open_at: Callable[[int], int | None] | None = None  # position -> commitLogOffset to open


class BarChart:
    """One chart with its own widget (`widget`: the plot and a vertical scroll bar).
    `set_rows(rows, colors)`; colors maps category id -> RGB."""

    def __init__(self, title: str, x_label: str, parent: QWidget | None = None):
        self.rows: list[BarRow] = []
        self.title = title
        self.colors: dict[int, tuple[int, int, int]] = {}
        self.top = 0                    # the first row shown
        self.widget = QWidget(parent)
        self.glw = pg.GraphicsLayoutWidget(self.widget)
        self.glw.setBackground(paper())
        self.scroll = QScrollBar(Qt.Vertical, self.widget)
        self.scroll.setRange(0, 0)
        self.scroll.valueChanged.connect(self._scrolled)
        lay = QHBoxLayout(self.widget)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.glw, 1)
        lay.addWidget(self.scroll)
        self.vb = RowsViewBox(self)
        plot = self.plot = self.glw.addPlot(row=0, col=0, viewBox=self.vb, axisItems={"bottom": PercentAxis("bottom")})
        plot.setTitle(title, color=ink(), size="11pt")
        plot.setMenuEnabled(False)
        plot.hideButtons()
        plot.showGrid(x=True, y=False, alpha=0.25)
        font = QFont()
        font.setPointSize(8)
        for name in ("left", "bottom"):
            ax = plot.getAxis(name)
            ax.setPen(mid())
            ax.setTextPen(ink())   # after setPen: the axis label takes the text colour
            ax.setStyle(tickFont=font)
            ax.enableAutoSIPrefix(False)
        plot.setLabel("bottom", x_label, color=ink())
        plot.getAxis("left").setWidth(260)
        self.image = pg.ImageItem(axisOrder="row-major")
        plot.addItem(self.image)
        self._timer = QTimer(self.widget)      # dies with the widget, never fires on a deleted view
        self._timer.setSingleShot(True)
        self._timer.setInterval(25)
        self._timer.timeout.connect(self.render)
        self.vb.sigRangeChanged.connect(lambda *_: self._timer.start())
        self.vb.sigResized.connect(lambda *_: self._fit_rows())
        self.rendered = 0     # how many times the image was rebuilt (tests)

    # ---- rows on screen ------------------------------------------------------------------------
    def visible_rows(self) -> int:
        """How many rows of ROW_PX the plot has room for (at least one)."""
        return max(1, int((self.vb.height() or ROW_PX * 12) // ROW_PX))

    def wanted_height(self) -> int:
        """Pixels for every row (and the title and axis): what a layout would give if it could."""
        return CHROME_PX + ROW_PX * max(1, len(self.rows))

    def scroll_rows(self, delta: int) -> None:
        self.scroll.setValue(self.scroll.value() + delta)

    def scroll_to_row(self, row: int) -> None:
        """Bring `row` on screen (tests, and a caller that names a file)."""
        vis = self.visible_rows()
        if not self.top <= row < self.top + vis:
            self.scroll.setValue(max(0, row - vis // 2))

    def shown_rows(self) -> tuple[int, int]:
        """[first, end) of the rows on screen."""
        return self.top, min(len(self.rows), self.top + self.visible_rows())

    def _scrolled(self, value: int) -> None:
        self.top = int(value)
        self._apply_y()

    def _fit_rows(self) -> None:
        """The view was resized: as many fixed-height rows as fit; the scroll bar covers the rest."""
        n, vis = len(self.rows), self.visible_rows()
        self.scroll.blockSignals(True)
        self.scroll.setRange(0, max(0, n - vis))
        self.scroll.setPageStep(vis)
        self.scroll.setSingleStep(1)
        self.scroll.setValue(min(self.top, max(0, n - vis)))
        self.scroll.blockSignals(False)
        self.scroll.setVisible(n > vis)
        self.top = self.scroll.value()
        self._apply_y()

    def _apply_y(self) -> None:
        vis = self.visible_rows()
        self.vb.setLimits(yMin=0, yMax=max(len(self.rows), vis) + 0.0, minYRange=vis, maxYRange=vis)
        self.vb.setYRange(self.top, self.top + vis, padding=0)
        self._timer.start()

    def set_rows(self, rows: list[BarRow], colors: dict[int, tuple[int, int, int]], keep_view: bool = False) -> None:
        """keep_view: rows arriving while a view fills in (more of them, or the same ones again)
        leave the range the user is looking at alone once there were rows."""
        had = bool(self.rows)
        self.rows = rows
        self.colors = colors
        self.plot.getAxis("left").setTicks([[(i + 0.5, r.label) for i, r in enumerate(rows)], []])
        self.vb.setLimits(xMin=0, xMax=1, minXRange=1e-9)
        if not (keep_view and had):
            self.top = 0
            self.vb.setXRange(0, self.initial_width(), padding=0)
        self._fit_rows()
        self.render()

    def initial_width(self) -> float:
        """1 (whole files), or the used part plus a margin when every bar is nearly empty."""
        used = max((r.segments.used_extent() / r.size for r in self.rows if r.size), default=1.0)
        if used >= ZOOM_BELOW:
            return 1.0
        return float(min(1.0, max(used * 1.15, 1e-7)))

    @property
    def zoomed(self) -> bool:
        return self.vb.viewRange()[0][1] < 0.999

    def row_at(self, y: float) -> int | None:
        i = int(np.floor(y))
        frac = y - i
        if 0 <= i < len(self.rows) and BAR_SUB_ROWS.start / SUB_ROWS <= frac < BAR_SUB_ROWS.stop / SUB_ROWS:
            return i
        return None

    def position(self, row: int, x: float) -> int:
        r = self.rows[row]
        return int(min(max(x, 0.0), 1.0) * r.size) if x < 1 else r.size - 1

    def render(self) -> None:
        """Rebuild the image for the visible rows and x range at the view's pixel width."""
        self.rendered += 1
        if not self.rows:
            self.image.clear()
            return
        (x0, x1), (y0, y1) = self.vb.viewRange()
        x0, x1 = max(0.0, x0), min(1.0, x1)
        r0, r1 = max(0, int(np.floor(y0))), min(len(self.rows), int(np.ceil(y1)))
        width = int(max(16, min(4096, self.vb.width() or 800)))
        if x1 <= x0 or r1 <= r0:
            self.image.clear()
            return
        lut_ids = sorted(self.colors)
        lut = np.zeros((len(lut_ids) + 1, 4), dtype=np.uint8)
        for i, cid in enumerate(lut_ids):
            lut[i] = (*self.colors[cid], 255)
        img = np.zeros(((r1 - r0) * SUB_ROWS, width, 4), dtype=np.uint8)
        for k, r in enumerate(self.rows[r0:r1]):
            cats = r.segments.sample(x0 * r.size, x1 * r.size, width)
            idx = np.searchsorted(lut_ids, cats)
            idx[(idx >= len(lut_ids)) | (np.asarray(lut_ids)[np.minimum(idx, len(lut_ids) - 1)] != cats)] = len(lut_ids)
            img[k * SUB_ROWS + BAR_SUB_ROWS.start:k * SUB_ROWS + BAR_SUB_ROWS.stop] = lut[idx][None, :, :]
        self.image.setImage(img, autoLevels=False, levels=(0, 255))
        self.image.setRect(QRectF(x0, r0, x1 - x0, r1 - r0))
