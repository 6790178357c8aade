"""The big stores the big-store figures run on (bench/big.py): 10,000,000 messages (and 1M and
3M for the scaling curve), 4 topics x 4 queues, batches of 32, default file sizes, 160-byte
bodies (about 370 B a record: a 3.7 GB commitlog for 10M).

Written once with bench/workload.py (`create_store` + `put_batches`) and kept: under
$RMQSTORE_BENCH_BIG (default /tmp/rmqstore-big10m) for 10M, beside it with the count as a
suffix for the others. A marker file written last says a store is complete; a folder without
it (a run killed while writing) is written again.

    python -m bench.big_store [MESSAGES]      # make (or find) one, print its path"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from .common import log
from .workload import Workload, create_store, put_batches

BIG = 10_000_000
BODY = 160
BATCH = 32
QUEUES = 4
MARKER = "rmqstore-bench-big.json"
STEP = 64  # batches per put_batches call


def root_for(messages: int = BIG) -> Path:
    base = Path(os.environ.get("RMQSTORE_BENCH_BIG", "/tmp/rmqstore-big10m"))
    return base if messages == BIG else base.with_name(f"{base.name}-{messages}")


def info(root: Path) -> dict | None:
    """The marker of a complete store (None when absent or unreadable)."""
    try:
        d = json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return d if d.get("complete") else None


def ensure(messages: int = BIG) -> tuple[Path, dict]:
    """(root, marker) of a complete store of `messages`; written when missing or incomplete."""
    root = root_for(messages)
    d = info(root)
    if d is not None and d.get("messages") == messages and d.get("body") == BODY:
        return root, d
    shutil.rmtree(root, ignore_errors=True)
    log(f"big store: writing {messages:,} messages of {BODY} B to {root}")
    wl = Workload((BODY,))
    store = create_store(root)
    t = time.perf_counter()
    batches = messages // BATCH
    b = 0
    while b < batches:
        n = min(STEP, batches - b)
        put_batches(store, wl, b, n, BATCH, QUEUES)
        b += n
        if b % 20_000 < STEP:
            log(f"big store: {b * BATCH:,} messages")
    secs = time.perf_counter() - t
    d = {"complete": True, "messages": batches * BATCH, "body": BODY, "batch": BATCH, "topics": len(wl.topics),
         "queues": QUEUES, "commitlogBytes": store.commitlog.max_offset, "writeSeconds": round(secs, 1),
         "commitlogFiles": len(store.commitlog.files), "indexFiles": len(store.index.files)}
    store.close()
    (root / MARKER).write_text(json.dumps(d) + "\n")
    log(f"big store: {d['messages']:,} messages, {d['commitlogBytes'] / 1e9:.2f} GB in {secs:.0f} s")
    return root, d


if __name__ == "__main__":
    r, d = ensure(int(sys.argv[1]) if len(sys.argv) > 1 else BIG)
    print(r)
    print(json.dumps(d))
