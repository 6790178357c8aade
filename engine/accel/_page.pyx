# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""getMessage's page loop over one commitlog file, in C (engine/format/message.py: check_record and
the loop in MessageStore.get_message stay the reference).

`scan` reads CQ units straight from a CQ file's map, checks the record each points at exactly
as check_record classifies it (a MESSAGE whose TOTALSIZE is the unit's size, or not a message)
and writes the fixed fields of every message into one row of a preallocated bytearray (layout:
ROW_FORMAT, the numpy dtype engine.store.page.ROW_DTYPE). No Python object is built per message.
It stops -- leaving the unit to the Python loop -- at anything that needs Python: a filler
unit, a unit outside the file, a unit that is not a message, a record whose answer needs the
Python decoder (a SCHEDULE_TOPIC_XXXX record with a DELAY property, TAGS that are not ASCII),
the page limits, a full row buffer, the end of the units."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy
from operator import index

cdef int32_t MAGIC_V1 = -626843481
cdef int32_t MAGIC_V2 = -626843477
cdef int32_t BLANK_MAGIC = -875286124
cdef int32_t FILLER_SIZE = 0x7FFFFFFF
cdef const char* SCHEDULE = b"SCHEDULE_TOPIC_XXXX"
cdef const char* CRC_TAIL = b"__CRC32#\x01"

# record statuses (check_record's RecordStatus, plus NEEDS_PY: "ask check_record")
MESSAGE = 0
END_OF_FILE = 1
INVALID = 2
SIZE_MISMATCH = 3
NEEDS_PY = 4
cdef enum:
    S_MESSAGE = 0
    S_EOF = 1
    S_INVALID = 2
    S_MISMATCH = 3
    S_PY = 4

# option flags
CHECK_CRC = 1
FORCE_PROP_CRC = 2
ACCEPT_V2 = 4
cdef enum:
    F_CRC = 1
    F_FORCE = 2
    F_V2 = 4

# why scan stopped (the unit at the returned index is not consumed)
STOP_END = 0       # no more units
STOP_LIMIT = 1     # the page is full (count / bytes limits)
STOP_ROWS = 2      # the row buffer is full: grow it and call again
STOP_UNIT = 3      # a filler, or a unit outside [file start, write position): the Python loop decides
STOP_BAD = 4       # no valid record of that size there
STOP_PY = 5        # the row is written but check_record must confirm it (and give tagsCode)
STOP_ONE = 6       # `single` mode: one message taken


cdef packed struct Row:
    int64_t commitLogOffset
    int64_t queueOffset
    int64_t physicalOffsetField
    int64_t bornTimestamp
    int64_t storeTimestamp
    int64_t preparedTransactionOffset
    int64_t tagsCode
    int32_t storeSize
    int32_t magicCode
    int32_t bodyCRC
    int32_t queueId
    int32_t flag
    int32_t sysFlag
    int32_t reconsumeTimes
    int32_t bodyPos
    int32_t bodyLength
    int32_t topicPos
    int32_t topicLength
    int32_t propertiesPos
    int32_t propertiesLength
    int32_t file

ROW_SIZE = sizeof(Row)
ROW_FORMAT = "=7q14i"
API = 2  # what engine.store.page expects of this module (2: PageBase, get_message, bind_result)


# ---- bytes ---------------------------------------------------------------------------------
cdef inline int32_t be32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int16_t be16(const uint8_t* p) noexcept nogil:
    return <int16_t>((<uint32_t>p[0] << 8) | <uint32_t>p[1])


cdef inline int64_t be64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t><uint32_t>be32(p) << 32) | <uint64_t><uint32_t>be32(p + 4))


# ---- CRC-32 (zlib's), slice by 8 ----------------------------------------------------------------
cdef uint32_t CRC_T[8][256]


cdef void _crc_init() noexcept:
    cdef uint32_t c
    cdef int i, k
    for i in range(256):
        c = <uint32_t>i
        for k in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
        CRC_T[0][i] = c
    for i in range(256):
        c = CRC_T[0][i]
        for k in range(1, 8):
            c = CRC_T[0][c & 0xFF] ^ (c >> 8)
            CRC_T[k][i] = c


_crc_init()


