"""getMessage on a BatchConsumeQueue, and the inner messages of its records.

RocketMQ's answer (DefaultMessageStore.getMessage over BatchConsumeQueue.iterateFrom): whole
records, the first being the one whose unit contains the requested offset; `messageCount`
counts inner messages (the units' batch sizes) and is what maxMsgNums limits
(isTheBatchFull: a record that would overshoot is left for the next page, but the first
record is always taken); nextBeginOffset = base + batchSize of the last unit read. The
broker's page stops at the end of the unit's CQ file; ours (broker=False) reads on.

Inner messages: one `BatchedMessage` per queue offset (the record, its unit, the inner
message decoded from the record's body). A plain record in a BatchCQ is a batch of one."""
from __future__ import annotations

from dataclasses import dataclass

from engine.format.inner_batch import INNER_BATCH_FLAG, InnerBatchError, InnerMessage, decode_inner
from engine.format.cq_unit import MAX_FILTER_MESSAGE_SIZE, WHY_EXPIRED, WHY_INVALID
from engine.format.message import Message
from engine.store.batch_consume_queue import unit_dict



@dataclass(slots=True)
class BatchedMessage:
    """One queue offset of a BatchCQ: the inner message there and the record holding it."""
    queueOffset: int
    record: Message | None        # None: the unit's record is gone or damaged (see `why`)
    unit: dict                    # the 46-byte unit (engine.store.batch_consume_queue.unit_dict)
    inner: InnerMessage | None    # None for a plain record (the record is the message) or no record
    why: str = ""

    @property
    def uniqKey(self):
        src = self.inner if self.inner is not None else self.record
        return src.uniqKey if src is not None else None

    @property
    def tags(self):
        src = self.inner if self.inner is not None else self.record
        return src.tags if src is not None else None

    @property
    def keys(self):
        src = self.inner if self.inner is not None else self.record
        return src.keys if src is not None else None

    @property
    def body(self) -> bytes:
        src = self.inner if self.inner is not None else self.record
        return src.body if src is not None else b""

    def to_json(self, with_body: bool = True) -> dict:
        d = {"queueOffset": self.queueOffset, "batch": self.unit,
             "innerIndex": self.queueOffset - self.unit["msgBaseOffset"]}
        if self.inner is not None:
            d["innerMessage"] = self.inner.to_json(with_body)
        if self.record is not None:
            d["record"] = self.record.to_json(with_body and self.inner is None)
        else:
            d["why"] = self.why
        return d


def expand(record: Message | None, unit: dict, why: str = "") -> list[BatchedMessage]:
    """The queue offsets [base, base + batchSize) of one unit, each with its inner message."""
    base, n = unit["msgBaseOffset"], unit["batchSize"]
    if record is None:
        return [BatchedMessage(base + i, None, unit, None, why) for i in range(n)]
    if not record.sysFlag & INNER_BATCH_FLAG:
        return [BatchedMessage(base, record, unit, None)] + \
            [BatchedMessage(base + i, record, unit, None, "the unit counts more messages than its plain record")
             for i in range(1, n)]
    try:
        inner = decode_inner(record.body, base)
    except InnerBatchError as e:
        return [BatchedMessage(base + i, record, unit, None, f"inner batch undecodable: {e}") for i in range(n)]
    out = [BatchedMessage(m.queueOffset, record, unit, m) for m in inner[:n]]
    out += [BatchedMessage(base + i, record, unit, None, f"the record holds {len(inner)} inner messages, "
                           f"the unit counts {n}") for i in range(len(inner), n)]
    return out


def read_record(store, unit: dict) -> tuple[Message | None, str]:
    phy, size = unit["commitLogOffset"], unit["size"]
    if phy < store.commitlog.min_offset:
        return None, WHY_EXPIRED
    m = store.commitlog.get_message(phy, size)
    return (m, "") if m is not None else (None, WHY_INVALID)


