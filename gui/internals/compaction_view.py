"""Internals ▸ Compaction: a compacted topic's queue (cleanup.policy=COMPACTION) as the broker
serves it, per key: the message compaction kept, and how many of the key's puts it took away
(the puts counted in the store's own ConsumeQueue). Read-only; compaction is the broker's."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from engine import compaction_of, key_summary
from engine.format.text import preview

from ..timefmt import format_set_ms
from ..views.tables import fill_table, make_table

HEADERS = ["Key", "Kept at queue offset", "Compaction-log offset", "Stored", "Puts", "Compacted away", "Body"]


class CompactionView(QWidget):
    openRequested = Signal("qint64")   # (the panel's views share it; not used here)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.store = None
        self.utc = False
        self.queue = QComboBox()
        self.queue.currentIndexChanged.connect(self._show)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.table = make_table(HEADERS)
        top = QHBoxLayout()
        top.addWidget(QLabel("Compacted queue:"))
        top.addWidget(self.queue, 1)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.summary)
        lay.addWidget(self.table, 1)
        self.rows: list[dict] = []

    def set_utc(self, utc: bool) -> None:
        self.utc = utc
        self._show()

    def set_store(self, store) -> None:
        self.store = store
        cs = compaction_of(store) if store is not None else None
        self.queue.blockSignals(True)
        self.queue.clear()
        for (t, q) in sorted(cs.queues) if cs is not None else []:
            if cs.is_compacted(t):
                self.queue.addItem(f"{t} / queue {q}", (t, q))
        self.queue.blockSignals(False)
        self._show()

    @property
    def has_compaction(self) -> bool:
        return self.queue.count() > 0

    def _show(self, *_) -> None:
        data = self.queue.currentData()
        cs = compaction_of(self.store) if self.store is not None else None
        if data is None or cs is None:
            self.rows = []
            fill_table(self.table, [])
            self.summary.setText("")
            return
        topic, qid = data
        self.rows = key_summary(cs, self.store, topic, qid)
        cq = cs.queues[(topic, qid)]
        kept = sum(len(r["kept"]) for r in self.rows)
        puts = sum(r["puts"] for r in self.rows)
        self.summary.setText(
            f"{topic} / queue {qid}: the broker serves queue offsets [{cq.min_offset}, {cq.max_offset}) from the "
            f"compaction log: {kept} kept of {puts} puts, {len(self.rows)} keys; compacted up to queue offset "
            f"{cs.compacted_up_to(topic, qid)} (position-checkpoint).")
        out = []
        for r in self.rows:
            ms = r["kept"]
            out.append([r["key"], ", ".join(str(m.queueOffset) for m in ms) or "— (none kept)",
                        ", ".join(str(m.commitLogOffset) for m in ms),
                        format_set_ms(ms[-1].storeTimestamp, self.utc) if ms else "",
                        r["puts"], r["compactedAway"], preview(ms[-1].body) if ms else ""])
        fill_table(self.table, out, numeric={4, 5})
