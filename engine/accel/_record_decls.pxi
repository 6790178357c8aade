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
from engine.accel._bytes cimport be16, be32, be64
from engine.accel._javahash cimport index_key_hash, jhash_bytes_or
