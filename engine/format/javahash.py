"""Java String.hashCode over UTF-16 code units, and the two derived hashes RocketMQ stores:
the ConsumeQueue tagsCode and the IndexFile keyHash."""
from __future__ import annotations

import sys
from operator import mul

INT_MIN = -(1 << 31)
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"
_POWERS_CACHED = 1024
_RISING = [1]                              # _RISING[i] = 31**i mod 2**32, i < _POWERS_CACHED
_POWERS: dict[int, tuple[int, ...]] = {0: ()}   # _POWERS[n][i] = 31**(n-1-i) mod 2**32


def _powers(n: int) -> tuple[int, ...]:
    """The powers for a string of n code units, made when first asked for (making all 1,024
    lengths at once took 16 ms, which the first put of a process paid)."""
    p = _POWERS.get(n)
    if p is not None:
        return p
    rising = _RISING
    if n > _POWERS_CACHED:
        rising = list(_RISING)
    while len(rising) < n:
        rising.append(rising[-1] * 31 & 0xFFFFFFFF)
    p = tuple(rising[n - 1::-1])
    if n <= _POWERS_CACHED:
        _POWERS[n] = p
    return p


def java_hash(s: str) -> int:
    """Signed 32-bit String.hashCode; non-BMP characters count as two surrogate units.

    h = sum(unit[i] * 31**(n-1-i)) mod 2**32, summed in C by map(mul) over the UTF-16 code
    units and cached powers: no Python-level loop per character."""
    if s.isascii():
        units = s.encode("ascii")  # iterating bytes gives the code units
    else:
        units = memoryview(s.encode(_UTF16_NATIVE, "surrogatepass")).cast("H")
    h = sum(map(mul, units, _powers(len(units)))) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


_TAGS_CODES: dict[str, int] = {}  # a store has few distinct tags: remember their hashes


def tags_code(tags: str | None) -> int:
    """CQ tagsCode of a normal message: the tag hash sign-extended, 0 without tags."""
    if not tags:
        return 0
    h = _TAGS_CODES.get(tags)
    if h is None:
        h = java_hash(tags)
        if len(_TAGS_CODES) < 4096:
            _TAGS_CODES[tags] = h
    return h


def index_key_hash(key: str) -> int:
    """IndexFile.indexKeyHashMethod: Math.abs(hashCode) with Integer.MIN_VALUE mapped to 0."""
    h = java_hash(key)
    return 0 if h == INT_MIN else abs(h)


def index_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"
