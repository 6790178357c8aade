"""check's commitlog phase: every record once, its rules applied, and what the later phases
need of each message kept as columns (`Records`), never as a Python object per message.

The walk is engine.accel._check's (compiled) where the commitlog is a plain one: it classifies
each record as check_record does, applies the per-record rules in C and leaves to Python only
what is not an ordinary message or breaks a rule (`_PyRules.message` words the problem). Pure
Python (RMQSTORE_PURE_PYTHON=1, no compiler) and DLedger logs walk `CommitLog.walk` and give
the same columns and problems."""
from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np

from engine import accel
from engine.format import properties as P
from engine.format.javahash import index_key, index_key_hash
from engine.format.message import COMPRESSED_FLAG, RecordStatus, body_crc, decompression_error, verify_prop_crc
from engine.store.commit_log import read_record_at
from engine.tasks import Progress

_K = accel.load("_check")


def _zlib_ng_crc() -> int:
    """The address of zlib-ng's crc32 (the folded PCLMUL CRC engine.format.crc uses), or 0."""
    try:
        import zlib_ng.zlib_ng as z
        return ctypes.cast(ctypes.CDLL(z.__file__).zng_crc32, ctypes.c_void_p).value or 0
    except (ImportError, OSError, AttributeError):
        return 0


if _K is not None:
    _K.use_crc(_zlib_ng_crc())

_COLS = (("off", np.int64), ("topic", np.int32), ("qid", np.int32), ("qoff", np.int64), ("size", np.int32),
         ("tran", np.int8), ("tags", np.int64), ("ts", np.int64), ("flag", np.uint8))


class Records:
    """The commitlog's messages in commitlog order, as columns: off (commitlog offset), topic
    (an id into `topics`), qid, qoff, size, tran (SYSFLAG & 0x0C), tags (tagsCode), ts (store
    time); and their keys' index hashes, key_rec (row) / key_hash (int32 both), by row then key
    order."""

    def __init__(self, cols: dict, topics: list[str], key_rec: np.ndarray, key_hash: np.ndarray):
        self.__dict__.update(cols)
        self.topics = topics
        self.topic_ids = {t: i for i, t in enumerate(topics)}
        self.key_rec, self.key_hash = key_rec, key_hash
        self.n = len(self.off)

    def __len__(self) -> int:
        return self.n

    def find(self, phys: np.ndarray) -> np.ndarray:
        """The row of the message starting at each offset, -1 where none starts."""
        phys = np.asarray(phys, dtype=np.int64)
        if not self.n:
            return np.full(len(phys), -1, dtype=np.int64)
        i = np.minimum(np.searchsorted(self.off, phys), self.n - 1)
        return np.where(self.off[i] == phys, i, -1)

    def row(self, i: int) -> tuple:
        """(topic, qid, qoff, size, tranType, tagsCode, storeTimestamp) of row i."""
        return (self.topics[self.topic[i]], int(self.qid[i]), int(self.qoff[i]), int(self.size[i]),
                int(self.tran[i]), int(self.tags[i]), int(self.ts[i]))


