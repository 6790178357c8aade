"""Segment fill of a DLedger data file: each entry is its 48-byte header (ENTRY_HEADER) and the
message record (its topic's bytes, or DAMAGED where check_record refuses it); the -1 blank and
the zeros after it are BLANK; past the recovered end, DAMAGED up to the write position, then
FREE. Record starts are the messages' (entry + 48), as every RocketMQ offset is."""
from __future__ import annotations

import numpy as np

from engine.format.dledger_layout import ENTRY_BODY_OFFSET
from engine.format.message import RecordStatus, check_record
from engine.tasks import CancelToken, Progress, Task

from .segments import BLANK, DAMAGED, ENTRY_HEADER, FREE, Segments, record_runs

POLL = 4096


def walk_dledger_file_task(cl, f, cancel: CancelToken | None = None) -> Task[dict]:
    """The fields of one DLedger data file's CommitLogFileFill (commitlog_fill builds it:
    record_head = 48, so a position in an entry's header belongs to its message)."""
    base, limit = f.file_from_offset, f.wrote_position
    topics: list[str] = []
    ids: dict[str, int] = {}
    starts, sizes, cats, heads = [], [], [], []
    pos, blank_at, stop, n = 0, None, "end of written data", 0
    for kind, at, what in cl.iter_entries(cl.data_files.index(f)):
        rel = at - base
        if rel >= f.file_size:
            break
        if rel >= limit:
            stop = "end of the ledger"
            break
        if kind == "blank":
            blank_at, stop = rel, "DLedger blank (-1)"
            break
        if kind != "entry":
            stop = what
            break
        n += 1
        if n % POLL == 0:
            if cancel is not None:
                cancel.raise_if_cancelled()
            yield Progress(rel, limit, "commitlog fill", "bytes", f.path.name)
        heads.append(rel)
        body = rel + ENTRY_BODY_OFFSET
        r = check_record(f.buf, body, rel + what.size, at + ENTRY_BODY_OFFSET, cl.read_opts)
        starts.append(body)
        sizes.append(what.size - ENTRY_BODY_OFFSET)
        if r.status is RecordStatus.MESSAGE:
            t = r.message.topic
            if t not in ids:
                ids[t] = len(topics)
                topics.append(t)
            cats.append(ids[t])
        else:
            cats.append(DAMAGED)
        pos = rel + what.size
    rs = np.array(starts, dtype=np.int64)
    rz = np.array(sizes, dtype=np.int32)
    rc = np.array(cats, dtype=np.int32)
    runs = record_runs(rs, rz, rc) + [(h, h + ENTRY_BODY_OFFSET, ENTRY_HEADER) for h in heads]
    if blank_at is not None:
        runs.append((blank_at, f.file_size, BLANK))
    else:
        runs.append((pos, limit, DAMAGED))
        runs.append((max(pos, limit), f.file_size, FREE))
    runs.sort()
    return dict(name=f.path.name, file_from_offset=base, file_size=f.file_size, wrote_position=f.wrote_position,
                topics=topics, record_starts=rs, record_sizes=rz, record_topics=rc, segments=Segments.from_runs(runs),
                data_end=pos, blank_at=blank_at, stop=stop, record_head=ENTRY_BODY_OFFSET)
