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
is handed to `use_crc`, else the slice-by-8 table CRC of _page_record.pxi."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memcmp, memcpy

from engine.format.layout cimport (BLANK_MAGIC, BORNHOST_V6_FLAG, HEAD_SIZE, MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2,
                                   OFF_BODY, OFF_BODYCRC, OFF_BODYLENGTH, OFF_BORNHOST, OFF_BORNTIMESTAMP, OFF_FLAG,
                                   OFF_MAGICCODE, OFF_PHYSICALOFFSET, OFF_PREPAREDTXOFFSET, OFF_QUEUEID,
                                   OFF_QUEUEOFFSET, OFF_RECONSUMETIMES, OFF_STORETIMESTAMP, OFF_SYSFLAG, HOST_V4,
                                   HOST_V6, PROP_CRC_TAIL_SIZE, RECORD_FIXED, STOREHOST_V6_FLAG)

include "_record_decls.pxi"   # the declarations _page_record.pxi needs, shared with _page.pyx
include "_page_record.pxi"

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

# why walk stopped
DONE = 0             # reached `stop`
AT_RECORD = 1        # the record at pos is not a plain MESSAGE: Python reads it
FULL = 2             # the columns (or key columns) are full

cdef enum:
    E_BAD_CRC = 8
    E_BAD_TAIL = 16
    MAX_KEYS = 32    # key hashes of one record written by C; more: Python

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
    if memcmp(t, CRC_TAIL, 9) != 0 or t[19] != 2:
        return 0
    for i in range(18, 8, -1):
        if t[i] < 48 or t[i] > 57:
            return 0
        value = value * 10 + (t[i] - 48)
    return (crc_of(b + pos, total - PROP_CRC_TAIL_SIZE) & 0x7FFFFFFF) == value


cdef inline int64_t key_hash(uint32_t h) noexcept nogil:
    """IndexFile.indexKeyHashMethod: abs(hashCode), Integer.MIN_VALUE -> 0."""
    cdef int32_t s = <int32_t>h
    if s == <int32_t>0x80000000:
        return 0
    return -s if s < 0 else s


cdef int keys_of(const uint8_t* b, Row* r, int64_t* out, int* n) noexcept nogil:
    """The index hashes of the record's keys in check's order (UNIQ_KEY, then each non-empty
    KEYS token); 0 when Python must do it (non-ASCII topic or key, too many keys)."""
    cdef Py_ssize_t p = r.propertiesPos, stop = r.propertiesPos + r.propertiesLength, q, seg
    cdef Py_ssize_t u0 = -1, u1 = -1, k0 = -1, k1 = -1, i, j
    cdef uint32_t ht = 0, h
    cdef int tl = r.topicLength, ascii_topic = 1
    n[0] = 0
    if r.propertiesLength <= 0:
        return 1
    q = p
    while q <= stop:  # parse_properties: later duplicates win; empty names or values are dropped
        seg = q
        q = find_sep(b, q, stop)
        if q - seg >= 10 and b[seg + 8] == 1 and memcmp(b + seg, b"UNIQ_KEY", 8) == 0:
            u0, u1 = seg + 9, q
        elif q - seg >= 6 and b[seg + 4] == 1 and memcmp(b + seg, b"KEYS", 4) == 0:
            k0, k1 = seg + 5, q
        q += 1
    if u0 < 0 and k0 < 0:
        return 1
    for i in range(r.topicPos, r.topicPos + tl):
        if b[i] >= 0x80:
            return 0
        ht = ht * 31 + b[i]
    ht = ht * 31 + 35  # '#'
    if u0 >= 0:
        h = ht
        for i in range(u0, u1):
            if b[i] >= 0x80:
                return 0
            h = h * 31 + b[i]
        out[0] = key_hash(h)
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
            h = ht
            while i < k1 and b[i] != 32:
                if b[i] >= 0x80:
                    return 0
                h = h * 31 + b[i]
                i += 1
            out[n[0]] = key_hash(h)
            n[0] += 1
    return 1


cdef class Topics:
    """Topic names (decoded as check_record decodes them) and their ids, in first-seen order."""
    cdef public dict ids       # bytes -> id
    cdef public dict by_name   # str -> id
    cdef public list names     # id -> str

    def __init__(self):
        self.ids, self.by_name, self.names = {}, {}, []

    cpdef int id_of(self, bytes raw):
        cdef object i = self.ids.get(raw)
        if i is not None:
            return i
        name = str(raw, "utf-8", "replace")
        i = self.by_name.get(name)
        if i is None:
            i = len(self.names)
            self.names.append(name)
            self.by_name[name] = i
        self.ids[raw] = i
        return i


