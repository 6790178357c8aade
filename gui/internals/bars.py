"""A pyqtgraph plot of horizontal file bars, one row per file, x = fraction of the file.

Each row is a `Segments` run-length map over [0, size). Only the visible rows and x range
are drawn, at the view's pixel width, as one RGBA image: a bar is re-sampled from its
segments whenever the range or size changes, so a 1 GiB file with a million records costs
no more to draw than a tiny one."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QTimer
from PySide6.QtGui import QFont

from engine import analysis as A

SUB_ROWS = 10          # image rows per file row: 2 transparent, 7 bar, 1 transparent
BAR_SUB_ROWS = slice(2, 9)
VISIBLE_ROWS = 12      # rows shown before the user scrolls
ZOOM_BELOW = 0.25      # when every bar is used less than this, start zoomed to the used part


class PercentAxis(pg.AxisItem):
    """x axis in percent of the file, with enough digits for deep zooms."""

    def tickStrings(self, values, scale, spacing):
        digits = max(0, int(np.ceil(-np.log10(max(spacing * 100, 1e-12)))))
        return [f"{v * 100:.{digits}f}%" for v in values]


@dataclass
class BarRow:
    label: str
    segments: A.Segments
    size: int                                  # x = position / size
    numbers: dict = field(default_factory=dict)  # what the tooltip tells, for tests and callers
    describe: Callable[[int], str] | None = None   # position -> tooltip text
    open_at: Callable[[int], int | None] | None = None  # position -> commitLogOffset to open


class BarChart:
    """Owns one PlotItem. `set_rows(rows, colors)`; colors maps category id -> RGB."""

    def __init__(self, plot: pg.PlotItem, title: str, x_label: str):
        self.plot = plot
        self.rows: list[BarRow] = []
        self.title = title
        self.colors: dict[int, tuple[int, int, int]] = {}
        plot.setTitle(title, color="#202020", size="11pt")
        plot.invertY(True)
        plot.setMenuEnabled(False)
        plot.hideButtons()
        plot.showGrid(x=True, y=False, alpha=0.25)
        plot.setAxisItems({"bottom": PercentAxis("bottom")})
        font = QFont()
        font.setPointSize(8)
        for name in ("left", "bottom"):
            ax = plot.getAxis(name)
            ax.setTextPen("#202020")
            ax.setPen("#808080")
            ax.setStyle(tickFont=font)
            ax.enableAutoSIPrefix(False)
        plot.setLabel("bottom", x_label, color="#202020")
        plot.getAxis("left").setWidth(260)
        self.vb = plot.getViewBox()
        self.image = pg.ImageItem(axisOrder="row-major")
        plot.addItem(self.image)
        self._timer = QTimer(plot)      # dies with the plot, never fires on a deleted view
        self._timer.setSingleShot(True)
        self._timer.setInterval(25)
        self._timer.timeout.connect(self.render)
        self.vb.sigRangeChanged.connect(lambda *_: self._timer.start())
        self.vb.sigResized.connect(lambda *_: self._timer.start())
        self.rendered = 0     # how many times the image was rebuilt (tests)

    def set_rows(self, rows: list[BarRow], colors: dict[int, tuple[int, int, int]], keep_view: bool = False) -> None:
        """keep_view: rows arriving while a view fills in (more of them, or the same ones again)
        leave the range the user is looking at alone once there were rows."""
        had = bool(self.rows)
        self.rows = rows
        self.colors = colors
        n = max(1, len(rows))
        self.plot.getAxis("left").setTicks([[(i + 0.5, r.label) for i, r in enumerate(rows)], []])
        self.vb.setLimits(xMin=0, xMax=1, yMin=0, yMax=n, minXRange=1e-9, maxYRange=n)
        if keep_view and had:
            (_, _), (y0, y1) = self.vb.viewRange()
            if y1 - y0 < min(n, VISIBLE_ROWS):   # rows came in under a view showing fewer
                self.vb.setYRange(y0, y0 + min(n, VISIBLE_ROWS), padding=0)
        else:
            self.vb.setRange(xRange=(0, self.initial_width()), yRange=(0, min(n, VISIBLE_ROWS)), padding=0)
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
