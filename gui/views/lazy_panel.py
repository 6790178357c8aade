"""A tab whose panel is imported and built the first time it is shown (the internals and
scan panels: heavier imports, and built by other parts of the project). The panel follows
the store through `set_store(store)`, with None before the store closes."""
from __future__ import annotations

import importlib
from typing import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget


class LazyPanel(QWidget):
    def __init__(self, module: str, attr: str, factory_kwargs: Callable[[], dict] | None = None,
                 on_created: Callable[[QWidget], None] | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.module, self.attr = module, attr
        self.factory_kwargs = factory_kwargs or (lambda: {})
        self.on_created = on_created
        self.panel: QWidget | None = None
        self.error: str | None = None
        self.store = None
        self._lay = QVBoxLayout(self)
        self._lay.setContentsMargins(0, 0, 0, 0)

    def available(self) -> bool:
        try:
            importlib.import_module(self.module)
            return True
        except ImportError:
            return False

    def ensure(self) -> QWidget | None:
        """Build the panel now (first show, or a caller that needs it)."""
        if self.panel is not None or self.error is not None:
            return self.panel
        try:
            cls = getattr(importlib.import_module(self.module), self.attr)
        except (ImportError, AttributeError) as exc:
            self.error = f"{self.module}.{self.attr} is not available: {exc}"
            lab = QLabel(self.error, self)
            lab.setTextFormat(Qt.PlainText)
            lab.setAlignment(Qt.AlignCenter)
            self._lay.addWidget(lab)
            return None
        self.panel = cls(**self.factory_kwargs())
        self._lay.addWidget(self.panel)
        if self.on_created is not None:
            self.on_created(self.panel)
        self.panel.set_store(self.store)
        return self.panel

    def set_store(self, store) -> None:
        self.store = store
        if self.panel is None:
            return
        self.panel.set_store(store)
        if store is None:  # let its own workers finish before the maps go away
            wait = getattr(self.panel, "wait", None)
            pool = getattr(self.panel, "pool", None)
            if callable(wait):
                wait()
            elif pool is not None and hasattr(pool, "waitForDone"):
                pool.waitForDone()

    def showEvent(self, event) -> None:
        self.ensure()
        super().showEvent(event)
