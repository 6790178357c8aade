"""Render the application icon set from its SVG source (offscreen, PySide6 only).

    python packaging/render_icons.py          # rewrite the PNGs, the .ico and the .icns

Sizes up to 24 px come from the pixel-aligned resources/icons/rmqstore-small.svg, the others
from resources/icons/rmqstore.svg. Writes
- resources/icons/app/rmqstore-<N>.png for N in SIZES (shipped in the wheel and the bundle;
  the GUI's window icon and the Linux desktop icon);
- packaging/icons/rmqstore.ico  (Windows EXE icon: PNG-compressed entries 16..256);
- packaging/icons/rmqstore.icns (macOS .app icon: PNG entries 16..1024).
The output is committed; rerun this after editing resources/icons/rmqstore.svg.
"""
from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parent.parent
SVG = ROOT / "resources" / "icons" / "rmqstore.svg"
SMALL_SVG = ROOT / "resources" / "icons" / "rmqstore-small.svg"   # pixel-aligned, for sizes <= SMALL_MAX
SMALL_MAX = 24
PNG_DIR = ROOT / "resources" / "icons" / "app"
ICO = ROOT / "packaging" / "icons" / "rmqstore.ico"
ICNS = ROOT / "packaging" / "icons" / "rmqstore.icns"
SIZES = (16, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# ICNS PNG-capable types: (OSType, pixel size)
ICNS_TYPES = (("icp4", 16), ("icp5", 32), ("icp6", 64), ("ic07", 128), ("ic08", 256), ("ic09", 512),
              ("ic10", 1024), ("ic11", 32), ("ic12", 64), ("ic13", 256), ("ic14", 512))


def render_png(svg: Path, size: int) -> bytes:
    """The SVG rendered to a size x size ARGB PNG (bytes)."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer
    QGuiApplication.instance() or QGuiApplication(sys.argv[:1])
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"cannot parse {svg}")
    img = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    img.fill(Qt.GlobalColor.transparent)
    p = QPainter(img)
    p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, True)
    renderer.render(p, QRectF(0, 0, size, size))
    p.end()
    img = img.convertToFormat(QImage.Format.Format_ARGB32)
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    img.save(buf, "PNG")
    buf.close()
    return bytes(data.data())


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    """An ICO container of PNG-compressed images (Windows Vista and later)."""
    sizes = sorted(pngs)
    header = struct.pack("<HHH", 0, 1, len(sizes))
    offset = 6 + 16 * len(sizes)
    entries, blobs = [], []
    for s in sizes:
        data = pngs[s]
        dim = 0 if s >= 256 else s
        entries.append(struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(data), offset))
        blobs.append(data)
        offset += len(data)
    return header + b"".join(entries) + b"".join(blobs)


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    """An ICNS container of PNG entries (macOS 10.7 and later)."""
    body = b"".join(t.encode("ascii") + struct.pack(">I", 8 + len(pngs[s])) + pngs[s] for t, s in ICNS_TYPES)
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main() -> int:
    wanted = sorted(set(SIZES) | set(ICO_SIZES) | {s for _, s in ICNS_TYPES})
    pngs = {s: render_png(SMALL_SVG if s <= SMALL_MAX else SVG, s) for s in wanted}
    PNG_DIR.mkdir(parents=True, exist_ok=True)
    for s in SIZES:
        (PNG_DIR / f"rmqstore-{s}.png").write_bytes(pngs[s])
    ICO.parent.mkdir(parents=True, exist_ok=True)
    ICO.write_bytes(ico_bytes({s: pngs[s] for s in ICO_SIZES}))
    ICNS.write_bytes(icns_bytes(pngs))
    print(f"wrote {len(SIZES)} PNGs to {PNG_DIR.relative_to(ROOT)}, {ICO.relative_to(ROOT)}, "
          f"{ICNS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
