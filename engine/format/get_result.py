"""What getMessage answers (GetMessageResult): a plain record the store and the compiled page
loop build alike, declared at the bottom layer because engine/accel imports nothing above
engine.format. PyGetMessageResult is the reference; the compiled GetMessageResult (engine/accel/
_results.pyx) has its fields, constructor, equality and JSON, and is chosen below when built: a
32-message page is a few thousand instructions of C, and a dataclass's seven attribute writes
by name and its instance dict cost a tenth of that again."""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from engine import accel

FIELD_NAMES = ("status", "nextBeginOffset", "minOffset", "maxOffset", "messages", "bufferTotalSize", "skipped",
               "messageQueueOffset", "messageCount", "cqType", "innerMessages", "source", "damaged")


@dataclass(slots=True)
class PyGetMessageResult:
    """`messages` is a MessagePage (a list of Message built on access, plus numpy columns)
    when the read found any; an empty list otherwise. LMQ and BatchCQ queues also answer
    RocketMQ's messageQueueOffset (each record's offset in this queue), a BatchCQ its
    messageCount (inner messages) and the inner messages of its records."""
    status: str
    nextBeginOffset: int
    minOffset: int
    maxOffset: int
    messages: list = field(default_factory=list)     # a MessagePage, or a list of Message
    bufferTotalSize: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (queue offset, why)
    messageQueueOffset: list[int] | None = None  # LMQ and BatchCQ queues
    messageCount: int | None = None              # BatchCQ: inner messages (else len(messages))
    cqType: str = "SimpleCQ"
    innerMessages: list | None = None            # BatchCQ: batch_page.BatchedMessage per offset
    source: str | None = None                    # a store with its tier: which one answered, and why
    damaged: list[dict] | None = None            # a broker page's items that do not decode (set_aside_damage)

    def to_json(self, with_body: bool = True) -> dict:
        d = {"status": self.status, "nextBeginOffset": self.nextBeginOffset,
             "minOffset": self.minOffset, "maxOffset": self.maxOffset,
             "messageCount": len(self.messages) if self.messageCount is None else self.messageCount,
             "bufferTotalSize": self.bufferTotalSize,
             "messages": [m.to_json(with_body) for m in self.messages],
             "skipped": [{"queueOffset": q, "reason": r} for q, r in self.skipped]}
        if self.messageQueueOffset is not None:
            d["messageQueueOffset"] = self.messageQueueOffset
        if self.source is not None:
            d["source"] = self.source
        if self.damaged is not None:
            d["damaged"] = self.damaged
        if self.innerMessages is not None:
            d["cqType"] = self.cqType
            d["innerMessages"] = [b.to_json(with_body) for b in self.innerMessages]
        return d


def replaced(r, **changes):
    """A copy of `r` (either kind) with `changes` (dataclasses.replace for both)."""
    values = {n: getattr(r, n) for n in FIELD_NAMES}
    values.update(changes)
    return type(r)(**values)


assert tuple(f.name for f in fields(PyGetMessageResult)) == FIELD_NAMES
PyGetMessageResult.__name__ = PyGetMessageResult.__qualname__ = "GetMessageResult"

_KERNEL = accel.load("_results")
GetMessageResult = PyGetMessageResult if _KERNEL is None else _KERNEL.GetMessageResult
