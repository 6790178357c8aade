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
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np

from engine import accel
from engine.format import properties as P
from engine.format.javahash import index_key, index_key_hash
from engine.format.message import RecordStatus, body_crc, verify_prop_crc
from engine.store.commit_log import read_record_at
from engine.tasks import Progress

_K = accel.load("_check")
CHUNK = 1 << 16          # rows per kernel call (and per progress step at most)


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
    time); and their keys' index hashes, key_rec (row) / key_hash, by row then key order."""

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
    """Columns filled chunk by chunk (by the kernel, or a row at a time by Python)."""

    def __init__(self):
        self.chunks: list[dict] = []
        self.keys: list[tuple[np.ndarray, np.ndarray]] = []
        self.n = 0
        self.py_rows: list[tuple] = []
        self.py_keys: list[tuple[int, int]] = []
        self.topics = _K.Topics() if _K is not None else None
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

    def add_py(self, off: int, m, hashes: list[int]) -> None:
        row = self.n + len(self.py_rows)
        self.py_rows.append((off, self.topic_id(m.topic), m.queueId, m.queueOffset, m.storeSize, m.sysFlag & 0x0C,
                             m.tagsCode, m.storeTimestamp, 0))
        self.py_keys.extend((row, h) for h in hashes)

    def flush_py(self) -> None:
        if self.py_rows:
            cols = list(zip(*self.py_rows))
            self.chunks.append({name: np.array(c, dtype=t) for (name, t), c in zip(_COLS, cols)})
        if self.py_keys:
            r, h = zip(*self.py_keys)
            self.keys.append((np.array(r, dtype=np.int64), np.array(h, dtype=np.int64)))
        self.n += len(self.py_rows)
        self.py_rows, self.py_keys = [], []

    def add_chunk(self, cols: dict, j: int, key_rec: np.ndarray, key_hash: np.ndarray) -> None:
        self.flush_py()
        self.chunks.append({k: v[:j].copy() for k, v in cols.items()})
        self.keys.append((key_rec.astype(np.int64) + self.n, key_hash.copy()))
        self.n += j

    def extra_keys(self, row: int, hashes: list[int]) -> None:
        self.py_keys.extend((row, h) for h in hashes)

    def finish(self) -> Records:
        self.flush_py()
        cols = {name: (np.concatenate([c[name] for c in self.chunks]) if self.chunks else np.empty(0, dtype=t))
                for name, t in _COLS}
        if self.keys:
            kr = np.concatenate([k[0] for k in self.keys])
            kh = np.concatenate([k[1] for k in self.keys])
            if len(kr) > 1 and (kr[1:] < kr[:-1]).any():  # keys Python added after their chunk
                order = np.argsort(kr, kind="stable")
                kr, kh = kr[order], kh[order]
        else:
            kr = kh = np.empty(0, dtype=np.int64)
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


def walk_task(store, out, tails_rule: bool, poll):
    """Every record of the commitlog (the check's first phase): Progress in bytes; returns Records."""
    cl = store.commitlog
    rules = _PyRules(out, tails_rule)
    b = _Builder()
    total = max(1, cl.max_offset - cl.min_offset)
    plain = getattr(store, "dledger", None) is None and _K is not None
    yield from (_walk_compiled if plain else _walk_py)(store, cl, b, rules, total, poll)
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


def _walk_compiled(store, cl, b: _Builder, rules: _PyRules, total: int, poll):
    """CommitLog.walk's course (a damaged record skips to the next file) with the kernel
    taking the runs of ordinary messages; their CRCs in two halves, one on another core."""
    with ThreadPoolExecutor(1) if (os.cpu_count() or 1) > 1 else nullcontext() as pool:
        yield from _walk_files(cl, b, rules, total, poll, pool)


def _walk_files(cl, b: _Builder, rules: _PyRules, total: int, poll, pool):
    opts = cl.read_opts
    options = (_K.ACCEPT_V2 if opts.accept_v2 else 0) | (_K.CHECK_TAILS if rules.tails_rule else 0)
    cols = {name: np.empty(CHUNK, dtype=t) for name, t in _COLS}
    key_rec = np.empty(CHUNK * 4, dtype=np.int32)
    key_hash = np.empty(CHUNK * 4, dtype=np.int64)
    body = (np.empty(CHUNK, dtype=np.int64), np.empty(CHUNK, dtype=np.int32), np.empty(CHUNK, dtype=np.int32))
    c = [cols[name] for name, _ in _COLS]
    flag = cols["flag"]
    offset, end = cl.min_offset, cl.max_offset
    while offset < end:
        f = cl.queue.find(offset)
        if f is None:
            nxt = [g.file_from_offset for g in cl.files if g.file_from_offset > offset]
            if not nxt:
                return
            offset = nxt[0]
            continue
        poll()
        base = f.file_from_offset
        pos, j, nk, why = _K.walk(f.buf, offset - base, min(end - base, f.file_size), f.wrote_position, base,
                                  options, b.topics, *c, 0, key_rec, key_hash, 0, *body)
        crc_args = (base, options, cols["off"], cols["size"], *body, flag)
        if pool is not None and j >= 256:
            half = pool.submit(_K.crcs, f.buf, j // 2, j, *crc_args)
            _K.crcs(f.buf, 0, j // 2, *crc_args)
            half.result()
        else:
            _K.crcs(f.buf, 0, j, *crc_args)
        keep = flag[key_rec[:nk]] == 0   # a row that breaks a rule: Python hashes its keys
        first = b.n + len(b.py_rows)
        b.add_chunk(cols, j, key_rec[:nk][keep], key_hash[:nk][keep])
        bad = np.flatnonzero(flag[:j])
        if rules.tails_rule:
            rules.good_tails(f, j - len(bad))
        for i in bad.tolist():  # the rows that break a rule: Python says how
            o = int(cols["off"][i])
            m = read_record_at(f.buf, o - base, f.wrote_position, o, opts).message
            rules.message(o, m, f)
            b.extra_keys(first + i, key_hashes(m))
        offset = base + pos
        yield Progress(offset - cl.min_offset, total, "commitlog", "bytes")
        if why == _K.AT_RECORD:
            r = read_record_at(f.buf, pos, f.wrote_position, offset, opts)
            _one(cl, b, rules, offset, r)
            if r.status is RecordStatus.MESSAGE or (r.status is RecordStatus.SIZE_MISMATCH and r.size > 0):
                offset += r.size
            else:
                offset = f.end_offset