cdef uint32_t crc32(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef uint32_t c = ~(<uint32_t>0)
    cdef uint32_t a, b
    while n >= 8:
        a = (<uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)) ^ c
        b = <uint32_t>p[4] | (<uint32_t>p[5] << 8) | (<uint32_t>p[6] << 16) | (<uint32_t>p[7] << 24)
        c = (CRC_T[7][a & 0xFF] ^ CRC_T[6][(a >> 8) & 0xFF] ^ CRC_T[5][(a >> 16) & 0xFF] ^ CRC_T[4][a >> 24]
             ^ CRC_T[3][b & 0xFF] ^ CRC_T[2][(b >> 8) & 0xFF] ^ CRC_T[1][(b >> 16) & 0xFF] ^ CRC_T[0][b >> 24])
        p += 8
        n -= 8
    while n > 0:
        c = CRC_T[0][(c ^ p[0]) & 0xFF] ^ (c >> 8)
        p += 1
        n -= 1
    return ~c


def crc32_of(data) -> int:
    """zlib.crc32 of a bytes-like object (for the tests)."""
    cdef Py_buffer v
    PyObject_GetBuffer(data, &v, PyBUF_SIMPLE)
    try:
        return crc32(<const uint8_t*>v.buf, v.len)
    finally:
        PyBuffer_Release(&v)


# ---- one record ----------------------------------------------------------------------------
cdef extern from *:
    """
    #if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_ARM64))
    #include <intrin.h>
    static __inline int rmq_ctz64(unsigned long long x) { unsigned long i; _BitScanForward64(&i, x); return (int)i; }
    #define RMQ_LITTLE_ENDIAN 1
    #elif defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    #define rmq_ctz64(x) __builtin_ctzll(x)
    #define RMQ_LITTLE_ENDIAN 1
    #else  /* unknown byte order or no bit scan: find_sep takes its byte loop */
    #define rmq_ctz64(x) 0
    #define RMQ_LITTLE_ENDIAN 0
    #endif
    #if defined(__GNUC__)
    #define rmq_prefetch(p) __builtin_prefetch((p), 0, 3)
    #elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
    #include <xmmintrin.h>
    #define rmq_prefetch(p) _mm_prefetch((const char*)(p), _MM_HINT_T0)
    #else
    #define rmq_prefetch(p) ((void)(p))
    #endif
    """
    int rmq_ctz64(uint64_t x) noexcept nogil
    int RMQ_LITTLE_ENDIAN
    void rmq_prefetch(const void* p) noexcept nogil


cdef inline Py_ssize_t find_sep(const uint8_t* b, Py_ssize_t q, Py_ssize_t stop) noexcept nogil:
    """The first k in [q, stop) with b[k] == 0x02 (the property separator), else stop. Eight
    bytes per step: property segments are short, so a memchr call per segment cost more
    than the search."""
    cdef uint64_t v, t
    while q + 8 <= stop:
        memcpy(&v, b + q, 8)
        v ^= 0x0202020202020202ULL
        t = (v - 0x0101010101010101ULL) & ~v & 0x8080808080808080ULL  # 0x80 where a byte was 0x02
        if t:
            if RMQ_LITTLE_ENDIAN:  # the lowest flag is the first 0x02 (a borrow only flags later bytes)
                return q + (rmq_ctz64(t) >> 3)
            break
        q += 8
    while q < stop and b[q] != 2:
        q += 1
    return q


cdef int verify_prop_crc(const uint8_t* b, Py_ssize_t pos, int32_t total) noexcept nogil:
    """engine.format.message.verify_prop_crc."""
    cdef const uint8_t* t = b + pos + total - 20
    cdef int64_t value = 0
    cdef int i
    if memcmp(t, CRC_TAIL, 9) != 0 or t[19] != 2:
        return 0
    for i in range(18, 8, -1):  # ten digits, least significant first
        if t[i] < 48 or t[i] > 57:
            return 0
        value = value * 10 + (t[i] - 48)
    return (crc32(b + pos, total - 20) & 0x7FFFFFFF) == value


