"""One store of the 100 B / 1 KiB / 16 KiB mix (4 topics x 4 queues, default file sizes),
grown by the batch API to checkpoints (quick: 0.25 and 1 GiB; full: 1, 4 and 16 GiB where the
disk allows). At each checkpoint the writer closes and the store is measured read-only:

- append cost of the step that led there (and every 256 MiB inside it);
- open (read-only, to the queue summary);
- get-page: 32-message pages walked through every queue (capped), decoded;
- query: query_message for batch keys (each key names the 32 messages of one batch);
- scan-local: per-topic aggregation (the scan module's topic-stats job, local engine);
and the figures scan-spark (at the scan checkpoint) and memory (at the last one)."""
from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

from engine import MessageStore

from . import baselines
from .common import GiB, MB, MiB, Row, Timer, disk_free, log, row
from .workload import MIX, Workload, commitlog_bytes, commitlog_ranges, put_batches

BATCH = 32
QUEUES = 4
TARGET_GET_PAGE = 0.25
TARGET_SCAN = 0.50
TARGET_RSS = 300 * MiB


def checkpoints(ctx) -> tuple[list[int], list[str]]:
    wanted = [256 * MiB, GiB] if ctx.quick else [GiB, 4 * GiB, 16 * GiB]
    room = disk_free(ctx.tmp) - 8 * GiB  # leave room for the other stores and the OS
    kept = [c for c in wanted if c * 1.1 < room]
    skipped = [f"{c / GiB:g} GiB: only {room / GiB:.1f} GiB free" for c in wanted if c not in kept]
    return kept, skipped


DECODE_BATCH = 64  # pages whose columns are checked in one numpy pass (their rows stay in L2)


def walk_pages(store, cap: int, objects: bool = False) -> tuple[float, int, int]:
    """(seconds, messages, bytes) walking every queue from its min offset in pages of 32,
    every message decoded and used: its queue id and queue offset checked (the offsets run on
    without a gap from the queue's min offset, as the CQ says), its storeSize summed against
    the page's bufferTotalSize, storeTimestamp, body length and tagsCode folded in.
    Default: from the page's columns (no object per message; the checks run over the columns
    of DECODE_BATCH pages at a time). objects=True: from a Message built for every message."""
    import numpy as np
    from engine.store.page import columns_of

    n = nbytes = 0
    digest = [0, 0, 0, 0]  # storeTimestamp sum, body bytes, tagsCode xor, storeSize sum
    get = store.get_message

    def check(pages, topic, qid, first):
        if not pages:
            return
        c = columns_of(pages)
        qo = c["queueOffset"]
        if int(qo[0]) != first or not (np.diff(qo) == 1).all() or not (c["queueId"] == qid).all():
            raise AssertionError(f"get-page {topic}/{qid}: queue offsets or ids wrong after {first}")
        digest[0] += int(c["storeTimestamp"].sum())
        digest[1] += int(c["bodyLength"].sum())
        digest[2] ^= int(np.bitwise_xor.reduce(c["tagsCode"]))
        digest[3] += int(c["storeSize"].sum())

    t = time.perf_counter()
    for (topic, qid), cq in sorted(store.queues.items()):
        off = first = cq.min_offset
        pending = []
        while n < cap:
            r = get(topic, qid, off, 32)
            msgs = r.messages
            if not msgs:
                break
            if objects:
                ts = size = body = 0
                tc = digest[2]
                for m in msgs:
                    if m.queueOffset != off or m.queueId != qid:
                        raise AssertionError(f"get-page {topic}/{qid}: queue offset or id wrong at {off}")
                    off += 1
                    ts += m.storeTimestamp
                    size += m.storeSize
                    body += len(m.body)
                    tc ^= m.tagsCode
                digest[0] += ts
                digest[1] += body
                digest[2] = tc
                digest[3] += size
            else:
                pending.append(msgs)
                if len(pending) == DECODE_BATCH:
                    check(pending, topic, qid, first)
                    first += sum(len(p) for p in pending)
                    pending = []
            n += len(msgs)
            nbytes += r.bufferTotalSize
            off = r.nextBeginOffset
        check(pending, topic, qid, first)
    secs = time.perf_counter() - t
    if digest[3] != nbytes:
        raise AssertionError(f"get-page: storeSize sum {digest[3]} != bufferTotalSize sum {nbytes}")
    return secs, n, nbytes


