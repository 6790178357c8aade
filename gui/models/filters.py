"""The message table's filter row as a predicate over messages (no Qt).

Fields, all optional and ANDed:
  tags      a RocketMQ subscription expression: `TagA || TagB`, `*` or empty for all
  key       one of the message's KEYS tokens, or its UNIQ_KEY
  property  `name=value` (exact value) or `name` (the property is present)
  body      text contained in the body (UTF-8, case-insensitive), or `hex:0a1b..` for bytes
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from engine import Message
from engine.format.text import parse_tags_expression

from .queue_rows import QueueRow, iter_rows_with_messages, page_rows


@dataclass(frozen=True)
class MessageFilter:
    tags: str = ""
    key: str = ""
    prop: str = ""
    body: str = ""

    @property
    def empty(self) -> bool:
        return not any(s.strip() for s in (self.tags, self.key, self.prop, self.body)) or \
            (self.tags.strip() == "*" and not any(s.strip() for s in (self.key, self.prop, self.body)))

    def describe(self) -> str:
        parts = []
        if self.tags.strip():
            parts.append(f"tags {self.tags.strip()}")
        if self.key.strip():
            parts.append(f"key {self.key.strip()}")
        if self.prop.strip():
            parts.append(f"property {self.prop.strip()}")
        if self.body.strip():
            parts.append(f"body contains {self.body.strip()!r}")
        return ", ".join(parts) or "everything"

    def predicate(self) -> Callable[[Message], bool]:
        """Compile to a function; raises ValueError (with a message for the user) on bad input."""
        tags = parse_tags_expression(self.tags)
        key = self.key.strip()
        name, value = None, None
        if self.prop.strip():
            name, sep, val = self.prop.strip().partition("=")
            name = name.strip()
            if not name:
                raise ValueError("property filter needs a name: name=value or name")
            value = val if sep else None
        needle_bytes = None
        needle_text = None
        body = self.body.strip()
        if body.lower().startswith("hex:"):
            try:
                needle_bytes = bytes.fromhex(body[4:].replace(" ", ""))
            except ValueError:
                raise ValueError(f"body filter {body!r}: not valid hex after 'hex:'") from None
        elif body:
            needle_text = body.casefold()

        def pred(m: Message) -> bool:
            if tags is not None and (m.tags or "") not in tags:
                return False
            if key and key not in m.key_list and m.uniqKey != key:
                return False
            if name is not None:
                if name not in m.properties:
                    return False
                if value is not None and m.properties[name] != value:
                    return False
            if needle_bytes is not None and needle_bytes not in _body_bytes(m):
                return False
            if needle_text is not None:
                text = _body_text(m)
                if needle_text not in text:
                    return False
            return True
        return pred


def _body_bytes(m: Message) -> bytes:
    try:
        return m.body_decompressed()
    except Exception:  # an unknown or broken compression: search the stored bytes
        return m.body


def _body_text(m: Message) -> str:
    return _body_bytes(m).decode("utf-8", errors="replace").casefold()


def _take(rows, pred, matches: list, max_matches: int) -> int | None:
    """Append the rows whose message passes `pred`; once `max_matches` are in, the queue
    offset after the last one taken (where the scan stopped), else None."""
    for row, m in rows:
        if m is not None and pred(m):
            matches.append(row)
            if len(matches) >= max_matches:
                return row.queueOffset + 1
    return None


def scan(store, topic: str, queue_id: int, start: int, end: int, flt: MessageFilter,
         max_matches: int = 100_000, cancel=None, step: int = 512, lock=None
         ) -> Iterator[tuple[int, int]]:
    """Generator: yields (done, total) progress and returns (matches, scanned_end).
    `lock` (a context manager) is held per step so other readers interleave."""
    pred = flt.predicate()
    total = max(0, end - start)
    matches: list[QueueRow] = []
    q = start
    while q < end:
        if cancel is not None and cancel.cancelled:
            break
        stop = min(end, q + step)
        if lock is not None:
            with lock:
                part = list(iter_rows_with_messages(store, topic, queue_id, q, stop))
        else:
            part = list(iter_rows_with_messages(store, topic, queue_id, q, stop))
        full_at = _take(part, pred, matches, max_matches)
        if full_at is not None:
            return matches, full_at
        q = stop
        yield q - start, total
    return matches, q


def scan_queue(store, topic: str, queue_id: int, start: int, end: int, flt: MessageFilter,
               max_matches: int = 100_000, page: int = 1024) -> Iterator[tuple[int, int]]:
    """Like `scan`, through the engine's getMessage pages (a page of `page` messages is one
    compiled read): fast enough for a whole queue. Generator: yields (done, total) after each
    page (the worker's cancel point) and returns (matches, scanned_end)."""
    pred = flt.predicate()
    matches: list[QueueRow] = []
    cq = store.find_queue(topic, queue_id)
    total = max(0, end - start)
    if cq is None:  # a BatchCQ queue (one row per inner message), or none
        b = store.queue_bounds(topic, queue_id)
        if b is None:
            return matches, start
        q, end = max(start, b[1]), min(end, b[2])
        while q < end:
            stop = min(end, q + page)
            full_at = _take(iter_rows_with_messages(store, topic, queue_id, q, stop), pred, matches, max_matches)
            if full_at is not None:
                return matches, full_at
            q = stop
            yield q - start, total
        return matches, max(q, start)
    q = max(start, cq.min_offset)
    end = min(end, cq.max_offset)
    while q < end:
        res = store.get_message(topic, queue_id, q, min(page, end - q))
        rows, nxt = page_rows(store, topic, queue_id, q, min(end, q + page), res)
        nxt = nxt if nxt > q else min(end, q + page)  # no unit readable there (a missing CQ file)
        full_at = _take(rows, pred, matches, max_matches)
        if full_at is not None:
            return matches, full_at
        q = nxt
        yield q - start, total
    return matches, max(q, start)
