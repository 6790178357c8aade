"""Issue 29, first time on a real desktop: time fields that take what is typed or pasted (by
the CLI's rule) and say what they read; segment fill charts that reach every file with
readable names; counts that say their unit; panes that follow the tree and forget the old
store; the visual nits (Meaning column, Msg IDs, integer axes, +00:00 everywhere, no "A" on
the heat map, the status bar on screen, the dark palette). Real widgets, real stores."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QFontInfo, QFontMetrics, QGuiApplication, QWheelEvent
from PySide6.QtWidgets import QApplication

from conftest import manifest, unpack
from engine import MessageStore, StoreConfig
from engine.format.text import parse_time
from gui import timefmt
from gui.models import message_table as mt
from guitest_support import dialogs, open_and_wait, screenshot, settings, wait_idle, window  # noqa: F401


def _tree_index(window, topic, qid=None):
    m = window.tree_model
    for top in (m.topics_item, m.lmq_item):
        for i in range(top.rowCount() if top is not None else 0):
            t = top.child(i)
            if t.data(Qt.UserRole + 2) == topic:
                return m.indexFromItem(t if qid is None else next(t.child(j) for j in range(t.rowCount())
                                                                  if t.child(j).data(Qt.UserRole + 3) == qid))
    raise AssertionError(topic)


# ---- 3. time fields ---------------------------------------------------------------------------------
def test_time_fields_take_typed_and_pasted_times_and_say_what_they_read(qtbot, window):
    open_and_wait(qtbot, window, unpack("small"))
    wait_idle(qtbot, window)
    s = window.search
    window.tabs.setCurrentWidget(s)
    s.k_any_time.setChecked(False)
    f = s.k_begin
    qtbot.waitUntil(lambda: f.value() is not None, timeout=5000)   # the store's first time, once computed
    old = f.value()
    # typed after Home: the new time replaces the one shown
    f.edit.setFocus()
    qtbot.keyClick(f.edit, Qt.Key_Home)
    qtbot.keyClicks(f.edit, "2026-11-22T01:25:30Z")
    assert f.value() == parse_time("2026-11-22T01:25:30Z") != old
    assert f.note.text() == "read as 2026-11-22 01:25:30.000 +00:00" and f.note.isVisible()
    # typed over a triple-click (all selected): epoch milliseconds
    rect = f.edit.rect()
    qtbot.mouseDClick(f.edit, Qt.LeftButton, pos=rect.center())
    qtbot.mouseClick(f.edit, Qt.LeftButton, pos=rect.center())
    assert f.edit.selectedText() == f.edit.text()
    qtbot.keyClicks(f.edit, "1795310726891")
    assert f.value() == 1795310726891 and f.note.text() == "read as 2026-11-22 01:25:26.891 +00:00"
    # pasted into the field showing a time: the paste replaces it (a time as the CLI prints it)
    f.set_ms(old)
    f.edit.setFocus()
    f.edit.setCursorPosition(0)
    QGuiApplication.clipboard().setText("2026-11-22 09:25:26.891 +08:00")
    qtbot.keyClick(f.edit, Qt.Key_V, Qt.ControlModifier)
    assert f.value() == 1795310726891
    # every form the CLI takes, read by the CLI's own function (times without a zone: the field's zone)
    for text in ("1795310726891", "2026-11-22T01:25:26.891Z", "2026-11-22T01:25:26.891+00:00",
                 "2026-11-22 01:25:26.891", "2026-11-22T09:25:26.891+08:00", "2026-11-22", "2026-11-22 01:25"):
        f.edit.selectAll()
        qtbot.keyClicks(f.edit, text)
        assert f.value() == parse_time(text, utc=True), text
        assert f.note.text() == "read as " + timefmt.format_ms_readable(f.value(), True)
    # the date picker changes the date and keeps the time of day
    from PySide6.QtCore import QDate
    f.set_ms(1795310726891)
    f.pick.click()
    assert f.calendar.isVisible() and f.calendar.selectedDate() == QDate(2026, 11, 22)
    f.calendar.clicked.emit(QDate(2026, 1, 2))
    assert f.value() == parse_time("2026-01-02T01:25:26.891Z") and not f.calendar.isVisible()
    # what is not a time says so, and the search refuses it
    f.edit.selectAll()
    qtbot.keyClicks(f.edit, "next tuesday")
    assert f.value() is None and f.note.text().startswith("not a time: 'next tuesday'")
    s.k_topic.setCurrentText("TopicTest")
    s.k_key.setText("dupin")
    s.search_key()
    assert s.summary.text().startswith("'from' is not a time: 'next tuesday'")
    # the queue browser's field takes typing too, and Go to time uses it
    b = window.browser
    window.show_queue("TopicTest", 0, 0)
    b.time_edit.edit.selectAll()
    qtbot.keyClicks(b.time_edit.edit, "2026-11-22 01:25:27.431 +00:00")
    assert b.time_edit.value() == 1795310727431
    with qtbot.waitSignal(b.status, timeout=5000) as sig:
        qtbot.keyClick(b.time_edit.edit, Qt.Key_Return)
    assert sig.args[0].startswith("time 1795310727431 → queue offset")
    screenshot(s, "search-time-fields.png")


def test_time_fields_reset_on_a_new_store(qtbot, window):
    open_and_wait(qtbot, window, unpack("small"))
    wait_idle(qtbot, window)
    s = window.search
    for f in (s.k_begin, s.t_time):
        f.edit.selectAll()
        qtbot.keyClicks(f.edit, "2001-01-01 00:00:00.000")
    store = open_and_wait(qtbot, window, unpack("v5"))
    wait_idle(qtbot, window)
    first = window.overview.overview.first_time
    assert first > 0 and s.k_begin.value() == first and s.t_time.value() == first
    assert s.k_end.value() == window.overview.overview.last_time
    m = window.browser.model
    assert window.browser.time_edit.value() == store.store_time_at(m.topic, m.queue_id, m.min_offset)


# ---- 4. segment fill ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def many_small_files(tmp_path_factory):
    """66 ConsumeQueue files (20 units each), 27 index files (maxIndexNum 100), 5 commitlog files."""
    root = tmp_path_factory.mktemp("many") / "store"
    cfg = StoreConfig.from_mapping(dict(mappedFileSizeCommitLog=64 << 10, mappedFileSizeConsumeQueue=20 * 20,
                                        maxIndexNum=100, maxHashSlotNum=40))
    with MessageStore.create(root, cfg) as s:
        for i in range(1300):
            s.put_message(f"Topic{i % 6}", b"x" * 50, queue_id=i % 2, tags="t", keys=[f"k{i}"])
    return root


def _wheel(chart, degrees: int, modifiers=Qt.NoModifier) -> None:
    view = chart.glw
    center = view.mapFromScene(chart.vb.sceneBoundingRect().center())
    ev = QWheelEvent(QPointF(center), QPointF(view.viewport().mapToGlobal(center)), QPoint(0, 0),
                     QPoint(0, degrees * 8), Qt.NoButton, modifiers, Qt.NoScrollPhase, False)
    QApplication.sendEvent(view.viewport(), ev)


def test_segment_fill_reaches_every_file_with_readable_names(qtbot, many_small_files):
    from gui.internals.bars import ROW_PX
    from gui.internals.segment_fill import SegmentFillView
    store = MessageStore.open(many_small_files)
    v = SegmentFillView()
    qtbot.addWidget(v)
    v.resize(1100, 860)
    try:
        with qtbot.waitSignal(v.updated, timeout=30000):
            v.set_store(store)
            v.show()
        qtbot.wait(100)
        nq = sum(len(cq.queue.files) for cq in store.queues.values())
        ni = len(store.index.files)
        q, ix = v.charts["queue"], v.charts["index"]
        assert len(q.rows) == nq == 66 and len(ix.rows) == 2 * ni == 54
        for ch in (q, ix):
            vis = ch.visible_rows()
            assert vis < len(ch.rows) and ch.scroll.isVisible()
            assert ch.scroll.maximum() == len(ch.rows) - vis and ch.scroll.pageStep() == vis
            # rows keep their height: a row is ROW_PX pixels, taller than a line of the tick font
            (_, _), (y0, y1) = ch.vb.viewRange()
            assert y1 - y0 == pytest.approx(vis)
            assert ch.vb.height() / vis >= ROW_PX * 0.99
            assert ROW_PX > QFontMetrics(ch.plot.getAxis("left").style["tickFont"]).height()
        # the scroll bar reaches the last file, and its bar is drawn there
        q.scroll.setValue(q.scroll.maximum())
        qtbot.wait(60)
        first, end = q.shown_rows()
        assert end == nq and q.vb.viewRange()[1][1] == pytest.approx(nq)
        last = q.rows[-1].numbers
        assert (last["topic"], last["queueId"], last["file"]) == max(
            ((t, qid, f.path.name) for (t, qid), cq in store.queues.items() for f in cq.queue.files))
        # the wheel scrolls the rows (never zooms them out); Ctrl+wheel zooms along the files only
        q.scroll.setValue(10)
        span = q.vb.viewRange()[1][1] - q.vb.viewRange()[1][0]
        _wheel(q, -15)
        assert q.top == 13 and q.vb.viewRange()[1][1] - q.vb.viewRange()[1][0] == pytest.approx(span)
        _wheel(q, 15)
        assert q.top == 10
        x_before = q.vb.viewRange()[0]
        _wheel(q, 15, Qt.ControlModifier)
        assert q.vb.viewRange()[0][1] - q.vb.viewRange()[0][0] < x_before[1] - x_before[0]
        assert q.vb.viewRange()[1][1] - q.vb.viewRange()[1][0] == pytest.approx(span)
        q.vb.setXRange(0, 1, padding=0)
        q.scroll.setValue(0)
        qtbot.wait(80)
        screenshot(v, "segment-fill-many-files.png")
    finally:
        v.background.wait()
        store.close()


# ---- 5. counts --------------------------------------------------------------------------------------------
def test_counts_say_their_unit_lmq_apart(qtbot, window):
    store = open_and_wait(qtbot, window, unpack("v5_lmq"))
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: window.overview.overview is not None, timeout=5000)
    lmq = [q for q in store.queue_list() if q["lmq"]]
    units = sum(q["maxOffset"] - q["minOffset"] for q in lmq)
    messages = sum(q["maxOffset"] - q["minOffset"] for q in store.queue_list() if not q["lmq"])
    text = window.overview.values["Messages"].text()
    assert text == (f"{messages:,} messages (ConsumeQueue lengths summed)\n"
                    f"+ {units:,} CQ units in {len(lmq)} LMQ queues (copies, not counted again)")
    t = window.overview.topics
    counted = {t.item(r, 0).text(): (t.item(r, 2).text(), t.item(r, 3).text()) for r in range(t.rowCount())}
    for q in lmq:
        assert counted[q["topic"]] == (f"{q['maxOffset'] - q['minOffset']:,}", "CQ units (LMQ dispatch copies)")
    assert counted["Chat-Room"][1] == "messages"
    m = window.tree_model
    assert int(m.item(m.lmq_item.row(), 3).text()) == units and "CQ units" in m.lmq_item.toolTip()
    assert int(m.item(m.topics_item.row(), 3).text()) == messages
    lmq_topic = m.lmq_item.child(0)
    assert "CQ units" in lmq_topic.toolTip() and "CQ units" in lmq_topic.child(0).toolTip()
    window.tabs.setCurrentWidget(window.overview)
    qtbot.waitUntil(lambda: window.overview.values["Messages"].height() >= 2 * window.overview.fontMetrics().height(),
                    timeout=3000)   # laid out with both lines
    screenshot(window, "overview-lmq-counts.png")


def test_unset_checkpoint_times_read_not_set(qtbot, window):
    store = open_and_wait(qtbot, window, unpack("v5_rocksdb_cq"))
    qtbot.waitUntil(lambda: window.overview.overview is not None, timeout=5000)
    cp = store.info()["checkpoint"]
    unset = [k for k in ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp") if cp.get(k, 0) <= 0]
    assert unset, "the fixture has an unset checkpoint time"
    text = window.overview.values["Checkpoint"].text()
    lines = dict(line.split(None, 1) for line in text.splitlines())
    for k, name in (("physicMsgTimestamp", "physic"), ("logicsMsgTimestamp", "logics"), ("indexMsgTimestamp", "index")):
        want = "not set" if k in unset else timefmt.format_ms(cp[k], True)
        assert lines[name] == want, (name, text)
    assert "1970" not in text


def test_topic_stats_says_which_records_reached_the_queues(qtbot, window):
    from engine.scan.api import run_job
    store = open_and_wait(qtbot, window, unpack("default"))
    rows = {r["topic"]: r for r in run_job(store, "topic-stats", engine="local").rows}
    per_topic = manifest("default")["consume_queue_message_counts_per_topic"]
    m = window.tree_model
    tree = {m.topics_item.child(i).data(Qt.UserRole + 2): int(m.item(0).child(i, 3).text())
            for i in range(m.topics_item.rowCount())}
    for topic, r in rows.items():
        assert r["dispatched"] == per_topic[topic] == tree[topic], topic
    tx = rows["TopicTx"]   # 9 PREPARED halves, 8 COMMIT, 4 ROLLBACK records in the commitlog
    assert (tx["messages"], tx["dispatched"]) == (21, 8)
    assert sum(r["messages"] for r in rows.values()) == len(manifest("default")["messages"])


# ---- 6. state follows the user ------------------------------------------------------------------------------
def test_search_follows_the_tree_and_every_pane_clears_on_a_new_store(qtbot, window):
    open_and_wait(qtbot, window, unpack("small"))
    wait_idle(qtbot, window)
    s = window.search
    window.tree.setCurrentIndex(_tree_index(window, "Orders_v2-EU", 2))
    assert s.k_topic.currentText() == s.t_topic.currentText() == "Orders_v2-EU" and s.t_queue.currentData() == 2
    window.tree.setCurrentIndex(_tree_index(window, "Audit|log"))       # a topic row: the topic, no queue
    assert s.k_topic.currentText() == s.t_topic.currentText() == "Audit|log"
    # a search with results, and a message in its detail pane
    window.tree.setCurrentIndex(_tree_index(window, "TopicTest", 0))
    s.k_key.setText("dupin")
    with qtbot.waitSignal(s.status, timeout=10000):
        s.search_key()
    qtbot.waitUntil(lambda: s.detail.message is not None, timeout=5000)
    assert s.detail.tabs.tabText(1).startswith("Properties (")
    s.i_text.setText("0A00000500002A9F0000000000000000")
    # another store: nothing of the first one stays
    open_and_wait(qtbot, window, unpack("v5"))
    wait_idle(qtbot, window)
    assert s.detail.message is None and s.detail.title.text() == "No message selected"
    assert s.detail.tabs.tabText(1) == "Properties" and s.detail.properties.rowCount() == 0
    assert s.detail.header.rowCount() == 0 and s.results.rowCount() == 0 and s.summary.text() == ""
    assert s.k_key.text() == "" and s.i_text.text() == "" and not s.export_csv.isEnabled()
    m = window.browser.model   # the browser shows the new store's default queue, and Search follows it
    assert s.k_topic.currentText() == m.topic and s.t_queue.currentData() == m.queue_id


# ---- 8. visual nits ----------------------------------------------------------------------------------------
def test_detail_meaning_column_and_msg_ids_are_whole(qtbot, window):
    from gui.views.detail_pane import MEANING_MIN_PX
    open_and_wait(qtbot, window, unpack("small"))
    window.show_queue("TopicTest", 0, 0)
    d = window.browser.detail
    qtbot.waitUntil(lambda: d.message is not None, timeout=5000)
    qtbot.wait(50)
    h = d.header
    assert h.columnWidth(2) >= MEANING_MIN_PX
    assert h.columnViewportPosition(2) + h.columnWidth(2) <= h.viewport().width() + 1
    row = next(r for r in range(h.rowCount()) if h.item(r, 0).text() == "commitLogOffset")
    meaning = h.item(row, 2).text()
    assert h.rowHeight(row) * h.columnWidth(2) >= QFontMetrics(h.font()).horizontalAdvance(meaning) * \
        QFontMetrics(h.font()).height() * 0.9   # wrapped into the row, not cut
    # Msg IDs: the fixed-width font, every 32-hex id whole, so no row is cut differently
    t, model = window.browser.table, window.browser.model
    font = t.itemDelegateForColumn(mt.COL_MSGID).font
    assert QFontInfo(font).fixedPitch()
    fm = QFontMetrics(font)
    ids = [model.data(model.index(r, mt.COL_MSGID)) for r in range(30)]
    assert all(len(i) == 32 for i in ids)
    assert max(fm.horizontalAdvance(i) for i in ids) <= t.columnWidth(mt.COL_MSGID) - 6
    assert len({fm.horizontalAdvance(i) for i in ids}) == 1
    screenshot(d, "browser-detail-meaning.png")


def test_integer_axes_one_time_format_no_autorange_button(qtbot):
    from gui.internals.collision_chain import CollisionChainView
    from gui.internals.cq_units import CqUnitsView, PlainAxis
    from gui.internals.slot_heatmap import SlotHeatmapView
    ax = PlainAxis("left")
    assert ax.tickStrings([6e8, 6.5e8], 1, 5e7) == ["600,000,000", "650,000,000"]
    assert ax.tickStrings([0.5, 1.0], 1, 0.5) == ["0.5", "1.0"]
    v = CqUnitsView()
    qtbot.addWidget(v)
    assert all(isinstance(p.getAxis(a), PlainAxis) for p in v.plots.values() for a in ("left", "bottom"))
    heat = SlotHeatmapView()
    qtbot.addWidget(heat)
    assert heat.heat_plot.buttonsHidden
    store = MessageStore.open(unpack("small"))
    try:
        c = CollisionChainView()
        qtbot.addWidget(c)
        c.resize(1200, 700)
        c.set_utc(True)
        c.set_store(store)
        c.show()
        res = c.show_slot("20261122012526904", 34)
        html = next(t.toHtml() for t in c.texts if "keyHash" in t.toHtml())   # the first entry card
        step = res.entries[0].step
        assert timefmt.format_ms_readable(step.timestamp, True) in html and step.timestamp > 0
        assert "+00:00" in html and "Z<" not in html and "Z " not in html
        assert timefmt.format_ms(step.timestamp, True).endswith("+00:00")
        c.set_store(None)
    finally:
        store.close()


class _Screen:
    """A screen of a given size (what QScreen.availableGeometry answers)."""

    def __init__(self, w, h):
        from PySide6.QtCore import QRect
        self.rect = QRect(0, 0, w, h)

    def availableGeometry(self):
        return self.rect


def test_window_fits_the_screen_with_its_status_bar(qtbot, settings):  # noqa: F811
    from gui.desktop import FRAME_PX, default_size
    from gui.main_window import MainWindow
    assert default_size(_Screen(1920, 1200)) == (1440, 900)
    w, h = default_size(_Screen(1440, 900))     # the screen: the frame and the status bar fit
    assert w <= 1440 and h + FRAME_PX <= 900
    assert default_size(None) == (1440, 900)
    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    want = default_size(win.screen())
    assert win.height() <= max(want[1], win.minimumSizeHint().height())
    sb = win.statusBar()
    w = win
    assert sb.isVisible() and sb.geometry().bottom() < w.height() and sb.height() > 0


def test_plots_follow_a_dark_palette(qtbot, many_small_files):
    from PySide6.QtGui import QColor

    from gui import palette
    from gui.internals import colors
    from engine import analysis as A
    from gui.internals.segment_fill import SegmentFillView
    app = QApplication.instance()
    old_style, old_palette = app.style().name(), app.palette()
    store = MessageStore.open(many_small_files)
    try:
        assert palette.apply_scheme(app, Qt.ColorScheme.Dark) and palette.is_dark()
        assert not palette.apply_scheme(app, Qt.ColorScheme.Unknown)   # the platform does not say: no change
        v = SegmentFillView()
        qtbot.addWidget(v)
        v.resize(1100, 860)
        with qtbot.waitSignal(v.updated, timeout=30000):
            v.set_store(store)
            v.show()
        ch = v.charts["queue"]
        assert QColor(ch.glw.backgroundBrush().color()).lightness() < 80
        assert QColor(ch.plot.getAxis("left").textPen().color()).lightness() > 180
        assert ch.colors[A.FREE] == colors.DARK_CATEGORY_COLORS[A.FREE]
        qtbot.wait(80)
        screenshot(v, "segment-fill-dark.png")
        # back to light: the drawn view follows (background, text, category colours)
        assert palette.apply_scheme(app, Qt.ColorScheme.Light) and not palette.is_dark()
        from gui.plot_theme import restyle
        restyle(v)
        qtbot.wait(30)
        assert QColor(ch.glw.backgroundBrush().color()).lightness() > 200
        assert ch.colors[A.FREE] == colors.CATEGORY_COLORS[A.FREE]
        v.background.wait()
    finally:
        app.setStyle(old_style)
        app.setPalette(old_palette)
        store.close()

