"""The PyInstaller bundle (packaging/rmqstore.spec), built into a temp folder: both
executables answer --version, the CLI works and explains scans without Spark, the GUI opens
a demo store offscreen (screenshot), the .desktop installer points at the bundle.

Slow (~30 s build): runs only with RMQSTORE_PACKAGE_TEST=1 (`make package` builds the same
bundle into dist/)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "packaging" / "rmqstore.spec"
APP = "rmqstore-browser"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("RMQSTORE_PACKAGE_TEST") != "1",
                       reason="builds the PyInstaller bundle (~30 s): set RMQSTORE_PACKAGE_TEST=1"),
]


def run(cmd, timeout=60, **kw):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", **kw.pop("env", {}))
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=env, **kw)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    pyinstaller = shutil.which("pyinstaller", path=str(Path(sys.executable).parent))
    if pyinstaller is None:
        pytest.skip("PyInstaller is not installed (`make package` installs it)")
    tmp = tmp_path_factory.mktemp("bundle")
    proc = run([pyinstaller, "--noconfirm", SPEC, "--distpath", tmp / "dist", "--workpath", tmp / "work"],
               timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-5000:]
    folder = tmp / "dist" / APP
    assert (folder / APP).is_file() and (folder / "rmqstore").is_file()
    return folder


@pytest.fixture(scope="module")
def demo_store(bundle, tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("store") / "demo"
    proc = run([bundle / "rmqstore", "demo", store], timeout=120)
    assert proc.returncode == 0, proc.stderr
    return store


def test_versions(bundle):
    from engine import __version__
    for exe, name in ((APP, "rmqstore-browser"), ("rmqstore", "rmqstore")):
        proc = run([bundle / exe, "--version"])
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == f"{name} {__version__}"


def test_layout(bundle):
    internal = bundle / "_internal"
    for rel in ["resources/demo/demo_data.json", "resources/icons/rmqstore.svg", f"resources/{APP}.desktop",
                "resources/icons/app/rmqstore-512.png", "resources/icons/view/live-tail.svg"]:
        assert (internal / rel).is_file(), rel
    assert (bundle / "install-desktop.sh").is_file() and (bundle / "README-bundle.txt").is_file()
    # Spark stays optional: none of it is bundled
    for heavy in ("pyspark", "pyarrow", "py4j", "pandas"):
        assert not (internal / heavy).exists(), heavy
    assert not list(internal.glob("libarrow*"))
    # the compiled fast paths travel with the bundle (loaded by name, so PyInstaller must be told)
    for mod in ("_append", "_page", "_index"):
        assert list(internal.glob(f"engine/accel/{mod}.*.so")), mod


def test_cli_reads_the_demo_store(bundle, demo_store):
    proc = run([bundle / "rmqstore", "info", "--json", demo_store])
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert len(info["queues"]) > 5


def test_scan_says_how_to_get_spark(bundle, demo_store):
    proc = run([bundle / "rmqstore", "scan", demo_store, "topic-stats"])
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "rmqstore[spark]" in proc.stderr
    if "scans are not available" not in proc.stderr:       # the scan command is bundled
        assert "--local" in proc.stderr
        local = run([bundle / "rmqstore", "scan", demo_store, "topic-stats", "--local", "--json"])
        assert local.returncode == 0, local.stderr
        assert json.loads(local.stdout)["rows"]


def test_gui_opens_the_demo_store_offscreen(bundle, demo_store, tmp_path):
    shot = tmp_path / "bundle-gui.png"
    proc = run([bundle / APP, demo_store], timeout=60,
               env={"RMQSTORE_SMOKE": str(shot), "RMQSTORE_SMOKE_MS": "3000", "HOME": str(tmp_path),
                    "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["windows"] >= 1 and info["width"] > 400
    assert str(demo_store) in (info["title"] or "") + (info["status"] or "")
    import resources
    assert info["icons"] == resources.icon_names()       # bundled resources + Qt's SVG plugins
    assert shot.is_file() and shot.stat().st_size > 10_000
    out = ROOT / "build" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy2(shot, out / "bundle-gui.png")


def test_desktop_installer_points_at_the_bundle(bundle, tmp_path):
    proc = run(["sh", bundle / "install-desktop.sh"], env={"DATA_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    desktop = (tmp_path / "applications" / f"{APP}.desktop").read_text()
    assert f'Exec="{bundle / APP}" %f' in desktop
    tool = shutil.which("desktop-file-validate")
    if tool:
        check = run([tool, tmp_path / "applications" / f"{APP}.desktop"])
        assert check.returncode == 0 and "error" not in check.stdout, check.stdout
    assert (tmp_path / "icons" / "hicolor" / "256x256" / "apps" / f"{APP}.png").is_file()
