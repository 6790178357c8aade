"""A writer that fills the disk: appends until the store refuses, then tries a few more puts
and a clean close. Prints `A ...` per acknowledged message (as writer_proc does), `E <error
class> <path>` per refused put, `C ok` or `C <error class>` for close. Any untyped exception
escapes with a traceback (exit code 1): that is a test failure.

    python fill_proc.py STORE --flush sync|async --seed S [--fsize BYTES]
"""
from __future__ import annotations

import argparse
import random
import resource
import signal
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from relsupport import KEY_POOL, SMALL, random_body  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--flush", choices=["sync", "async"], default="sync")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fsize", type=int, default=0, help="RLIMIT_FSIZE: no file may grow past this")
    ap.add_argument("--max", type=int, default=20000)
    a = ap.parse_args()
    if a.fsize:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
        resource.setrlimit(resource.RLIMIT_FSIZE, (a.fsize, a.fsize))
    from engine import MessageStore, StoreConfig
    from engine.errors import StoreError
    cfg = StoreConfig.from_mapping(dict(SMALL, flushDiskType="SYNC_FLUSH" if a.flush == "sync" else "ASYNC_FLUSH",
                                        flushIntervalCommitLog=50))
    rng = random.Random(a.seed)
    out = sys.stdout
    try:
        store = MessageStore.create(a.store, cfg)  # creates the folder if needed, opens read-write
    except StoreError as e:
        out.write(f"O {type(e).__name__} {e.path}\n")
        return
    refused = 0
    for i in range(a.max):
        topic = rng.choice(["TopicA", "TopicB", f"T{i % 7}"])
        qid = rng.randrange(4)
        keys = rng.sample(KEY_POOL, rng.randrange(3)) + [f"f{a.seed}-{i}"]
        try:
            if rng.random() < 0.2:
                bodies = [random_body(rng, 700) for _ in range(rng.randrange(1, 6))]
                res = store.put_messages(topic, bodies, qid, None, keys)
            else:
                bodies = [random_body(rng, 3000)]
                res = [store.put_message(topic, bodies[0], qid, "Tag", keys)]
        except StoreError as e:
            out.write(f"E {type(e).__name__} {e.path}\n")
            out.flush()
            refused += 1
            if refused >= 4:
                break
            continue
        for r, b in zip(res, bodies):
            out.write(f"A {r.commitLogOffset} {r.uniqKey} {r.topic} {r.queueId} {r.queueOffset} {r.storeSize} 0 "
                      f"{zlib.crc32(b) & 0x7FFFFFFF if b else 0}\n")
        out.flush()
    try:
        store.close()
        out.write("C ok\n")
    except StoreError as e:
        out.write(f"C {type(e).__name__} {e.path}\n")


if __name__ == "__main__":
    main()
