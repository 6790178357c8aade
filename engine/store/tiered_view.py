"""A store with its tier: the local store (DefaultMessageStore's files) and the tier under
tieredStoreFilePath, read as TieredMessageStore reads them. getMessage goes to the local store
or to the tier as `tieredStorageLevel` says (TieredMessageStore.fetchFromCurrentStore), with
its fallback to the local store; queryMessage asks the local store for what is newer than its
earliest message and the tier for the rest. Read-only on the tier; the local store is as
opened."""
from __future__ import annotations

from pathlib import Path

from engine.format.tiered_layout import LOCAL_INDEX_DIR, SYSTEM_TOPICS, SYSTEM_TOPIC_PREFIXES
from engine.store.index_file import LONG_MAX
from engine.store.queries import QueryResult
from engine.store.tiered import TierRange, TieredStore

LEVELS = {"DISABLE": 0, "NOT_IN_DISK": 1, "NOT_IN_MEM": 2, "FORCE": 3}   # TieredStorageLevel
DEFAULT_LEVEL = "NOT_IN_DISK"                                              # the tieredstore default


def parse_level(value) -> str:
    """tieredStorageLevel by name or number (TieredStorageLevel.valueOf: other numbers DISABLE)."""
    v = str(value or DEFAULT_LEVEL).strip().upper()
    if v.lstrip("-").isdigit():
        return {1: "NOT_IN_DISK", 2: "NOT_IN_MEM", 3: "FORCE"}.get(int(v), "DISABLE")
    if v not in LEVELS:
        raise ValueError(f"tieredStorageLevel={value}: one of {', '.join(LEVELS)} (or 0-3)")
    return v


def filtered_topic(topic: str) -> bool:
    """MessageStoreTopicFilter.filterTopic: system topics, revive topics and LMQs are always
    read from the local store."""
    return not topic.strip() or topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIXES)


