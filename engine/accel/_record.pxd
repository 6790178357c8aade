# The record check every kernel shares (engine/accel/_record.pyx: check_record in C, CRC-32):
# its statuses, option flags, the row it fills and its functions, declared once for _page and
# _check (each cimports them; the calls go through the module's C API).
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcmp

# record statuses (check_record's RecordStatus, plus S_PY: "ask check_record")
cdef enum:
    S_MESSAGE = 0
    S_EOF = 1
    S_INVALID = 2
    S_MISMATCH = 3
    S_PY = 4

# option flags
cdef enum:
    F_CRC = 1
    F_FORCE = 2
    F_V2 = 4

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


cdef struct KeySpans:
    # where the properties' UNIQ_KEY and KEYS values are ([u0, u1), [k0, k1); -1: absent), noted
    # by check_keys as it parses the properties (check's walk hashes the keys without a second parse)
    Py_ssize_t u0, u1, k0, k1


cdef inline bint crc_tail_at(const uint8_t* t) noexcept nogil:
    """The whole-record CRC property's head ("__CRC32#" 0x01) at t."""
    return memcmp(t, b"__CRC32#\x01", 9) == 0


cdef uint32_t crc32(const uint8_t* p, Py_ssize_t n) noexcept nogil
cdef int verify_prop_crc(const uint8_t* b, Py_ssize_t pos, int32_t total) noexcept nogil
cdef int check_keys(const uint8_t* b, Py_ssize_t L, Py_ssize_t pos, Py_ssize_t limit, int flags,
                    Row* r, int32_t* size, KeySpans* keys) noexcept nogil


cdef inline int check(const uint8_t* b, Py_ssize_t L, Py_ssize_t pos, Py_ssize_t limit, int flags,
                      Row* r, int32_t* size) noexcept nogil:
    """check_record(buf, pos, limit, ...) for buf of length L: the status, *size as
    RecordResult.size; for MESSAGE / S_PY the fixed fields in *r (commitLogOffset, file and
    queue offset left to the caller)."""
    return check_keys(b, L, pos, limit, flags, r, size, NULL)
