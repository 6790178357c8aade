# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Index file data kernels: chain lengths in one pass over the entries, and the binning of
per-slot values. (Pixels and colours are the GUI's, in numpy.)

Reads the file's bytes straight from its map (big-endian fields, no numpy copy). Results
equal the numpy twins in engine/analysis/chains.py (tests/test_analysis.py compares them):

* a chain is walked from a slot's head through prevIndex links; entry numbers outside
  1..L (L = min(indexCount, maxIndexNum - 1)) end it, so does coming back to an entry
  already met (a cycle): the length is the number of distinct entries met, like
  IndexFile.chain.
* intact files only link an entry to an older one (0 < prev < e), so in entry order
  len[e] = 1 + len[prev[e]] is known when e is reached: one sequential pass. Entries whose
  chain takes a forward link (damage) are resolved afterwards as a functional graph
  (each entry has one successor): every entry is walked once, a cycle is counted once.

No numpy C API (the build has no numpy include path): typed memoryviews only, and the
output arrays are made by the caller or with numpy at the Python level."""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcpy, memset

import numpy as np

from engine.accel._bytes cimport be32, be64


cdef enum:
    HEADER = 40
    SLOT = 4
    ENTRY = 20
    PREV = 16          # prevIndex offset inside an entry


def valid_limit(long long index_count, long long index_num):
    """L: entry numbers 1..L can be part of a chain."""
    cdef long long L = index_count if index_count < index_num - 1 else index_num - 1
    return L if L > 0 else 0


cdef int _resolve(const unsigned char *ent, int32_t *ln, int32_t L, int32_t *stack) noexcept nogil:
    """Lengths of the entries pass 1 left unknown (-1): walk each once, memoised; a cycle's
    members all get the cycle's size. In-progress entries hold -(2 + position on the path)."""
    cdef int32_t e, x, p, top, pos, base, i
    for e in range(1, L + 1):
        if ln[e] != -1:
            continue
        top = 0
        x = e
        while True:
            if ln[x] > 0:
                base = ln[x]
                break
            if ln[x] <= -2:                      # met again on this path: a cycle
                pos = -ln[x] - 2
                base = top - pos
                for i in range(pos, top):
                    ln[stack[i]] = base
                top = pos
                break
            ln[x] = -(2 + top)
            stack[top] = x
            top += 1
            p = be32(ent + <int64_t>x * ENTRY + PREV)
            if p <= 0 or p > L:                  # cannot happen for an unknown entry; be safe
                base = 0
                break
            x = p
        while top > 0:
            top -= 1
            base += 1
            ln[stack[top]] = base
    return 0


cdef int _pass1_u8(const unsigned char *ent, uint8_t *ln, int32_t L) noexcept nogil:
    """Pass 1 with one byte per entry (a quarter of the random reads' footprint). Returns 1
    when it cannot finish: a forward or self link, or a chain of 255 or more."""
    cdef int32_t e, p
    cdef uint8_t v
    ln[0] = 0
    for e in range(1, L + 1):
        p = be32(ent + <int64_t>e * ENTRY + PREV)
        if p <= 0 or p > L:
            ln[e] = 1
        elif p < e:
            v = ln[p]
            if v == 255:
                return 1
            ln[e] = v + 1
        else:
            return 1
    return 0


cdef int _pass1_i32(const unsigned char *ent, int32_t *ln, int32_t L) noexcept nogil:
    """Pass 1, four bytes per entry; entries whose chain takes a forward link are left -1.
    Returns 1 when there are such entries."""
    cdef int32_t e, p, v
    cdef int unknown = 0
    ln[0] = 0
    for e in range(1, L + 1):
        p = be32(ent + <int64_t>e * ENTRY + PREV)
        if p <= 0 or p > L:
            ln[e] = 1
        elif p < e:
            v = ln[p]
            if v > 0:
                ln[e] = v + 1
            else:
                ln[e] = -1
                unknown = 1
        else:                                    # forward link or self link
            ln[e] = -1
            unknown = 1
    return unknown


cdef void _heads_u8(const unsigned char *slots, Py_ssize_t slot_num, const uint8_t *ln, int32_t L,
                    int32_t *out, int64_t *counts) noexcept nogil:
    """Pass 2: every slot's length is its head's; the histogram on the way (lengths < 256)."""
    cdef Py_ssize_t s
    cdef int32_t h
    cdef uint8_t v
    for s in range(slot_num):
        h = be32(slots + SLOT * s)
        v = ln[h] if 0 < h <= L else 0
        out[s] = v
        counts[v] += 1


cdef int32_t _heads_i32(const unsigned char *slots, Py_ssize_t slot_num, const int32_t *ln, int32_t L,
                        int32_t *out) noexcept nogil:
    cdef Py_ssize_t s
    cdef int32_t h, v, mx = 0
    for s in range(slot_num):
        h = be32(slots + SLOT * s)
        v = ln[h] if 0 < h <= L else 0
        out[s] = v
        if v > mx:
            mx = v
    return mx


def chain_lengths(const unsigned char[::1] buf, Py_ssize_t slot_num, Py_ssize_t index_num,
                  long long index_count):
    """(lengths int32[slot_num], counts int64[max + 1]) for the index file in `buf` (its
    whole map): chain length of every slot and how many slots have each length.

    Entry lengths are kept one byte each when every chain is shorter than 255 and no link
    goes forward (any intact file of a sane load); otherwise the four-byte pass runs, with
    the forward-link resolution when needed."""
    if slot_num < 0 or index_num < 0:
        raise ValueError("negative table size")
    cdef Py_ssize_t need = HEADER + SLOT * slot_num + ENTRY * index_num
    if buf.shape[0] < need:
        raise ValueError(f"buffer holds {buf.shape[0]} bytes, the index file needs {need}")
    cdef long long Lq = valid_limit(index_count, index_num)
    if Lq > 0x7FFFFFF0:
        raise ValueError("too many entries")
    cdef int32_t L = <int32_t>Lq
    cdef const unsigned char *base = &buf[0] if buf.shape[0] else NULL
    cdef const unsigned char *slots = base + HEADER
    cdef const unsigned char *ent = base + HEADER + SLOT * slot_num
    lengths = np.empty(slot_num, dtype=np.int32)
    cdef int32_t[::1] out = lengths
    cdef int32_t *outp = &out[0] if slot_num else NULL
    cdef int64_t c8[256]
    cdef int32_t mx = 0, k
    cdef int slow
    # scratch from numpy: its allocator reuses freed blocks and asks for huge pages
    small = np.empty(<Py_ssize_t>L + 1, dtype=np.uint8)
    cdef uint8_t[::1] ln8 = small
    with nogil:
        slow = _pass1_u8(ent, &ln8[0], L)
    if not slow:
        memset(c8, 0, sizeof(c8))
        with nogil:
            _heads_u8(slots, slot_num, &ln8[0], L, outp, c8)
        del ln8, small
        for k in range(256):
            if c8[k]:
                mx = k
        counts = np.zeros(<Py_ssize_t>mx + 1, dtype=np.int64)
        for k in range(mx + 1):
            counts[k] = c8[k]
        return lengths, counts
    del ln8, small
    wide = np.empty(<Py_ssize_t>L + 1, dtype=np.int32)
    cdef int32_t[::1] ln = wide
    cdef int32_t[::1] stack
    with nogil:
        slow = _pass1_i32(ent, &ln[0], L)
    if slow:
        path = np.empty(<Py_ssize_t>L + 1, dtype=np.int32)
        stack = path
        with nogil:
            _resolve(ent, &ln[0], L, &stack[0])
    with nogil:
        mx = _heads_i32(slots, slot_num, &ln[0], L, outp)
    counts = np.zeros(<Py_ssize_t>mx + 1, dtype=np.int64)
    _count(out, counts)
    return lengths, counts


cdef void _count(const int32_t[::1] lengths, int64_t[::1] counts) noexcept nogil:
    cdef Py_ssize_t i, n = lengths.shape[0]
    for i in range(n):
        counts[lengths[i]] += 1


def bincount(const int32_t[::1] lengths, Py_ssize_t size):
    """np.bincount(lengths, minlength=size) for non-negative lengths below `size`."""
    counts = np.zeros(size, dtype=np.int64)
    cdef int64_t[::1] c = counts
    with nogil:
        _count(lengths, c)
    return counts


def bin_lengths(const int32_t[::1] lengths, Py_ssize_t per, Py_ssize_t nb, float[::1] out, int how_max):
    """out[b] = max (how_max) or mean of lengths[b*per : (b+1)*per] (the last bin shorter)."""
    cdef Py_ssize_t n = lengths.shape[0], b, i, lo, hi
    cdef int32_t m
    cdef int64_t t
    if out.shape[0] < nb or nb * per < n or (nb - 1) * per >= n:
        raise ValueError("bins do not cover the lengths")
    with nogil:
        for b in range(nb):
            lo = b * per
            hi = lo + per
            if hi > n:
                hi = n
            if how_max:
                m = 0
                for i in range(lo, hi):
                    if lengths[i] > m:
                        m = lengths[i]
                out[b] = <float>m
            else:
                t = 0
                for i in range(lo, hi):
                    t += lengths[i]
                out[b] = <float>(<double>t / <double>(hi - lo))


def used_per_bin(const unsigned char[::1] buf, Py_ssize_t slot_num, Py_ssize_t per, Py_ssize_t nb,
                 int32_t[::1] out):
    """out[b] = slots in use (non-zero) among slots b*per .. (b+1)*per - 1 of the slot table
    in `buf` (the index file's map; the last bin shorter). Reads the slot table only."""
    cdef Py_ssize_t need = HEADER + SLOT * slot_num
    if buf.shape[0] < need:
        raise ValueError(f"buffer holds {buf.shape[0]} bytes, the slot table needs {need}")
    if out.shape[0] < nb or nb * per < slot_num or (nb - 1) * per >= slot_num:
        raise ValueError("bins do not cover the slots")
    cdef const unsigned char *st = &buf[0] + HEADER if slot_num else NULL
    cdef Py_ssize_t b, i, lo, hi
    cdef int32_t c
    cdef uint32_t v
    with nogil:
        for b in range(nb):
            lo = b * per
            hi = lo + per
            if hi > slot_num:
                hi = slot_num
            c = 0
            for i in range(lo, hi):
                memcpy(&v, st + SLOT * i, 4)    # zero is zero in either byte order
                c += v != 0
            out[b] = c


from engine.format.layout cimport (ACCEL_DIR_LINE, ACCEL_DIR_SLOTS, ACCEL_MAX_CHAIN, ACCEL_RECORD_SIZE,
                                   INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, OFF_ACCEL_HASH,
                                   OFF_ACCEL_LINE_LENGTHS, OFF_ACCEL_LINE_RECORDS, OFF_ACCEL_PHY,
                                   OFF_ACCEL_TIMEDIFF, OFF_ENTRY_HASH, OFF_ENTRY_PHY, OFF_ENTRY_PREV,
                                   OFF_ENTRY_TIMEDIFF)


cdef int64_t _chain_copy(const unsigned char *slots, const unsigned char *ent, int64_t slot_num, int64_t m,
                         uint8_t *directory, unsigned char *records, int64_t *at, int32_t *want) noexcept nogil:
    """engine/store/index_accel.py's build in two passes over the entries (numpy's needs two
    sorts and four gathers): count each slot's entries, then place them newest first -- a
    slot's first in its directory line, the others in the overflow records -- each slot's
    records checked against its chain as they go (`want`: the entry the chain reaches next,
    from the slot's head; 0 once it has ended). Returns the overflow records written, -1 when
    the file is not in the writer's shape. `at` is negative while a slot's first record is
    still to come (-1 - its overflow start)."""
    cdef int64_t e, s, over = 0, line, n
    cdef int32_t h, d
    cdef int64_t phy
    cdef const unsigned char *p
    cdef unsigned char *r
    for e in range(1, m + 1):                 # pass 1: every entry's slot, its chain lengths
        p = ent + e * INDEX_ENTRY_SIZE
        h = be32(p + OFF_ENTRY_HASH)
        if h < 0 or be32(p + OFF_ENTRY_TIMEDIFF) < 0:
            return -1
        s = h % slot_num
        at[s] += 1
        if at[s] > ACCEL_MAX_CHAIN:
            return -1
    for s in range(slot_num):                 # the directory's lengths and overflow starts
        line = s // ACCEL_DIR_SLOTS
        if s % ACCEL_DIR_SLOTS == 0:
            memcpy(directory + line * ACCEL_DIR_LINE, &over, 4)   # (little-endian: the low 4 bytes)
        n = at[s]
        directory[line * ACCEL_DIR_LINE + OFF_ACCEL_LINE_LENGTHS + s % ACCEL_DIR_SLOTS] = <uint8_t>n
        at[s] = -1 - over
        if n > 1:
            over += n - 1
        want[s] = be32(slots + s * INDEX_SLOT_SIZE)
    for e in range(m, 0, -1):                 # pass 2: newest first, each slot's chain in order
        p = ent + e * INDEX_ENTRY_SIZE
        h = be32(p + OFF_ENTRY_HASH)
        s = h % slot_num
        if want[s] != e:
            return -1
        want[s] = be32(p + OFF_ENTRY_PREV)
        if at[s] < 0:                         # the newest: in the slot's directory line
            r = directory + (s // ACCEL_DIR_SLOTS) * ACCEL_DIR_LINE + OFF_ACCEL_LINE_RECORDS \
                + (s % ACCEL_DIR_SLOTS) * ACCEL_RECORD_SIZE
            at[s] = -1 - at[s]
        else:
            r = records + at[s] * ACCEL_RECORD_SIZE
            at[s] += 1
        d = be32(p + OFF_ENTRY_TIMEDIFF)
        phy = be64(p + OFF_ENTRY_PHY)
        memcpy(r + OFF_ACCEL_HASH, &h, 4)
        memcpy(r + OFF_ACCEL_TIMEDIFF, &d, 4)
        memcpy(r + OFF_ACCEL_PHY, &phy, 8)
    for s in range(slot_num):                 # every chain ended where the writer ended it
        if want[s] != 0:
            return -1
    return over


def chain_copy(const unsigned char[::1] buf, Py_ssize_t slot_num, Py_ssize_t index_count,
               uint8_t[::1] directory, unsigned char[::1] records):
    """Fill an index file's chain copy (directory: ceil(slot_num / 3) * 64 bytes of zeros,
    records: room for 16 bytes per entry) from its map. Returns how many overflow records it
    wrote, -1 when the file is not in the writer's shape (then the copy is not used). The
    caller checks the geometry (IndexFile's map holds every slot and entry) and a
    little-endian machine."""
    cdef int64_t m = index_count - 1
    if slot_num <= 0 or m < 0 or buf.shape[0] < INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE + (m + 1) * INDEX_ENTRY_SIZE:
        raise ValueError("chain_copy: the buffer does not hold the file's slots and entries")
    if directory.shape[0] < (slot_num + ACCEL_DIR_SLOTS - 1) // ACCEL_DIR_SLOTS * ACCEL_DIR_LINE or records.shape[0] < m * ACCEL_RECORD_SIZE:
        raise ValueError("chain_copy: output too small")
    cursors = np.zeros(slot_num, dtype=np.int64)
    wants = np.zeros(slot_num, dtype=np.int32)
    cdef int64_t[::1] at = cursors
    cdef int32_t[::1] want = wants
    cdef const unsigned char *base = &buf[0]
    cdef int64_t over
    with nogil:
        over = _chain_copy(base + INDEX_HEADER_SIZE, base + INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE, slot_num, m,
                           &directory[0], &records[0] if records.shape[0] else NULL, &at[0], &want[0])
    return over
