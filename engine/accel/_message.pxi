# included by engine/accel/_page.pyx: the compiled Message (engine.format.message's dataclass is
# the pure twin). A record decoded from a page or a read keeps its fixed fields as C integers and
# its bytes (a page's: a hold on the mapped buffer, an Anchor, one buffer export as the page has;
# a single read's: a copy); topic, body, properties and hosts are made from them when first read.
# MessageDecoder.decode builds a MessageExt in ~0.6 us; building every field as a Python object
# cost ~2 us, most of it for fields the caller never reads. The engine never shrinks a mapped
# file (only grows, zeroes or unlinks), so a held map stays readable.

import cython
from cpython.bytes cimport PyBytes_AS_STRING


@cython.final
cdef class Anchor:
    """One buffer export of a mapped file's view: while messages hold it, the map stays."""
    cdef Py_buffer v
    cdef bint held

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.v)


cdef Anchor new_anchor(obj):
    cdef Anchor a = Anchor.__new__(Anchor)
    PyObject_GetBuffer(obj, &a.v, PyBUF_SIMPLE)
    a.held = True
    return a

cdef enum:
    HAVE_TOPIC = 1
    HAVE_BODY = 2
    HAVE_RAW = 4
    HAVE_PROPS = 8
    HAVE_BORN = 16
    HAVE_STORE = 32
    HAVE_ALL = 63

cdef tuple FIELD_NAMES = ()   # engine.format.message.FIELD_NAMES (bound with the class)


cdef class MessageBase:
    """The fields of engine.format.message.Message (same names, order and constructor)."""
    cdef public int64_t queueOffset, commitLogOffset, bornTimestamp, storeTimestamp
    cdef public int64_t preparedTransactionOffset, physicalOffsetField, tagsCode
    cdef public int32_t queueId, storeSize, bodyCRC, flag, sysFlag, reconsumeTimes, magicCode
    cdef object _topic, _body, _raw, _props, _born, _store
    cdef object _src                 # what keeps _b readable: an Anchor on the map, or a copy
    cdef const uint8_t* _b           # the record's first byte in it
    cdef int _have                   # HAVE_* bits: which parts are made
    cdef int32_t _tp, _tl, _bp, _bl, _pp, _pl, _hp, _hl, _sp, _sl

    def __init__(self, topic, queueId, queueOffset, commitLogOffset, storeSize, bodyCRC, flag, sysFlag,
                 bornTimestamp, bornHostBytes, storeTimestamp, storeHostBytes, reconsumeTimes,
                 preparedTransactionOffset, body, propertiesRaw, properties, magicCode,
                 physicalOffsetField, tagsCode=0):
        self._topic, self._born, self._store = topic, bornHostBytes, storeHostBytes
        self._body, self._raw, self._props = body, propertiesRaw, properties
        self._have = HAVE_ALL
        self.queueId, self.queueOffset, self.commitLogOffset = queueId, queueOffset, commitLogOffset
        self.storeSize, self.bodyCRC, self.flag, self.sysFlag = storeSize, bodyCRC, flag, sysFlag
        self.bornTimestamp, self.storeTimestamp = bornTimestamp, storeTimestamp
        self.reconsumeTimes, self.preparedTransactionOffset = reconsumeTimes, preparedTransactionOffset
        self.magicCode, self.physicalOffsetField, self.tagsCode = magicCode, physicalOffsetField, tagsCode

    cdef inline const uint8_t* rec(self):
        return self._b

    @property
    def topic(self):
        if not self._have & HAVE_TOPIC:
            self._topic = utf8(self.rec() + self._tp, self._tl)
            self._have |= HAVE_TOPIC
        return self._topic

    @topic.setter
    def topic(self, v):
        self._topic = v
        self._have |= HAVE_TOPIC

    @property
    def body(self):
        if not self._have & HAVE_BODY:
            self._body = PyBytes_FromStringAndSize(<const char*>self.rec() + self._bp, self._bl) if self._bl > 0 else b""
            self._have |= HAVE_BODY
        return self._body

    @body.setter
    def body(self, v):
        self._body = v
        self._have |= HAVE_BODY

    @property
    def propertiesRaw(self):
        if not self._have & HAVE_RAW:
            self._raw = utf8(self.rec() + self._pp, self._pl) if self._pl > 0 else ""
            self._have |= HAVE_RAW
        return self._raw

    @propertiesRaw.setter
    def propertiesRaw(self, v):
        self._raw = v
        self._have |= HAVE_RAW

    @property
    def properties(self):
        if not self._have & HAVE_PROPS:
            self._props = parse_props(self.rec(), self._pp, self._pl) if self._pl > 0 else {}
            self._have |= HAVE_PROPS
        return self._props

    @properties.setter
    def properties(self, v):
        self._props = v
        self._have |= HAVE_PROPS

    @property
    def bornHostBytes(self):
        if not self._have & HAVE_BORN:
            self._born = PyBytes_FromStringAndSize(<const char*>self.rec() + self._hp, self._hl)
            self._have |= HAVE_BORN
        return self._born

    @bornHostBytes.setter
    def bornHostBytes(self, v):
        self._born = v
        self._have |= HAVE_BORN

    @property
    def storeHostBytes(self):
        if not self._have & HAVE_STORE:
            self._store = PyBytes_FromStringAndSize(<const char*>self.rec() + self._sp, self._sl)
            self._have |= HAVE_STORE
        return self._store

    @storeHostBytes.setter
    def storeHostBytes(self, v):
        self._store = v
        self._have |= HAVE_STORE

    def _fields(self):
        return (self.topic, self.queueId, self.queueOffset, self.commitLogOffset, self.storeSize, self.bodyCRC,
                self.flag, self.sysFlag, self.bornTimestamp, self.bornHostBytes, self.storeTimestamp,
                self.storeHostBytes, self.reconsumeTimes, self.preparedTransactionOffset, self.body,
                self.propertiesRaw, self.properties, self.magicCode, self.physicalOffsetField, self.tagsCode)

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._fields() == (<MessageBase>other)._fields()

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __repr__(self):
        return f"{type(self).__qualname__}(" + ", ".join(
            f"{n}={v!r}" for n, v in zip(FIELD_NAMES, self._fields())) + ")"

    def __reduce__(self):
        return type(self), self._fields()


