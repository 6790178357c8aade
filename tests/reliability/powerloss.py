"""Power-loss (not just SIGKILL) crash consistency, in the manner of ALICE / CrashMonkey.

1. Record. A writer runs in a child process (`python powerloss.py record ...`) with the engine
   patched so every durability point is observed: MappedFile.flush (msync of a range),
   os.fsync (checkpoint, lock, config JSON), and the metadata operations (a data file created,
   `abort` touched, a file unlinked, topics.json.tmp renamed). At each of these, and before
   each msync, the whole store is snapshotted and diffed against the previous snapshot at 4 KiB
   page granularity, giving a log of events:

       ("pages", rel, size, {page: bytes})     what changed in a file since the last snapshot
       ("create", rel) / ("remove", rel)        metadata (a file appeared / vanished)
       ("sync", rel, first_page, end_page)      msync of those pages returned
       ("fsync", rel)                           fsync of the whole file returned
       ("ack", {...})                           put returned: the message is acknowledged

   The background flusher is replaced by explicit `writer.flush()` calls at random points of
   the writer's loop (same code, deterministic, no race with the snapshots).

2. Build the states a power cut could leave after any prefix of the log. Synced pages are kept;
   every page written since its last sync takes its durable version ("dropped"), its newest
   version ("kept") or any version it had in between (an older write-back); pages of one write
   are chosen independently, so multi-page writes are torn at 4 KiB. Metadata follows a
   journaling file system (ext4 data=ordered, XFS): an fsync/msync commits every metadata
   operation before it; of those after the last sync, a prefix survives.
   (`metadata="posix"` is stricter: a file's creation or removal is durable only once that
   file itself is fsynced, and a rename never without a directory fsync -- what POSIX promises.)

3. Check each state: recovery (`open(read_only=False)` then close), then a read-only open:
   `check_store` must say OK, and every message acknowledged under SYNC_FLUSH must be in the
   commitlog, in its queue at its queue offset (get_message), and found by each of its keys and
   its UNIQ_KEY. A state can then seed another recorded run (recovery itself crashes).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import pickle
import random
import shutil
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

PAGE = 4096

# store geometries the recorded runs use (small files: many roll-overs, CQ files of one or more pages)
GEOMETRIES = {
    "small": dict(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=1000, maxHashSlotNum=64, maxIndexNum=256),
    "pages": dict(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=12000, maxHashSlotNum=512,
                  maxIndexNum=600),
}


def store_cfg(geometry: str):
    from engine import StoreConfig
    return StoreConfig.from_mapping(dict(GEOMETRIES[geometry], flushDiskType="SYNC_FLUSH"))


# ---- recording (child process) -------------------------------------------------------------------
class Recorder:
    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.prev: dict[str, bytes] = {}
        self.events: list[tuple] = []
        self.busy = False
        self.prev = self._read_all()  # the starting store: durable as it is

    def _read_all(self) -> dict[str, bytes]:
        out = {}
        for dirpath, _dirs, files in os.walk(self.root):
            for n in files:
                p = Path(dirpath) / n
                if not p.is_file() or p.is_symlink():
                    continue
                try:
                    out[str(p.relative_to(self.root))] = p.read_bytes()
                except FileNotFoundError:
                    continue
        return out

    def snapshot(self) -> None:
        if self.busy:
            return
        self.busy = True
        try:
            cur = self._read_all()
            for rel in sorted(set(self.prev) - set(cur)):
                self.events.append(("remove", rel))
            for rel, data in cur.items():
                old = self.prev.get(rel)
                if old is None:
                    self.events.append(("create", rel))
                    old = b""
                if old == data:
                    continue
                pages = {}
                for p in range(0, (len(data) + PAGE - 1) // PAGE):
                    a, b = old[p * PAGE:(p + 1) * PAGE], data[p * PAGE:(p + 1) * PAGE]
                    if a != b and not (not a.strip(b"\0") and not b.strip(b"\0")):
                        pages[p] = b
                self.events.append(("pages", rel, len(data), pages))
            self.prev = cur
        finally:
            self.busy = False

    def rel(self, path) -> str | None:
        try:
            return str(Path(os.path.abspath(path)).relative_to(self.root))
        except ValueError:
            return None

    def install(self) -> None:
        """Patch the engine (and os) in this process so every durability point is observed."""
        from engine.files import mapped_file
        from engine.store import writer
        rec = self
        MF = mapped_file.MappedFile
        orig_init, orig_flush = MF.__init__, MF.flush

        def init(self, path, file_size, writable=False, create=False, *a, **k):
            orig_init(self, path, file_size, writable, create, *a, **k)
            if create:
                rec.snapshot()
        MF.__init__ = init

        def flush(self, upto=None):
            end = self.wrote_position if upto is None else upto
            if self.writable and end > self.flushed_position:
                start = self.flushed_position - self.flushed_position % PAGE
                rec.snapshot()
                orig_flush(self, upto)
                r = rec.rel(self.path)
                if r is not None:
                    rec.events.append(("sync", r, start // PAGE, (end + PAGE - 1) // PAGE))
                return
            orig_flush(self, upto)
        MF.flush = flush

        real_fsync, real_replace, real_unlink = os.fsync, os.replace, os.unlink

        def fsync(fd):
            rec.snapshot()
            real_fsync(fd)
            r = rec.rel(os.readlink(f"/proc/self/fd/{fd}"))
            if r is not None:
                rec.events.append(("fsync", r))
        os.fsync = fsync

        def replace(a, b, **k):
            rec.snapshot()
            real_replace(a, b, **k)
            ra, rb = rec.rel(a), rec.rel(b)
            if ra is not None and rb is not None and ra in rec.prev:
                rec.events.append(("rename", ra, rb))
                rec.prev[rb] = rec.prev.pop(ra)  # the inode moved: no page of it changed
            rec.snapshot()
        os.replace = replace

        def unlink(p, **k):
            real_unlink(p, **k)
            rec.snapshot()
        os.unlink = unlink
        orig_touch, orig_punlink = Path.touch, Path.unlink

        def touch(self, *a, **k):
            orig_touch(self, *a, **k)
            rec.snapshot()
        Path.touch = touch

        def punlink(self, missing_ok=False):
            orig_punlink(self, missing_ok)
            rec.snapshot()
        Path.unlink = punlink
        # IndexFile.flush is meant to make the whole file durable; whether its msync really ran
        # is what the "sync" events say (see KNOWN: index-flush-once)
        from engine.store import index_file
        orig_iflush = index_file.IndexFile.flush

        def iflush(self):
            orig_iflush(self)
            r = rec.rel(self.path)
            if r is not None:
                rec.events.append(("intended-sync", r))
        index_file.IndexFile.flush = iflush
        # the flusher thread is replaced by explicit flushes from the writer loop
        writer.StoreWriter.start_flush_service = lambda self: None


def record(store: Path, log: Path, geometry: str, seed: int, n: int, close: bool, reopen: float,
           prior_acks: list | None = None, flush_chance: float = 0.06) -> None:
    from engine import MessageStore
    from relsupport import KEY_POOL, random_body, random_single_put
    rng = random.Random(seed)
    store.mkdir(parents=True, exist_ok=True)
    (store / "commitlog").mkdir(exist_ok=True)
    rec = Recorder(store)
    initial = dict(rec.prev)  # the starting store: every byte durable
    rec.install()
    cfg = store_cfg(geometry)
    s = MessageStore.open(store, cfg, read_only=False)
    rec.snapshot()
    rec.events.append(("opened",))
    topics = ["TopicA", "TopicB", "%RETRY%grp", f"New{seed % 1000}"]
    written = 0
    while written < n:
        topic = rng.choice(topics)
        qid = rng.randrange(4)
        tags = rng.choice([None, "TagA", "TagB"])
        keys = rng.sample(KEY_POOL, rng.randrange(3)) + [f"p{seed}-{written}"]
        flags, crcs = [], []
        if rng.random() < 0.2:
            bodies = [random_body(rng, 900) for _ in range(rng.randrange(1, 8))]
            flags += [0] * len(bodies)
            crcs += [zlib.crc32(b) & 0x7FFFFFFF if b else 0 for b in bodies]
            results = s.put_messages(topic, bodies, qid, tags, keys)
        else:
            body, kw, flag, crc = random_single_put(rng)
            flags.append(flag)
            crcs.append(crc)
            results = [s.put_message(topic, body, qid, tags, keys, **kw)]
        for r, fl, crc in zip(results, flags, crcs):
            rec.events.append(("ack", dict(phys=r.commitLogOffset, uniq=r.uniqKey, topic=r.topic, qid=r.queueId,
                                           qoff=r.queueOffset, size=r.storeSize, sys_flag=fl, crc=crc,
                                           keys=list(keys))))
        written += len(results)
        if rng.random() < flush_chance:
            s.flush()  # what the flush service does every flushIntervalCommitLog
        if rng.random() < reopen:
            s.close()  # a clean restart: normal recovery next
            s = MessageStore.open(store, cfg, read_only=False)
            rec.snapshot()
            rec.events.append(("opened",))
    if close:
        s.close()
    rec.snapshot()
    with open(log, "wb") as fh:
        pickle.dump({"geometry": geometry, "seed": seed, "events": rec.events, "initial": initial,
                     "prior_acks": prior_acks or []}, fh)
    if not close:
        os._exit(0)  # like a crash: nothing more runs (the log is complete)


# ---- states -------------------------------------------------------------------------------------
@dataclasses.dataclass
class Inode:
    size: int                        # durable size
    pages: dict                      # durable page contents
    versions: dict                   # page -> [versions since the last sync], oldest first
    cur_size: int


class Recording:
    def __init__(self, data: dict):
        self.geometry = data["geometry"]
        self.seed = data["seed"]
        self.events = data["events"]
        self.initial: dict[str, bytes] = data["initial"]
        self.prior_acks: list[dict] = data.get("prior_acks", [])

    @classmethod
    def load(cls, path: Path) -> "Recording":
        with open(path, "rb") as fh:
            return cls(pickle.load(fh))

    def acks_before(self, k: int) -> list[dict]:
        """Every message acknowledged before the cut: this run's, and the runs' before it."""
        return self.prior_acks + [e[1] for e in self.events[:k] if e[0] == "ack"]

    def sync_points(self) -> list[int]:
        """Positions right after an msync/fsync returned (where a drop-everything state is
        exactly what the engine made durable)."""
        return [i + 1 for i, e in enumerate(self.events) if e[0] in ("sync", "fsync")]

    def replay(self, k: int, metadata: str = "journal", trust_index_flush: bool = False, trust_abort: bool = False,
               trust_recovery: bool = False):
        """The model after k events: inodes (durable pages, versions in flight), the durable
        namespace (name -> inode), and the metadata operations not yet durable, in order."""
        inodes: list[Inode] = []
        durable: dict[str, int] = {}
        cur: dict[str, int] = {}
        for rel, data in self.initial.items():
            inodes.append(Inode(len(data), _pages_of(data), {}, len(data)))
            durable[rel] = cur[rel] = len(inodes) - 1
        pending: list[tuple] = []   # ("create", name, ino) | ("remove", name) | ("rename", a, b, ino)

        def names(op):
            return {op[1], op[2]} if op[0] == "rename" else {op[1]}

        def commit(name):
            nonlocal pending
            ino = cur.get(name)
            is_dir = ino is None  # fsync of a directory: the entries in it are durable
            d = "" if name == "." else name
            take = [metadata == "journal" or (is_dir and any(os.path.dirname(n) == d for n in names(op)))
                    or (op[0] == "create" and op[2] == ino) for op in pending]
            # an operation made durable carries the earlier ones on the same names with it
            for i in range(len(pending) - 1, -1, -1):
                if take[i]:
                    for j in range(i):
                        if not take[j] and names(pending[j]) & names(pending[i]):
                            take[j] = True
            for op, t in zip(pending, take):
                if t:
                    apply_op(durable, op)
            pending = [op for op, t in zip(pending, take) if not t]

        def sync_pages(ino: Inode, pages) -> None:
            for p in pages:
                if p in ino.versions:
                    ino.pages[p] = ino.versions.pop(p)[-1]
            ino.size = ino.cur_size
        for ev in self.events[:k]:
            kind = ev[0]
            if kind == "create":
                inodes.append(Inode(0, {}, {}, 0))
                cur[ev[1]] = len(inodes) - 1
                if trust_abort and ev[1] == "abort":
                    durable["abort"] = cur["abort"]  # as if created durably (fsync of it and of STORE)
                    pending = [op for op in pending if "abort" not in op[1:3]]
                else:
                    pending.append(("create", ev[1], cur[ev[1]]))
            elif kind == "remove":
                cur.pop(ev[1], None)
                pending.append(("remove", ev[1]))
            elif kind == "rename":
                _, a, b = ev
                cur[b] = cur.pop(a)
                pending.append(("rename", a, b, cur[b]))
            elif kind == "pages":
                _, rel, size, pages = ev
                ino = inodes[cur[rel]]
                ino.cur_size = size
                for p, data in pages.items():
                    ino.versions.setdefault(p, []).append(data)
            elif kind == "sync":
                _, rel, a, b = ev
                sync_pages(inodes[cur[rel]], range(a, b))
                commit(rel)
            elif kind == "opened" and trust_recovery:  # as if open synced what recovery changed
                for name, i in cur.items():
                    sync_pages(inodes[i], list(inodes[i].versions))
                for op in pending:
                    apply_op(durable, op)
                pending = []
            elif kind == "fsync" or (kind == "intended-sync" and trust_index_flush):
                if ev[1] in cur:
                    ino = inodes[cur[ev[1]]]
                    sync_pages(ino, list(ino.versions))
                commit(ev[1])
        return inodes, durable, pending

    def state(self, k: int, rng: random.Random, policy: str = "random", metadata: str = "journal",
              trust_index_flush: bool = False, trust_abort: bool = False, pick=None,
              trust_recovery: bool = False) -> dict:
        """{rel: bytes} of the files a power cut after k events could leave. policy: 'drop'
        (nothing unsynced reached the disk), 'keep' (everything did), 'random', or 'pick':
        pick(rel, page, versions) returns the version that reached the disk (None: dropped),
        and no pending metadata operation survives."""
        inodes, durable, pending = self.replay(k, metadata, trust_index_flush, trust_abort, trust_recovery)
        ns = dict(durable)
        if policy == "keep":
            ops = pending
        elif policy in ("drop", "pick"):
            ops = []
        elif metadata == "journal":
            ops = pending[:rng.randrange(len(pending) + 1)]   # the journal commits in order
        else:  # any subset, but the operations on one name keep their order
            ops, blocked = [], set()
            for op in pending:
                names = {op[1], op[2]} if op[0] == "rename" else {op[1]}
                if names & blocked or rng.random() < 0.5:
                    blocked |= names
                else:
                    ops.append(op)
        for op in ops:
            apply_op(ns, op)
        durable_inos = set(durable.values())
        p_drop = rng.random() if policy == "random" else 0.0
        out = {}
        for rel, i in ns.items():
            ino = inodes[i]
            size = ino.size if ino.size else ino.cur_size
            if i not in durable_inos and policy == "random" and rng.random() < 0.15:
                size = 0  # created, its size never reached the disk
            pages = dict(ino.pages)
            for p, vs in ino.versions.items():
                if policy == "drop":
                    continue
                if policy == "pick":
                    v = pick(rel, p, vs)
                    if v is not None:
                        pages[p] = v
                    continue
                if policy == "keep":
                    pages[p] = vs[-1]
                    continue
                r = rng.random()
                if r < p_drop:
                    continue
                pages[p] = vs[-1] if r < p_drop + (1 - p_drop) * 0.7 else rng.choice(vs)
            buf = bytearray(size)
            for p, data in pages.items():
                if p * PAGE < size:
                    buf[p * PAGE:p * PAGE + len(data)] = data[:max(0, size - p * PAGE)]
            out[rel] = bytes(buf)
        return out


def apply_op(ns: dict, op: tuple) -> None:
    if op[0] == "create":
        ns[op[1]] = op[2]
    elif op[0] == "remove":
        ns.pop(op[1], None)
    else:
        ns.pop(op[1], None)
        ns[op[2]] = op[3]


def _pages_of(data: bytes) -> dict:
    return {p: data[p * PAGE:(p + 1) * PAGE] for p in range((len(data) + PAGE - 1) // PAGE)
            if data[p * PAGE:(p + 1) * PAGE].strip(b"\0")}


def materialize(files: dict, root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for d in ("commitlog", "consumequeue", "index", "config"):
        (root / d).mkdir(exist_ok=True)  # directories are made once and never removed by the writer
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "wb") as fh:
            fh.truncate(len(data))
            for off in range(0, len(data), PAGE):
                chunk = data[off:off + PAGE]
                if chunk.strip(b"\0"):
                    fh.seek(off)
                    fh.write(chunk)


def read_tree(root: Path) -> dict:
    out = {}
    for dirpath, _d, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            if p.is_file() and n != "lock":
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


# ---- verdicts -------------------------------------------------------------------------------------
def verify(root: Path, geometry: str, acks: list[dict], written: dict | None = None) -> dict:
    """Recover the state read-write, close, open read-only: check_store's verdict and every
    acknowledged message. Returns {"ok", "error", "problems": [kinds], "lost": [(uniq, what)]}."""
    from engine import MessageStore
    from engine.analysis.check import check_store
    from engine.errors import StoreError
    cfg = store_cfg(geometry)
    out = {"ok": True, "error": None, "problems": [], "lost": [], "details": []}
    try:
        with MessageStore.open(root, cfg, read_only=False) as s:
            out["abnormal"] = s.recovery.abnormal
    except (StoreError, OSError) as e:
        out.update(ok=False, error=f"recovery: {type(e).__name__}: {e}")
        return out
    with MessageStore.open(root, cfg) as ro:
        rep = check_store(ro)
        if not rep["ok"]:
            out["ok"] = False
            out["problems"] = sorted({p["kind"] for p in rep["problems"]})
            out["details"] = [f'{p["kind"]}: {p["detail"]} ({Path(p["file"]).name}@{p["offset"]})'
                              for p in rep["problems"][:5]]
        if written is not None:
            out["torn"] = torn_records(ro, written)
        lost = find_lost_full(ro, acks)
        if lost:
            out["ok"] = False
            out["lost"] = lost
    return out


def torn_records(store, written: dict) -> list[int]:
    """Offsets of records recovery kept whose bytes are not what the writer wrote there (a
    record torn by the cut that still passed as whole)."""
    out = []
    cl = store.commitlog
    for off, r in cl.walk():
        if r.message is None:
            continue
        f = cl.queue.find(off)
        data = written.get(f"commitlog/{f.path.name}")
        pos = off - f.file_from_offset
        if data is None or bytes(f.buf[pos:pos + r.size]) != data[pos:pos + r.size]:
            out.append(off)
    return out


def find_lost_full(store, acks: list[dict]) -> list[tuple[str, str]]:
    """Each acknowledged message: its record (same size, topic, queue, UNIQ_KEY, body CRC), its
    unit at its queue offset and get_message there (dispatched types), and a hit for its
    UNIQ_KEY and every KEYS token (all but ROLLBACK)."""
    lost = []
    for a in acks:
        m = store.commitlog.get_message(a["phys"])
        if m is None or m.uniqKey != a["uniq"] or m.storeSize != a["size"] or m.topic != a["topic"] \
                or m.queueId != a["qid"]:
            lost.append((a["uniq"], "record"))
            continue
        if m.bodyCRC != a["crc"] or (zlib.crc32(m.body) & 0x7FFFFFFF if m.body else 0) != a["crc"]:
            lost.append((a["uniq"], "body"))
        tt = a["sys_flag"] & 0xC
        if tt in (0x0, 0x8):
            r = store.get_message(a["topic"], a["qid"], a["qoff"], 1)
            if not r.messages or r.messages[0].commitLogOffset != a["phys"]:
                lost.append((a["uniq"], f"get_message {a['topic']}/{a['qid']}@{a['qoff']}: {r.status}"))
        if tt != 0xC:
            for k in [a["uniq"]] + list(dict.fromkeys(" ".join(a["keys"]).split())):  # KEYS splits on spaces
                found = {x.commitLogOffset for x in store.query_message(a["topic"], k, max_num=0).messages}
                if a["phys"] not in found:
                    lost.append((a["uniq"], f"key {k!r} not found"))
    return lost


_LOADED: dict = {}


def check_state(log: str, k: int, seed: int, policy: str, metadata: str, work: str,
                trust_index_flush: bool = False, trust_abort: bool = False, trust_recovery: bool = False) -> dict:
    """Build state (log, k, seed, policy, metadata) in `work`, recover it and judge it (a worker's job)."""
    rec = _LOADED.get(log)
    if rec is None:
        rec = _LOADED[log] = Recording.load(Path(log))
    files = rec.state(k, random.Random(seed), policy, metadata, trust_index_flush, trust_abort,
                      trust_recovery=trust_recovery)
    root = Path(work)
    materialize(files, root)
    acks = rec.acks_before(k)
    written = {r: d for r, d in rec.state(k, random.Random(0), "keep").items() if r.startswith("commitlog/")}
    try:
        v = verify(root, rec.geometry, acks, written)
    except Exception as e:  # noqa: BLE001 - anything untyped is a failure of its own kind
        v = {"ok": False, "error": f"untyped {type(e).__name__}: {e}", "problems": [], "lost": [], "details": []}
    v.update(log=log, k=k, seed=seed, policy=policy, metadata=metadata, acks=len(acks))
    shutil.rmtree(root, ignore_errors=True)
    return v


# ---- the child entry point --------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["record"])
    ap.add_argument("store")
    ap.add_argument("log")
    ap.add_argument("--geometry", default="small", choices=list(GEOMETRIES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-n", type=int, default=150)
    ap.add_argument("--close", action="store_true", help="close cleanly at the end (crash points inside close)")
    ap.add_argument("--reopen", type=float, default=0.0, help="chance of a clean close+reopen after a put")
    ap.add_argument("--flush-chance", type=float, default=0.06, help="chance of a flush (the flush service) after a put")
    ap.add_argument("--prior", default=None, help="the log of the run that left STORE: its acks must survive too")
    a = ap.parse_args()
    store = Path(a.store)
    prior = Recording.load(Path(a.prior)).acks_before(10 ** 9) if a.prior else []
    record(store, Path(a.log), a.geometry, a.seed, a.n, a.close, a.reopen, prior, a.flush_chance)
    return 0


if __name__ == "__main__":
    sys.exit(main())
