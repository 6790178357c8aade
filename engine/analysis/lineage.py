"""A message's whole life across the store, from any one of its records (docs/formats/lineage.md
gives every rule with the RocketMQ source line it follows).

Index-driven, never a log scan: the records of one life share the producer's UNIQ_KEY, which
the IndexService indexes under each record's own topic, so the life is the UNIQ_KEY's walk in
the few topics a copy can be written to (the original topic, SCHEDULE_TOPIC_XXXX, the
transaction half topic, the timer topic, the subscribing groups' %RETRY%/%DLQ% topics). A
transaction op message has no UNIQ_KEY: it is joined to its half by the half's queue offset
(its body), the op queue read from the half's store time on. Each hop reads one record."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.errors import StoreError
from engine.format.lmq import java_split
from engine.format.message import SCHEDULE_TOPIC, TRANSACTION_COMMIT_TYPE
from engine.format.msgid import decode_offset_msg_id, looks_like_msg_id
from engine.format.timer_layout import TIMER_TOPIC

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"       # TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"      # TopicValidator.RMQ_SYS_TRANS_OP_HALF_TOPIC
OP_TAG = "d"                                  # TransactionalMessageUtil.REMOVETAG
RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX / DLQ_GROUP_TOPIC_PREFIX
ALL_GROUP_TOPICS_UP_TO = 64   # a store with at most this many %RETRY%/%DLQ% topics has them all walked

ROLES = ("original", "producer-resend", "delay-scheduled", "delay-delivered", "retry-scheduled", "retry",
         "dlq", "tx-half", "tx-op", "tx-commit", "timer-scheduled", "timer-delivered")
FINAL_STATES = ("delivered", "pending-delay", "consumed-after-N-retries", "dead-lettered", "committed",
                "rolled-back", "unresolved", "resent", "pending-retry", "pending-timer")


@dataclass
class Hop:
    """One record of a life: the message and what it is in that life."""
    message: object
    role: str = "original"
    extra: dict = field(default_factory=dict)

    @property
    def offset(self) -> int:
        return self.message.commitLogOffset


def real_topic(m) -> str:
    """The topic a consumer knows the message by: REAL_TOPIC of a parked copy (schedule, half,
    timer), RETRY_TOPIC of a %RETRY%/%DLQ% copy, else the record's own topic."""
    t, p = m.topic, m.properties
    if t in (SCHEDULE_TOPIC, HALF_TOPIC, TIMER_TOPIC) and p.get("REAL_TOPIC"):
        t = p["REAL_TOPIC"]
    if t.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        return p.get("RETRY_TOPIC") or t
    return t


def group_of(topic: str) -> str | None:
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if topic.startswith(prefix):
            return topic[len(prefix):]
    return None


def op_half_offsets(m) -> list[int]:
    """The half queue offsets an op message removes (see op_body_offsets)."""
    return op_body_offsets(m.properties.get("TAGS"), m.body)


def op_body_offsets(tags, body: bytes) -> list[int]:
    """An op message's body: one half queue offset (4.9) or several joined by commas (5.x's
    TransactionalOpBatchService); only messages tagged `d` remove halves."""
    if tags != OP_TAG:
        return []
    out = []
    for tok in (body or b"").decode("utf-8", "replace").split(","):
        tok = tok.strip()
        if tok.lstrip("-").isdigit():
            out.append(int(tok))
    return out


