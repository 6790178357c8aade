# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""ConsumeQueue recovery's scan for the first invalid unit (consume_queue.py keeps the numpy
twin). numpy compares every unit of a 6,000,000-byte file, zero tail included, through
byte-swapping copies; this loop reads units only up to the first one that fails, which for
the queue's last file is where its data ends."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

from engine.accel._bytes cimport be32, be64
from engine.format.layout cimport CQ_UNIT_SIZE, OFF_UNIT_SIZE  # the unit: engine/format/cq_unit.py


cdef Py_ssize_t units_of(buf, Py_buffer* b, Py_ssize_t count) except -1:
    """Export buf into *b (the caller releases it); `count` clamped to the whole units in it."""
    PyObject_GetBuffer(buf, b, PyBUF_SIMPLE)
    return count if count <= b.len // CQ_UNIT_SIZE else b.len // CQ_UNIT_SIZE


cdef inline bint unit_ok(const uint8_t* p, Py_ssize_t i) noexcept nogil:
    """ConsumeQueue recovery's valid unit: commitLogOffset >= 0 and size > 0."""
    return be64(p + CQ_UNIT_SIZE * i) >= 0 and be32(p + CQ_UNIT_SIZE * i + OFF_UNIT_SIZE) > 0


def first_invalid(buf, Py_ssize_t start, Py_ssize_t count, int64_t phy_end=-1):
    """Index (from 0) of the first unit in units [start, count) of `buf` whose commitLogOffset is
    negative or whose size is not positive, or (phy_end >= 0) whose commitLogOffset is at or past
    phy_end; `count` when all pass."""
    cdef Py_buffer b
    cdef Py_ssize_t i
    cdef const uint8_t* p
    count = units_of(buf, &b, count)
    try:
        p = <const uint8_t*>b.buf
        with nogil:
            for i in range(start, count):
                if not unit_ok(p, i) or (phy_end >= 0 and be64(p + CQ_UNIT_SIZE * i) >= phy_end):
                    break
            else:
                i = count
        return i if start < count else count
    finally:
        PyBuffer_Release(&b)


def end_of_units(buf, Py_ssize_t count, Py_ssize_t window=1024):
    """first_invalid(buf, 0, count) for a file whose units are valid up to a point and invalid
    after it (how a writer leaves a CQ file, a crash tearing at most its tail): the boundary by
    binary search, then the exact scan over the last `window` units before it, so a torn or
    damaged tail is found as the linear scan finds it. Damage further inside the file is
    not looked for (read-only opens; recovery that writes uses first_invalid)."""
    cdef Py_buffer b
    cdef Py_ssize_t lo, hi, mid, i, start
    cdef const uint8_t* p
    count = units_of(buf, &b, count)
    try:
        p = <const uint8_t*>b.buf
        with nogil:
            lo, hi = 0, count       # invariant: units < lo are taken as valid, unit hi invalid (or end)
            while lo < hi:
                mid = (lo + hi) // 2
                if unit_ok(p, mid):
                    lo = mid + 1
                else:
                    hi = mid
            start = lo - window if lo > window else 0
            for i in range(start, lo):
                if not unit_ok(p, i):
                    break
            else:
                i = lo
        return i
    finally:
        PyBuffer_Release(&b)


def first_live(buf, Py_ssize_t count, int64_t commitlog_min, int32_t filler_size):
    """Index of the first of units [0, count) that is not a filler (commitLogOffset 0, size
    filler_size) and whose record is still in the commitlog (commitLogOffset >= commitlog_min);
    `count` when none: correct_min_offset reads units only up to the live one, usually the
    first."""
    cdef Py_buffer b
    cdef Py_ssize_t i
    cdef const uint8_t* p
    cdef int64_t phy
    count = units_of(buf, &b, count)
    try:
        p = <const uint8_t*>b.buf
        with nogil:
            for i in range(count):
                phy = be64(p + CQ_UNIT_SIZE * i)
                if phy >= commitlog_min and not (phy == 0 and be32(p + CQ_UNIT_SIZE * i + OFF_UNIT_SIZE) == filler_size):
                    break
            else:
                i = count
        return i if count > 0 else 0
    finally:
        PyBuffer_Release(&b)
