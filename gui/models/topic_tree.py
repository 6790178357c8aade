"""The navigation tree: Topics > topic > queue (min / max / count), Consumer groups > group >
topic queue (consumer offset, lag). A QStandardItemModel built from the engine's lists."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItem, QStandardItemModel

from ..textsafe import tip

KIND_ROLE = Qt.UserRole + 1      # "topics" | "topic" | "queue" | "groups" | "group" | "group-queue"
TOPIC_ROLE = Qt.UserRole + 2
QID_ROLE = Qt.UserRole + 3
OFFSET_ROLE = Qt.UserRole + 4    # consumer offset of a group-queue item
HEADERS = ["Name", "Min", "Max", "Count"]
HEADER_TIPS = [
    "Topics and their queues; consumer groups and the queues they consume",
    "Queue: the minimum queue offset. Consumer group: the group's consumer offset",
    "The maximum queue offset (one past the last message)",
    "Messages in the queue or topic; for consumer groups, the lag (max offset - consumer offset)",
]


def _num(n: int | str) -> QStandardItem:
    it = QStandardItem(str(n))
    it.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
    it.setEditable(False)
    return it


def _text(s: str, kind: str, topic: str | None = None, qid: int | None = None) -> QStandardItem:
    it = QStandardItem(s)
    it.setEditable(False)
    it.setData(kind, KIND_ROLE)
    it.setData(topic, TOPIC_ROLE)
    it.setData(qid, QID_ROLE)
    return it


def _tipped(items: list[QStandardItem], text: str) -> list[QStandardItem]:
    """The same tooltip (with the full, unelided name) on every cell of a row."""
    t = tip(text)
    for it in items:
        it.setToolTip(t)
    return items


class TopicTreeModel(QStandardItemModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._headers()
        self.topics_item: QStandardItem | None = None
        self.groups_item: QStandardItem | None = None

    def _headers(self) -> None:
        self.setHorizontalHeaderLabels(HEADERS)
        for i, t in enumerate(HEADER_TIPS):
            self.setHeaderData(i, Qt.Horizontal, t, Qt.ToolTipRole)

    def populate(self, queues: list[dict], topics: list[str], lag: list[dict]) -> None:
        """queues: store.queue_list(); topics: store.topics(); lag: store.consumer_lag()."""
        self.clear()
        self._headers()
        by_topic: dict[str, list[dict]] = {t: [] for t in topics}
        for q in queues:
            by_topic.setdefault(q["topic"], []).append(q)
        total = sum(q["maxOffset"] - q["minOffset"] for q in queues)
        root = self.invisibleRootItem()
        self.topics_item = _text(f"Topics ({len(by_topic)})", "topics")
        root.appendRow([self.topics_item, _num(""), _num(""), _num(total)])
        for topic in sorted(by_topic):
            qs = sorted(by_topic[topic], key=lambda q: q["queueId"])
            count = sum(q["maxOffset"] - q["minOffset"] for q in qs)
            t_item = _text(topic, "topic", topic)
            self.topics_item.appendRow(_tipped([t_item, _num(""), _num(""), _num(count)],
                                               f"{topic}\n{len(qs)} queues, {count} messages"))
            for q in qs:
                qi = _text(f"queue {q['queueId']}", "queue", topic, q["queueId"])
                t_item.appendRow(_tipped([qi, _num(q["minOffset"]), _num(q["maxOffset"]),
                                          _num(q["maxOffset"] - q["minOffset"])],
                                         f"{topic} / queue {q['queueId']}\nqueue offsets "
                                         f"[{q['minOffset']}, {q['maxOffset']}): "
                                         f"{q['maxOffset'] - q['minOffset']} messages"))
        groups: dict[str, list[dict]] = {}
        for r in lag:
            groups.setdefault(r["group"], []).append(r)
        self.groups_item = _text(f"Consumer groups ({len(groups)})", "groups")
        if not groups:
            self.groups_item.setToolTip(tip("config/consumerOffset.json is absent or empty"))
        root.appendRow([self.groups_item, _num(""), _num(""), _num("")])
        for g in sorted(groups):
            rows = groups[g]
            g_item = _text(g, "group")
            self.groups_item.appendRow(_tipped([g_item, _num(""), _num(""), _num(sum(r["lag"] for r in rows))],
                                               f"{g}\ntotal lag {sum(r['lag'] for r in rows)}"))
            for r in rows:
                it = _text(f"{r['topic']} / queue {r['queueId']}", "group-queue", r["topic"], r["queueId"])
                it.setData(r["consumerOffset"], OFFSET_ROLE)
                g_item.appendRow(_tipped([it, _num(r["consumerOffset"]), _num(r["maxOffset"]), _num(r["lag"])],
                                         f"{g}: {r['topic']} / queue {r['queueId']}\nconsumer offset "
                                         f"{r['consumerOffset']}, max offset {r['maxOffset']}, lag {r['lag']}\n"
                                         "(double-click to open the queue at the consumer offset)"))

    def find_queue_item(self, topic: str, qid: int):
        if self.topics_item is None:
            return None
        for i in range(self.topics_item.rowCount()):
            t = self.topics_item.child(i)
            if t.data(TOPIC_ROLE) == topic:
                for j in range(t.rowCount()):
                    q = t.child(j)
                    if q.data(QID_ROLE) == qid:
                        return q
        return None
