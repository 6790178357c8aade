# cython: language_level=3, boundscheck=False, wraparound=False
"""The compiled Message. engine/format/message.py's PyMessage is its pure twin and the reference:
engine.format.message.Message is one or the other, by a plain assignment there, and the tests
compare every field and every answer of the two.

A record decoded from a page or a read keeps its fixed fields as C integers and its bytes (a
page's: a hold on the mapped buffer, an Anchor, one buffer export as the page has; a single
read's: a copy); topic, body, properties and hosts are made from them when first read.
MessageDecoder.decode builds a MessageExt in ~0.6 us; building every field as a Python object
cost ~2 us, most of it for fields the caller never reads. The engine never shrinks a mapped
file (only grows, zeroes or unlinks), so a held map stays readable.

What a reader asks of every message is answered here in C: the hosts as text, the msgId, the
properties (the names RocketMQ sets are shared str objects, not one new string each), tags,
keys and UNIQ_KEY. The rest (to_json, the decompressed body, key_list) is the pure twin's own
code, called with this object: one definition of each rule. This module imports nothing of the
engine above engine.format."""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8
cdef extern from "Python.h":
    str PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    int PyUnicode_KIND(object o)
    bint PyUnicode_IS_ASCII(object o)
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint64_t
from libc.string cimport memcmp, memcpy

from engine.accel._bytes cimport be16, be32, be64
from engine.accel._seek cimport find_sep
from engine.format.properties import KEYS, RESERVED_PROPERTIES_5, TAGS, UNIQ_KEY
from engine.format.record import MESSAGE_MAGIC_V2, TRANSACTION_NAMES

cdef enum:
    HAVE_TOPIC = 1
    HAVE_BODY = 2
    HAVE_RAW = 4
    HAVE_PROPS = 8
    HAVE_BORN = 16
    HAVE_STORE = 32
    HAVE_ALL = 63

cdef object _KEYS = KEYS, _TAGS = TAGS, _UNIQ = UNIQ_KEY
cdef tuple _TX = tuple(TRANSACTION_NAMES[k] for k in (0x0, 0x4, 0x8, 0xC))


# ---- the pure twin's code, for what is not hot -----------------------------------------------
cdef object _twin = None


cdef object twin():
    """engine.format.message (imported on first use: it imports this module)."""
    global _twin
    if _twin is None:
        import engine.format.message as m
        _twin = m
    return _twin


# ---- property names as shared objects ---------------------------------------------------------
# The names RocketMQ's clients and broker set (MessageConst's reserved set, the 4.9 and 5.x names):
# a parsed name equal to one of them is that str object, so no new string is made for it and
# its hash is already known to every dict that looks it up.
cdef enum:
    MAX_NAME = 32
    MAX_SHARED_VALUE = 64   # longer values are never shared (a key, a trace context)
cdef list _names_by_len = [[] for _ in range(MAX_NAME + 1)]


cdef void _intern_init() except *:
    for name in sorted(RESERVED_PROPERTIES_5 | {"INNER_MULTI_DISPATCH", "CONSUME_CONTEXT_TYPE"}):
        b = name.encode("ascii")
        if len(b) <= MAX_NAME:
            # [name bytes, the shared name, the last value read for it (a str, or None)]
            (<list>_names_by_len[len(b)]).append([b, name, None])


_intern_init()


cdef inline str utf8(const uint8_t* b, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char*>b, n, "replace")


cdef inline str text(const uint8_t* b, Py_ssize_t n):
    """utf8(b, n); ASCII (what property values nearly always are) copied straight into a new str."""
    cdef Py_ssize_t i
    cdef str s
    for i in range(n):
        if b[i] >= 0x80:
            return utf8(b, n)
    s = PyUnicode_New(n, 127)
    memcpy(PyUnicode_DATA(s), b, n)
    return s


