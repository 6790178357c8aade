# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""`check`'s commitlog walk in C (engine/analysis/check_records.py keeps the pure-Python walk,
which stays the reference; tests compare the two).

`walk` follows TOTALSIZE from record to record inside one commitlog file, classifies each
record exactly as check_record does (the shared `check` of _page_record.pxi), and writes one
row of columns per MESSAGE: offset, topic id, queue id, queue offset, size, transaction type,
tagsCode, store time -- plus the index hashes of its keys (UNIQ_KEY, each KEYS token, hashed
as IndexFile.indexKeyHashMethod hashes `topic#key`). It applies the per-record rules of check
in C: stored PHYSICALOFFSET, compression bits, inner-batch bits, body CRC and, when asked,
the whole-record `__CRC32#` tail. A record that breaks one of them, or whose keys are not
ASCII, gets a bit in `flag` and no key hashes: the Python side re-reads it and says what is
wrong in its own words. Anything that is not a plain MESSAGE (a blank, damage, the delay rule,
non-ASCII tags) stops the walk and is left to Python.

The body CRC is zlib-ng's (its folded PCLMUL CRC, ~10x the table CRC here) when its address
is handed to `use_crc`, else the slice-by-8 table CRC of _page_record.pxi. The kernels of the
later phases (index entries, chains, ConsumeQueue units, keys) are in _check_phases.pxi."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, realloc
from libc.string cimport memchr, memcmp, memcpy

from engine.format.layout cimport (BLANK_MAGIC, BORNHOST_V6_FLAG, HEAD_SIZE, MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2,
                                   OFF_BODY, OFF_BODYCRC, OFF_BODYLENGTH, OFF_BORNHOST, OFF_BORNTIMESTAMP, OFF_FLAG,
                                   OFF_MAGICCODE, OFF_PHYSICALOFFSET, OFF_PREPAREDTXOFFSET, OFF_QUEUEID,
                                   OFF_QUEUEOFFSET, OFF_RECONSUMETIMES, OFF_STORETIMESTAMP, OFF_SYSFLAG, HOST_V4,
                                   HOST_V6, NO_SLOT, PROP_CRC_TAIL_SIZE, RECORD_FIXED, STOREHOST_V6_FLAG)

from engine.accel._bytes cimport be16, be32, be64
from engine.accel._javahash cimport index_key_hash, jhash_bytes_or
from engine.accel._record cimport (F_CRC, F_FORCE, F_V2, S_EOF, S_INVALID, S_MESSAGE, S_MISMATCH, S_PY, KeySpans, Row,
                                   check, check_keys, crc32, crc_tail_at, verify_prop_crc)
from engine.accel._seek cimport find_sep, rmq_prefetch
from engine.accel._record import (CHECK_CRC, END_OF_FILE, FORCE_PROP_CRC, INVALID, MESSAGE,  # noqa: F401 (for Python)
                                  NEEDS_PY, SIZE_MISMATCH, classify, crc32_of)

# ---- the walk -------------------------------------------------------------------------------
# walk's options
ACCEPT_V2 = 4        # = F_V2: V2 records (their topic length is 2 bytes)
CHECK_TAILS = 8      # check the whole-record __CRC32# tail (5.x generations)

# flag bits of a row: the rules it breaks (or why Python must read it)
BAD_PHYS = 1         # stored PHYSICALOFFSET is not the record's offset
BAD_COMPRESSION = 2  # SYSFLAG names a compression type, the body is not compressed
INNER_BATCH = 4      # SYSFLAG marks an inner batch: Python looks for INNER_NUM
BAD_CRC = 8          # body CRC
BAD_TAIL = 16        # no valid __CRC32# tail
PY_KEYS = 32         # keys (or topic) not ASCII, or too many: Python hashes them
COMPRESSED = 64      # SYSFLAG says the body is compressed: Python decompresses it

# why walk stopped
DONE = 0             # reached `stop`
AT_RECORD = 1        # the record at pos is not a plain MESSAGE: Python reads it
FULL = 2             # the columns (or key columns) are full