def walk(buf, Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t limit, int64_t file_from, int options,
         Topics topics, int64_t[::1] off, int32_t[::1] topic, int32_t[::1] qid, int64_t[::1] qoff,
         int32_t[::1] size, int8_t[::1] tran, int64_t[::1] tags, int64_t[::1] ts, uint8_t[::1] flag,
         Py_ssize_t j, int32_t[::1] key_rec, int64_t[::1] key_hash_out, Py_ssize_t nk,
         int64_t[::1] body_pos, int32_t[::1] body_len, int32_t[::1] body_crc):
    """Records of one commitlog file (`buf`, written up to `limit`, starting at commitlog offset
    `file_from`) from `pos` while pos < stop; rows from j, key rows from nk. The CRCs are left
    to `crcs` (the body's position, length and stored CRC of each row go to body_*): the part
    that costs most, and it can run on another core.
    Returns (pos, j, nk, why): why is DONE / AT_RECORD / FULL."""
    cdef Py_buffer v
    cdef const uint8_t* b
    cdef Py_ssize_t L, cap = off.shape[0], kcap = key_rec.shape[0], last_tp = -1
    cdef int32_t rsize, last_tl = -1, last_id = -1, tid
    cdef Row r
    cdef int st, why = DONE, nkeys, i, fl
    cdef int flags = options & F_V2
    cdef int64_t o
    cdef int64_t kbuf[MAX_KEYS]
    PyObject_GetBuffer(buf, &v, PyBUF_SIMPLE)
    try:
        b = <const uint8_t*>v.buf
        L = v.len
        if limit > L:
            limit = L
        while pos < stop:
            if j >= cap or nk + MAX_KEYS > kcap:
                why = FULL
                break
            st = check(b, L, pos, limit, flags, &r, &rsize)
            if st != S_MESSAGE:
                why = AT_RECORD
                break
            o = file_from + pos
            if r.topicLength == last_tl and memcmp(b + r.topicPos, b + last_tp, last_tl) == 0:
                tid = last_id
            else:
                tid = topics.id_of(PyBytes_FromStringAndSize(<const char*>b + r.topicPos, r.topicLength))
                last_tp, last_tl, last_id = r.topicPos, r.topicLength, tid
            if True:  # (holding the GIL: a chunk of rows is a few ms)
                fl = 0
                if r.physicalOffsetField != o:
                    fl |= BAD_PHYS
                if r.sysFlag & 0x700 and not r.sysFlag & 0x1:
                    fl |= BAD_COMPRESSION
                if r.sysFlag & 0xC0:
                    fl |= INNER_BATCH
                body_pos[j] = r.bodyPos
                body_len[j] = r.bodyLength
                body_crc[j] = r.bodyCRC
                nkeys = 0
                if not fl and not keys_of(b, &r, kbuf, &nkeys):
                    fl |= PY_KEYS
                off[j] = o
                topic[j] = tid
                qid[j] = r.queueId
                qoff[j] = r.queueOffset
                size[j] = rsize
                tran[j] = <int8_t>(r.sysFlag & 0x0C)
                tags[j] = r.tagsCode
                ts[j] = r.storeTimestamp
                flag[j] = <uint8_t>fl
                if not fl:
                    for i in range(nkeys):
                        key_rec[nk] = <int32_t>j
                        key_hash_out[nk] = kbuf[i]
                        nk += 1
                j += 1
                pos += rsize
    finally:
        PyBuffer_Release(&v)
    return pos, j, nk, why


def crcs(buf, Py_ssize_t lo, Py_ssize_t hi, int64_t file_from, int options, const int64_t[::1] off,
         const int32_t[::1] size, const int64_t[::1] body_pos, const int32_t[::1] body_len,
         const int32_t[::1] body_crc, uint8_t[::1] flag):
    """Rows lo..hi-1 of a walk over `buf`: BAD_CRC where the body CRC is not the stored one (an
    empty body's is 0), BAD_TAIL (with CHECK_TAILS) where no valid __CRC32# tail ends the record.
    Runs without the GIL: two threads can take a chunk's halves."""
    cdef Py_buffer v
    cdef const uint8_t* b
    cdef Py_ssize_t i, pos
    cdef uint8_t fl
    cdef int tails = options & 8  # CHECK_TAILS
    PyObject_GetBuffer(buf, &v, PyBUF_SIMPLE)
    try:
        b = <const uint8_t*>v.buf
        with nogil:
            for i in range(lo, hi):
                fl = 0
                if body_len[i] > 0:
                    if <int32_t>(crc_of(b + body_pos[i], body_len[i]) & 0x7FFFFFFF) != body_crc[i]:
                        fl = E_BAD_CRC
                elif body_crc[i] != 0:
                    fl = E_BAD_CRC
                if tails:
                    pos = <Py_ssize_t>(off[i] - file_from)
                    if not tail_ok(b, pos, size[i]):
                        fl |= E_BAD_TAIL
                flag[i] |= fl
    finally:
        PyBuffer_Release(&v)