class LifeRules:
    """The rules that name a life's records and its fate, from records alone (no store): what
    the consumer offsets, the schedule offsets and the delay level table say, read once. The
    store walker (Lineage) and the whole-store scans (engine.scan.lineage_job) share them."""

    def __init__(self, offsets: dict, delay_offsets: dict, level_millis: list[int], groups=()):
        self.offsets = offsets                           # (topic, group, queueId) -> committed offset
        self.subscriptions: dict[str, set[str]] = {}     # group -> topics it has committed offsets in
        for topic, group, _ in offsets:
            self.subscriptions.setdefault(group, set()).add(topic)
        for group in groups:                             # groups known by their %RETRY%/%DLQ% topics only
            self.subscriptions.setdefault(group, set())
        for group, topics in self.subscriptions.items():  # a consumer always subscribes its retry topic
            topics.add(RETRY_PREFIX + group)
        self.delay_offsets = delay_offsets               # delay level -> the schedule service's next offset
        self.level_millis = level_millis

    @classmethod
    def of_store(cls, store) -> "LifeRules":
        table = (store.config_json("delayOffset.json") or {}).get("offsetTable") or {}
        delays = {}
        if isinstance(table, dict):
            for k, v in table.items():
                try:
                    delays[int(k)] = int(v)
                except (TypeError, ValueError):
                    continue
        groups = {group_of(t) for t in store.topics() if group_of(t)}
        return cls(store.consumer_offsets(), delays, store.cfg.delay_level_millis, sorted(groups))

    def life_of(self, records, topic: str | None = None) -> dict:
        """The life these records make (any order; they are put in write order)."""
        hops = [Hop(m) for m in sorted(records, key=lambda m: m.commitLogOffset)]
        self.classify(hops)
        if topic is None:
            first = next((h.message for h in hops if h.message.topic != OP_TOPIC), hops[0].message)
            topic = real_topic(first)
        return self.describe(hops, topic)

    # ---- roles -----------------------------------------------------------------------
    def classify(self, hops: list[Hop]) -> None:
        halves = {h.offset: h for h in hops if h.message.topic == HALF_TOPIC}
        committed = {h.message.preparedTransactionOffset for h in hops
                     if h.message.sysFlag & 0x0C == TRANSACTION_COMMIT_TYPE}
        first_in_topic: dict[str, int] = {}
        for h in hops:
            m, p, t = h.message, h.message.properties, h.message.topic
            ex = h.extra
            if t == HALF_TOPIC:
                h.role = "tx-half"
            elif t == OP_TOPIC:
                h.role = "tx-op"
                half = next((x for x in halves.values() if x.message.queueOffset in op_half_offsets(m)
                             and x.message.queueId == m.queueId), None)
                if half is not None:
                    ex["halfOffset"] = half.offset
                    ex["txAction"] = "commit" if half.offset in committed else "rollback"
            elif m.sysFlag & 0x0C == TRANSACTION_COMMIT_TYPE and m.preparedTransactionOffset:
                h.role = "tx-commit"
                ex["halfOffset"] = m.preparedTransactionOffset
            elif t == SCHEDULE_TOPIC:
                level = m.queueId + 1   # ScheduleMessageService.queueId2DelayLevel
                ex["delayLevel"] = level
                ex["dueTimestamp"] = self.due(m, level)
                target = p.get("REAL_TOPIC") or ""
                if target.startswith(RETRY_PREFIX):
                    h.role = "retry-scheduled"
                    ex["attempt"], ex["group"] = m.reconsumeTimes, group_of(target)
                else:
                    h.role = "delay-scheduled"
            elif t == TIMER_TOPIC:
                h.role = "timer-scheduled"
                ex["dueTimestamp"] = _int(p.get("TIMER_OUT_MS"))
                if p.get("TIMER_ROLL_TIMES"):
                    ex["rollTimes"] = _int(p["TIMER_ROLL_TIMES"])
            elif p.get("TIMER_DEQUEUE_MS"):   # put back into its topic by the timer (REAL_TOPIC may be cleared)
                h.role = "timer-delivered"
                ex["dueTimestamp"] = _int(p.get("TIMER_OUT_MS"))
                if group_of(t):
                    ex["attempt"], ex["group"] = m.reconsumeTimes, group_of(t)
            elif t.startswith(DLQ_PREFIX):
                h.role = "dlq"
                ex["attempt"], ex["group"] = m.reconsumeTimes, group_of(t)
            elif t.startswith(RETRY_PREFIX):
                h.role = "retry"
                ex["attempt"], ex["group"] = m.reconsumeTimes, group_of(t)
            elif p.get("DELAY") and p.get("REAL_TOPIC") == t:
                h.role = "delay-delivered"
                ex["delayLevel"] = _int(p.get("DELAY"))
            elif t in first_in_topic:
                h.role = "producer-resend"
                ex["resendOf"] = first_in_topic[t]
            else:
                h.role = "original"
            if h.role == "original":
                first_in_topic.setdefault(t, h.offset)
            lmq = self.lmq_queues(m)
            if lmq:
                ex["lmq"] = lmq

    def due(self, m, level: int) -> int | None:
        """When a scheduled record is due: the tagsCode its decoding computed (the deliver time,
        as CommitLog computes it at dispatch), else store time + the level's delay."""
        t = getattr(m, "tagsCode", 0)
        if t and t > m.storeTimestamp:
            return t
        if 1 <= level <= len(self.level_millis):
            return m.storeTimestamp + self.level_millis[level - 1]
        return None

    def delivered_by_schedule(self, m) -> bool:
        """The schedule service's offset for the record's level has passed it (delayOffset.json)."""
        return m.queueOffset < self.delay_offsets.get(m.queueId + 1, 0)

    @staticmethod
    def lmq_queues(m) -> list[dict]:
        """The LMQ queues a record was dispatched to, with its offset in each (INNER_MULTI_DISPATCH /
        INNER_MULTI_QUEUE_OFFSET, comma-separated in step)."""
        names = m.properties.get("INNER_MULTI_DISPATCH")
        if not names:
            return []
        offs = java_split(m.properties.get("INNER_MULTI_QUEUE_OFFSET") or "")
        return [{"queue": n, "queueOffset": _int(offs[i]) if i < len(offs) else None}
                for i, n in enumerate(java_split(names))]

    # ---- the life's summary ------------------------------------------------------------
    def describe(self, hops: list[Hop], topic: str) -> dict:
        roles = [h.role for h in hops]
        first = hops[0].message
        life = {"kind": "plain", "originalOffset": hops[0].offset, "topic": topic,
                "uniqKey": first.uniqKey, "keys": first.keys}
        if "tx-half" in roles:
            life["kind"] = "tx"
            life["producerGroup"] = first.properties.get("PGROUP")
            if "tx-commit" in roles:
                life["finalState"], life["txAction"] = "committed", "commit"
            elif "tx-op" in roles:
                life["finalState"], life["txAction"] = "rolled-back", "rollback"
            else:
                life["finalState"], life["txAction"] = "unresolved", None
        elif {"retry", "retry-scheduled", "dlq"} & set(roles):
            life["kind"] = "retry"
            group = next(h.extra["group"] for h in hops if h.extra.get("group"))
            retries = sum(1 for h in hops if h.role == "retry" and h.extra.get("group") == group)
            life.update(group=group, retries=retries)
            dlq = [h for h in hops if h.role == "dlq"]
            if dlq:
                life["finalState"] = "dead-lettered"
                life["maxReconsumeTimes"] = dlq[-1].message.reconsumeTimes - 1
            elif roles[-1] == "retry-scheduled" and not self.delivered_by_schedule(hops[-1].message):
                life["finalState"] = "pending-retry"
                life["dueTimestamp"] = hops[-1].extra.get("dueTimestamp")
            else:
                life["finalState"] = f"consumed-after-{retries}-retries"
        elif "delay-scheduled" in roles:
            life["kind"] = "delay"
            sched = next(h for h in hops if h.role == "delay-scheduled")
            life["delayLevel"] = sched.extra["delayLevel"]
            life["dueTimestamp"] = sched.extra["dueTimestamp"]
            pending = "delay-delivered" not in roles and not self.delivered_by_schedule(sched.message)
            life["finalState"] = "pending-delay" if pending else "delivered"
        elif "timer-scheduled" in roles or "timer-delivered" in roles:
            life["kind"] = "timer"
            life["dueTimestamp"] = next(h.extra.get("dueTimestamp") for h in hops if h.role.startswith("timer"))
            life["finalState"] = "delivered" if "timer-delivered" in roles else "pending-timer"
        elif "producer-resend" in roles:
            life["kind"], life["finalState"] = "resend", "resent"
        else:
            life["finalState"] = "delivered"
        life["records"] = [record_json(h) for h in hops]
        life["consumption"] = self.consumption(hops)
        return life

    def consumption(self, hops: list[Hop]) -> dict:
        """Per group: the life's records in topics the group has committed offsets in, each with
        that offset; consumed = the last such record lies below it (null: no such record)."""
        out = {}
        for group in sorted(self.subscriptions):
            subs = self.subscriptions[group]
            queues = []
            for h in hops:
                m = h.message
                if m.topic not in subs:
                    continue
                committed = self.offsets.get((m.topic, group, m.queueId))
                queues.append({"commitLogOffset": m.commitLogOffset, "topic": m.topic, "queueId": m.queueId,
                               "queueOffset": m.queueOffset, "committedOffset": committed,
                               "pastCommittedOffset": committed is not None and m.queueOffset < committed})
            out[group] = {"consumed": queues[-1]["pastCommittedOffset"] if queues else None, "queues": queues}
        return out