cdef enum:
    E_BAD_PHYS = 1
    E_BAD_COMPRESSION = 2
    E_INNER_BATCH = 4
    E_BAD_CRC = 8
    E_BAD_TAIL = 16
    E_PY_KEYS = 32
    E_COMPRESSED = 64
    CHECK_TAILS_F = 8
    W_DONE = 0
    W_AT_RECORD = 1
    W_FULL = 2
    NEW_TOPIC = 3    # (walk_core only: walk adds the topic and goes on)
    AHEAD_SLOTS = 64 # chains: slots ahead whose entry is prefetched (most slots are empty)
    AHEAD = 16       # chains: entries ahead whose linked entry is prefetched
    MAX_KEYS = 32    # key hashes of one record written by C; more: Python

cdef Py_ssize_t PREFETCH = 8192   # bytes ahead the walk asks the cache for


def set_prefetch(Py_ssize_t n):
    global PREFETCH
    PREFETCH = n


ctypedef uint32_t (*crc_fn)(uint32_t, const uint8_t*, uint32_t) noexcept nogil
cdef crc_fn FAST_CRC = NULL


def use_crc(uintptr_t address):
    """Use the CRC-32 function at `address` (zlib's signature: crc32(crc, buf, len)); 0: the
    table CRC. Returns whether a fast CRC is in use."""
    global FAST_CRC
    FAST_CRC = <crc_fn>address if address else NULL
    return FAST_CRC != NULL


