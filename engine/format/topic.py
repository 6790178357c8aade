"""RocketMQ's topic rules, written once: what a commitlog record can hold (characters and
length, V2 records for long retry topics) and, for a producer, the topics it may not send to
(Validators.checkTopic, TopicValidator). The store writer, the CLI's send and the GUI's send
dialog all ask `topic_problem`."""
from __future__ import annotations

import re

TOPIC_RE = re.compile(r"[%|a-zA-Z0-9_-]+\Z")  # \Z: "$" would let a trailing newline through
TOPIC_MAX_V1 = 127        # TOPICLENGTH is one signed byte in a V1 record
TOPIC_MAX_RETRY = 255     # %RETRY% topics may be longer, in V2 records (autoMessageVersionOnTopicLen)
# TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET: topics only the broker writes
NOT_ALLOWED_SEND = frozenset({"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
                              "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"})
SYSTEM_TOPICS = frozenset({"TBW102", "RMQ_SYS_TRACE_TOPIC", "BenchmarkTest"})


def topic_problem(topic: str, allow_v2: bool = False, producer: bool = False) -> str | None:
    """None when `topic` may be written (allow_v2: long %RETRY% topics in V2 records), else
    why not. producer=True adds the client's rules: no broker-only or system topic."""
    if not topic:
        return "topic is empty"
    if not TOPIC_RE.match(topic):
        return f"topic {topic!r} has illegal characters: characters outside [%|a-zA-Z0-9_-] are not allowed"
    if len(topic) > TOPIC_MAX_V1 and not (allow_v2 and topic.startswith("%RETRY%") and len(topic) <= TOPIC_MAX_RETRY):
        return f"topic is {len(topic)} characters; the limit is {TOPIC_MAX_V1}"
    if producer:
        if topic in NOT_ALLOWED_SEND:
            return f"sending to topic {topic!r} is forbidden: only the broker writes it"
        if topic in SYSTEM_TOPICS or topic.lower().startswith("rmq_sys_"):
            return f"topic {topic!r} is a system topic"
    return None


def needs_v2(topic: str) -> bool:
    """A topic too long for a V1 record's one-byte TOPICLENGTH."""
    return len(topic) > TOPIC_MAX_V1
