# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""ConsumeQueue recovery's scan for the first invalid unit (consume_queue.py keeps the numpy
twin). numpy compares every unit of a 6,000,000-byte file, zero tail included, through
byte-swapping copies; this loop reads units only up to the first one that fails, which for
the queue's last file is where its data ends."""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t


cdef inline int64_t be64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return <int64_t>v


cdef inline int32_t be32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])


def first_invalid(buf, Py_ssize_t start, Py_ssize_t count, int64_t phy_end=-1):
    """Index (from 0) of the first unit in units [start, count) of `buf` whose phyOffset is
    negative or whose size is not positive, or (phy_end >= 0) whose phyOffset is at or past
    phy_end; `count` when all pass."""
    cdef Py_buffer b
    cdef Py_ssize_t i, n
    cdef const uint8_t* p
    cdef int64_t phy
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        n = b.len // 20
        if count > n:
            count = n
        p = <const uint8_t*>b.buf
        with nogil:
            for i in range(start, count):
                phy = be64(p + 20 * i)
                if phy < 0 or be32(p + 20 * i + 8) <= 0 or (phy_end >= 0 and phy >= phy_end):
                    break
            else:
                i = count
        return i if start < count else count
    finally:
        PyBuffer_Release(&b)
