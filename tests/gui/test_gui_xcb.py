"""The browser on a real X server, as `make run` on a desktop: Xvfb and Qt's xcb platform (not
the offscreen platform the other GUI tests use). Qt's xcb plugin aborts the process (exit code
134) when one of its libraries is missing, so first every library it links must load; then
`python -m gui.app STORE` runs as a user starts it, and the screen the X server holds is
grabbed (RMQSTORE_SCREENSHOT: the display's pixels, not the widgets' own rendering) and looked
at: the window is on the screen at its size and drew a real picture.

Skipped only when Xvfb is not installed (`make test` installs it, Debian's `xvfb`, as root)."""
from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, unpack
from guitest_support import SHOTS

SCREEN = (1600, 1000)


def qxcb_plugin() -> Path:
    import PySide6
    return Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"


def missing_libraries(plugin: Path) -> list[str]:
    """The shared libraries `ldd` cannot find for Qt's xcb plugin (and what it links)."""
    out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, check=True).stdout
    return sorted({line.split()[0] for line in out.splitlines() if "not found" in line})


@pytest.fixture(scope="module")
def display(tmp_path_factory):
    """A private Xvfb server (its display number chosen by the server itself: -displayfd)."""
    exe = shutil.which("Xvfb")
    if exe is None:
        pytest.skip("Xvfb is not installed (Debian: apt-get install xvfb; `make test` installs it as root with apt)")
    r, w = os.pipe()
    proc = subprocess.Popen([exe, "-displayfd", str(w), "-screen", "0", f"{SCREEN[0]}x{SCREEN[1]}x24",
                             "-nolisten", "tcp", "-noreset"], pass_fds=(w,),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(w)
    try:
        ready, _, _ = select.select([r], [], [], 30)
        number = os.read(r, 64).decode().strip() if ready else ""
        if not number:
            proc.kill()
            err = proc.stderr.read().decode(errors="replace")[-500:]
            pytest.fail(f"Xvfb did not start: {err}")
        yield f":{number}"
    finally:
        os.close(r)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_qt_xcb_plugin_finds_its_libraries():
    """What made `make run` abort on a desktop: libxcb-cursor0, libxcb-icccm4, libxcb-keysyms1..."""
    plugin = qxcb_plugin()
    assert plugin.exists(), plugin
    missing = missing_libraries(plugin)
    assert not missing, (f"Qt's xcb platform cannot load: missing {', '.join(missing)}; "
                         "`make gui-deps` installs them (README: Requirements)")


def test_browser_draws_on_a_real_x_server(display, tmp_path):
    store = unpack("small")
    shot = SHOTS / "xcb-browser.png"
    shot.unlink(missing_ok=True)
    env = dict(os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb", RMQSTORE_SCREENSHOT=str(shot),
               RMQSTORE_SPARK_WARMUP="0",   # no JVM for a picture of the Overview
               XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CACHE_HOME=str(tmp_path / "cache"), XDG_RUNTIME_DIR=str(tmp_path / "run"))
    env.pop("WAYLAND_DISPLAY", None)
    (tmp_path / "run").mkdir(mode=0o700)
    proc = subprocess.run([sys.executable, "-m", "gui.app", str(store)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["platform"] == "xcb" and report["saved"], report
    assert report["screen"] == list(SCREEN)
    x, y, w, h = report["window"]
    assert (w, h) == (1440, 900) and x >= 0 and y >= 0 and x + w <= SCREEN[0] and y + h <= SCREEN[1], report
    assert report["title"].startswith(str(store)) or "small" in report["title"], report

    from PySide6.QtGui import QImage
    img = QImage(str(shot))
    assert (img.width(), img.height()) == SCREEN
    inside = _colours(img, x + 4, y + 4, x + w - 4, y + h - 4)
    outside = _colours(img, x + w + 10, 10, SCREEN[0] - 10, SCREEN[1] - 10)
    assert len(inside) > 50, f"the window drew {len(inside)} colour(s): nothing painted"
    assert len(outside) == 1, f"the X server's empty root window holds {len(outside)} colours"
    assert outside != inside


def _colours(img, x0: int, y0: int, x1: int, y1: int, step: int = 3) -> set[int]:
    return {img.pixel(x, y) for x in range(x0, x1, step) for y in range(y0, y1, step)}
