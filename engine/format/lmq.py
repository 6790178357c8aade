"""LMQ (light message queue) multi-dispatch: the property rules, declared once.

A record whose INNER_MULTI_DISPATCH lists LMQ names ("%LMQ%..." joined by ',') is also
dispatched into each LMQ's ordinary ConsumeQueue (queue id 0); at put the store records the
offsets it assigned in INNER_MULTI_QUEUE_OFFSET (same order, ',' joined, an empty element for
a name that is not an LMQ). The rules below are RocketMQ 5.3.3's (MixAll, LmqDispatch,
MultiDispatchUtils, ConsumeQueue.multiDispatchLmqQueue)."""
from __future__ import annotations

LMQ_PREFIX = "%LMQ%"                          # MixAll.LMQ_PREFIX
LMQ_QUEUE_ID = 0                              # MixAll.LMQ_QUEUE_ID
SEPARATOR = ","                               # MixAll.LMQ_DISPATCH_SEPARATOR
INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
RETRY_PREFIX = "%RETRY%"
SYSTEM_PREFIX = "rmq_sys_"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


def is_lmq(name: str | None) -> bool:
    """MixAll.isLmq."""
    return bool(name) and name.startswith(LMQ_PREFIX)


def topic_allows_lmq(topic: str) -> bool:
    """MixAll.topicAllowsLMQ / MultiDispatchUtils.isNeedHandleMultiDispatch's topic rule."""
    return not (topic.startswith(RETRY_PREFIX) or topic.startswith(SYSTEM_PREFIX) or topic == SCHEDULE_TOPIC)


def java_split(s: str) -> list[str]:
    """Java's String.split(","): trailing empty strings are dropped ("a," -> ["a"]; "" -> [""])."""
    parts = s.split(SEPARATOR)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if parts == [""] and s:
        return []
    return parts


def _blank(s: str | None) -> bool:
    return s is None or not s.strip()


def needs_wrap(topic: str, props: dict) -> bool:
    """MessageExtBrokerInner.needDispatchLMQ: the put side adds INNER_MULTI_QUEUE_OFFSET."""
    return not _blank(props.get(INNER_MULTI_DISPATCH)) and topic_allows_lmq(topic)


def dispatch_plan(topic: str, props: dict, multi_dispatch: bool, enable_lmq: bool
                  ) -> tuple[list[tuple[str, str]], str | None]:
    """What ConsumeQueue.multiDispatchLmqQueue does with a dispatched record:
    ([(queue name, offset element)], problem). The names containing '/' are left out (never
    written). problem "[bug]" = the two lists differ in length (nothing is dispatched);
    "unparsable" = an offset element that is not a number (RocketMQ's reput retries that
    record forever; the pairs before it are returned)."""
    if not multi_dispatch or not topic_allows_lmq(topic):
        return [], None
    names_s, offs_s = props.get(INNER_MULTI_DISPATCH), props.get(INNER_MULTI_QUEUE_OFFSET)
    if _blank(names_s) or _blank(offs_s):
        return [], None
    names, offs = java_split(names_s), java_split(offs_s)
    if len(names) != len(offs):
        return [], "[bug]"
    out = []
    for name, off in zip(names, offs):
        if "/" in name:
            continue
        try:
            int(off)
        except ValueError:
            return out, "unparsable"
        out.append((name, off))
    return out, None


def queue_id_for(name: str, record_queue_id: int, enable_lmq: bool) -> int:
    """An LMQ name is dispatched to queue 0; any other name to the record's own queue id."""
    return LMQ_QUEUE_ID if enable_lmq and is_lmq(name) else record_queue_id


def wrap_offsets(names_s: str, next_offset, enable_lmq: bool) -> str:
    """LmqDispatch.wrapLmqDispatch: the INNER_MULTI_QUEUE_OFFSET value for INNER_MULTI_DISPATCH
    `names_s`; next_offset(name) gives an LMQ's next free offset (getLmqQueueOffset)."""
    names = java_split(names_s)
    return SEPARATOR.join(str(next_offset(n)) if enable_lmq and is_lmq(n) else "" for n in names)


def lmq_names(names_s: str | None, enable_lmq: bool = True) -> list[str]:
    """The LMQ names whose counters updateLmqOffsets advances after the append."""
    if _blank(names_s):
        return []
    return [n for n in java_split(names_s) if enable_lmq and is_lmq(n)]
