"""resources/: the icon set, the loader, the .desktop file, the Windows/macOS icon containers."""
from __future__ import annotations

import configparser
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import resources

ROOT = Path(__file__).resolve().parents[2]
RES = ROOT / "resources"
PKG = ROOT / "packaging"
sys.path.insert(0, str(PKG))
import render_icons  # noqa: E402


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


# ---- files ------------------------------------------------------------------------------
def test_app_icon_pngs_exist_in_every_size():
    assert resources.APP_ICON_SIZES == render_icons.SIZES == (16, 32, 48, 64, 128, 256, 512)
    for size in resources.APP_ICON_SIZES:
        path = resources.resource_path(f"icons/app/rmqstore-{size}.png")
        assert png_size(path) == (size, size)


def test_view_icons_are_24px_svgs():
    assert set(resources.VIEW_ICONS) == {"open", "refresh", "search", "send", "internals", "scan", "live-tail"}
    for name in resources.VIEW_ICONS:
        text = resources.resource_path(f"icons/view/{name}.svg").read_text(encoding="utf-8")
        assert 'viewBox="0 0 24 24"' in text
        assert resources.INK in text, f"{name}.svg does not use the ink colour, so it cannot be recoloured"


def test_import_resources_does_not_import_qt():
    code = "import sys, resources; resources.resource_path('demo/demo_data.json'); print('PySide6' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_resource_path_errors():
    with pytest.raises(FileNotFoundError, match="nope.svg"):
        resources.resource_path("icons/nope.svg")
    with pytest.raises(ValueError):
        resources.resource_path("../pyproject.toml")
    with pytest.raises(ValueError):
        resources.resource_path(str(RES / "icons"))


def test_resource_path_inside_a_pyinstaller_bundle(tmp_path, monkeypatch):
    """In a bundle, data lives under sys._MEIPASS/resources, not next to the (archived) module."""
    (tmp_path / "resources" / "icons").mkdir(parents=True)
    (tmp_path / "resources" / "icons" / "marker.txt").write_text("bundle")
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    resources._root.cache_clear()
    try:
        assert resources.resource_path("icons/marker.txt") == tmp_path / "resources" / "icons" / "marker.txt"
    finally:
        monkeypatch.delattr(sys, "_MEIPASS")
        resources._root.cache_clear()
    assert resources.resource_path("icons/rmqstore.svg") == RES / "icons" / "rmqstore.svg"


def test_demo_data_reachable_like_engine_demo_reads_it():
    from importlib import resources as ir
    text = ir.files("resources").joinpath("demo/demo_data.json").read_text(encoding="utf-8")
    assert "topics" in text
    assert resources.resource_path("demo/demo_data.json").read_text(encoding="utf-8") == text


def test_desktop_file():
    path = resources.resource_path(f"{resources.APP_ID}.desktop")
    cp = configparser.ConfigParser(interpolation=None)
    cp.optionxform = str
    cp.read(path, encoding="utf-8")
    entry = cp["Desktop Entry"]
    assert entry["Type"] == "Application"
    assert entry["Exec"].split()[0] == "rmqstore-browser"         # the wheel's gui script
    assert entry["Icon"] == resources.APP_ID                        # installed by install-desktop.sh
    assert entry["StartupWMClass"] == resources.APP_ID
    assert entry["Terminal"] == "false"
    assert entry["Categories"].endswith(";") and entry["Keywords"].endswith(";")
    validate(path)


def validate(desktop: Path) -> None:
    """desktop-file-validate (Debian: desktop-file-utils) when it is installed."""
    tool = shutil.which("desktop-file-validate")
    if tool:
        out = subprocess.run([tool, str(desktop)], capture_output=True, text=True)
        assert out.returncode == 0 and "error" not in out.stdout, out.stdout + out.stderr


def test_install_desktop_script_from_a_checkout(tmp_path):
    env = dict(os.environ, DATA_HOME=str(tmp_path))
    script = PKG / "linux" / "install-desktop.sh"
    subprocess.run(["sh", str(script)], env=env, check=True, capture_output=True)
    desktop = (tmp_path / "applications" / "rmqstore-browser.desktop").read_text()
    assert "Exec=rmqstore-browser %f" in desktop
    validate(tmp_path / "applications" / "rmqstore-browser.desktop")
    for size in resources.APP_ICON_SIZES:
        assert (tmp_path / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "rmqstore-browser.png").is_file()
    assert (tmp_path / "icons" / "hicolor" / "scalable" / "apps" / "rmqstore-browser.svg").is_file()
    subprocess.run(["sh", str(script), "--uninstall"], env=env, check=True, capture_output=True)
    assert not list(tmp_path.rglob("rmqstore-browser*"))


