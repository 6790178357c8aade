"""Opening stores: bad folders get a one-line dialog, read-only never changes a byte, recent
stores, the read-write switch (refused with the reason while another process holds the
lock), sending test messages, live tail, and the app entry point."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from PySide6.QtCore import Qt

from conftest import ROOT, unpack
from engine import MessageStore
from gui.models import message_table as mt
from guitest_support import (dialogs, open_and_wait, screenshot, settings, tree_hashes, wait_idle,  # noqa: F401
                             window)


def _open_failing(qtbot, window, path):
    with qtbot.waitSignal(window.session.openFailed, timeout=10000):
        window.open_store(path)


@pytest.mark.parametrize("make,expect", [
    (lambda p: p, "not a RocketMQ store"),
    (lambda p: p / "missing", "no such folder"),
    (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "not a folder"),
    (lambda p: ((p / "commitlog").mkdir(), (p / "commitlog" / "00000000000000000000").write_bytes(b"\0" * 1000),
                (p / "commitlog" / "00000000000000001000").write_bytes(b"\0" * 2000)) and p,
     "different sizes"),
])
def test_bad_folders_get_a_one_line_dialog(qtbot, window, dialogs, tmp_path, make, expect):
    path = make(tmp_path)
    _open_failing(qtbot, window, path)
    assert [c[0] for c in dialogs.calls] == ["critical"]
    kind, title, text = dialogs.calls[0]
    assert title == "Cannot open store" and expect in text
    assert "Traceback" not in text and len(text.splitlines()) <= 3
    assert window.stack.currentWidget() is window.welcome and not window.session.is_open


def test_a_failed_open_keeps_the_current_store(qtbot, window, dialogs, tmp_path):
    store = open_and_wait(qtbot, window, unpack("small"))
    _open_failing(qtbot, window, tmp_path)
    assert window.session.store is store and window.stack.currentWidget() is window.split
    assert dialogs.kinds() == ["critical"]


def test_read_only_browsing_changes_no_byte(qtbot, window):
    root = unpack("small")
    before = tree_hashes(root)
    open_and_wait(qtbot, window, root)
    b = window.browser
    window.show_queue("Orders_v2-EU", 0, None)
    b.go_last()
    b.f_key.setText("order-dup-001")
    b.apply_filter()
    window.search.k_topic.setCurrentText("TopicTest")
    window.search.k_key.setText("Aa")
    window.search.k_raw.setChecked(True)
    window.search.search_key()
    window.refresh()
    wait_idle(qtbot, window)
    window.close_store()
    assert tree_hashes(root) == before


def test_recent_stores_and_ctrl_digits(qtbot, window):
    a, b = unpack("small"), unpack("v5")
    open_and_wait(qtbot, window, a)
    open_and_wait(qtbot, window, b)
    acts = window.recent_actions
    assert [x.shortcut().toString() for x in acts] == ["Ctrl+1", "Ctrl+2"]
    assert str(b.resolve()) in acts[0].text() and str(a.resolve()) in acts[1].text()
    with qtbot.waitSignal(window.storeOpened, timeout=10000):
        acts[1].trigger()
    assert window.session.path.resolve() == a.resolve()
    assert str(a.resolve()) in window.recent_actions[0].text()


HOLD_LOCK = textwrap.dedent("""
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    print("locked", flush=True)
    sys.stdin.read()
