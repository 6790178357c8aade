# cython: language_level=3
"""The compiled QueryResult and GetMessageResult. engine/format/query_result.py's PyQueryResult
and get_result.py's PyGetMessageResult are their pure twins and the references (each module's
name is one or the other, by a plain assignment there): the same fields, constructor, equality
and JSON. A raw key query is a few
hundred nanoseconds of C; filling a dataclass through its Python __init__ or six attribute
writes by name cost as much again. This module imports nothing of the engine above
engine.format (the twin's module, on first use).

Also what a put answers, made by the put loop (engine/accel/_append.pyx): a PutResult (the
tuple engine/format/put_result.py declares) and PutResults, a batch's lazy sequence of them."""
cimport cython
from cpython.mem cimport PyMem_Free
from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcpy

from engine.accel._message cimport msg_id_of
from engine.accel._objects cimport rmq_new_as
from engine.format.put_result import PutResult

cdef dict _twins = {}


cdef object twin(str module):
    """The pure twin's module (engine.format.query_result / get_result), imported on first use:
    it imports this one."""
    m = _twins.get(module)
    if m is None:
        import importlib
        m = _twins[module] = importlib.import_module(module)
    return m


cdef class Record:
    """Equality, repr, pickling and JSON of a compiled result record, from its fields in its
    twin's FIELD_NAMES order (`_fields`) and its twin's own to_json (`_twin`: the module and
    the pure class)."""

    def _fields(self):
        raise NotImplementedError

    def _twin(self):
        raise NotImplementedError

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._fields() == other._fields()

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __repr__(self):
        names = self._twin()[0].FIELD_NAMES
        return f"{type(self).__qualname__}(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, self._fields())) + ")"

    def __reduce__(self):
        return type(self), self._fields()

    def to_json(self, with_body=True):
        return self._twin()[1].to_json(self, with_body)


cdef class QueryResult(Record):
    """What a key query answers: `messages`, `truncated`, `offsets` (index hits in walk
    order when raw, its messages sorted as queryMessage's; matched when exact), `false_hits`, and the index's last update."""
    index_lost = frozenset()   # (ExactQueryResult's: hits only an index file RocketMQ's restart deletes holds)

    def __init__(self, messages, truncated, offsets, false_hits=None, indexLastUpdateTimestamp=0,
                 indexLastUpdatePhyoffset=0):
        self.messages, self.truncated, self.offsets = messages, truncated, offsets
        self.false_hits = [] if false_hits is None else false_hits
        self.indexLastUpdateTimestamp, self.indexLastUpdatePhyoffset = indexLastUpdateTimestamp, indexLastUpdatePhyoffset

    def _fields(self):
        return (self.messages, self.truncated, self.offsets, self.false_hits, self.indexLastUpdateTimestamp,
                self.indexLastUpdatePhyoffset)

    def _twin(self):
        m = twin("engine.format.query_result")
        return m, m.PyQueryResult


cdef object _SIMPLE_CQ = "SimpleCQ"


cdef class GetMessageResult(Record):
    """What getMessage answers (engine/format/get_result.py's PyGetMessageResult is the twin and
    says what each field holds)."""

    def __cinit__(self):
        self.bufferTotalSize, self.cqType = 0, _SIMPLE_CQ

    def __init__(self, status, nextBeginOffset, minOffset, maxOffset, messages=None, bufferTotalSize=0,
                 skipped=None, messageQueueOffset=None, messageCount=None, cqType="SimpleCQ", innerMessages=None,
                 source=None, damaged=None):
        self.status, self.nextBeginOffset, self.minOffset, self.maxOffset = status, nextBeginOffset, minOffset, maxOffset
        self.messages = [] if messages is None else messages
        self.bufferTotalSize = bufferTotalSize
        self.skipped = [] if skipped is None else skipped
        self.messageQueueOffset, self.messageCount, self.cqType = messageQueueOffset, messageCount, cqType
        self.innerMessages, self.source, self.damaged = innerMessages, source, damaged

    def _fields(self):
        return (self.status, self.nextBeginOffset, self.minOffset, self.maxOffset, self.messages,
                self.bufferTotalSize, self.skipped, self.messageQueueOffset, self.messageCount, self.cqType,
                self.innerMessages, self.source, self.damaged)

    def _twin(self):
        m = twin("engine.format.get_result")
        return m, m.PyGetMessageResult


# ---- what a put answers ----------------------------------------------------------------------
cdef object _PUT_OK = "PUT_OK"


cdef object put_result(str topic, long qid, int64_t phy, int64_t qoff, int64_t store_ts, int64_t size,
                       bytes store_host, bytes prefix, const char* tail12):
    """A PutResult; its UNIQ_KEY decoded once from the prefix and the 12 characters after it."""
    cdef char u[80]
    cdef Py_ssize_t pl = len(prefix)
    if pl > 64:
        uniq = prefix.decode("ascii") + PyUnicode_DecodeASCII(tail12, 12, NULL)
    else:
        memcpy(u, <const char*>prefix, pl)
        memcpy(u + pl, tail12, 12)
        uniq = PyUnicode_DecodeASCII(u, pl + 12, NULL)
    mid = msg_id_of(<const uint8_t*>store_host, len(store_host), phy)
    return rmq_new_as(tuple, PutResult, ((_PUT_OK, phy, qoff, store_ts, mid, uniq, topic, qid, size),))


@cython.no_gc
cdef class PutResults:
    """What a put returns: a read-only sequence of PutResult, each built when it is looked
    at (a batch writer that only counts acknowledgements builds none)."""

    def __dealloc__(self):
        PyMem_Free(self.phys)

    def __len__(self):
        return self.n

    cdef object item(self, Py_ssize_t i):
        cdef const char* t = self.tails
        return put_result(self.topic, self.qid, self.phys[i], self.qoff0 + i, self.store_ts, self.sizes[i],
                          self.store_host, self.prefix_b, t + 12 * i)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.item(k) for k in range(*i.indices(self.n))]
        cdef Py_ssize_t k = i
        if k < 0:
            k += self.n
        if not 0 <= k < self.n:
            raise IndexError("PutResults index out of range")
        return self.item(k)

    def __iter__(self):
        cdef Py_ssize_t k
        for k in range(self.n):
            yield self.item(k)

    def __eq__(self, other):
        try:
            return list(self) == list(other)
        except TypeError:
            return NotImplemented

    def __repr__(self):
        return repr(list(self))


import collections.abc
collections.abc.Sequence.register(PutResults)
