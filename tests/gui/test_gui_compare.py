"""The Overview shows which generation wrote the store (with its evidence); Store ▸ Compare with
Store… runs the diff through the session's runner and shows the summary and the tables.
Screenshots: store-compare.png, overview-generation.png."""
from __future__ import annotations

import pytest

from conftest import unpack
from engine import MessageStore
from engine.store.generation import detect
from guitest_support import dialogs, open_and_wait, screenshot, settings, tree_hashes, window  # noqa: F401


@pytest.mark.parametrize("name,version", [("v5", "5.x"), ("crashed", "4.x")])
def test_overview_shows_the_generation_with_its_evidence(qtbot, window, name, version):
    root = unpack(name)
    open_and_wait(qtbot, window, root)
    ov = window.overview
    qtbot.waitUntil(lambda: ov.overview is not None, timeout=10000)
    lab = ov.values["Generation"]
    assert lab.text().startswith(f"{version}  (") and "point to it" in lab.text()
    evidence = detect(root).evidence
    assert ov.evidence.rowCount() == len(evidence)
    assert [ov.evidence.item(r, 1).text() for r in range(ov.evidence.rowCount())] == [e.kind for e in evidence]
    assert all(e.detail in lab.toolTip() for e in evidence)
    assert ("time lookup by the 5.x rule" in lab.text()) == (version == "5.x")
    if name == "v5":
        window.tabs.setCurrentWidget(ov)
        ov.tabs.setCurrentWidget(ov.evidence)
        screenshot(window, "overview-generation.png")


def test_compare_dialog_lists_what_the_copy_has_more(qtbot, window, fixture_copy, dialogs):
    a = unpack("small")
    b = fixture_copy("small")
    with MessageStore.open(b, read_only=False) as st:
        put = [st.put_message("TopicTest", f"added {i}".encode(), queue_id=2, tags="X", keys=f"new-{i}")
               for i in range(4)]
    before = tree_hashes(a), tree_hashes(b)
    open_and_wait(qtbot, window, a)
    assert window.act_compare.isEnabled()
    window.act_compare.trigger()
    dlg = window.compare_dlg
    dlg.other.setText(str(b))
    dlg.compare_button.click()
    qtbot.waitUntil(lambda: dlg.result is not None, timeout=20000)
    qtbot.waitUntil(lambda: dlg.compare_button.isEnabled(), timeout=5000)
    d = dlg.result
    assert not d["identical"] and d["firstDivergence"] == put[0].commitLogOffset
    assert dlg.only_a.rowCount() == 0 and dlg.only_b.rowCount() == 4
    assert [dlg.only_b.item(r, 5).text() for r in range(4)] == [p.msgId for p in put]
    assert [dlg.only_b.item(r, 3).text() for r in range(4)] == [str(p.commitLogOffset) for p in put]
    assert dlg.queues.rowCount() == 1 and dlg.queues.item(0, 0).text() == "TopicTest"
    assert dlg.tabs.currentWidget() is dlg.only_b and dlg.tabs.tabText(1) == "Only in B (4)"
    assert "first divergence at commitlog offset" in dlg.summary.text()
    assert not dlg.progress.isVisible() and not dlg.cancel_button.isVisible()
    dlg.resize(1100, 520)
    screenshot(dlg, "store-compare.png")
    assert (tree_hashes(a), tree_hashes(b)) == before  # both read, never written
    # a folder that is not a store: a message, no crash, the dialog usable again
    dlg.result = None
    dlg.other.setText(str(b / "commitlog"))
    dlg.compare_button.click()
    qtbot.waitUntil(lambda: dialogs.kinds() == ["critical"], timeout=10000)
    assert "could not compare" in dlg.summary.text() and dlg.result is None
    qtbot.waitUntil(lambda: dlg.compare_button.isEnabled(), timeout=5000)
    dlg.close()


def test_compare_is_refused_without_a_store(qtbot, window, dialogs):
    assert not window.act_compare.isEnabled()
    from gui.views.store_compare import open_compare_dialog
    assert open_compare_dialog(window) is None and dialogs.kinds() == ["information"]


def test_time_search_follows_the_generation_and_names_the_rule(qtbot, window):
    from PySide6.QtCore import Qt
    store = open_and_wait(qtbot, window, unpack("v5"))
    qtbot.waitUntil(lambda: window.overview.overview is not None, timeout=10000)  # it fills the search lists
    p = window.search
    window.tabs.setCurrentWidget(p)
    p.modes.setCurrentIndex(2)
    qtbot.waitUntil(lambda: p.t_topic.findText("TopicTest") >= 0, timeout=10000)
    p.t_topic.setCurrentText("TopicTest")
    p.t_queue.setCurrentIndex(p.t_queue.findData(1))
    cq = store.find_queue("TopicTest", 1)
    t = store.store_time_at("TopicTest", 1, (cq.min_offset + cq.max_offset) // 2) + 1
    p.t_time.set_ms(t)
    assert p.t_boundary.currentData() == "auto"
    with qtbot.waitSignal(p.lane.runner.idle, timeout=10000):
        qtbot.mouseClick(p.t_find, Qt.LeftButton)
    assert p.last_time_result["offset"] == store.get_offset_in_queue_by_time("TopicTest", 1, t, "lower")
    assert "rule 5.x-lower (the store's generation)" in p.t_result.text()
    screenshot(window, "search-time-rule.png")