""")


def test_read_write_is_refused_while_another_process_holds_the_lock(qtbot, window, dialogs, fixture_copy):
    root = fixture_copy("small")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(root / "lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        open_and_wait(qtbot, window, root)
        assert any(f"Process {holder.pid}" in t for t in window.banners.texts())
        with qtbot.waitSignal(window.storeOpened, timeout=10000):  # the read-only reopen after the refusal
            window.act_rw.setChecked(True)
        assert dialogs.calls and dialogs.calls[0][0] == "warning"
        kind, title, text = dialogs.calls[0]
        assert title == "Read-write refused" and f"locked by process {holder.pid}" in text
        assert window.session.read_only and not window.act_rw.isChecked()
        assert window.mode_label.text() == "READ-ONLY" and not window.act_send.isEnabled()
    finally:
        holder.stdin.close()
        holder.wait(10)


def test_switch_to_read_write_and_send_messages(qtbot, window, dialogs, fixture_copy):
    root = fixture_copy("small")
    store = open_and_wait(qtbot, window, root)
    if not hasattr(store, "put_message"):
        pytest.skip("engine has no MessageStore.put_message yet")
    window.show_queue("TopicTest", 1, None)
    assert not window.act_send.isEnabled()
    with qtbot.waitSignal(window.storeOpened, timeout=10000):
        window.act_rw.setChecked(True)
    assert not window.session.read_only and window.mode_label.text() == "READ-WRITE"
    assert any("Read-write" in t for t in window.banners.texts())
    assert (window.browser.model.topic, window.browser.model.queue_id) == ("TopicTest", 1)  # position kept
    model = window.browser.model
    before = model.rowCount()
    dlg = window.send_dialog()
    dlg.topic.setCurrentText("TopicTest")
    dlg.fixed.setChecked(True)
    dlg.queue.setValue(1)
    dlg.tags.setText("GuiTag")
    dlg.keys.setText("gui-{n} gui-all")
    dlg.props.setPlainText("source=gui\nseq={n}")
    dlg.body.setPlainText('{"from": "gui", "n": {n}}')
    dlg.body_mode.setCurrentIndex(1)  # JSON
    dlg.count.setValue(5)
    screenshot(dlg, "browser-send.png")
    with qtbot.waitSignal(dlg.sent, timeout=10000) as sent:
        qtbot.mouseClick(dlg.send_button, Qt.LeftButton)
    results = sent.args[0]
    assert len(results) == 5 and [r.queueId for r in results] == [1] * 5
    assert "Sent 5 messages" in dlg.result.text()
    qtbot.waitUntil(lambda: model.rowCount() == before + 5, timeout=5000)
    last = model.rowCount() - 1
    model.load_now(last, last)
    assert model.data(model.index(last, mt.COL_KEYS)) == "gui-5 gui-all"
    assert model.data(model.index(last, mt.COL_TAGS)) == "GuiTag"
    item = window.tree_model.find_queue_item("TopicTest", 1)
    assert item.parent().child(item.row(), 2).text() == str(results[-1].queueOffset + 1)
    m = window.session.store.commitlog.get_message(results[2].commitLogOffset)
    assert m.body == b'{"from": "gui", "n": 3}' and m.properties["seq"] == "3" and m.properties["source"] == "gui"
    # an invalid topic is refused before anything is written
    dlg.topic.setCurrentText("bad topic")
    assert not dlg.send_button.isEnabled() and "illegal characters" in dlg.topic_check.text()
    # the last message per topic is remembered
    dlg.topic.setCurrentText("TopicTest")
    dlg.keys.clear()
    qtbot.mouseClick(dlg.use_last, Qt.LeftButton)
    assert dlg.keys.text() == "gui-{n} gui-all" and dlg.count.value() == 5
    dlg.close()
    # send again from the detail pane fills the form from the shown message
    window.browser.go_last()
    qtbot.waitUntil(lambda: window.browser.detail.message is not None, timeout=5000)
    assert window.browser.detail.send_again.isVisibleTo(window.browser.detail)
    again = window.send_dialog(window.browser.detail.message)
    assert again.keys.text() == "gui-5 gui-all" and again.body.toPlainText() == '{"from": "gui", "n": 5}'
    assert "source=gui" in again.props.toPlainText() and "UNIQ_KEY" not in again.props.toPlainText()
    again.close()
    # back to read-only: everything written is there after the reopen
    with qtbot.waitSignal(window.storeOpened, timeout=10000):
        window.act_rw.setChecked(False)
    assert window.session.read_only
    found = window.session.store.query_message("TopicTest", "gui-all", max_num=0)
    assert len(found.messages) == 5


def test_live_tail_follows_another_writer(qtbot, window, fixture_copy):
    root = fixture_copy("small")
    store = open_and_wait(qtbot, window, root)
    if not hasattr(store, "refresh") or not hasattr(store, "put_message"):
        pytest.skip("engine has no MessageStore.refresh / put_message yet")
    window.show_queue("TopicTest", 0, None)
    model = window.browser.model
    before = model.rowCount()
    window.act_tail.setChecked(True)
    assert window.browser.tail.isChecked() and window.browser.tail_timer.isActive()
    with MessageStore.open(root, read_only=False) as writer:
        for i in range(3):
            writer.put_message("TopicTest", f"tail {i}".encode(), queue_id=0, keys=f"tail-{i}")
        writer.flush()
    qtbot.waitUntil(lambda: model.rowCount() == before + 3, timeout=8000)
    qtbot.waitUntil(lambda: window.browser.table.currentIndex().row() == before + 2, timeout=5000)
    window.act_tail.setChecked(False)
    assert not window.browser.tail_timer.isActive()


def test_version_flag_and_module_entry():
    out = subprocess.run([sys.executable, "-m", "gui.app", "--version"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("rmqstore-browser ")
    from gui.app import main
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0


def test_no_store_opens_the_demo(qtbot, window, tmp_path, monkeypatch):
    import gui.app as app
    if app.demo_maker() is None:
        pytest.skip("engine has no demo store yet")
    monkeypatch.setattr(app, "demo_path", lambda: tmp_path / "demo-store")
    with qtbot.waitSignal(window.storeOpened, timeout=30000):
        app.open_default(window)
    assert window.session.path == tmp_path / "demo-store" and window.session.read_only
    assert window.tree_model.groups_item.rowCount() > 0  # the demo has consumer groups with lag
    ov = window.overview
    qtbot.waitUntil(lambda: ov.overview is not None, timeout=10000)
    assert ov.lag.rowCount() == len(window.session.store.consumer_lag()) > 0
    window.tabs.setCurrentWidget(ov)
    ov.tabs.setCurrentWidget(ov.lag)
    screenshot(window, "browser-overview.png")