# ---- index entries against the records ---------------------------------------------------------
# bits of index_entries' `bad`
NO_RECORD = 1        # no record starts at the entry's offset (inside the log)
BAD_TIME = 2         # timeDiff is not its record's (entries after the first)
BAD_HASH = 4         # the hash is none of its record's keys' (or the record is a ROLLBACK)
cdef enum:
    E_NO_RECORD = 1
    E_BAD_TIME = 2
    E_BAD_HASH = 4


cdef inline Py_ssize_t find_row(const int64_t* off, Py_ssize_t n, int64_t phy, Py_ssize_t hint) noexcept nogil:
    """The row whose offset is phy, or -1; index entries come in commitlog order, so the row
    after the last one found is tried first."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    if 0 <= hint < n and off[hint] == phy:
        return hint
    if 0 <= hint + 1 < n and off[hint + 1] == phy:
        return hint + 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if off[mid] < phy:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < n and off[lo] == phy else -1


def index_entries(const uint8_t[::1] ent, const int64_t[::1] off, const int64_t[::1] ts, const int8_t[::1] tran,
                  const int64_t[::1] key_start, const int64_t[::1] key_hash, uint8_t[::1] key_found,
                  int64_t begin, int64_t cl_min, int64_t cl_max, int64_t[::1] rows, uint8_t[::1] bad):
    """Entries 1..n of one index file (`ent`: their 20-byte records) against the commitlog's
    rows: rows[i] the row entry i+1 names (-1: none), bad[i] its NO_RECORD / BAD_TIME / BAD_HASH
    bits; key_found[k] set for each key whose (hash, offset) has an entry. Returns the number
    of entries with a bad bit."""
    cdef Py_ssize_t n = ent.shape[0] // 20, nr = off.shape[0], i, r = -1, k
    cdef const uint8_t* p
    cdef int64_t phy, h, d, want
    cdef int32_t td
    cdef int b, hit, nbad = 0
    with nogil:
        for i in range(n):
            p = &ent[20 * i]
            h = be32(p)
            phy = be64(p + 4)
            td = be32(p + 12)
            r = find_row(&off[0], nr, phy, r) if nr else -1
            rows[i] = r
            b = 0
            if r < 0:
                if cl_min <= phy < cl_max:
                    b = E_NO_RECORD
                r = rows[i - 1] if i else -1
                bad[i] = b
                nbad += b != 0
                continue
            if i > 0:  # entry 1 is relative to the inherited begin
                want = 0
                if begin > 0:
                    d = ts[r] - begin
                    want = d / 1000  # C truncates toward zero, as Java does
                    if want < 0:
                        want = 0
                    elif want > 0x7FFFFFFF:
                        want = 0x7FFFFFFF
                if td != want:
                    b |= E_BAD_TIME
            hit = 0
            for k in range(key_start[r], key_start[r + 1]):
                if key_hash[k] == h:
                    key_found[k] = 1
                    hit = 1
            if not hit or tran[r] == 0x0C:
                b |= E_BAD_HASH
            bad[i] = b
            nbad += b != 0
    return nbad


# ---- one index file's chains ----------------------------------------------------------------------
cdef inline void note(int64_t[::1] out, Py_ssize_t* n, int64_t v) noexcept nogil:
    if n[0] < out.shape[0]:
        out[n[0]] = v
        n[0] += 1


def chains(const uint8_t[::1] ent, const uint8_t[::1] slots, int64_t count, int64_t slot_num, int64_t[:, ::1] out):
    """check_index._chains' findings for one index file, in one pass over the entries (`ent`:
    entries 1..n, 20 bytes each) and one over the slots: row k of `out` gets the first
    out.shape[1] indexes of finding k (0 links to no older entry, 1 slots beyond the entries,
    2 negative hashes, 3 links into another slot's chain, 4 links to a newer entry, 5
    unreachable entries, 6 slots naming an entry of another slot). Returns the count per row,
    or None when a slot names an entry past the entries read (the numpy twin decides)."""
    cdef Py_ssize_t n = ent.shape[0] // 20, s = slots.shape[0] // 4, i, j, k
    cdef Py_ssize_t c[7]
    cdef int64_t lim = count if count > 1 else 1, p, v, h, so_i, so_p
    cdef bytearray reached_b = bytearray(n + 1)
    cdef uint8_t* reached = <uint8_t*>(<char*>reached_b)
    for k in range(7):
        c[k] = 0
    if slot_num <= 0:
        return None
    with nogil:
        for j in range(s):
            v = be32(&slots[4 * j])
            if v != 0 and (v < 0 or v >= lim):
                note(out[1], &c[1], j)
            elif v > 0:
                if v > n:
                    break
                reached[v] = 1
        else:
            j = -1
    if j >= 0:
        return None
    with nogil:
        for i in range(n):
            h = be32(&ent[20 * i])
            p = be32(&ent[20 * i + 16])
            if p < 0 or p >= i + 1:
                note(out[0], &c[0], i)
                continue
            if p > 0:
                reached[p] = 1
                so_i = h % slot_num
                if so_i < 0:
                    so_i += slot_num
                so_p = (<int64_t>be32(&ent[20 * (p - 1)])) % slot_num
                if so_p < 0:
                    so_p += slot_num
                if so_p != so_i:
                    note(out[3], &c[3], i)
                if p > 1 and be32(&ent[20 * (p - 1) + 12]) > be32(&ent[20 * i + 12]):
                    note(out[4], &c[4], i)
        for i in range(n):
            if be32(&ent[20 * i]) < 0:
                note(out[2], &c[2], i)
            if not reached[i + 1]:
                note(out[5], &c[5], i)
        for j in range(s):
            v = be32(&slots[4 * j])
            if 0 < v < lim:
                h = (<int64_t>be32(&ent[20 * (v - 1)])) % slot_num
                if h < 0:
                    h += slot_num
                if h != j:
                    note(out[6], &c[6], j)
    return [c[k] for k in range(7)]


# ---- one run of ConsumeQueue units against the records ----------------------------------------------
cdef inline Py_ssize_t gallop(const int64_t* off, Py_ssize_t n, int64_t phy, Py_ssize_t* hint) noexcept nogil:
    """The row whose offset is phy, or -1. A queue's units point at ascending offsets, so the
    search runs forward from the last answer in growing steps (other queues' rows lie between)."""
    cdef Py_ssize_t lo = 0, hi = n, step = 1, h = hint[0], mid
    if 0 <= h < n and off[h] <= phy:
        lo = h
        while lo + step < n and off[lo + step] <= phy:
            lo += step
            step <<= 1
        hi = lo + step + 1 if lo + step + 1 < n else n
    while lo < hi:
        mid = (lo + hi) >> 1
        if off[mid] < phy:
            lo = mid + 1
        else:
            hi = mid
    hint[0] = lo
    return lo if lo < n and off[lo] == phy else -1


def cq_units(const uint8_t[::1] units, int64_t first, int32_t tid, int32_t qid, bint lmq, const int64_t[::1] off,
             const int32_t[::1] topic, const int32_t[::1] rqid, const int64_t[::1] qoff, const int32_t[::1] size,
             const int8_t[::1] tran, const int64_t[::1] tags, int64_t cl_min, int64_t cl_max, int8_t[::1] code,
             int64_t[::1] rows, uint8_t[::1] found, uint8_t[::1] ok):
    """check's rules for units first.. of queue (tid, qid) (`units`: their 20-byte records):
    code[i] as engine.analysis.check's _unit_codes (0 fine, 1 past the log, 2 no record there,
    3 LMQ unit against its record, 4 another record, 5 an undispatched transaction record,
    6 tagsCode), rows[i] the row it names (-1 none), found[i] a non-LMQ unit that reached a
    record; ok[row] set for a record a unit of its own queue offset reached. Returns the number
    of units with a code."""
    cdef Py_ssize_t n = units.shape[0] // 20, nr = off.shape[0], i, hint = 0, r
    cdef const uint8_t* u
    cdef int64_t phy, utags, q
    cdef int32_t usize
    cdef int8_t c
    cdef int8_t t
    cdef Py_ssize_t nbad = 0
    with nogil:
        for i in range(n):
            u = &units[20 * i]
            phy = be64(u)
            usize = be32(u + 8)
            utags = be64(u + 12)
            q = first + i
            found[i] = 0
            c = 0
            if phy == 0 and usize == 0x7FFFFFFF:   # a filler
                rows[i] = -1
                code[i] = 0
                continue
            r = gallop(&off[0], nr, phy, &hint) if nr else -1
            rows[i] = r
            if r < 0:
                if phy >= cl_max:
                    c = 1
                elif phy >= cl_min:
                    c = 2
            elif lmq:
                if size[r] != usize or tags[r] != utags:
                    c = 3
            else:
                found[i] = 1
                t = tran[r]
                if topic[r] != tid or rqid[r] != qid or qoff[r] != q or size[r] != usize:
                    c = 4
                else:
                    ok[r] = 1
                    if t != 0 and t != 8:
                        c = 5
                    elif tags[r] != utags:
                        c = 6
            code[i] = c
            nbad += c != 0
    return nbad