cdef list name_entry(const uint8_t* b, Py_ssize_t n):
    """The [bytes, name, last value] entry of a name RocketMQ sets, None for any other name."""
    if n <= MAX_NAME:
        for e in <list>_names_by_len[n]:
            if memcmp(PyBytes_AS_STRING((<list>e)[0]), b, n) == 0:
                return <list>e
    return None


cdef str shared_value(list e, const uint8_t* b, Py_ssize_t n):
    """The value of a RocketMQ-set property: the str made for this name last time when the bytes
    are the same (TAGS, CLUSTER, WAIT, ... repeat message after message), else a new one, kept."""
    last = e[2]
    if (last is not None and PyUnicode_GET_LENGTH(<str>last) == n and PyUnicode_KIND(<str>last) == 1
            and PyUnicode_IS_ASCII(<str>last) and memcmp(PyUnicode_DATA(<str>last), b, n) == 0):
        return <str>last
    cdef str s = text(b, n)
    if n <= MAX_SHARED_VALUE:
        e[2] = s
    return s


cdef dict parse_props(const uint8_t* b, Py_ssize_t p, Py_ssize_t n):
    """engine.format.properties.parse_properties over the raw bytes: segments split by 0x02,
    the name up to the first 0x01, both non-empty, later duplicates win. (0x01 and 0x02 are
    never inside a UTF-8 sequence, so decoding each part gives what decoding the whole does.)
    Names RocketMQ sets are shared str objects, and so is a value equal to the one read for the
    same name before it."""
    cdef dict out = {}
    cdef Py_ssize_t q = p, stop = p + n, seg, k
    cdef list e
    while q <= stop:
        seg = q
        q = find_sep(b, q, stop)
        k = seg
        while k < q and b[k] != 1:
            k += 1
        if seg < k < q - 1:
            e = name_entry(b + seg, k - seg)
            if e is not None:
                out[<str>e[1]] = shared_value(e, b + k + 1, q - k - 1)
            else:
                out[utf8(b + seg, k - seg)] = text(b + k + 1, q - k - 1)
        q += 1
    return out


