"""Message ids: the broker's offset msgId (store host + port + commitlog offset) and the
producer's UNIQ_KEY (client IP, pid, class-loader hash, time in month, counter)."""
from __future__ import annotations

import calendar
import re
import struct
import time

from engine.accel import load as _load_accel, state_property

_HEX = re.compile(r"[0-9A-Fa-f]+\Z")


def looks_like_msg_id(s: str) -> bool:
    return len(s) in (32, 56) and bool(_HEX.match(s))


def decode_offset_msg_id(msg_id: str) -> tuple[bytes, int, int]:
    """(store host address bytes, port, commitlog offset)."""
    b = bytes.fromhex(msg_id)
    alen = 4 if len(msg_id) == 32 else 16
    return b[:alen], struct.unpack(">i", b[alen:alen + 4])[0], struct.unpack(">q", b[-8:])[0]


def decode_uniq_key(uniq: str, now_ms: int | None = None) -> dict:
    """IP, pid, and the approximate send time (only meaningful within a month of creation;
    computed in UTC here, the producer's zone is unknown)."""
    b = bytes.fromhex(uniq)
    ip_len = 4 if len(b) == 16 else 16
    ip = b[:ip_len]
    ip_text = ".".join(str(x) for x in ip) if ip_len == 4 else \
        ":".join(f"{int.from_bytes(ip[i:i + 2], 'big'):x}" for i in range(0, 16, 2))
    pid = int.from_bytes(b[ip_len:ip_len + 2], "big")
    span = int.from_bytes(b[ip_len + 6:ip_len + 10], "big")
    counter = int.from_bytes(b[ip_len + 10:ip_len + 12], "big")
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    t = time.gmtime(now_ms / 1000)
    month_start = calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0)) * 1000
    if month_start + span >= now_ms:
        y, m = (t.tm_year, t.tm_mon - 1) if t.tm_mon > 1 else (t.tm_year - 1, 12)
        month_start = calendar.timegm((y, m, 1, 0, 0, 0)) * 1000
    return {"ip": ip_text, "pid": pid, "counter": counter, "approxTimestamp": month_start + span}


class PyUniqState:
    """UniqState's pure twin (engine/accel/_state.pyx): a UniqKeyGenerator's counter and the
    [start, end) of the current month, in ms."""
    __slots__ = ("counter", "_month_start_cached", "_month_end_cached")

    def __init__(self):
        self.counter = self._month_start_cached = self._month_end_cached = 0


_STATE = _load_accel("_state")
UniqState = PyUniqState if _STATE is None else _STATE.UniqState   # C fields for the compiled put


class UniqKeyGenerator:
    """MessageClientIDSetter: IP(4|16) pid(2) classLoaderHash(4) | msInMonth(4) counter(2), upper hex.
    The counter and the month live in `state` (a UniqState), which the compiled put takes."""
    counter = state_property("counter")
    _month_start_cached = state_property("_month_start_cached")
    _month_end_cached = state_property("_month_end_cached")

    def __init__(self, ip: bytes = b"\x7f\x00\x00\x01", pid: int | None = None, loader_hash: int | None = None):
        import os
        import random
        pid = os.getpid() if pid is None else pid
        loader_hash = random.getrandbits(32) if loader_hash is None else loader_hash
        self.prefix = (ip + struct.pack(">H", pid & 0xFFFF) + struct.pack(">I", loader_hash & 0xFFFFFFFF)).hex().upper()
        self.state = UniqState()  # counter 0; the month's [start, end) empty

    def next(self, now_ms: int | None = None) -> str:
        st = self.state
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        if not st._month_start_cached <= now_ms < st._month_end_cached:
            t = time.localtime(now_ms / 1000)
            y, m = (t.tm_year, t.tm_mon + 1) if t.tm_mon < 12 else (t.tm_year + 1, 1)
            st._month_start_cached = int(time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1)) * 1000)
            st._month_end_cached = int(time.mktime((y, m, 1, 0, 0, 0, 0, 0, -1)) * 1000)
        span = (now_ms - st._month_start_cached) & 0xFFFFFFFF
        st.counter = counter = (st.counter + 1) & 0xFFFF
        return self.prefix + f"{span:08X}{counter:04X}"