class _Builder:
    """The columns, filled in place: by the kernel straight into them (grown when full), or a
    row at a time by Python (buffered, written before the kernel's next call)."""

    def __init__(self, rows: int = 1024, keys: int = 2048, topics=None):
        self.cols = {name: np.empty(rows, dtype=t) for name, t in _COLS}
        self.col_list = [self.cols[name] for name, _ in _COLS]
        self.kr, self.kh = np.empty(keys, dtype=np.int32), np.empty(keys, dtype=np.int32)  # (rows, hashes < 2^31)
        self.n = self.nk = 0
        self.py_rows: list[tuple] = []
        self.py_keys: list[tuple[int, int]] = []
        self.extra: list[tuple[int, int]] = []   # keys of rows the kernel left to Python (after their chunk's)
        self.topics = topics if topics is not None else (_K.Topics() if _K is not None else None)
        self.moved = False      # the columns were copied to bigger ones (see split_off)
        self.shared = None      # (columns, key rows, key hashes) shared with later pieces (split_off)
        self.origin = None      # (row, key) where a later piece's region starts in the shared columns
        self.topic_ids: dict[str, int] = {}
        self.names: list[str] = []

    def topic_id(self, name: str) -> int:
        if self.topics is not None:  # the kernel's table: one id per name either way
            i = self.topics.by_name.get(name)
            return self.topics.id_of(name.encode("utf-8", "surrogatepass")) if i is None else i
        i = self.topic_ids.get(name)
        if i is None:
            i = self.topic_ids[name] = len(self.names)
            self.names.append(name)
        return i

    def reserve(self, rows: int, keys: int) -> None:
        """Room for `rows` more rows and `keys` more keys (the columns copied once when grown)."""
        if self.n + rows > len(self.col_list[0]) or self.nk + keys > len(self.kr):
            self.moved = True
        if self.n + rows > len(self.col_list[0]):
            cap = max(self.n + rows, len(self.col_list[0]) * 3 // 2)
            for name, t in _COLS:
                a = np.empty(cap, dtype=t)
                a[:self.n] = self.cols[name][:self.n]
                self.cols[name] = a
            self.col_list = [self.cols[name] for name, _ in _COLS]
        if self.nk + keys > len(self.kr):
            cap = max(self.nk + keys, len(self.kr) * 3 // 2)
            for name in ("kr", "kh"):
                a = np.empty(cap, dtype=np.int32)
                a[:self.nk] = getattr(self, name)[:self.nk]
                setattr(self, name, a)

    def add_py(self, off: int, m, hashes: list[int]) -> None:
        row = self.n + len(self.py_rows)
        self.py_rows.append((off, self.topic_id(m.topic), m.queueId, m.queueOffset, m.storeSize, m.sysFlag & 0x0C,
                             m.tagsCode, m.storeTimestamp, 0))
        self.py_keys.extend((row, h) for h in hashes)

    def flush_py(self) -> None:
        if self.py_rows:
            k = len(self.py_rows)
            self.reserve(k, len(self.py_keys))
            for a, c in zip(self.col_list, zip(*self.py_rows)):
                a[self.n:self.n + k] = c
            self.n += k
        if self.py_keys:
            k = len(self.py_keys)
            r, h = zip(*self.py_keys)
            self.kr[self.nk:self.nk + k], self.kh[self.nk:self.nk + k] = r, h
            self.nk += k
        self.py_rows, self.py_keys = [], []

    def extra_keys(self, row: int, hashes: list[int]) -> None:
        self.extra.extend((row, h) for h in hashes)

    def split_off(self, regions: list[tuple[int, int]]) -> list["_Builder"]:
        """Builders for the later pieces of the walk writing into our columns: piece i's rows
        from regions[i][0] (its keys from regions[i][1]) to the next piece's; ours end at the
        first region until joined (append, join_back)."""
        cols, kr, kh = self.cols, self.kr, self.kh
        ends = regions[1:] + [(len(cols["off"]), len(kr))]
        out = []
        for (r0, k0), (r1, k1) in zip(regions, ends):
            o = _Builder(0, 0, _K.Topics())
            o.cols = {name: a[r0:r1] for name, a in cols.items()}
            o.col_list = [o.cols[name] for name, _ in _COLS]
            o.kr, o.kh = kr[k0:k1], kh[k0:k1]
            o.origin = (r0, k0)
            out.append(o)
        self.cols = {name: a[:regions[0][0]] for name, a in cols.items()}
        self.col_list = [self.cols[name] for name, _ in _COLS]
        self.kr, self.kh = kr[:regions[0][1]], kh[:regions[0][1]]
        self.shared = (cols, kr, kh)
        self.moved = False
        return out

    def join_back(self) -> None:
        """Our columns whole again (the later pieces' rows not joined are dropped)."""
        if self.shared is not None and not self.moved:
            self.cols, self.kr, self.kh = self.shared
            self.col_list = [self.cols[name] for name, _ in _COLS]
        self.shared = None

    def _unshare(self) -> None:
        """Our rows into columns of our own (the later pieces' regions stay as they are)."""
        if self.shared is not None and not self.moved:
            n, nk = self.n, self.nk
            self.cols = {name: a[:max(n, 1)].copy() for name, a in self.shared[0].items()}
            self.col_list = [self.cols[name] for name, _ in _COLS]
            self.kr, self.kh = self.kr[:max(nk, 1)].copy(), self.kh[:max(nk, 1)].copy()
        self.shared = None
        self.moved = True

    def _join_in_place(self, o: "_Builder") -> bool:
        """append without copying a piece's rows when they are still where split_off put them:
        moved down to follow ours (one memmove per column when our part was smaller than
        guessed)."""
        if self.shared is None or self.moved or o.moved or o.origin is None:
            return False
        cols, kr, kh = self.shared
        rows_at, keys_at = o.origin
        n, nk = self.n, self.nk
        for name, a in cols.items():
            if rows_at != n:
                ctypes.memmove(a.ctypes.data + n * a.itemsize, a.ctypes.data + rows_at * a.itemsize, o.n * a.itemsize)
        for a in (kr, kh):
            if keys_at != nk:
                ctypes.memmove(a.ctypes.data + nk * a.itemsize, a.ctypes.data + keys_at * a.itemsize, o.nk * a.itemsize)
        remap = np.array([self.topic_id(name) for name in o.topics.names] or [0], dtype=np.int32)
        if (remap != np.arange(len(remap))).any():
            t = cols["topic"][n:n + o.n]
            t[:] = remap[t]
        kr[nk:nk + o.nk] += n
        self.cols, self.kr, self.kh = cols, kr, kh
        self.col_list = [self.cols[name] for name, _ in _COLS]
        self.extra.extend((r + n, h) for r, h in o.extra)
        self.n += o.n
        self.nk += o.nk
        return True

    def append(self, o: "_Builder") -> None:
        """o's rows after ours (o walked the part of the log after ours, with its own topic ids)."""
        self.flush_py()
        o.flush_py()
        if self._join_in_place(o):
            return
        self._unshare()   # (our rows could run into a later piece's region)
        remap = np.array([self.topic_id(name) for name in (o.topics.names if o.topics is not None else o.names)]
                         or [0], dtype=np.int32)
        self.reserve(o.n, o.nk)
        for name, _ in _COLS:
            self.cols[name][self.n:self.n + o.n] = remap[o.cols["topic"][:o.n]] if name == "topic" \
                else o.cols[name][:o.n]
        self.kr[self.nk:self.nk + o.nk] = o.kr[:o.nk] + self.n
        self.kh[self.nk:self.nk + o.nk] = o.kh[:o.nk]
        self.extra.extend((r + self.n, h) for r, h in o.extra)
        self.n += o.n
        self.nk += o.nk

    def finish(self) -> Records:
        self.flush_py()
        cols = {name: self.cols[name][:self.n] for name, _ in _COLS}
        kr, kh = self.kr[:self.nk], self.kh[:self.nk]
        if self.extra:  # keys Python added after their chunk
            r, h = zip(*self.extra)
            kr = np.concatenate([kr, np.array(r, dtype=np.int32)])
            kh = np.concatenate([kh, np.array(h, dtype=np.int32)])
            order = np.argsort(kr, kind="stable")
            kr, kh = kr[order], kh[order]
        names = self.topics.names if self.topics is not None else self.names
        return Records(cols, list(names), kr, kh)


def key_hashes(m) -> list[int]:
    """Index hashes of the keys RocketMQ indexes for the message (UNIQ_KEY, each KEYS token)."""
    return [index_key_hash(index_key(m.topic, k)) for k in record_keys(m)]


def record_keys(m) -> list[str]:
    return [m.uniqKey] * bool(m.uniqKey) + m.key_list


class _PyRules:
    """The per-record rules in Python, worded for the report: every record on the pure-Python
    walk, the records the kernel flagged on the compiled one."""

    def __init__(self, out, tails_rule: bool):
        self.out = out
        self.tails_rule = tails_rule
        self.crc_tails: dict = {}  # file -> [records whose __CRC32# checks out, offsets of records without one]

    def message(self, off: int, m, f) -> None:
        out = self.out
        if m.physicalOffsetField != off:
            out.add("commitlog-record", f"stored PHYSICALOFFSET {m.physicalOffsetField}, expected {off}", f.path, off)
        if m.sysFlag & 0x700 and not m.sysFlag & 0x1:
            out.add("commitlog-record", f"SYSFLAG {m.sysFlag:#x} names a compression type for a body that is not "
                    "compressed", f.path, off)
        if m.sysFlag & COMPRESSED_FLAG and (why := decompression_error(m.body, (m.sysFlag >> 8) & 0x7)):
            out.add("commitlog-body", f"SYSFLAG {m.sysFlag:#x} says the body is compressed, but it does not "
                    f"decompress ({why}): a consumer gets no body", f.path, off)
        if m.sysFlag & 0xC0 and "INNER_NUM" not in m.properties:
            out.add("commitlog-record", f"SYSFLAG {m.sysFlag:#x} marks an inner batch, but the record has no "
                    "INNER_NUM property", f.path, off)
        if body_crc(m.body) != m.bodyCRC:  # recovery checks CRCs in the last files only; empty = 0
            out.add("commitlog-crc", f"body CRC {body_crc(m.body)} != stored {m.bodyCRC}", f.path, off)
        if not self.tails_rule:
            return
        tails = self.crc_tails.setdefault(f.path, [0, []])
        if verify_prop_crc(f.buf, off - f.file_from_offset, m.storeSize):
            tails[0] += 1
        elif P.CRC32_PROP in m.propertiesRaw:
            out.add("commitlog-crc", "whole-record __CRC32# does not match the record's bytes", f.path, off)
        elif len(tails[1]) < 1000:
            tails[1].append(off)

    def merge(self, o: "_PyRules") -> None:
        """o's tails after ours (o walked the part of the log after ours)."""
        for path, (good, without) in o.crc_tails.items():
            t = self.crc_tails.setdefault(path, [0, []])
            t[0] += good
            t[1] = (t[1] + without)[:1000]

    def good_tails(self, f, n: int) -> None:
        if n:
            self.crc_tails.setdefault(f.path, [0, []])[0] += n

    def finish(self) -> None:
        for path, (good, without) in self.crc_tails.items():
            # records of a file written with enabledAppendPropCRC all end in a __CRC32# tail: one
            # without it had its tail (or the properties before it) damaged
            if good and good >= 4 * len(without):
                for off in without:
                    self.out.add("commitlog-crc", "no valid __CRC32# tail, unlike the other records of its file (the "
                                 "properties or the CRC were damaged)", path, off)


def walk_task(store, out, tails_rule: bool, poll, helper=None):
    """Every record of the commitlog (the check's first phase): Progress in bytes; returns Records.
    `helper`: a one-thread executor for the second walker (else one of its own)."""
    cl = store.commitlog
    rules = _PyRules(out, tails_rule)
    total = max(1, cl.max_offset - cl.min_offset)
    b = _Builder(max(1024, total // 512), max(2048, total // 256))
    plain = _K is not None and not any(cl.entry_header(f) for f in cl.files)  # (the kernel reads bare records)
    if plain:
        yield from _walk_compiled(store, cl, b, rules, total, poll, helper)
    else:
        yield from _walk_py(store, cl, b, rules, total, poll)
    rules.finish()
    yield Progress(total, total, "commitlog", "bytes")
    return b.finish()


def _walk_py(store, cl, b: _Builder, rules: _PyRules, total: int, poll):
    step = max(1 << 16, total // 200)
    next_report = cl.min_offset
    for off, r in cl.walk():
        if off >= next_report:
            poll()
            yield Progress(off - cl.min_offset, total, "commitlog", "bytes")
            next_report = off + step
        _one(cl, b, rules, off, r)


def _one(cl, b: _Builder, rules: _PyRules, off: int, r) -> None:
    """A record read by Python: a message's rules and row, or the problem it is."""
    if r.status is RecordStatus.MESSAGE:
        rules.message(off, r.message, cl.queue.find(off))
        b.add_py(off, r.message, key_hashes(r.message))
    elif r.status is not RecordStatus.END_OF_FILE:
        rules.out.add("commitlog-record", f"{r.status.value}: {r.reason}", cl.queue.find(off).path, off)


class _Deferred(list):
    """Problems of the second walker, told once the first one is known to have arrived where it
    started (added in order after the first's, they make the one-walker report)."""

    def add(self, *args) -> None:
        self.append(args)


SPLIT_MIN = 16 << 20     # below this many bytes of log, one walker
PIECE = 64 << 20         # about this many bytes a piece of the walk (at most MAX_PIECES pieces)
MAX_PIECES = 16
PROBE = 1 << 20          # bytes the first walker reads alone, to see how big rows are
CHUNK_BYTES = 64 << 20   # commitlog bytes per kernel call (and per progress step at most)


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def split_points(cl, options: int, pieces: int) -> list[int]:
    """Where walkers can start, to cut the log into about `pieces` pieces: for each cut, a file
    start near it, else the first record boundary after it (engine.accel._check.boundary:
    a record that stores its own offset, followed by another). Only guesses: a piece's walk
    is used when the walk of the piece before arrived exactly at its start."""
    lo, hi = cl.min_offset, cl.max_offset
    step = (hi - lo) // pieces
    starts = [g.file_from_offset for g in cl.files if lo < g.file_from_offset < hi]
    out = []
    for k in range(1, pieces):
        cut = lo + k * step
        near = min(starts, key=lambda s: abs(s - cut), default=None)
        if near is not None and abs(near - cut) <= step // 4:
            out.append(near)
            continue
        f = cl.queue.find(cut)
        if f is not None:
            base = f.file_from_offset
            limit = min(f.wrote_position, hi - base)
            p = _K.boundary(f.buf, cut - base, min(limit, cut - base + min(step, 16 << 20)), limit, base, options)
            if p > 0:
                out.append(base + p)
    return sorted(set(o for o in out if lo < o < hi))


class _Piece:
    """A piece of the walk after the first: its builder, its rules (problems kept to be told
    in order), where it starts and ends, how far it got and where it stopped."""

    def __init__(self, b: _Builder, tails_rule: bool, start: int, end: int):
        self.b, self.rules = b, _PyRules(_Deferred(), tails_rule)
        self.start, self.end, self.at, self.reached = start, end, start, None


def _walk_compiled(store, cl, b: _Builder, rules: _PyRules, total: int, poll, helper=None):
    """CommitLog.walk's course (a damaged record skips to the next file) with the kernel taking
    the runs of ordinary messages. On two cores the log is cut into pieces at record boundaries
    (split_points) that the two threads take in turn as they get free; each piece's rows,
    keys, topics, problems and `__CRC32#` counts join the ones before it when the walk of the
    piece before arrived exactly at its start -- the one-walker result -- and from the first
    piece where that fails the pieces are dropped and the walk goes on from where it is."""
    opts = cl.read_opts
    options = (_K.ACCEPT_V2 if opts.accept_v2 else 0) | (_K.CHECK_TAILS if rules.tails_rule else 0)
    lo, hi = cl.min_offset, cl.max_offset
    splits = split_points(cl, options, max(2, min(MAX_PIECES, (hi - lo) // PIECE))) \
        if hi - lo >= SPLIT_MIN and cores() > 1 else []
    shown = [0]

    def done(v: int) -> int:   # progress never goes back (the fallback below restarts the count)
        shown[0] = max(shown[0], v)
        return shown[0]

    if not splits:
        b.reserve(total // 512, total // 256)
        yield from _walk_part(cl, b, rules, options, lo, hi, poll, lambda off: done(off - lo), total)
        return
    # the first MiB alone: its rows and keys per byte say where each piece's rows go -- into
    # the same columns, after room for the ones before, so that joining them moves little
    probe = lo + min(PROBE, (splits[0] - lo) // 8)
    at = yield from _walk_part(cl, b, rules, options, lo, probe, poll, lambda off: done(off - lo), total)
    splits = [s for s in splits if s > at]
    if not splits:
        b.reserve(total // 512, total // 256)
        yield from _walk_part(cl, b, rules, options, at, hi, poll, lambda off: done(off - lo), total)
        return
    bounds = [at] + splits + [hi]
    rows, keys = b.n + len(b.py_rows), b.nk + len(b.py_keys)
    per_row = (at - lo) / rows * 0.97 if rows >= 16 else 512
    per_key = (at - lo) / keys * 0.97 if rows >= 16 and keys else 256
    regions, r, k = [], rows, keys
    for a, z in zip(bounds, bounds[1:]):
        r, k = r + int((z - a) / per_row) + 1024, k + int((z - a) / per_key) + 2048
        regions.append((r, k))
    b.reserve(r - b.n, k - b.nk)
    pieces = [_Piece(o, rules.tails_rule, a, z) for o, a, z in zip(b.split_off(regions[:-1]), splits, bounds[2:])]
    queue = {"next": 0, "stop": False}
    lock = threading.Lock()

    def claim():
        with lock:
            i = queue["next"]
            if queue["stop"] or i >= len(pieces):
                return None
            queue["next"] = i + 1
            return pieces[i]

    def walk(p: _Piece):   # a piece: yields the offset reached; p.reached at the end
        p.reached = yield from _walk_part(cl, p.b, p.rules, options, p.start, p.end, None, None, 0)

    def work():
        while (p := claim()) is not None:
            for p.at in walk(p):
                if queue["stop"]:
                    return

    def counted(off: int) -> int:   # bytes walked: the first piece to off, the others so far
        return done(min(total, off - lo + sum(p.at - p.start for p in pieces)))

    with nullcontext(helper) if helper is not None else ThreadPoolExecutor(1) as pool:
        job = pool.submit(work)
        try:
            reached = yield from _walk_part(cl, b, rules, options, at, splits[0], poll, counted, total)
            while (p := claim()) is not None:
                for p.at in walk(p):
                    poll()
                    yield Progress(counted(reached), total, "commitlog", "bytes")
        except BaseException:   # cancelled (or closed): the helper stops at its next chunk
            queue["stop"] = True
            raise
        job.result()
    for p in pieces:
        if reached != p.start:   # the walk before did not arrive here: one walk from where it is
            break
        b.append(p.b)
        for args in p.rules.out:
            rules.out.add(*args)
        rules.merge(p.rules)
        reached = p.reached
    else:
        return
    b.join_back()
    yield from _walk_part(cl, b, rules, options, reached, hi, poll, lambda off: done(off - lo), total)


def _walk_part(cl, b: _Builder, rules: _PyRules, options: int, offset: int, end: int, poll, done, total: int):
    """The walk from `offset` while it is < end: yields Progress (done(offset) of total), or
    the offset reached when `done` is None; returns the offset where it stopped."""
    opts = cl.read_opts
    while offset < end:
        f = cl.queue.find(offset)
        if f is None:
            nxt = [g.file_from_offset for g in cl.files if g.file_from_offset > offset]
            if not nxt:
                return offset
            offset = nxt[0]
            continue
        if poll is not None:
            poll()
        base = f.file_from_offset
        stop = min(end - base, f.file_size, offset - base + CHUNK_BYTES)
        b.flush_py()
        first = b.n
        pos, b.n, b.nk, why = _K.walk(f.buf, offset - base, stop, f.wrote_position, base, options, b.topics,
                                      *b.col_list, b.n, b.kr, b.kh, b.nk)
        flag = b.cols["flag"]
        bad = np.flatnonzero(flag[first:b.n]) + first
        if rules.tails_rule:
            rules.good_tails(f, b.n - first - len(bad))
        for i in bad.tolist():  # the rows that break a rule: Python says how
            o = int(b.cols["off"][i])
            m = read_record_at(f.buf, o - base, f.wrote_position, o, opts).message
            rules.message(o, m, f)
            b.extra_keys(i, key_hashes(m))
        offset = base + pos
        yield offset if done is None else Progress(done(offset), total, "commitlog", "bytes")
        if why == _K.AT_RECORD:
            r = read_record_at(f.buf, pos, f.wrote_position, offset, opts)
            _one(cl, b, rules, offset, r)
            if r.status is RecordStatus.MESSAGE or (r.status is RecordStatus.SIZE_MISMATCH and r.size > 0):
                offset += r.size
            else:
                offset = f.end_offset
        elif why == _K.FULL:   # the rows or the keys: half as many again
            b.reserve(1024, 1024)
    return offset
