"""MessageStore's reads by key, message id and store time (queryMessage, lookMessageByOffset,
getOffsetInQueueByTime): a collaborator of the store, apart from opening and paging; it only
needs the commitlog, the consume queues and the index the store has open."""
from __future__ import annotations

from engine import accel
from engine.format.javahash import index_key
from engine.format.message import Message
from engine.format.query_result import ExactQueryResult, QueryResult  # noqa: F401 (the store's answers)
from engine.format.msgid import decode_offset_msg_id, looks_like_msg_id
from engine.store.index_file import LONG_MAX

KEYS_PER_BATCH = 10_000   # keys per batched index walk (query_messages)


def _query_message_py(self, topic: str, key: str, begin: int = 0, end: int = LONG_MAX,
                      max_num: int = 64, raw: bool = False, cap: int | None = None) -> QueryResult:
    """Messages by key. raw=True: DefaultMessageStore.queryMessage's answer (the index hits,
    hash and time only, duplicates kept, each loaded by lookMessageByOffset in ascending
    offset order as it sorts them; `offsets`: the hits in IndexService's walk order; capped by
    maxMsgsNumBatch unless `cap` says otherwise (0 = none);
    max_num 0 answers nothing, as RocketMQ does). Default: each candidate checked
    against the message's real topic, KEYS tokens and UNIQ_KEY and its store time,
    de-duplicated, newest first, `max_num` (0 = no cap) with a truncated flag."""
    if raw:
        offs, lts, loff = self.index.query_offset(topic, key, max_num, begin, end, cap)
        # queryMessage loads the hits sorted (Collections.sort); `offsets` stays queryOffset's walk order
        return QueryResult(self.commitlog.messages_at(sorted(offs)), False, offs, [], lts, loff)
    return self.queries._query_exact(topic, key, begin, end, max_num, cap)


_PAGE = accel.load("_page")   # the compiled query_message: the raw answer in one call (None: the reference)
query_message = _PAGE.query_message if _PAGE is not None else _query_message_py   # MessageStore.query_message


