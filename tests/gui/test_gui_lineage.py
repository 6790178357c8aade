"""The detail pane's Lineage tab on the `lineage` fixture (README_LINEAGE.md): a dead-lettered
payment shown from its DLQ copy gives the manifest's records as cards in write order with their
roles and colours, the shown record outlined, consumed-by marks; a click on a card shows that
record in the browser (and the timeline follows it); a search hit gets the same timeline.
Screenshot: build/screenshots/lineage.png (under Xvfb with QT_QPA_PLATFORM=xcb for real fonts)."""
from __future__ import annotations

from PySide6.QtCore import Qt

from conftest import manifest, unpack
from guitest_support import dialogs, open_and_wait, screenshot, settings, window  # noqa: F401
from gui.views.lineage_view import ROLE_COLOURS


def _timeline(qtbot, detail):
    detail.tabs.setCurrentWidget(detail.lineage)
    qtbot.waitUntil(lambda: bool(detail.lineage.cards) and detail.lineage.current == detail.message.commitLogOffset,
                    timeout=5000)
    return detail.lineage


def test_lineage_tab_from_a_dlq_copy_and_a_click(qtbot, window):
    open_and_wait(qtbot, window, unpack("lineage"))
    life = manifest("lineage")["lifecycles"]["retry-0019"]
    records = {r["commitLogOffset"]: r for r in manifest("lineage")["records"]}
    dlq = records[life["records"][-1]]
    window.show_queue(dlq["topic"], dlq["queueId"], dlq["queueOffset"])
    d = window.browser.detail
    qtbot.waitUntil(lambda: d.message is not None and d.message.commitLogOffset == dlq["commitLogOffset"], timeout=5000)
    view = _timeline(qtbot, d)
    assert [c.record["commitLogOffset"] for c in view.cards] == life["records"]
    assert [c.record["role"] for c in view.cards] == life["roles"]
    assert [c.current for c in view.cards] == [o == dlq["commitLogOffset"] for o in life["records"]]
    assert ROLE_COLOURS["dlq"] in view.cards[-1].styleSheet() and "2px solid" in view.cards[-1].styleSheet()
    first = view.cards[0].text.text()
    assert "✓ payment_consumer_group" in first and "PaymentTopic" in first   # the original was consumed
    assert "attempt 16" in view.cards[-2].text.text()
    window.browser.split.setSizes([220, 680])   # room for the timeline in the picture
    screenshot(window, "lineage.png")
    # a click on the original's card shows it in the browser; the timeline follows
    qtbot.mouseClick(view.cards[0], Qt.LeftButton)
    qtbot.waitUntil(lambda: d.message is not None and d.message.commitLogOffset == life["records"][0], timeout=5000)
    view = _timeline(qtbot, d)
    assert [c.current for c in view.cards] == [o == life["records"][0] for o in life["records"]]


def test_lineage_tab_from_a_search_hit(qtbot, window):
    open_and_wait(qtbot, window, unpack("lineage"))
    life = manifest("lineage")["lifecycles"]["tx-0031"]   # committed: half, commit copy, op message
    p = window.search
    window.tabs.setCurrentWidget(p)
    p.k_topic.setCurrentText("PaymentTopic")
    p.k_key.setText(life["keys"])
    with qtbot.waitSignal(p.results.modelReset, timeout=3000):
        qtbot.mouseClick(p.k_search, Qt.LeftButton)
    qtbot.waitUntil(lambda: p.detail.message is not None, timeout=3000)
    view = _timeline(qtbot, p.detail)
    assert [c.record["role"] for c in view.cards] == life["roles"] == ["tx-half", "tx-commit", "tx-op"]
    assert "txAction commit" in view.cards[2].text.text()


def test_scan_tab_fates_table_and_plot(qtbot, window):
    open_and_wait(qtbot, window, unpack("lineage"))
    window.tabs.setCurrentWidget(window.scans)
    panel = window.scans.ensure()
    panel.engine_box.setCurrentIndex(panel.engine_box.findData("local"))
    panel.job_box.setCurrentText("fates")
    with qtbot.waitSignal(panel.finished, timeout=30_000) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.LeftButton)
    rows = blocker.args[0].rows
    counts = manifest("lineage")["counts"]["byFinalState"]
    assert panel.model.rowCount() == len(rows) and sum(r["lives"] for r in rows) == 482
    assert sum(r["deadLettered"] for r in rows) == counts["dead-lettered"]
    assert panel.model.columns[:3] == ["topic", "group", "lives"]
    assert panel.plot.isVisible()
    legend = [item[1].text for item in panel.plot.plotItem.legend.items]
    assert {"delivered", "deadLettered", "committed", "unresolved"} <= set(legend)
    screenshot(panel, "scan-fates.png")
