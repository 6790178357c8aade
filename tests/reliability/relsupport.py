"""Shared pieces of the reliability suite: store builders, a full read-only browsing session,
bounds on time and memory, sparse-aware file digests and the figures written to the report.

Normal mode (`make test`) keeps every loop short; `--soak` (`make soak`) multiplies them and
writes the figures to build/reliability/soak-report.json (normal runs write quick-report.json)."""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import random
import resource
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
REPORT_DIR = ROOT / "build" / "reliability"
PY = sys.executable

SMALL = dict(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=1000, maxHashSlotNum=64, maxIndexNum=256)


def small_cfg(**extra):
    from engine import StoreConfig
    return StoreConfig.from_mapping({**SMALL, **extra})


def is_soak(request) -> bool:
    return bool(request.config.getoption("soak"))


def scale(request, normal: int, soak: int) -> int:
    """How many runs a loop makes: `normal` under `make test`, `soak` under `make soak`.
    RMQ_SOAK_SCALE (a float) stretches the soak figure further."""
    if not is_soak(request):
        return normal
    return max(soak, int(soak * float(os.environ.get("RMQ_SOAK_SCALE", "1"))))


def seed_for(request, salt: str) -> int:
    """A fresh seed per run (printed on failure), fixed by RMQ_SEED to replay a run."""
    if os.environ.get("RMQ_SEED"):
        return int(os.environ["RMQ_SEED"]) ^ zlib.crc32(salt.encode())
    return random.SystemRandom().getrandbits(32)


# ---- figures -----------------------------------------------------------------------------
class Figures:
    """Runs, faults injected, messages checked, failures per category; rewritten to disk after
    every update so a killed or failing session still leaves its numbers behind."""

    def __init__(self) -> None:
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.t0 = time.monotonic()
        self.categories: dict[str, dict] = {}
        self.mode = "quick"

    def add(self, request, category: str, **counts) -> None:
        self.mode = "soak" if is_soak(request) else "quick"
        c = self.categories.setdefault(category, {"runs": 0, "faultsInjected": 0, "messagesChecked": 0,
                                                  "failures": 0, "ackedLost": 0})
        for k, v in counts.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                c[k] = c.get(k, 0) + v
            elif isinstance(v, (list, tuple)):
                c.setdefault(k, []).extend(v)
            else:
                c[k] = v
        self.write()

    def totals(self) -> dict:
        out = {"runs": 0, "faultsInjected": 0, "messagesChecked": 0, "failures": 0, "ackedLost": 0}
        for c in self.categories.values():
            for k in out:
                out[k] += c.get(k, 0)
        return out

    def write(self) -> None:
        REPORT_DIR.mkdir(parents=True, exist_ok=True)
        path = REPORT_DIR / ("soak-report.json" if self.mode == "soak" else "quick-report.json")
        doc = {"mode": self.mode, "started": self.started, "seconds": round(time.monotonic() - self.t0, 1),
               "python": sys.version.split()[0], "totals": self.totals(), "categories": self.categories}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2, sort_keys=True))
        os.replace(tmp, path)


FIGURES = Figures()


# ---- bounds --------------------------------------------------------------------------------
class Hang(BaseException):
    """Raised by the alarm: a BaseException so no `except Exception/OSError` in the engine eats it."""


@contextlib.contextmanager
def time_limit(seconds: float, what: str = ""):
    def on_alarm(signum, frame):
        raise Hang(f"no answer within {seconds}s: {what}")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _vm_size() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * resource.getpagesize()