cdef int check(const uint8_t* b, Py_ssize_t L, Py_ssize_t pos, Py_ssize_t limit, int flags,
               Row* r, int32_t* size) noexcept nogil:
    """check_record(buf, pos, limit, ...) for buf of length L: the status, *size as
    RecordResult.size; for MESSAGE / NEEDS_PY the fixed fields in *r (commitLogOffset, file
    and queue offset left to the caller)."""
    cdef Py_ssize_t rem = limit - pos, end, p, bh, sh, body_pos, topic_pos, props_pos, q, stop, seg, k
    cdef int32_t total, magic = 0, body_len, crc, sysflag
    cdef int has_magic = 1, tls, tl, pl, needs_py = 0, tags_found = 0, delay_found = 0, ascii
    cdef uint32_t h
    cdef int64_t tcode = 0
    size[0] = -1
    if rem >= 48:
        total = be32(b + pos)
        magic = be32(b + pos + 4)
    else:
        if rem <= 4:
            return S_INVALID
        total = be32(b + pos)
        if rem >= 8:
            magic = be32(b + pos + 4)
        else:
            has_magic = 0
    if has_magic and magic == BLANK_MAGIC:
        size[0] = 0
        return S_EOF
    if total <= 0 or rem < total or not has_magic:
        return S_INVALID
    if magic == MAGIC_V1:
        tls = 1
    elif magic == MAGIC_V2 and flags & F_V2:
        tls = 2
    else:
        return S_INVALID
    end = pos + total
    if pos + 48 > L:
        return S_INVALID  # record truncated
    crc = be32(b + pos + 8)
    sysflag = be32(b + pos + 36)
    bh = 20 if sysflag & 0x10 else 8
    sh = 20 if sysflag & 0x20 else 8
    p = pos + 72 + bh + sh
    if p > L:
        return S_INVALID
    body_len = be32(b + p - 4)
    body_pos = p
    if body_len > 0:
        if p + body_len > end:
            size[0] = total
            return S_MISMATCH
        p += body_len
        if flags & F_CRC and not flags & F_FORCE:
            if <int32_t>(crc32(b + body_pos, body_len) & 0x7FFFFFFF) != crc:
                return S_INVALID
    if tls == 1:
        if p + 1 > L:
            return S_INVALID
        tl = <signed char>b[p]
        p += 1
    else:
        if p + 2 > L:
            return S_INVALID
        tl = be16(b + p)
        p += 2
    if tl < 0 or p + tl > end:
        return S_INVALID
    topic_pos = p
    p += tl
    size[0] = total
    if p + 2 > end:
        return S_MISMATCH
    pl = be16(b + p)
    p += 2
    props_pos = p
    if pl > 0:
        if p + pl > end:
            return S_MISMATCH
        # parse_properties: segments split by 0x02, name up to the first 0x01, both non-empty,
        # later duplicates win. Only TAGS (the tag hash) and DELAY matter here.
        q = p
        stop = p + pl
        while q <= stop:
            seg = q
            q = find_sep(b, q, stop)
            # segment [seg, q): the name runs to the first 0x01; only TAGS and DELAY matter
            if q - seg >= 6 and (b[seg + 4] == 1 or b[seg + 5] == 1):
                if b[seg + 4] == 1 and memcmp(b + seg, b"TAGS", 4) == 0:
                    tags_found = 1
                    h = 0
                    ascii = 1
                    k = seg + 5
                    while k < q:
                        if b[k] >= 0x80:
                            ascii = 0
                        h = h * 31 + b[k]
                        k += 1
                    if ascii:
                        tcode = <int32_t>h
                    else:
                        tags_found = 2
                elif b[seg + 5] == 1 and q - seg >= 7 and memcmp(b + seg, b"DELAY", 5) == 0:
                    delay_found = 1
            q += 1
        if tags_found == 2:
            needs_py = 1
        if delay_found and tl == 19 and memcmp(b + topic_pos, SCHEDULE, 19) == 0:
            needs_py = 2  # the delay level rule: check_record decides, status and tagsCode
        elif flags & F_CRC and flags & F_FORCE:
            if not verify_prop_crc(b, pos, total):
                size[0] = -1
                return S_INVALID
    else:
        pl = 0
    if needs_py != 2 and 74 + bh + sh + (body_len if body_len > 0 else 0) + tls + tl + pl != total:
        return S_MISMATCH
    r.storeSize = total
    r.magicCode = magic
    r.bodyCRC = crc
    r.queueId = be32(b + pos + 12)
    r.flag = be32(b + pos + 16)
    r.queueOffset = be64(b + pos + 20)
    r.physicalOffsetField = be64(b + pos + 28)
    r.sysFlag = sysflag
    r.bornTimestamp = be64(b + pos + 40)
    r.storeTimestamp = be64(b + pos + 48 + bh)
    r.reconsumeTimes = be32(b + pos + 56 + bh + sh)
    r.preparedTransactionOffset = be64(b + pos + 60 + bh + sh)
    r.tagsCode = tcode
    r.bodyPos = <int32_t>body_pos
    r.bodyLength = body_len if body_len > 0 else 0
    r.topicPos = <int32_t>topic_pos
    r.topicLength = tl
    r.propertiesPos = <int32_t>props_pos
    r.propertiesLength = pl
    return S_PY if needs_py else S_MESSAGE


