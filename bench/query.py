"""key-query: IndexService.query_offset on a default-size index (5,000,000 slots, 20,000,000
entries) at load factors 0.5, 2 and 4 (entries per slot), one core, keys that exist.

The file is mapped and its pages touched once before timing (a browser that has been open a
while has them mapped); the first pass over a fresh mapping is reported apart (cold)."""
from __future__ import annotations

import random
import shutil
import time

import numpy as np

from engine import MessageStore, StoreConfig
from engine.analysis.chains import chain_lengths
from engine.store.index_file import LONG_MAX

from . import index_gen
from .common import Row, log, row

TOPIC = "BenchTopic"
LOADS = (0.5, 2, 4)
TARGET_QPS = 50_000


def _touch(store) -> None:
    for f in store.index.files:
        np.frombuffer(f.file.mm, dtype=np.uint8)[::4096].sum()


def _run_queries(store, keys: list[str]) -> tuple[float, list[int], list[list[int]]]:
    q = store.index.query_offset
    ns = time.perf_counter_ns
    lat = []
    hits = []
    t = time.perf_counter()
    for k in keys:
        a = ns()
        hits.append(q(TOPIC, k, 64, 0, LONG_MAX)[0])
        lat.append(ns() - a)
    return time.perf_counter() - t, lat, hits


def _run_batches(store, keys: list[str], per: int = 1000) -> float:
    """The batched API (IndexService.query_offsets), `per` keys a call: queries per second."""
    q = store.index.query_offsets
    t = time.perf_counter()
    for i in range(0, len(keys), per):
        q(TOPIC, keys[i:i + per], 64, 0, LONG_MAX)
    return len(keys) / (time.perf_counter() - t)


def run(ctx) -> list[Row]:
    cfg = StoreConfig()
    slots, index_num = cfg.maxHashSlotNum, cfg.maxIndexNum
    nq = 30_000 if ctx.quick else 200_000
    rows = []
    rnd = random.Random(11)
    for load in LOADS:
        n = min(int(load * slots), index_num - 1)
        root = ctx.tmp / f"index-load-{load}"
        (root / "index").mkdir(parents=True)
        (root / "commitlog").mkdir()
        log(f"key-query load {load}: building {n:,} entries")
        index_gen.build(root / "index" / "20260101000000000", TOPIC, n, slots, index_num)
        ids = [rnd.randrange(n) for _ in range(nq)]
        keys = [index_gen.key_of(i) for i in ids]
        with MessageStore.open(root) as store:
            cold_n = nq // 5
            cold_secs, _, _ = _run_queries(store, [index_gen.key_of(rnd.randrange(n)) for _ in range(cold_n)])
            _touch(store)
            secs, lat, hits = _run_queries(store, keys)
            batch_qps = _run_batches(store, keys)
            chain = chain_lengths(store.index.files[0])
        wrong = sum(1 for i, h in zip(ids, hits) if i * index_gen.PHY_STEP not in h)
        lat.sort()
        qps = nq / secs
        used = chain[chain > 0]
        rows.append(row(f"key-query load {load:g}", qps, "queries/s",
                        target=f">= {TARGET_QPS:,} queries/s" if load == 2 else "reported",
                        met=(qps >= TARGET_QPS) if load == 2 else None,
                        p50Us=round(lat[len(lat) // 2] / 1000, 2), p99Us=round(lat[int(len(lat) * 0.99)] / 1000, 2),
                        coldQueriesPerSecond=round(cold_n / cold_secs), batchQueriesPerSecond=round(batch_qps), entries=n, queries=nq,
                        meanChainLengthOfUsedSlots=round(float(used.mean()), 2), missedKeys=wrong))
        shutil.rmtree(root)
    return rows
