"""check: `rmqstore check`'s whole run (commitlog, ConsumeQueues, index, checkpoint) on a store
of >= 1 GiB of commitlog (quick: 256 MiB) of 1 KiB messages, against a raw page-cache read of
the same commitlog bytes (baselines.raw_read) measured in the same run, interleaved rep by rep.
MB/s are commitlog bytes over wall seconds; the commitlog phase is timed to the first progress
of the next phase. Issue 20's target: both at least half the raw read."""
from __future__ import annotations

import time

from engine import MessageStore
from engine.analysis.check import check_task

from . import baselines
from .common import MB, Row, log, row
from .workload import Workload, commitlog_bytes, commitlog_ranges, create_store, put_batches

TARGET = 0.5


def _timed_check(store) -> tuple[float, float, dict]:
    """(whole seconds, commitlog-phase seconds, report)."""
    t0 = time.perf_counter()
    t_cl = None
    task = check_task(store)
    while True:
        try:
            p = next(task)
        except StopIteration as stop:
            report = stop.value
            break
        if t_cl is None and p.phase != "commitlog":
            t_cl = time.perf_counter()
    t = time.perf_counter()
    return t - t0, (t_cl or t) - t0, report


def run(ctx) -> list[Row]:
    target_bytes = (256 << 20) if ctx.quick else (1 << 30) + (64 << 20)
    root = ctx.tmp / "check-store"
    wl = Workload((1024,))
    log(f"check: writing a store of {target_bytes >> 20} MiB of commitlog")
    store = create_store(root)
    batches = 0
    while commitlog_bytes(store) < target_bytes:
        put_batches(store, wl, batches, 512, 32)
        batches += 512
    store.close()
    with MessageStore.open(root, read_only=True) as store:
        ranges = commitlog_ranges(store)
        nbytes = commitlog_bytes(store)
        raw, whole, phase = [], [], []
        report = None
        for _ in range(ctx.reps):   # interleaved: the machine's load moves both alike
            secs, rb = baselines.raw_read(ranges)
            raw.append(rb / secs)
            w, c, report = _timed_check(store)
            whole.append(nbytes / w)
            phase.append(nbytes / c)
    assert report["ok"], report["problems"][:3]
    raw_best = max(raw)
    n = report["messages"]
    common = dict(messages=n, commitlogBytes=nbytes, cqUnits=report["cqUnits"],
                  indexEntries=report["indexEntries"], rawReadRepsMBs=[round(r / MB) for r in raw])
    return [row(f"check, whole ({n:,} messages, {nbytes / (1 << 30):.2f} GiB commitlog)", max(whole) / MB, "MB/s",
                "raw mmap read of the same commitlog", raw_best / MB, target_ratio=TARGET,
                seconds=round(nbytes / max(whole), 3), repsMBs=[round(x / MB) for x in whole], **common),
            row("check, commitlog phase", max(phase) / MB, "MB/s", "raw mmap read of the same commitlog",
                raw_best / MB, target_ratio=TARGET, seconds=round(nbytes / max(phase), 3),
                repsMBs=[round(x / MB) for x in phase], **common)]