def classify(buf, Py_ssize_t pos, Py_ssize_t limit, int flags, rows=None, Py_ssize_t j=0):
    """(status, size) of check_record(buf, pos, limit) (status NEEDS_PY: ask check_record);
    with `rows`, a MESSAGE's fields go to row j (commitLogOffset = pos, file = 0)."""
    cdef Py_buffer v, rv
    cdef Row tmp
    cdef Row* r = &tmp
    cdef int32_t size
    cdef int st
    PyObject_GetBuffer(buf, &v, PyBUF_SIMPLE)
    try:
        if limit > v.len:
            limit = v.len
        if pos < 0 or pos >= limit:
            return INVALID, -1
        st = check(<const uint8_t*>v.buf, v.len, pos, limit, flags, r, &size)
        if rows is not None and (st == S_MESSAGE or st == S_PY):
            PyObject_GetBuffer(rows, &rv, PyBUF_WRITABLE)
            try:
                if (j + 1) * <Py_ssize_t>sizeof(Row) > rv.len:
                    raise IndexError("row out of range")
                tmp.commitLogOffset = pos
                tmp.file = 0
                (<Row*>rv.buf)[j] = tmp
            finally:
                PyBuffer_Release(&rv)
        return st, size
    finally:
        PyBuffer_Release(&v)


# ---- a run of CQ units -----------------------------------------------------------------------
cdef enum:
    PREFETCH_AHEAD = 4  # records whose lines are requested before their turn


cdef inline void prefetch_record(const uint8_t* b, Py_ssize_t L, int64_t pos, int32_t size) noexcept nogil:
    """Ask for the lines check reads of the record at pos: its head (the fixed fields) and its
    last 256 bytes (topic and properties follow the body). Checking one record takes a few
    hundred instructions, so the core never reaches the next record's loads on its own:
    without this every record waits for memory."""
    cdef int64_t k, end, tail
    if pos < 0 or pos >= L or size <= 0:
        return
    end = pos + size
    if end > L:
        end = L
    tail = end - 256
    k = pos & ~63
    while k < end:
        rmq_prefetch(b + k)
        k += 64
        if k >= pos + 128 and k < tail:
            k = tail & ~63


cdef int run(const uint8_t* b, Py_ssize_t L, Py_ssize_t limit, int64_t file_from, int64_t file_size,
             const uint8_t* cq, Py_ssize_t* pu, Py_ssize_t u_end, Row* out, Py_ssize_t nrows,
             Py_ssize_t* pj, Py_ssize_t cap, int64_t* pnbytes, int64_t limit_bytes, int file_index,
             int flags, bint single) noexcept nogil:
    """The loop of `scan` (see there); *pu, *pj, *pnbytes in and out; returns the STOP_*."""
    cdef Py_ssize_t u = pu[0], j = pj[0], pos, pf = u, pf_end
    cdef int64_t nbytes = pnbytes[0], phy
    cdef int32_t usize, size
    cdef int st, stop
    if limit > L:
        limit = L
    while True:
        if u >= u_end:
            stop = 0
            break
        pf_end = u + PREFETCH_AHEAD
        if pf_end > u_end:
            pf_end = u_end
        while pf < pf_end:
            prefetch_record(b, L, <int64_t>(<uint64_t>be64(cq + pf * 20) - <uint64_t>file_from),
                            be32(cq + pf * 20 + 8))
            pf += 1
        phy = be64(cq + u * 20)
        usize = be32(cq + u * 20 + 8)
        if j > 0 and (j >= cap or (limit_bytes and nbytes + usize > limit_bytes)):
            stop = 1
            break
        if j >= nrows:
            stop = 2
            break
        if (phy < file_from or phy >= file_from + file_size or phy - file_from >= limit
                or (phy == 0 and usize == FILLER_SIZE)):
            stop = 3
            break
        pos = <Py_ssize_t>(phy - file_from)
        st = check(b, L, pos, limit, flags, &out[j], &size)
        if st == S_MESSAGE and size == usize:
            out[j].commitLogOffset = phy
            out[j].file = file_index
            j += 1
            u += 1
            nbytes += usize
            if single:
                stop = 6
                break
            continue
        if st == S_PY and size == usize:  # the row is written; check_record confirms
            out[j].commitLogOffset = phy
            out[j].file = file_index
            stop = 5
            break
        stop = 4  # not a message of the unit's size (a NEEDS_PY record too: its size is TOTALSIZE)
        break
    pu[0] = u
    pj[0] = j
    pnbytes[0] = nbytes
    return stop


