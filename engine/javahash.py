"""Java String.hashCode over UTF-16 code units, and the two derived hashes RocketMQ stores:
the ConsumeQueue tagsCode and the IndexFile keyHash."""
from __future__ import annotations

INT_MIN = -(1 << 31)


def java_hash(s: str) -> int:
    """Signed 32-bit String.hashCode; non-BMP characters count as two surrogate units."""
    h = 0
    b = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(b), 2):
        h = (31 * h + ((b[i] << 8) | b[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """CQ tagsCode of a normal message: the tag hash sign-extended, 0 without tags."""
    return java_hash(tags) if tags else 0


def index_key_hash(key: str) -> int:
    """IndexFile.indexKeyHashMethod: Math.abs(hashCode) with Integer.MIN_VALUE mapped to 0."""
    h = java_hash(key)
    return 0 if h == INT_MIN else abs(h)


def index_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"
