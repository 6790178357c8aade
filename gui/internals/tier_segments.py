"""Internals ▸ Tier segments: a tier's flat files (each queue's COMMIT_LOG and CONSUME_QUEUE,
the broker's INDEX) segment by segment: base offset, size, what it holds. A tier has no
commitlog, ConsumeQueue or index files of the classic kind, so the classic views stay empty."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from ..views.tables import fill_table, make_table

HEADERS = ["Flat file", "Type", "Segment", "Base offset", "Size", "Holds"]


class TierSegmentsView(QWidget):
    openRequested = Signal("qint64")   # (the panel's views share it; not used here)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.table = make_table(HEADERS)
        lay = QVBoxLayout(self)
        lay.addWidget(self.summary)
        lay.addWidget(self.table, 1)
        self.rows: list[list] = []

    @staticmethod
    def applies(store) -> bool:
        """A store with no local files (a tier opened on its own): the classic views have nothing to draw."""
        return store is not None and store.local_store is None

    def set_store(self, store) -> None:
        self.rows = []
        store = store.tier_store if store is not None else None   # a tier, or a store's tier: its segments
        if store is None:
            fill_table(self.table, [])
            self.summary.setText("")
            return
        for (topic, qid), q in sorted(store.queues.items()):
            for s in q.commitlog.segments:
                self.rows.append([f"{topic}/{qid}", "COMMIT_LOG", s.path.name, s.base, s.size,
                                  f"tiered commit-log offsets [{s.base}, {s.end})"])
            for s in q.cq.segments:
                self.rows.append([f"{topic}/{qid}", "CONSUME_QUEUE", s.path.name, s.base, s.size,
                                  f"queue offsets [{s.base // 20}, {s.end // 20})"])
        for f in store.index_files:
            self.rows.append(["rmq_sys_INDEX/0", "INDEX", f.segment.path.name, f.segment.base, f.segment.size,
                              f"{f.item_count} items in {f.slots or '?'} slots ({f.hash_slot_count} used)"])
        fill_table(self.table, self.rows, numeric={3, 4})
        total = sum(r[4] for r in self.rows)
        self.summary.setText(f"Tier of {store.cluster}/{store.broker}: {len(self.rows)} segments, {total:,} bytes, "
                             f"{len(store.queues)} queues. Segments are as long as their content (not pre-allocated).")


# ---- Segment fill's tier chart -------------------------------------------------------------
def tier_bar_rows(tier, topic_ids: dict[str, int]) -> list:
    """Segment fill's rows for a tier: each queue's COMMIT_LOG and CONSUME_QUEUE segments
    coloured by the queue's topic (topic_ids: topic -> colour id), the INDEX segments as used
    bytes; every bar against the largest segment of its type (a segment is as long as its
    content; the broker's maximum segment size is not in the files)."""
    import numpy as np

    from engine import analysis as A
    from .bars import BarRow
    segs = [(f"{t}/{q}", t, kind, s) for (t, q), fq in sorted(tier.queues.items())
            for kind, ff in (("COMMIT_LOG", fq.commitlog), ("CONSUME_QUEUE", fq.cq)) for s in ff.segments]
    segs += [("rmq_sys_INDEX/0", None, "INDEX", f.segment) for f in tier.index_files]
    largest = {}
    for _, _, kind, s in segs:
        largest[kind] = max(largest.get(kind, 1), s.size)
    rows = []
    for where, topic, kind, s in segs:
        cat = topic_ids.get(topic, A.USED) if topic is not None else A.USED
        seg = A.Segments(np.array([0, s.size], dtype=np.int64), np.array([s.size, largest[kind]], dtype=np.int64),
                         np.array([cat, A.FREE], dtype=np.int32))
        holds = (f"queue offsets [{s.base // 20:,}, {s.end // 20:,})" if kind == "CONSUME_QUEUE" else
                 f"tiered commit-log offsets [{s.base:,}, {s.end:,})" if kind == "COMMIT_LOG" else "an index segment")
        text = (f"tier {kind} segment {s.path.name} of {where}\n{holds}\n{s.size:,} bytes "
                f"(the largest {kind} segment: {largest[kind]:,})")
        numbers = {"flatFile": where, "type": kind, "segment": s.path.name, "baseOffset": s.base, "size": s.size}
        short = {"COMMIT_LOG": "CL", "CONSUME_QUEUE": "CQ", "INDEX": "INDEX"}[kind]
        rows.append(BarRow(f"{where} {short} @{s.base:,}", seg, largest[kind], numbers,
                           lambda p, text=text: text, None))
    return rows
