"""MessageStore's answers about the 5.x queue kinds beside the file-based ConsumeQueue: LMQ
multi-dispatch (engine/store/lmq.py) and BatchConsumeQueue (batch_consume_queue.py,
batch_page.py). A collaborator of the store (which hands out its methods as its own), reading
the store's queues, batch_queues and writer."""
from __future__ import annotations

from engine.format.message import Message
from engine.store import batch_page as _batch_page, lmq as _lmq


class QueueKinds:
    def __init__(self, store):
        self.store = store

    def find_batch_queue(self, topic: str, queue_id: int):
        return self.store.batch_queues.get((topic, queue_id))

    def queue_bounds(self, topic: str, queue_id: int) -> tuple[str, int, int] | None:
        """(cqType, min, max) of any kind of queue; None when there is none."""
        q = self.store.queues.get((topic, queue_id)) or self.store.batch_queues.get((topic, queue_id))
        return None if q is None else (getattr(q, "cq_type", "SimpleCQ"), q.min_offset, q.max_offset)

    def lmq_dispatch(self, msg: Message) -> dict | None:
        """The LMQ queues a record reached, with its positions read from their CQs."""
        return _lmq.positions(self.store, msg)

    def lmq_queue_offset(self, name: str) -> int:
        """getLmqQueueOffset: the next offset the writer assigns (the CQ's max when read-only)."""
        if self.store.writer is not None:
            return _lmq.lmq_queue_offset(self.store.writer, name)
        cq = self.store.find_queue(name, 0)
        return cq.max_offset if cq else 0

    def batch_units(self, topic: str, queue_id: int, start: int | None = None, count: int = 0) -> list[dict]:
        """BatchCQ: the distinct 46-byte units from the one containing `start` (default: the min)."""
        bcq = self.find_batch_queue(topic, queue_id)
        return _batch_page.batch_units_json(bcq, start, count) if bcq else []

    def inner_messages(self, topic: str, queue_id: int, start: int, end: int) -> list:
        """BatchCQ: one BatchedMessage (inner message + its record) per queue offset in [start, end)."""
        bcq = self.find_batch_queue(topic, queue_id)
        return _batch_page.inner_messages(self.store, bcq, start, end) if bcq else []

    def put_inner_batch(self, topic: str, messages, queue_id: int | None = None, properties: dict | None = None,
                        keys=None, tags: str | None = None):
        """5.x BatchCQ topic: `messages` ((body, properties) each) as one inner-batch record; the
        store adds INNER_BASE, its queue offsets are INNER_BASE .. + INNER_NUM - 1."""
        from engine.store.put_assign import inner_batch_draft
        w = self.store._writer()
        return w.put([inner_batch_draft(w, topic, messages, queue_id, properties, keys, tags)])[0]

    def find_inner(self, uniq_key: str, topic: str | None = None, limit: int = 64) -> list:
        """BatchCQ: the inner messages whose own UNIQ_KEY is `uniq_key` (RocketMQ indexes only the
        batch record's keys, so no index finds them): a walk over the BatchCQ queues' records."""
        found = []
        for (t, qid), bcq in sorted(self.store.batch_queues.items()):
            if topic is not None and t != topic:
                continue
            for b in _batch_page.inner_messages(self.store, bcq, bcq.min_offset, bcq.max_offset):
                if b.inner is not None and b.inner.uniqKey == uniq_key:
                    found.append(b)
                    if len(found) >= limit:
                        return found
        return found
