# included by engine/accel/_page.pyx and _check.pyx: what _page_record.pxi (the record check)
# needs of its includer, declared once: statuses, option flags, the row it fills, byte readers.

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


# ---- bytes ---------------------------------------------------------------------------------
cdef inline int32_t be32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int16_t be16(const uint8_t* p) noexcept nogil:
    return <int16_t>((<uint32_t>p[0] << 8) | <uint32_t>p[1])


cdef inline int64_t be64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t><uint32_t>be32(p) << 32) | <uint64_t><uint32_t>be32(p + 4))