# ---- hosts and ids as text --------------------------------------------------------------------
cdef inline int put_dec(char* out, int64_t v) noexcept nogil:
    """v in decimal at out (a '-' first when negative); returns the characters written."""
    cdef char tmp[24]
    cdef int n = 0, k = 0
    cdef uint64_t u = <uint64_t>(-v) if v < 0 else <uint64_t>v
    if v < 0:
        out[k] = 45  # '-'
        k += 1
    while True:
        tmp[n] = <char>(48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    while n:
        n -= 1
        out[k] = tmp[n]
        k += 1
    return k


cdef inline int put_hex16(char* out, uint16_t v) noexcept nogil:
    """v in lower-case hex without leading zeros (Java's Integer.toHexString of a group)."""
    cdef int n = 0, sh = 12
    while sh > 0 and (v >> sh) == 0:
        sh -= 4
    while sh >= 0:
        out[n] = b"0123456789abcdef"[(v >> sh) & 15]
        n += 1
        sh -= 4
    return n


cdef str host_text(bytes h):
    """format_host(addr, port) of a stored host (4 or 16 address bytes, a signed 4-byte port),
    written digit by digit (snprintf took ~3,000 instructions a host)."""
    return host_at(<const uint8_t*>PyBytes_AS_STRING(h), PyBytes_GET_SIZE(h))


# The last IPv4 host made into text, one for born hosts and one for store hosts: a store's
# messages come from a few producers and one broker, so most hosts are the str made for the
# message before (no bytes and no str made, ~1,300 instructions a fully read message).
cdef uint64_t _host_key[2]
cdef list _host_str = [None, None]


cdef str host_cached(const uint8_t* p, Py_ssize_t n, int which):
    cdef uint64_t k
    if n != 8:
        return host_at(p, n)
    memcpy(&k, p, 8)
    last = _host_str[which]
    if last is not None and _host_key[which] == k:
        return <str>last
    cdef str s = host_at(p, n)
    _host_key[which] = k
    _host_str[which] = s
    return s


cdef object _topic_b = None, _topic_s = None


cdef str topic_cached(const uint8_t* p, Py_ssize_t n):
    """utf8 of a record's topic, the str made for the record before when the bytes are the same
    (a page is one queue's: one topic)."""
    global _topic_b, _topic_s
    b = _topic_b
    if b is not None and PyBytes_GET_SIZE(<bytes>b) == n and memcmp(PyBytes_AS_STRING(<bytes>b), p, n) == 0:
        return <str>_topic_s
    cdef str s = utf8(p, n)
    _topic_b, _topic_s = PyBytes_FromStringAndSize(<const char*>p, n), s
    return s


cdef str host_at(const uint8_t* p, Py_ssize_t n):
    cdef char buf[80]
    cdef int k = 0, i
    if n == 8:
        for i in range(4):
            k += put_dec(buf + k, p[i])
            buf[k] = 58 if i == 3 else 46  # ':' after the last byte, '.' between
            k += 1
        k += put_dec(buf + k, be32(p + 4))
    elif n == 20:
        buf[0] = 91  # '['
        k = 1
        for i in range(8):
            k += put_hex16(buf + k, <uint16_t>be16(p + 2 * i))
            buf[k] = 58  # ':'
            k += 1
        buf[k - 1] = 93  # ']'
        buf[k] = 58
        k += 1
        k += put_dec(buf + k, be32(p + 16))
    else:  # not a stored host's size (a hand-made Message): the reference
        h = PyBytes_FromStringAndSize(<const char*>p, n)
        return twin().format_host(h[:n - 4], int.from_bytes(h[n - 4:], "big", signed=True))
    return PyUnicode_DecodeASCII(buf, k, NULL)


cdef const char* HEX = b"0123456789ABCDEF"


cdef str msg_id_of(const uint8_t* p, Py_ssize_t n, int64_t phys):
    """The offset message id: the store host's n bytes and the stored physical offset, upper hex
    (the put loop's answers use it too)."""
    cdef Py_ssize_t i
    cdef char buf[64]
    cdef uint8_t v
    if n > 24:
        return (p[:n] + phys.to_bytes(8, "big", signed=True)).hex().upper()
    for i in range(n):
        buf[2 * i] = HEX[p[i] >> 4]
        buf[2 * i + 1] = HEX[p[i] & 15]
    for i in range(8):
        v = <uint8_t>((<uint64_t>phys) >> (56 - 8 * i))
        buf[2 * (n + i)] = HEX[v >> 4]
        buf[2 * (n + i) + 1] = HEX[v & 15]
    return PyUnicode_DecodeASCII(buf, 2 * (n + 8), NULL)


# ---- the buffer hold --------------------------------------------------------------------------
@cython.final
cdef class Anchor:
    """One buffer export of a mapped file's view: while messages hold it, the map stays."""

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.v)


cdef Anchor new_anchor(obj):
    cdef Anchor a = Anchor.__new__(Anchor)
    PyObject_GetBuffer(obj, &a.v, PyBUF_SIMPLE)
    a.held = True
    return a