class QueryService:
    """A MessageStore's collaborator for these reads (the store hands out its methods as its
    own: engine.store.message_store). query_message itself is the module's function over the
    store: the compiled one calls back into _query_exact."""

    def __init__(self, store):
        self.store = store
        self._generation_found = None

    def _query_exact(self, topic: str, key: str, begin: int, end: int, max_num: int, cap) -> QueryResult:
        """query_message's default answer (its docstring says what)."""
        offs, lts, loff = self.store.index.query_offset(topic, key, LONG_MAX, max(0, begin - 1000), LONG_MAX, cap=0)
        return self._exact_answer(topic, key, offs, begin, end, max_num, lts, loff)

    def _lost_candidates(self, topic: str, key: str, begin: int) -> list[int]:
        """A key's hits in the index files RocketMQ's restart deletes (`index.lost_files`: a
        crashed DLedger store's view), newest file first."""
        out: list[int] = []
        k = None
        for f in reversed(getattr(self.store.index, "lost_files", ())):
            k = k or index_key(topic, key)
            if f.is_time_matched(max(0, begin - 1000), LONG_MAX):
                f.select(k, LONG_MAX, max(0, begin - 1000), LONG_MAX, out)
        return out

    def query_messages(self, topic: str, keys, begin: int = 0, end: int = LONG_MAX,
                       max_num: int = 64) -> list[QueryResult]:
        """query_message's default answer for each of many keys, in their order: the keys'
        index walks go through IndexService.query_offsets in batches (their cache misses
        overlapped), then each candidate is checked as for one key."""
        keys = list(keys)
        lts, loff = self.store.index.last_update()
        out: list[QueryResult] = []
        for i in range(0, len(keys), KEYS_PER_BATCH):
            chunk = keys[i:i + KEYS_PER_BATCH]
            walks = self.store.index.query_offsets(topic, chunk, LONG_MAX, max(0, begin - 1000), LONG_MAX, cap=0)
            out += [self._exact_answer(topic, k, offs, begin, end, max_num, lts, loff) for k, offs in zip(chunk, walks)]
        return out

    def _exact_answer(self, topic: str, key: str, offs: list[int], begin: int, end: int, max_num: int,
                      lts: int, loff: int) -> QueryResult:
        """The exact answer from a key's index candidates `offs` (hash-only, walk order), with
        the hits only the index files RocketMQ's restart deleted hold, marked."""
        lost = self._lost_candidates(topic, key, begin) if getattr(self.store.index, "lost_files", None) else []
        served = set(offs) if lost else ()
        seen, matched, false_hits = set(), [], []
        for o in (offs + lost if lost else offs):
            if o in seen:
                continue
            seen.add(o)
            m = self.store.commitlog.get_message(o)
            if m is None:
                continue
            if m.topic == topic and (key in m.key_list or m.uniqKey == key):
                if begin <= m.storeTimestamp <= end:
                    matched.append(m)
            else:
                false_hits.append(o)
        matched.sort(key=lambda m: (m.storeTimestamp, m.commitLogOffset), reverse=True)
        truncated = bool(max_num) and len(matched) > max_num
        if max_num:
            matched = matched[:max_num]
        found = [m.commitLogOffset for m in matched]
        if not lost:
            return QueryResult(matched, truncated, found, false_hits, lts, loff)
        return ExactQueryResult(matched, truncated, found, false_hits, lts, loff,
                                frozenset(o for o in found if o not in served))

    def look_message_by_offset(self, offset: int) -> Message | None:
        return self.store.commitlog.look_message(offset)

    def lookup_id(self, msg_id: str, topic: str | None = None) -> tuple[str, list[Message]]:
        """An id that is either an offset msgId or a UNIQ_KEY: ('offset'|'uniq'|'unknown', messages)."""
        msg_id = msg_id.strip().upper()
        if looks_like_msg_id(msg_id):
            _, _, off = decode_offset_msg_id(msg_id)
            m = self.store.commitlog.get_message(off) if self.store.min_offset <= off < self.store.max_offset else None
            if m is not None and m.msgId == msg_id:
                return "offset", [m]
        topics = [topic] if topic else self.store.topics()
        found: list[Message] = []
        for t in topics:
            found.extend(self.store.query_message(t, msg_id, max_num=0).messages)
        found = [m for m in found if m.uniqKey == msg_id]
        return ("uniq", found) if found else ("unknown", [])

    def query_uniq(self, topic: str, uniq: str) -> list[Message]:
        return [m for m in self.store.query_message(topic, uniq, max_num=0).messages if m.uniqKey == uniq]

    def store_time_at(self, topic: str, queue_id: int, queue_offset: int) -> int:
        cq = self.store.find_queue(topic, queue_id)
        if cq is None and self.store.find_batch_queue(topic, queue_id) is not None:  # 5.x BatchCQ: the unit's time
            b = self.store.find_batch_queue(topic, queue_id)
            u = b.unit(queue_offset) if queue_offset < b.max_offset else None
            return u["storeTimestamp"] if u else -1
        own = getattr(cq, "store_time", None)   # a queue that keeps its units' store times (RocksDB) answers itself
        if own is not None:
            return own(queue_offset)
        u = cq.unit(queue_offset) if cq else None
        if u is None or not (queue_offset < cq.max_offset):
            return -1
        return self.store.commitlog.pickup_store_timestamp(u[0], u[1])

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int,
                                    boundary: str | None = None) -> int:
        """Queue offset for a store time. boundary=None: RocketMQ 4.9 (file picked by mtime,
        nearest neighbour); 'lower'/'upper': 5.x (first unit >= t / last unit <= t)."""
        from engine.store.time_lookup import offset_by_time_49, offset_by_time_5x
        cq = self.store.find_queue(topic, queue_id)
        if cq is None:
            b = self.store.find_batch_queue(topic, queue_id)
            if b is not None:
                from engine.store.batch_consume_queue import offset_by_time
                return offset_by_time(b, timestamp, boundary)
            return 0
        if getattr(cq, "offset_by_time", None) is not None:  # a queue with its own store times (RocksDB)
            return cq.offset_by_time(timestamp, boundary)
        if boundary is None:
            return offset_by_time_49(self.store, cq, timestamp)
        return offset_by_time_5x(self.store, cq, timestamp, boundary)

    def generation(self):
        """Which RocketMQ generation wrote the store, with its evidence (engine/store/generation.py;
        a bounded sample, taken once)."""
        cl = self.store.commitlog
        # a store followed live is sampled again when it gains a file (or its first records)
        key = (len(cl.files), cl.max_offset > cl.min_offset) if cl is not None else None
        found = self._generation_found
        if found is None or found[0] != key:
            from engine.store.generation import detect
            found = self._generation_found = (key, detect(self.store.root, self.store.cfg))
        return found[1]

    def time_rule(self, rule: str | None = None, boundary: str | None = None) -> tuple[str, str]:
        """(rule, why): "4.9", "5.x-lower" or "5.x-upper". A boundary implies 5.x; an explicit
        rule wins; otherwise the store's generation decides (4.9 for 4.x and unknown)."""
        if rule not in (None, "4.9", "5.x"):
            raise ValueError(f"unknown time-lookup rule {rule!r} (4.9 or 5.x)")
        if rule == "4.9" and boundary:
            raise ValueError("--boundary is a 5.x rule; the 4.9 rule has none")
        why = "flag" if rule or boundary else "generation"
        if rule is None and boundary is None:
            rule = self.generation().time_rule
        if rule == "4.9":
            return "4.9", why
        return f"5.x-{(boundary or 'lower').lower()}", why

    def offset_by_time(self, topic: str, queue_id: int, timestamp: int, rule: str | None = None,
                       boundary: str | None = None) -> tuple[int, str, str]:
        """getOffsetInQueueByTime by the rule `time_rule` picks: (offset, rule, why)."""
        name, why = self.time_rule(rule, boundary)
        b = None if name == "4.9" else name.split("-", 1)[1]
        return self.get_offset_in_queue_by_time(topic, queue_id, timestamp, b), name, why

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self.store.find_queue(topic, queue_id) or self.store.find_batch_queue(topic, queue_id)
        return self.store_time_at(topic, queue_id, cq.min_offset) if cq else -1
