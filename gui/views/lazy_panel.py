"""A tab whose panel is built the first time it is shown (the internals and scan panels: they
compute a lot, pull in pyqtgraph, and most sessions never look at them). The caller's
factory imports the panel with a plain import statement (linters see it) when first called.

Panels follow the session, not a raw store: a panel made with the session (the scan panel)
follows it itself. A panel that still takes `set_store(store)` (the internals panel) gets the
store from here when the session opens one and None before it closes, then is waited for."""
from __future__ import annotations

from typing import Callable

from PySide6.QtWidgets import QVBoxLayout, QWidget


class LazyPanel(QWidget):
    def __init__(self, session, factory: Callable[[], QWidget],
                 on_created: Callable[[QWidget], None] | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.factory = factory
        self.on_created = on_created
        self.panel: QWidget | None = None
        self._lay = QVBoxLayout(self)
        self._lay.setContentsMargins(0, 0, 0, 0)
        session.opened.connect(self._follow)
        session.aboutToClose.connect(self._closing)

    def ensure(self) -> QWidget:
        """Build the panel now (first show, or a caller that needs it)."""
        if self.panel is None:
            self.panel = self.factory()
            self._lay.addWidget(self.panel)
            if self.on_created is not None:
                self.on_created(self.panel)
            self._follow()
        return self.panel

    def _takes_store(self) -> bool:
        return self.panel is not None and getattr(self.panel, "session", None) is None

    def _follow(self, *_) -> None:
        if self._takes_store():
            self.panel.set_store(self.session.store)

    def _closing(self, *_) -> None:
        if self._takes_store():  # let its own workers finish before the maps go away
            self.panel.set_store(None)
            self.panel.wait()

    def showEvent(self, event) -> None:
        self.ensure()
        super().showEvent(event)