# ---- the Message ------------------------------------------------------------------------------
@cython.final
cdef class Message:
    """One decoded record, named like RocketMQ's MessageExt: PyMessage's fields, constructor
    and answers."""

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

    # ---- the lazy parts ------------------------------------------------------------------------
    cdef object get_topic(self):
        if not self._have & HAVE_TOPIC:
            self._topic = topic_cached(self._b + self._tp, self._tl)
            self._have |= HAVE_TOPIC
        return self._topic

    @property
    def topic(self):
        return self.get_topic()

    @topic.setter
    def topic(self, v):
        self._topic = v
        self._have |= HAVE_TOPIC

    cdef object get_body(self):
        if not self._have & HAVE_BODY:
            self._body = PyBytes_FromStringAndSize(<const char*>self._b + self._bp, self._bl) if self._bl > 0 else b""
            self._have |= HAVE_BODY
        return self._body

    @property
    def body(self):
        return self.get_body()

    @body.setter
    def body(self, v):
        self._body = v
        self._have |= HAVE_BODY

    cdef object get_raw(self):
        if not self._have & HAVE_RAW:
            self._raw = utf8(self._b + self._pp, self._pl) if self._pl > 0 else ""
            self._have |= HAVE_RAW
        return self._raw

    @property
    def propertiesRaw(self):
        return self.get_raw()

    @propertiesRaw.setter
    def propertiesRaw(self, v):
        self._raw = v
        self._have |= HAVE_RAW

    cdef object props(self):
        if not self._have & HAVE_PROPS:
            self._props = parse_props(self._b, self._pp, self._pl) if self._pl > 0 else {}
            self._have |= HAVE_PROPS
        return self._props

    @property
    def properties(self):
        return self.props()

    @properties.setter
    def properties(self, v):
        self._props = v
        self._have |= HAVE_PROPS

    cdef bytes born(self):
        if not self._have & HAVE_BORN:
            self._born = PyBytes_FromStringAndSize(<const char*>self._b + self._hp, self._hl)
            self._have |= HAVE_BORN
        return self._born

    @property
    def bornHostBytes(self):
        return self.born()

    @bornHostBytes.setter
    def bornHostBytes(self, v):
        self._born = v
        self._have |= HAVE_BORN

    cdef bytes stored(self):
        if not self._have & HAVE_STORE:
            self._store = PyBytes_FromStringAndSize(<const char*>self._b + self._sp, self._sl)
            self._have |= HAVE_STORE
        return self._store

    @property
    def storeHostBytes(self):
        return self.stored()

    @storeHostBytes.setter
    def storeHostBytes(self, v):
        self._store = v
        self._have |= HAVE_STORE

    # ---- what a reader asks of every message ----------------------------------------------------
    cdef str born_text(self):
        if self._have & HAVE_BORN:
            return host_text(self._born)
        return host_cached(self._b + self._hp, self._hl, 0)

    cdef str store_text(self):
        if self._have & HAVE_STORE:
            return host_text(self._store)
        return host_cached(self._b + self._sp, self._sl, 1)

    cdef str msg_id(self):
        cdef bytes h
        if self._have & HAVE_STORE:
            h = self._store
            return msg_id_of(<const uint8_t*>PyBytes_AS_STRING(h), PyBytes_GET_SIZE(h), self.physicalOffsetField)
        return msg_id_of(self._b + self._sp, self._sl, self.physicalOffsetField)

    @property
    def bornHost(self):
        return self.born_text()

    @property
    def storeHost(self):
        return self.store_text()

    @property
    def msgId(self):
        """Offset message id: store host address, port, stored physical offset, upper hex."""
        return self.msg_id()

    @property
    def uniqKey(self):
        return self.props().get(_UNIQ)

    @property
    def tags(self):
        return self.props().get(_TAGS)

    @property
    def keys(self):
        return self.props().get(_KEYS)

    @property
    def transactionType(self):
        return _TX[(self.sysFlag & 0x0C) >> 2]

    @property
    def end_offset(self):
        return self.commitLogOffset + self.storeSize

    @property
    def is_v2(self):
        return self.magicCode == MESSAGE_MAGIC_V2

    def __getattribute__(self, name):
        return _getattro(self, name)   # (the table below; any other name: the generic lookup)

    # ---- the rest: the pure twin's code ----------------------------------------------------------
    @property
    def key_list(self):
        return twin().PyMessage.key_list.__get__(self)

    def body_decompressed(self):
        """The body as a consumer would see it (RocketMQ compresses; the broker never undoes it)."""
        return twin().PyMessage.body_decompressed(self)

    def to_json(self, with_body=True):
        return twin().PyMessage.to_json(self, with_body)

    def _fields(self):
        return (self.topic, self.queueId, self.queueOffset, self.commitLogOffset, self.storeSize, self.bodyCRC,
                self.flag, self.sysFlag, self.bornTimestamp, self.born(), self.storeTimestamp,
                self.stored(), self.reconsumeTimes, self.preparedTransactionOffset, self.body,
                self.propertiesRaw, self.props(), self.magicCode, self.physicalOffsetField, self.tagsCode)

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._fields() == (<Message>other)._fields()

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __repr__(self):
        return "Message(" + ", ".join(f"{n}={v!r}" for n, v in zip(twin().FIELD_NAMES, self._fields())) + ")"

    def __reduce__(self):
        return type(self), self._fields()