def scan(clbuf, Py_ssize_t limit, int64_t file_from, int64_t file_size, cqbuf, Py_ssize_t u,
         Py_ssize_t u_end, rows, Py_ssize_t j, Py_ssize_t cap, int64_t nbytes, int64_t limit_bytes,
         int file_index, int flags, bint single=False):
    """Walk CQ units u .. u_end-1 (indexes into the CQ file `cqbuf`) whose records lie in the
    commitlog file `clbuf` (starting at offset `file_from`, `file_size` long, written up to
    `limit`), appending a row per message at rows[j]. `j` / `nbytes` are the page's message
    count and bytes so far; the page stops before a unit when it holds `cap` messages or the
    unit would take it past `limit_bytes` (0: no byte limit) -- never before its first message.
    `single`: return after the first message taken (STOP_ONE).
    Returns (u, j, nbytes, stop): u is the first unit not consumed (see STOP_*)."""
    cdef Py_buffer cv, qv, rv
    cdef int stop = 0
    PyObject_GetBuffer(clbuf, &cv, PyBUF_SIMPLE)
    try:
        PyObject_GetBuffer(cqbuf, &qv, PyBUF_SIMPLE)
        try:
            PyObject_GetBuffer(rows, &rv, PyBUF_WRITABLE)
            try:
                if u_end * 20 > qv.len:
                    u_end = qv.len // 20
                with nogil:
                    stop = run(<const uint8_t*>cv.buf, cv.len, limit, file_from, file_size,
                               <const uint8_t*>qv.buf, &u, u_end, <Row*>rv.buf, rv.len // sizeof(Row),
                               &j, cap, &nbytes, limit_bytes, file_index, flags, single)
            finally:
                PyBuffer_Release(&rv)
        finally:
            PyBuffer_Release(&qv)
    finally:
        PyBuffer_Release(&cv)
    return u, j, nbytes, stop


# ---- the page loop (engine.store.page.read_page; its pure twin _read_page_py is the reference) ----------
cdef object _page_module = None
cdef object _Page = None
cdef object _Result = None
cdef object _confirm = None
cdef object WHY_FILLER = None, WHY_EXPIRED = None, WHY_INVALID = None


cdef class PageBase:
    """MessagePage's storage and length (engine.store.page._PageBase is the pure twin): a page of
    small messages is read in a few microseconds, so building it and asking its length must
    not cost Python frames."""
    cdef public Py_ssize_t _n
    cdef public object _rows, _views, _cache, _cols, _fidx, _froms

    def __init__(self, Py_ssize_t n=0, rows=None, views=(), cache=None):
        self._n = n
        self._rows = rows
        self._views = views
        self._cache = cache

    def __len__(self):
        return self._n

    def __bool__(self):
        return self._n > 0


cdef inline object new_page(Py_ssize_t n, rows, views, cache):
    cdef PageBase p = PageBase.__new__(_Page)
    p._n = n
    p._rows = rows
    p._views = views
    p._cache = cache
    return p


def bind(page_module, page_cls, confirm, why_filler, why_expired, why_invalid):
    """engine.store.page hands over what the loop builds and calls (it imports this module)."""
    global _page_module, _Page, _confirm, WHY_FILLER, WHY_EXPIRED, WHY_INVALID
    _page_module, _Page, _confirm = page_module, page_cls, confirm
    WHY_FILLER, WHY_EXPIRED, WHY_INVALID = why_filler, why_expired, why_invalid