cdef inline uint32_t crc_of(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    if FAST_CRC != NULL and n < 0x7FFFFFFF:
        return FAST_CRC(0, p, <uint32_t>n)
    return crc32(p, n)


def crc32_fast(data) -> int:
    """CRC-32 of a bytes-like object as walk computes it (for the tests)."""
    cdef Py_buffer v
    PyObject_GetBuffer(data, &v, PyBUF_SIMPLE)
    try:
        return crc_of(<const uint8_t*>v.buf, v.len)
    finally:
        PyBuffer_Release(&v)


cdef inline int tail_ok(const uint8_t* b, Py_ssize_t pos, int32_t total) noexcept nogil:
    """engine.format.message.verify_prop_crc, with the fast CRC."""
    cdef const uint8_t* t
    cdef int64_t value = 0
    cdef int i
    if total < PROP_CRC_TAIL_SIZE:
        return 0
    t = b + pos + total - PROP_CRC_TAIL_SIZE
    if not crc_tail_at(t) or t[19] != 2:
        return 0
    for i in range(18, 8, -1):
        if t[i] < 48 or t[i] > 57:
            return 0
        value = value * 10 + (t[i] - 48)
    return (crc_of(b + pos, total - PROP_CRC_TAIL_SIZE) & 0x7FFFFFFF) == value


def java_hash_bytes(const uint8_t[::1] b):
    """(String.hashCode of b's bytes as one-byte units, whether one was not ASCII): the path
    check's key and topic hashes take, for tests to hold to engine.format.javahash."""
    cdef uint32_t ored = 0
    cdef uint32_t h = jhash_bytes_or(0, &b[0], b.shape[0], &ored) if b.shape[0] else 0
    return <int32_t>h, bool(ored & 0x80)


cdef int keys_of(const uint8_t* b, KeySpans* ks, uint32_t ht, int ascii_topic, int64_t* out, int* n) noexcept nogil:
    """The index hashes of the record's keys in check's order (UNIQ_KEY, then each non-empty
    KEYS token; `ks`: where check_keys found them); `ht` is the hash of `topic#`. 0 when Python
    must do it (non-ASCII topic or key, too many keys)."""
    cdef Py_ssize_t u0 = ks.u0, u1 = ks.u1, k0 = ks.k0, k1 = ks.k1, i, te
    cdef const uint8_t* e
    cdef uint32_t h, ored = 0    # every key byte OR-ed: bit 7 set when one is not ASCII
    n[0] = 0
    if u0 < 0 and k0 < 0:
        return 1
    if not ascii_topic:
        return 0
    if u0 >= 0:
        h = jhash_bytes_or(ht, b + u0, u1 - u0, &ored)
        if ored & 0x80:
            return 0
        out[0] = index_key_hash(h)
        n[0] = 1
    if k0 >= 0:
        i = k0
        while i < k1:
            while i < k1 and b[i] == 32:
                i += 1
            if i >= k1:
                break
            if n[0] >= MAX_KEYS:
                return 0
            e = <const uint8_t*>memchr(b + i, 32, k1 - i)
            te = k1 if e == NULL else e - b
            h = jhash_bytes_or(ht, b + i, te - i, &ored)
            if ored & 0x80:
                return 0
            out[n[0]] = index_key_hash(h)
            n[0] += 1
            i = te
    return 1


cdef struct TopicTable:
    const uint8_t** ptr      # entry k: the topic's bytes (owned by Topics.raws), length, id
    int32_t* len
    int32_t* tid
    int32_t* slot            # open addressing: entry index + 1, 0 empty
    Py_ssize_t n, cap, mask


cdef inline uint32_t bytes_hash(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef uint32_t h = 2166136261u
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ p[i]) * 16777619u
    return h


cdef inline int32_t table_find(TopicTable* t, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t s
    cdef int32_t e
    if t.slot == NULL:
        return -1
    s = bytes_hash(p, n) & t.mask
    while True:
        e = t.slot[s]
        if e == 0:
            return -1
        e -= 1
        if t.len[e] == n and memcmp(t.ptr[e], p, n) == 0:
            return t.tid[e]
        s = (s + 1) & t.mask


cdef class Topics:
    """Topic names (decoded as check_record decodes them) and their ids, in first-seen order;
    the raw names also in a C table the walk looks them up in without the GIL."""
    cdef public dict ids       # bytes -> id
    cdef public dict by_name   # str -> id
    cdef public list names     # id -> str
    cdef list raws
    cdef TopicTable t

    def __cinit__(self):
        self.t.n = self.t.cap = 0
        self.t.mask = -1
        self.t.ptr = NULL
        self.t.len = self.t.tid = self.t.slot = NULL

    def __init__(self):
        self.ids, self.by_name, self.names, self.raws = {}, {}, [], []

    def __dealloc__(self):
        free(self.t.ptr)
        free(self.t.len)
        free(self.t.tid)
        free(self.t.slot)

    cdef void _grow(self) except *:
        cdef Py_ssize_t cap = 64 if self.t.cap == 0 else 2 * self.t.cap, k, s
        cdef TopicTable t = self.t
        t.ptr = <const uint8_t**>realloc(t.ptr, cap * sizeof(uint8_t*))
        t.len = <int32_t*>realloc(t.len, cap * sizeof(int32_t))
        t.tid = <int32_t*>realloc(t.tid, cap * sizeof(int32_t))
        if t.ptr == NULL or t.len == NULL or t.tid == NULL:
            raise MemoryError()
        free(t.slot)
        t.slot = <int32_t*>calloc(2 * cap, sizeof(int32_t))
        if t.slot == NULL:
            raise MemoryError()
        t.cap, t.mask = cap, 2 * cap - 1
        for k in range(t.n):
            s = bytes_hash(t.ptr[k], t.len[k]) & t.mask
            while t.slot[s]:
                s = (s + 1) & t.mask
            t.slot[s] = <int32_t>(k + 1)
        self.t = t

    cpdef int id_of(self, bytes raw):
        cdef object i = self.ids.get(raw)
        cdef Py_ssize_t s, k
        if i is not None:
            return i
        name = str(raw, "utf-8", "replace")
        i = self.by_name.get(name)
        if i is None:
            i = len(self.names)
            self.names.append(name)
            self.by_name[name] = i
        self.ids[raw] = i
        if self.t.n >= self.t.cap:
            self._grow()
        k = self.t.n
        self.raws.append(raw)
        self.t.ptr[k] = <const uint8_t*><const char*>raw
        self.t.len[k] = <int32_t>len(raw)
        self.t.tid[k] = <int32_t>i
        s = bytes_hash(self.t.ptr[k], len(raw)) & self.t.mask
        while self.t.slot[s]:
            s = (s + 1) & self.t.mask
        self.t.slot[s] = <int32_t>(k + 1)
        self.t.n = k + 1
        return i


cdef struct Cols:
    int64_t* off
    int32_t* topic
    int32_t* qid
    int64_t* qoff
    int32_t* size
    int8_t* tran
    int64_t* tags
    int64_t* ts
    uint8_t* flag
    int32_t* key_rec
    int32_t* key_hash
    Py_ssize_t cap, kcap


cdef int walk_core(const uint8_t* b, Py_ssize_t L, Py_ssize_t* pos_io, Py_ssize_t stop, Py_ssize_t limit,
                   int64_t file_from, int options, TopicTable* topics, Cols* c, Py_ssize_t* j_io,
                   Py_ssize_t* nk_io) noexcept nogil:
    """The walk's loop: one row per plain MESSAGE from *pos_io while it is < stop; the record
    check, the rules, the body CRC and the key hashes of each record read in one pass over it
    (the bytes come from memory once). Returns why it stopped (NEW_TOPIC: a topic not in the
    table: the caller adds it and calls again)."""
    cdef Py_ssize_t pos = pos_io[0], j = j_io[0], nk = nk_io[0], i, pf
    cdef const uint8_t* tp
    cdef const uint8_t* last_tp = NULL
    cdef int32_t rsize, last_tl = -1, tid = -1, last_id = -1
    cdef uint32_t ht = 0, last_ht = 0, ored
    cdef Row r
    cdef KeySpans ks
    cdef int st, why = W_DONE, nkeys, fl, ascii = 1, last_ascii = 1
    cdef int flags = options & F_V2, tails = options & CHECK_TAILS_F
    cdef int64_t o
    cdef int64_t kbuf[MAX_KEYS]
    while pos < stop:
        if j >= c.cap or nk + MAX_KEYS > c.kcap:
            why = W_FULL
            break
        st = check_keys(b, L, pos, limit, flags, &r, &rsize, &ks)
        if st != S_MESSAGE:
            why = W_AT_RECORD
            break
        # the bytes PREFETCH ahead, as many as this record has: the next records arrive while
        # this one is checked (a record at a time, the hardware's stream restarts at each)
        pf = pos + PREFETCH
        while pf < pos + PREFETCH + rsize and pf < limit:
            rmq_prefetch(b + pf)
            pf += 64
        tp = b + r.topicPos
        if r.topicLength == last_tl and memcmp(tp, last_tp, last_tl) == 0:
            tid, ht, ascii = last_id, last_ht, last_ascii
        else:
            tid = table_find(topics, tp, r.topicLength)
            if tid < 0:
                why = NEW_TOPIC
                break
            ored = 0
            ht = jhash_bytes_or(0, tp, r.topicLength, &ored) * 31u + 35u  # '#'
            ascii = not ored & 0x80
            last_tp, last_tl, last_id, last_ht, last_ascii = tp, r.topicLength, tid, ht, ascii
        o = file_from + pos
        fl = 0
        if r.physicalOffsetField != o:
            fl |= E_BAD_PHYS
        if r.sysFlag & 0x700 and not r.sysFlag & 0x1:
            fl |= E_BAD_COMPRESSION
        if r.sysFlag & 0x1:
            fl |= E_COMPRESSED
        if r.sysFlag & 0xC0:
            fl |= E_INNER_BATCH
        if r.bodyLength > 0:
            if <int32_t>(crc_of(b + r.bodyPos, r.bodyLength) & 0x7FFFFFFF) != r.bodyCRC:
                fl |= E_BAD_CRC
        elif r.bodyCRC != 0:
            fl |= E_BAD_CRC
        if tails and not tail_ok(b, pos, rsize):
            fl |= E_BAD_TAIL
        nkeys = 0
        if not fl and not keys_of(b, &ks, ht, ascii, kbuf, &nkeys):
            fl |= E_PY_KEYS
        c.off[j] = o
        c.topic[j] = tid
        c.qid[j] = r.queueId
        c.qoff[j] = r.queueOffset
        c.size[j] = rsize
        c.tran[j] = <int8_t>(r.sysFlag & 0x0C)
        c.tags[j] = r.tagsCode
        c.ts[j] = r.storeTimestamp
        c.flag[j] = <uint8_t>fl
        if not fl:
            for i in range(nkeys):
                c.key_rec[nk] = <int32_t>j
                c.key_hash[nk] = <int32_t>kbuf[i]
                nk += 1
        j += 1
        pos += rsize
    pos_io[0], j_io[0], nk_io[0] = pos, j, nk
    return why


def walk(buf, Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t limit, int64_t file_from, int options,
         Topics topics, int64_t[::1] off, int32_t[::1] topic, int32_t[::1] qid, int64_t[::1] qoff,
         int32_t[::1] size, int8_t[::1] tran, int64_t[::1] tags, int64_t[::1] ts, uint8_t[::1] flag,
         Py_ssize_t j, int32_t[::1] key_rec, int32_t[::1] key_hash_out, Py_ssize_t nk):
    """Records of one commitlog file (`buf`, written up to `limit`, starting at commitlog offset
    `file_from`) from `pos` while pos < stop; rows from j, key rows from nk. Without the GIL
    (two threads can walk two parts of the log), but for a topic seen for the first time.
    Returns (pos, j, nk, why): why is DONE / AT_RECORD / FULL."""
    cdef Py_buffer v
    cdef Cols c
    cdef int why
    cdef Py_ssize_t L
    if off.shape[0] == 0 or key_rec.shape[0] == 0:
        return pos, j, nk, FULL
    c.off, c.topic, c.qid, c.qoff, c.size = &off[0], &topic[0], &qid[0], &qoff[0], &size[0]
    c.tran, c.tags, c.ts, c.flag = &tran[0], &tags[0], &ts[0], &flag[0]
    c.key_rec, c.key_hash = &key_rec[0], &key_hash_out[0]
    c.cap = min(off.shape[0], topic.shape[0], qid.shape[0], qoff.shape[0], size.shape[0], tran.shape[0],
                tags.shape[0], ts.shape[0], flag.shape[0])
    c.kcap = min(key_rec.shape[0], key_hash_out.shape[0])
    PyObject_GetBuffer(buf, &v, PyBUF_SIMPLE)
    try:
        L = v.len
        if limit > L:
            limit = L
        while True:
            with nogil:
                why = walk_core(<const uint8_t*>v.buf, L, &pos, stop, limit, file_from, options, &topics.t, &c,
                                &j, &nk)
            if why != NEW_TOPIC:
                break
            raw = read_topic(<const uint8_t*>v.buf, L, pos, limit, options)
            topics.id_of(raw)
    finally:
        PyBuffer_Release(&v)
    return pos, j, nk, why


cdef bytes read_topic(const uint8_t* b, Py_ssize_t L, Py_ssize_t pos, Py_ssize_t limit, int options):
    cdef Row r
    cdef int32_t rsize
    check(b, L, pos, limit, options & F_V2, &r, &rsize)
    return PyBytes_FromStringAndSize(<const char*>b + r.topicPos, r.topicLength)


def boundary(buf, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t limit, int64_t file_from, int options):
    """The first position in [lo, hi) of `buf` where a plain MESSAGE starts that stores its own
    commitlog offset (PHYSICALOFFSET) and is followed by another such record (or by the end of
    what was written, or a blank): a place to start a second walker. -1 if none. A wrong guess
    costs time, never a different report: the first walker must arrive exactly there."""
    cdef Py_buffer v
    cdef const uint8_t* b
    cdef const uint8_t* hit
    cdef Py_ssize_t L, p, nxt, res = -1
    cdef Row r
    cdef int32_t rsize, rs2
    cdef int st, flags = options & F_V2
    PyObject_GetBuffer(buf, &v, PyBUF_SIMPLE)
    try:
        b = <const uint8_t*>v.buf
        L = v.len
        if limit > L:
            limit = L
        if hi > limit - 8:
            hi = limit - 8
        if lo < 0:
            lo = 0
        with nogil:
            p = lo
            while p < hi:
                hit = <const uint8_t*>memchr(b + p + 4, 0xDA, hi - p)  # MESSAGE_MAGIC_V1/V2 start with 0xDA
                if hit == NULL:
                    break
                p = hit - b - 4
                if p >= hi:
                    break
                if be32(b + p + 4) != MESSAGE_MAGIC_V1 and (be32(b + p + 4) != MESSAGE_MAGIC_V2 or not flags):
                    p += 1
                    continue
                st = check(b, L, p, limit, flags, &r, &rsize)
                if st == S_MESSAGE and r.physicalOffsetField == file_from + p:
                    nxt = p + rsize
                    if nxt >= limit:
                        res = p
                        break
                    st = check(b, L, nxt, limit, flags, &r, &rs2)
                    if st == S_EOF or (st == S_MESSAGE and r.physicalOffsetField == file_from + nxt):
                        res = p
                        break
                p += 1
    finally:
        PyBuffer_Release(&v)
    return res


include "_check_phases.pxi"
