"""The browser on the DLedger fixture: queues browse like any store, the detail shows the
DLedger entry around the message, the Overview shows the DLedger facts; screenshots."""
from __future__ import annotations

from conftest import manifest, unpack
from gui.models import message_table as mt
from guitest_support import dialogs, open_and_wait, screenshot, settings, tree_hashes, wait_idle, window  # noqa: F401


def test_dledger_store_browses_and_shows_its_entries(qtbot, window):
    m = manifest("dledger")
    root = unpack("dledger")
    before = tree_hashes(root)
    store = open_and_wait(qtbot, window, root)
    item = window.tree_model.find_queue_item("Orders_v2-EU", 3)
    window.tree.setCurrentIndex(window.tree_model.indexFromItem(item))
    window.tabs.setCurrentWidget(window.browser)
    model = window.browser.model
    q = next(x for x in m["consume_queues"] if (x["topic"], x["queueId"]) == ("Orders_v2-EU", 3))
    assert model.rowCount() == q["maxOffset"] - q["minOffset"] == 78
    model.load_now(0, 39)
    for row in range(40):
        assert model.data(model.index(row, mt.COL_PHY)) == str(q["units"][row][1])
    b = window.browser
    b.go_to_offset(7)
    d = b.detail
    qtbot.waitUntil(lambda: d.message is not None and d.message.queueOffset == 7, timeout=5000)
    qtbot.waitUntil(lambda: "DLedger entry" in d.position.toPlainText(), timeout=5000)
    unit = q["units"][7]
    entry = m["dledger_entries"][unit[4]]
    fields = {d.header.item(r, 0).text(): d.header.item(r, 1).text() for r in range(d.header.rowCount())}
    assert fields["commitLogOffset"] == str(unit[1]) == str(entry["rmqPhyOffset"])
    assert (fields["DLedger index"], fields["DLedger term"], fields["DLedger pos"], fields["DLedger size"]) == (
        str(entry["index"]), str(entry["term"]), str(entry["pos"]), str(entry["size"]))
    pos = d.position.toPlainText()
    assert f"index              {entry['index']}" in pos and f"pos                {entry['pos']}" in pos
    wait_idle(qtbot, window)
    d.resize(1400, 660)
    screenshot(d, "dledger-detail.png")
    # the Overview: the DLedger facts beside the commitlog's
    ov = window.overview
    qtbot.waitUntil(lambda: ov.overview is not None, timeout=5000)
    text = ov.values["DLedger"].text()
    assert "dledger-n0: selfId n0, term 0, voteLeader n0" in text and "entries 0–1499" in text
    assert "committedIndex 1499" in text
    assert ov.values["Max offset"].text().startswith(str(m["min_max_offsets"]["maxPhyOffset"]))
    assert ov.tabs.tabText(1) == "DLedger data files" and ov.files.rowCount() == 31
    window.tabs.setCurrentWidget(ov)
    screenshot(window, "dledger-overview.png")
    assert store.info()["dledger"] is not None   # a DLedger log
    window.session.close()
    window.session.wait_open()
    assert tree_hashes(root) == before


def test_classic_store_overview_says_no_dledger(qtbot, window):
    open_and_wait(qtbot, window, unpack("small"))
    ov = window.overview
    qtbot.waitUntil(lambda: ov.overview is not None, timeout=5000)
    assert ov.values["DLedger"].text() == "no (classic commitlog)"
    assert ov.tabs.tabText(1) == "CommitLog files"


def test_read_write_open_of_a_dledger_store_is_a_dialog(qtbot, window, dialogs, fixture_copy):
    root = fixture_copy("dledger")
    before = tree_hashes(root)
    with qtbot.waitSignal(window.session.openFailed, timeout=10000):
        window.open_store(root, read_only=False)
    assert dialogs.kinds() == ["critical"]
    _, title, text = dialogs.calls[0]
    assert "DLedger store opens read-only" in text and "Traceback" not in text
    assert tree_hashes(root) == before and not (root / "abort").exists()


def test_segment_fill_of_a_dledger_store(qtbot):
    from engine import MessageStore
    from gui.internals.segment_fill import SegmentFillView
    m = manifest("dledger")
    with MessageStore.open(unpack("dledger")) as store:
        v = SegmentFillView()
        qtbot.addWidget(v)
        v.resize(1200, 860)
        done = []
        v.updated.connect(lambda: done.append(1))
        v.set_store(store)
        v.show()
        qtbot.waitUntil(lambda: bool(done), timeout=30000)
        rows = v.rows("commitlog")
        raw = m["dledger_raw_check"]["data_files"]
        assert [(r.label, r.numbers["messages"]) for r in rows] == [(d["file"], d["entries"]) for d in raw]
        first = m["dledger_entries"][0]
        # a click on an entry's header or its message opens the message (its RocketMQ offset)
        assert v.open_at("commitlog", 0, 0.0) == first["rmqPhyOffset"]
        assert v.open_at("commitlog", 0, (first["pos"] + 100) / 65536) == first["rmqPhyOffset"]
        assert "DLedger entry headers" in v.legend.text()
        qtbot.wait(150)
        screenshot(v, "dledger-segment-fill.png")
