"""Application resources: icons, the .desktop file, the demo store's data.

    from resources import resource_path, icon, app_icon
    resource_path("demo/demo_data.json")   # -> pathlib.Path of an existing file
    icon("search")                          # -> QIcon of icons/view/search.svg
    app_icon()                              # -> QIcon with every PNG size of the app icon

Works from a checkout, installed (wheel, editable) and inside a PyInstaller bundle
(sys._MEIPASS). Importing this package does not import Qt: only `icon()` and `app_icon()`
do, when called.

View icons are 24x24 SVGs drawn with one "ink" colour (INK) and one accent (orange). `icon()`
recolours the ink for dark palettes (or to any colour passed as `ink=`)."""
from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

__all__ = ["resource_path", "icon", "app_icon", "icon_names", "APP_ICON_SIZES", "VIEW_ICONS", "INK",
           "DARK_INK", "APP_ID"]

APP_ID = "rmqstore-browser"            # .desktop file name, WM class, icon theme name
APP_ICON_SIZES = (16, 32, 48, 64, 128, 256, 512)
VIEW_ICONS = ("open", "refresh", "search", "send", "internals", "scan", "live-tail")
INK = "#3C4A59"                          # the ink colour the view SVGs are drawn with
DARK_INK = "#D5DCE4"                     # its replacement on dark palettes
_APP_ALIASES = ("app", "rmqstore", APP_ID)


@lru_cache(maxsize=1)
def _root() -> Path:
    """The folder holding the resource files."""
    meipass = getattr(sys, "_MEIPASS", None)
    if meipass:                                    # PyInstaller bundle: data collected to resources/
        candidate = Path(meipass) / "resources"
        if candidate.is_dir():
            return candidate
    here = Path(__file__).resolve().parent          # checkout, editable or regular install
    if (here / "icons").is_dir():
        return here
    try:                                            # anything else importlib can reach (e.g. a zip)
        from importlib.resources import as_file, files
        import atexit
        from contextlib import ExitStack
        stack = ExitStack()
        atexit.register(stack.close)
        return Path(stack.enter_context(as_file(files(__name__))))
    except Exception:                               # pragma: no cover - last resort
        return here


def resource_path(rel: str | Path) -> Path:
    """The path of resource `rel` (relative to this package, '/'-separated). Raises
    FileNotFoundError naming the folder searched when it does not exist."""
    rel = Path(rel)
    if rel.is_absolute() or ".." in rel.parts:
        raise ValueError(f"resource paths are relative and stay inside the package: {rel}")
    path = _root() / rel
    if not path.exists():
        raise FileNotFoundError(f"resource {rel.as_posix()} not found in {_root()}")
    return path


def icon_names() -> list[str]:
    """Names accepted by icon(): the view icons and 'app'."""
    return ["app", *VIEW_ICONS]


def _dark_palette() -> bool:
    from PySide6.QtGui import QGuiApplication, QPalette
    app = QGuiApplication.instance()
    if app is None:
        return False
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128


def icon(name: str, ink: str | None = None):
    """QIcon for a view icon (see VIEW_ICONS) or 'app'. `ink` recolours the dark strokes
    (default: unchanged, or DARK_INK when the application palette is dark). Unknown names
    raise KeyError listing the valid ones."""
    if name in _APP_ALIASES:
        return app_icon()
    if name not in VIEW_ICONS:
        raise KeyError(f"no icon {name!r}; known: {', '.join(icon_names())}")
    if ink is None and _dark_palette():
        ink = DARK_INK
    return _view_icon(name, ink.upper() if ink else None)


@lru_cache(maxsize=None)
def _view_icon(name: str, ink: str | None):
    from PySide6.QtCore import QByteArray, QRectF, QSize, Qt
    from PySide6.QtGui import QIcon, QImage, QPainter, QPixmap
    path = resource_path(f"icons/view/{name}.svg")
    if ink is None or ink == INK:
        ico = QIcon(str(path))                       # the svg icon engine scales it crisply
        if not ico.pixmap(QSize(24, 24)).isNull():
            return ico
    from PySide6.QtSvg import QSvgRenderer           # recoloured (or no svg icon engine): pixmaps
    data = path.read_text(encoding="utf-8")
    if ink:
        data = data.replace(INK, ink)
    renderer = QSvgRenderer(QByteArray(data.encode("utf-8")))
    ico = QIcon()
    for size in (16, 20, 24, 32, 48, 64):
        img = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        img.fill(Qt.GlobalColor.transparent)
        p = QPainter(img)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        renderer.render(p, QRectF(0, 0, size, size))
        p.end()
        ico.addPixmap(QPixmap.fromImage(img))
    return ico


@lru_cache(maxsize=1)
def app_icon():
    """The application icon with every rendered PNG size (for setWindowIcon)."""
    from PySide6.QtCore import QSize
    from PySide6.QtGui import QIcon
    ico = QIcon()
    for size in APP_ICON_SIZES:
        ico.addFile(str(resource_path(f"icons/app/rmqstore-{size}.png")), QSize(size, size))
    return ico