def bind_result(result_cls):
    """engine.store.message_store hands over GetMessageResult."""
    global _Result
    _Result = result_cls


cdef object find_file(q, int64_t offset):
    """MappedFileQueue.find(offset): files are `file_size` apart, so straight to the index
    (the bisect when they are not)."""
    files = q.files
    cdef Py_ssize_t n = len(files), i
    cdef int64_t base, size, start
    if n == 0:
        return None
    size = q.file_size
    base = files[0].file_from_offset
    if offset >= base and size > 0:
        i = (offset - base) // size
        if i < n:
            f = files[i]
            start = f.file_from_offset
            if start <= offset < start + size:
                return f
    return q.find(offset)


cdef const uint8_t* take_units(cqmm, Py_buffer* qv, Py_ssize_t* u_end) except NULL:
    """Export a CQ file's map into *qv (the caller releases it); *u_end clamped to its units."""
    PyObject_GetBuffer(cqmm, qv, PyBUF_SIMPLE)
    if u_end[0] * 20 > qv.len:
        u_end[0] = qv.len // 20
    return <const uint8_t*>qv.buf


cdef Py_ssize_t grow_rows(bytearray rows, Py_buffer* rv) except -1:
    """Double the row buffer, re-exported into *rv; returns its row count."""
    PyBuffer_Release(rv)  # leaves rv.obj NULL: a second release (the caller's finally) is a no-op
    rows.extend(bytes(len(rows)))
    PyObject_GetBuffer(rows, rv, PyBUF_WRITABLE)
    return len(rows) // sizeof(Row)


cdef Py_ssize_t take_file(g, list files, list views, Py_buffer* cv) except -1:
    """Commitlog file g's index in the page's files (added, with the view the page keeps, when
    new); its map exported into *cv last (the caller releases it)."""
    cdef Py_ssize_t k, fi = -1
    for k in range(len(files)):
        if files[k] is g:
            fi = k
            break
    mm = g.mm
    if fi < 0:
        fi = len(files)
        files.append(g)
        views.append(memoryview(mm))
    PyObject_GetBuffer(mm, cv, PyBUF_SIMPLE)
    return fi


def read(cl, cq, int64_t offset, int64_t mx, Py_ssize_t max_count, bint broker, Py_ssize_t limit_count,
         int64_t limit_bytes):
    """getMessage's loop from queue offset `offset` (max_count >= 1, min <= offset < mx):
    (status, nextBeginOffset, page, bufferTotalSize, skipped), status None for
    OFFSET_FOUND_NULL. The runs go through `run`; every other unit through the reference
    loop body (fillers, expired records and the skip after them, other commitlog files)."""
    return _read(cl, cq.queue, offset, mx, max_count, broker, limit_count, limit_bytes)


