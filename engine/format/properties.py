"""Message property strings: name 0x01 value 0x02 ... (4.9 writes no trailing 0x02, 5.x does)."""
from __future__ import annotations

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

TAGS = "TAGS"
KEYS = "KEYS"
UNIQ_KEY = "UNIQ_KEY"
DELAY = "DELAY"
WAIT = "WAIT"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
CRC32_PROP = "__CRC32#"
KEY_SEPARATOR = " "

# MessageConst.STRING_HASH_SET: the names Message.putUserProperty refuses ("The Property<%s> is
# used by system"). In 4.9.7 that client call is the only place that refuses them (neither
# Validators.checkMessage nor the broker does); 5.3.3's set adds the pop, timer, DLQ, born-host
# and CRC names, and its gRPC proxy (SendMessageActivity) refuses them too. A user property is
# refused if either version reserves the name; the store's own puts set system properties freely.
RESERVED_PROPERTIES_4 = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID",
    "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
    "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME",
    "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER",
    "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET",
})
RESERVED_PROPERTIES_5 = RESERVED_PROPERTIES_4 | {
    "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO",
    "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP",
    "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
}
RESERVED_PROPERTIES = RESERVED_PROPERTIES_5


def user_property_problem(name: str, value: str) -> str | None:
    """Why Message.putUserProperty refuses this property (a reserved name; a blank name or
    value), or why the store cannot hold it (a 0x01 / 0x02 separator inside); None if fine."""
    if name in RESERVED_PROPERTIES:
        return f"the Property<{name}> is used by system, input another please"
    if not name or not name.strip() or value is None or not str(value).strip():
        return f"the name or value of property {name!r} can not be null or blank"
    if any(c in name + str(value) for c in NAME_VALUE_SEPARATOR + PROPERTY_SEPARATOR):
        return f"invalid property {name!r}={value!r}: it holds a separator character (0x01 / 0x02)"
    return None


def parse_properties(s: str) -> dict[str, str]:
    """Exactly MessageDecoder.string2messageProperties: empty names/values are dropped,
    the value runs to the next 0x02 (it may contain 0x01), later duplicates win."""
    out: dict[str, str] = {}
    for seg in s.split(PROPERTY_SEPARATOR):
        name, _, value = seg.partition(NAME_VALUE_SEPARATOR)
        if name and value:
            out[name] = value
    return out


def serialize_properties(props: dict[str, str], trailing: bool = False) -> str:
    """Properties as a 4.9 writer stores them (trailing=True gives the 5.x form)."""
    parts = [f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items() if v is not None]
    s = PROPERTY_SEPARATOR.join(parts)
    return s + PROPERTY_SEPARATOR if trailing and s else s


def split_keys(keys: str | None) -> list[str]:
    """KEYS split like Java's split(" "), empty tokens skipped (they are never indexed)."""
    if not keys:
        return []
    return [k for k in keys.split(KEY_SEPARATOR) if k]


class PropertyFields:
    """uniqKey, tags, keys and key_list read from a `properties` dict: one definition for
    every message-like class (Message, InnerMessage)."""
    __slots__ = ()

    @property
    def uniqKey(self) -> str | None:
        return self.properties.get(UNIQ_KEY)

    @property
    def tags(self) -> str | None:
        return self.properties.get(TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(KEYS)

    @property
    def key_list(self) -> list[str]:
        return split_keys(self.keys)
