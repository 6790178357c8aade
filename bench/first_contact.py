"""first-contact: what a new user pays on a default-size store (1 GiB commitlog files, 5M-slot
index files), each against a baseline from the same run.

- disk used by a new default-size store holding 2,000 messages of 1 KiB (sparse files, blocks
  reserved a step ahead of the writes), against the files' apparent size; target < 64 MiB;
- `rmqstore send` of one message (opens read-write: lock, recovery, tail zeroing, put,
  checkpoint) against `rmqstore info` (read-only open) on that store, each a fresh process,
  interleaved, medians; target <= 3x;
- the same in-process: MessageStore.open(read_only=False) + close against a read-only open;
- reported: the same send against info when the commitlog file is fully allocated with zeros
  (a broker with warmMapedFileEnable): the tail is then data the zeroing has to read."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .common import MiB, Row, log, row

MESSAGES = 2000
TARGET_DISK = 64 * MiB
TARGET_RW = 3.0


def _disk_used(root: Path) -> tuple[int, int]:
    used = apparent = 0
    for p in root.rglob("*"):
        if p.is_file():
            st = p.stat()
            used += st.st_blocks * 512
            apparent += st.st_size
    return used, apparent


def _cli_seconds(*argv) -> float:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "engine", *map(str, argv)], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if p.returncode:
        raise RuntimeError(f"rmqstore {' '.join(map(str, argv))}: {p.stderr.strip()}")
    return time.perf_counter() - t


def _interleaved(reps: int, a, b) -> tuple[float, float]:
    xs, ys = [], []
    for _ in range(reps):
        xs.append(a())
        ys.append(b())
    return statistics.median(xs), statistics.median(ys)


def _open_close(root: Path, read_only: bool) -> float:
    from engine.store.message_store import MessageStore
    t = time.perf_counter()
    MessageStore.open(root, read_only=read_only).close()
    return time.perf_counter() - t


def run(ctx) -> list[Row]:
    from engine.cli.write import init_store
    from engine.store.message_store import MessageStore
    root = ctx.tmp / "first-contact"
    init_store(root, None)
    log(f"first-contact: {MESSAGES:,} messages of 1 KiB into a default-size store")
    with MessageStore.open(root, read_only=False) as st:
        body = os.urandom(1024)
        for i in range(MESSAGES):
            st.put_message("TopicTest", body, None, "TagA", [f"order-{i}"])
    used, apparent = _disk_used(root)
    rows = [row("new default-size store, 2,000 messages: disk used", used / MiB, "MiB", "apparent size of its files",
                apparent / MiB, better="lower", target=f"< {TARGET_DISK // MiB} MiB", met=used < TARGET_DISK)]
    reps = 5 if ctx.quick else 11
    send = lambda: _cli_seconds("send", root, "TopicTest", "--body", "x")  # noqa: E731
    info = lambda: _cli_seconds("info", root)  # noqa: E731
    s_send, s_info = _interleaved(reps, send, info)
    rows.append(row("send 1 message (read-write open), default-size store", s_send, "s", "rmqstore info (read-only)",
                    s_info, target_ratio=TARGET_RW, better="lower", processes=reps))
    rw, ro = _interleaved(reps, lambda: _open_close(root, False), lambda: _open_close(root, True))
    rows.append(row("read-write open + close, in process", rw, "s", "read-only open + close", ro, better="lower",
                    target="reported"))
    # a broker that warmed its mapped file wrote zeros over all of it: the tail is data, not holes
    cl = sorted((root / "commitlog").iterdir())[-1]
    with open(cl, "r+b") as fh:
        end = fh.seek(0, 2)
        pos = _written(root)
        zeros = bytes(8 * MiB)
        fh.seek(pos)
        while pos < end:
            pos += fh.write(zeros[:min(len(zeros), end - pos)])
    s_send, s_info = _interleaved(max(3, reps // 2), send, info)
    rows.append(row("send 1 message, commitlog fully allocated (warmed)", s_send, "s", "rmqstore info (read-only)",
                    s_info, better="lower", target="reported"))
    return rows


def _written(root: Path) -> int:
    from engine.store.message_store import MessageStore
    with MessageStore.open(root) as st:
        f = st.commitlog.queue.last
        return f.wrote_position
