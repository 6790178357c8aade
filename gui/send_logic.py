"""What the send dialog checks and sends (no Qt): user properties, bodies from text / JSON /
hex / file, count with templating, and the send loop itself (a generator: progress between
messages, cancellable). The topic rules and the templates are the engine's (engine/format),
the same the CLI's send uses."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from engine.format.properties import RESERVED_PROPERTIES, user_property_problem  # noqa: F401 - the engine's rule
from engine.format.text import render_template
from engine.format.topic import topic_problem
from engine.tasks import Progress

BODY_TEXT, BODY_JSON, BODY_HEX, BODY_FILE = "text", "json", "hex", "file"


def parse_properties(text: str) -> dict[str, str]:
    """One `name=value` per line; blank lines and lines starting with # are skipped."""
    props: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"property line {n}: expected name=value")
        problem = user_property_problem(name, value)   # Message.putUserProperty's rules, the engine's
        if problem:
            raise ValueError(f"property line {n}: {problem}")
        props[name] = value
    return props


def body_from(mode: str, text: str) -> bytes:
    """The body bytes of one message (before templating for text modes)."""
    if mode == BODY_TEXT:
        return text.encode("utf-8")
    if mode == BODY_JSON:
        try:
            json.loads(text)
        except ValueError as exc:
            raise ValueError(f"body is not valid JSON: {exc}") from None
        return text.encode("utf-8")
    if mode == BODY_HEX:
        cleaned = re.sub(r"\s+", "", text)
        try:
            return bytes.fromhex(cleaned)
        except ValueError:
            raise ValueError("body is not valid hex (pairs of 0-9 a-f)") from None
    if mode == BODY_FILE:
        with open(text, "rb") as fh:
            return fh.read()
    raise ValueError(f"unknown body mode {mode!r}")


@dataclass
class SendPlan:
    topic: str
    body_mode: str
    body_text: str               # text / JSON / hex digits / a file path
    count: int = 1
    queue_id: int | None = None  # None: round robin over the topic's write queues
    tags: str = ""
    keys: str = ""
    properties: dict[str, str] = field(default_factory=dict)
    flush: str = "end"           # "each" | "end" | "none"
    template: bool = True

    def check(self) -> None:
        """Raise ValueError with the first problem, for the dialog to show."""
        err = topic_problem(self.topic, producer=True)
        if err:
            raise ValueError(err)
        if self.count < 1:
            raise ValueError("count must be at least 1")
        if self.queue_id is not None and self.queue_id < 0:
            raise ValueError("queue id must not be negative")
        if self.body_mode != BODY_FILE or self.body_text:
            body_from(self.body_mode, render_template(self.body_text, 0, self.count) if self.template
                      and self.body_mode in (BODY_TEXT, BODY_JSON) else self.body_text)
        else:
            raise ValueError("choose a file for the body")

    def message(self, i: int) -> dict:
        """keyword arguments of put_message for message number i."""
        t = (lambda s: render_template(s, i, self.count)) if self.template else (lambda s: s)
        if self.body_mode in (BODY_TEXT, BODY_JSON):
            body = body_from(self.body_mode, t(self.body_text))
        else:
            body = body_from(self.body_mode, self.body_text)
        return dict(topic=self.topic, body=body, queue_id=self.queue_id, tags=t(self.tags) or None,
                    keys=t(self.keys) or None, properties={k: t(v) for k, v in self.properties.items()} or None)


def send(store, plan: SendPlan):
    """A task (engine.tasks): yields Progress after each message, returns the PutResults."""
    plan.check()
    results = []
    try:
        for i in range(plan.count):
            results.append(store.put_message(**plan.message(i)))
            if plan.flush == "each":
                store.flush()
            yield Progress(i + 1, plan.count, "send", "messages")
    finally:  # also when cancelled: what was sent is made durable as asked
        if plan.flush == "end" and results:
            store.flush()
    return results