def scan_local(store) -> tuple[float, int, str]:
    """(seconds, messages, engine): per-topic message count and bytes over the whole log."""
    try:
        from engine.scan.api import run_job
    except ImportError:
        run_job = None
    t = time.perf_counter()
    if run_job is not None:
        res = run_job(store, "topic-stats", engine="local")
        return time.perf_counter() - t, sum(r["messages"] for r in res.rows), "engine.scan topic-stats (local)"
    agg: dict[str, list[int]] = {}
    for m in store.iter_messages():
        a = agg.setdefault(m.topic, [0, 0])
        a[0] += 1
        a[1] += m.storeSize
    return time.perf_counter() - t, sum(a[0] for a in agg.values()), "iter_messages (engine.scan missing)"


def run(ctx) -> list[Row]:
    cps, skipped = checkpoints(ctx)
    rows: list[Row] = []
    curves = ctx.scaling
    curves["storeMix"] = "bodies cycle 100 B / 1 KiB / 16 KiB; 4 topics x 4 queues; batches of 32"
    curves["skipped"] = skipped
    for s in skipped:
        log(f"scaling: skipped {s}")
    if not cps:
        return rows
    scan_cp = max(c for c in cps if c <= 4 * GiB)
    getpage_cp = min(cps, key=lambda c: abs(c - GiB))
    root = ctx.tmp / "scaling-store"
    wl = Workload(MIX)
    from .workload import create_store
    store = create_store(root)
    b = written = 0
    for cp in cps:
        log(f"scaling: writing up to {cp / GiB:g} GiB")
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        with Timer() as t:
            mark_b, mark_t = store.commitlog.max_offset, time.perf_counter()
            while store.commitlog.max_offset < cp:
                written += put_batches(store, wl, b, 64, BATCH, QUEUES)
                b += 64
                if store.commitlog.max_offset - mark_b >= 256 * MiB:
                    now = time.perf_counter()
                    curves.setdefault("appendSegments", []).append({
                        "storeGiB": round(store.commitlog.max_offset / GiB, 3),
                        "MBps": round((store.commitlog.max_offset - mark_b) / (now - mark_t) / MB, 1)})
                    mark_b, mark_t = store.commitlog.max_offset, now
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        store.close()
        with Timer() as t_open:
            store = MessageStore.open(root)  # read-only
            store.queue_list()
        size = commitlog_bytes(store)
        point = {"storeGiB": round(size / GiB, 3), "messages": written}
        prev = curves.get("append", [])
        prev_size = prev[-1]["bytes"] if prev else 0
        prev_msgs = prev[-1]["messages"] if prev else 0
        curves.setdefault("append", []).append({
            **point, "bytes": size, "stepSeconds": round(t.wall, 2),
            "usPerMessage": round(t.wall / max(1, written - prev_msgs) * 1e6, 2),
            # the process's CPU, split: user time is the engine's own work per message, system
            # time the kernel's (page faults on fresh file pages, writeback) -- the part that
            # drifts with this VM's memory state, as the raw-write baseline does
            "cpuUsPerMessage": round(t.cpu / max(1, written - prev_msgs) * 1e6, 2),
            "userUsPerMessage": round((ru1.ru_utime - ru0.ru_utime) / max(1, written - prev_msgs) * 1e6, 2),
            "sysUsPerMessage": round((ru1.ru_stime - ru0.ru_stime) / max(1, written - prev_msgs) * 1e6, 2),
            "MBps": round((size - prev_size) / t.wall / MB, 1)})
        curves.setdefault("open", []).append({**point, "seconds": round(t_open.wall, 3),
                                              "commitlogFiles": len(store.commitlog.files)})
        log(f"scaling {size / GiB:.2f} GiB: get-page")
        cap = 400_000 if ctx.quick else 600_000
        raw_secs, raw_bytes = baselines.raw_read(commitlog_ranges(store))  # also warms the page cache
        raw_mbps = raw_bytes / raw_secs / MB
        secs, n, nbytes = walk_pages(store, cap)
        curves.setdefault("getPage", []).append({**point, "usPerMessage": round(secs / n * 1e6, 2),
                                                 "MBps": round(nbytes / secs / MB, 1), "rawReadMBps": round(raw_mbps)})
        if cp == getpage_cp:
            rows.append(row("get-page mix", nbytes / secs / MB, "MB/s", "raw mmap read", raw_mbps,
                            target_ratio=TARGET_GET_PAGE, messagesPerSecond=round(n / secs),
                            usPerMessage=round(secs / n * 1e6, 2), messages=n, storeGiB=round(size / GiB, 2)))
        log(f"scaling {size / GiB:.2f} GiB: queries")
        rnd = random.Random(5)
        nq = 2000 if ctx.quick else 5000
        keys = [(wl.topics[k % len(wl.topics)], f"batch-{k}") for k in (rnd.randrange(b) for _ in range(nq))]
        with Timer() as tq:
            found = sum(len(store.query_message(tp, k, max_num=64).messages) for tp, k in keys)
        curves.setdefault("query", []).append({**point, "usPerQuery": round(tq.wall / nq * 1e6, 1),
                                               "queriesPerSecond": round(nq / tq.wall),
                                               "messagesPerQuery": round(found / nq, 2)})
        log(f"scaling {size / GiB:.2f} GiB: scan-local")
        s_secs, s_msgs, engine_name = scan_local(store)
        raw_secs, raw_bytes = baselines.raw_read(commitlog_ranges(store))
        raw_mbps = raw_bytes / raw_secs / MB
        curves.setdefault("scan", []).append({**point, "seconds": round(s_secs, 2), "MBps": round(size / s_secs / MB, 1),
                                              "usPerMessage": round(s_secs / s_msgs * 1e6, 3),
                                              "rawReadMBps": round(raw_mbps), "messagesCounted": s_msgs})
        if cp == scan_cp:
            rows.append(row("scan-local", size / s_secs / MB, "MB/s", "raw mmap read", raw_mbps,
                            target_ratio=TARGET_SCAN, seconds=round(s_secs, 2), storeGiB=round(size / GiB, 2),
                            messages=s_msgs, engine=engine_name, countsMatch=s_msgs == written))
            rows += spark_rows(ctx, store, root, size, s_secs)
        if cp == cps[-1]:
            store.close()
            rows.append(memory_row(ctx, root, size))
        else:
            store.close()
            store = MessageStore.open(root, read_only=False)
    ctx.stores["scaling"] = root
    return rows