# ---- attribute reads without the descriptor walk --------------------------------------------------
# CPython does not specialize reads of a getset descriptor: each read of a field above walks
# the type's dict, the descriptor and a wrapper (~25 ns). Message.__getattribute__ (Cython
# makes it the type's getattro slot) answers the names below from a table keyed by the name
# object (the interned str every code object uses), calling the same C code as the
# properties; any other name, or a str that is not the interned one, takes
# PyObject_GenericGetAttr.
from cpython.object cimport PyObject
from sys import intern
cdef extern from "Python.h":
    object PyObject_GenericGetAttr(object o, object name)

cdef tuple _ATTRS = tuple(intern(n) for n in ("queueOffset", "commitLogOffset", "bornTimestamp", "storeTimestamp", "preparedTransactionOffset",
                     "physicalOffsetField", "tagsCode", "queueId", "storeSize", "bodyCRC", "flag", "sysFlag",
                     "reconsumeTimes", "magicCode", "topic", "body", "propertiesRaw", "properties", "bornHostBytes",
                     "storeHostBytes", "bornHost", "storeHost", "msgId", "uniqKey", "tags", "keys"))
cdef enum:
    ATTR_SLOTS = 128   # a power of two, over twice the names
cdef PyObject* _attr_key[ATTR_SLOTS]
cdef int _attr_id[ATTR_SLOTS]


cdef object _field(Message m, int i):
    if i < 14:
        if i == 0: return m.queueOffset
        if i == 1: return m.commitLogOffset
        if i == 2: return m.bornTimestamp
        if i == 3: return m.storeTimestamp
        if i == 4: return m.preparedTransactionOffset
        if i == 5: return m.physicalOffsetField
        if i == 6: return m.tagsCode
        if i == 7: return m.queueId
        if i == 8: return m.storeSize
        if i == 9: return m.bodyCRC
        if i == 10: return m.flag
        if i == 11: return m.sysFlag
        if i == 12: return m.reconsumeTimes
        return m.magicCode
    if i == 14: return m.get_topic()
    if i == 15: return m.get_body()
    if i == 16: return m.get_raw()
    if i == 17: return m.props()
    if i == 18: return m.born()
    if i == 19: return m.stored()
    if i == 20: return m.born_text()
    if i == 21: return m.store_text()
    if i == 22: return m.msg_id()
    if i == 23: return m.props().get(_UNIQ)
    if i == 24: return m.props().get(_TAGS)
    return m.props().get(_KEYS)


cdef object _getattro(object self, object name):
    cdef size_t h = (<size_t><PyObject*>name >> 4) & (ATTR_SLOTS - 1)
    cdef PyObject* k
    while True:
        k = _attr_key[h]
        if k == <PyObject*>name:
            return _field(<Message>self, _attr_id[h])
        if k == NULL:
            return PyObject_GenericGetAttr(self, name)
        h = (h + 1) & (ATTR_SLOTS - 1)


cdef void _fill_table() except *:
    cdef size_t h
    cdef int i
    for i in range(len(_ATTRS)):
        name = _ATTRS[i]
        h = (<size_t><PyObject*>name >> 4) & (ATTR_SLOTS - 1)
        while _attr_key[h] != NULL:
            h = (h + 1) & (ATTR_SLOTS - 1)
        _attr_key[h], _attr_id[h] = <PyObject*>name, i


_fill_table()
