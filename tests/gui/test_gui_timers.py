"""The browser's timer views on the 5.x `v5_timer` store (RocketMQ 5.3.3): the Timers tab (timer
messages by fire time, where each one is, its records in the message detail) and the Internals
"Timer wheel" tab, both shown only for a store with a timer store. Compared with the manifest;
screenshots build/screenshots/timer-messages.png and timer-wheel.png."""
from __future__ import annotations

from PySide6.QtCore import Qt

from conftest import manifest, unpack
from guitest_support import dialogs, open_and_wait, screenshot, settings, tree_hashes, wait_idle, window  # noqa: F401

T = manifest("v5_timer")["timer"]
STATUS = {m["uniqKey"]: m for m in T["message_status"] if m["status"] in ("pending", "delivered")}


def _timers(qtbot, window):
    window.tabs.setCurrentWidget(window.timers)
    view = window.timers.ensure()
    qtbot.waitUntil(lambda: view.model.rowCount() > 0, timeout=10000)
    return view


def test_timer_tabs_appear_only_with_a_timer_store(qtbot, window):
    open_and_wait(qtbot, window, unpack("v5"))
    tabs = window.tabs
    assert not tabs.isTabVisible(tabs.indexOf(window.timers))
    window.tabs.setCurrentWidget(window.internals)
    panel = window.internals.ensure()
    assert not panel.tabs.isTabVisible(panel.tabs.indexOf(panel.timer_wheel))
    open_and_wait(qtbot, window, unpack("v5_timer"))
    assert tabs.isTabVisible(tabs.indexOf(window.timers))
    assert panel.tabs.isTabVisible(panel.tabs.indexOf(panel.timer_wheel))
    assert panel.tabs.indexOf(panel.timer_wheel) == panel.tabs.indexOf(panel.slot_heatmap) + 1
    window.close_store()
    assert not tabs.isTabVisible(tabs.indexOf(window.timers))


def test_timer_messages_by_fire_time_and_where_each_one_is(qtbot, window):
    root = unpack("v5_timer")
    before = tree_hashes(root)
    open_and_wait(qtbot, window, root)
    view = _timers(qtbot, window)
    model = view.model
    msgs = [model.message(r) for r in range(model.rowCount())]
    assert {m.uniqKey: m.status for m in msgs} == {k: m["status"] for k, m in STATUS.items()}
    assert [m.fireTime for m in msgs] == sorted(int(m["TIMER_OUT_MS"]) for m in STATUS.values())
    view.status.setCurrentText("pending")
    assert model.rowCount() == sum(m["status"] == "pending" for m in STATUS.values())
    # a rolled pending message: three wheel records, three units, its slot due after the read clock
    row = next(r for r in range(model.rowCount()) if model.message(r).rollTimes == 2)
    m = model.message(row)
    view.select_row(row)
    want = STATUS[m.uniqKey]
    text = view.where.toPlainText()
    for off in want["wheelTopicRecords_phyOffsets"]:
        assert f"offset {off}" in text
    for u in want["timerlogUnits"]:
        assert f"pos {u['timerlogPos']}" in text
    assert f"slot {m.wheelSlot:,}" in text and "due: after the read clock" in text
    assert "none in the store" in text
    assert view.detail.message.commitLogOffset == want["wheelTopicRecords_phyOffsets"][-1]
    assert view.detail.message.topic == "rmq_sys_wheel_timer"
    assert model.index(row, 1).data(Qt.ForegroundRole) is not None
    view.status.setCurrentText("all")
    delivered = next(r for r in range(model.rowCount()) if model.message(r).rollTimes == 2
                     and model.message(r).status == "delivered")
    view.select_row(delivered)
    m = model.message(delivered)
    copy = STATUS[m.uniqKey]["deliveredRecords"][0]
    assert view.detail.message.commitLogOffset == copy["phyOffset"] and view.detail.message.topic == copy["topic"]
    assert "processed: the read clock has passed it" in view.where.toPlainText()
    screenshot(window, "timer-messages.png")
    view.open_button.click()                       # the delivered copy in its queue
    assert window.tabs.currentWidget() is window.browser
    assert (window.browser.model.topic, window.browser.model.queue_id) == (copy["topic"], copy["queueId"])
    wait_idle(qtbot, window)
    window.close_store()
    assert tree_hashes(root) == before


def test_timer_wheel_view(qtbot, window):
    open_and_wait(qtbot, window, unpack("v5_timer"))
    window.tabs.setCurrentWidget(window.internals)
    panel = window.internals.ensure()
    panel.tabs.setCurrentWidget(panel.timer_wheel)
    view = panel.timer_wheel
    qtbot.waitUntil(lambda: view.model.rowCount() == len(T["wheel_raw_nonzero"]), timeout=10000)
    rows = view.model.rows
    assert [[int(r["index"]), int(r["time"]), int(r["firstPos"]), int(r["lastPos"]), int(r["num"])] for r in rows] \
        == [[w[0], w[1], w[3], w[4], w[5]] for w in T["wheel_raw_nonzero"]]
    assert view.heat is not None and view.heat.bins > 0 and len(view.dots.data) >= 1
    assert len(view.clock.data) == 1
    read = T["timercheck"]["lastReadTimeMs"]
    states = [view.model.index(i, 5).data() for i in range(len(rows))]
    assert states == ["processed" if w[2] <= read else "due" for w in T["wheel_raw_nonzero"]]
    assert len(view.bars.opts["x"]) == len(rows)
    last = T["wheel_raw_nonzero"][-3]                     # slot 484411: 14 roll units
    assert view.select_slot(last[0])
    chain = view.chain.toPlainText()
    assert chain.count("\npos ") == last[5] and f"pos {last[4]:>9}" in chain
    units = {u["pos"]: u for u in T["timerlog_units"] if not u.get("blank")}
    with qtbot.waitSignal(panel.openRequested) as sig:
        view.open_slot(view.table.currentIndex().row())
    assert sig.args == [units[last[4]]["offsetPy"]]
    screenshot(panel, "timer-wheel.png")


def test_overview_names_the_timer_store(qtbot, window):
    """The Overview's Timer store row: units and files of the timerlog, occupied wheel slots and
    the read clock, as the manifest has them; a store without one says so."""
    open_and_wait(qtbot, window, unpack("v5_timer"))
    window.tabs.setCurrentWidget(window.overview)
    ov = window.overview
    qtbot.waitUntil(lambda: ov.overview is not None, timeout=10000)
    text = ov.values["Timer store"].text()
    units = sum(1 for u in T["timerlog_units"] if u["size"] == 52)   # blank records are shorter
    assert f"timerlog: {units:,} units in {len(T['timerlog_files'])} file(s)" in text, text
    assert f"wheel: {len(T['wheel_raw_nonzero']):,} of 1,209,600 slots used, precision 1000 ms" in text, text
    assert "read clock" in text and "—" not in text
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: ov.values["Generation"].height() > ov.values["Mode"].height(), timeout=5000)  # laid out
    screenshot(window, "overview-timer.png")
    open_and_wait(qtbot, window, unpack("v5"))
    qtbot.waitUntil(lambda: ov.values["Timer store"].text().startswith("none"), timeout=10000)
