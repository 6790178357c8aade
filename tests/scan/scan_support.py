"""Shared fixtures of the scan tests (imported by the test modules; not a conftest, so the
root conftest keeps its module name). One real local SparkSession for the whole run."""
from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess

import pytest

from conftest import ROOT, unpack
from engine import MessageStore

SHOTS = ROOT / "build" / "screenshots"
SPARK_MASTER = "local[2]"
# The test JVM is kept small (the stores here are small): 512 MB of heap (Spark's floor is
# ~450 MB), the serial collector and the C1 compiler only. It is stopped after the last test
# that uses it (conftest), not at the end of the run.
SPARK_MEMORY = "512m"
SPARK_CONF = {"spark.driver.defaultJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=64m"}


def java_missing() -> str | None:
    from engine.scan.spark_session import java_available
    return None if java_available() else "no Java runtime (java on PATH or JAVA_HOME): Spark tests skipped"


@pytest.fixture
def spark():
    """The run's one local session (started on first use; seconds), or the same again after the
    standalone-cluster tests stopped it to use their own (get_session returns the running one)."""
    reason = java_missing()
    if reason:
        pytest.skip(reason)
    pytest.importorskip("pyspark")
    from engine.scan.spark_session import get_session
    return get_session(SPARK_MASTER, SPARK_MEMORY, SPARK_CONF)   # one JVM per run (conftest stops it)


@pytest.fixture(scope="module")
def small():
    with MessageStore.open(unpack("small")) as s:
        yield s


@pytest.fixture(scope="module")
def v5():
    with MessageStore.open(unpack("v5")) as s:
        yield s


def plant_cq_defect(root, topic="TopicTest", queue_id=1, queue_offset=7, size=999) -> tuple[str, int]:
    """Overwrite the size of one CQ unit; returns (file relative to root, byte position)."""
    file_size = 1000   # the small geometry: 50 units per CQ file
    start = queue_offset * 20 - queue_offset * 20 % file_size
    rel = os.path.join("consumequeue", topic, str(queue_id), f"{start:020d}")
    pos = queue_offset * 20 % file_size
    with open(os.path.join(root, rel), "r+b") as fh:
        fh.seek(pos + 8)
        fh.write(struct.pack(">i", size))
    return rel, pos


def plant_index_defect(root, file_no=3, entry=10, delta=1) -> tuple[str, int]:
    """Shift the phyOffset of one index entry (small geometry: 64 slots); returns (file, entry position)."""
    name = sorted(os.listdir(os.path.join(root, "index")))[file_no]
    pos = 40 + 64 * 4 + 20 * entry
    path = os.path.join(root, "index", name)
    with open(path, "r+b") as fh:
        fh.seek(pos + 4)
        old = struct.unpack(">q", fh.read(8))[0]
        fh.seek(pos + 4)
        fh.write(struct.pack(">q", old + delta))
    return os.path.join("index", name), pos


def stop_process(proc) -> None:
    """End a server the tests started (SIGTERM, then kill): none outlives its fixture."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def rm(path) -> None:
    shutil.rmtree(path, ignore_errors=True)


QUOTED_KEYS = ['say "hi", then\nleave', 'plain', 'comma,only', '"', '', ' two  spaces ']


def make_quoted_store(root) -> str:
    """A small store whose keys and tags hold quotes, commas and line breaks, with a zlib
    body that decodes ("needle" inside), a record flagged ZSTD whose bytes are no ZSTD frame
    (undecodable; its raw bytes say "needle") and one flagged LZ4 likewise."""
    import zlib
    root = str(root)
    s = MessageStore.create(root)
    try:
        for i, k in enumerate(QUOTED_KEYS * 3):
            s.put_message("Quoted", f'body {i}, "q"\n'.encode(), keys=k or None, tags=f't"{i % 2},x' if i % 3 else None)
        s.put_message("Quoted", zlib.compress(b"a needle in zlib"), sys_flag=1 | (3 << 8), keys="zlib")
        s.put_message("Quoted", b"needle as raw bytes", sys_flag=1 | (2 << 8), keys="zstd")
        s.put_message("Other", b"needle as raw bytes", sys_flag=1 | (1 << 8), keys="lz4")
        s.put_message("Other", b"plain needle", keys="plain")
    finally:
        s.close()
    return root


def make_cluster(root) -> dict[str, str]:
    """A cluster layout <root>/<brokerName>/store: broker-a holds the small fixture, broker-b the
    v5 one and a broker.conf that names it `broker-b-conf`. Returns {broker: store path}."""
    import subprocess
    from pathlib import Path
    root = Path(root)
    out = {}
    for folder, fixture, conf_name in (("broker-a", "small", None), ("broker-b", "v5", "broker-b-conf")):
        (root / folder).mkdir(parents=True)
        subprocess.run(["cp", "-a", "--sparse=always", str(unpack(fixture)), str(root / folder / "store")], check=True)
        if conf_name:
            (root / folder / "broker.conf").write_text(f"brokerClusterName=DefaultCluster\nbrokerName={conf_name}\n")
        out[conf_name or folder] = str(root / folder / "store")
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster")
    return root, make_cluster(root)


@pytest.fixture
def panel(qtbot):
    """The Scan tab over the small fixture, shown at 1280x800, its master the test session's
    (no second JVM); the store is closed after the test, which cancels and waits for a job."""
    from gui.scan_panel import ScanPanel
    from gui.session import StoreSession
    session = StoreSession()
    session.open_blocking(unpack("small"))
    p = ScanPanel(session)
    qtbot.addWidget(p)
    p.resize(1280, 800)
    p.show()
    p.master_edit.setText(SPARK_MASTER)
    yield p
    p.cancel()
    session.close()
    assert not p.lane.busy
