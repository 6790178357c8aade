# Java's String.hashCode for every kernel, written once (engine/format/javahash.py is the
# Python home; tests/test_one_home.py holds them to each other): h = 31 * h + unit over the
# UTF-16 code units, mod 2**32, continued from any h so "topic#" can be hashed once. Inline
# only, so `from engine.accel._javahash cimport ...` imports nothing at run time.
from cpython.unicode cimport PyUnicode_1BYTE_KIND, PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND
from libc.stdint cimport int32_t, uint8_t, uint32_t


cdef inline uint32_t jhash_unit(uint32_t h, uint32_t c) noexcept nogil:
    """One code point: its UTF-16 unit, or its two surrogates (a non-BMP character)."""
    if c >= 0x10000:
        c -= 0x10000
        h = h * 31u + (0xD800u + (c >> 10))
        return h * 31u + (0xDC00u + (c & 0x3FFu))
    return h * 31u + c


cdef inline uint32_t jhash_bytes_or(uint32_t h, const uint8_t* p, Py_ssize_t n, uint32_t* ored) noexcept nogil:
    """n one-byte units (ASCII or Latin-1 text), four a step (h * 31^4 + c0 * 31^3 + c1 * 31^2
    + c2 * 31 + c3: one multiply on the chain instead of four); every byte OR-ed into *ored,
    so a caller learns in the same pass whether one was not ASCII (*ored & 0x80)."""
    cdef Py_ssize_t i = 0
    cdef uint32_t acc = 0
    while i + 4 <= n:
        h = (h * 923521u + <uint32_t>p[i] * 29791u + <uint32_t>p[i + 1] * 961u + <uint32_t>p[i + 2] * 31u
             + <uint32_t>p[i + 3])
        acc |= p[i] | p[i + 1] | p[i + 2] | p[i + 3]
        i += 4
    while i < n:
        h = h * 31u + p[i]
        acc |= p[i]
        i += 1
    ored[0] |= acc
    return h


cdef inline uint32_t jhash_bytes(uint32_t h, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """n one-byte units (ASCII or Latin-1 text)."""
    cdef uint32_t ored = 0
    return jhash_bytes_or(h, p, n, &ored)


cdef inline uint32_t jhash_str(uint32_t h, str s):
    """Every code point of s; one-byte strings (ASCII / Latin-1, the usual topic or key)
    straight from their buffer."""
    cdef Py_ssize_t i, n = PyUnicode_GET_LENGTH(s)
    cdef Py_UCS4 c
    if PyUnicode_KIND(s) == PyUnicode_1BYTE_KIND:
        return jhash_bytes(h, <const uint8_t*>PyUnicode_DATA(s), n)
    for c in s:
        h = jhash_unit(h, <uint32_t>c)
    return h


cdef inline int32_t index_key_hash(uint32_t h) noexcept nogil:
    """IndexFile.indexKeyHashMethod: Math.abs(hashCode), Integer.MIN_VALUE -> 0."""
    cdef int32_t k = <int32_t>h
    return 0 if k == <int32_t>0x80000000 else (-k if k < 0 else k)
