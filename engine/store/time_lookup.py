"""getOffsetInQueueByTime, as each RocketMQ generation does it.

4.9 picks the CQ file by its file-system modification time (the first file modified at or
after t, else the last) and returns the nearest unit; 5.x picks it by the store times of the
records its first/last units reference and honours a boundary (LOWER: first unit with time
>= t; UPPER: last unit with time <= t), clamped to [min, max]."""
from __future__ import annotations

import os

from engine.config import CQ_UNIT_SIZE


def _jdiv(a: int, b: int) -> int:
    """Java long division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _mtime_ms(f) -> int:
    """File modification time in ms as it is on disk (Java's File.lastModified): RocketMQ
    uses it as it is, even where a copy lost the sub-second part. A file only this process
    holds (a restarted broker's new CQ file, engine.store.memory_files) has the time it was made."""
    try:
        return os.stat(f.path).st_mtime_ns // 1_000_000
    except FileNotFoundError:
        made = getattr(f, "made_ms", None)
        if made is None:
            raise
        return made


def _unit(view, pos):
    u = view[pos // CQ_UNIT_SIZE]
    return int(u["commitLogOffset"]), int(u["size"])


def _search(view, cl, low: int, high: int, timestamp: int):
    """The binary search both versions share, over byte positions [low, high] of one CQ file:
    (exact match, last position before t, first after t, their store times); -2 = unreadable."""
    target = left = right = -1
    left_v = right_v = -1
    min_phy = cl.min_offset
    while high >= low:
        mid = (low + high) // (2 * CQ_UNIT_SIZE) * CQ_UNIT_SIZE
        phy, size = _unit(view, mid)
        if phy < min_phy:
            low = mid + CQ_UNIT_SIZE
            left = mid
            continue
        t = cl.pickup_store_timestamp(phy, size)
        if t < 0:
            return -2, left, right, left_v, right_v
        if t == timestamp:
            target = mid
            break
        if t > timestamp:
            high = mid - CQ_UNIT_SIZE
            right, right_v = mid, t
        else:
            low = mid + CQ_UNIT_SIZE
            left, left_v = mid, t
    return target, left, right, left_v, right_v


def _files(cq) -> list:
    """The queue's files as the broker has them after its recovery: a read-only open keeps the
    files past a cut end (their write positions at 0), which truncateDirtyLogicFiles deletes."""
    files, end = cq.queue.files, cq.queue.max_offset
    return [f for f in files if f.file_from_offset < end] or files[:1]


def offset_by_time_49(store, cq, timestamp: int) -> int:
    files = _files(cq)
    if not files:
        return 0
    f = next((f for f in files if _mtime_ms(f) >= timestamp), files[-1])
    view = cq.view(f)
    cl = store.commitlog
    low = cq.min_logic_offset - f.file_from_offset if cq.min_logic_offset > f.file_from_offset else 0
    high = f.wrote_position - CQ_UNIT_SIZE
    target, left, right, left_v, right_v = _search(view, cl, low, high, timestamp)
    if target == -2:
        return 0
    if target != -1:
        offset = target
    elif left_v == -1:
        offset = right
    elif right_v == -1:
        offset = left
    else:
        offset = right if abs(timestamp - left_v) > abs(timestamp - right_v) else left
    return _jdiv(f.file_from_offset + offset, CQ_UNIT_SIZE)


def _pick_file_5x(cq, cl, timestamp: int, lower: bool):
    files = _files(cq)
    n = len(files)
    starts, stops = [], []
    for i, f in enumerate(files):
        view = cq.view(f)
        t0 = cl.pickup_store_timestamp(*_unit(view, 0)) if f.wrote_position >= CQ_UNIT_SIZE else -1
        starts.append(t0 if t0 > 0 else -1)
        t1 = -1
        if i < n - 1:
            t1 = cl.pickup_store_timestamp(*_unit(view, cq.file_size - CQ_UNIT_SIZE))
        stops.append(t1 if t1 > 0 else -1)
    if lower:
        for i in range(n - 1):
            if stops[i] >= timestamp:
                return files[i]
        return files[-1]
    for i in range(n - 1, -1, -1):
        if starts[i] <= timestamp:
            return files[i]
    return None


def offset_by_time_5x(store, cq, timestamp: int, boundary: str) -> int:
    lower = boundary.lower() == "lower"
    cl = store.commitlog
    result = 0
    f = _pick_file_5x(cq, cl, timestamp, lower) if cq.queue.files else None
    if f is not None:
        result = _search_5x(cq, cl, f, timestamp, lower)
    return min(max(result, cq.min_offset), cq.max_offset)


def _search_5x(cq, cl, f, timestamp: int, lower: bool) -> int:
    view = cq.view(f)
    low = cq.min_logic_offset - f.file_from_offset if cq.min_logic_offset > f.file_from_offset else 0
    rng = f.file_size
    if f.wrote_position not in (0, f.file_size):
        rng = f.wrote_position
    ceiling = rng - CQ_UNIT_SIZE
    floor = low
    high = ceiling
    if ceiling < 0 or floor > ceiling:  # nothing readable in this file (min offset past it)
        return 0
    t = cl.pickup_store_timestamp(*_unit(view, ceiling))
    if t < timestamp:
        return _jdiv(f.file_from_offset + ceiling + (CQ_UNIT_SIZE if lower else 0), CQ_UNIT_SIZE)
    t = cl.pickup_store_timestamp(*_unit(view, floor))
    if t > timestamp:
        return _jdiv(f.file_from_offset, CQ_UNIT_SIZE) if lower else 0
    target, left, right, _, _ = _search(view, cl, low, high, timestamp)
    if target == -2:
        return 0
    if target != -1:
        step = -CQ_UNIT_SIZE if lower else CQ_UNIT_SIZE
        offset = target
        while floor <= offset + step <= ceiling and \
                cl.pickup_store_timestamp(*_unit(view, offset + step)) == timestamp:
            offset += step
    else:
        offset = right if lower else left
    return _jdiv(f.file_from_offset + offset, CQ_UNIT_SIZE)
