"""Message predicates shared by every scan engine, evaluated block by block: the cheap
vectorised ones (topic, queue) first, then the ones that decode (tags, keys, properties,
body). Spark runs exactly this code inside the data source, so both engines agree.

- `topics`, `queue_ids`: membership;
- `tags`: a RocketMQ subscription expression: `*` (or empty) for any, else tags separated
  by `||` (a message matches when its TAGS value equals one of them);
- `key`: equals one KEYS token or the UNIQ_KEY;
- `prop`: (name, regex): the property exists and the regex is found in its value;
- `body`: regex found in the body text (decompressed when the record is compressed; a body
  that cannot be decompressed here -- codec module missing, damaged -- never matches);
  `body_decoded`: in the decoded text instead (engine.format.body_decode: Protobuf,
  MessagePack, CBOR, Avro bodies as JSON).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from engine.format.text import parse_tags_expression
from engine.scan.columns import RecordBlock


@dataclass(frozen=True)
class MessageFilter:
    topics: frozenset[str] | None = None
    queue_ids: frozenset[int] | None = None
    body: str | None = None
    tags: str | None = None
    key: str | None = None
    prop: tuple[str, str] | None = None
    body_decoded: bool = False

    @classmethod
    def build(cls, topics=None, queue_ids=None, body=None, tags=None, key=None, prop=None,
              body_decoded=False) -> "MessageFilter":
        """Validated construction: regexes compile, `prop` is 'name=regex' or a pair."""
        if isinstance(prop, str):
            name, sep, rx = prop.partition("=")
            if not sep or not name:
                raise ValueError(f"--prop expects NAME=REGEX, got {prop!r}")
            prop = (name, rx)
        for label, rx in (("body", body), ("prop", prop[1] if prop else None)):
            if rx is not None:
                try:
                    re.compile(rx)
                except re.error as e:
                    raise ValueError(f"bad {label} regex {rx!r}: {e}") from None
        parse_tags_expression(tags)  # ValueError for an expression that names no tag
        return cls(frozenset(topics) if topics else None, frozenset(int(q) for q in queue_ids) if queue_ids else None,
                   body or None, tags or None, key or None, tuple(prop) if prop else None,
                   bool(body_decoded and body))

    @property
    def is_empty(self) -> bool:
        return self == MessageFilter()

    def to_options(self) -> dict[str, str]:
        """Data source options carrying this filter."""
        o = {}
        if self.topics:
            o["topic"] = ",".join(sorted(self.topics))
        if self.queue_ids:
            o["queueId"] = ",".join(str(q) for q in sorted(self.queue_ids))
        if self.body is not None:
            o["bodyRegex"] = self.body
        if self.body_decoded:
            o["bodyDecodedText"] = "true"
        if self.tags is not None:
            o["tags"] = self.tags
        if self.key is not None:
            o["key"] = self.key
        if self.prop is not None:
            o["prop"] = f"{self.prop[0]}={self.prop[1]}"
        return o

    @classmethod
    def from_options(cls, options) -> "MessageFilter":
        def get(k):
            v = options.get(k.lower()) if hasattr(options, "get") else None
            return v if v not in (None, "") else None
        topics = get("topic")
        queues = get("queueId")
        return cls.build(topics=[t for t in topics.split(",") if t] if topics else None,
                         queue_ids=[q for q in queues.split(",") if q.strip()] if queues else None,
                         body=get("bodyRegex"), tags=get("tags"), key=get("key"), prop=get("prop"),
                         body_decoded=(get("bodyDecodedText") or "").lower() == "true")

    # ---- evaluation --------------------------------------------------------------------
    def apply(self, block: RecordBlock) -> RecordBlock:
        if self.is_empty or len(block) == 0:
            return block
        mask = np.ones(len(block), dtype=bool)
        if self.topics is not None:
            codes, names = block.topic_codes
            wanted = [i for i, n in enumerate(names) if n in self.topics]
            mask &= np.isin(codes, wanted)
        if self.queue_ids is not None:
            mask &= np.isin(block.array("queueId"), list(self.queue_ids))
        if not mask.all():
            block = block.select(mask)
        if len(block) == 0:
            return block
        slow = []
        tagset = parse_tags_expression(self.tags)
        if tagset is not None:
            tags = block.tags
            slow.append(lambda b, i: tags[i] in tagset)
        if self.key is not None:
            key, keys, uniq = self.key, block.key_lists, block.uniq_keys
            slow.append(lambda b, i: key in keys[i] or uniq[i] == key)
        if self.prop is not None:
            name, rx = self.prop[0], re.compile(self.prop[1])
            props = block.properties
            slow.append(lambda b, i: (v := props[i].get(name)) is not None and rx.search(v) is not None)
        if self.body is not None:
            rx_body, dec = re.compile(self.body), self.body_decoded
            slow.append(lambda b, i: (t := b.body_text(i, dec)) is not None and rx_body.search(t) is not None)
        if not slow:
            return block
        keep = [i for i in range(len(block)) if all(f(block, i) for f in slow)]
        return block.select(np.asarray(keep, dtype=np.int64))


# ---- pushed conditions (a DataFrame's filters, through the Spark data source) ------------------
PUSHABLE = {"topic": "string", "queueId": "int", "tags": "string", "keys": "string",
            "storeTimestamp": "long", "commitLogOffset": "long"}
_OPS = {"=", "in", ">", ">=", "<", "<="}


@dataclass(frozen=True)
class Condition:
    """column OP value: `=` / `in` on PUSHABLE columns, ranges on the numeric ones. Exactly
    Spark's semantics: a null (a message without TAGS or KEYS) satisfies none."""
    column: str
    op: str
    value: object

    @classmethod
    def make(cls, column: str, op: str, value) -> "Condition | None":
        """The condition, or None when it cannot be evaluated here (Spark keeps it)."""
        kind = PUSHABLE.get(column)
        if kind is None or op not in _OPS:
            return None
        values = list(value) if op == "in" else [value]
        if kind == "string":
            if op not in ("=", "in") or not all(isinstance(v, str) for v in values):
                return None
        elif not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return None
        return cls(column, op, tuple(values) if op == "in" else value)

    def mask(self, block: RecordBlock) -> np.ndarray:
        if PUSHABLE[self.column] != "string":
            a = block.array(self.column)
            if self.op == "=":
                return a == self.value
            if self.op == "in":
                return np.isin(a, list(self.value))
            return {">": a > self.value, ">=": a >= self.value, "<": a < self.value, "<=": a <= self.value}[self.op]
        wanted = {self.value} if self.op == "=" else set(self.value)
        if self.column == "topic":
            codes, names = block.topic_codes
            return np.isin(codes, [i for i, n in enumerate(names) if n in wanted])
        values = block.tags if self.column == "tags" else block.keys
        return np.fromiter((v in wanted for v in values), dtype=bool, count=len(block))


def offset_bounds(conditions) -> tuple[int, int]:
    """[lo, hi) of commitLogOffset the conditions allow (for skipping whole slices)."""
    lo, hi = 0, 1 << 63
    for c in conditions:
        if c.column != "commitLogOffset":
            continue
        if c.op == "=":
            lo, hi = max(lo, c.value), min(hi, c.value + 1)
        elif c.op == "in":
            lo, hi = max(lo, min(c.value)), min(hi, max(c.value) + 1)
        elif c.op in (">", ">="):
            lo = max(lo, c.value + (c.op == ">"))
        else:
            hi = min(hi, c.value + (c.op == "<="))
    return lo, hi


def apply_conditions(conditions, block: RecordBlock) -> RecordBlock:
    """Keep the records every condition holds for; the cheap numeric ones first, each on
    what the previous left (strings are decoded only for the survivors)."""
    order = sorted(conditions, key=lambda c: PUSHABLE[c.column] == "string")
    for c in order:
        if not len(block):
            break
        m = c.mask(block)
        if not m.all():
            block = block.select(m)
    return block
