"""Store ▸ Check Store…: the check runs on the session's runner with one progress bar over its
phases and Cancel, and lists each problem where it is. Screenshots: store-check.png,
store-check-progress.png."""
from __future__ import annotations

from conftest import unpack
from engine import MessageStore
from engine.tasks import Progress
from guitest_support import dialogs, open_and_wait, screenshot, settings, tree_hashes, window  # noqa: F401


def _damage_a_body(root) -> int:
    with MessageStore.open(root, read_only=True) as st:
        m = st.get_message("TopicTest", 0, 3, 1).messages[0]
        f = st.commitlog.queue.find(m.commitLogOffset)
        start = m.commitLogOffset - f.file_from_offset
        path, record, body = f.path, bytes(f.buf[start:start + m.storeSize]), m.body
    assert body
    pos = start + record.index(body) + len(body) // 2
    with open(path, "r+b") as fh:   # a byte inside the body: its CRC
        fh.seek(pos)
        b = fh.read(1)[0]
        fh.seek(pos)
        fh.write(bytes([b ^ 0x55]))
    return m.commitLogOffset


def test_check_dialog_lists_the_damage_and_writes_nothing(qtbot, window, fixture_copy, dialogs):
    root = fixture_copy("small")
    _damage_a_body(root)
    before = tree_hashes(root)
    open_and_wait(qtbot, window, root)
    assert window.act_check.isEnabled()
    window.act_check.trigger()
    dlg = window.check_dlg
    qtbot.waitUntil(lambda: dlg.result is not None, timeout=30000)
    qtbot.waitUntil(lambda: dlg.check_button.isEnabled(), timeout=5000)
    r = dlg.result
    assert not r["ok"] and dlg.problems.rowCount() == len(r["problems"]) > 0
    kinds = {dlg.problems.item(i, 0).text() for i in range(dlg.problems.rowCount())}
    assert "commitlog-crc" in kinds, kinds
    assert dlg.summary.text().startswith("PROBLEMS:") and "messages" in dlg.summary.text()
    assert not dlg.progress.isVisible() and not dlg.cancel_button.isVisible()
    screenshot(dlg, "store-check.png")
    dlg.close()
    assert tree_hashes(root) == before   # read, never written


def test_check_dialog_progress_over_phases_and_cancel(qtbot, window):
    open_and_wait(qtbot, window, unpack("small"))
    window.act_check.trigger()
    dlg = window.check_dlg
    dlg.cancel()                          # Cancel at once: no verdict, the dialog usable again
    assert "cancelled" in dlg.summary.text() and dlg.check_button.isEnabled()
    assert not dlg.cancel_button.isVisible()
    qtbot.wait(300)
    assert dlg.result is None
    dlg.start()                           # and again: this time to the end
    qtbot.waitUntil(lambda: dlg.result is not None, timeout=30000)
    assert dlg.result["ok"] and dlg.summary.text().startswith("OK")
    # the bar: the commitlog's bytes first, then the later phases, each named
    from gui.views.store_check import overall
    dlg._busy(True)
    half = overall(Progress(50, 100, "commitlog", "bytes"))
    later = overall(Progress(1, 3, "consume queues", "phases"))
    assert 0 < half.fraction < later.fraction < overall(Progress(3, 3, "checkpoint and config", "phases")).fraction
    dlg.busy_row.show_progress(half)
    assert dlg.progress.isVisible() and dlg.cancel_button.isVisible()
    assert dlg.progress.format().startswith("commitlog")
    screenshot(dlg, "store-check-progress.png")
    dlg._busy(False)


def test_check_dialog_lists_a_crash_leftovers_apart_from_damage(qtbot, window, fixture_copy, dialogs):
    root = fixture_copy("crashed_torn")
    before = tree_hashes(root)
    open_and_wait(qtbot, window, root)
    window.act_check.trigger()
    dlg = window.check_dlg
    qtbot.waitUntil(lambda: dlg.result is not None, timeout=30000)
    r = dlg.result
    assert r["ok"] and dlg.problems.rowCount() == 0
    assert dlg.summary.text().startswith("OK (recovery pending: ")
    assert dlg.pending.isVisible() and dlg.pending.rowCount() == len(r["recoveryPending"]) > 0
    kinds = {dlg.pending.item(i, 0).text() for i in range(dlg.pending.rowCount())}
    assert {"abort", "commitlog-tail"} <= kinds
    assert "recovery cuts the log" in " ".join(dlg.pending.item(i, 2).text() for i in range(dlg.pending.rowCount()))
    screenshot(dlg, "store-check-recovery-pending.png")
    dlg.close()
    assert tree_hashes(root) == before


def test_check_dialog_says_ok_with_the_brokers_own_delay_levels(qtbot, window, dialogs):
    """RocketMQ's lineage store (its broker's messageDelayLevel: 1s x 18, then 1h): OK, and the
    note that says which setting reproduces its delivery times, readable in the summary."""
    open_and_wait(qtbot, window, unpack("lineage"))
    window.act_check.trigger()
    dlg = window.check_dlg
    qtbot.waitUntil(lambda: dlg.result is not None, timeout=30000)
    qtbot.waitUntil(lambda: dlg.check_button.isEnabled(), timeout=5000)
    assert dlg.result["ok"] and dlg.problems.rowCount() == 0
    text = dlg.summary.text()
    assert text.startswith("OK") and "messageDelayLevel='" + " ".join(["1s"] * 18 + ["1h"]) in text
    assert dlg.summary.wordWrap()
    screenshot(dlg, "store-check-notes.png")
    dlg.close()
