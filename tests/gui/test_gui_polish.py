"""What a new user notices first: times with numeric zone offsets (never CST), the header's
epoch ms with their date, the whole-queue filter (background, progress, Cancel), the tree's
numbers and tooltips, a Messages table that fits 1440 px, topic colours that are never the
red of damage, bar labels that never overlap, the F1 table."""
from __future__ import annotations

import os
import re
import time
from datetime import timedelta, timezone

import numpy as np
import pytest
from PySide6.QtCore import Qt

from conftest import unpack
from engine import MessageStore
from gui import timefmt
from gui.models import message_table as mt
from gui.models.filters import MessageFilter
from guitest_support import dialogs, open_and_wait, screenshot, settings, tile_queue, wait_idle, window  # noqa: F401


# ---- times ----------------------------------------------------------------------------------------
@pytest.fixture
def shanghai():
    """The local zone is Asia/Shanghai, whose abbreviation CST also means US Central and Cuba."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Shanghai"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


def test_times_show_numeric_offsets_never_abbreviations(shanghai):
    assert time.strftime("%Z") == "CST"   # what the machine would call it
    ms = 1732500000123
    assert timefmt.zone_label(False) == "local +08:00" and timefmt.zone_label(True) == "UTC"
    assert timefmt.format_ms(ms) == "2024-11-25T10:00:00.123+08:00"
    assert timefmt.format_ms_readable(ms) == "2024-11-25 10:00:00.123 +08:00"
    assert timefmt.format_epoch_ms(ms) == "1732500000123 (2024-11-25 10:00:00.123 +08:00)"
    assert timefmt.format_epoch_ms(ms, utc=True) == "1732500000123 (2024-11-25 02:00:00.123 +00:00)"
    assert timefmt.format_epoch_ms(ms, tz=timezone(timedelta(hours=-3, minutes=-30))) == \
        "1732500000123 (2024-11-24 22:30:00.123 -03:30)"
    assert timefmt.format_epoch_ms(-1) == "-1" and timefmt.format_epoch_ms(None) == timefmt.MISSING
    assert "CST" not in timefmt.local_zone().tzname(None)


def test_header_tab_shows_epoch_ms_with_date_and_offset(qtbot, window, shanghai):
    store = open_and_wait(qtbot, window, unpack("small"))
    window.act_utc.setChecked(False)
    b = window.browser
    window.show_queue("TopicTest", 0, 0)
    d = b.detail
    qtbot.waitUntil(lambda: d.message is not None and d.message.queueOffset == 0, timeout=5000)
    m = store.get_message("TopicTest", 0, 0, 1).messages[0]
    rows = {d.header.item(r, 0).text(): d.header.item(r, 1).text() for r in range(d.header.rowCount())}
    assert rows["storeTimestamp"] == "1795310726891 (2026-11-22 09:25:26.891 +08:00)" == \
        f"{m.storeTimestamp} (2026-11-22 09:25:26.891 +08:00)"
    assert re.fullmatch(r"\d{13} \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \+08:00\)", rows["bornTimestamp"])
    assert b.model.headerData(mt.COL_TIME, Qt.Horizontal) == "Store time (local +08:00)"
    assert b.model.data(b.model.index(0, mt.COL_TIME)) == "2026-11-22T09:25:26.891+08:00"
    assert window.search.k_begin.zone.text() == "local +08:00"
    from PySide6.QtWidgets import QAbstractItemView
    born = next(r for r in range(d.header.rowCount()) if d.header.item(r, 0).text() == "bornTimestamp")
    d.header.scrollToItem(d.header.item(born, 0), QAbstractItemView.PositionAtTop)
    screenshot(d, "browser-detail-times.png")
    window.act_utc.setChecked(True)
    rows = {d.header.item(r, 0).text(): d.header.item(r, 1).text() for r in range(d.header.rowCount())}
    assert rows["storeTimestamp"] == "1795310726891 (2026-11-22 01:25:26.891 +00:00)"


def test_no_zone_abbreviations_anywhere_in_gui():
    """Every time the browser formats goes through timefmt (or is UTC written as Z / +00:00)."""
    root = os.path.join(os.path.dirname(__file__), "..", "..", "gui")
    offenders = []
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                text = open(os.path.join(dirpath, f), encoding="utf-8").read()
                if "%Z" in text or "tzname" in text.replace("tzname(None)", ""):
                    offenders.append(f)
    assert offenders == []


# ---- whole-queue filter ------------------------------------------------------------------------------


def test_filter_the_whole_queue_in_the_background_and_cancel(qtbot, window, fixture_copy):
    root = fixture_copy("default")
    mid = tile_queue(root, "MidQueue", 25_000)
    tile_queue(root, "BigQueue", 1_000_000)
    store = open_and_wait(qtbot, window, root)
    b = window.browser
    # the whole queue, well past the 10,000 rows the count box scans
    window.show_queue("MidQueue", 0, 0)
    flt = MessageFilter(key="order-dup-001")
    pred = flt.predicate()
    cl = store.commitlog
    expected = [q for q, u in enumerate(mid.tolist()) if (m := cl.get_message(u[0], u[1])) is not None and pred(m)]
    assert expected and expected[-1] > 10_000
    b.f_key.setText("order-dup-001")
    b.f_whole.setChecked(True)
    assert not b.f_count.isEnabled()
    with qtbot.waitSignal(b.model.modelReset, timeout=30_000):
        qtbot.mouseClick(b.f_apply, Qt.LeftButton)
        assert b.scanning and b.f_progress.isVisible() and b.f_cancel.isVisible()
    assert [b.model.offset_of_row(r) for r in range(b.model.rowCount())] == expected
    assert "whole queue [0, 25000)" in b.info.text() and not b.f_progress.isVisible()
    b.clear_filter()
    # a million messages: the UI stays live, progress moves, Cancel stops the scan and keeps the table
    window.show_queue("BigQueue", 0, 0)
    b.f_body.setText("no body holds this")
    b.f_key.clear()
    messages = []
    b.status.connect(messages.append)
    qtbot.mouseClick(b.f_apply, Qt.LeftButton)
    assert b.scanning and b.f_progress.maximum() == 1_000_000
    qtbot.waitUntil(lambda: b.f_progress.value() >= 2048, timeout=20_000)
    b.go_last()   # the table answers while the scan runs
    assert b.table.currentIndex().row() == 999_999
    qtbot.mouseClick(b.f_cancel, Qt.LeftButton)
    assert not b.scanning and not b.f_progress.isVisible() and b.f_apply.isEnabled()
    assert "filter cancelled" in messages and b.model.filtered is None
    assert b.model.rowCount() == 1_000_000 and b.f_progress.value() < 1_000_000
    wait_idle(qtbot, window, timeout=20_000)     # the worker stopped at its next page
    assert b.model.filtered is None


# ---- tree, table, colours, plot labels, F1 ------------------------------------------------------------
def test_tree_numbers_fit_and_names_have_tooltips(qtbot, window):
    store = open_and_wait(qtbot, window, unpack("small"))
    tree = window.tree
    m = window.tree_model
    fm = tree.fontMetrics()
    topics = m.topics_item
    for c in (1, 2, 3):   # every number and header is whole on screen
        widest = max(fm.horizontalAdvance(m.horizontalHeaderItem(c).text()),
                     *(fm.horizontalAdvance(topics.child(i).child(j, c).text() if topics.child(i).child(j, c) else "")
                       for i in range(topics.rowCount()) for j in range(topics.child(i).rowCount())))
        assert tree.columnWidth(c) >= widest + 4, c
    assert sum(tree.columnWidth(c) for c in range(4)) <= tree.viewport().width() + 1
    long_name = max(store.topics(), key=len)
    item = next(topics.child(i) for i in range(topics.rowCount()) if topics.child(i).text() == long_name)
    row = [topics.child(item.row(), c) for c in range(4)]
    assert all(long_name in it.toolTip() for it in row)
    assert all(long_name in item.child(0, c).toolTip() for c in range(4))   # its queues too
    assert tree.textElideMode() == Qt.ElideMiddle
    tree.expand(m.indexFromItem(item))
    screenshot(tree, "store-tree.png")


def test_messages_table_fits_a_1440_window(qtbot, window):
    open_and_wait(qtbot, window, unpack("small"))
    window.show_queue("TopicTest", 0, 0)
    qtbot.wait(50)
    t = window.browser.table
    hh = t.horizontalHeader()
    right = hh.sectionViewportPosition(mt.COL_BODY) + hh.sectionSize(mt.COL_BODY)
    assert hh.sectionViewportPosition(mt.COL_BODY) + 150 <= t.viewport().width()   # the body is on screen
    assert right <= t.viewport().width() + 1 and not t.horizontalScrollBar().isVisible()
    model = window.browser.model
    fm = t.fontMetrics()
    for col in (mt.COL_QOFF, mt.COL_TIME, mt.COL_SIZE, mt.COL_PHY):   # whole values, never elided
        widest = max(fm.horizontalAdvance(model.data(model.index(r, col))) for r in range(40))
        assert t.columnWidth(col) >= widest + 8, col


def test_topic_colours_are_never_the_red_of_damage():
    from gui.internals import colors
    from engine import analysis as C
    damaged = colors.CATEGORY_COLORS[C.DAMAGED]
    assert colors.is_reddish(damaged)
    assert len(colors.TOPIC_PALETTE) >= 20 and not any(colors.is_reddish(c) for c in colors.TOPIC_PALETTE)
    topics = [f"topic-{i}" for i in range(40)]
    assert not any(colors.is_reddish(c) for c in colors.topic_colors(topics).values())
    for c in colors.TOPIC_PALETTE:   # far from the damaged red in RGB too
        assert sum((a - b) ** 2 for a, b in zip(c, damaged)) ** 0.5 > 100, c


def test_bar_labels_never_overlap(qtbot):
    from PySide6.QtGui import QFont, QFontMetrics

    from gui.scan_panel import CategoryAxis
    import pyqtgraph as pg
    names = [f"%RETRY%consumer_group_with_a_long_name_{i}" for i in range(60)]
    axis = CategoryAxis(names)
    w = pg.PlotWidget(axisItems={"bottom": axis})
    qtbot.addWidget(w)
    w.resize(900, 400)
    w.show()
    w.addItem(pg.BarGraphItem(x=np.arange(60.0), height=np.arange(60.0) + 1, width=0.8))
    w.setXRange(-0.5, 59.5, padding=0)
    qtbot.wait(50)
    length = axis.geometry().width()
    ticks = axis.tickValues(-0.5, 59.5, length)
    values = ticks[0][1]
    laid = axis.layout_labels(values)
    assert [("\n" + t if line else t) for line, t in laid] == axis.tickStrings(values, 1, 1)
    fm = QFontMetrics(axis.style.get("tickFont") or QFont())
    px = length / 60
    for line in (0, 1):   # labels on the same line never overlap
        spans = sorted(((v + 0.5) * px - fm.horizontalAdvance(t) / 2, (v + 0.5) * px + fm.horizontalAdvance(t) / 2)
                       for v, (ln, t) in zip(values, laid) if ln == line)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), f"labels overlap on line {line}"
    assert {ln for ln, _ in laid} == {0, 1}                        # staggered on two lines
    assert 1 < len(values) < 60 and all(t for _, t in laid)       # some bars are named, not every one
    assert all("…" in t for _, t in laid)                          # long names elided
    few = CategoryAxis(["a", "b", "c"])
    assert few.tickStrings(few.tickValues(-0.5, 2.5, 600)[0][1], 1, 1) == ["a", "b", "c"]


def test_f1_lists_the_shortcuts_in_a_table(qtbot, window):
    from gui.main_window import SHORTCUTS
    window.act_help.trigger()
    dlg = window.help_dialog
    assert dlg is not None and dlg.isVisible()
    t = dlg.table
    assert t.rowCount() == len(SHORTCUTS) and t.columnCount() == 2
    assert [(t.item(r, 0).text(), t.item(r, 1).text()) for r in range(t.rowCount())] == SHORTCUTS
    qtbot.wait(30)
    assert t.columnWidth(0) >= t.fontMetrics().horizontalAdvance("Ctrl+Home / Ctrl+End") and \
        not t.horizontalScrollBar().isVisible()
    screenshot(dlg, "browser-shortcuts.png")
