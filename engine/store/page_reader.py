"""getMessage's reference answer (its result type: engine.format.get_result). A collaborator
of MessageStore: the compiled page loop (engine.store.page.KERNEL) answers the common case in
one call and hands anything unusual here (BatchCQ and LMQ queues, queues kept in RocksDB, damage)."""
from __future__ import annotations

from engine.errors import CorruptDataError
from engine.format.cq_unit import WHY_INVALID, roll_next_file
from engine.format.get_result import GetMessageResult, replaced
from engine.store import batch_page as _batch_page, lmq as _lmq
from engine.store import page as _page


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


def get_message_reference(store, topic: str, queue_id: int, offset: int, max_count: int = 32,
                          broker: bool = False) -> GetMessageResult:
    """MessageStore.get_message when the compiled page loop is not built: the reference."""
    return store.pages.get_message_py(topic, queue_id, offset, max_count, broker)


# MessageStore.get_message: the compiled one takes the whole call (no Python frame around it)
get_message = _page.KERNEL.get_message if _page.KERNEL is not None else get_message_reference


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
        if status is None:  # no CQ file holds offset: on to the next file (a deleted file is not a dead end)
            return GetMessageResult("OFFSET_FOUND_NULL", roll_next_file(offset, cq.file_size), mn, mx)
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
    return replaced(r, messages=good, skipped=skipped, damaged=damaged)