def spark_rows(ctx, store, root: Path, size: int, local_secs: float) -> list[Row]:
    try:
        from engine.scan.api import run_job
        from engine.scan.spark_session import SparkUnavailable, get_session, stop_session
    except ImportError as e:
        return [row("scan-spark", None, "MB/s", target="reported", missing=f"engine.scan Spark source missing: {e}")]
    log("scan-spark: starting Spark")
    try:
        with Timer() as t_start:
            spark = get_session()
    except SparkUnavailable as e:
        return [row("scan-spark", None, "MB/s", target="reported", missing=str(e))]
    try:
        runs = []
        for _ in range(2):
            with Timer() as t:
                res = run_job(store, "topic-stats", engine="spark", spark=spark)
            runs.append(t.wall)
        msgs = sum(r["messages"] for r in res.rows)
        master = spark.sparkContext.master
    finally:
        stop_session()
    local_mbps = size / local_secs / MB
    return [row("scan-spark", size / runs[1] / MB, "MB/s", "scan-local", local_mbps, target="reported",
                firstJobSeconds=round(runs[0], 2), secondJobSeconds=round(runs[1], 2),
                sparkStartSeconds=round(t_start.wall, 2), master=master, messages=msgs,
                storeGiB=round(size / GiB, 2))]


def memory_row(ctx, root: Path, size: int) -> Row:
    log("memory: open + browse + query in a fresh process")
    out = subprocess.run([sys.executable, "-m", "bench.memory_probe", str(root)], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent, timeout=3600)
    if out.returncode != 0:
        return row("memory", None, "MB", target="< 300 MB", error=out.stderr.strip().splitlines()[-1:])
    r = json.loads(out.stdout.strip().splitlines()[-1])
    peak = r["VmHWM"]
    return row("memory peak RSS", peak / MB, "MB", target="< 300 MB", met=peak < TARGET_RSS, better="lower",
               storeGiB=round(size / GiB, 2), **{k: v for k, v in r.items() if k != "VmHWM"})
