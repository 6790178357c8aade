"""The scan panel over more stores than the session's: a list of folders, a broker column."""
from types import SimpleNamespace

import pytest

pytest.importorskip("PySide6")
from PySide6.QtCore import Qt  # noqa: E402

import pyqtgraph as pg  # noqa: E402

from conftest import manifest, unpack  # noqa: E402
from gui.views.scan_plot import plot_result  # noqa: E402
from scan_support import SHOTS, panel  # noqa: E402,F401


def test_two_stores_in_one_local_job(qtbot, panel):
    panel.engine_box.setCurrentIndex(panel.engine_box.findData("local"))
    panel.job_box.setCurrentText("topic-stats")
    panel.stores_list.addItem(str(unpack("v5")))
    assert panel.extra_stores() == [str(unpack("v5"))] and panel.stores_list.isVisible()
    with qtbot.waitSignal(panel.finished, timeout=60_000) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.LeftButton)
    result = blocker.args[0]
    assert [s["broker"] for s in result.stores] == ["small", "v5"]
    assert panel.model.columns[0] == "broker" and {r["broker"] for r in panel.model.rows} == {"small", "v5"}
    for b in ("small", "v5"):
        assert sum(r["messages"] for r in panel.model.rows if r["broker"] == b) == len(manifest(b)["messages"])
    bars = [i for i in panel.plot.plotItem.items if isinstance(i, pg.BarGraphItem)]
    assert len(bars) == 2   # a bar per broker in each topic's group, side by side
    assert [label.text for _sample, label in panel.plot.plotItem.legend.items] == ["small", "v5"]
    for b, bar in zip(("small", "v5"), bars):
        assert bar.opts["height"].sum() == len(manifest(b)["messages"])
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert panel.grab().save(str(SHOTS / "scan-panel-stores.png"))


def test_plots_keep_brokers_apart(qtbot):
    """Traffic: a line per broker and topic (two brokers' buckets are never merged into one
    point); sizes: a bar per broker in each group; one store: no legend frame for bars."""
    w = pg.PlotWidget()
    qtbot.addWidget(w)
    w.addLegend()
    rows = [{"broker": b, "topic": "T", "bucketStart": t, "messages": n}
            for b, base in (("a", 10), ("b", 1)) for t, n in ((60_000, base), (120_000, base + 1))]
    assert plot_result(w, SimpleNamespace(job="traffic", rows=rows), 60_000)
    curves = [i for i in w.plotItem.items if isinstance(i, pg.PlotDataItem)]
    assert sorted(c.name() for c in curves) == ["a: T", "b: T"]
    assert sorted(tuple(c.yData) for c in curves) == [(1.0, 2.0), (10.0, 11.0)]
    sizes = [{"broker": b, "sizeFrom": s, "messages": n} for b in ("a", "b") for s, n in ((128, 3), (1024, 4))]
    assert plot_result(w, SimpleNamespace(job="size-histogram", rows=sizes), None)
    assert [bar.opts["height"].tolist() for bar in w.plotItem.items if isinstance(bar, pg.BarGraphItem)] == \
        [[3.0, 4.0], [3.0, 4.0]]
    one = [{"topic": "T", "messages": 5}, {"topic": "U", "messages": 2}]
    assert plot_result(w, SimpleNamespace(job="topic-stats", rows=one), None)
    assert not w.plotItem.legend.isVisible()
