"""A writer process for the crash tests: opens a store read-write (running recovery if the last
writer died), appends varied messages and prints one line per acknowledged message *after*
put returns (under SYNC_FLUSH, after msync):

    A <commitLogOffset> <uniqKey> <topic> <queueId> <queueOffset> <storeSize> <sysFlag> <bodyCRC> <keys>

(<keys>: the message's KEYS tokens as a JSON list without spaces; each must be findable after
any crash, as must the UNIQ_KEY.)

It can SIGKILL itself at a chosen fault point (--fault NAME:N kills at the N-th hit), or be
killed from outside at any moment. With --close-after N it shuts down cleanly after N messages
(printing CLOSED), so faults inside close() (topics.json rewrite) can be hit too.

    python writer_proc.py STORE --flush sync|async --mode single|batch|mixed --seed S [--fault F:N]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from relsupport import KEY_POOL, SMALL, random_body, random_single_put  # noqa: E402

# where a fault can be injected: name -> (what is patched, when the kill happens)
FAULTS = {
    "before-write": "a message encoded and placed, none of its bytes written yet",
    "batch-torn": "inside a batch: earlier records written, the batch's first TOTALSIZE not yet (torn)",
    "undispatched": "records complete in the commitlog, no ConsumeQueue unit or index entry yet",
    "blank": "BLANK end-of-file record written, next file not created yet (roll-over)",
    "roll": "next commitlog file created, nothing in it yet (roll-over)",
    "create-empty": "a new data file (commitlog, CQ or index) created but still zero bytes long",
    "cq-unit": "ConsumeQueue unit appended, index not yet updated",
    "cq-roll": "next ConsumeQueue file created",
    "index-key": "one index entry of a message written, the others not",
    "index-roll": "a new index file created (the previous one full)",
    "index-torn": "an index entry and its slot written, the header's indexCount not yet",
    "msync": "just before an msync (sync flush of a put, or a flush round)",
    "checkpoint": "checkpoint rewritten but not fsynced",
    "topics-json": "topics.json.tmp written at close, not yet renamed",
}


# more kill points inside `rebuild` (writer_proc.py STORE --rebuild --fault NAME:N); the
# dispatch faults above (cq-unit, index-key, index-roll, create-empty, ...) apply there too
REBUILD_FAULTS = {
    "rename": "a folder moved aside (the N-th rename), the others not yet",
    "unlink": "the folders being deleted, N-th file removed",
}


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def arm(fault: str, nth: int) -> None:
    """Patch the engine so the process SIGKILLs itself at the nth hit of `fault`."""
    from engine.store import checkpoint
    from engine.format import config_json
    from engine.store import consume_queue
    from engine.store import index_file
    from engine.files import mapped_file
    from engine.files import mapped_file_queue
    hits = [0]

    def hit() -> bool:
        hits[0] += 1
        return hits[0] >= nth

    def is_cl(mf) -> bool:
        return mf.path.parent.name == "commitlog"

    MF = mapped_file.MappedFile
    from engine.accel import load
    fast = load("_append")
    if fast is not None and fault in ("before-write", "batch-torn", "undispatched", "cq-unit", "index-key"):
        def fast_hook(point: str) -> None:   # the same kill points inside the compiled put loop
            if point == fault and hit():
                die()
        fast.set_fault_hook(fast_hook)
    if fault in ("before-write", "batch-torn"):
        from engine.format import message
        from engine.store import writer
        in_put = [0]
        orig_put = writer.StoreWriter.put

        def put(self, drafts):
            in_put[0] = 0
            return orig_put(self, drafts)
        writer.StoreWriter.put = put
        orig_patch = message.EncodedRecord.patch

        def patch(self, *a, **k):
            in_put[0] += 1
            if (fault == "before-write" or in_put[0] >= 2) and hit():
                die()
            return orig_patch(self, *a, **k)
        message.EncodedRecord.patch = patch
    elif fault == "undispatched":
        from engine.store import writer
        orig_dispatch = writer.StoreWriter.dispatch

        def dispatch(self, msg):
            if hit():
                die()
            return orig_dispatch(self, msg)
        writer.StoreWriter.dispatch = dispatch
    elif fault == "blank":
        orig = MF.write_at

        def write_at(self, pos, data):
            orig(self, pos, data)
            if is_cl(self) and len(data) == 8 and hit():
                die()
        MF.write_at = write_at
    elif fault in ("roll", "cq-roll"):
        Q = mapped_file_queue.MappedFileQueue
        orig = Q.create_next

        def create_next(self, start=None):
            f = orig(self, start)
            if (self.dirs[0].name == "commitlog") == (fault == "roll") and hit():
                die()
            return f
        Q.create_next = create_next
    elif fault == "create-empty":
        real_ftruncate = os.ftruncate

        class _Os3:
            def __getattr__(self, name):
                return getattr(os, name)

            @staticmethod
            def ftruncate(fd, size):
                if hit():
                    die()
                return real_ftruncate(fd, size)
        mapped_file.os = _Os3()
    elif fault == "cq-unit":
        CQ = consume_queue.ConsumeQueue
        orig = CQ.put_unit

        def put_unit(self, *a, **k):
            r = orig(self, *a, **k)
            if r and hit():
                die()
            return r
        CQ.put_unit = put_unit
    elif fault == "index-key":
        IF = index_file.IndexFile
        orig = IF.put_key

        def put_key(self, *a, **k):
            r = orig(self, *a, **k)
            if r and hit():
                die()
            return r
        IF.put_key = put_key
    elif fault == "index-torn":
        IF = index_file.IndexFile
        orig = IF.write_header

        def write_header(self, counts=True):
            if counts and hit():
                die()
            return orig(self, counts)
        IF.write_header = write_header
    elif fault == "index-roll":
        IF = index_file.IndexFile
        orig = IF.__init__

        def init(self, path, slot_num, index_num, writable=False, create=False, **kw):
            orig(self, path, slot_num, index_num, writable, create, **kw)
            if create and hit():
                die()
        IF.__init__ = init
    elif fault == "msync":
        orig = MF.flush

        def flush(self, upto=None):
            if self.writable and hit():
                die()
            orig(self, upto)
        MF.flush = flush
    elif fault == "checkpoint":
        real_pwrite = os.pwrite

        class _Os:  # the checkpoint module's `os`, with a pwrite that dies after writing
            def __getattr__(self, name):
                return getattr(os, name)

            @staticmethod
            def pwrite(fd, data, pos):
                n = real_pwrite(fd, data, pos)
                if hit():
                    die()
                return n
        checkpoint.os = _Os()
    elif fault == "topics-json":
        real_replace = os.replace

        class _Os2:
            def __getattr__(self, name):
                return getattr(os, name)

            @staticmethod
            def replace(a, b):
                if hit():
                    die()
                return real_replace(a, b)
        config_json.os = _Os2()
    elif fault in ("rename", "unlink"):
        real = getattr(os, fault)

        def kill_after(*a, **k):
            r = real(*a, **k)
            if hit():
                die()
            return r
        setattr(os, fault, kill_after)
    else:
        raise SystemExit(f"unknown fault {fault}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--flush", choices=["sync", "async"], default="sync")
    ap.add_argument("--mode", choices=["single", "batch", "mixed"], default="mixed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fault", default=None)
    ap.add_argument("--max", type=int, default=400, help="messages to write before idling")
    ap.add_argument("--close-after", type=int, default=0)
    ap.add_argument("--index-safe", action="store_true")
    ap.add_argument("--rebuild", action="store_true", help="run `rebuild` instead of writing")
    a = ap.parse_args()
    from engine import MessageStore, StoreConfig
    from engine.format.properties import split_keys
    if a.fault:
        name, _, nth = a.fault.partition(":")
        arm(name, int(nth or 1))
    if a.rebuild:
        from engine.cli.write import rebuild
        out = rebuild(Path(a.store), StoreConfig.from_mapping(SMALL))
        print("REBUILT", json.dumps(out), flush=True)
        return
    cfg = dict(SMALL, flushDiskType="SYNC_FLUSH" if a.flush == "sync" else "ASYNC_FLUSH",
               flushIntervalCommitLog=50)
    if a.index_safe:
        cfg["messageIndexSafe"] = True
    rng = random.Random(a.seed)
    store = MessageStore.open(a.store, StoreConfig.from_mapping(cfg), read_only=False)
    out = sys.stdout
    rec = store.recovery
    start = int(rec.commitlog.start_file) if rec.commitlog.start_file else 0
    out.write(f"READY {int(rec.abnormal)} {start}\n")
    out.flush()
    topics = ["TopicA", "TopicB", "%RETRY%grp", f"New{a.seed % 1000}"]
    written = 0

    def ack(results):
        lines = []
        for r in results:
            lines.append(f"A {r.commitLogOffset} {r.uniqKey} {r.topic} {r.queueId} {r.queueOffset} {r.storeSize}"
                         f" {ack.flags.pop(0)} {ack.crcs.pop(0)} {ack.keys}\n")
        out.write("".join(lines))
        out.flush()
    ack.flags, ack.crcs = [], []

    while written < a.max:
        topic = rng.choice(topics)
        qid = rng.randrange(4)
        tags = rng.choice([None, "TagA", "TagB"])
        keys = rng.sample(KEY_POOL, rng.randrange(3)) + [f"w{a.seed}-{written}"]
        ack.keys = json.dumps(split_keys(" ".join(keys)), separators=(",", ":"))  # the tokens indexed
        batch = a.mode == "batch" or (a.mode == "mixed" and rng.random() < 0.25)
        if batch:
            bodies = [random_body(rng, 900) for _ in range(rng.randrange(1, 12))]
            ack.flags += [0] * len(bodies)
            ack.crcs += [zlib.crc32(b) & 0x7FFFFFFF if b else 0 for b in bodies]
            ack(store.put_messages(topic, bodies, qid, tags, keys))
            written += len(bodies)
            continue
        body, kw, flag, crc = random_single_put(rng)
        ack.flags.append(flag)
        ack.crcs.append(crc)
        ack([store.put_message(topic, body, qid, tags, keys, **kw)])
        written += 1
        if a.close_after and written >= a.close_after:
            break
    if a.close_after:
        store.close()
        out.write("CLOSED\n")
        out.flush()
        return
    out.write("IDLE\n")
    out.flush()
    signal.pause()


if __name__ == "__main__":
    main()