# ---- Qt ---------------------------------------------------------------------------------
def test_every_icon_renders(qapp):
    from PySide6.QtCore import QSize
    assert resources.icon_names() == ["app", *resources.VIEW_ICONS]
    for name in resources.icon_names():
        pm = resources.icon(name).pixmap(QSize(24, 24))
        assert not pm.isNull(), name
        img = pm.toImage()
        opaque = sum(img.pixelColor(x, y).alpha() > 0 for x in range(img.width()) for y in range(img.height()))
        assert opaque > 20, f"icon {name} is (almost) empty"
    with pytest.raises(KeyError, match="known: app, open"):
        resources.icon("nope")


def test_app_icon_has_every_size(qapp):
    sizes = {(s.width(), s.height()) for s in resources.app_icon().availableSizes()}
    assert sizes == {(s, s) for s in resources.APP_ICON_SIZES}
    assert resources.icon("app") is resources.app_icon()


def test_ink_recolours_view_icons(qapp):
    from PySide6.QtCore import QSize
    from PySide6.QtGui import QColor

    def ink_pixels(ico, color):
        img = ico.pixmap(QSize(48, 48)).toImage()
        want = QColor(color)
        return sum(1 for x in range(48) for y in range(48)
                   if img.pixelColor(x, y).alpha() == 255 and
                   abs(img.pixelColor(x, y).red() - want.red()) < 8 and
                   abs(img.pixelColor(x, y).green() - want.green()) < 8 and
                   abs(img.pixelColor(x, y).blue() - want.blue()) < 8)
    light = resources.icon("search")
    dark = resources.icon("search", ink=resources.DARK_INK)
    assert ink_pixels(light, resources.INK) > 30 and ink_pixels(light, resources.DARK_INK) == 0
    assert ink_pixels(dark, resources.DARK_INK) > 30 and ink_pixels(dark, resources.INK) == 0


def test_dark_palette_picks_the_light_ink(qapp, monkeypatch):
    monkeypatch.setattr(resources, "_dark_palette", lambda: True)
    calls = []
    real = resources._view_icon
    monkeypatch.setattr(resources, "_view_icon", lambda name, ink: calls.append(ink) or real(name, ink))
    resources.icon("scan")
    assert calls == [resources.DARK_INK.upper()]


def test_svgs_parse(qapp):
    from PySide6.QtSvg import QSvgRenderer
    for svg in sorted((RES / "icons").rglob("*.svg")):
        assert QSvgRenderer(str(svg)).isValid(), svg


def test_pngs_are_rendered_from_the_current_svg(qapp):
    """Editing rmqstore.svg (or -small.svg) without rerunning packaging/render_icons.py fails here."""
    from PySide6.QtGui import QImage
    for size in resources.APP_ICON_SIZES:
        svg = render_icons.SMALL_SVG if size <= render_icons.SMALL_MAX else render_icons.SVG
        fresh = QImage.fromData(render_icons.render_png(svg, size))
        stored = QImage(str(RES / "icons" / "app" / f"rmqstore-{size}.png"))
        assert (fresh.width(), fresh.height()) == (stored.width(), stored.height())
        step = max(1, size // 64)
        diff = []
        for x in range(0, size, step):
            for y in range(0, size, step):
                a, b = fresh.pixelColor(x, y), stored.pixelColor(x, y)
                diff.append(abs(a.red() - b.red()) + abs(a.green() - b.green()) + abs(a.blue() - b.blue()) +
                            abs(a.alpha() - b.alpha()))
        assert sum(diff) / len(diff) < 4, f"rmqstore-{size}.png is stale: run python packaging/render_icons.py"


def test_windows_and_macos_icon_containers(qapp):
    from PySide6.QtGui import QImageReader
    ico = render_icons.ICO
    data = ico.read_bytes()
    reserved, kind, count = struct.unpack("<HHH", data[:6])
    assert (reserved, kind, count) == (0, 1, len(render_icons.ICO_SIZES))
    reader = QImageReader(str(ico))
    if reader.canRead():                     # Qt's ico plugin (in PySide6-Essentials)
        assert reader.imageCount() == len(render_icons.ICO_SIZES)
        sizes = set()
        for i in range(reader.imageCount()):
            reader.jumpToImage(i)
            sizes.add(reader.read().width())
        assert sizes == set(render_icons.ICO_SIZES)
    icns = render_icons.ICNS.read_bytes()
    assert icns[:4] == b"icns" and struct.unpack(">I", icns[4:8])[0] == len(icns)
    types, pos = [], 8
    while pos < len(icns):
        t, n = icns[pos:pos + 4].decode(), struct.unpack(">I", icns[pos + 4:pos + 8])[0]
        assert icns[pos + 8:pos + 16] == b"\x89PNG\r\n\x1a\n"
        types.append(t)
        pos += n
    assert pos == len(icns) and "ic10" in types and "icp4" in types

