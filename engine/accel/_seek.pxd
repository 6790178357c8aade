# The byte search and the cache hints every kernel shares, written once: find_sep (the property
# separator 0x02, eight bytes a step), rmq_prefetch, prefetch_lines and prefetch_record (a
# record's lines asked for ahead of their reader), touch_record (loaded ahead of it). Inline
# only: cimporting them imports nothing at run time.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

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
    static volatile uint32_t rmq_sink;   /* where touch_record's loads end, so they are made */
    #if defined(__GNUC__)
    #define rmq_prefetch_write(p) __builtin_prefetch((p), 1, 1)
    #else
    #define rmq_prefetch_write(p) ((void)(p))
    #endif
    """
    int rmq_ctz64(uint64_t x) noexcept nogil
    int RMQ_LITTLE_ENDIAN
    void rmq_prefetch(const void* p) noexcept nogil
    void rmq_prefetch_write(const void* p) noexcept nogil
    uint32_t rmq_sink


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


cdef inline void prefetch_lines(const uint8_t* b, Py_ssize_t L, Py_ssize_t pos, Py_ssize_t n) noexcept nogil:
    """Ask for every line of b[pos:pos + n] (at most its first 16 KiB, and not past L): a
    record's lines requested before it is read, so their misses overlap the work before."""
    cdef Py_ssize_t k, end
    if pos < 0 or n <= 0:
        return
    end = pos + (n if n < 16384 else 16384)
    if end > L:
        end = L
    k = pos & ~63
    while k < end:
        rmq_prefetch(b + k)
        k += 64


cdef enum:
    TOUCH_SPAN = 65536   # records spread wider than this are touched (touch_record), not prefetched


cdef inline bint far_apart(int64_t first, int64_t last) noexcept nogil:
    """Whether a page's records from commitlog offset `first` to `last` are touched first
    (touch_record) rather than asked for a few ahead (prefetch_record): the rule both page
    loops follow."""
    return last - first > TOUCH_SPAN


cdef inline uint32_t touch_record(const uint8_t* b, Py_ssize_t limit, int64_t pos, int32_t size) noexcept nogil:
    """Load the lines a check reads of the record at pos (the head's two, the tail's two: topic
    and properties follow the body) when it lies below `limit`; the caller stores the sum in
    rmq_sink. Records far apart are touched in one tight loop before they are checked:
    independent loads the core runs side by side, a page walk and a line each, where one check
    of a few hundred instructions at a time takes the misses one by one (and a prefetch that
    misses the TLB may be dropped: on a VM, measured to hide little of a random read)."""
    if pos < 0 or size <= 0 or pos > limit - size:   # (not pos + size: a unit's offset near 2**63 overflows it)
        return 0
    if size <= 128:
        return b[pos] + b[pos + size - 1]
    return b[pos] + b[pos + 64] + b[pos + size - 65] + b[pos + size - 1]


cdef inline void prefetch_record(const uint8_t* b, Py_ssize_t L, int64_t pos, int32_t size) noexcept nogil:
    """Ask for the lines check reads of the record at pos: its head (the fixed fields) and its
    last 256 bytes (topic and properties follow the body). Checking one record takes a few
    hundred instructions, so the core never reaches the next record's loads on its own:
    without this every record waits for memory."""
    if 0 <= pos < L and size > 0:
        prefetch_lines(b, L, pos, min(size, 128))
        if size > 128:
            prefetch_lines(b, L, max(pos + 128, pos + size - 256), min(size - 128, 256))
