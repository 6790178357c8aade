"""get-page per body size: the stores the append-batch figures wrote (one body size each),
walked queue by queue in 32-message pages, every message decoded (bench.scaling.walk_pages),
against a raw mmap read of their commitlog; for 1 KiB also with a Message built per message."""
from __future__ import annotations

from engine import MessageStore

from . import baselines
from .common import MB, Row, log, row
from .scaling import TARGET_GET_PAGE, walk_pages
from .workload import commitlog_ranges


def run(ctx) -> list[Row]:
    rows = []
    for label in ("100B", "1KiB", "16KiB"):
        root = ctx.stores.get(f"append-batch-{label}")
        if root is None:
            continue
        log(f"get-page {label}")
        with MessageStore.open(root) as store:
            raw_secs, raw_bytes = baselines.raw_read(commitlog_ranges(store))  # also warms the page cache
            best = min((walk_pages(store, 10 ** 9) for _ in range(ctx.reps)), key=lambda r: r[0])
            secs, n, nbytes = best
            rows.append(row(f"get-page {label}", nbytes / secs / MB, "MB/s", "raw mmap read",
                            raw_bytes / raw_secs / MB, target_ratio=TARGET_GET_PAGE,
                            messagesPerSecond=round(n / secs), usPerMessage=round(secs / n * 1e6, 3),
                            messages=n, decode="columns (no object per message)"))
            if label == "1KiB":  # the same walk, a Message built for every message
                log("get-page 1KiB, Message objects")
                secs, n, nbytes = min((walk_pages(store, 10 ** 9, objects=True) for _ in range(ctx.reps)),
                                      key=lambda r: r[0])
                rows.append(row("get-page 1KiB, Message objects", nbytes / secs / MB, "MB/s", "raw mmap read",
                                raw_bytes / raw_secs / MB, target="reported", messagesPerSecond=round(n / secs),
                                usPerMessage=round(secs / n * 1e6, 3), messages=n,
                                decode="a Message per message (properties dict, body bytes)"))
    return rows