cdef object _LazyMessage = None   # engine.format.message.Message (a Python subclass of MessageBase)


def bind_message_class(cls, tuple names):
    """engine.format.message hands over its Message (it subclasses MessageBase) and the field
    names in constructor order."""
    global _LazyMessage, FIELD_NAMES
    _LazyMessage, FIELD_NAMES = cls, names


cdef object lazy_message(const uint8_t* b, Py_ssize_t start, const Row* r, int64_t offset, Anchor src):
    """Message for the record at b[start:] whose check wrote `r` (positions in r count from b).
    With `src` (an Anchor on b's map) the lazy parts are read from the map (a page's messages:
    the bulk path); without, from a copy of the record made here, so the message is a snapshot
    (single reads and key queries: what check, recovery and tools compare against later)."""
    cdef MessageBase m = <MessageBase>rmq_new_instance(_LazyMessage)
    cdef Py_ssize_t bh = HOST_V6 if r.sysFlag & BORNHOST_V6_FLAG else HOST_V4
    cdef Py_ssize_t sh = HOST_V6 if r.sysFlag & STOREHOST_V6_FLAG else HOST_V4
    if src is not None:
        m._src = src
        m._b = b + start
    else:
        m._src = PyBytes_FromStringAndSize(<const char*>b + start, r.storeSize)
        m._b = <const uint8_t*>PyBytes_AS_STRING(m._src)
    m.queueOffset, m.commitLogOffset, m.bornTimestamp = r.queueOffset, offset, r.bornTimestamp
    m.storeTimestamp, m.preparedTransactionOffset = r.storeTimestamp, r.preparedTransactionOffset
    m.physicalOffsetField, m.tagsCode = r.physicalOffsetField, r.tagsCode
    m.queueId, m.storeSize, m.bodyCRC, m.flag, m.sysFlag = r.queueId, r.storeSize, r.bodyCRC, r.flag, r.sysFlag
    m.reconsumeTimes, m.magicCode = r.reconsumeTimes, r.magicCode
    m._tp, m._tl = <int32_t>(r.topicPos - start), r.topicLength
    m._bp, m._bl = <int32_t>(r.bodyPos - start), r.bodyLength
    m._pp, m._pl = <int32_t>(r.propertiesPos - start), r.propertiesLength
    m._hp, m._hl = OFF_BORNHOST, <int32_t>bh
    m._sp, m._sl = <int32_t>(OFF_BORNHOST + bh + (OFF_STOREHOST - OFF_BORNHOST)), <int32_t>sh
    m._have = 0
    return m


cdef object page_message(Anchor src, const Row* r):
    """Message for a page row (positions in the file src holds)."""
    cdef Py_ssize_t bh = HOST_V6 if r.sysFlag & BORNHOST_V6_FLAG else HOST_V4
    cdef Py_ssize_t sh = HOST_V6 if r.sysFlag & STOREHOST_V6_FLAG else HOST_V4
    return lazy_message(<const uint8_t*>src.v.buf, r.bodyPos - OFF_BODY - bh - sh, r, r.commitLogOffset, src)
