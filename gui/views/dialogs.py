"""Every message box the browser shows goes through here (tests patch QMessageBox)."""
from __future__ import annotations

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


def warning(parent: QWidget | None, title: str, text: str) -> None:
    QMessageBox.warning(parent, title, text)


def info(parent: QWidget | None, title: str, text: str) -> None:
    QMessageBox.information(parent, title, text)
