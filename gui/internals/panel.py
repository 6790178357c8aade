"""InternalsPanel: the store-internals views in tabs, for the main window (the timer wheel only
for a store with a 5.x timer store).

    panel = InternalsPanel(session)     # follows the session: its store, under its lock
    panel = InternalsPanel()            # or driven by hand (tests): panel.set_store(store)
    panel.openRequested.connect(...)            # commitlog offset of a message to show
    panel.queueOffsetsSelected.connect(...)     # topic, queueId, first, end (exclusive)

Each view computes only once it is first shown, on its own worker (QThreadPool), and drops
results of a store or selection it no longer shows. Clicking the slot map walks the chain."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from .collision_chain import CollisionChainView
from .compaction_view import CompactionView
from .cq_units import CqUnitsView
from .segment_fill import SegmentFillView
from .slot_heatmap import SlotHeatmapView
from .tier_segments import TierSegmentsView
from .timer_wheel import TimerWheelView


class InternalsPanel(QWidget):
    openRequested = Signal("qint64")
    queueOffsetsSelected = Signal(str, int, "qint64", "qint64")

    def __init__(self, session=None, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.segment_fill = SegmentFillView()
        self.cq_units = CqUnitsView()
        self.slot_heatmap = SlotHeatmapView()
        self.collision_chain = CollisionChainView()
        self.timer_wheel = TimerWheelView()      # a tab only while the store has a 5.x timer store
        self.tabs = QTabWidget()
        self.tabs.addTab(self.segment_fill, "Segment fill")
        self.tabs.addTab(self.cq_units, "ConsumeQueue units")
        self.tabs.addTab(self.slot_heatmap, "Index slots")
        self.tabs.addTab(self.collision_chain, "Collision chains")
        self.tabs.insertTab(self.tabs.indexOf(self.slot_heatmap) + 1, self.timer_wheel, "Timer wheel")
        self.tabs.setTabVisible(self.tabs.indexOf(self.timer_wheel), False)
        self.compaction = CompactionView()       # a tab only while the store has compacted topics
        self.tabs.addTab(self.compaction, "Compaction")
        self.tabs.setTabVisible(self.tabs.indexOf(self.compaction), False)
        self.tier_segments = TierSegmentsView()  # a tier opened on its own: its segments, not the classic views
        self.tabs.insertTab(0, self.tier_segments, "Tier segments")
        self.tabs.setTabVisible(self.tabs.indexOf(self.tier_segments), False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.tabs)
        for v in (self.segment_fill, self.cq_units, self.collision_chain, self.timer_wheel):
            v.openRequested.connect(self.openRequested)
        self.cq_units.queueOffsetsSelected.connect(self.queueOffsetsSelected)
        self.slot_heatmap.slotActivated.connect(self.show_chain)
        if session is not None:
            for v in self.views:   # every walk holds the session's lock, as the browser's reads do
                if hasattr(v, "background"):
                    v.background.lock = session.lock
            session.opened.connect(self._follow)
            session.aboutToClose.connect(self._closing)
            self._follow()

    def _follow(self, *_) -> None:
        self.set_store(self.session.store)

    def _closing(self, *_) -> None:
        self.set_store(None)
        self.wait()   # its workers finish before the maps go away

    @property
    def views(self) -> tuple:
        return (self.segment_fill, self.cq_units, self.slot_heatmap, self.collision_chain, self.timer_wheel,
                self.compaction, self.tier_segments)

    def set_utc(self, utc: bool) -> None:
        """Times in UTC or the local zone, as the window shows them."""
        for v in self.views:
            if hasattr(v, "set_utc"):
                v.set_utc(utc)

    def set_store(self, store) -> None:
        """Show `store`'s internals; pass None before the store is closed."""
        tier = TierSegmentsView.applies(store)
        classic = (self.cq_units, self.slot_heatmap, self.collision_chain)   # Segment fill draws a tier too
        for v in self.views:
            v.set_store(None if tier and v in classic else store)
        for v in classic:
            self.tabs.setTabVisible(self.tabs.indexOf(v), not tier)
        self.tabs.setTabVisible(self.tabs.indexOf(self.tier_segments), tier or bool(self.tier_segments.rows))
        self.tabs.setTabVisible(self.tabs.indexOf(self.timer_wheel), store is not None and store.timer is not None)
        self.tabs.setTabVisible(self.tabs.indexOf(self.compaction), self.compaction.has_compaction)

    def show_chain(self, index_file: str, slot: int) -> None:
        self.tabs.setCurrentWidget(self.collision_chain)
        self.collision_chain.show_slot(index_file, slot)

    def busy(self) -> bool:
        return any(v.background.busy for v in self.views if hasattr(v, "background"))

    def wait(self, msecs: int = 30000) -> bool:
        """Block until background work is done (shutdown and tests)."""
        return all(v.background.wait(msecs) for v in self.views if hasattr(v, "background"))
