"""Dispatch (RocketMQ's reput): what one commitlog record adds to the ConsumeQueue and the
index. Both builders are idempotent, so recovery can re-dispatch a range safely."""
from __future__ import annotations

from engine.format.message import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, Message


def dispatch(store, msg: Message) -> bool:
    """CQ unit for NOT_TYPE and COMMIT records; index entries for all but ROLLBACK.
    Returns True when a new CQ unit was written."""
    wrote = False
    if msg.sysFlag & 0x0C in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        cq = store.queue_for_write(msg.topic, msg.queueId)
        if cq is not None:
            wrote = cq.put_unit(msg.physicalOffsetField, msg.storeSize, msg.tagsCode, msg.queueOffset)
    if store.cfg.messageIndexEnable:
        store.index.build_index(msg)
    return wrote
