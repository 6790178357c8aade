"""A store with its tier: the local store (DefaultMessageStore's files) and the tier under
tieredStoreFilePath, read as TieredMessageStore reads them. getMessage goes to the local store
or to the tier as `tieredStorageLevel` says (TieredMessageStore.fetchFromCurrentStore), with
its fallback to the local store; queryMessage asks the local store for what is newer than its
earliest message and the tier for the rest. Read-only on the tier; the local store is as
opened."""
from __future__ import annotations

from engine.format.tiered_layout import SYSTEM_TOPICS, SYSTEM_TOPIC_PREFIXES
from engine.store.index_file import LONG_MAX
from engine.store.queries import QueryResult
from engine.store.tiered import TieredStore

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
    kind = "store+tier"

    def __init__(self, store, tier: TieredStore, level: str = DEFAULT_LEVEL):
        self.store, self.tier, self.level = store, tier, parse_level(level)
        self.last_source: str | None = None   # which one answered the last get_message, and why

    def __getattr__(self, name):
        return getattr(self.store, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self.tier.close()
        self.store.close()

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

    def info(self) -> dict:
        info = self.store.info()
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
