"""check's rules on a queue as a whole, beside its units one by one: an LMQ queue's files (no
record names its units) and the delay queues' delivery times (the broker's messageDelayLevel,
which the store does not keep)."""
from __future__ import annotations

import numpy as np

from engine.config import CQ_UNIT_SIZE, delay_level_token
from engine.format.cq_unit import is_filler
from engine.store.consume_queue import units_of
from engine.format.message import SCHEDULE_TOPIC


def expired_units(cq) -> int | None:
    """The units below the queue's min offset that are not fillers (the units a reader skips
    because the commitlog's start passed them); None for a queue without files (RocksDB)."""
    n = 0
    for f in cq.queue.files:
        first = f.file_from_offset // CQ_UNIT_SIZE
        if first >= cq.min_offset:
            break
        u = units_of(f)[:min(cq.min_offset - first, f.wrote_position // CQ_UNIT_SIZE)]
        n += int(np.count_nonzero(~is_filler(u["commitLogOffset"], u["size"])))
    return n if cq.queue.files else None


def lmq_files(cq, cl, out) -> None:
    """An LMQ queue's units are no record's own queue offset (the records list them in
    INNER_MULTI_QUEUE_OFFSET), so the records cannot show one missing; its files can: RocketMQ
    deletes a ConsumeQueue file only once the commitlog's start has passed every unit in it, and
    fills a file before it makes the next."""
    files = cq.queue.files
    name = f"{cq.topic}/{cq.queue_id}"
    first = units_of(files[0])[:1]
    if files[0].file_from_offset > 0 and cl.min_offset == 0 and files[0].wrote_position > 0 and \
            not is_filler(int(first["commitLogOffset"][0]), int(first["size"][0])):
        # (a queue made late begins inside its first file, after fillers: RocketMQ's fillPreBlank)
        out.add("cq-missing", f"{name} begins at unit {files[0].file_from_offset // CQ_UNIT_SIZE}, but the commitlog "
                "still begins at 0: the ConsumeQueue file(s) before it are gone", files[0].path, 0)
    for a, b in zip(files, files[1:]):
        gap = (a.file_from_offset + cq.file_size) // CQ_UNIT_SIZE
        if b.file_from_offset != a.file_from_offset + cq.file_size:
            out.add("cq-missing", f"{name}: no ConsumeQueue file from unit {gap} to "
                    f"{b.file_from_offset // CQ_UNIT_SIZE}", b.path, 0)
        elif a.wrote_position < cq.file_size:
            out.add("cq-missing", f"{name}: the units end at {(a.file_from_offset + a.wrote_position) // CQ_UNIT_SIZE}, "
                    f"before the end of their file, yet the next file ({b.path.name}) exists: the units between "
                    "are lost (a reader of the queue stops there)", a.path, a.wrote_position)


class DelayLevel:
    """A delay queue's tagsCodes are delivery times: storeTimestamp plus the level's delay in the
    messageDelayLevel of the broker that wrote them, a setting the store does not keep. Units that
    disagree with the configured table by one and the same delay, a whole number of seconds
    (parseDelayLevel's unit), while none agrees, are that broker's table (found: one note for
    all levels, `delay_note`); otherwise they are damage."""

    def __init__(self, qid: int, tags_code: int):
        self.level, self.tags_code = qid + 1, tags_code
        self.held: list = []
        self.delays: set[int] = set()
        self.agree = 0

    def count(self, found, code) -> None:
        self.agree += int(np.count_nonzero(found & (code == 0)))

    def hold(self, bad, code, tags, r, rec, word):
        """The bad units that are not tagsCode mismatches; those are held until the queue is read."""
        is_tags = code[bad] == self.tags_code
        held = bad[is_tags]
        if len(held):
            self.held.append((held, word))
            self.delays.update(int(d) for d in np.unique(np.asarray(tags[held], np.int64) - rec.ts[r[held]]))
        return bad[~is_tags]

    def settle(self, out, found: dict[int, int]) -> None:
        if not self.held:
            return
        if len(self.delays) == 1 and min(self.delays) >= 0 and min(self.delays) % 1000 == 0 and not self.agree:
            found[self.level] = min(self.delays)
            return
        for held, word in self.held:
            out.add_each(held, word)


def _level_runs(found: dict[int, int]) -> str:
    """"levels 2-18 1s, level 19 1h": consecutive levels that show one delay, together."""
    runs: list[list[int]] = []   # [first, last, delay]
    for lv, d in sorted(found.items()):
        if runs and runs[-1][1] == lv - 1 and runs[-1][2] == d:
            runs[-1][1] = lv
        else:
            runs.append([lv, lv, d])
    return ", ".join((f"level {a}" if a == b else f"levels {a}-{b}") + f" {delay_level_token(d)}" for a, b, d in runs)


def delay_note(store, found: dict[int, int], out) -> None:
    """One note for the levels whose delivery times show another messageDelayLevel, with the
    setting that would reproduce them when every level up to the highest is known."""
    if not found:
        return
    table = store.cfg.delay_level_millis
    top = max(max(found), len(table), *(q + 1 for t, q in store.queues if t == SCHEDULE_TOPIC))
    levels = [found.get(lv, table[lv - 1] if lv <= len(table) else None) for lv in range(1, top + 1)]
    setting = "" if None in levels else f"; messageDelayLevel={' '.join(delay_level_token(d) for d in levels)!r} " \
        "reproduces them"
    out.note("delay-level", f"{SCHEDULE_TOPIC}'s delivery times show the broker that wrote this store had its own "
             "messageDelayLevel: " + _level_runs(found)
             + f" (configured: {store.cfg.messageDelayLevel!r}){setting}; set it to rebuild or recover this store "
             "as that broker would", store.root / "consumequeue" / SCHEDULE_TOPIC, None)