cdef tuple _read(cl, cqq, int64_t offset, int64_t mx, Py_ssize_t max_count, bint broker, Py_ssize_t limit_count,
                 int64_t limit_bytes):
    cdef Py_ssize_t cap = max_count if max_count < limit_count else limit_count
    cdef Py_ssize_t u, u_end, unit, j = 0, j0, nrows, fi = -1
    cdef int64_t first, q = offset, phy, cl_min, nbytes = 0, nfs = 0
    cdef int64_t f_from = 0, f_size = 0, f_wrote = 0
    cdef int32_t size
    cdef int stop
    cdef bint removing = False, took, have_nfs = False, ok
    cdef Py_buffer cv, qv, rv
    cdef bint has_cv = False, has_qv = False, has_rv = False
    cdef const uint8_t* cqp
    cdef int flags
    opts = cl.read_opts
    flags = (F_CRC if opts.check_crc else 0) | (F_FORCE if opts.force_verify_prop_crc else 0) | (F_V2 if opts.accept_v2 else 0)
    clq = cl.queue
    fq = find_file(cqq, offset * 20)
    if fq is None:
        return (None if broker else "NO_MATCHED_MESSAGE"), offset, new_page(0, None, (), None), 0, []
    first = fq.file_from_offset // 20
    u = offset - first
    u_end = fq.wrote_position // 20
    if not broker and u_end > mx - first:
        u_end = mx - first
    if u >= u_end:
        return (None if broker else "NO_MATCHED_MESSAGE"), offset, new_page(0, None, (), None), 0, []
    nrows = u_end - u
    if nrows > cap:
        nrows = cap
    if nrows < 1:
        nrows = 1
    rows = PyByteArray_FromStringAndSize(NULL, nrows * sizeof(Row))  # not zeroed: rows past j are never read
    skipped = []
    cache = None
    files = []
    views = []
    f = None
    cl_min = queue_min(clq)
    try:
        cqmm = fq.mm
        cqp = take_units(cqmm, &qv, &u_end)
        has_qv = True
        PyObject_GetBuffer(rows, &rv, PyBUF_WRITABLE)
        has_rv = True
        phy = be64(cqp + u * 20)  # the commitlog file of the first record (the loop finds others)
        if phy >= cl_min and u < u_end and not (phy == 0 and be32(cqp + u * 20 + 8) == FILLER_SIZE):
            g = find_file(clq, phy)
            if g is not None:
                f = g
                fi = take_file(g, files, views, &cv)
                has_cv = True
                f_from, f_size, f_wrote = g.file_from_offset, g.file_size, g.wrote_position
        while True:
            if u >= u_end:  # this CQ file's units are done
                if broker or q >= mx or j >= max_count:
                    break
                fq = find_file(cqq, q * 20)
                if fq is None:
                    break
                first = fq.file_from_offset // 20
                u = q - first
                u_end = fq.wrote_position // 20
                if u_end > mx - first:
                    u_end = mx - first
                if u >= u_end:
                    break
                PyBuffer_Release(&qv)
                has_qv = False
                cqmm = fq.mm
                cqp = take_units(cqmm, &qv, &u_end)
                has_qv = True
                continue
            if has_cv and not have_nfs:  # a run of records in file f
                unit = u
                with nogil:
                    stop = run(<const uint8_t*>cv.buf, cv.len, f_wrote, f_from, f_size, cqp, &u, u_end,
                               <Row*>rv.buf, nrows, &j, cap, &nbytes, limit_bytes, fi, flags, False)
                q += u - unit
                if stop == 0:
                    continue
                if stop == 1:
                    break
                if stop == 2:
                    nrows = grow_rows(rows, &rv)
                    continue
                if stop == 5 or stop == 4:
                    ok = False
                    if stop == 5:
                        cache, ok = _confirm(cl, f, cqmm, u, rows, j, cache)
                    if ok:
                        nbytes += be32(cqp + u * 20 + 8)
                        j += 1
                    else:
                        removing = True
                        skipped.append((q, WHY_INVALID))
                    u += 1
                    q += 1
                    continue
                # STOP_UNIT: the reference loop body decides this unit
            phy = be64(cqp + u * 20)
            size = be32(cqp + u * 20 + 8)
            if j and (j >= cap or (limit_bytes and nbytes + size > limit_bytes)):
                break
            unit = u
            u += 1
            q += 1
            if have_nfs and phy < nfs:
                continue
            if phy == 0 and size == FILLER_SIZE:
                skipped.append((q - 1, WHY_FILLER))
                continue
            took = False
            if phy >= cl_min:
                if not has_cv or not (f_from <= phy < f_from + f_size):
                    g = find_file(clq, phy)
                    if g is not None:
                        if has_cv:
                            PyBuffer_Release(&cv)
                            has_cv = False
                        f = g
                        fi = take_file(g, files, views, &cv)
                        has_cv = True
                        f_from, f_size, f_wrote = g.file_from_offset, g.file_size, g.wrote_position
                if has_cv and f_from <= phy < f_from + f_size and phy - f_from < f_wrote:
                    if j >= nrows:
                        nrows = grow_rows(rows, &rv)
                    j0 = j
                    u = unit
                    stop = run(<const uint8_t*>cv.buf, cv.len, f_wrote, f_from, f_size, cqp, &u, unit + 1,
                               <Row*>rv.buf, nrows, &j, j + 1, &nbytes, 0, fi, flags, True)
                    if stop == 5:
                        cache, ok = _confirm(cl, f, cqmm, unit, rows, j, cache)
                        if ok:
                            nbytes += size
                            j += 1
                    u = unit + 1
                    took = j > j0
            if not took:
                removing = True
                skipped.append((q - 1, WHY_EXPIRED if phy < cl_min else WHY_INVALID))
                if phy < cl_min:
                    nfs = cl.roll_next_file(phy)
                    have_nfs = True
                continue
            have_nfs = False
    finally:
        if has_cv:
            PyBuffer_Release(&cv)
        if has_qv:
            PyBuffer_Release(&qv)
        if has_rv:
            PyBuffer_Release(&rv)
    if cache is not None and len(cache) != j:  # only confirmed rows hold a Message
        del cache[j:]
        cache.extend([None] * (j - len(cache)))
    if j:
        status = "FOUND"
    else:
        status = "MESSAGE_WAS_REMOVING" if removing else "NO_MATCHED_MESSAGE"
    return status, q, new_page(j, rows, views, cache), nbytes, skipped


