"""The plots follow the application's palette (light or dark; see gui.palette):

    theme.paper(), theme.ink(), theme.mid()    # colours for a plot being built
    theme.restyle(widget)                      # every plot under `widget`, again (palette changed)"""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsView, QWidget

from gui.palette import ink, is_dark, mid, paper  # noqa: F401 - the plots' colours, one definition


def style_plot(plot: pg.PlotItem) -> None:
    """Title, axes and axis labels of one plot in the palette's colours."""
    fg, line = ink(), mid()
    title = plot.titleLabel
    if title.text:
        title.setText(title.text, color=fg)
    for name in ("left", "bottom", "right", "top"):
        if name in plot.axes:
            ax = plot.getAxis(name)
            ax.setPen(line)
            ax.setTextPen(fg)     # after setPen: the axis label follows the last of the two


def restyle(root: QWidget) -> None:
    """Every pyqtgraph view under `root` (and `root` itself) in the palette's colours."""
    views = [w for w in [root, *root.findChildren(QGraphicsView)] if isinstance(w, QGraphicsView)]
    for v in views:
        if not isinstance(v, pg.GraphicsView):   # a plain scene (collision chains): its background only
            if v.scene() is not None:
                v.scene().setBackgroundBrush(QColor(paper()))
            continue
        v.setBackground(paper())
        for item in v.scene().items():
            if isinstance(item, pg.PlotItem):
                style_plot(item)
            elif isinstance(item, pg.LegendItem):
                item.setLabelTextColor(ink())
