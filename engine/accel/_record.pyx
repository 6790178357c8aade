# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""One commitlog record checked as check_record classifies it, and CRC-32, in C: what the page
loop (_page) and check's walk (_check) share. engine/format/message.py's check_record stays the
reference; tests/accel/test_page.py compares the two on crafted, damaged and real records."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from engine.accel._bytes cimport be16, be32, be64
from engine.accel._javahash cimport index_key_hash, jhash_bytes_or
from engine.format.layout cimport (BLANK_MAGIC, BORNHOST_V6_FLAG, HEAD_SIZE, MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2,
                                   OFF_BODY, OFF_BODYCRC, OFF_BODYLENGTH, OFF_BORNHOST, OFF_BORNTIMESTAMP, OFF_FLAG,
                                   OFF_MAGICCODE, OFF_PHYSICALOFFSET, OFF_PREPAREDTXOFFSET, OFF_QUEUEID,
                                   OFF_QUEUEOFFSET, OFF_RECONSUMETIMES, OFF_STORETIMESTAMP, OFF_SYSFLAG, HOST_V4,
                                   HOST_V6, PROP_CRC_TAIL_SIZE, RECORD_FIXED, STOREHOST_V6_FLAG)

cdef const char* SCHEDULE = b"SCHEDULE_TOPIC_XXXX"

# record statuses for Python (the S_* of _record.pxd)
MESSAGE = 0
END_OF_FILE = 1
INVALID = 2
SIZE_MISMATCH = 3
NEEDS_PY = 4

# option flags for Python (the F_* of _record.pxd)
CHECK_CRC = 1
FORCE_PROP_CRC = 2
ACCEPT_V2 = 4

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


# ---- CRC-32 by carry-less multiplication (x86-64 with PCLMULQDQ) --------------------------------
# The reflected CRC-32 folded 64 bytes a step with PCLMULQDQ, then reduced (Barrett) to 32 bits:
# ~10x the table loop on record bodies. The constants are x^k mod P(x) for the folding distances
# (reflected, as in Intel's white paper "Fast CRC Computation for Generic Polynomials Using
# PCLMULQDQ"). Whole 16-byte blocks only (at least 64 bytes); the table loop does the rest, and
# every CPU without PCLMULQDQ. tests/accel compare it with zlib on random lengths and offsets.
cdef extern from *:
    """
    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    #include <immintrin.h>
    #define RMQ_HAVE_CLMUL_CODE 1
    __attribute__((target("pclmul,sse4.1")))
    static uint32_t rmq_crc_clmul(const unsigned char *p, size_t n, uint32_t crc) {
        /* n >= 64 and a multiple of 16; crc is the running (inverted) value */
        const __m128i k12 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
        const __m128i k34 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
        const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124LL);
        const __m128i pmu = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
        const __m128i lo32 = _mm_setr_epi32(~0, 0, ~0, 0);
        __m128i a = _mm_loadu_si128((const __m128i *)(p + 0));
        __m128i b = _mm_loadu_si128((const __m128i *)(p + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(p + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(p + 48));
        __m128i t;
        a = _mm_xor_si128(a, _mm_cvtsi32_si128((int)crc));
        p += 64; n -= 64;
        #define RMQ_FOLD(x, k, next) \
            t = _mm_clmulepi64_si128(x, k, 0x00); \
            x = _mm_clmulepi64_si128(x, k, 0x11); \
            x = _mm_xor_si128(_mm_xor_si128(x, t), next);
        while (n >= 64) {
            RMQ_FOLD(a, k12, _mm_loadu_si128((const __m128i *)(p + 0)))
            RMQ_FOLD(b, k12, _mm_loadu_si128((const __m128i *)(p + 16)))
            RMQ_FOLD(c, k12, _mm_loadu_si128((const __m128i *)(p + 32)))
            RMQ_FOLD(d, k12, _mm_loadu_si128((const __m128i *)(p + 48)))
            p += 64; n -= 64;
        }
        RMQ_FOLD(a, k34, b)
        RMQ_FOLD(a, k34, c)
        RMQ_FOLD(a, k34, d)
        while (n >= 16) {
            RMQ_FOLD(a, k34, _mm_loadu_si128((const __m128i *)p))
            p += 16; n -= 16;
        }
        #undef RMQ_FOLD
        /* 128 -> 64 bits */
        t = _mm_clmulepi64_si128(a, k34, 0x10);
        a = _mm_xor_si128(_mm_srli_si128(a, 8), t);
        t = _mm_srli_si128(a, 4);
        a = _mm_clmulepi64_si128(_mm_and_si128(a, lo32), k5, 0x00);
        a = _mm_xor_si128(a, t);
        /* Barrett reduction to 32 bits */
        t = _mm_clmulepi64_si128(_mm_and_si128(a, lo32), pmu, 0x10);
        t = _mm_clmulepi64_si128(_mm_and_si128(t, lo32), pmu, 0x00);
        a = _mm_xor_si128(a, t);
        return (uint32_t)_mm_extract_epi32(a, 1);
    }
    static int rmq_clmul_ok(void) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }
    #else
    #define RMQ_HAVE_CLMUL_CODE 0
    static uint32_t rmq_crc_clmul(const unsigned char *p, size_t n, uint32_t crc) { (void)p; (void)n; return crc; }
    static int rmq_clmul_ok(void) { return 0; }
    #endif
    """
    uint32_t rmq_crc_clmul(const uint8_t* p, size_t n, uint32_t crc) nogil
    int rmq_clmul_ok() nogil

cdef bint CLMUL = rmq_clmul_ok() != 0
CRC_CLMUL = CLMUL  # for the tests