@contextlib.contextmanager
def memory_limit(extra_bytes: int = 1 << 30):
    """Address space capped at what the process has now plus `extra_bytes`: an input that makes
    the engine allocate without bound gets a MemoryError instead of eating the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        cap = _vm_size() + extra_bytes
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (OSError, ValueError):
        pass
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def assert_typed(exc: BaseException, context: str = "") -> None:
    """A failure must be a StoreError naming its file (and offset where one applies)."""
    from engine.errors import StoreError
    if not isinstance(exc, StoreError):
        raise AssertionError(f"untyped {type(exc).__name__}: {exc} {context}") from exc
    assert exc.path, f"{type(exc).__name__} names no file: {exc} {context}"


# ---- digests -------------------------------------------------------------------------------
def file_digest(path: Path) -> tuple:
    """sha1 of the content + size + mtime, fast on sparse files: only the data extents are read
    (SEEK_DATA/SEEK_HOLE), and only their non-zero 4 KiB blocks are hashed, with their
    positions. Zero blocks and holes hash alike, so the filesystem's bookkeeping (reading a
    preallocated block turns it from "unwritten" into data for SEEK_DATA) cannot fake a change."""
    st = path.stat()
    h = hashlib.sha1()
    block = 4096
    with open(path, "rb") as fh:
        fd = fh.fileno()
        pos, size = 0, st.st_size
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break  # only holes left
            end = os.lseek(fd, start, os.SEEK_HOLE)
            start -= start % block
            fh.seek(start)
            at = start
            while at < end:
                chunk = fh.read(min(end - at, 1 << 20))
                if not chunk:
                    break
                for i in range(0, len(chunk), block):
                    b = chunk[i:i + block]
                    if b.count(0) != len(b):
                        h.update(b"@%d:" % (at + i))
                        h.update(b)
                at += len(chunk)
            pos = max(end, at)
    return h.hexdigest(), st.st_size, st.st_mtime_ns


def tree_digest(root: Path) -> dict:
    """Every file (digest) and every directory (listing + mtime) under root."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        out[str(d.relative_to(root)) + "/"] = (sorted(dirnames + filenames), d.stat().st_mtime_ns)
        for n in filenames:
            p = d / n
            if p.is_symlink() or not p.is_file():
                out[str(p.relative_to(root))] = ("special", os.lstat(p).st_mtime_ns)
                continue
            out[str(p.relative_to(root))] = file_digest(p)
    return out


# ---- building stores -------------------------------------------------------------------------
KEY_POOL = [f"order-{i}" for i in range(40)] + ["Aa", "BB", "dup", "用户-7", "k y"]


def random_single_put(rng: random.Random) -> tuple[bytes, dict, int, int]:
    """A random single put's body and extras (a delay level, or a transaction type in
    sys_flag), as the crash and power-loss writers send them: (body, put kwargs, sys flag, body CRC)."""
    from engine.format.message import body_crc
    kw: dict = {}
    flag = 0
    if rng.random() < 0.05:
        kw["delay_level"] = rng.randrange(1, 19)
    elif rng.random() < 0.08:
        flag = kw["sys_flag"] = rng.choice([0x4, 0x8, 0xC])
    body = random_body(rng, 2500)
    return body, kw, flag, body_crc(body)


