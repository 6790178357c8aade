"""open and gui-first-page.

open: two stores with the same files (same commitlog bytes, 8 topics x 5 queues so every
queue fits one CQ file, the same index files) but ten times as many messages in one (quick:
1,000,000 vs 100,000; full: 10,000,000 vs 1,000,000). Opening read-only to the topic/queue
summary must cost the same for both: the ratio big/small is the figure (1 = O(files)).

gui-first-page: a queue of every record of the big store (its CQ units merged in commitlog
order into BigQueue/0, so each row is a real record): offscreen browser, open -> first painted
page, against one full walk of that queue through get_message pages."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from engine import MessageStore
from engine.store.consume_queue import CQ_UNIT_DTYPE

from .common import GiB, Row, Timer, disk_free, log, row
from .workload import Workload, create_store, put_batches

TOPICS = tuple(f"BenchOpen{k}" for k in range(8))
QUEUES = 5
BATCH = 64
TARGET_OPEN = 1.5
TARGET_GUI = 0.10


def _write(root: Path, messages: int, body: int) -> tuple[float, int]:
    store = create_store(root)
    wl = Workload((body,), topics=TOPICS)
    with Timer() as t:
        put_batches(store, wl, 0, messages // BATCH, BATCH, QUEUES)
    size = store.commitlog.max_offset
    store.close()
    return t.wall, size


def _open_seconds(root: Path, reps: int) -> tuple[float, dict]:
    best, info = float("inf"), {}
    for _ in range(reps):
        with Timer() as t:
            s = MessageStore.open(root)
            ql = s.queue_list()
        best = min(best, t.wall)
        info = {"queues": len(ql), "messages": sum(q["maxOffset"] - q["minOffset"] for q in ql),
                "commitlogFiles": len(s.commitlog.files),
                "cqFiles": sum(len(cq.queue.files) for cq in s.queues.values()),
                "indexFiles": len(s.index.files)}
        s.close()
    return best, info


def make_big_queue(root: Path) -> int:
    """BigQueue/0: every CQ unit of the store, in commitlog order, in 6,000,000-byte files."""
    with MessageStore.open(root) as s:
        units = np.concatenate([cq.units(cq.min_offset, cq.max_offset).copy() for cq in s.queues.values()])
        per_file = s.cfg.mappedFileSizeConsumeQueue // 20
    units = units[np.argsort(units["commitLogOffset"], kind="stable")]
    qdir = root / "consumequeue" / "BigQueue" / "0"
    qdir.mkdir(parents=True)
    for k in range(0, len(units), per_file):
        buf = np.zeros(per_file, dtype=CQ_UNIT_DTYPE)
        part = units[k:k + per_file]
        buf[:len(part)] = part
        (qdir / f"{k * 20:020d}").write_bytes(buf.tobytes())
    return len(units)


def run(ctx) -> list[Row]:
    big_n = 1_000_000 if ctx.quick else 10_000_000
    small_n = big_n // 10
    need = (big_n * 330 * 2.3)
    if disk_free(ctx.tmp) < need + 4 * GiB:
        return [row("open", None, "s", target="reported", skipped=f"needs {need / GiB:.1f} GiB free")]
    big, small = ctx.tmp / "open-big", ctx.tmp / "open-small"
    log(f"open: writing {big_n:,} messages of 100 B")
    t_big, size = _write(big, big_n, 100)
    body = max(100, int(size / small_n) - (size // big_n - 100))  # same commitlog bytes
    log(f"open: writing {small_n:,} messages of {body} B")
    t_small, size_small = _write(small, small_n, body)
    ctx.scaling.setdefault("writeForOpen", []).extend([
        {"messages": big_n, "bytes": size, "seconds": round(t_big, 1)},
        {"messages": small_n, "bytes": size_small, "seconds": round(t_small, 1)}])
    reps = ctx.reps
    log("open: timing")
    s_big, info_big = _open_seconds(big, reps)
    s_small, info_small = _open_seconds(small, reps)
    rows = [row("open", s_big, "s", "open of same files, 10x fewer messages", s_small, target_ratio=TARGET_OPEN,
                better="lower", big=info_big, small=info_small)]
    shutil.rmtree(small)

    log("gui-first-page: building BigQueue")
    n = make_big_queue(big)
    out = subprocess.run([sys.executable, "-m", "bench.gui_probe", str(big), "BigQueue", "0"], capture_output=True,
                         text=True, cwd=Path(__file__).resolve().parent.parent, timeout=3600)
    if out.returncode != 0:
        rows.append(row("gui-first-page", None, "s", target="< 10% of one full scan of the queue",
                        error=(out.stderr.strip().splitlines() or ["?"])[-1]))
    else:
        g = json.loads(out.stdout.strip().splitlines()[-1])
        log(f"gui-first-page: walking the {n:,}-message queue once")
        with MessageStore.open(big) as s:
            t = time.perf_counter()
            off = walked = 0
            while True:
                r = s.get_message("BigQueue", 0, off, 32)
                if not r.messages:
                    break
                walked += len(r.messages)
                off = r.nextBeginOffset
            full = time.perf_counter() - t
        rows.append(row("gui-first-page", g["openToFirstPaintSeconds"], "s", "one full get-page walk of the queue",
                        full, target_ratio=TARGET_GUI, better="lower", queueMessages=n, walked=walked,
                        openSeconds=round(g["openSeconds"], 3), processStartupSeconds=round(g["startupSeconds"], 2),
                        rows=g["rows"], firstPageLoaded=g["firstPageLoaded"]))
    shutil.rmtree(big)
    return rows
