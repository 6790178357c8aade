"""Profiles behind bench/NOTES.md: `python -m bench.profile {append,append-batch,get-page,open,
query} [--top N]` runs one workload under cProfile (stdlib; no extra dependency) in a temporary
store and prints the functions with the most time of their own, plus CPU time per operation
measured without the profiler (cProfile inflates small functions about 2-3x)."""
from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

from engine import MessageStore
from engine.store.index_file import LONG_MAX

from .scaling import walk_pages
from .workload import MIX, Workload, create_store, put_batches, put_singles


def _append(root: Path, batch: bool, n: int):
    wl = Workload((1024,))
    msgs = wl.msgs(0, n)
    runs = []

    def work():  # a fresh store per call; the stores are deleted with the temporary folder
        store = create_store(root.with_name(f"store-{len(runs)}"))
        runs.append(store)
        if batch:
            put_batches(store, wl, 0, n // 32, 32)
        else:
            put_singles(store, msgs)
        store.close()
    return work, n, "1 KiB message"


def _mix_store(root: Path, batches: int) -> None:
    store = create_store(root)
    put_batches(store, Workload(MIX), 0, batches, 32)
    store.close()


def workloads(name: str, tmp: Path):
    root = tmp / "store"
    if name == "append":
        return _append(root, False, 20_000)
    if name == "append-batch":
        return _append(root, True, 20_000)
    if name == "get-page":
        _mix_store(root, 3000)
        store = MessageStore.open(root)
        return (lambda: walk_pages(store, 10 ** 9)), 96_000, "message of the 100 B / 1 KiB / 16 KiB mix"
    if name == "open":
        store = create_store(root)
        wl = Workload((100,))
        put_batches(store, wl, 0, 300_000 // 32, 32)
        n = store.commitlog.max_offset
        store.close()
        return (lambda: MessageStore.open(root).close()), 300_000 // 32 * 32, f"record ({n // 300_000} B) of the last files"
    if name == "query":
        store = create_store(root, maxHashSlotNum=50_000, maxIndexNum=200_000)
        wl = Workload((100,))
        put_batches(store, wl, 0, 3000, 32)
        store.close()
        store = MessageStore.open(root)
        keys = [f"batch-{b}" for b in range(0, 3000, 3)] * 20
        q = store.index.query_offset
        return (lambda: [q(wl.batch(int(k[6:]), 1)[0], k, 64, 0, LONG_MAX) for k in keys]), len(keys), \
            "query_offset (64 hits: 32 per batch key, load 2)"
    raise SystemExit(f"unknown workload {name}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.profile")
    ap.add_argument("workload", choices=["append", "append-batch", "get-page", "open", "query"])
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rmqstore-profile-") as tmp:
        work, n, what = workloads(args.workload, Path(tmp))
        c = time.process_time()
        work()
        cpu = time.process_time() - c
        prof = cProfile.Profile()
        prof.runcall(work)
    print(f"{args.workload}: {cpu / n * 1e6:.2f} us CPU per {what} (without the profiler)\n")
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
