"""Dispatch (RocketMQ's reput): what one commitlog record adds to the ConsumeQueue and the
index. Both builders are idempotent, so recovery can re-dispatch a range safely."""
from __future__ import annotations

from engine.format.message import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, Message
from engine.store import batch_consume_queue as _bcq, lmq as _lmq


def dispatch(store, msg: Message) -> bool:
    """CQ unit for NOT_TYPE and COMMIT records; index entries for all but ROLLBACK.
    Returns True when a new CQ unit was written."""
    wrote = False
    if msg.sysFlag & 0x0C in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        if store.batch_topics and msg.topic in store.batch_topics:  # 5.x BatchCQ topic: 46-byte units
            return _bcq.dispatch(store, msg) | _index(store, msg)
        cq = store.queue_for_write(msg.topic, msg.queueId)
        if cq is not None:
            wrote = cq.put_unit(msg.physicalOffsetField, msg.storeSize, msg.tagsCode, msg.queueOffset,
                                store_timestamp=msg.storeTimestamp)   # (a RocksDB unit keeps it)
            _lmq.dispatch(store, msg)  # LMQ copies (engine/store/lmq.py: with multi-dispatch on or detected)
    _index(store, msg)
    return wrote


def _index(store, msg: Message) -> bool:
    if store.cfg.messageIndexEnable:
        store.index.build_index(msg)
    return False