class StoreWithTier:
    """Wraps an open MessageStore; every other call goes to it."""

    def __init__(self, store, tier: TieredStore, level: str = DEFAULT_LEVEL):
        self.store, self.tier, self.level = store, tier, parse_level(level)
        tier.add_local_index(Path(store.root) / LOCAL_INDEX_DIR)   # the broker's keys not yet in the tier
        self.last_source: str | None = None   # which one answered the last get_message, and why

    tier_store = property(lambda self: self.tier)     # what a view draws of the tier ...
    local_store = property(lambda self: self.store)   # ... and of the local files

    def __getattr__(self, name):
        return getattr(self.store, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self.tier.close()
        self.store.close()

    # ---- the queues as a reader sees them -------------------------------------------------
    def find_queue(self, topic: str, queue_id: int):
        """The local ConsumeQueue, or where the tier serves some offsets, a MergedQueue: the
        tier's units for those, the local ones after."""
        local = self.store.find_queue(topic, queue_id)
        tq = self.tier.find_queue(topic, queue_id)
        reads = self._tier_reads({"topic": topic, "queueId": queue_id, "minOffset": tq.min_offset,
                                  "maxOffset": tq.max_offset}) if tq is not None else None
        if reads is None:
            return local
        return MergedQueue(local, tq, reads[1])

    def message_in_queue(self, topic: str, queue_id: int, offset: int, size: int, queue_offset: int | None = None):
        """The record a row shows: from the tier when a read of its queue offset goes there."""
        if queue_offset is not None and self.read_from_tier(topic, queue_id, queue_offset)[0]:
            return self.tier.message_in_queue(topic, queue_id, offset, size)
        return self.store.look_message_by_offset(offset)

    @property
    def banner_note(self) -> str:
        rows = [q for q in self.info()["tier"]["queues"] if q["readFromTier"]]
        n = sum(q["readFromTier"][1] - q["readFromTier"][0] for q in rows)
        return (f"Store with its tier {self.tier.cluster}/{self.tier.broker} (tieredStorageLevel={self.level}): "
                f"{n:,} messages of {len(rows)} queue(s) are read from the tier, the rest from the local store "
                "(Internals ▸ Tier segments).")

    # ---- where a read goes -----------------------------------------------------------------
    def _in_local_store(self, topic: str, queue_id: int, offset: int) -> bool:
        """DefaultMessageStore.checkInStoreByConsumeOffset: the unit's commitlog offset (0 when
        the queue has no unit there) is not below the commitlog's min offset."""
        cq = self.store.find_queue(topic, queue_id)
        u = cq.unit(offset) if cq is not None and cq.min_offset <= offset < cq.max_offset else None
        return (u[0] if u else 0) >= self._local_min()

    def _local_min(self) -> int:
        """CommitLog.getMinOffset: -1 when the commitlog has no file."""
        return self.store.commitlog.min_offset if self.store.commitlog.files else -1

    def read_from_tier(self, topic: str, queue_id: int, offset: int) -> tuple[bool, str]:
        """fetchFromCurrentStore, with why. NOT_IN_MEM reads as if no page were cached (the
        broker's page cache is not in the files)."""
        lv = LEVELS[self.level]
        if filtered_topic(topic):
            return False, "a system topic: always the local store"
        if lv >= LEVELS["FORCE"]:
            return True, "tieredStorageLevel=FORCE"
        if lv == 0:
            return False, "tieredStorageLevel=DISABLE"
        q = self.tier.find_queue(topic, queue_id)
        if q is None:
            return False, "the tier has no such queue"
        if offset >= q.max_offset:
            return False, f"offset {offset} is at or past the tier's commit offset {q.max_offset}"
        if self._local_min() < 0:
            return True, "the local commitlog is empty"
        if not self._in_local_store(topic, queue_id, offset):
            return True, "the local store no longer holds it (NOT_IN_DISK)"
        if lv >= LEVELS["NOT_IN_MEM"]:
            return True, "NOT_IN_MEM (page cache unknown offline: read as not cached)"
        return False, "the local store holds it"

    def get_message(self, topic: str, queue_id: int, offset: int, max_count: int = 32, broker: bool = False):
        tier, why = self.read_from_tier(topic, queue_id, offset)
        if not tier:
            r = self.store.get_message(topic, queue_id, offset, max_count, broker=broker)
            r.source = self.last_source = f"local store ({why})"
            return r
        r = self.tier.get_message(topic, queue_id, offset, max_count, broker)
        if r.status in ("OFFSET_FOUND_NULL", "NO_MATCHED_LOGIC_QUEUE") and self._in_local_store(topic, queue_id, offset):
            r = self.store.get_message(topic, queue_id, offset, max_count, broker=broker)
            r.source = self.last_source = f"local store (the tier answered nothing there; {why})"
            return r
        local = self.store.queue_bounds(topic, queue_id)
        if local is not None and 0 <= local[1] < r.minOffset:  # min fixed by the local store's
            r.minOffset = local[1]
        r.source = self.last_source = f"tier ({why})"
        return r

    def scan_sources(self):
        """What a bulk scan reads: the local store's records, and of the tier what only the tier
        holds (queue offsets whose record the local commitlog no longer has): each message once."""
        out = []
        for (t, qid), tq in sorted(self.tier.queues.items()):
            ends = tq.commitlog.max_offset
            for a, b in self._tier_only(self.store.find_queue(t, qid), tq):
                start, end = tq.unit(a), tq.unit(b) if b < tq.max_offset else (ends,)
                if start is not None and end is not None and start[0] < end[0]:
                    out.append(TierRange(tq, start[0], end[0]))
        return self.store, out

    def _tier_only(self, cq, tq) -> list[tuple[int, int]]:
        """Queue offsets [a, b) of `tq` the local store does not hold: those below the first
        local unit whose record is at or past the local commitlog's min offset (retention deletes
        from the front). Offsets past the local queue's end stay the local commitlog's: the tier
        copies what the local store dispatched, so a shorter local queue lost units, not records."""
        lo, hi, local_min = tq.min_offset, tq.max_offset, self._local_min()
        if cq is None or local_min < 0 or cq.max_offset <= cq.min_offset:   # nothing of it held locally
            return [(lo, hi)] if lo < hi else []
        a, b = max(lo, cq.min_offset), min(hi, cq.max_offset)
        if a >= b:    # the local queue starts past the tier's end (or ends before it starts)
            return [(lo, hi)] if cq.min_offset >= hi else []
        while a < b:                      # the local units' offsets ascend: the first one held
            mid = (a + b) // 2
            u = cq.unit(mid)
            if u is not None and u[0] >= local_min:
                b = mid
            else:
                a = mid + 1
        return [(lo, a)] if lo < a else []

    def queue_bounds(self, topic: str, queue_id: int):
        local, tier = self.store.queue_bounds(topic, queue_id), self.tier.queue_bounds(topic, queue_id)
        if local is None or tier is None:
            return local or tier
        return local[0], min(local[1], tier[1]), max(local[2], tier[2])

    def query_message(self, topic: str, key: str, begin: int = 0, end: int = LONG_MAX, max_num: int = 64,
                      raw: bool = False, cap: int | None = None) -> QueryResult:
        """TieredMessageStore.queryMessageAsync: the local store unless FORCE or `end` is older
        than its earliest message, then the tier for what is older (all of it under FORCE)."""
        earliest = self._earliest_local_time()
        force = self.level == "FORCE"
        if force or end < earliest:
            r = QueryResult([], False, [])
        else:
            r = self.store.query_message(topic, key, begin, end, max_num, raw=raw, cap=cap)
        n = len(r.messages)
        limit = LONG_MAX if cap == 0 else max_num
        if (n < limit and begin < earliest) or force:
            t = self.tier.query_message(topic, key, begin, end if force else earliest, limit - n, raw=raw, cap=cap)
            r = QueryResult(list(r.messages) + list(t.messages), r.truncated or t.truncated,
                            list(r.offsets) + list(t.offsets), list(r.false_hits) + list(t.false_hits))
        return r

    def _earliest_local_time(self) -> int:
        """DefaultMessageStore.getEarliestMessageTime: the store time at the commitlog's min offset."""
        cl = self.store.commitlog
        if not cl.files:
            return -1
        m = next(iter(self.store.iter_messages(cl.min_offset, None)), None)
        return m.storeTimestamp if m is not None else -1

    def queue_list(self) -> list[dict]:
        """The local store's queues with the offsets a reader reaches through the tier too, and
        the queues only the tier still has."""
        rows = {(q["topic"], q["queueId"]): q for q in self.store.queue_list()}
        for (t, qid), tq in self.tier.queues.items():
            b = self.queue_bounds(t, qid)
            row = rows.setdefault((t, qid), {"topic": t, "queueId": qid, "cqType": "SimpleCQ", "lmq": False})
            row["minOffset"], row["maxOffset"] = b[1], b[2]
            row["tier"] = [tq.min_offset, tq.max_offset]
        return sorted(rows.values(), key=lambda r: (r["topic"], r["queueId"], r["cqType"]))

    def topics(self) -> list[str]:
        return sorted(set(self.store.topics()) | set(self.tier.topics()))

    def info(self) -> dict:
        info = self.store.info()
        info["queues"] = self.queue_list()
        rows = []
        for q in self.tier.queue_list():
            local = self.store.queue_bounds(q["topic"], q["queueId"])
            rows.append({"topic": q["topic"], "queueId": q["queueId"],
                         "local": [local[1], local[2]] if local else None,
                         "tier": [q["minOffset"], q["maxOffset"]],
                         "readFromTier": self._tier_reads(q)})
        info["tier"] = {**{k: v for k, v in self.tier.info().items() if k in (
            "root", "cluster", "broker", "folder", "metadata", "indexFiles", "warnings")},
                        "tieredStorageLevel": self.level, "queues": rows}
        return info

    def _tier_reads(self, q: dict) -> list[int] | None:
        """The queue offsets [a, b) a read takes from the tier (None: none). Under NOT_IN_DISK
        the tier serves a prefix (what the local store no longer holds): found by bisection."""
        lo, hi = q["minOffset"], q["maxOffset"]
        if lo >= hi or not self.read_from_tier(q["topic"], q["queueId"], lo)[0]:
            return None
        if self.read_from_tier(q["topic"], q["queueId"], hi - 1)[0]:
            return [lo, hi]
        a, b = lo, hi - 1          # a reads from the tier, b does not
        while b - a > 1:
            mid = (a + b) // 2
            if self.read_from_tier(q["topic"], q["queueId"], mid)[0]:
                a = mid
            else:
                b = mid
        return [lo, b]


class MergedQueue:
    """A queue read through its tier: offsets [tier min, split) from the tier's CONSUME_QUEUE
    (tiered commit-log offsets), [split, max) from the local ConsumeQueue."""
    lmq = False

    def __init__(self, local, tier_queue, split: int):
        self.local, self.tier, self.split = local, tier_queue, split
        self.min_offset = tier_queue.min_offset if local is None else min(local.min_offset, tier_queue.min_offset)
        self.max_offset = tier_queue.max_offset if local is None else max(local.max_offset, tier_queue.max_offset)

    def units(self, start: int, end: int):
        import numpy as np
        parts = []
        if start < self.split:
            t = self.tier.units(start, min(end, self.split))
            if t is not None:
                parts.append(t)
        if end > self.split and self.local is not None:
            parts.append(self.local.units(max(start, self.split), end))
        return np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else self.tier.units(start, start)

    def unit(self, offset: int):
        if offset < self.split:
            return self.tier.unit(offset)
        return self.local.unit(offset) if self.local is not None else None

    def file_for(self, offset: int):
        if offset < self.split:
            return self.tier.file_for(offset)
        return self.local.file_for(offset) if self.local is not None else None
