"""File ▸ New Demo Store…: the dialog refuses folders that are not new or empty, the demo is
written off the UI thread with messages, rate and time left in the progress dialog, Cancel
leaves no half store (not even in an empty folder the user made), and a finished store opens
read-only. Real stores, real widgets, pictures looked at."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
from PySide6.QtWidgets import QDialogButtonBox, QProgressBar, QPushButton  # noqa: E402

from engine.store.demo import MARKER, PROGRESS_EVERY  # noqa: E402
from engine.tasks import Progress  # noqa: E402
from guitest_support import dialogs, screenshot, settings, window  # noqa: E402,F401


def test_the_menu_has_it(window):
    from gui.views.new_demo import new_demo_store  # noqa: F401
    file_menu = window.menuBar().actions()[0].menu()
    assert window.act_new_demo in file_menu.actions()


def test_dialog_takes_new_or_empty_folders_only(qtbot, window, tmp_path):
    from gui.views.new_demo import NewDemoDialog
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    dlg = NewDemoDialog(window)
    qtbot.addWidget(dlg)
    ok = dlg.buttons.button(QDialogButtonBox.Ok)
    assert not ok.isEnabled() and "choose a folder" in dlg.problem.text()
    dlg.folder.setText(str(tmp_path / "full"))
    assert not ok.isEnabled() and "not empty" in dlg.problem.text()
    dlg.folder.setText(str(tmp_path / "file"))
    assert not ok.isEnabled() and "file" in dlg.problem.text()
    for good in ("empty", "new"):
        dlg.folder.setText(str(tmp_path / good))
        assert ok.isEnabled() and dlg.problem.text() == ""
    dlg.messages.setValue(2_000_000)
    assert dlg.values() == (tmp_path / "new", 2_000_000, 7)
    dlg.show()
    screenshot(dlg, "new-demo-dialog.png")


def test_written_to_the_end_it_opens_read_only(qtbot, window, tmp_path):
    from gui.views.new_demo import new_demo_store
    target = tmp_path / "demo"
    with qtbot.waitSignal(window.storeOpened, timeout=30000):
        task = new_demo_store(window, target, 5000, seed=3)
    assert task.done and (target / MARKER).exists()
    assert window.session.path == target and window.session.read_only
    assert window.tree_model.groups_item.rowCount() > 0   # consumer groups with lag


def test_cancel_leaves_the_empty_folder_empty(qtbot, window, tmp_path):
    from gui.views.new_demo import new_demo_store
    from gui.views.progress import TaskProgressDialog
    target = tmp_path / "made-by-the-user"
    target.mkdir()
    task = new_demo_store(window, target, 2_000_000)
    dlg = window.findChildren(TaskProgressDialog)[-1]
    bar = dlg.findChild(QProgressBar)
    seen = []

    def on_value(v):    # Cancel at the second report (the label then tells of the first)
        seen.append((v, bar.maximum(), dlg.labelText()))
        if v > PROGRESS_EVERY and not task.cancel.cancelled:
            dlg.findChild(QPushButton).click()
    bar.valueChanged.connect(on_value)
    qtbot.waitUntil(lambda: task.done, timeout=30000)
    assert any(v > 0 and m == 2_000_000 for v, m, _ in seen)
    label = next(t for v, _, t in seen if v > PROGRESS_EVERY)
    assert " of 2,000,000 messages · " in label and " messages/s · about " in label
    assert task.cancel.cancelled and window.session.store is None
    assert "cancelled" in window.statusBar().currentMessage()
    assert target.is_dir() and not any(target.iterdir())        # nothing of a half store


def test_a_folder_that_is_not_empty_is_refused_with_a_dialog(window, dialogs, tmp_path):
    from gui.views.new_demo import new_demo_store
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert new_demo_store(window, tmp_path / "full", 1000) is None
    assert dialogs.calls and "not empty" in dialogs.calls[-1][2]
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["x"]


def test_progress_picture(qtbot, window):
    from gui.views.new_demo import progress_text
    from gui.views.progress import TaskProgressDialog
    p = Progress(480_000, 2_000_000, "demo", "messages")
    assert progress_text(p, 10.0) == "480,000 of 2,000,000 messages · 48,000 messages/s · about 32 s left"
    assert progress_text(Progress(10_000, 2_000_000, "demo", "messages"), 10.0).endswith("about 33 min left")
    dlg = TaskProgressDialog(window, "New demo store", "", lambda: None)
    dlg.show_progress(p)
    dlg.setLabelText(progress_text(p, 10.0))
    dlg.forceShow()
    assert dlg.value() == 480_000 and dlg.maximum() == 2_000_000
    screenshot(dlg, "new-demo-progress.png")
    dlg.finish()