def random_body(rng: random.Random, max_len: int = 1500) -> bytes:
    kind = rng.random()
    n = rng.choice([0, 1, 7, 64, rng.randrange(max_len + 1)])
    if kind < 0.4:
        return rng.randbytes(n)                                   # binary, mostly not UTF-8
    if kind < 0.6:
        return (b"<script>alert(1)</script>\x1b[2J\x1b]0;pwn\x07" * (n // 40 + 1))[:n]
    if kind < 0.7:
        return b"\xff\xfe\xc3\x28" * (n // 4)                     # invalid UTF-8 sequences
    return ("{\"seq\": %d, \"text\": \"héllo 世界\"}" % n).encode()


def populate(store, rng: random.Random, n: int, topics=("TopicA", "TopicB"), batch_share: float = 0.15,
             with_special: bool = True) -> list:
    """Append about n varied messages (keys with collisions, tags, batches, delays, transaction
    types, hostile-looking bodies); returns the PutResults."""
    out = []
    i = 0
    while i < n:
        topic = rng.choice(topics)
        qid = rng.randrange(4)
        tags = rng.choice([None, "TagA", "TagB", "\x1b[31mred", "<b>x</b>"])
        keys = rng.sample(KEY_POOL, rng.randrange(3)) or None
        props = {"trace": f"{rng.getrandbits(32):08x}"} if rng.random() < 0.3 else None
        if rng.random() < batch_share:
            bodies = [random_body(rng, 600) for _ in range(rng.randrange(1, 8))]
            out.extend(store.put_messages(topic, bodies, qid, tags, keys, props))
            i += len(bodies)
            continue
        kw = {}
        if with_special and rng.random() < 0.05:
            kw["delay_level"] = rng.randrange(1, 19)
        elif with_special and rng.random() < 0.08:
            kw["sys_flag"] = rng.choice([0x4, 0x8, 0xC])
        out.append(store.put_message(topic, random_body(rng), qid, tags, keys, props, **kw))
        i += 1
    return out


def build_store(root: Path, n: int = 300, seed: int = 1, **cfg_extra) -> Path:
    from engine import MessageStore
    with MessageStore.create(root, small_cfg(**cfg_extra)) as s:
        populate(s, random.Random(seed), n)
    return root


def cut_rebuild(root: Path, cfg, monkeypatch) -> None:
    """`rebuild` of the store at root cancelled half-way through its re-dispatch (dispatch steps
    of 16 records, so there is a half-way): the queues and the index are behind the commitlog
    and `abort` stays."""
    import pytest
    from engine.store import recovery
    from engine.store.rebuild import rebuild_task
    from engine.tasks import CancelToken, Cancelled, run
    monkeypatch.setattr(recovery, "DISPATCH_STEP", 16)
    token = CancelToken()

    def halfway(p):
        if p.unit == "bytes" and p.done > p.total // 2:
            token.cancel()
    with pytest.raises(Cancelled):
        run(rebuild_task(root, cfg, token), halfway)
    assert (root / "abort").exists()


# ---- the browsing session ------------------------------------------------------------------
def _plain(fn, *a, **k):
    return fn(*a, **k)


class Tolerant:
    """A guard for `browse` on damaged stores: a typed StoreError naming its file ends only the
    step it happened in (and is counted); anything else propagates and fails the test."""

    def __init__(self):
        self.typed: list[str] = []

    def __call__(self, fn, *a, **k):
        from engine.errors import StoreError
        try:
            return fn(*a, **k)
        except StoreError as e:
            assert_typed(e, f"in {getattr(fn, '__name__', fn)}")
            self.typed.append(f"{type(e).__name__}: {e}")
            return None


def browse(store, rng: random.Random | None = None, deep: bool = True, guard=_plain) -> int:
    """Everything a user does with a store opened read-only, through the engine: overview, every
    record, every queue page by page (ours and the broker's paging), time lookups, key and id
    searches, index chains, check. Returns how many messages it looked at. `guard(fn, *args)`
    runs each step (Tolerant() lets typed errors end just that step)."""
    from engine.analysis.chains import chain_lengths
    from engine.analysis.check import check_store
    rng = rng or random.Random(0)
    g = guard
    g(lambda: json.dumps(store.info(), default=str))
    g(store.topics)
    g(store.queue_list)
    g(store.consumer_lag)
    msgs = []

    def walk():
        count = 0
        for off, r in store.walk():
            if r.message is not None:
                count += 1
                if len(msgs) < 400:
                    msgs.append(r.message)
        return count
    n = g(walk) or 0

    def render(m):
        json.dumps(m.to_json())
        return (m.msgId, m.bornHost, m.storeHost, m.transactionType, m.key_list)
    for m in msgs[:200]:
        g(render, m)

    def page(topic, qid, cq):
        got, off, guard_n = 0, cq.min_offset, 0
        while off < cq.max_offset and guard_n < 10_000:
            r = store.get_message(topic, qid, off, 64)
            got += len(r.messages)
            off = max(r.nextBeginOffset, off + 1)
            guard_n += 1
        return got
    times = [0, -1, 2 ** 62] + [m.storeTimestamp + d for m in msgs[:3] for d in (-1, 0, 1)]
    for (topic, qid), cq in list(store.queues.items()):
        n += g(page, topic, qid, cq) or 0
        g(store.get_message, topic, qid, cq.min_offset, 32, broker=True)
        g(store.get_message, topic, qid, cq.max_offset, 1)
        g(store.get_message, topic, qid, cq.max_offset + 5, 1)
        if cq.max_offset > 0:
            g(store.store_time_at, topic, qid, rng.randrange(cq.max_offset))
        g(store.earliest_message_time, topic, qid)
        for t in times if deep else times[:2]:
            for b in (None, "lower", "upper"):
                g(store.get_offset_in_queue_by_time, topic, qid, t, b)
    for m in (rng.sample(msgs, min(len(msgs), 25)) if deep else msgs[:5]):
        for k in m.key_list[:2]:
            g(store.query_message, m.topic, k, max_num=0)
            g(store.query_message, m.topic, k, raw=True)
        if m.uniqKey:
            g(store.query_uniq, m.topic, m.uniqKey)
            g(store.lookup_id, m.uniqKey)
        g(store.lookup_id, m.msgId)
    g(store.query_message, "TopicA", "no-such-key")
    g(store.lookup_id, "0A00000500002A9F0000000000000000")
    g(store.lookup_id, "not an id")
    for f in store.index.files:
        g(chain_lengths, f)
        for slot in rng.sample(range(f.slot_num), min(f.slot_num, 16)):
            g(f.chain, slot)
    if deep:
        g(check_store, store)
    g(store.refresh)
    return n


# ---- hand-made records ---------------------------------------------------------------------------
V1, V2 = -626843481, -626843477


def raw_record(topic: bytes, body: bytes = b"b", props: bytes = b"", qid: int = 0, qoff: int = 0, phys: int = 0,
               store_ts: int = 1_700_000_000_000, v2: bool = False, sys_flag: int = 0, total: int | None = None,
               body_len: int | None = None, topic_len: int | None = None, prop_len: int | None = None) -> bytes:
    """A commitlog record (IPv4 hosts) from raw bytes, bypassing every rule of the writer; the
    length fields can be forged."""
    tls = 2 if v2 else 1
    size = 90 + len(body) + tls + len(topic) + len(props)
    out = struct.pack(">iiiiiqqiq", size if total is None else total, V2 if v2 else V1,
                      zlib.crc32(body) & 0x7FFFFFFF if body else 0, qid, 0, qoff, phys, sys_flag, store_ts - 5)
    out += b"\x7f\0\0\1" + struct.pack(">i", 1) + struct.pack(">q", store_ts) + b"\x7f\0\0\1" + struct.pack(">i", 10911)
    out += struct.pack(">iqi", 0, 0, len(body) if body_len is None else body_len) + body
    tl = len(topic) if topic_len is None else topic_len
    out += (struct.pack(">h", tl) if v2 else struct.pack(">b", tl)) + topic
    out += struct.pack(">h", len(props) if prop_len is None else prop_len) + props
    return out


def append_raw(root: Path, records: list[bytes], cfg=None) -> list[int]:
    """Write records after the last valid one of a closed store (their PHYSICALOFFSET set to
    where they land); returns their offsets. They must fit in the current file."""
    from engine import MessageStore
    with MessageStore.open(root, cfg) as s:
        end, size = s.max_offset, s.cfg.mappedFileSizeCommitLog
    path = Path(root) / "commitlog" / f"{end - end % size:020d}"
    offs = []
    with open(path, "r+b") as fh:
        pos = end % size
        for r in records:
            r = bytearray(r)
            if len(r) >= 36:
                struct.pack_into(">q", r, 28, end - end % size + pos)
            assert pos + len(r) + 8 <= size, "records do not fit the current commitlog file"
            fh.seek(pos)
            fh.write(r)
            offs.append(end - end % size + pos)
            pos += len(r)
    return offs


# ---- acknowledgements -------------------------------------------------------------------------
@dataclasses.dataclass
class Ack:
    """One `A ...` line of writer_proc/fill_proc: a message the store acknowledged."""
    phys: int
    uniq: str
    topic: str
    qid: int
    qoff: int
    size: int
    sys_flag: int
    crc: int
    index_may_be_lost: bool = False

    @classmethod
    def parse(cls, parts: list[str]) -> "Ack":
        phys, uniq, topic, qid, qoff, size, flag, crc = parts[1:9]
        return cls(int(phys), uniq, topic, int(qid), int(qoff), int(size), int(flag), int(crc))


def find_lost(store, acks, on_index_lost=None) -> list:
    """Every acknowledged message must be in the commitlog (same record, same body CRC), in its
    ConsumeQueue at its queue offset (NOT_TYPE/COMMIT) and findable by its UNIQ_KEY (all but
    ROLLBACK). Returns [(ack, what is wrong)]."""
    lost = []
    for a in acks:
        m = store.commitlog.get_message(a.phys)
        if m is None or m.uniqKey != a.uniq or m.storeSize != a.size or m.topic != a.topic or m.queueId != a.qid:
            lost.append((a, "record"))
            continue
        if m.bodyCRC != a.crc or (zlib.crc32(m.body) & 0x7FFFFFFF if m.body else 0) != a.crc:
            lost.append((a, "body"))
        if a.sys_flag & 0xC in (0x0, 0x8):
            cq = store.find_queue(a.topic, a.qid)
            u = cq.unit(a.qoff) if cq else None
            if u is None or u[:2] != (a.phys, a.size) or m.queueOffset != a.qoff:
                lost.append((a, f"cq unit {u}"))
        if a.sys_flag & 0xC != 0xC:
            found = [x.commitLogOffset for x in store.query_message(a.topic, a.uniq, max_num=0).messages]
            if a.phys not in found:
                if a.index_may_be_lost and on_index_lost is not None:
                    on_index_lost(a)
                else:
                    lost.append((a, "index"))
    return lost


# ---- subprocesses ----------------------------------------------------------------------------
def run_cli(*args, timeout: float = 60, env=None):
    p = subprocess.run([PY, "-m", "engine", *map(str, args)], capture_output=True, text=True, timeout=timeout,
                       cwd=ROOT, env=env)
    return p.returncode, p.stdout, p.stderr


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def skip_unless_linux():
    import pytest
    if not sys.platform.startswith("linux"):
        pytest.skip("Linux-only fault injection")
