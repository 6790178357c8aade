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
        """A tier opened on its own (the classic views have nothing to draw)."""
        return getattr(store, "kind", None) == "tiered"

    def set_store(self, store) -> None:
        self.rows = []
        if getattr(store, "kind", None) == "store+tier":   # a store with its tier: the tier's segments
            store = store.tier
        if not self.applies(store):
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
