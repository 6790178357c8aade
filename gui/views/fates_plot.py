"""The Scan tab's fates plot (the `fates` scan job: engine.scan.lineage_job): one stacked bar
per topic and retry group, a segment per fate in a fixed colour, a legend entry per fate."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg

# the fates in stacking order with their colours (the Lineage tab's state colours)
FATE_COLOURS = [("delivered", "#2ca02c"), ("resent", "#98df8a"), ("committed", "#1b7a2b"), ("retried", "#ff7f0e"),
                ("deadLettered", "#d62728"), ("pending", "#f2c12e"), ("rolledBack", "#8c564b"),
                ("unresolved", "#9467bd")]


def fate_label(r: dict) -> str:
    """A bar's name: [broker: ]topic[ / group]."""
    name = r["topic"] + (f" / {r['group']}" if r.get("group") else "")
    return f"{r['broker']}: {name}" if r.get("broker") else name


def plot_fates(p: pg.PlotWidget, rows: list[dict], axis_class) -> list[str]:
    """Stacked bars of `rows` on `p` (bottom axis: `axis_class(labels)`); returns the labels."""
    labels = [fate_label(r) for r in rows]
    p.setAxisItems({"bottom": axis_class(labels)})
    x = np.arange(len(rows), dtype=np.float64)
    base = np.zeros(len(rows), dtype=np.float64)
    for fate, colour in FATE_COLOURS:
        h = np.array([r[fate] for r in rows], dtype=np.float64)
        if not h.any():
            continue
        bars = pg.BarGraphItem(x=x, y0=base.copy(), height=h, width=0.7, brush=colour)
        p.addItem(bars)
        if p.plotItem.legend is not None:
            p.plotItem.legend.addItem(bars, fate)
        base += h
    p.setLabel("left", "lives")
    p.setLabel("bottom", "topic / retry group")
    return labels
