# cython: language_level=3
"""The compiled QueryResult. engine/format/query_result.py's PyQueryResult is its pure twin and
the reference (engine.format.query_result.QueryResult is one or the other, by a plain
assignment there): the same fields, constructor, equality and JSON. A raw key query is a few
hundred nanoseconds of C; filling a dataclass through its Python __init__ or six attribute
writes by name cost as much again. This module imports nothing of the engine above
engine.format (the twin's module, on first use)."""

cdef object _twin = None


cdef object twin():
    global _twin
    if _twin is None:
        import engine.format.query_result as m
        _twin = m
    return _twin


cdef class QueryResult:
    """What a key query answers: `messages`, `truncated`, `offsets` (index hits in walk order
    when raw, matched when exact), `false_hits`, and the index's last update."""
    index_lost = frozenset()   # (ExactQueryResult's: hits only an index file RocketMQ's restart deletes holds)

    def __init__(self, messages, truncated, offsets, false_hits=None, indexLastUpdateTimestamp=0,
                 indexLastUpdatePhyoffset=0):
        self.messages, self.truncated, self.offsets = messages, truncated, offsets
        self.false_hits = [] if false_hits is None else false_hits
        self.indexLastUpdateTimestamp, self.indexLastUpdatePhyoffset = indexLastUpdateTimestamp, indexLastUpdatePhyoffset

    def _fields(self):
        return (self.messages, self.truncated, self.offsets, self.false_hits, self.indexLastUpdateTimestamp,
                self.indexLastUpdatePhyoffset)

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._fields() == other._fields()

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __repr__(self):
        return f"{type(self).__qualname__}(" + ", ".join(
            f"{n}={v!r}" for n, v in zip(twin().FIELD_NAMES, self._fields())) + ")"

    def __reduce__(self):
        return type(self), self._fields()

    def to_json(self, with_body=True):
        return twin().PyQueryResult.to_json(self, with_body)
