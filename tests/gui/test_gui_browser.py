"""The main window on real stores: open, tree, the lazy message table, navigation, filter,
detail pane; screenshots of the main view, the detail and the overview."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QMimeData, QPoint, Qt, QUrl
from PySide6.QtGui import QDropEvent, QGuiApplication
from PySide6.QtWidgets import QFileDialog

from conftest import manifest, unpack
from gui.models import message_table as mt
from gui.timefmt import format_ms, format_ms_readable
from guitest_support import dialogs, open_and_wait, screenshot, settings, wait_idle, window  # noqa: F401


def _select_queue(window, topic, qid):
    item = window.tree_model.find_queue_item(topic, qid)
    assert item is not None
    window.tree.setCurrentIndex(window.tree_model.indexFromItem(item))
    window.tabs.setCurrentWidget(window.browser)
    return window.browser.model


def test_open_select_queue_and_cells_equal_the_engine(qtbot, window):
    store = open_and_wait(qtbot, window, unpack("small"))
    assert window.stack.currentWidget() is window.split
    assert window.mode_label.text() == "READ-ONLY"
    # the tree: every topic and queue with its offsets
    topics = window.tree_model.topics_item
    assert topics.rowCount() == len(store.topics())
    model = _select_queue(window, "TopicTest", 1)
    cq = store.queues[("TopicTest", 1)]
    assert (model.topic, model.queue_id) == ("TopicTest", 1)
    assert model.rowCount() == cq.max_offset - cq.min_offset == 276
    assert window.tabs.currentWidget() is window.browser
    # the first page was read at once; compare every loaded cell with the engine
    res = store.get_message("TopicTest", 1, cq.min_offset, max_count=cq.max_offset)
    for row in range(0, 40):
        m = res.messages[row]
        cell = lambda c: model.data(model.index(row, c))  # noqa: E731
        assert cell(mt.COL_QOFF) == str(m.queueOffset)
        assert cell(mt.COL_TIME) == format_ms(m.storeTimestamp, utc=True)
        assert cell(mt.COL_TAGS) == (m.tags or "")
        assert cell(mt.COL_KEYS) == (m.keys or "")
        assert cell(mt.COL_SIZE) == str(m.storeSize)
        assert cell(mt.COL_PHY) == str(m.commitLogOffset)
        assert cell(mt.COL_MSGID) == m.msgId
    assert model.headerData(mt.COL_QOFF, Qt.Horizontal) == "Queue offset"
    assert model.headerData(mt.COL_PHY, Qt.Horizontal) == "CommitLog offset"
    assert "UTC" in model.headerData(mt.COL_TIME, Qt.Horizontal)


def test_scrolling_loads_blocks_in_the_background(qtbot, window):
    store = open_and_wait(qtbot, window, unpack("small"))
    model = _select_queue(window, "Orders_v2-EU", 2)
    cq = store.queues[("Orders_v2-EU", 2)]
    last = model.rowCount() - 1
    assert not model.is_loaded(last)
    assert model.data(model.index(last, mt.COL_MSGID)) == mt.PLACEHOLDER
    assert model.data(model.index(last, mt.COL_QOFF)) == str(cq.max_offset - 1)  # offsets are always exact
    with qtbot.waitSignal(model.rowsLoaded, timeout=5000):
        window.browser.table.scrollToBottom()
        model.data(model.index(last, mt.COL_MSGID))  # what a paint would ask for
    qtbot.waitUntil(lambda: model.is_loaded(last), timeout=5000)
    m = store.get_message("Orders_v2-EU", 2, cq.max_offset - 1, 1).messages[0]
    assert model.data(model.index(last, mt.COL_MSGID)) == m.msgId
    assert model.data(model.index(last, mt.COL_PHY)) == str(m.commitLogOffset)


def test_stale_block_results_are_dropped_when_the_queue_changes(qtbot, window):
    open_and_wait(qtbot, window, unpack("small"))
    model = _select_queue(window, "TopicTest", 0)
    model.data(model.index(model.rowCount() - 1, mt.COL_TAGS))  # asks for the last block
    _select_queue(window, "TopicTest", 2)                        # ... then moves on at once
    wait_idle(qtbot, window)
    assert (model.topic, model.queue_id) == ("TopicTest", 2)
    for b in model.cache.blocks():
        lo, hi = model.cache.block_range(b)
        row = model.cache.get(max(lo, model.min_offset))
        assert row is None or row.queueOffset >= model.min_offset
    # every cached row belongs to queue 2
    store = window.session.store
    for b in model.cache.blocks():
        start, rows = model.cache._blocks[b]
        for r in rows:
            assert store.queues[("TopicTest", 2)].unit(r.queueOffset)[0] == r.commitLogOffset


def test_model_passes_qtmodeltester(qtbot, window, qtmodeltester):
    open_and_wait(qtbot, window, unpack("small"))
    model = _select_queue(window, "TopicTx", 0)
    model.load_now(0, model.rowCount() - 1)
    qtmodeltester.check(model, force_py=True)
    qtmodeltester.check(window.tree_model, force_py=True)


def test_jump_to_offset_time_first_last(qtbot, window):
    store = open_and_wait(qtbot, window, unpack("small"))
    model = _select_queue(window, "TopicTest", 0)
    b = window.browser
    b.offset_edit.setText("137")
    qtbot.keyClick(b.offset_edit, Qt.Key_Return)
    assert b.table.currentIndex().row() == 137 - model.min_offset
    qtbot.waitUntil(lambda: b.detail.message is not None and b.detail.message.queueOffset == 137, timeout=5000)
    # out of range: nearest end, said in the status bar
    b.go_to_offset(10**12)
    assert b.table.currentIndex().row() == model.rowCount() - 1
    b.go_first()
    assert b.table.currentIndex().row() == 0
    b.go_last()
    assert b.table.currentIndex().row() == model.rowCount() - 1
    # time: the manifest's mid time maps to the first unit stored at or after it
    case = next(c for c in manifest("small")["time_lookups"]["cases"] if (c["topic"], c["queueId"]) == ("TopicTest", 0))
    t = case["storeTimeAtMid"]
    expected = store.get_offset_in_queue_by_time("TopicTest", 0, t, boundary="lower")
    b.time_edit.set_ms(t)
    assert b.time_edit.ms() == t
    qtbot.mouseClick(b.go_time, Qt.LeftButton)
    qtbot.waitUntil(lambda: model.offset_of_row(b.table.currentIndex().row()) == expected, timeout=5000)
    assert store.store_time_at("TopicTest", 0, expected) >= t


def test_filter_row(qtbot, window):
    store = open_and_wait(qtbot, window, unpack("small"))
    model = _select_queue(window, "TopicTest", 3)
    b = window.browser
    b.go_first()
    b.f_tags.setText("TagA || TagB")
    with qtbot.waitSignal(model.modelReset, timeout=10000):
        qtbot.mouseClick(b.f_apply, Qt.LeftButton)
    cq = store.queues[("TopicTest", 3)]
    msgs = store.get_message("TopicTest", 3, cq.min_offset, max_count=cq.max_offset).messages
    expected = [m.queueOffset for m in msgs if m.tags in ("TagA", "TagB")]
    assert model.filtered is not None and expected
    assert [model.offset_of_row(r) for r in range(model.rowCount())] == expected
    assert model.data(model.index(0, mt.COL_TAGS)) in ("TagA", "TagB")
    assert "FILTERED" in b.info.text()
    b.clear_filter()
    assert model.filtered is None and model.rowCount() == cq.max_offset - cq.min_offset
    b.f_tags.clear()
    b.f_prop.setText("=oops")
    b.apply_filter()  # a bad filter is reported, not raised
    assert model.filtered is None


def test_detail_pane_shows_header_properties_body_and_position(qtbot, window, tmp_path, monkeypatch):
    store = open_and_wait(qtbot, window, unpack("small"))
    _select_queue(window, "TopicTest", 0)
    b = window.browser
    b.go_to_offset(0)
    d = b.detail
    qtbot.waitUntil(lambda: d.message is not None and d.message.queueOffset == 0, timeout=5000)
    m = d.message
    fields = {d.header.item(r, 0).text(): d.header.item(r, 1).text() for r in range(d.header.rowCount())}
    for name in ("topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC", "flag", "sysFlag",
                 "bornHost", "storeHost", "reconsumeTimes",
                 "preparedTransactionOffset", "msgId", "uniqKey", "tags", "keys", "tagsCode", "magicCode"):
        assert fields[name] == str(getattr(m, name) if getattr(m, name) is not None else ""), name
    # times: the stored integer, then the date with its numeric zone offset (the window shows UTC)
    assert fields["storeTimestamp"] == f"{m.storeTimestamp} ({format_ms_readable(m.storeTimestamp, utc=True)})"
    assert fields["bornTimestamp"] == "1795310726716 (2026-11-22 01:25:26.716 +00:00)"
    assert fields["bornHost"] == "[2001:db8:0:0:0:0:0:42]:40000"
    props = {d.properties.item(r, 0).text(): d.properties.item(r, 1).text() for r in range(d.properties.rowCount())}
    assert props == m.properties and props["note"] == "ünïcödé ✓ 🎉"
    assert d.body.mode_used == "utf-8" and d.body.text.toPlainText() == "Hello RocketMQ #0"
    # position: commitlog file, CQ unit and the index entries of its keys
    qtbot.waitUntil(lambda: "Index entries" in d.position.toPlainText(), timeout=5000)
    pos = d.position.toPlainText()
    assert "00000000000000000000" in pos and "unit points here   yes" in pos
    assert "'dupin'" in pos and "'C000020251DE5FFD2B276C73C6390000'" in pos
    # copy and save
    qtbot.mouseClick(d.copy_b64, Qt.LeftButton)
    assert QGuiApplication.clipboard().text() == "SGVsbG8gUm9ja2V0TVEgIzA="
    qtbot.mouseClick(d.copy_hex, Qt.LeftButton)
    assert QGuiApplication.clipboard().text() == b"Hello RocketMQ #0".hex()
    out = tmp_path / "body.bin"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(out), "")))
    qtbot.mouseClick(d.save, Qt.LeftButton)
    assert out.read_bytes() == b"Hello RocketMQ #0"
    # mode override: hex dump
    d.body.set_mode("hex")
    assert d.body.text.toPlainText().startswith("00000000  48 65 6c 6c 6f 20 52 6f  63 6b 65 74 4d 51 20 23  |Hello RocketMQ #|")
    d.body.set_mode("auto")
    # a JSON body from the same queue is pretty-printed in auto mode
    cq = store.queues[("TopicTest", 0)]
    json_row = next(r for r in range(cq.max_offset) if b.model.data(b.model.index(r, mt.COL_BODY)).startswith("{"))
    b.select_row(json_row)
    qtbot.waitUntil(lambda: d.message is not None and d.message.queueOffset == json_row, timeout=5000)
    assert d.body.mode_used == "json" and d.body.text.toPlainText().startswith("{\n  ")
    qtbot.waitUntil(lambda: "Index entries" in d.position.toPlainText(), timeout=5000)
    screenshot(window, "browser-main.png")
    d.resize(1400, 620)
    screenshot(d, "browser-detail.png")


def test_markup_and_escape_sequences_in_a_body_stay_text(qtbot):
    from gui.views.detail_pane import BodyView
    v = BodyView()
    qtbot.addWidget(v)
    body = b"<html><b>bold</b><img src='x'></html>\x1b[2J\x1b[31mred"
    v.set_body(body, False)
    text = v.text.toPlainText()
    assert "<b>bold</b>" in text and "\u241b[2J" in text
    big = b"y" * (200 * 1024)
    v.set_body(big, False)
    assert v.show_all_button.isVisibleTo(v) and "showing 65,536 of 204,800 bytes" in v.info.text()
    qtbot.mouseClick(v.show_all_button, Qt.LeftButton)
    assert len(v.text.toPlainText()) == len(big) and not v.show_all_button.isVisibleTo(v)


def test_overview_panel(qtbot, window):
    store = open_and_wait(qtbot, window, unpack("small"))
    ov = window.overview
    qtbot.waitUntil(lambda: ov.overview is not None, timeout=5000)
    info = store.info()
    assert ov.values["Max offset"].text().startswith(str(info["commitlog"]["maxOffset"]))
    assert ov.values["Queues"].text() == str(len(info["queues"]))
    total = sum(q["maxOffset"] - q["minOffset"] for q in info["queues"])
    assert ov.values["Messages"].text().startswith(f"{total:,}")
    assert ov.values["Index files"].text() == str(len(info["indexFiles"]))
    assert ov.topics.rowCount() == len(store.topics())
    assert ov.files.rowCount() == len(info["commitlog"]["files"])
    assert ov.values["First stored"].text() == "2026-11-22T01:25:26.891+00:00"


def test_abort_file_is_reported_in_a_banner(qtbot, window):
    open_and_wait(qtbot, window, unpack("crashed"))
    texts = window.banners.texts()
    assert any("abort file is present" in t for t in texts)
    assert window.overview.values["Abort file"].text() or True


def test_consumer_groups_and_lag(qtbot, window, fixture_copy):
    import json
    root = fixture_copy("small")
    (root / "config").mkdir()
    (root / "config" / "consumerOffset.json").write_text(json.dumps(
        {"offsetTable": {"TopicTest@cg_orders": {"0": 200, "1": 276}}}))
    store = open_and_wait(qtbot, window, root)
    lag = {(r["group"], r["queueId"]): r["lag"] for r in store.consumer_lag()}
    assert lag == {("cg_orders", 0): 76, ("cg_orders", 1): 0}
    groups = window.tree_model.groups_item
    assert groups.rowCount() == 1 and groups.child(0).text() == "cg_orders"
    gq = groups.child(0).child(0)
    assert gq.text() == "TopicTest / queue 0"
    window.tree.activate(window.tree_model.indexFromItem(gq))
    b = window.browser
    assert (b.model.topic, b.model.queue_id) == ("TopicTest", 0)
    assert b.model.offset_of_row(b.table.currentIndex().row()) == 200
    qtbot.waitUntil(lambda: window.overview.overview is not None, timeout=5000)
    assert window.overview.lag.rowCount() == 2


def test_drop_a_folder_opens_it(qtbot, window):
    path = unpack("small")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    ev = QDropEvent(QPoint(10, 10), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    with qtbot.waitSignal(window.storeOpened, timeout=10000):
        window.dropEvent(ev)
    assert window.session.path.resolve() == path.resolve()


@pytest.mark.parametrize("utc", [True, False])
def test_time_zone_switch(qtbot, window, utc):
    open_and_wait(qtbot, window, unpack("small"))
    model = _select_queue(window, "TopicTest", 0)
    window.act_utc.setChecked(utc)
    text = model.data(model.index(0, mt.COL_TIME))
    assert text == format_ms(1795310726891, utc)
    assert window.search.k_utc.isChecked() == utc
    assert ("UTC" == window.search.k_begin.zone.text()) == utc


def test_internals_and_scan_tabs_follow_the_store(qtbot, window):
    assert window.internals.panel is None and window.scans.panel is None   # built when first shown
    store = open_and_wait(qtbot, window, unpack("small"))
    for lazy in (window.internals, window.scans):
        window.tabs.setCurrentWidget(lazy)
        assert lazy.panel is not None
    scans = window.scans.panel
    assert scans.session is window.session and scans.run_button.isEnabled()
    assert str(store.root) in scans.status_label.text()
    # the internals' "open this message" lands in the Messages view
    m = store.get_message("TopicTest", 2, 7, 1).messages[0]
    window.internals.panel.openRequested.emit(m.commitLogOffset)
    b = window.browser
    assert window.tabs.currentWidget() is b and (b.model.topic, b.model.queue_id) == ("TopicTest", 2)
    assert b.model.offset_of_row(b.table.currentIndex().row()) == 7
    window.close_store()
    assert not scans.run_button.isEnabled() and scans.status_label.text() == "No store"


def test_shortcuts(qtbot, window):
    open_and_wait(qtbot, window, unpack("small"))
    keys = {a.text().replace("&", ""): a.shortcut().toString() for a in window.actions()}
    assert keys["Open Store Folder…"] == "Ctrl+O" and keys["Open Store Folder Read-Only…"] == "Ctrl+Shift+O"
    assert keys["Refresh"] == "F5" and keys["Find by Key…"] == "Ctrl+F" and keys["Quit"] == "Ctrl+Q"
    assert keys["Keyboard Shortcuts"] == "F1" and keys["Go to Queue Offset…"] == "Ctrl+G"
    window.act_find.trigger()
    assert window.tabs.currentWidget() is window.search and window.search.modes.currentIndex() == 0
    window.act_goto.trigger()
    assert window.tabs.currentWidget() is window.browser


def test_control_characters_in_tags_and_keys_stay_on_one_line(qtbot, window, fixture_copy):
    root = fixture_copy("small")
    store = open_and_wait(qtbot, window, root)
    if not hasattr(store, "put_message"):
        pytest.skip("engine has no MessageStore.put_message yet")
    with qtbot.waitSignal(window.storeOpened, timeout=10000):
        window.act_rw.setChecked(True)
    store = window.session.store
    r = store.put_message("TopicTest", b"<script>alert(1)</script>\x1b[2J", queue_id=3, tags="<b>T</b>",
                          keys="k1\tk2 <i>x</i>", properties={"note": "line1\nline2\x1b[31m"})
    window.session.notify_changed()
    window.show_queue("TopicTest", 3, r.queueOffset)
    b = window.browser
    row = b.model.row_of_offset(r.queueOffset)
    b.model.load_now(row, row)
    assert b.model.data(b.model.index(row, mt.COL_TAGS)) == "<b>T</b>"
    assert b.model.data(b.model.index(row, mt.COL_KEYS)) == "k1\u2409k2 <i>x</i>"
    assert "&lt;b&gt;T&lt;/b&gt;" in b.model.data(b.model.index(row, mt.COL_TAGS), Qt.ToolTipRole)  # escaped
    qtbot.waitUntil(lambda: b.detail.message is not None and b.detail.message.queueOffset == r.queueOffset,
                    timeout=5000)
    d = b.detail
    assert d.body.text.toPlainText() == "<script>alert(1)</script>\u241b[2J"
    props = {d.properties.item(i, 0).text(): d.properties.item(i, 1).text() for i in range(d.properties.rowCount())}
    assert props["note"] == "line1\u240aline2\u241b[31m"
