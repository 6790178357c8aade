# Byte order for every kernel, written once: the store's big-endian fields (be16/be32/be64
# read, put_be32/put_be64 write, signed as Java's getShort/getInt/getLong) and the query
# copy's little-endian records (le32/le64). Inline only, so `from engine.accel._bytes cimport
# ...` imports nothing at run time. Unaligned access through memcpy, one byte swap each.
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

cdef extern from *:
    """
    #include <stdint.h>
    #if defined(_MSC_VER)
    #include <stdlib.h>
    #define RMQ_BSWAP16(x) _byteswap_ushort(x)
    #define RMQ_BSWAP32(x) _byteswap_ulong(x)
    #define RMQ_BSWAP64(x) _byteswap_uint64(x)
    #else
    #define RMQ_BSWAP16(x) __builtin_bswap16(x)
    #define RMQ_BSWAP32(x) __builtin_bswap32(x)
    #define RMQ_BSWAP64(x) __builtin_bswap64(x)
    #endif
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    #define RMQ_FROM_BE16(x) (x)
    #define RMQ_FROM_BE32(x) (x)
    #define RMQ_FROM_BE64(x) (x)
    #define RMQ_FROM_LE32(x) RMQ_BSWAP32(x)
    #define RMQ_FROM_LE64(x) RMQ_BSWAP64(x)
    #else
    #define RMQ_FROM_BE16(x) RMQ_BSWAP16(x)
    #define RMQ_FROM_BE32(x) RMQ_BSWAP32(x)
    #define RMQ_FROM_BE64(x) RMQ_BSWAP64(x)
    #define RMQ_FROM_LE32(x) (x)
    #define RMQ_FROM_LE64(x) (x)
    #endif
    """
    uint16_t RMQ_FROM_BE16(uint16_t x) noexcept nogil
    uint32_t RMQ_FROM_BE32(uint32_t x) noexcept nogil
    uint64_t RMQ_FROM_BE64(uint64_t x) noexcept nogil
    uint32_t RMQ_FROM_LE32(uint32_t x) noexcept nogil
    uint64_t RMQ_FROM_LE64(uint64_t x) noexcept nogil


cdef inline int16_t be16(const uint8_t* p) noexcept nogil:
    cdef uint16_t v
    memcpy(&v, p, 2)
    return <int16_t>RMQ_FROM_BE16(v)


cdef inline int32_t be32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return <int32_t>RMQ_FROM_BE32(v)


cdef inline int64_t be64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return <int64_t>RMQ_FROM_BE64(v)


cdef inline int32_t le32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return <int32_t>RMQ_FROM_LE32(v)


cdef inline int64_t le64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return <int64_t>RMQ_FROM_LE64(v)


cdef inline void put_be32(uint8_t* p, int64_t v) noexcept nogil:
    """The low 32 bits of v, big-endian (ByteBuffer.putInt of an (int) cast)."""
    cdef uint32_t u = RMQ_FROM_BE32(<uint32_t>v)
    memcpy(p, &u, 4)


cdef inline void put_be64(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint64_t u = RMQ_FROM_BE64(<uint64_t>v)
    memcpy(p, &u, 8)
