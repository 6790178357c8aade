"""The navigation tree: Topics > topic > queue (min / max / count), LMQ queues > %LMQ% name >
queue 0 (5.x multi-dispatch), Consumer groups > group > topic queue (consumer offset, lag).
BatchCQ topics are marked: their offsets count inner messages. A QStandardItemModel built from
the engine's lists."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItem, QStandardItemModel

from engine.format.lmq import LMQ_PREFIX

from ..textsafe import tip

KIND_ROLE = Qt.UserRole + 1      # "topics" | "lmqs" | "topic" | "queue" | "groups" | "group" | "group-queue"
TOPIC_ROLE = Qt.UserRole + 2
QID_ROLE = Qt.UserRole + 3
OFFSET_ROLE = Qt.UserRole + 4    # consumer offset of a group-queue item
HEADERS = ["Name", "Min", "Max", "Count"]
HEADER_TIPS = [
    "Topics and their queues; consumer groups and the queues they consume",
    "Queue: the minimum queue offset. Consumer group: the group's consumer offset",
    "The maximum queue offset (one past the last message)",
    "Messages in the queue or topic (LMQ queues: CQ units, copies of other topics' records, not added "
    "to Topics); for consumer groups, the lag (max offset - consumer offset) in messages",
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
        self.lmq_item: QStandardItem | None = None
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
        lmq = {t: by_topic.pop(t) for t in [t for t in by_topic if t.startswith(LMQ_PREFIX)]}
        total = sum(q["maxOffset"] - q["minOffset"] for q in queues if not q.get("lmq"))
        root = self.invisibleRootItem()
        self.topics_item = _text(f"Topics ({len(by_topic)})", "topics")
        root.appendRow(_tipped([self.topics_item, _num(""), _num(""), _num(total)],
                               f"{len(by_topic)} topics, {total:,} messages (each counted once, in its own topic)"))
        self._topic_rows(self.topics_item, by_topic)
        self.lmq_item = None
        if lmq:  # 5.x multi-dispatch queues: copies of units of the real topics' records
            self.lmq_item = _text(f"LMQ queues ({len(lmq)})", "lmqs")
            self.lmq_item.setToolTip(tip("Light message queues (%LMQ%...): records of other topics dispatched here "
                                         "through INNER_MULTI_DISPATCH; a record's queueOffset is its real topic's"))
            units = sum(q["maxOffset"] - q["minOffset"] for qs in lmq.values() for q in qs)
            lmq_tip = tip(f"{len(lmq)} light message queues (%LMQ%...), {units:,} CQ units: records of other topics "
                          "dispatched here through INNER_MULTI_DISPATCH (already counted in Topics); a record's "
                          "queueOffset is its real topic's")
            cells = [self.lmq_item, _num(""), _num(""), _num(units)]
            for it in cells:
                it.setToolTip(lmq_tip)
            root.appendRow(cells)
            self._topic_rows(self.lmq_item, lmq, unit="CQ units")
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

    def _topic_rows(self, parent: QStandardItem, by_topic: dict[str, list[dict]], unit: str = "messages") -> None:
        for topic in sorted(by_topic):
            qs = sorted(by_topic[topic], key=lambda q: q["queueId"])
            count = sum(q["maxOffset"] - q["minOffset"] for q in qs)
            batch = any(q.get("cqType") == "BatchCQ" for q in qs)
            compacted = any(q.get("compacted") for q in qs)
            t_item = _text(f"{topic}  [BatchCQ]" if batch else f"{topic}  [compacted]" if compacted else topic,
                           "topic", topic)
            kind = ("\nBatchCQ: 46-byte units; queue offsets count the inner messages of batch records"
                    if batch else "\ncleanup.policy=COMPACTION: the broker serves the compacted view "
                    "(Internals ▸ Compaction); the rows are the full ConsumeQueue" if compacted else "")
            parent.appendRow(_tipped([t_item, _num(""), _num(""), _num(count)],
                                     f"{topic}\n{len(qs)} queues, {count:,} {unit}{kind}"))
            for q in qs:
                qi = _text(f"queue {q['queueId']}", "queue", topic, q["queueId"])
                t_item.appendRow(_tipped([qi, _num(q["minOffset"]), _num(q["maxOffset"]),
                                          _num(q["maxOffset"] - q["minOffset"])],
                                         f"{topic} / queue {q['queueId']}{kind}\nqueue offsets "
                                         f"[{q['minOffset']}, {q['maxOffset']}): "
                                         f"{q['maxOffset'] - q['minOffset']:,} {unit}"
                                         + (f" in {q['units']} batch records" if "units" in q else "")))

    def find_queue_item(self, topic: str, qid: int):
        for top in (self.topics_item, self.lmq_item):
            for i in range(top.rowCount() if top is not None else 0):
                t = top.child(i)
                if t.data(TOPIC_ROLE) == topic:
                    for j in range(t.rowCount()):
                        q = t.child(j)
                        if q.data(QID_ROLE) == qid:
                            return q
        return None
