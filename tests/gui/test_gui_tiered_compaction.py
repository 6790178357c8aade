"""The GUI on a tier folder (tiered storage) and on a store with compacted topics: both open,
browse and search; the compaction view shows, per key, the kept message and how many were
compacted away; screenshots build/screenshots/tiered.png and compaction.png."""
from __future__ import annotations

from conftest import manifest, unpack
from guitest_support import dialogs, open_and_wait, screenshot, settings, tree_hashes, wait_idle, window  # noqa: F401


def test_tier_folder_opens_and_browses(qtbot, window):
    root = unpack("tiered_store")
    before = tree_hashes(root)
    store = open_and_wait(qtbot, window, root / "tiered")
    assert store.tier_store is store and store.local_store is None   # a tier on its own
    item = window.tree_model.find_queue_item("TopicA", 1)
    window.tree.setCurrentIndex(window.tree_model.indexFromItem(item))
    window.tabs.setCurrentWidget(window.browser)
    model = window.browser.model
    assert model.rowCount() == 54
    wait_idle(qtbot, window)
    screenshot(window, "tiered.png")
    window.session.close()
    window.session.wait_open()
    assert tree_hashes(root) == before


def test_tier_overview(qtbot, window):
    open_and_wait(qtbot, window, unpack("tiered_store") / "tiered")
    ov = window.overview
    qtbot.waitUntil(lambda: ov.overview is not None, timeout=5000)
    assert ov.overview.message_count == 300 and ov.overview.queue_count == 6
    assert ov.values["Index entries"].text() == "660"
    window.tabs.setCurrentWidget(ov)
    wait_idle(qtbot, window)
    screenshot(window, "tiered-overview.png")


def test_compacted_topics_marked_and_their_compaction_view(qtbot, window):
    m = manifest("compaction_store")
    root = unpack("compaction_store")
    before = tree_hashes(root)
    open_and_wait(qtbot, window, root / "store")
    tm = window.tree_model
    labels = [tm.topics_item.child(i).text() for i in range(tm.topics_item.rowCount())]
    assert labels == ["CompactA  [compacted]", "CompactB  [compacted]"]
    window.tabs.setCurrentWidget(window.internals)
    internals = window.internals.ensure()
    view = internals.compaction
    assert internals.tabs.isTabVisible(internals.tabs.indexOf(view))
    assert view.queue.count() == 4
    internals.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.shown is not None, timeout=10000)   # the first queue, once shown
    view.queue.setCurrentIndex(view.queue.findText("CompactB / queue 0"))
    assert view.shown is None and view.busy_row.isVisibleTo(view)   # computed off the UI thread
    qtbot.waitUntil(lambda: view.shown == ("CompactB", 0), timeout=10000)
    assert not view.busy_row.isVisibleTo(view) and view.busy_row.progress.maximum() == 1000   # progress came
    kept = [e for e in m["messages"] if (e["topic"], e["queueId"]) == ("CompactB", 0)]
    puts = [p for p in m["puts"] if (p["topic"], p["queueId"]) == ("CompactB", 0)]
    assert sum(len(r["kept"]) for r in view.rows) == len(kept) == 30
    assert sum(r["puts"] for r in view.rows) == len(puts)
    by_key = {r["key"]: r for r in view.rows}
    for e in kept:
        assert e["queueOffset"] in [x.queueOffset for x in by_key[e["keys"]]["kept"]]
    assert view.table.rowCount() == len(view.rows)
    row = next(i for i in range(view.table.rowCount()) if view.table.item(i, 0).text() == kept[0]["keys"])
    r = by_key[kept[0]["keys"]]
    assert view.table.item(row, 5).text() == str(r["puts"] - len(r["kept"]))
    internals.tabs.setCurrentWidget(view)
    wait_idle(qtbot, window)
    screenshot(window, "compaction.png")
    window.session.close()
    window.session.wait_open()
    assert tree_hashes(root) == before


