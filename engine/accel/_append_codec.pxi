# included by engine/accel/_append.pyx: bytes, Java's String.hashCode, the index put and the
# record's parts

# ---- bytes ---------------------------------------------------------------------------------
from engine.accel._bytes cimport be32, put_be32, put_be64


cdef inline int64_t now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


# ---- Java String.hashCode (engine/accel/_javahash.pxd) --------------------------------------
from engine.accel._javahash cimport index_key_hash, jhash_bytes, jhash_str, jhash_unit


def java_hash(str s):
    return <int32_t>jhash_str(0, s)


# ---- the index ---------------------------------------------------------------------------------
cdef struct IndexState:
    uint8_t* mm
    int64_t entry_base
    int64_t slot_num
    int64_t* h    # IndexHeader.values: beginTs, endTs, beginPhy, endPhy, hashSlotCount, indexCount


cdef void index_put(IndexState* s, int32_t key_hash, int64_t phy, int64_t store_ts) noexcept nogil:
    """IndexFile.put_key (room checked by the caller): entry, slot, then the header."""
    cdef int64_t* h = s.h
    cdef uint8_t* slot = s.mm + INDEX_HEADER_SIZE + (key_hash % s.slot_num) * INDEX_SLOT_SIZE
    cdef int64_t prev = be32(slot), count = h[5]
    cdef int64_t diff
    if prev <= 0 or prev > count:
        prev = 0
    diff = store_ts - h[0]
    diff = diff // 1000 if diff >= 0 else -((-diff) // 1000)
    if h[0] <= 0 or diff < 0:
        diff = 0
    elif diff > 0x7FFFFFFF:
        diff = 0x7FFFFFFF
    cdef uint8_t* e = s.mm + s.entry_base + count * INDEX_ENTRY_SIZE
    put_be32(e + OFF_ENTRY_HASH, key_hash)
    put_be64(e + OFF_ENTRY_PHY, phy)
    put_be32(e + OFF_ENTRY_TIMEDIFF, diff)
    put_be32(e + OFF_ENTRY_PREV, prev)
    put_be32(slot, count)
    if count <= 1:
        h[2] = phy
        h[0] = store_ts
    if prev == 0:
        h[4] += 1
    h[5] = count + 1
    h[3] = phy
    h[1] = store_ts
    put_be64(s.mm + OFF_BEGIN_TIMESTAMP, h[0])
    put_be64(s.mm + OFF_END_TIMESTAMP, h[1])
    put_be64(s.mm + OFF_BEGIN_PHY_OFFSET, h[2])
    put_be64(s.mm + OFF_END_PHY_OFFSET, h[3])
    put_be32(s.mm + OFF_HASH_SLOT_COUNT, h[4])
    put_be32(s.mm + OFF_INDEX_COUNT, h[5])


cdef int write_crc_tail(uint8_t* p, Py_ssize_t total) except -1:
    """5.x __CRC32#: CRC of the whole record but its 20-byte tail (TOTALSIZE included even
    while the first record's is still unwritten), 10 digits LSD first."""
    cdef uint8_t head[4]
    put_be32(head, total)
    cdef int64_t c = _crc32((<char*>p)[4:total - PROP_CRC_TAIL_SIZE], _crc32((<char*>head)[:4])) & 0x7FFFFFFF
    cdef uint8_t* d = p + total - PROP_CRC_TAIL_SIZE + 9  # the digits, after `__CRC32#` 0x01
    cdef int i
    for i in range(10):
        d[i] = 48 + c % 10
        c //= 10
    return 0


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL


cdef bint utf8(str s, const char** out, Py_ssize_t* n):
    """s's UTF-8, cached in s (alive as long as s); False for lone surrogates (the Python
    path then refuses the message with its own error)."""
    try:
        out[0] = PyUnicode_AsUTF8AndSize(s, n)
    except UnicodeError:
        return False
    return True


cdef inline int count_tokens(str keys):
    """How many KEYS tokens Java's split(" ") gives, empty ones skipped."""
    cdef Py_ssize_t i, n = len(keys)
    cdef int count = 0
    cdef bint inside = False
    for i in range(n):
        if <Py_UCS4>keys[i] == 32:
            inside = False
        elif not inside:
            inside = True
            count += 1
    return count


cdef void token_hashes(uint32_t topic_hash, str keys, int32_t* out):
    """The index hash of "topic#token" for every KEYS token (count_tokens of them), hashed in
    place (no split, no strings): once per put, as every message of a batch has the same keys."""
    cdef Py_ssize_t i, n = len(keys), k = 0
    cdef uint32_t h = 0, c
    cdef bint inside = False
    for i in range(n + 1):
        c = 32 if i == n else <uint32_t>(<Py_UCS4>keys[i])
        if c == 32:
            if inside:
                out[k] = index_key_hash(h)
                k += 1
            inside = False
            continue
        if not inside:
            inside = True
            h = topic_hash * 31 + 35
        h = jhash_unit(h, c)


cdef class _Topic:
    cdef bytes name_b
    cdef uint32_t hash
    cdef bint in_table
    cdef long qcount          # writeQueueNums from topics.json; 0: ask the writer every time
    cdef dict queues          # queue id -> (key tuple, ConsumeQueue)


# A plain message's PROPERTIES parts around its UNIQ_KEY (the strings stay alive in put).
cdef struct Parts:
    const char* tags
    Py_ssize_t tags_len
    bint has_tags
    const char* keys
    Py_ssize_t keys_len
    bint has_keys
    int nkeys                # index keys per message: UNIQ_KEY + KEYS tokens
    int64_t tags_code
    Py_ssize_t plen          # TAGS and KEYS entries


cdef inline int32_t index_uniq(uint32_t topic_hash, bytes prefix, const char* tail12) noexcept:
    """Index hash of "topic#UNIQ_KEY" from the ASCII prefix and the 12 characters after it."""
    cdef uint32_t h = jhash_bytes(topic_hash * 31 + 35, <const uint8_t*>(<const char*>prefix), len(prefix))
    return index_key_hash(jhash_bytes(h, <const uint8_t*>tail12, 12))
