"""The bench's steady-state rule, shared by both sides of the java section (the Java driver,
bench/java/StoreBench.java, has the same loop in `steady`): passes until three consecutive
rates agree within 5% (or `warm_secs` have gone by), then passes timed until the window
holds at least `min_secs` and `min_count` messages. A JIT still compiling, a first mapping
or a cold cache lands in the warm, not in the figure."""
from __future__ import annotations

import time
from typing import Callable

AGREE = 0.05


def agree(rates: list[float]) -> bool:
    """The last three rates within AGREE of the highest of them."""
    if len(rates) < 3:
        return False
    last = rates[-3:]
    hi = max(last)
    return hi > 0 and (hi - min(last)) / hi <= AGREE


def steady(one_pass: Callable[[], dict], min_secs: float, min_count: int = 0, warm_secs: float = 20.0,
           ready: Callable[[], bool] = lambda: True, count: str = "messages") -> dict:
    """one_pass() -> {"seconds", count, "bytes"?, ...}. Returns the timed window's sums
    ("seconds", count, "bytes") with "warmSeconds", "warmPasses", "timedPasses"."""
    t0 = time.perf_counter()
    rates: list[float] = []
    while True:
        r = one_pass()
        rates.append(r[count] / max(r["seconds"], 1e-12))
        if (agree(rates) or time.perf_counter() - t0 >= warm_secs) and ready():
            break
    warm = time.perf_counter() - t0
    out = {"seconds": 0.0, count: 0, "bytes": 0}
    passes = 0
    while out["seconds"] < min_secs or out[count] < min_count:
        r = one_pass()
        out["seconds"] += r["seconds"]
        out[count] += r[count]
        out["bytes"] += r.get("bytes", 0)
        for k in ("hits",):
            if k in r:
                out[k] = out.get(k, 0) + r[k]
        passes += 1
    out.update(warmSeconds=warm, warmPasses=len(rates), timedPasses=passes)
    return out
