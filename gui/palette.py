"""Colours from the application's palette, and the application following the platform's colour
scheme (QStyleHints.colorScheme()): where the platform says dark and the style still paints
light (xcb without a platform theme), a dark Fusion palette is set. Qt only (no pyqtgraph),
so the main window uses it at start-up without pulling the plots in.

    palette.follow_platform(app)               # once, at start-up (and on every scheme change)
    palette.paper(), palette.ink(), palette.mid()   # a plot's background, text, lines"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication


def _palette() -> QPalette:
    return QGuiApplication.palette()


def is_dark(palette: QPalette | None = None) -> bool:
    """The palette paints light text on dark windows."""
    p = palette or _palette()
    return p.color(QPalette.Window).lightness() < p.color(QPalette.WindowText).lightness()


def paper() -> str:
    """A plot's background: the palette's base (white in a light scheme)."""
    return _palette().color(QPalette.Base).name()


def ink() -> str:
    """Text, titles and tick labels of a plot."""
    return _palette().color(QPalette.Text).name()


def mid() -> str:
    """Axis lines and grid: between the two."""
    a, b = QColor(paper()), QColor(ink())
    return QColor((a.red() + b.red()) // 2, (a.green() + b.green()) // 2, (a.blue() + b.blue()) // 2).name()


def dark_palette() -> QPalette:
    """Fusion's colours for a dark scheme."""
    p = QPalette()
    window, base, text = QColor(45, 45, 48), QColor(30, 30, 32), QColor(225, 225, 225)
    for role, c in ((QPalette.Window, window), (QPalette.WindowText, text), (QPalette.Base, base),
                    (QPalette.AlternateBase, QColor(40, 40, 44)), (QPalette.ToolTipBase, QColor(60, 60, 64)),
                    (QPalette.ToolTipText, text), (QPalette.Text, text), (QPalette.Button, window),
                    (QPalette.ButtonText, text), (QPalette.BrightText, QColor(255, 90, 90)),
                    (QPalette.Link, QColor(110, 170, 255)), (QPalette.Highlight, QColor(42, 110, 200)),
                    (QPalette.HighlightedText, QColor(255, 255, 255)), (QPalette.PlaceholderText, QColor(140, 140, 140)),
                    (QPalette.Mid, QColor(90, 90, 90)), (QPalette.Dark, QColor(20, 20, 20)),
                    (QPalette.Light, QColor(80, 80, 84))):
        p.setColor(role, c)
    for role in (QPalette.Text, QPalette.WindowText, QPalette.ButtonText):
        p.setColor(QPalette.Disabled, role, QColor(130, 130, 130))
    return p


def apply_scheme(app: QApplication, scheme) -> bool:
    """Make the palette match `scheme` (Qt.ColorScheme) when the style does not: True when the
    palette was changed."""
    if scheme not in (Qt.ColorScheme.Dark, Qt.ColorScheme.Light):
        return False   # the platform does not say: the palette stays as the style made it
    want_dark = scheme == Qt.ColorScheme.Dark
    if want_dark == is_dark(app.palette()):
        return False
    if want_dark:
        app.setStyle("Fusion")
        app.setPalette(dark_palette())
    else:
        app.setPalette(app.style().standardPalette())
    return True


def follow_platform(app: QApplication) -> None:
    """At start-up and whenever the platform's scheme changes."""
    hints = app.styleHints()
    apply_scheme(app, hints.colorScheme())
    if not getattr(app, "_rmq_follows_scheme", False):
        hints.colorSchemeChanged.connect(lambda s: apply_scheme(app, s))
        app._rmq_follows_scheme = True
