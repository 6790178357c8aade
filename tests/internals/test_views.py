"""The four internals views as real widgets (pytest-qt, offscreen) on the small and default
conformance stores: the numbers each view shows are checked against values computed
independently from the manifests, and a screenshot of each is saved to build/screenshots/."""
from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import manifest, unpack
from engine import MessageStore
from engine import analysis as A
from engine.format.javahash import index_key_hash
from internals_helpers import chain_length_counts, commitlog_oracle, index_oracle, shot


from gui.internals.collision_chain import CollisionChainView  # noqa: E402
from gui.internals.cq_units import CqUnitsView  # noqa: E402
from gui.internals.panel import InternalsPanel  # noqa: E402
from gui.internals.segment_fill import SegmentFillView  # noqa: E402
from gui.internals import heatmap as H  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from gui.internals.slot_heatmap import SlotHeatmapView  # noqa: E402
from gui.workers import Background  # noqa: E402

FIXTURES = ["small", "default"]
SUFFIX = {"small": "", "default": "-default"}
# a chain with true collisions and slot sharing, and the key to query in it
DEMO = {"small": ("20261122012526904", "Orders_v2-EU#AaAa"), "default": ("20261122012547514", "TopicTest#AaAa")}


@pytest.fixture(scope="module", params=FIXTURES)
def opened(request):
    store = MessageStore.open(unpack(request.param))
    yield request.param, store, manifest(request.param)
    store.close()


def shown(qtbot, view, store, size=(1200, 860)):
    """Show `view` on `store` and wait until its background work has landed."""
    qtbot.addWidget(view)
    view.resize(*size)
    failures, done = [], []
    view.background.failed.connect(lambda ch, text: failures.append(text))
    view.updated.connect(lambda: done.append(1))
    view.set_store(store)
    view.show()
    qtbot.waitUntil(lambda: bool(done or failures), timeout=30000)
    assert not failures, failures[0]
    return view


def settle(qtbot, view, ms=150):
    """Let debounced redraws run before a screenshot."""
    qtbot.wait(ms)