cdef uint32_t crc32(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef uint32_t c = ~(<uint32_t>0)
    cdef uint32_t a, b
    cdef Py_ssize_t whole
    if CLMUL and n >= 64:
        whole = n & ~(<Py_ssize_t>15)
        c = rmq_crc_clmul(p, <size_t>whole, c)
        p += whole
        n -= whole
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


def crc32_of(data, bint clmul=True) -> int:
    """zlib.crc32 of a bytes-like object (for the tests; clmul=False: the table loop alone)."""
    global CLMUL
    cdef Py_buffer v
    cdef bint was = CLMUL
    PyObject_GetBuffer(data, &v, PyBUF_SIMPLE)
    try:
        CLMUL = CLMUL and clmul
        return crc32(<const uint8_t*>v.buf, v.len)
    finally:
        CLMUL = was
        PyBuffer_Release(&v)


# ---- one record ----------------------------------------------------------------------------
from engine.accel._seek cimport find_sep, rmq_prefetch


cdef int verify_prop_crc(const uint8_t* b, Py_ssize_t pos, int32_t total) noexcept nogil:
    """engine.format.message.verify_prop_crc."""
    cdef const uint8_t* t = b + pos + total - PROP_CRC_TAIL_SIZE
    cdef int64_t value = 0
    cdef int i
    if not crc_tail_at(t) or t[19] != 2:
        return 0
    for i in range(18, 8, -1):  # ten digits, least significant first
        if t[i] < 48 or t[i] > 57:
            return 0
        value = value * 10 + (t[i] - 48)
    return (crc32(b + pos, total - PROP_CRC_TAIL_SIZE) & 0x7FFFFFFF) == value


cdef int check_keys(const uint8_t* b, Py_ssize_t L, Py_ssize_t pos, Py_ssize_t limit, int flags,
                    Row* r, int32_t* size, KeySpans* keys) noexcept nogil:
    """check, and with `keys` the spans of UNIQ_KEY and KEYS."""
    cdef Py_ssize_t rem = limit - pos, end, p, bh, sh, body_pos, topic_pos, props_pos, q, stop, seg, k
    cdef int32_t total, magic = 0, body_len, crc, sysflag
    cdef int has_magic = 1, tls, tl, pl, needs_py = 0, tags_found = 0, delay_found = 0
    cdef uint32_t h, ored
    cdef int64_t tcode = 0
    size[0] = -1
    if keys != NULL:
        keys.u0 = keys.u1 = keys.k0 = keys.k1 = -1
    if rem >= HEAD_SIZE:
        total = be32(b + pos)
        magic = be32(b + pos + OFF_MAGICCODE)
    else:
        if rem <= 4:
            return S_INVALID
        total = be32(b + pos)
        if rem >= 8:
            magic = be32(b + pos + OFF_MAGICCODE)
        else:
            has_magic = 0
    if has_magic and magic == BLANK_MAGIC:
        size[0] = 0
        return S_EOF
    if total <= 0 or rem < total or not has_magic:
        return S_INVALID
    if magic == MESSAGE_MAGIC_V1:
        tls = 1
    elif magic == MESSAGE_MAGIC_V2 and flags & F_V2:
        tls = 2
    else:
        return S_INVALID
    end = pos + total
    if pos + HEAD_SIZE > L:
        return S_INVALID  # record truncated
    crc = be32(b + pos + OFF_BODYCRC)
    sysflag = be32(b + pos + OFF_SYSFLAG)
    bh = HOST_V6 if sysflag & BORNHOST_V6_FLAG else HOST_V4
    sh = HOST_V6 if sysflag & STOREHOST_V6_FLAG else HOST_V4
    p = pos + OFF_BODY + bh + sh
    if p > L:
        return S_INVALID
    body_len = be32(b + pos + OFF_BODYLENGTH + bh + sh)
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
                    ored = 0
                    h = jhash_bytes_or(0, b + seg + 5, q - seg - 5, &ored)
                    if not ored & 0x80:
                        tcode = <int32_t>h
                    else:
                        tags_found = 2
                elif b[seg + 5] == 1 and q - seg >= 7 and memcmp(b + seg, b"DELAY", 5) == 0:
                    delay_found = 1
            if keys != NULL:  # (later duplicates win, as in parse_properties)
                if q - seg >= 10 and b[seg + 8] == 1 and memcmp(b + seg, b"UNIQ_KEY", 8) == 0:
                    keys.u0, keys.u1 = seg + 9, q
                elif q - seg >= 6 and b[seg + 4] == 1 and memcmp(b + seg, b"KEYS", 4) == 0:
                    keys.k0, keys.k1 = seg + 5, q
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
    if needs_py != 2 and RECORD_FIXED + bh + sh + (body_len if body_len > 0 else 0) + tls + tl + pl != total:
        return S_MISMATCH
    r.storeSize = total
    r.magicCode = magic
    r.bodyCRC = crc
    r.queueId = be32(b + pos + OFF_QUEUEID)
    r.flag = be32(b + pos + OFF_FLAG)
    r.queueOffset = be64(b + pos + OFF_QUEUEOFFSET)
    r.physicalOffsetField = be64(b + pos + OFF_PHYSICALOFFSET)
    r.sysFlag = sysflag
    r.bornTimestamp = be64(b + pos + OFF_BORNTIMESTAMP)
    r.storeTimestamp = be64(b + pos + OFF_STORETIMESTAMP + bh)
    r.reconsumeTimes = be32(b + pos + OFF_RECONSUMETIMES + bh + sh)
    r.preparedTransactionOffset = be64(b + pos + OFF_PREPAREDTXOFFSET + bh + sh)
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
