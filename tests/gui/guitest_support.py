"""Shared fixtures of the GUI tests (imported by the test modules; not a conftest, so the
root conftest keeps its module name)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMessageBox

from conftest import ROOT
from engine import MessageStore
from engine.store.consume_queue import CQ_UNIT_DTYPE

SHOTS = ROOT / "build" / "screenshots"


class DialogRecorder:
    """Stands in for QMessageBox's static functions: records instead of blocking. Error boxes
    that offer an action (dialogs.error_offering: non-blocking, real) are recorded as
    "critical" too, and kept in `boxes` so a test can press their buttons."""

    def __init__(self):
        self.calls: list[tuple[str, str, str]] = []
        self.boxes: list = []

    def record(self, kind):
        def fn(parent, title, text, *a, **k):
            self.calls.append((kind, title, text))
            return QMessageBox.Ok
        return fn

    def kinds(self):
        return [c[0] for c in self.calls]


@pytest.fixture
def dialogs(monkeypatch):
    rec = DialogRecorder()
    for kind in ("critical", "warning", "information", "question"):
        monkeypatch.setattr(QMessageBox, kind, staticmethod(rec.record(kind)))
    from gui.views import dialogs as gui_dialogs
    original = gui_dialogs.error_offering

    def offering(parent, title, exc, action, on_action, detail=""):
        box = original(parent, title, exc, action, on_action, detail)
        rec.calls.append(("critical", title, box.text()))
        rec.boxes.append(box)
        return box

    monkeypatch.setattr(gui_dialogs, "error_offering", offering)
    return rec


@pytest.fixture
def settings(tmp_path):
    s = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    s.setValue("utc", True)  # tests compare times in UTC, whatever the machine's zone
    return s


@pytest.fixture
def window(qtbot, settings, dialogs):
    from gui.main_window import MainWindow
    w = MainWindow(settings=settings)
    qtbot.addWidget(w)
    w.resize(1440, 900)
    w.show()
    yield w
    w.browser.set_tail(False)
    w.session.close()
    w.session.wait_open()


def open_and_wait(qtbot, window, path, read_only=True, timeout=10000):
    with qtbot.waitSignal(window.storeOpened, timeout=timeout):
        window.open_store(path, read_only=read_only)
    return window.session.store


def wait_idle(qtbot, window, timeout=10000):
    """Until no background task of the session is running or queued."""
    qtbot.waitUntil(lambda: window.session.runner.active == 0, timeout=timeout)


def tree_hashes(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            h = hashlib.sha256(p.read_bytes()).hexdigest()
            st = p.stat()
            out[str(p.relative_to(root))] = f"{h}:{st.st_size}:{st.st_mtime_ns}"
    return out


def screenshot(widget, name: str) -> Path:
    """Save widget.grab() to build/screenshots/NAME after pending layout and paint events ran."""
    from PySide6.QtTest import QTest
    QTest.qWait(30)
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / name
    assert widget.grab().save(str(path)), f"could not save {path}"
    return path


def tile_queue(root, topic: str, n: int) -> np.ndarray:
    """A queue of n units made of the real units of TopicTest (every row points at a real record)."""
    with MessageStore.open(root) as s:
        units = np.concatenate([s.queues[("TopicTest", q)].units(0, 10**6).copy() for q in range(4)])
        per_file = s.cfg.mappedFileSizeConsumeQueue // 20
    tiled = np.resize(units, n).astype(CQ_UNIT_DTYPE)
    qdir = root / "consumequeue" / topic / "0"
    qdir.mkdir(parents=True)
    for k in range(0, n, per_file):
        buf = np.zeros(per_file, dtype=CQ_UNIT_DTYPE)
        part = tiled[k:k + per_file]
        buf[:len(part)] = part
        (qdir / f"{k * 20:020d}").write_bytes(buf.tobytes())
    return tiled
