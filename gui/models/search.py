"""Searches the search panel runs (no Qt): by key within a topic and a time range, by msgId
(offset id or UNIQ_KEY), and by time in a queue; plus CSV / JSON Lines export of results."""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field

from engine import Message
from engine.format.msgid import decode_offset_msg_id, decode_uniq_key, looks_like_msg_id

from ..timefmt import format_ms

LONG_MAX = (1 << 63) - 1


@dataclass
class SearchHit:
    message: Message
    false_hit: bool = False          # RocketMQ's hash matched, but the message lacks the key
    index_lost: bool = False         # only in an index file RocketMQ's restart deletes (crashed DLedger store)

    @property
    def match_text(self) -> str:
        if self.false_hit:
            return "FALSE HIT (hash only)"
        return "exact, INDEX LOST BY ROCKETMQ" if self.index_lost else "exact"


@dataclass
class KeySearchOutcome:
    hits: list[SearchHit]
    truncated: bool
    raw: bool
    cap: int                         # the cap that applied (0 = none)
    false_hits: int                  # hash collisions seen (exact: left out; raw: marked)
    index_offsets: list[int] = field(default_factory=list)
    index_lost: int = 0              # hits RocketMQ's own query no longer finds (marked)

    def summary(self) -> str:
        n = len(self.hits)
        mode = "raw RocketMQ hash match" if self.raw else "exact key match"
        parts = [f"{n} message{'s' if n != 1 else ''} ({mode})"]
        if self.truncated:
            parts.append(f"TRUNCATED at the cap of {self.cap}: raise the cap to see more")
        elif self.cap:
            parts.append(f"cap {self.cap}")
        else:
            parts.append("no cap")
        if self.false_hits:
            if self.raw:
                parts.append(f"{self.false_hits} false hit{'s' if self.false_hits != 1 else ''} marked")
            else:
                parts.append(f"{self.false_hits} hash collision{'s' if self.false_hits != 1 else ''} left out")
        if self.index_lost:
            parts.append(f"{self.index_lost} only in an index file RocketMQ's restart deletes: RocketMQ no longer "
                         "finds them (marked)")
        return "; ".join(parts)


def carries_key(m: Message, topic: str, key: str) -> bool:
    return m.topic == topic and (key in m.key_list or m.uniqKey == key)


def key_search(store, topic: str, key: str, begin: int = 0, end: int = LONG_MAX,
               max_num: int = 64, raw: bool = False) -> KeySearchOutcome:
    if not topic or not key:
        raise ValueError("a topic and a key are needed")
    if raw:
        batch = int(getattr(store.cfg, "maxMsgsNumBatch", 64) or 64)
        cap = min(max_num, batch) if max_num else batch
        res = store.query_message(topic, key, begin, end, max_num=cap, raw=True)
        hits = [SearchHit(m, not carries_key(m, topic, key)) for m in res.messages]
        return KeySearchOutcome(hits, len(res.offsets) >= cap, True, cap,
                                sum(h.false_hit for h in hits), list(res.offsets))
    res = store.query_message(topic, key, begin, end, max_num=max_num, raw=False)
    lost = res.index_lost
    return KeySearchOutcome([SearchHit(m, index_lost=m.commitLogOffset in lost) for m in res.messages],
                            bool(res.truncated), False, max_num, len(res.false_hits), list(res.offsets), len(lost))


@dataclass
class IdOutcome:
    kind: str                        # "offset" | "uniq" | "unknown" | "invalid"
    messages: list[Message]
    decoded: dict

    def summary(self) -> str:
        n = len(self.messages)
        if self.kind == "offset":
            d = self.decoded
            return (f"offset msgId: store host {d.get('host')}, commitlog offset {d.get('commitLogOffset')} "
                    f"— {n} message")
        if self.kind == "uniq":
            return f"UNIQ_KEY (producer-side id) — {n} message{'s' if n != 1 else ''}"
        if self.kind == "invalid":
            return "not a message id: expected 32 or 56 hex digits (offset msgId) or a UNIQ_KEY"
        hint = ""
        if self.decoded.get("commitLogOffset") is not None:
            hint = f" (decodes as an offset id pointing at commitlog offset {self.decoded['commitLogOffset']}, " \
                   "but no message with that id is there)"
        return "no message found" + hint


def decode_id(text: str) -> dict:
    """What an id says about itself, without reading the store."""
    s = text.strip().upper()
    out: dict = {}
    if looks_like_msg_id(s):
        addr, port, off = decode_offset_msg_id(s)
        host = ".".join(str(b) for b in addr) if len(addr) == 4 else \
            "[" + ":".join(f"{int.from_bytes(addr[i:i + 2], 'big'):x}" for i in range(0, 16, 2)) + "]"
        out.update(host=f"{host}:{port}", commitLogOffset=off)
    if len(s) in (32, 56) and all(c in "0123456789ABCDEF" for c in s):
        try:
            out["asUniqKey"] = decode_uniq_key(s)
        except (ValueError, IndexError):
            pass
    return out


def id_search(store, text: str, topic: str | None = None) -> IdOutcome:
    s = text.strip()
    if not s:
        return IdOutcome("invalid", [], {})
    kind, msgs = store.lookup_id(s, topic) if topic else store.lookup_id(s)
    return IdOutcome(kind, list(msgs), decode_id(s))


def time_search(store, topic: str, queue_id: int, ts_ms: int, boundary: str | None = "lower") -> dict:
    cq = store.find_queue(topic, queue_id)
    if cq is None:
        raise ValueError(f"no queue {topic} / {queue_id}")
    if boundary == "auto":  # RocketMQ's rule for the generation that wrote the store
        off, rule, _ = store.offset_by_time(topic, queue_id, ts_ms)
    else:
        off = store.get_offset_in_queue_by_time(topic, queue_id, ts_ms, boundary=boundary)
        rule = f"5.x-{boundary}" if boundary else "4.9"
    t = store.store_time_at(topic, queue_id, off) if cq.min_offset <= off < cq.max_offset else -1
    return {"offset": off, "storeTimestamp": t, "minOffset": cq.min_offset, "maxOffset": cq.max_offset,
            "rule": rule}


EXPORT_COLUMNS = ["match", "storeTimestamp", "storeTime", "topic", "queueId", "queueOffset",
                  "commitLogOffset", "keys", "tags", "msgId", "uniqKey", "storeSize"]


def export_csv(hits: list[SearchHit], path, utc: bool = False) -> int:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(EXPORT_COLUMNS)
        for h in hits:
            m = h.message
            w.writerow([h.match_text, m.storeTimestamp, format_ms(m.storeTimestamp, utc), m.topic, m.queueId,
                        m.queueOffset, m.commitLogOffset, m.keys or "", m.tags or "", m.msgId, m.uniqKey or "",
                        m.storeSize])
    return len(hits)


def export_jsonl(hits: list[SearchHit], path) -> int:
    with open(path, "w", encoding="utf-8") as fh:
        for h in hits:
            d = h.message.to_json(with_body=True)
            d["falseHit"] = h.false_hit
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    return len(hits)
