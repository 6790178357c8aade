import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import json
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFORMANCE = (ROOT / ".." / "shared" / "conformance").resolve()
UNPACKED = ROOT / "build" / "conformance"
FIXTURES = ["small", "default", "v5", "crashed", "crashed_live", "crashed_torn", "crashed_badcrc", "v5_crashed"]
CLEAN = ["small", "default", "v5"]
CRASHED = ["crashed", "crashed_live", "crashed_torn", "crashed_badcrc", "v5_crashed"]


def unpack(name: str) -> Path:
    """The pristine fixture folder (unpacked once per checkout, sparse). Never write to it:
    tests that modify a store use `fixture_copy`."""
    archive = CONFORMANCE / f"{name}.tar.gz"
    if not archive.exists():
        pytest.skip(f"conformance fixture {archive} not available")
    target = UNPACKED / name
    stamp = UNPACKED / f".{name}.stamp"
    key = f"{archive.stat().st_size}:{archive.stat().st_mtime_ns}"
    if not (stamp.exists() and stamp.read_text() == key and target.exists()):
        shutil.rmtree(target, ignore_errors=True)
        UNPACKED.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "--sparse", "-xzf", str(archive), "-C", str(UNPACKED)], check=True)
        stamp.write_text(key)
    return target


@lru_cache(maxsize=None)
def manifest(name: str) -> dict:
    with open(CONFORMANCE / f"{name}.manifest.json", encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture
def fixture_copy(tmp_path):
    """A private, writable copy of a fixture (sparse, mtimes kept)."""
    def make(name: str) -> Path:
        src = unpack(name)
        dst = tmp_path / name
        subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dst)], check=True)
        return dst
    return make


def pytest_addoption(parser):
    parser.addoption("--soak", action="store_true", default=False, help="run the long soak/fuzz suite")
