"""check's compiled walk (engine.accel._check) against its pure-Python twin: the same report,
problem for problem, on damaged conformance stores and on records with unusual keys, topics,
tags and flags; its CRC against zlib's; the CLI's progress on stderr, never on stdout."""
import json
import random
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from conftest import unpack
from engine import MessageStore, StoreConfig
from engine.analysis import check_index, check_records
from engine.analysis.check import check_store, check_task
from engine.format.message import body_crc

K = check_records._K
compiled = pytest.mark.skipif(K is None, reason="engine.accel._check not built (or RMQSTORE_PURE_PYTHON=1)")
sys.path.insert(0, str(Path(__file__).parent / "reliability"))


SMALL = {"mappedFileSizeCommitLog": 1 << 20, "mappedFileSizeConsumeQueue": 6000, "maxHashSlotNum": 1000,
         "maxIndexNum": 4000}


def small_store(root: Path) -> MessageStore:
    return MessageStore.create(root, StoreConfig.from_mapping(SMALL))


def patch(path: Path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(pos)
        fh.write(data)


def both(store) -> tuple[dict, dict]:
    """check's report from the compiled walk, then from the pure-Python one."""
    a = check_store(store)
    saved = check_records._K, check_index._K
    check_records._K = check_index._K = None
    try:
        b = check_store(store)
    finally:
        check_records._K, check_index._K = saved
    return a, b


@compiled
def test_crc_is_zlibs():
    rnd = random.Random(5)
    for n in list(range(0, 80)) + [1023, 1024, 1025, 4096, 65537]:
        data = rnd.randbytes(n)
        assert K.crc32_fast(data) == zlib.crc32(data), n
    assert body_crc(b"") == 0


@compiled
@pytest.mark.parametrize("name,seed", [("small", 11), ("v5", 12)])
def test_compiled_and_pure_reports_agree_on_damaged_stores(name, seed, tmp_path):
    """Random damage to records, CQ units, index files and the checkpoint (the verdict
    fuzzer's): both walks word the same problems, in the same order, with the same counts."""
    import fuzz_driver
    root = tmp_path / name
    subprocess.run(["cp", "-a", "--sparse=always", str(unpack(name)), str(root)], check=True)
    base = fuzz_driver.VerdictBase(root)
    rng = random.Random(seed)
    found = 0
    for _ in range(25):
        d = fuzz_driver.pick_damage(base, rng)
        target = root / d["file"]
        saved = target.read_bytes()
        if "pos" in d:
            d["file_offset"] = d["pos"] + (int(target.name) if d["kind"] == "commitlog" else 0)
        try:
            fuzz_driver.apply_damage(root, d, rng)
            with MessageStore.open(root, read_only=True, tolerant=True) as s:
                a, b = both(s)
            assert a == b, d
            found += not a["ok"]
        finally:
            target.write_bytes(saved)
    assert found >= 10   # the damage was seen: the comparison is not between two empty reports


def _unusual_store(root: Path) -> None:
    """Messages whose rules the kernel hands to Python, or whose keys it must hash exactly as
    Java does: non-ASCII keys and tags (and a topic made non-ASCII in place), runs of spaces
    in KEYS, a delayed message, prepared and rolled-back transactions, an inner-batch flag."""
    s = small_store(root)
    s.put_message("Plain", b"x" * 100, 0, "TagA", ["k1", "k2"])
    s.put_message("Plain", b"y" * 300, 0, None, None, properties={"KEYS": "  a  b   c ", "UNIQ_KEY": "U-1"})
    odd = s.max_offset
    s.put_message("Plbin", b"z", 1, "T\u00e4g", ["\u043a\u043b\u044e\u0447", "key"])
    s.put_message("Plain", b"", 1, "TagB", ["only"])
    s.put_message("Plain", b"w" * 50, 2, "TagC", ["one", "two"], delay_level=3)
    s.put_message("Plain", b"tx", 3, None, ["prep"], sys_flag=0x4)
    s.put_message("Plain", b"rb", 3, None, ["roll"], sys_flag=0xC)
    s.put_message("Plain", b"ib", 3, None, ["inner"], sys_flag=0x40)
    s.put_messages("Batch", [b"m%d" % i for i in range(40)], 0, "T", ["bk"])
    s.close()
    f = sorted((root / "commitlog").iterdir())[0]
    k = f.read_bytes().index(b"Plbin", odd)
    patch(f, k, "Pl\u00e9n".encode())   # the same length, no longer ASCII


@compiled
def test_unusual_records_agree(tmp_path):
    root = tmp_path / "s"
    _unusual_store(root)
    with MessageStore.open(root, read_only=True) as s:
        a, b = both(s)
    assert a == b
    assert any(p["kind"] == "commitlog-record" and "inner batch" in p["detail"] for p in a["problems"])
    assert a["messages"] == 48


@compiled
def test_damaged_records_agree_and_are_found(tmp_path, monkeypatch):
    """A body byte, a stored PHYSICALOFFSET and a KEYS byte damaged in three records: the same
    report both ways, each at its record. (The open takes the log as a big store's is taken:
    on a small one it would end the log at the first damaged record, as RocketMQ's restart.)"""
    from engine.store import recovery
    monkeypatch.setattr(recovery, "VERIFY_SPAN", -1)
    root = tmp_path / "s"
    s = small_store(root)
    offs = []
    for i in range(300):
        offs.append(s.max_offset)
        s.put_message(f"T{i % 3}", bytes([i % 256]) * (64 + i), i % 4, "TagA", [f"k{i}", f"u{i % 7}"])
    s.close()
    f = sorted((root / "commitlog").iterdir())[0]
    data = f.read_bytes()
    patch(f, offs[10] + 100, bytes([data[offs[10] + 100] ^ 0xFF]))   # a body byte: body CRC
    patch(f, offs[20] + 28, (12345).to_bytes(8, "big"))               # PHYSICALOFFSET
    patch(f, data.index(b"k30", offs[30]) + 1, b"X")                 # a key: its index entry matches nothing
    with MessageStore.open(root, read_only=True) as st:
        a, b = both(st)
    assert a == b
    at = {(p["kind"], p["offset"]) for p in a["problems"]}
    assert ("commitlog-crc", offs[10]) in at
    assert ("commitlog-record", offs[20]) in at
    assert any(p["kind"] == "index-missing" and p["offset"] == offs[30] for p in a["problems"])


def test_progress_in_commitlog_bytes_then_phases():
    with MessageStore.open(unpack("small"), read_only=True) as s:
        seen = list(check_task(s))
    cl = [p for p in seen if p.phase == "commitlog"]
    assert cl and all(p.unit == "bytes" for p in cl)
    assert [p.done for p in cl] == sorted(p.done for p in cl) and cl[-1].done == cl[-1].total
    assert [p.phase for p in seen[len(cl):]] == ["consume queues", "consume queues", "index", "checkpoint and config"]


def test_cli_progress_goes_to_stderr_only():
    store = unpack("small")
    p = subprocess.run([sys.executable, "-m", "engine", "check", str(store), "--json", "--progress"],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["ok"]        # stdout is the JSON and nothing else
    assert "check: commitlog" in p.stderr and "MB/s" in p.stderr and "check: done" in p.stderr
    q = subprocess.run([sys.executable, "-m", "engine", "check", str(store), "--json"],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert q.stdout == p.stdout and q.stderr == ""   # no terminal, no --progress: quiet