def inner_messages(store, bcq, start: int, end: int) -> list[BatchedMessage]:
    """Every queue offset in [start, end) clamped to the queue, in order."""
    start, end = max(start, bcq.min_offset), min(end, bcq.max_offset)
    out: list[BatchedMessage] = []
    if start >= end:
        return out
    for u in bcq.units_from(start):
        unit = unit_dict(u)
        if unit["msgBaseOffset"] >= end:
            break
        rec, why = read_record(store, unit)
        out.extend(b for b in expand(rec, unit, why) if start <= b.queueOffset < end)
    return out


def get_message(store, bcq, offset: int, max_count: int, broker: bool):
    """(status, nextBeginOffset, records, bufferTotalSize, messageCount, messageQueueOffset,
    skipped, inner messages) for min <= offset < max; None when no unit contains `offset`."""
    cfg = store.cfg
    units = bcq.units_from(offset, to_file_end=broker,
                           limit=None if broker else max(max_count, 1) + 1)
    if len(units) == 0:
        return None
    limit_count = cfg.maxTransferCountOnMessageInMemory if broker else None
    limit_bytes = cfg.maxTransferBytesOnMessageInMemory if broker else None
    max_filter = max(MAX_FILTER_MESSAGE_SIZE, max_count * bcq.unit_size)
    status, nxt = "NO_MATCHED_MESSAGE", offset
    records: list[Message] = []
    used: list[dict] = []
    qoffs: list[int] = []
    skipped: list[tuple[int, str]] = []
    total = count = 0
    next_file_start = None
    mx = bcq.max_offset
    for u in units:
        unit = unit_dict(u)
        base, n, phy, size = unit["msgBaseOffset"], unit["batchSize"], unit["commitLogOffset"], unit["size"]
        if nxt >= mx:
            break
        if broker and (base - offset) * bcq.unit_size > max_filter:
            break
        if total and count and (count + n > max_count or (limit_bytes and total + size > limit_bytes)
                                or (limit_count and count > limit_count - 1)):
            break  # isTheBatchFull
        nxt = base + n
        if next_file_start is not None and phy < next_file_start:
            continue
        rec, why = read_record(store, unit)
        if rec is None:
            if not total:
                status = "MESSAGE_WAS_REMOVING"
            skipped.append((base, why))
            next_file_start = store.commitlog.roll_next_file(phy)
            continue
        records.append(rec)
        used.append(unit)
        qoffs.append(base)
        total += size
        count += n
        status = "FOUND"
        next_file_start = None
    inner = [b for rec, unit in zip(records, used) for b in expand(rec, unit)]
    return status, nxt, records, total, count, qoffs, skipped, inner


def batch_units_json(bcq, start: int | None = None, count: int = 0) -> list[dict]:
    """The distinct units from the one containing `start` (iterateFrom_min), `count` of them (0: all)."""
    s = bcq.min_offset if start is None else start
    units = bcq.units_from(s, limit=count or None)
    return [unit_dict(u) for u in units]


def get_message_result(store, bcq, offset: int, max_count: int, broker: bool, result_cls):
    """getMessage on a BatchCQ as a GetMessageResult (`result_cls`): RocketMQ's statuses and
    bounds, the whole records, messageCount in inner messages, messageQueueOffset the bases."""
    mn, mx = bcq.min_offset, bcq.max_offset
    status = ("NO_MESSAGE_IN_QUEUE" if mx == 0 else "OFFSET_TOO_SMALL" if offset < mn else
              "OFFSET_OVERFLOW_ONE" if offset == mx else "OFFSET_OVERFLOW_BADLY" if offset > mx else None)
    if status is not None:
        nxt = {"NO_MESSAGE_IN_QUEUE": 0, "OFFSET_TOO_SMALL": mn, "OFFSET_OVERFLOW_ONE": offset}.get(status, mx)
        return result_cls(status, nxt, mn, mx, [], 0, [], [], 0, "BatchCQ", [])
    got = get_message(store, bcq, offset, max_count, broker)
    if got is None:
        return result_cls("OFFSET_FOUND_NULL", offset, mn, mx, [], 0, [], [], 0, "BatchCQ", [])
    status, nxt, records, total, count, qoffs, skipped, inner = got
    return result_cls(status, nxt, mn, mx, records, total, skipped, qoffs, count, "BatchCQ", inner)
