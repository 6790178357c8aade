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
