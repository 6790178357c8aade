"""getMessage's reference answer and its result type. A collaborator of MessageStore: the
compiled page loop (engine.store.page.KERNEL) answers the common case in one call and hands
anything unusual here (BatchCQ and LMQ queues, queues kept in RocksDB, damage)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from engine.errors import CorruptDataError
from engine.format.cq_unit import WHY_INVALID
from engine.format.message import Message
from engine.store import batch_page as _batch_page, lmq as _lmq
from engine.store import page as _page


@dataclass  # no slots: the compiled getMessage builds it with __new__, the later fields keep their defaults
class GetMessageResult:
    """`messages` is a MessagePage (a list of Message built on access, plus numpy columns)
    when the read found any; an empty list otherwise. LMQ and BatchCQ queues also answer
    RocketMQ's messageQueueOffset (each record's offset in this queue), a BatchCQ its
    messageCount (inner messages) and the inner messages of its records."""
    status: str
    nextBeginOffset: int
    minOffset: int
    maxOffset: int
    messages: list[Message] | _page.MessagePage = field(default_factory=list)
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


def offset_status(offset: int, mn: int, mx: int, empty_next: int = 0) -> GetMessageResult | None:
    """getMessage's answer for an offset outside the queue's [mn, mx) (None: inside it, read).
    `empty_next`: the next offset an empty queue answers (the local store's 0)."""
    if mx <= 0:
        return GetMessageResult("NO_MESSAGE_IN_QUEUE", empty_next, mn, mx)
    if offset < mn:
        return GetMessageResult("OFFSET_TOO_SMALL", mn, mn, mx)
    if offset == mx:
        return GetMessageResult("OFFSET_OVERFLOW_ONE", mx, mn, mx)
    if offset > mx:
        return GetMessageResult("OFFSET_OVERFLOW_BADLY", mx, mn, mx)
    return None


class PageReader:
    def __init__(self, store):
        self.store = store

    def get_message_py(self, topic: str, queue_id: int, offset: int, max_count: int = 32,
                       broker: bool = False) -> GetMessageResult:
        """getMessage. broker=True reproduces the broker exactly (a page stops at the end of
        a CQ file; 32 messages / 256 KiB per page); the default reads `max_count` messages
        across CQ files and reports units it had to skip. (The reference: MessageStore.get_message.)"""
        cq = self.store.find_queue(topic, queue_id)
        if cq is None:
            bcq = self.store.find_batch_queue(topic, queue_id)
            if bcq is not None:
                return _batch_page.get_message_result(self.store, bcq, offset, max_count, broker, GetMessageResult)
            return GetMessageResult("NO_MESSAGE_IN_QUEUE", 0, 0, 0)
        mn, mx = cq.min_offset, cq.max_offset
        out = offset_status(offset, mn, mx)
        if out is not None:
            return out
        if broker:
            limit_count = self.store.cfg.maxTransferCountOnMessageInMemory
            limit_bytes = self.store.cfg.maxTransferBytesOnMessageInMemory
        else:
            limit_count, limit_bytes = (max_count if max_count > 1 else 1), 0
        status, nxt, page, total, skipped = _page.read_page(self.store.commitlog, cq, offset, mx, max_count, broker,
                                                            limit_count, limit_bytes, kernel=False)
        if status is None:
            return GetMessageResult("OFFSET_FOUND_NULL", offset, mn, mx)
        r = GetMessageResult(status, nxt, mn, mx, page, total, skipped)
        if cq.lmq:  # the stored queueOffset is the real topic's: the LMQ positions are the units'
            r.messageQueueOffset = _lmq.unit_offsets_of(cq, offset, nxt, [m.commitLogOffset for m in page])
        return r


def set_aside_damage(r: GetMessageResult, cq, offset: int) -> GetMessageResult:
    """A broker page read through: the broker hands out each unit's bytes unread, so a record that
    is not a message of its unit's size reaches the reader, which cannot decode it. Such items
    are set aside -- `messages` keeps the others, `skipped` gets each one's queue offset
    (WHY_INVALID, as the checked page says) and `damaged` its commitlog offset, size and why --
    and the page's other answers stay the broker's. `cq`: the queue read from `offset`, whose
    units between `offset` and nextBeginOffset tell each item's queue offset."""
    page = r.messages
    if not isinstance(page, _page.MessagePage):
        return r
    good, bad = [], []
    for i in range(len(page)):
        try:
            good.append(page[i])
        except CorruptDataError as e:
            bad.append((i, str(e)))
    if not bad:
        return r
    units = cq.units(offset, r.nextBeginOffset) if cq is not None else None
    pairs = list(zip(units["commitLogOffset"].tolist(), units["size"].tolist())) if units is not None else []
    taken = [page.unit_of(i) for i in range(len(page))]
    qoffs, j = [], 0
    for want in taken:  # each item is the next of the units it was taken from, in order
        while j < len(pairs) and pairs[j] != want:
            j += 1
        qoffs.append(offset + j if j < len(pairs) else None)
        j += 1
    damaged = [{"queueOffset": qoffs[i], "commitLogOffset": taken[i][0], "size": taken[i][1], "reason": why}
               for i, why in bad]
    skipped = sorted(list(r.skipped) + [(d["queueOffset"], WHY_INVALID) for d in damaged if d["queueOffset"] is not None])
    return replace(r, messages=good, skipped=skipped, damaged=damaged)