class Lineage(LifeRules):
    """The lineage reader of one open store: the rules, and the index walks that find a life."""

    def __init__(self, store):
        rules = LifeRules.of_store(store)
        super().__init__(rules.offsets, rules.delay_offsets, rules.level_millis, rules.subscriptions)
        self.store = store
        names = store.topics()
        self.topic_names = set(names)
        self.group_topics = [t for t in names if t.startswith((RETRY_PREFIX, DLQ_PREFIX))]

    def due(self, m, level: int) -> int | None:
        """When a scheduled record is due: its consume queue unit's tagsCode (the deliver time
        CommitLog computed at dispatch with the broker's level table), else the rules' answer."""
        cq = self.store.find_queue(SCHEDULE_TOPIC, m.queueId)
        u = cq.unit(m.queueOffset) if cq is not None and cq.min_offset <= m.queueOffset < cq.max_offset else None
        if u is not None and u[0] == m.commitLogOffset:
            return u[2]
        return super().due(m, level)

    # ---- handles ---------------------------------------------------------------------
    def seeds(self, offset=None, msgid=None, uniq=None, key=None, topic=None) -> list:
        """The records a handle names (an offset, an offset msgId or UNIQ_KEY, a UNIQ_KEY, a key in a topic)."""
        st = self.store
        if offset is not None:
            m = st.look_message_by_offset(offset) if st.min_offset <= offset < st.max_offset else None
            if m is None:
                raise StoreError(f"no message starts at this commitlog offset "
                                 f"(the commitlog holds [{st.min_offset}, {st.max_offset}))", offset=offset)
            return [m]
        if msgid is not None:
            msgid = msgid.strip().upper()
            if looks_like_msg_id(msgid):
                off = decode_offset_msg_id(msgid)[2]
                m = st.look_message_by_offset(off) if st.min_offset <= off < st.max_offset else None
                if m is not None and m.msgId == msgid:
                    return [m]
            uniq = msgid
        if uniq is not None:
            uniq = uniq.strip().upper()
            return self.walk_uniq(uniq, self.group_topics + [t for t in (SCHEDULE_TOPIC, HALF_TOPIC, TIMER_TOPIC)]
                                  + sorted({t for t, _g, _q in self.offsets}))
        if key is not None and topic is not None:
            return st.query_message(topic, key, max_num=0).messages
        raise ValueError("a handle is needed: an offset, a msgId, a UNIQ_KEY, or a key with its topic")

    def walk_uniq(self, uniq: str, topics) -> list:
        """Every record holding `uniq` in the given topics (one index walk per topic)."""
        found = {}
        for t in dict.fromkeys(topics):
            if t in self.topic_names:
                for m in self.store.query_message(t, uniq, max_num=0).messages:
                    if m.uniqKey == uniq:
                        found[m.commitLogOffset] = m
        return list(found.values())

    # ---- one life --------------------------------------------------------------------
    def lives(self, seeds) -> list[dict]:
        """The lives the seed records belong to, each once, ordered by their first record."""
        out, seen = [], set()
        for m in seeds:
            if m.topic == OP_TOPIC:
                half = self.half_of_op(m)
                m = half if half is not None else m
            ident = m.uniqKey or m.properties.get("ORIGIN_MESSAGE_ID") or m.commitLogOffset
            if ident in seen:
                continue
            seen.add(ident)
            life = self.life(m)
            if not any(r["commitLogOffset"] in seen for r in life["records"]):
                seen.update(r["commitLogOffset"] for r in life["records"])
                out.append(life)
        return sorted(out, key=lambda d: d["originalOffset"])

    def candidate_topics(self, m, topic: str) -> list[str]:
        """The topics a copy of a message of `topic` can be written to."""
        groups = {g for g, subs in self.subscriptions.items() if topic in subs}
        if group_of(m.topic):
            groups.add(group_of(m.topic))
        out = [topic, m.topic, m.properties.get("REAL_TOPIC") or topic, SCHEDULE_TOPIC, HALF_TOPIC, TIMER_TOPIC]
        out += [p + g for g in sorted(groups) for p in (RETRY_PREFIX, DLQ_PREFIX)]
        if len(self.group_topics) <= ALL_GROUP_TOPICS_UP_TO:
            out += self.group_topics
        return out

    def life(self, m) -> dict:
        topic = real_topic(m)
        if m.uniqKey:
            msgs = self.walk_uniq(m.uniqKey, self.candidate_topics(m, topic))
        else:
            msgs = [m]
        by_off = {x.commitLogOffset: x for x in msgs}
        by_off.setdefault(m.commitLogOffset, m)
        origin = m.properties.get("ORIGIN_MESSAGE_ID")
        if origin and looks_like_msg_id(origin) and not m.uniqKey:
            o = self.store.look_message_by_offset(decode_offset_msg_id(origin)[2])
            if o is not None and o.msgId == origin.upper():
                by_off.setdefault(o.commitLogOffset, o)
        for half in [x for x in by_off.values() if x.topic == HALF_TOPIC]:
            op = self.op_of_half(half)
            if op is not None:
                by_off[op.commitLogOffset] = op
        return self.life_of(by_off.values(), topic)

    # ---- transactions ----------------------------------------------------------------
    def half_of_op(self, op):
        """The half an op message removes: the half queue's unit at the op body's offset
        (the op sits in the op queue with the half's queue id)."""
        cq = self.store.find_queue(HALF_TOPIC, op.queueId)
        for qo in op_half_offsets(op):
            u = cq.unit(qo) if cq is not None and cq.min_offset <= qo < cq.max_offset else None
            if u is not None:
                return self.store.commitlog.get_message(u[0], u[1])
        return None

    def op_of_half(self, half):
        """The op message naming this half's queue offset: the op queue of the half's queue id,
        read from the first op stored at or after the half (an op is written after its half)."""
        cq = self.store.find_queue(OP_TOPIC, half.queueId)
        if cq is None:
            return None
        cl = self.store.commitlog
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:  # first unit stored at or after the half
            mid = (lo + hi) // 2
            u = cq.unit(mid)
            if u is not None and 0 <= cl.pickup_store_timestamp(u[0], u[1]) < half.storeTimestamp:
                lo = mid + 1
            else:
                hi = mid
        q = lo
        while q < cq.max_offset:
            units = cq.units(q, q + 4096)
            if len(units) == 0:
                break
            for pos, size in zip(units["commitLogOffset"].tolist(), units["size"].tolist()):
                op = cl.get_message(pos, size)
                if op is not None and half.queueOffset in op_half_offsets(op):
                    return op
            q += len(units)
        return None

def record_json(h: Hop) -> dict:
    m = h.message
    d = {"commitLogOffset": m.commitLogOffset, "role": h.role, "topic": m.topic, "queueId": m.queueId,
         "queueOffset": m.queueOffset, "storeTimestamp": m.storeTimestamp, "bornTimestamp": m.bornTimestamp,
         "msgId": m.msgId, "uniqKey": m.uniqKey, "keys": m.keys, "tags": m.tags,
         "reconsumeTimes": m.reconsumeTimes, "sysFlag": m.sysFlag, "size": m.storeSize}
    d.update(h.extra)
    return d


def _int(s) -> int | None:
    try:
        return int(s)
    except (TypeError, ValueError):
        return None


def lineage(store, **handle) -> list[dict]:
    """Every life the handle's records belong to (see Lineage.seeds for the handles)."""
    lin = Lineage(store)
    return lin.lives(lin.seeds(**handle))
