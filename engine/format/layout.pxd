# The byte layouts of engine/format/record.py, cq_unit.py and index_layout.py for the compiled
# kernels (engine/accel/*.pyx: `from engine.format.layout cimport ...`). Compile-time constants
# only, so nothing is imported at run time. tests/test_format_layout.py checks every value here
# against the Python module that declares it.

cdef enum:
    # commitlog record (engine/format/record.py)
    MESSAGE_MAGIC_V1 = -626843481
    MESSAGE_MAGIC_V2 = -626843477
    BLANK_MAGIC = -875286124
    BLANK_RECORD_MIN = 8
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    OFF_TOTALSIZE = 0
    OFF_MAGICCODE = 4
    OFF_BODYCRC = 8
    OFF_QUEUEID = 12
    OFF_FLAG = 16
    OFF_QUEUEOFFSET = 20
    OFF_PHYSICALOFFSET = 28
    OFF_SYSFLAG = 36
    OFF_BORNTIMESTAMP = 40
    OFF_BORNHOST = 48
    HEAD_SIZE = 48
    OFF_STORETIMESTAMP = 48
    OFF_STOREHOST = 56
    OFF_RECONSUMETIMES = 56
    OFF_PREPAREDTXOFFSET = 60
    OFF_BODYLENGTH = 68
    OFF_BODY = 72
    RECORD_FIXED = 74
    HOST_V4 = 8
    HOST_V6 = 20
    BORNHOST_V6_FLAG = 0x10
    STOREHOST_V6_FLAG = 0x20
    PROP_CRC_TAIL_SIZE = 20
    MIN_RECORD_SIZE = 92
    # ConsumeQueue unit (engine/format/cq_unit.py)
    CQ_UNIT_SIZE = 20
    OFF_UNIT_PHY = 0
    OFF_UNIT_SIZE = 8
    OFF_UNIT_TAGS = 12
    MAX_FILTER_MESSAGE_SIZE = 16000
    FILLER_SIZE = 0x7FFFFFFF
    # IndexFile (engine/format/index_layout.py)
    INDEX_HEADER_SIZE = 40
    INDEX_SLOT_SIZE = 4
    INDEX_ENTRY_SIZE = 20
    OFF_BEGIN_TIMESTAMP = 0
    OFF_END_TIMESTAMP = 8
    OFF_BEGIN_PHY_OFFSET = 16
    OFF_END_PHY_OFFSET = 24
    OFF_HASH_SLOT_COUNT = 32
    OFF_INDEX_COUNT = 36
    OFF_ENTRY_HASH = 0
    OFF_ENTRY_PHY = 4
    OFF_ENTRY_TIMEDIFF = 12
    OFF_ENTRY_PREV = 16
    # the slot of a negative (damaged) keyHash: none (index_layout.slot_of)
    NO_SLOT = -1
    ACCEL_DIR_SLOTS = 3
    ACCEL_DIR_LINE = 64
    OFF_ACCEL_LINE_LENGTHS = 4
    OFF_ACCEL_LINE_RECORDS = 8
    ACCEL_MAX_CHAIN = 255
    ACCEL_RECORD_SIZE = 16
    OFF_ACCEL_HASH = 0
    OFF_ACCEL_TIMEDIFF = 4
    OFF_ACCEL_PHY = 8
