"""Long work in the window shows progress and Cancel stops it (real stores, real widgets):
opening a store, writing the demo store. The runner's own rules are in test_gui_workers."""
from __future__ import annotations

import threading

import pytest

pytest.importorskip("PySide6")
from PySide6.QtWidgets import QProgressBar, QPushButton  # noqa: E402

from conftest import fixture_copy, unpack  # noqa: E402,F401
from engine.store.demo import MARKER  # noqa: E402
from engine.tasks import Progress  # noqa: E402
from guitest_support import dialogs, open_and_wait, screenshot, settings, window  # noqa: E402,F401


def test_opening_shows_progress_and_cancel_keeps_the_window_as_it_was(qtbot, window, fixture_copy):
    root = fixture_copy("small")
    window.open_store(root, read_only=False)
    dlg = window.open_progress
    assert dlg is not None and "opening" in dlg.labelText() and dlg.maximum() == 0   # busy until a total
    with qtbot.waitSignal(window.session.openCancelled, timeout=10000):
        dlg.findChild(QPushButton).click()   # the dialog's Cancel, before the open's result reached the window
    assert window.open_progress is None and window.session.store is None
    assert "cancelled" in window.statusBar().currentMessage()
    window.session.wait_open()
    qtbot.wait(50)                                     # the abandoned store arrives and is closed
    assert window.session.store is None
    # its lock was given back: the same store opens read-write again
    store = open_and_wait(qtbot, window, root, read_only=False)
    assert not store.read_only and window.open_progress is None


def test_open_progress_dialog_picture(qtbot, window):
    from gui.views.progress import TaskProgressDialog
    dlg = TaskProgressDialog(window, "Opening store", "opening /data/store (read-write)…", lambda: None)
    dlg.show_progress(Progress(3, 10, "recover", "files", message="recovering: commitlog file 3 of 10"))
    dlg.forceShow()
    assert dlg.isVisible() and dlg.value() == 3 and dlg.maximum() == 10
    screenshot(dlg, "open-progress.png")
    dlg.finish()


def test_a_quick_open_never_flashes_the_dialog(qtbot, window):
    open_and_wait(qtbot, window, unpack("small"))
    assert window.open_progress is None
    assert not [w for w in window.findChildren(QProgressBar) if w.isVisible() and w.window() is not window]


def test_demo_store_progress_and_cancel_stops_the_writer(qtbot, window, tmp_path, monkeypatch):
    import gui.app as app
    from gui.views.progress import TaskProgressDialog
    target = tmp_path / "demo-store"
    monkeypatch.setattr(app, "demo_path", lambda: target)
    task = app.open_default(window)
    dlg = window.findChildren(TaskProgressDialog)[-1]
    bar = dlg.findChild(QProgressBar)
    seen = []

    def on_value(v):     # Cancel pressed as soon as the first messages are reported written
        seen.append((v, bar.maximum()))
        if v > 0 and not task.cancel.cancelled:
            dlg.findChild(QPushButton).click()
    bar.valueChanged.connect(on_value)
    qtbot.waitUntil(lambda: task.done, timeout=30000)
    assert any(v > 0 and m == 12000 for v, m in seen)             # messages written, of the total
    assert task.cancel.cancelled and window.session.store is None
    assert "cancelled" in window.statusBar().currentMessage()
    assert not target.exists()                                     # no half store left behind
    assert not [t for t in threading.enumerate() if "demo" in t.name]


def test_demo_store_written_to_the_end_opens(qtbot, window, tmp_path, monkeypatch):
    import gui.app as app
    monkeypatch.setattr(app, "demo_path", lambda: tmp_path / "demo-store")
    with qtbot.waitSignal(window.storeOpened, timeout=30000):
        app.open_default(window)
    assert (tmp_path / "demo-store" / MARKER).exists() and window.session.read_only
