"""What a key query answers (QueryMessageResult): plain records the store and the compiled
query build alike, declared at the bottom layer because engine/accel imports nothing above
engine.format. PyQueryResult is the reference; the compiled QueryResult (engine/accel/
_results.pyx) has its fields, constructor, equality and JSON, and is chosen below when built."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar

from engine import accel

FIELD_NAMES = ("messages", "truncated", "offsets", "false_hits", "indexLastUpdateTimestamp",
               "indexLastUpdatePhyoffset")


@dataclass(slots=True)
class PyQueryResult:
    messages: list
    truncated: bool
    offsets: list[int]                 # index hits in walk order (raw; messages sorted) / matched (exact)
    false_hits: list[int] = field(default_factory=list)  # hash-only matches exact mode refused
    indexLastUpdateTimestamp: int = 0
    indexLastUpdatePhyoffset: int = 0
    index_lost: ClassVar[frozenset] = frozenset()  # (ExactQueryResult's)

    def to_json(self, with_body: bool = True) -> dict:
        lost = self.index_lost
        msgs = [m.to_json(with_body) for m in self.messages]
        for j, m in zip(msgs, self.messages):
            if m.commitLogOffset in lost:
                j["indexLostByRocketMQ"] = True
        return {"truncated": self.truncated, "offsets": self.offsets, "falseHits": self.false_hits,
                "indexLastUpdateTimestamp": self.indexLastUpdateTimestamp,
                "indexLastUpdatePhyoffset": self.indexLastUpdatePhyoffset, "messages": msgs}


assert tuple(f.name for f in fields(PyQueryResult)) == FIELD_NAMES
PyQueryResult.__name__ = PyQueryResult.__qualname__ = "QueryResult"

_KERNEL = accel.load("_results")
QueryResult = PyQueryResult if _KERNEL is None else _KERNEL.QueryResult


class ExactQueryResult(QueryResult):
    """The exact answer where the index has lost files; `index_lost`: offsets of the hits only
    an index file RocketMQ's restart deletes holds (a crashed DLedger store, engine.store.dledger_reput): RocketMQ's
    own query no longer finds them."""
    __slots__ = ("index_lost",)

    def __init__(self, messages, truncated, offsets, false_hits=None, indexLastUpdateTimestamp=0,
                 indexLastUpdatePhyoffset=0, index_lost=frozenset()):
        QueryResult.__init__(self, messages, truncated, offsets, [] if false_hits is None else false_hits,
                             indexLastUpdateTimestamp, indexLastUpdatePhyoffset)
        self.index_lost = index_lost

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return QueryResult.__eq__(self, other) is True and self.index_lost == other.index_lost

    __hash__ = None