cdef int64_t queue_min(q):
    """MappedFileQueue.min_offset."""
    files = q.files
    return files[0].file_from_offset if files else 0


cdef int64_t queue_max(q):
    """MappedFileQueue.max_offset: the last file holding data, at its write position."""
    files = q.files
    cdef Py_ssize_t i
    cdef int64_t w
    for i in range(len(files) - 1, -1, -1):
        f = files[i]
        w = f.wrote_position
        if w > 0:
            return f.file_from_offset + w
    return files[0].file_from_offset if files else 0


cdef object _result(status, nxt, mn, mx, messages, total, skipped):
    r = _Result.__new__(_Result)
    r.status, r.nextBeginOffset, r.minOffset, r.maxOffset = status, nxt, mn, mx
    r.messages, r.bufferTotalSize, r.skipped = messages, total, skipped
    return r


cdef int64_t LONG_MAX = 0x7FFFFFFFFFFFFFFF


def get_message(store, topic, queue_id, offset, max_count=32, broker=False):
    """getMessage. broker=True reproduces the broker exactly (a page stops at the end of
    a CQ file; 32 messages / 256 KiB per page); the default reads `max_count` messages
    across CQ files and reports units it had to skip.

    MessageStore.get_message compiled (engine/accel/_page.pyx) in one call: the queue's bounds
    and statuses, the page loop, the GetMessageResult -- for pages of small messages the
    Python frames around the loop cost as much as the loop. Anything unusual (arguments
    that are not integers or lie outside int64, the kernel switched off) goes to the
    reference, store._get_message_py."""
    if _page_module.KERNEL is None:
        return store._get_message_py(topic, queue_id, offset, max_count, broker)
    if type(offset) is not int or type(max_count) is not int:  # numpy integers, bool
        try:
            offset, max_count = index(offset), index(max_count)
        except TypeError:
            return store._get_message_py(topic, queue_id, offset, max_count, broker)
    if not 1 <= max_count <= LONG_MAX or not -LONG_MAX <= offset <= LONG_MAX:
        return store._get_message_py(topic, queue_id, offset, max_count, broker)
    cq = store.queues.get((topic, queue_id))
    if cq is None:
        return _result("NO_MESSAGE_IN_QUEUE", 0, 0, 0, [], 0, [])
    cqq = cq.queue
    cdef int64_t off = offset, mn = cq.min_logic_offset // 20, mx = queue_max(cqq) // 20
    cdef bint brk = broker
    if mx == 0:
        return _result("NO_MESSAGE_IN_QUEUE", 0, mn, mx, [], 0, [])
    if off < mn:
        return _result("OFFSET_TOO_SMALL", mn, mn, mx, [], 0, [])
    if off == mx:
        return _result("OFFSET_OVERFLOW_ONE", off, mn, mx, [], 0, [])
    if off > mx:
        return _result("OFFSET_OVERFLOW_BADLY", mx, mn, mx, [], 0, [])
    cdef Py_ssize_t limit_count, n = max_count
    cdef int64_t limit_bytes
    if brk:
        cfg = store.cfg
        limit_count, limit_bytes = cfg.maxTransferCountOnMessageInMemory, cfg.maxTransferBytesOnMessageInMemory or 0
    else:
        limit_count, limit_bytes = n, 0
    status, nxt, page, total, skipped = _read(store.commitlog, cqq, off, mx, n, brk, limit_count, limit_bytes)
    if status is None:
        return _result("OFFSET_FOUND_NULL", off, mn, mx, [], 0, [])
    return _result(status, nxt, mn, mx, page, total, skipped)