# ---- segment fill -------------------------------------------------------------------------------
def test_segment_fill_numbers_clicks_and_screenshot(qtbot, opened):
    name, store, mf = opened
    v = shown(qtbot, SegmentFillView(), store)
    expected = commitlog_oracle(mf)
    rows = v.rows("commitlog")
    assert [r.label for r in rows] == [e["name"] for e in expected]
    size = mf["config"]["mappedFileSizeCommitLog"]
    for r, e in zip(rows, expected):
        n = r.numbers
        assert (n["wrotePosition"], n["messages"], n["messageBytes"], n["blankTail"]) == \
            (e["wrotePosition"], e["messages"], e["messageBytes"], e["blankTail"])
        assert n["fill"] == pytest.approx(e["messageBytes"] / size)
        assert n["topicBytes"] == e["topicBytes"]
    # the tooltip tells the same numbers
    tip = v.describe("commitlog", 0, 0.0)
    e0 = expected[0]
    assert f"messages {e0['messages']:,}: {e0['messageBytes']:,} bytes" in tip
    assert f"written {e0['wrotePosition']:,} of {size:,} bytes" in tip
    first = e0["msgs"][0]
    assert f"{first['topic']}" in tip
    # click on the first byte opens the first message; a click in the middle opens the record there
    with qtbot.waitSignal(v.openRequested) as sig:
        assert v.open_at("commitlog", 0, 0.0) == first["phyOffset"]
    assert sig.args == [first["phyOffset"]]
    mid = expected[0]["msgs"][len(expected[0]["msgs"]) // 2]
    x = (mid["phyOffset"] + mid["totalSize"] // 2 - int(e0["name"])) / size
    assert v.open_at("commitlog", 0, x) == mid["phyOffset"]
    # ConsumeQueue rows: units written of units per file, from the manifest's write positions
    per_file = mf["config"]["consumeQueueUnitsPerFile"]
    qexp = [(q["topic"], q["queueId"], f["name"], f["wrotePosition"] // 20)
            for q in sorted(mf["consume_queues"], key=lambda q: (q["topic"], q["queueId"])) for f in q["files"]]
    qrows = v.rows("queue")
    assert [(r.numbers["topic"], r.numbers["queueId"], r.numbers["file"], r.numbers["writtenUnits"]) for r in qrows] == qexp
    assert all(r.numbers["fill"] == pytest.approx(u / per_file) for r, (_, _, _, u) in zip(qrows, qexp))
    q0 = next(q for q in mf["consume_queues"] if (q["topic"], q["queueId"]) == qexp[0][:2])
    assert v.open_at("queue", 0, 0.0) == q0["units"][0][1]
    assert f"units written {qexp[0][3]:,} of {per_file:,}" in v.describe("queue", 0, 0.0)
    # index rows: entries used of maxIndexNum and slots used of maxHashSlotNum
    irows = v.rows("index")
    assert len(irows) == 2 * len(mf["index_files"])
    for r, x in zip(irows[::2], mf["index_files"]):
        assert r.numbers["entriesUsed"] == len(x["entries"])
        assert r.numbers["slotsUsed"] == len(x["nonEmptySlots"])
        assert r.numbers["entryFill"] == pytest.approx(len(x["entries"]) / mf["config"]["maxIndexNum"])
        assert r.numbers["slotFill"] == pytest.approx(len(x["nonEmptySlots"]) / mf["config"]["maxHashSlotNum"])
    x0 = mf["index_files"][0]
    tip = v.describe("index", 1, 0.5)
    assert f"slots used {len(x0['nonEmptySlots']):,} of maxHashSlotNum {mf['config']['maxHashSlotNum']:,}" in tip
    # the summary line
    assert f"{len(mf['messages']):,} messages" in v.summary.text()
    # nearly empty files (default: 118 KB of 1 GiB) start zoomed to their used part
    assert v.charts["commitlog"].zoomed == (name == "default")
    settle(qtbot, v)
    assert v.charts["commitlog"].rendered > 0
    shot(v, "segment-fill" + SUFFIX[name])


def test_segment_fill_drops_results_of_a_replaced_store(qtbot):
    small = MessageStore.open(unpack("small"))
    default = MessageStore.open(unpack("default"))
    try:
        v = SegmentFillView()
        qtbot.addWidget(v)
        v.show()
        with qtbot.waitSignal(v.updated, timeout=30000):
            v.set_store(small)
            v.set_store(default)      # the small walk may still be running: its result must not land
        qtbot.waitUntil(lambda: not v.background.busy, timeout=30000)
        assert [r.label for r in v.rows("commitlog")] == ["00000000000000000000"]
        assert v.rows("commitlog")[0].numbers["messages"] == 360
    finally:
        v.background.wait()
        small.close()
        default.close()


def test_segment_fill_shows_progress_and_cancel_stops_it(qtbot):
    store = MessageStore.open(unpack("default"))
    try:
        v = SegmentFillView()
        qtbot.addWidget(v)
        v.set_store(store)
        v.show()                       # the walk starts here, on the pool
        assert v.progress.isVisible() and v.cancel_button.isVisible()
        qtbot.mouseClick(v.cancel_button, Qt.LeftButton)
        qtbot.waitUntil(lambda: not v.background.busy, timeout=30000)
        qtbot.wait(50)                 # a result already queued for the UI thread must be dropped
        assert v.fill is None and not v.progress.isVisible()
        assert "cancelled" in v.summary.text()
        with qtbot.waitSignal(v.updated, timeout=30000):
            v.refresh()                # computing again works, and reports progress in file bytes
        assert v.fill is not None and not v.progress.isVisible()
        assert v.progress.maximum() == 1000 and v.progress.value() == 1000
    finally:
        v.background.wait()
        store.close()


# ---- ConsumeQueue units -------------------------------------------------------------------------
def test_cq_units_series_selection_and_screenshot(qtbot, opened):
    name, store, mf = opened
    v = shown(qtbot, CqUnitsView(), store)
    # default choice: the queue with the most units
    biggest = max(mf["consume_queues"], key=lambda q: (q["maxOffset"] - q["minOffset"], q["topic"], q["queueId"]))
    assert (v.series.topic, v.series.queue_id) == (biggest["topic"], biggest["queueId"])
    for topic, qid in [("SCHEDULE_TOPIC_XXXX", 15), ("TopicTest", 1)]:
        q = next(q for q in mf["consume_queues"] if (q["topic"], q["queueId"]) == (topic, qid))
        with qtbot.waitSignal(v.updated, timeout=30000):
            v.select_queue(topic, qid)
        times = {m["phyOffset"]: m["storeTimestamp"] for m in mf["messages"]}
        units = q["units"]
        x, y = v.curves["phy"].getData()
        assert x.tolist() == [u[0] for u in units]
        assert (y + v.bases["phy"]).astype(np.int64).tolist() == [u[1] for u in units]
        assert v.curves["size"].getData()[1].tolist() == [u[2] for u in units]
        assert (v.curves["tags"].getData()[1] + v.bases["tags"]).astype(np.int64).tolist() == [u[3] for u in units]
        t = v.curves["time"].getData()[1] * 1000 + v.bases["time"]
        assert np.round(t).astype(np.int64).tolist() == [times[u[1]] for u in units]
        assert f"{len(units):,} units" in v.summary.text()
    # a selection emits queue offsets, a click opens the message
    with qtbot.waitSignal(v.queueOffsetsSelected) as sig:
        v.set_selection(3, 9)
    assert sig.args == ["TopicTest", 1, 3, 9]
    assert v.selected_range() == (3, 9)
    with qtbot.waitSignal(v.openRequested) as sig:
        assert v.open_queue_offset(1) == units[1][1]
    assert sig.args == [units[1][1]]
    with qtbot.waitSignal(v.updated, timeout=30000):
        v.select_queue("TopicTest", 0)
    settle(qtbot, v)
    shot(v, "cq-units" + SUFFIX[name])


# ---- slot heat map ------------------------------------------------------------------------------
def test_slot_heatmap_numbers_histogram_and_screenshot(qtbot, opened):
    name, store, mf = opened
    v = shown(qtbot, SlotHeatmapView(), store)
    for x in mf["index_files"][:2]:
        if v.result.name != x["name"]:
            with qtbot.waitSignal(v.updated, timeout=30000):
                v.select_file(x["name"])
        o = index_oracle(mf, x["name"])
        counts = chain_length_counts(mf, x["name"])
        slots, entries = mf["config"]["maxHashSlotNum"], len(x["entries"])
        # histogram bars and table rows
        h = v.result.histogram
        assert {k: o_ for k, o_, _ in h.rows() if o_} == {k: c for k, c in counts.items() if c}
        table = {int(v.table.item(r, 0).text()): int(v.table.item(r, 1).text().replace(",", ""))
                 for r in range(v.table.rowCount())}
        assert {k: c for k, c in table.items() if c} == {k: c for k, c in counts.items() if c}
        assert sum(table.values()) == slots
        v.log.setChecked(False)
        bx, bh = v.obs_bars.opts["x"], v.obs_bars.opts["height"]
        assert {int(round(a + 0.2)): int(b) for a, b in zip(bx, bh) if b} == {k: c for k, c in counts.items() if c}
        v.log.setChecked(True)
        # stats line: load factor, used slots, longest chain
        text = v.stats_label.text()
        assert f"load factor <b>{entries / slots:.4g}</b>" in text
        assert f"used slots <b>{len(x['nonEmptySlots']):,}</b>" in text
        longest_slot = max(o["chains"], key=lambda s: (len(o["chains"][s]), -s))
        assert f"slot {longest_slot:,} ({len(o['chains'][longest_slot])})" in text
        # the heat map holds every slot: per-bin max equals the manifest's chains
        heat = v.heat
        flat = heat.image.ravel()[:heat.bins]
        expected = np.zeros(heat.bins)
        for s, ch in o["chains"].items():
            expected[s // heat.slots_per_bin] = max(expected[s // heat.slots_per_bin], len(ch))
        assert np.array_equal(flat, expected)
        # the painted image: each bin the colour map's colour of its index, past the last bin clear
        v.image.render()
        q, idx = v.image.qimage, H.heat_indices(heat)
        lut = v.cmap.getLookupTable(0.0, 1.0, 255, alpha=True)
        for b in {0, b_max := int(np.argmax(flat)), heat.bins - 1}:
            r, c = divmod(b, heat.image.shape[1])
            px = q.pixelColor(c, r)
            assert (px.red(), px.green(), px.blue(), px.alpha()) == tuple(int(x) for x in lut[idx[r, c]]), b
        assert idx.ravel()[b_max] == 254
        if heat.bins < idx.size:
            assert q.pixelColor(heat.image.shape[1] - 1, heat.image.shape[0] - 1).alpha() == 0
        # clicking the pixel of the longest chain activates that slot
        b = longest_slot // heat.slots_per_bin
        with qtbot.waitSignal(v.slotActivated) as sig:
            v.activate_pixel(*divmod(b, heat.image.shape[1]))
        assert sig.args == [x["name"], longest_slot]
        assert f"longest chain {len(o['chains'][longest_slot])}" in v.describe_pixel(*divmod(b, heat.image.shape[1])) \
            or f"chain length {len(o['chains'][longest_slot])}" in v.describe_pixel(*divmod(b, heat.image.shape[1]))
    with qtbot.waitSignal(v.updated, timeout=30000):
        v.select_file(mf["index_files"][0]["name"])
    settle(qtbot, v, 250)
    shot(v, "slot-heatmap" + SUFFIX[name])


# ---- collision chains ----------------------------------------------------------------------------
def test_collision_chain_members_kinds_query_and_screenshot(qtbot, opened):
    name, store, mf = opened
    v = CollisionChainView()
    qtbot.addWidget(v)
    v.resize(1200, 860)
    v.set_store(store)
    v.show()
    msgs = {m["phyOffset"]: m for m in mf["messages"]}
    for x in mf["index_files"][:2]:
        o = index_oracle(mf, x["name"])
        for slot, chain in list(o["chains"].items())[:20]:
            with qtbot.waitSignal(v.updated):
                v.show_slot(x["name"], slot)
            assert [b.entry.step.index for b in v.boxes] == chain
            for b in v.boxes:
                _, kh, phy, diff, prev = o["entries"][b.entry.step.index]
                assert (b.entry.step.keyHash, b.entry.step.commitLogOffset, b.entry.step.prevIndex) == (kh, phy, prev)
                assert b.entry.topic == msgs[phy]["topic"]
            assert f"chain of <b>{len(chain)}</b>" in v.summary.text()
    fname, key = DEMO[name]
    with qtbot.waitSignal(v.updated):
        r = v.show_key(fname, key)
    topic, k = key.split("#", 1)
    assert r.slot == index_key_hash(key) % mf["config"]["maxHashSlotNum"]
    o = index_oracle(mf, fname)
    assert [b.entry.step.index for b in v.boxes] == o["chains"][r.slot]
    truly = [b for b in v.boxes if msgs[b.entry.step.commitLogOffset]["topic"] == topic
             and k in (msgs[b.entry.step.commitLogOffset]["keys"] or "").split(" ")]
    assert [b.entry for b in truly] == r.matches and truly
    kinds = {b.entry.kind for b in v.boxes}
    assert A.MATCH in kinds and A.COLLISION in kinds
    # matches are outlined in gold: a query returns them
    assert all(b.pen().width() == 5 for b in truly)
    if name == "default":     # one index file: the query's hits are what RocketMQ returned
        offs = next(p[3] for p in mf["key_queries"]["all_pairs"] if (p[0], p[1]) == (topic, k))
        assert [e.step.commitLogOffset for e in r.hits] == offs
    with qtbot.waitSignal(v.openRequested) as sig:
        v.open_entry(truly[0].entry.step.index)
    assert sig.args == [truly[0].entry.step.commitLogOffset]
    qtbot.wait(50)
    shot(v, "collision-chain" + SUFFIX[name])


def test_collision_chain_shows_broken_links_and_cycles(qtbot, tmp_path):
    from test_analysis_oracles import damaged_index
    f = damaged_index(tmp_path)
    store = SimpleNamespace(index=SimpleNamespace(files=[f]), commitlog=SimpleNamespace(get_message=lambda o: None))
    v = CollisionChainView()
    qtbot.addWidget(v)
    v.resize(1200, 500)
    v.set_store(store)
    v.show()
    r = v.show_slot(f.name, 2)
    assert [b.entry.step.index for b in v.boxes] == [6, 4, 2] and r.cycle_to == 6
    assert "Damaged chain: cycle back to entry 6" in v.summary.text()
    r = v.show_slot(f.name, 3)
    assert r.broken and "link to entry 99 beyond indexCount 10" in v.summary.text()
    r = v.show_slot(f.name, 2)
    qtbot.wait(50)
    shot(v, "collision-chain-damaged")
    v.set_store(None)
    f.close()


# ---- the panel and the worker --------------------------------------------------------------------
def test_panel_heatmap_click_walks_the_chain(qtbot):
    store = MessageStore.open(unpack("small"))
    try:
        p = InternalsPanel()
        qtbot.addWidget(p)
        p.resize(1200, 860)
        with qtbot.waitSignal(p.segment_fill.updated, timeout=30000):
            p.set_store(store)
            p.show()
        got = []
        p.openRequested.connect(got.append)
        p.segment_fill.open_at("commitlog", 0, 0.0)
        assert got == [0]
        with qtbot.waitSignal(p.slot_heatmap.updated, timeout=30000):
            p.tabs.setCurrentWidget(p.slot_heatmap)
        heat = p.slot_heatmap.heat                      # slot 34: the longest chain of the first file
        slot = p.slot_heatmap.activate_pixel(*divmod(34 // heat.slots_per_bin, heat.image.shape[1]))
        assert slot == 34 and p.tabs.currentWidget() is p.collision_chain
        assert p.collision_chain.resolution.slot == 34 and len(p.collision_chain.boxes) == 14
        with qtbot.waitSignal(p.cq_units.updated, timeout=30000):
            p.tabs.setCurrentWidget(p.cq_units)
        sel = []
        p.queueOffsetsSelected.connect(lambda *a: sel.append(a))
        p.cq_units.set_selection(0, 5)
        assert sel and sel[-1][2:] == (0, 5)
        p.set_store(None)
        assert p.wait()
    finally:
        store.close()


def test_background_delivers_only_the_newest_result(qtbot):
    bg = Background()
    got = []
    bg.submit("x", lambda: (time.sleep(0.3), "old")[1], on_done=got.append)
    bg.submit("x", lambda: "new", on_done=got.append)
    qtbot.waitUntil(lambda: not bg.busy, timeout=5000)
    assert got == ["new"] and bg.dropped == 1
    bg.submit("y", lambda: 1 / 0, on_done=got.append)
    with qtbot.waitSignal(bg.failed) as sig:
        pass
    assert sig.args[0] == "y" and "ZeroDivisionError" in sig.args[1]
    bg.wait()


def test_internals_panel_follows_the_session_and_holds_its_lock(qtbot):
    from gui.internals.panel import InternalsPanel
    from gui.session import StoreSession
    session = StoreSession()
    session.open_blocking(unpack("small"))
    panel = InternalsPanel(session)
    qtbot.addWidget(panel)
    v = panel.segment_fill
    assert v._store is session.store          # the panel got the store from the session
    with session.lock:                         # a writer holds the store: the walk must wait
        panel.show()
        qtbot.wait(300)
        assert v.fill is None and v.background.busy
    with qtbot.waitSignal(v.updated, timeout=30000):
        pass
    assert v.fill is not None
    session.close()                            # closing hands the panel None and waits for it
    assert v._store is None and session.store is None
    qtbot.waitUntil(lambda: not panel.busy(), timeout=5000)
