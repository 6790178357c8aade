"""Recovery's record walk, vectorised where the records are ordinary.

`CommitLog.scan` classifies every record from its start file on with `check_record` (CRC
included) until the first one that is not a message. Building a Message per record costs
microseconds; most records of a store need no more than this:

1. hop: follow TOTALSIZE from record to record reading 8 bytes each (the one sequential step;
   engine.format.record.hop, the walker the bulk scans use too), stopping where check_record
   would refuse the header (blank, size <= 0, past the readable data, unknown magic);
2. gather the length fields of all those records at once with numpy and keep the records
   whose fields add up to TOTALSIZE exactly (and that are not SCHEDULE_TOPIC_XXXX records,
   whose DELAY property check_record parses);
3. check the body CRC of each, one zlib(-ng) call per record, when the options ask for it.

`run_of_messages` answers how many records from `pos` on check_record would classify as
messages for certain; the caller classifies the first record after that run with check_record
itself, so every verdict that ends a scan and every reason it gives are check_record's own."""
from __future__ import annotations

import mmap

import numpy as np

from engine.format.crc import crc32
from engine.format.message import SCHEDULE_TOPIC, DecodeOptions
from engine.format.record import (BORNHOST_V6_FLAG, HOST_V4, HOST_V6, MESSAGE_MAGIC_V2, OFF_BODY, OFF_BODYCRC,
                                  OFF_BODYLENGTH, OFF_MAGICCODE, OFF_SYSFLAG, STOREHOST_V6_FLAG, hop, record_sizes)

_AR = {19: np.arange(19, dtype=np.int64)}
_SCHEDULE = np.frombuffer(SCHEDULE_TOPIC.encode(), dtype=np.uint8)
FIRST_RUN = 64            # records hopped by a first try; doubled after each clean run
MAX_RECORDS = 1 << 17
MAX_BYTES = 64 << 20
SLOW_AFTER_MISS = 32      # records left to check_record after a run that ended early


def supports(opts: DecodeOptions) -> bool:
    """The whole-record CRC (forceVerifyPropCRC) is checked by check_record alone."""
    return not (opts.check_crc and opts.force_verify_prop_crc)


class _Fields:
    """Big-endian i32 / i16 reads at arbitrary positions, vectorised: one zero-copy view of the
    buffer per alignment, each position read from the view it is aligned in (a fraction of the
    cost of gathering single bytes). Positions past the end read the last value; callers only
    trust values read inside their record."""

    def __init__(self, buf):
        n = len(buf)
        self.i4 = [np.frombuffer(buf, dtype=">i4", offset=a, count=(n - a) // 4) for a in range(4)]
        self.i2 = [np.frombuffer(buf, dtype=">i2", offset=a, count=(n - a) // 2) for a in range(2)]

    def _read(self, views, pos: np.ndarray) -> np.ndarray:
        w = len(views)
        out = np.empty(len(pos), dtype=np.int64)
        r = pos % w
        for a, v in enumerate(views):
            m = np.flatnonzero(r == a)
            out[m] = v[np.minimum((pos[m] - a) // w, len(v) - 1)]
        return out

    def i32(self, pos: np.ndarray) -> np.ndarray:
        return self._read(self.i4, pos)

    def i16(self, pos: np.ndarray) -> np.ndarray:
        return self._read(self.i2, pos)

    def release(self) -> None:
        self.i4 = self.i2 = None


def run_of_messages(buf, pos: int, limit: int, opts: DecodeOptions,
                    max_records: int = MAX_RECORDS) -> tuple[int, int, int, bool]:
    """(n, last_start, next_pos, clean): the n records from `pos` check_record classifies
    MESSAGE for certain, the start of the last of them, where the record after them starts,
    and whether every record hopped over was one of them."""
    s = hop(buf, pos, limit, limit, max_records, MAX_BYTES, opts.accept_v2).starts
    if not len(s):
        return 0, -1, pos, False
    fields = _Fields(buf)
    try:
        total = fields.i32(s)
        tls = np.where(fields.i32(s + OFF_MAGICCODE) == MESSAGE_MAGIC_V2, 2, 1)
        sysflag = fields.i32(s + OFF_SYSFLAG)
        hosts = (np.where(sysflag & BORNHOST_V6_FLAG, HOST_V6, HOST_V4)
                 + np.where(sysflag & STOREHOST_V6_FLAG, HOST_V6, HOST_V4))
        body_pos = s + OFF_BODY + hosts
        body_len = fields.i32(s + OFF_BODYLENGTH + hosts)
        topic_pos = body_pos + np.maximum(body_len, 0)
        t2 = fields.i16(topic_pos)   # V2: i16
        t1 = t2 >> 8                 # V1: i8, the first of those two bytes
        topic_len = np.where(tls == 1, t1, t2)
        props_pos = topic_pos + tls + np.maximum(topic_len, 0)
        prop_len = fields.i16(props_pos)
        good = ((total >= OFF_BODY + hosts) & (body_len >= 0) & (topic_len >= 0) & (prop_len >= 0)
                & (record_sizes(hosts, 0, body_len, tls, topic_len, prop_len) == total))
        sched = np.flatnonzero(good & (topic_len == len(_SCHEDULE)))
        if sched.size:  # check_record parses their DELAY: leave them to it
            u8 = np.frombuffer(buf, dtype=np.uint8)
            names = u8[(topic_pos[sched] + tls[sched])[:, None] + _AR[len(_SCHEDULE)]]
            del u8
            good[sched[(names == _SCHEDULE).all(axis=1)]] = False
        bad = np.flatnonzero(~good)
        n = int(bad[0]) if bad.size else len(s)
        if n and opts.check_crc:  # bodies of length 0 carry no CRC check
            crc = fields.i32(s[:n] + OFF_BODYCRC)
            mv = memoryview(buf)
            spans = map(slice, body_pos[:n].tolist(), (body_pos[:n] + body_len[:n]).tolist())
            got = np.fromiter(map(crc32, map(mv.__getitem__, spans)), dtype=np.int64, count=n)
            mv.release()
            wrong = np.flatnonzero(((got & 0x7FFFFFFF) != crc) & (body_len[:n] > 0))
            if wrong.size:
                n = int(wrong[0])
    finally:
        fields.release()
    if n == 0:
        return 0, -1, pos, False
    nxt = int(s[n]) if n < len(s) else int(s[-1]) + int(total[-1])
    return n, int(s[n - 1]), nxt, n == len(s)


def drop_pages(buf, start: int, end: int) -> None:
    """Unmap the whole pages of [start, end) from this process (MADV_DONTNEED on a shared file
    mapping: the page cache keeps them and a later read maps them again). A recovery scan reads
    up to three commitlog files once; without this they would stay in the process's resident
    set for as long as the store is open."""
    mm = getattr(buf, "obj", buf)
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is None or not hasattr(mm, "madvise"):
        return
    a = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
    b = end - end % mmap.PAGESIZE
    if b > a:
        mm.madvise(advice, a, b - a)