def test_tier_internals_show_its_segments(qtbot, window):
    open_and_wait(qtbot, window, unpack("tiered_store") / "tiered")
    window.tabs.setCurrentWidget(window.internals)
    p = window.internals.ensure()
    visible = [p.tabs.tabText(i) for i in range(p.tabs.count()) if p.tabs.isTabVisible(i)]
    assert visible == ["Tier segments", "Segment fill"]
    files = {f["path"]: f["size"] for f in manifest("tiered_store")["files"] if f["path"].startswith("tiered/")}
    v = p.tier_segments
    assert len(v.rows) == v.table.rowCount() == len(files) == 38
    assert sum(r[4] for r in v.rows) == sum(files.values())
    fill = p.segment_fill   # Segment fill: the tier's segments only (no local files)
    tier_rows = fill.rows("tier")
    assert not fill.rows("commitlog") and len(tier_rows) == 38
    assert sum(r.numbers["size"] for r in tier_rows) == sum(files.values())
    assert "38 segments" in fill.summary.text()
    assert not fill.charts["commitlog"].widget.isVisibleTo(fill) and fill.charts["tier"].widget.isVisibleTo(fill)
    p.tabs.setCurrentWidget(fill)
    wait_idle(qtbot, window)
    screenshot(window, "tiered-segment-fill-tier-only.png")
    p.tabs.setCurrentWidget(v)
    wait_idle(qtbot, window)
    screenshot(window, "tiered-segments.png")
    window.session.close()   # a classic store afterwards: the classic views come back
    window.session.wait_open()
    open_and_wait(qtbot, window, unpack("compaction_store") / "store")
    visible = [p.tabs.tabText(i) for i in range(p.tabs.count()) if p.tabs.isTabVisible(i)]
    assert "Segment fill" in visible and "Tier segments" not in visible and "Compaction" in visible


def test_tier_searches_by_key_id_and_time(qtbot, window):
    from gui.models.search import id_search, key_search, time_search
    m = manifest("tiered_store")
    store = open_and_wait(qtbot, window, unpack("tiered_store") / "tiered")
    want = set(m["queryMessage_queueId:queueOffset:commitLogOffset"]["TopicC"]["ord-7"])
    for raw in (False, True):
        out = window.session.call(key_search, "TopicC", "ord-7", raw=raw)
        assert {f"{h.message.queueId}:{h.message.queueOffset}:{h.message.commitLogOffset}" for h in out.hits} == want
    e = m["messages"][150]
    out = window.session.call(id_search, e["uniqKey"])
    assert out.kind == "uniq" and [x.queueOffset for x in out.messages] == [e["queueOffset"]]
    t = window.session.call(time_search, e["topic"], e["queueId"], e["storeTimestamp"])
    assert store.get_message(e["topic"], e["queueId"], t["offset"], 1).messages[0].storeTimestamp == e["storeTimestamp"]


def test_store_with_its_tier_from_store_settings(qtbot, window, fixture_copy):
    """Store Settings' tieredStoreFilePath: the local store's commitlog is gone (retention), so
    under NOT_IN_DISK every row comes from the tier, as TieredMessageStore reads it."""
    from gui import store_config as sc
    m = manifest("tiered_store")
    root = fixture_copy("tiered_store")
    (root / "store" / "commitlog" / "00000000000000000000").unlink()
    assert "tieredStoreFilePath" in sc.NAMES and sc.check({"tieredStorageLevel": "FORCE"}) == ""
    with qtbot.waitSignal(window.storeOpened, timeout=10000):
        window.open_store(root / "store", read_only=True, settings={"tieredStoreFilePath": str(root / "tiered")})
    store = window.session.store
    assert store.tier_store is not store and store.local_store is not None   # a store with its tier
    assert any("read from the tier" in t for t in window.banners.texts())
    item = window.tree_model.find_queue_item("TopicC", 0)
    window.tree.setCurrentIndex(window.tree_model.indexFromItem(item))
    window.tabs.setCurrentWidget(window.browser)
    model = window.browser.model
    assert model.rowCount() == 52
    model.load_now(0, 51)
    want = [e for e in m["messages"] if (e["topic"], e["queueId"]) == ("TopicC", 0)]
    from gui.models import message_table as mt
    assert [model.data(model.index(r, mt.COL_PHY)) for r in range(52)] == [str(e["commitLogOffset"]) for e in want]
    b = window.browser
    b.go_to_offset(7)
    qtbot.waitUntil(lambda: b.detail.message is not None and b.detail.message.queueOffset == 7, timeout=5000)
    assert b.detail.message.commitLogOffset == want[7]["commitLogOffset"]
    assert b.detail.message.body.decode() == want[7]["body"]
    window.tabs.setCurrentWidget(window.internals)
    p = window.internals.ensure()
    assert p.tabs.isTabVisible(p.tabs.indexOf(p.tier_segments)) and len(p.tier_segments.rows) == 38
    p.tabs.setCurrentWidget(p.tier_segments)
    assert window.tree_model.topics_item.child(0).text() == "TopicA"
    assert window.tree_model.topics_item.index().siblingAtColumn(3).data() == "300"  # reached through the tier
    wait_idle(qtbot, window)
    screenshot(window, "tiered-with-store.png")


