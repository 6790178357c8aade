"""The GUI's read-write switch says which recovery the open ran and what it cut (issue 33)."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from conftest import fixture_copy, unpack  # noqa: E402,F401
from guitest_support import dialogs, open_and_wait, screenshot, settings, window  # noqa: E402,F401


def test_read_write_open_of_a_crashed_store_says_what_recovery_cut(qtbot, window, fixture_copy):
    root = fixture_copy("crashed_torn")
    store = open_and_wait(qtbot, window, root, read_only=True)
    assert "crash recovery would keep" in banner_text(window)        # read-only: nothing ran
    assert store.abort_present
    store = open_and_wait(qtbot, window, root, read_only=False)
    said = banner_text(window)
    assert "Opening read-write ran abnormal recovery (abort file present)" in said
    assert f"commitlog cut at {store.max_offset}" in said and "re-dispatched" in said
    screenshot(window, "recovery_said.png")
    open_and_wait(qtbot, window, root, read_only=True)
    store = open_and_wait(qtbot, window, root, read_only=False)     # a clean start: nothing to say
    assert "recovery" not in banner_text(window)


def banner_text(window) -> str:
    from PySide6.QtWidgets import QLabel
    return " ".join(w.text() for w in window.banners.findChildren(QLabel) if w.isVisible())
