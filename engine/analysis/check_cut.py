"""check's verdict on what lies past the end crash recovery finds: a killed writer tears only
the record it was writing, so whole records after that end -- in the same file or in later
files -- are damage recovery would drop with the cut, not a torn tail."""
from __future__ import annotations

from engine.format.record import hop
from engine.store.commit_log import read_record_at


def whole_records_after(cl, f, off: int) -> tuple[int, int | None]:
    """(count, offset of the last) of the whole records that follow the one at commitlog offset
    `off` in its file f, stepping over it by its own size field. A killed writer tears only its
    last record, so a torn tail has none after it; a record damaged inside the log (a flipped
    byte) has, and crash recovery -- RocketMQ's and ours, which cut at the first bad record --
    drops them all."""
    pos = off - f.file_from_offset
    if pos < 0:
        return 0, None
    step = hop(f.buf, pos, pos + 1, f.file_size, max_records=1)   # over it by its TOTALSIZE
    if not len(step.starts):
        return 0, None
    pos = step.next_pos
    n, last = 0, None
    while pos < f.file_size:
        r = read_record_at(f.buf, pos, f.file_size, f.file_from_offset + pos, cl.read_opts)
        if r.message is None or r.size <= 0:
            break
        n, last = n + 1, f.file_from_offset + pos
        pos += r.size
    return n, last


def records_past_the_cut(store, rec, out) -> None:
    """A crash tears the log only where it was being written. Whole files after the end
    recovery finds that begin with a record are not a torn tail: the log is damaged before
    them, and crash recovery (RocketMQ's and ours) would delete them with every record they
    hold. A problem, not a pending step."""
    cl = store.commitlog

    def begins_with_a_record(f) -> bool:   # (read past the valid end, which a reader stops at)
        return read_record_at(f.buf, 0, f.file_size, f.file_from_offset, cl.read_opts).message is not None
    lost = [c for c in store.recovery_plan.commitlog_cuts
            if c.delete and (f := cl.queue.find(c.start)) is not None and begins_with_a_record(f)]
    if lost:
        out.add("commitlog-lost", f"{len(lost)} commitlog file(s) from {lost[0].file} begin with whole records past "
                f"the end crash recovery finds ({rec.end_offset}: {rec.stop_reason}): recovery would delete them "
                "with their records", cl.queue.find(lost[0].start).path, lost[0].start)
