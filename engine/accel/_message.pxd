# The compiled Message's fields, for the kernels that build one (engine/accel/_message.pyx says
# why it is lazy). A kernel makes one with Message.__new__(Message), fills the integers and the
# positions of the lazy parts, and leaves `_have` at 0.
from libc.stdint cimport int32_t, int64_t, uint8_t


cdef class Anchor:
    cdef Py_buffer v
    cdef bint held


cdef Anchor new_anchor(obj)


cdef class Message:
    cdef public int64_t queueOffset, commitLogOffset, bornTimestamp, storeTimestamp
    cdef public int64_t preparedTransactionOffset, physicalOffsetField, tagsCode
    cdef public int32_t queueId, storeSize, bodyCRC, flag, sysFlag, reconsumeTimes, magicCode
    cdef object _topic, _body, _raw, _props, _born, _store
    cdef object _src                 # what keeps _b readable: an Anchor on the map, or a copy
    cdef const uint8_t* _b           # the record's first byte in it
    cdef int _have                   # HAVE_* bits: which parts are made
    cdef int32_t _tp, _tl, _bp, _bl, _pp, _pl, _hp, _hl, _sp, _sl
    cdef object props(self)
    cdef bytes born(self)
    cdef bytes stored(self)
    cdef object get_topic(self)
    cdef object get_body(self)
    cdef object get_raw(self)
    cdef str born_text(self)
    cdef str store_text(self)
    cdef str msg_id(self)


cdef str utf8(const uint8_t* b, Py_ssize_t n)
cdef str msg_id_of(const uint8_t* p, Py_ssize_t n, int64_t phys)
cdef dict parse_props(const uint8_t* b, Py_ssize_t p, Py_ssize_t n)
