"""A tab whose panel is built the first time it is shown (the internals and scan panels: they
compute a lot, pull in pyqtgraph, and most sessions never look at them). The caller's
factory imports the panel with a plain import statement (linters see it) when first called.

Panels are made with the session and follow it themselves (its store, under its lock): this
widget never hands a raw store to anyone."""
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

    def ensure(self) -> QWidget:
        """Build the panel now (first show, or a caller that needs it)."""
        if self.panel is None:
            self.panel = self.factory()
            self._lay.addWidget(self.panel)
            from ..plot_theme import restyle   # pyqtgraph: only once a panel is built
            restyle(self.panel)
            if self.on_created is not None:
                self.on_created(self.panel)
        return self.panel

    def changeEvent(self, event) -> None:
        """The palette changed (the platform went dark or light): the plots follow."""
        from PySide6.QtCore import QEvent
        if event.type() == QEvent.PaletteChange and self.panel is not None:
            from ..plot_theme import restyle
            restyle(self.panel)
        super().changeEvent(event)

    def showEvent(self, event) -> None:
        self.ensure()
        super().showEvent(event)