def test_segment_fill_draws_the_tier_beside_the_local_files(qtbot, window):
    """A store with its tier: Segment fill has the local commitlog, CQ and index bars and a
    Tier segments chart of every tier segment, coloured by its queue's topic as the local files are."""
    root = unpack("tiered_store")
    with qtbot.waitSignal(window.storeOpened, timeout=10000):
        window.open_store(root / "store", read_only=True, settings={"tieredStoreFilePath": str(root / "tiered")})
    window.tabs.setCurrentWidget(window.internals)
    p = window.internals.ensure()
    fill = p.segment_fill
    p.tabs.setCurrentWidget(fill)
    qtbot.waitUntil(lambda: fill.fill is not None, timeout=20000)
    assert len(fill.rows("commitlog")) == 1 and fill.rows("queue")
    files = {f["path"]: f["size"] for f in manifest("tiered_store")["files"] if f["path"].startswith("tiered/")}
    rows = fill.rows("tier")
    assert len(rows) == len(files) == 38 and fill.charts["tier"].widget.isVisible()
    by_name = {(r.numbers["flatFile"], r.numbers["type"], r.numbers["baseOffset"]): r for r in rows}
    a0 = by_name[("TopicA/0", "COMMIT_LOG", 0)]
    assert a0.size == max(r.numbers["size"] for r in rows if r.numbers["type"] == "COMMIT_LOG")
    topic_id = int(a0.segments.ids[0])
    assert fill.charts["tier"].colors[topic_id] == fill.topic_colors["TopicA"]
    assert "TopicA/0" in fill.describe("tier", rows.index(a0), 0.1)
    assert "Tier broker-fx" not in fill.summary.text() and "Tier FixtureCluster/broker-fx" in fill.summary.text()
    wait_idle(qtbot, window)
    screenshot(window, "tiered-segment-fill.png")


def test_compaction_view_cancel_keeps_the_ui_free(qtbot, window):
    """Cancel drops the running summary (its result never lands); choosing the queue again reads it."""
    open_and_wait(qtbot, window, unpack("compaction_store") / "store")
    window.tabs.setCurrentWidget(window.internals)
    internals = window.internals.ensure()
    view = internals.compaction
    internals.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.shown is not None, timeout=10000)
    view.queue.setCurrentIndex(view.queue.findText("CompactA / queue 1"))
    assert view.shown is None
    view.busy_row.cancel_button.click()
    assert view.background.wait(10000)
    qtbot.wait(50)
    assert view.shown is None and view.rows == [] and "cancelled" in view.summary.text()
    view.queue.setCurrentIndex(view.queue.findText("CompactA / queue 0"))
    qtbot.waitUntil(lambda: view.shown == ("CompactA", 0), timeout=10000)
    assert view.rows and view.table.rowCount() == len(view.rows)
