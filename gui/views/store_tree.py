"""The navigation tree (Topics > topic > queue, Consumer groups > group > queue): choosing a
queue asks the window to show it; a consumer group's queue opens at its consumer offset.
Rebuilding after a refresh keeps what was expanded and selected."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTreeView, QWidget

from engine import mark_compacted  # compacted topics marked in the tree

from ..models.topic_tree import KIND_ROLE, OFFSET_ROLE, QID_ROLE, TOPIC_ROLE, TopicTreeModel


class StoreTree(QTreeView):
    queueChosen = Signal(str, int, object)   # topic, queueId, queue offset or None
    topicChosen = Signal(str, object)        # topic, queueId or None: a topic or queue row became current

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.tree_model = TopicTreeModel(self)
        self.setModel(self.tree_model)
        self.setUniformRowHeights(True)
        self.setSelectionMode(QAbstractItemView.SingleSelection)
        h = self.header()
        h.setStretchLastSection(False)
        h.setMinimumSectionSize(36)
        # the numbers always fit (sized to their contents); the name takes the rest, elided in
        # the middle (topics often share a prefix) with the full name in every cell's tooltip
        h.setSectionResizeMode(0, QHeaderView.Stretch)
        for c in range(1, self.tree_model.columnCount()):
            h.setSectionResizeMode(c, QHeaderView.ResizeToContents)
        self.setTextElideMode(Qt.ElideMiddle)
        self.setMinimumWidth(260)
        self._size_columns()
        self.selectionModel().currentChanged.connect(self._current_changed)
        self.doubleClicked.connect(self.activate)

    def _size_columns(self) -> None:
        h = self.header()
        for c in range(1, self.tree_model.columnCount()):
            h.setSectionResizeMode(c, QHeaderView.ResizeToContents)
        h.setSectionResizeMode(0, QHeaderView.Stretch)

    def populate(self, store) -> None:
        if store is None:
            self.tree_model.populate([], [], [])
        else:
            self.tree_model.populate(mark_compacted(store, store.queue_list()), store.topics(), store.consumer_lag())
        self._size_columns()
        for item in (self.tree_model.topics_item, self.tree_model.lmq_item, self.tree_model.groups_item):
            if item is not None:
                self.expand(self.tree_model.indexFromItem(item))

    def update(self, store, current: tuple[str, int] | None) -> None:
        """Counts changed: rebuild, keep expanded topics, reselect `current` quietly."""
        m = self.tree_model
        expanded = set()
        for i in range(m.topics_item.rowCount() if m.topics_item else 0):
            it = m.topics_item.child(i)
            if self.isExpanded(m.indexFromItem(it)):
                expanded.add(it.data(TOPIC_ROLE))
        self.populate(store)
        for i in range(m.topics_item.rowCount()):
            it = m.topics_item.child(i)
            if it.data(TOPIC_ROLE) in expanded:
                self.expand(m.indexFromItem(it))
        if current is not None:
            self.select_queue(*current)

    def select_queue(self, topic: str, queue_id: int) -> None:
        """Mark a queue as current without asking to show it again."""
        item = self.tree_model.find_queue_item(topic, queue_id)
        if item is None:
            return
        idx = self.tree_model.indexFromItem(item)
        if self.currentIndex() != idx:
            self.selectionModel().blockSignals(True)
            self.setCurrentIndex(idx)
            self.selectionModel().blockSignals(False)
            self.scrollTo(idx)

    def _current_changed(self, current, previous) -> None:
        if not current.isValid():
            return
        idx = current.siblingAtColumn(0)
        if idx.data(KIND_ROLE) in ("topic", "queue", "group-queue"):
            self.topicChosen.emit(idx.data(TOPIC_ROLE), idx.data(QID_ROLE))
        if idx.data(KIND_ROLE) == "queue":
            self.queueChosen.emit(idx.data(TOPIC_ROLE), idx.data(QID_ROLE), None)

    def activate(self, index) -> None:
        """Double-click: a consumer group's queue opens at the group's consumer offset."""
        idx = index.siblingAtColumn(0)
        if idx.data(KIND_ROLE) == "group-queue":
            self.queueChosen.emit(idx.data(TOPIC_ROLE), idx.data(QID_ROLE), idx.data(OFFSET_ROLE))
