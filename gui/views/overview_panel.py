"""The store overview: commitlog size and files, topics, queues, message counts, time span,
index files, consumer groups and their lag."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QFormLayout, QGroupBox, QGridLayout, QLabel, QSizePolicy, QTabWidget, QVBoxLayout,
                               QWidget)

from ..models.overview import Overview
from ..timefmt import format_bytes, format_duration_ms, format_ms, format_set_ms, zone_label
from ..textsafe import tip
from .tables import fill_table, make_table


def _value() -> QLabel:
    lab = QLabel("—")
    lab.setTextFormat(Qt.PlainText)
    lab.setTextInteractionFlags(Qt.TextSelectableByMouse)
    # long values (paths) must not widen the window; multi-line values use explicit breaks
    lab.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
    return lab


def dledger_text(d: dict | None) -> str:
    if not d:
        return "no (classic commitlog)"
    cp = d.get("checkpoint") or {}
    return (f"{d['folder']}: selfId {d['selfId']}, term {d['currTerm']}, voteLeader {d['voteLeader'] or '—'}\n"
            f"entries {d['ledgerBeginIndex']}–{d['ledgerEndIndex']} (last term {d['ledgerEndTerm']}), "
            f"committedIndex {d['committedIndex']}\n"
            f"checkpoint: endIndex {cp.get('endIndex', '—')}, committedIndex {cp.get('committedIndex', '—')}"
            + (f"\nmixed: {len(d['oldCommitlogFiles'])} old commitlog files below offset {d['dividedCommitlogOffset']}"
               if d.get("oldCommitlogFiles") else ""))


def _cq_store_text(cqs: dict) -> str:
    if cqs.get("storeType") == "defaultRocksDB":
        return (f"in RocksDB (storeType=defaultRocksDB), read-only\n"
                f"dispatch committed to commitlog offset {cqs.get('committedMaxPhyOffset')}")
    return "files (consumequeue/<topic>/<queueId>/)"


def timer_text(ts: dict | None, t) -> str:
    """The 5.x timer store in three lines: timerlog, wheel, read clock (`t` formats a time)."""
    if not ts:
        return "none (no timerlog/ or timerwheel)"
    files = ts.get("timerlogFiles") or []
    cp = ts.get("timercheck") or {}
    size = ts.get("timerlogFileSize")
    return (f"timerlog: {ts.get('timerlogUnits', 0):,} units in {len(files)} file(s)"
            + (f" of {format_bytes(size)}" if size else "") + "\n"
            f"wheel: {ts.get('wheelOccupiedSlots', 0):,} of {ts.get('wheelSlots', 0):,} slots used, "
            f"precision {ts.get('precisionMs')} ms\n"
            f"read clock: {t(cp['lastReadTimeMs']) if 'lastReadTimeMs' in cp else '—'} (timercheck)"
            + (f"\n{len(ts['warnings'])} warning(s): {ts['warnings'][0]}" if ts.get("warnings") else ""))


def messages_text(ov: Overview) -> str:
    """The message count with its unit, and the LMQ units beside it (never added to it)."""
    text = f"{ov.message_count:,} messages (ConsumeQueue lengths summed)"
    if ov.lmq_queues:
        text += (f"\n+ {ov.lmq_units:,} CQ units in {ov.lmq_queues} LMQ queue{'s' * (ov.lmq_queues != 1)} "
                 "(copies, not counted again)")
    return text


class OverviewPanel(QWidget):
    FIELDS = {
        "store": ["Folder", "Mode", "Generation", "Abort file", "Lock", "Checkpoint", "Recovery"],
        "commitlog": ["Min offset", "Max offset", "Data", "Files", "DLedger"],
        "messages": ["Topics", "Queues", "ConsumeQueues", "Messages", "First stored", "Last stored", "Span",
                     "Timer store"],
        "index": ["Index files", "Index entries", "Consumer groups", "Config files"],
    }
    TITLES = {"store": "Store", "commitlog": "CommitLog", "messages": "Messages", "index": "Index and consumers"}

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.utc = False
        self.overview: Overview | None = None
        self.values: dict[str, QLabel] = {}
        grid = QGridLayout()
        for i, (group, names) in enumerate(self.FIELDS.items()):
            box = QGroupBox(self.TITLES[group], self)
            form = QFormLayout(box)
            form.setLabelAlignment(Qt.AlignRight)
            for n in names:
                lab = _value()
                self.values[n] = lab
                form.addRow(n + ":", lab)
            grid.addWidget(box, i // 2, i % 2)
        self.tabs = QTabWidget(self)
        self.topics = make_table(["Topic", "Queues", "Count", "Counted", "First stored", "Last stored"])
        self.files = make_table(["CommitLog file", "File size", "Wrote position", "Fill"])
        self.index = make_table(["Index file", "Begin timestamp", "End timestamp", "Begin commitLogOffset",
                                 "End commitLogOffset", "Used slots", "Entries"])
        self.lag = make_table(["Consumer group", "Topic", "Queue", "Consumer offset", "Max offset", "Lag"])
        self.warnings = make_table(["Warning"])
        self.evidence = make_table(["Points to", "Sign", "What was found"])
        for w, title in ((self.topics, "Topics"), (self.files, "CommitLog files"), (self.index, "Index files"),
                         (self.lag, "Consumer groups and lag"), (self.warnings, "Warnings"),
                         (self.evidence, "Generation evidence")):
            self.tabs.addTab(w, title)
        lay = QVBoxLayout(self)
        lay.addLayout(grid)
        lay.addWidget(self.tabs, 1)

    def clear(self) -> None:
        self.overview = None
        for lab in self.values.values():
            lab.setText("—")
        for t in (self.topics, self.files, self.index, self.lag, self.warnings, self.evidence):
            t.setRowCount(0)

    def set_utc(self, utc: bool) -> None:
        self.utc = utc
        if self.overview is not None:
            self.show_overview(self.overview)

    def _show_generation(self, gen: dict) -> None:
        """Which RocketMQ wrote the store, the sign that decided it, all signs in the tooltip and
        the evidence tab, and the rules that follow it."""
        version = gen.get("version", "unknown")
        evidence = gen.get("evidence", [])
        signs = [e["detail"] for e in evidence if e["points"] == version]
        defaults = gen.get("defaults", {})
        text = (f"{version}  ({len(signs)} sign{'s' * (len(signs) != 1)} point to it; see Generation evidence)"
                if signs else f"{version}  (nothing in the files decides it)")
        if gen.get("mixed"):
            text += "\nsigns of both generations: one began the store, the other went on writing it"
        text += (f"\ntime lookup by the {defaults.get('timeLookup', '4.9')} rule; appends "
                 f"{'carry' if defaults.get('enabledAppendPropCRC') else 'carry no'} __CRC32# tails")
        lab = self.values["Generation"]
        lab.setText(text)
        lab.setToolTip(tip("\n".join(f"[{e['points']}] {e['kind']}: {e['detail']}" for e in evidence)
                           or "no evidence"))
        fill_table(self.evidence, [[e["points"], e["kind"], e["detail"]] for e in evidence])
        self.tabs.setTabText(5, f"Generation evidence ({version})")

    def show_overview(self, ov: Overview) -> None:
        self.overview = ov
        t = lambda ms: format_ms(ms, self.utc)  # noqa: E731
        v = self.values
        v["Folder"].setText(ov.root)
        v["Folder"].setToolTip(tip(ov.root))
        v["Mode"].setText("read-only (files mapped read-only, no lock taken)" if ov.read_only
                          else "READ-WRITE (this process holds the lock)")
        self._show_generation(ov.generation or {})
        v["Abort file"].setText("PRESENT: the broker did not shut down cleanly" if ov.abort else "absent (clean shutdown)")
        v["Lock"].setText(f"held by process {ov.lock_holder}" if ov.lock_holder else "free")
        cp = ov.checkpoint or {}
        ts = lambda k: format_set_ms(cp.get(k, -1), self.utc)  # noqa: E731 - 0: never written
        v["Checkpoint"].setText(f"physic {ts('physicMsgTimestamp')}\nlogics {ts('logicsMsgTimestamp')}\n"
                                f"index  {ts('indexMsgTimestamp')}")
        rec = ov.recovery or {}
        v["Recovery"].setText(f"{'abnormal (after a crash)' if rec.get('abnormal') else 'normal'}: valid data ends "
                              f"at commitlog offset {rec.get('endOffset', '?')}\nstopped at: {rec.get('stopReason', '')}")
        v["Min offset"].setText(f"{ov.commitlog_min} (commitlog offset)")
        v["Max offset"].setText(f"{ov.commitlog_max} (commitlog offset)")
        v["Data"].setText(format_bytes(ov.commitlog_bytes))
        v["Files"].setText(f"{len(ov.commitlog_files)} × {format_bytes(ov.file_size)}")
        v["DLedger"].setText(dledger_text(ov.dledger))
        self.tabs.setTabText(1, "DLedger data files" if ov.dledger else "CommitLog files")
        v["Topics"].setText(str(len(ov.topics)))
        v["Queues"].setText(str(ov.queue_count))
        v["ConsumeQueues"].setText(_cq_store_text(ov.consume_queue_store))
        v["Messages"].setText(messages_text(ov))
        v["Messages"].setToolTip("Each message is counted once, in its own topic's ConsumeQueue. An LMQ queue "
                                 "holds CQ units that point at records of other topics (INNER_MULTI_DISPATCH): "
                                 "they are shown apart, never added to the messages.")
        v["First stored"].setText(t(ov.first_time))
        v["Last stored"].setText(t(ov.last_time))
        v["Span"].setText(format_duration_ms(ov.last_time - ov.first_time) if ov.first_time >= 0 <= ov.last_time else "—")
        v["Timer store"].setText(timer_text(ov.timer_store, t))
        v["Index files"].setText(str(len(ov.index_files)))
        v["Index entries"].setText(f"{ov.index_entries:,}")
        v["Consumer groups"].setText(f"{len(ov.groups)} (total lag {sum(r['lag'] for r in ov.lag):,})"
                                     if ov.groups else "none (no config/consumerOffset.json)")
        v["Config files"].setText(", ".join(ov.config_files) or "none")
        self.topics.setHorizontalHeaderLabels(["Topic", "Queues", "Count", "Counted",
                                               f"First stored ({zone_label(self.utc)})", "Last stored"])
        fill_table(self.topics, [[s.topic, s.queues, f"{s.messages:,}", s.unit, t(s.first_time), t(s.last_time)]
                                 for s in ov.topics], numeric={1, 2})
        fill_table(self.files, [[f["name"], f["size"], f["wrotePosition"],
                                 f"{100.0 * f['wrotePosition'] / f['size']:.1f} %" if f["size"] else "—"]
                                for f in ov.commitlog_files], numeric={1, 2, 3})
        fill_table(self.index, [[f["name"], format_set_ms(f["beginTimestamp"], self.utc),
                                 format_set_ms(f["endTimestamp"], self.utc), f["beginPhyOffset"],
                                 f["endPhyOffset"], f["hashSlotCount"], max(0, f["indexCount"] - 1)]
                                for f in ov.index_files], numeric={3, 4, 5, 6})
        fill_table(self.lag, [[r["group"], r["topic"], r["queueId"], r["consumerOffset"], r["maxOffset"], r["lag"]]
                              for r in ov.lag], numeric={2, 3, 4, 5})
        fill_table(self.warnings, [[w] for w in ov.warnings])
        self.tabs.setTabText(4, f"Warnings ({len(ov.warnings)})")
        self.tabs.setTabText(3, f"Consumer groups and lag ({len(ov.groups)})")
