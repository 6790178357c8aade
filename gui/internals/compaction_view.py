"""Internals ▸ Compaction: a compacted topic's queue (cleanup.policy=COMPACTION) as the broker
serves it, per key: the message compaction kept, and how many of the key's puts it took away
(the puts counted in the store's own ConsumeQueue). Read-only; compaction is the broker's.

The per-key summary reads the compaction log and the whole queue: it runs on the internals
pool (gui.workers.Background) with progress and Cancel, as the sibling views do; the list of
compacted queues (folder listing) is read at once, so the panel knows whether to show the tab."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from engine import compaction_of, key_summary_task
from engine.format.text import preview

from ..timefmt import format_set_ms
from ..views.progress import ProgressRow
from ..views.tables import fill_table, make_table
from ..workers import Background, RefreshWhenShown

HEADERS = ["Key", "Kept at queue offset", "Compaction-log offset", "Stored", "Puts", "Compacted away", "Body"]


class CompactionView(RefreshWhenShown, QWidget):
    openRequested = Signal("qint64")   # (the panel's views share it; not used here)
    updated = Signal()                 # the table shows a queue's summary

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.store = None
        self.utc = False
        self.background = Background(self)
        self.background.failed.connect(self._failed)
        self.queue = QComboBox()
        self.queue.currentIndexChanged.connect(self._queue_changed)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.busy_row = ProgressRow(self.cancel, "reading the queue: %p%")
        self.table = make_table(HEADERS)
        top = QHBoxLayout()
        top.addWidget(QLabel("Compacted queue:"))
        top.addWidget(self.queue, 1)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.summary)
        lay.addWidget(self.busy_row)
        lay.addWidget(self.table, 1)
        self.rows: list[dict] = []
        self.shown: tuple | None = None    # the (topic, queueId) the rows are of

    def set_utc(self, utc: bool) -> None:
        self.utc = utc
        if self.shown is not None:
            self._fill_table()

    def set_store(self, store) -> None:
        self.background.cancel()
        self.busy_row.busy(False)
        self.store = store
        cs = compaction_of(store) if store is not None else None
        self.queue.blockSignals(True)
        self.queue.clear()
        for (t, q) in sorted(cs.queues) if cs is not None else []:
            if cs.is_compacted(t):
                self.queue.addItem(f"{t} / queue {q}", (t, q))
        self.queue.blockSignals(False)
        self._clear("")
        self.mark_stale(self.has_compaction)

    @property
    def has_compaction(self) -> bool:
        return self.queue.count() > 0

    def _queue_changed(self, *_) -> None:
        self.mark_stale(self.has_compaction)

    def refresh(self) -> None:
        """Summarise the chosen queue on the internals pool (a newer request drops this one)."""
        self._dirty = False
        data = self.queue.currentData()
        cs = compaction_of(self.store) if self.store is not None else None
        if data is None or cs is None:
            self._clear("")
            return
        topic, qid = data
        self._clear(f"Reading {topic} / queue {qid}: the compaction log and the full queue…")
        self.busy_row.busy(True)
        self.background.submit("summary", key_summary_task, cs, self.store, topic, qid, pass_cancel=True,
                               on_progress=self.busy_row.show_progress,
                               on_done=lambda rows: self._apply(cs, topic, qid, rows))

    def cancel(self) -> None:
        """Stop the summary; shown again when the view is shown or another queue is chosen."""
        self.background.cancel("summary")
        self.busy_row.busy(False)
        self.summary.setText("Compaction summary cancelled. Choose the queue again to read it.")
        self._dirty = self.has_compaction

    def _failed(self, channel: str, text: str) -> None:
        self.busy_row.busy(False)
        self.summary.setText("Could not read the compaction view:\n" + text.strip().splitlines()[-1])

    def _clear(self, text: str) -> None:
        self.rows, self.shown = [], None
        fill_table(self.table, [])
        self.summary.setText(text)

    def _apply(self, cs, topic: str, qid: int, rows: list[dict]) -> None:
        self.busy_row.busy(False)
        self.rows, self.shown = rows, (topic, qid)
        cq = cs.queues[(topic, qid)]
        kept = sum(len(r["kept"]) for r in rows)
        puts = sum(r["puts"] for r in rows)
        self.summary.setText(
            f"{topic} / queue {qid}: the broker serves queue offsets [{cq.min_offset}, {cq.max_offset}) from the "
            f"compaction log: {kept} kept of {puts} puts, {len(rows)} keys; compacted up to queue offset "
            f"{cs.compacted_up_to(topic, qid)} (position-checkpoint).")
        self._fill_table()
        self.updated.emit()

    def _fill_table(self) -> None:
        out = []
        for r in self.rows:
            ms = r["kept"]
            out.append([r["key"], ", ".join(str(m.queueOffset) for m in ms) or "— (none kept)",
                        ", ".join(str(m.commitLogOffset) for m in ms),
                        format_set_ms(ms[-1].storeTimestamp, self.utc) if ms else "",
                        r["puts"], r["compactedAway"], preview(ms[-1].body) if ms else ""])
        fill_table(self.table, out, numeric={4, 5})
