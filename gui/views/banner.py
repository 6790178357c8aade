"""Banners above the views: abort file present, read-write mode, store warnings."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

STYLES = {
    "info": "background:#e8f0fe; color:#1a3d7c; border:1px solid #b6c8ef;",
    "warning": "background:#fff4ce; color:#5c4400; border:1px solid #e0c96b;",
    "error": "background:#fde7e9; color:#7a1020; border:1px solid #eaa0a8;",
}


class Banner(QFrame):
    def __init__(self, kind: str, text: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.kind = kind
        self.setObjectName(f"banner-{kind}")
        self.setStyleSheet(f"QFrame#{self.objectName()} {{ {STYLES[kind]} border-radius:3px; }}")
        self.label = QLabel(text, self)
        self.label.setTextFormat(Qt.PlainText)  # paths and store text are never markup
        self.label.setWordWrap(True)
        close = QToolButton(self)
        close.setText("×")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(self.hide)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 4, 4)
        lay.addWidget(self.label, 1)
        lay.addWidget(close)

    @property
    def text(self) -> str:
        return self.label.text()


class BannerArea(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._lay = QVBoxLayout(self)
        self._lay.setContentsMargins(4, 4, 4, 0)
        self._lay.setSpacing(3)
        self.banners: dict[str, Banner] = {}
        self.setVisible(False)

    def show_banner(self, key: str, kind: str, text: str) -> Banner:
        self.remove(key)
        b = Banner(kind, text, self)
        self.banners[key] = b
        self._lay.addWidget(b)
        self.setVisible(True)
        return b

    def remove(self, key: str) -> None:
        b = self.banners.pop(key, None)
        if b is not None:
            b.setParent(None)
            b.deleteLater()
        self.setVisible(bool(self.banners))

    def clear(self) -> None:
        for k in list(self.banners):
            self.remove(k)

    def texts(self) -> list[str]:
        return [b.text for b in self.banners.values() if not b.isHidden()]

    def show_store(self, store) -> None:
        """The banners a newly opened store needs: a crash (or the recovery the read-write open
        ran), read-write, a lock held by another process, the open's warnings."""
        self.clear()
        said = None if store.read_only else store.recovery.summary(store.recovery_plan)
        if said:  # the read-write switch: which recovery ran and what it cut
            self.show_banner("abort", "warning", f"Opening read-write ran {said}.")
        elif store.abort_present:
            self.show_banner(
                "abort", "warning",
                "The abort file is present: the broker did not shut down cleanly (or is still running). "
                "What is shown is what RocketMQ's crash recovery would keep.")
        if not store.read_only:
            self.show_banner("rw", "info", "Read-write: this window holds the store's lock and may "
                                           "append messages. Switch back to read-only when done.")
        holder = store.broker_holding_lock() if store.read_only else None
        if holder:
            self.show_banner("lock", "info", f"Process {holder} (a broker or another writer) holds the "
                                             "lock: the store may be changing while you look (F5 / Live tail).")
        note = getattr(store, "banner_note", None)  # what kind of folder this is, when not a store (a tier)
        if note:
            self.show_banner("kind", "info", note)
        warnings = list(getattr(store, "warnings", []) or [])
        if warnings:
            more = f" (+{len(warnings) - 1} more in Overview ▸ Warnings)" if len(warnings) > 1 else ""
            self.show_banner("warnings", "warning", warnings[0] + more)
