"""Every message box the browser shows goes through here (tests patch QMessageBox)."""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QMessageBox, QWidget


def one_line(exc: BaseException | str) -> str:
    """The error's own one-line message (engine errors name the file and offset)."""
    if isinstance(exc, str):
        return exc
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def error(parent: QWidget | None, title: str, exc: BaseException | str, detail: str = "") -> None:
    text = one_line(exc)
    QMessageBox.critical(parent, title, f"{detail}\n\n{text}" if detail else text)


def error_offering(parent: QWidget | None, title: str, exc: BaseException | str, action: str,
                   on_action: Callable[[], object], detail: str = "") -> QMessageBox:
    """An error box with one more button (`action`, e.g. "Store settings…") that calls
    `on_action` after the box closes. Window-modal but not blocking (open(), not exec()), so
    the event loop runs on and tests can press its buttons; returned for that."""
    text = one_line(exc)
    box = QMessageBox(QMessageBox.Critical, title, f"{detail}\n\n{text}" if detail else text,
                      QMessageBox.Close, parent)
    box.setTextFormat(Qt.PlainText)
    box.action_button = box.addButton(action, QMessageBox.AcceptRole)
    box.setDefaultButton(box.action_button)
    box.setAttribute(Qt.WA_DeleteOnClose)

    def clicked(button):
        if button is box.action_button:
            QTimer.singleShot(0, on_action)  # after the box has closed

    box.buttonClicked.connect(clicked)
    box.open()
    return box


def warning(parent: QWidget | None, title: str, text: str) -> None:
    QMessageBox.warning(parent, title, text)


def info(parent: QWidget | None, title: str, text: str) -> None:
    QMessageBox.information(parent, title, text)
