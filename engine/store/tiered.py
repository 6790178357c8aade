"""A tier folder of RocketMQ 5.x tiered storage (TieredMessageStore, POSIX provider) opened on
its own, read-only: its clusters, brokers, topics and queues found from the folder names, its
reads answered as TieredMessageStore's fetcher answers them (queue offsets and commit-log
offsets as the tier holds them), its keys found through the tiered index.

TieredStore offers the small surface the CLI and the GUI call on a MessageStore (root,
read_only, queues, queue_bounds, get_message, query_message, topics, info, close); the layouts
are engine/format/tiered_layout.py's."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.config import StoreConfig
from engine.errors import ConfigError, NotAStoreError, StoreError
from engine.format import tiered_layout as L
from engine.format.cq_unit import CQ_UNIT_DTYPE
from engine.format.message import RecordStatus, check_record
from engine.store.index_file import LONG_MAX
from engine.store.page_reader import GetMessageResult, offset_status
from engine.store.queries import QueryResult
from engine.store.tiered_index import IndexSegment, open_index_segment  # noqa: F401 - the INDEX segments
from engine.store.tiered_local_index import geometry_of, local_index_files

READ_AHEAD_COUNT = 4096          # tieredStore readAheadMessageCountThreshold (default)
READ_AHEAD_BYTES = 16 << 20      # readAheadMessageSizeThreshold (default)
TIER_KEYS = ("brokerName", "brokerClusterName", "tieredStoreFilePath", "tieredStorageLevel",
             "tieredStoreIndexFileMaxHashSlotNum", "tieredStoreIndexFileMaxIndexNum")


@dataclass
class Segment:
    path: Path
    base: int       # byte offset of its first byte in the flat file
    size: int

    @property
    def end(self) -> int:
        return self.base + self.size

    @property
    def file_from_offset(self) -> int:  # the name a MappedFile gives it
        return self.base


class FlatFile:
    """One append-only flat file (a queue's COMMIT_LOG or CONSUME_QUEUE, the INDEX): its
    segments by base offset. Reads span segments; a hole between segments is unreadable."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._fds: dict[Path, int] = {}
        self.segments: list[Segment] = []
        self.gaps: list[tuple[int, int]] = []
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            entries = []
        for e in entries:
            base = L.parse_segment_name(e.name)
            if base is not None and e.is_file():
                self.segments.append(Segment(Path(e.path), base, e.stat().st_size))
        self.segments.sort(key=lambda s: s.base)
        for a, b in zip(self.segments, self.segments[1:]):
            if b.base != a.end:
                self.gaps.append((a.end, b.base))

    def _fd(self, s: Segment) -> int:
        """The segment's descriptor, opened read-only once (a walk reads it many times)."""
        fd = self._fds.get(s.path)
        if fd is None:
            fd = self._fds[s.path] = os.open(s.path, os.O_RDONLY)
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def find(self, offset: int) -> Segment | None:
        return next((s for s in self.segments if s.base <= offset < s.end), None)

    @property
    def min_offset(self) -> int:
        return self.segments[0].base if self.segments else 0

    @property
    def max_offset(self) -> int:
        """The commit offset: where the last segment's data ends."""
        return self.segments[-1].end if self.segments else 0

    def read(self, offset: int, size: int) -> bytes | None:
        """`size` bytes from `offset`, None when any of them is not in a segment."""
        out = bytearray()
        for s in self.segments:
            if s.end <= offset or size <= 0:
                continue
            if s.base > offset:
                return None
            n = min(size, s.end - offset)
            data = os.pread(self._fd(s), n, offset - s.base)
            if len(data) != n:
                return None
            out += data
            offset += n
            size -= n
        return bytes(out) if size <= 0 else None


@dataclass(frozen=True)
class TierRange:
    """Bytes [start, end) of one queue's tiered commit log a scan reads (engine.scan.tier_source)."""
    queue: "TierQueue"
    start: int
    end: int


class TierQueue:
    """A queue's flat files: `<broker>/<topic>/<queueId>/COMMIT_LOG` and `CONSUME_QUEUE`."""
    lmq = False

    def __init__(self, topic: str, queue_id: int, folder: Path):
        self.topic, self.queue_id, self.folder = topic, queue_id, folder
        self.commitlog = FlatFile(folder / L.COMMIT_LOG)
        self.cq = FlatFile(folder / L.CONSUME_QUEUE)

    @property
    def min_offset(self) -> int:  # FlatMessageFile.getConsumeQueueMinOffset
        return self.cq.min_offset // L.CQ_UNIT_SIZE

    @property
    def max_offset(self) -> int:  # getConsumeQueueCommitOffset
        return self.cq.max_offset // L.CQ_UNIT_SIZE

    def units(self, start: int, end: int) -> np.ndarray | None:
        """Units [start, end) as a ConsumeQueue gives them (CQ_UNIT_DTYPE); None across a hole."""
        data = self.cq.read(start * L.CQ_UNIT_SIZE, max(0, end - start) * L.CQ_UNIT_SIZE)
        return None if data is None else np.frombuffer(data, dtype=CQ_UNIT_DTYPE)

    def unit(self, offset: int) -> tuple[int, int, int] | None:
        u = self.units(offset, offset + 1) if self.min_offset <= offset < self.max_offset else None
        return tuple(u.tolist()[0]) if u is not None and len(u) else None

    def file_for(self, offset: int) -> Segment | None:
        """The CONSUME_QUEUE segment holding queue offset `offset`."""
        return self.cq.find(offset * L.CQ_UNIT_SIZE)

    def message(self, offset: int, size: int):
        """The record at tiered commit-log `offset`, decoded (its commitLogOffset is `offset`)."""
        data = self.commitlog.read(offset, size)
        if data is None:
            return None
        r = check_record(data, 0, len(data), offset)
        return r.message if r.status is RecordStatus.MESSAGE and r.size == size else None


def find_brokers(root: Path) -> list[tuple[str, str, Path]]:
    """(cluster, broker, broker folder) under `root`, which may be the tieredStoreFilePath, a
    `<md5>_<cluster>` folder or a broker folder. A broker folder holds topic folders whose queue
    folders hold COMMIT_LOG / CONSUME_QUEUE / INDEX."""
    def is_broker(p: Path) -> bool:
        return any((q / t).is_dir() for topic in _dirs(p) for q in _dirs(topic)
                   for t in (L.COMMIT_LOG, L.CONSUME_QUEUE, L.INDEX))

    cluster = L.parse_cluster_folder(root.name)
    if cluster is not None:
        return [(cluster, b.name, b) for b in _dirs(root) if is_broker(b)]
    out = [(c, b.name, b) for d in _dirs(root) if (c := L.parse_cluster_folder(d.name)) is not None
           for b in _dirs(d) if is_broker(b)]
    if out:
        return out
    if is_broker(root):
        return [(L.parse_cluster_folder(root.parent.name) or "", root.name, root)]
    return []


CLASSIC_MARKERS = ("commitlog", "consumequeue", "checkpoint", "index")   # a store root, never a tier


def is_tier_folder(root) -> bool:
    root = Path(root)
    if not root.is_dir() or any((root / m).exists() for m in CLASSIC_MARKERS):
        return False
    return bool(find_brokers(root))


def _dirs(p: Path) -> list[Path]:
    try:
        return sorted(e for e in p.iterdir() if e.is_dir())
    except OSError:
        return []


class TieredStore:
    """One broker's part of a tier. Open with TieredStore.open(folder, settings)."""
    read_only = True

    def __init__(self, root: Path, cluster: str, broker: str, folder: Path, brokers: list, metadata: Path | None):
        self.root, self.cluster, self.broker, self.folder = root, cluster, broker, folder
        self.brokers = brokers
        self.cfg = StoreConfig()   # RocketMQ's defaults (maxMsgsNumBatch, page limits) where a caller asks
        self.warnings: list[str] = []
        self.queues: dict[tuple[str, int], TierQueue] = {}
        self.batch_queues: dict = {}
        self.index_files: list[IndexSegment] = []
        self.metadata_path = metadata
        self.metadata: dict = {}
        self._topic_ids: dict[str, int] = {}     # learned from the segments (verified items)
        for tdir in _dirs(folder):
            if tdir.name == L.INDEX_TOPIC:
                continue
            for qdir in _dirs(tdir):
                if not qdir.name.isdigit():
                    self.warnings.append(f"skipped {qdir}: queue id is not a number")
                    continue
                q = TierQueue(tdir.name, int(qdir.name), qdir)
                if q.commitlog.segments or q.cq.segments:
                    self.queues[(tdir.name, int(qdir.name))] = q
                    for kind, ff in (("commit log", q.commitlog), ("consume queue", q.cq)):
                        for a, b in ff.gaps:
                            self.warnings.append(f"{tdir.name}/{qdir.name}: tiered {kind} has no segment "
                                                 f"for bytes [{a}, {b})")
        index = FlatFile(folder / L.INDEX_TOPIC / "0" / L.INDEX)
        for seg in index.segments:
            try:
                f = open_index_segment(seg)
            except StoreError as e:
                self.warnings.append(str(e))
                continue
            if f.slots is None:
                self.warnings.append(f"index segment {seg.path.name}: its size {seg.size} leaves no whole "
                                     f"number of 8-byte slots beside {f.item_count} items; not searched")
            self.index_files.append(f)
        self.local_index: list = []      # the broker's unsealed tiered_index_file/ (tiered_local_index)
        self._local_index_dirs: set[str] = set()
        self.index_geometry: tuple = ((L.DEFAULT_INDEX_SLOTS, L.DEFAULT_INDEX_ITEMS),)
        if metadata is not None:
            self._load_metadata(metadata)

    # ---- opening -------------------------------------------------------------------------
    @classmethod
    def open(cls, root, settings: dict | None = None, metadata: Path | None = None) -> "TieredStore":
        """settings: brokerName / brokerClusterName choose one broker when the tier holds
        several; metadata: a tieredStoreMetadata.json (else one beside the tier is looked for)."""
        root = Path(root)
        settings = settings or {}
        if not root.is_dir():
            raise NotAStoreError("no such folder", path=str(root))
        brokers = find_brokers(root)
        if not brokers:
            raise NotAStoreError("not a tier folder: no <broker>/<topic>/<queueId>/COMMIT_LOG, CONSUME_QUEUE "
                                 "or INDEX segments", path=str(root))
        chosen = [b for b in brokers if settings.get("brokerName") in (None, b[1])
                  and settings.get("brokerClusterName") in (None, b[0])]
        if not chosen:
            raise ConfigError("the tier holds no broker " + "/".join(
                filter(None, (settings.get("brokerClusterName"), settings.get("brokerName")))) +
                f"; it holds {_names(brokers)}", path=str(root))
        if len(chosen) > 1:
            need = "brokerClusterName=" if len({b[1] for b in chosen}) == 1 else "brokerName="
            raise ConfigError(f"the tier holds several brokers ({_names(chosen)}): choose one with --set {need}",
                              path=str(root))
        cluster, broker, folder = chosen[0]
        store = cls(root, cluster, broker, folder, brokers, metadata or _find_metadata(folder, broker))
        store.index_geometry = geometry_of(settings, root) + store.index_geometry
        if store.metadata_path is not None:   # <storePathRootDir>/config/: the local index is beside it
            store.add_local_index(store.metadata_path.parent.parent / L.LOCAL_INDEX_DIR)
        return store

    def add_local_index(self, folder) -> None:
        """The unsealed index files of the broker's store (<storePathRootDir>/tiered_index_file),
        searched by key queries beside the INDEX segments (once a folder)."""
        if os.path.realpath(folder) not in self._local_index_dirs:
            self._local_index_dirs.add(os.path.realpath(folder))
            files, warnings = local_index_files(Path(folder), self.index_geometry)
            self.local_index += files
            self.warnings += warnings

    def _load_metadata(self, path: Path) -> None:
        try:
            self.metadata = L.load_fastjson(path.read_text("utf-8", "replace"))
        except (OSError, ValueError) as e:
            self.warnings.append(f"{path}: not readable as fastjson ({e}); topic ids come from the index items")
            self.metadata = {}
            return
        if not isinstance(self.metadata, dict):
            self.metadata = {}

    def close(self) -> None:
        for f in self.local_index:
            f.close()
        for q in self.queues.values():
            q.commitlog.close()
            q.cq.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- the MessageStore surface ----------------------------------------------------------
    abort_present = False     # a tier has no abort file, no recovery, no lock, no timer store
    recovery = recovery_plan = timer = commitlog = index = None

    def dledger_entry(self, offset: int) -> None:
        """(A tier's segments are no DLedger log: no entry holds a message.)"""
        return None
    min_offset = 0

    @property
    def max_offset(self) -> int:
        """The tier has one commit log per queue: the bytes they hold together."""
        return sum(q.commitlog.max_offset - q.commitlog.min_offset for q in self.queues.values())

    def message_in_queue(self, topic: str, queue_id: int, offset: int, size: int, queue_offset: int | None = None):
        """The record at `offset` of this queue's tiered commit log (offsets are per queue)."""
        q = self.find_queue(topic, queue_id)
        return q.message(offset, size) if q is not None else None

    def look_message_by_offset(self, offset: int):
        """A tier has no one commit log: an offset alone names no message."""
        return None

    def store_time_at(self, topic: str, queue_id: int, queue_offset: int) -> int:
        q = self.find_queue(topic, queue_id)
        u = q.unit(queue_offset) if q is not None else None
        m = q.message(u[0], u[1]) if u else None
        return m.storeTimestamp if m is not None else -1

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int,
                                    boundary: str | None = None) -> int:
        """FlatMessageFile.getQueueOffsetByTimeAsync: max when the last message is older, min
        when the first is newer, else the first offset stored at or after `timestamp` (upper:
        the last of those stored exactly then). The broker narrows to a segment by the
        metadata's times first; over a queue whose times rise that is the same offset."""
        q = self.find_queue(topic, queue_id)
        if q is None:
            return 0
        lo, hi = q.min_offset, q.max_offset - 1
        if hi < lo:
            return lo
        if self.store_time_at(topic, queue_id, hi) < timestamp:
            return hi + 1
        if self.store_time_at(topic, queue_id, lo) > timestamp:
            return lo
        while lo < hi:
            mid = lo + (hi - lo) // 2
            if self.store_time_at(topic, queue_id, mid) < timestamp:
                lo = mid + 1
            else:
                hi = mid
        if (boundary or "").lower() == "upper":
            while lo + 1 < q.max_offset and self.store_time_at(topic, queue_id, lo + 1) == timestamp:
                lo += 1
        return lo

    def offset_by_time(self, topic: str, queue_id: int, timestamp: int, rule: str | None = None,
                       boundary: str | None = None) -> tuple[int, str, str]:
        """The tier's own lookup (TieredMessageStore answers by it): (offset, rule, why)."""
        b = (boundary or "lower").lower()
        return (self.get_offset_in_queue_by_time(topic, queue_id, timestamp, b), f"5.x-{b}",
                "flag" if boundary else "tier")

    def lookup_id(self, msg_id: str, topic: str | None = None) -> tuple[str, list]:
        """An offset msgId (its offset is a tiered commit-log offset: any queue may hold a
        record there, the msgId's host picks) or a UNIQ_KEY (the tiered index)."""
        from engine.format.msgid import decode_offset_msg_id, looks_like_msg_id
        msg_id = msg_id.strip().upper()
        if looks_like_msg_id(msg_id):
            off = decode_offset_msg_id(msg_id)[2]
            hits = []
            for (t, qid), q in sorted(self.queues.items()):
                if topic not in (None, t):
                    continue
                units = q.units(q.min_offset, q.max_offset)
                for phy, size, _tags in (units[units["commitLogOffset"] == off].tolist() if units is not None else []):
                    m = q.message(phy, size)
                    if m is not None and m.msgId == msg_id:
                        hits.append(m)
            if hits:
                return "offset", hits
        found = [m for t in ([topic] if topic else self.topics())
                 for m in self.query_message(t, msg_id, max_num=0, cap=0).messages if m.uniqKey == msg_id]
        return ("uniq", found) if found else ("unknown", [])

    def generation(self):
        """Tiered storage exists in RocketMQ 5.x only; its time lookup is the tier's own."""
        from types import SimpleNamespace
        return SimpleNamespace(version="5.x (tier)", to_json=lambda: {"version": "5.x", "evidence": []})

    def query_uniq(self, topic: str, uniq: str) -> list:
        return [m for m in self.query_message(topic, uniq, max_num=0, cap=0).messages if m.uniqKey == uniq]

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        q = self.find_queue(topic, queue_id)
        return self.store_time_at(topic, queue_id, q.min_offset) if q else -1

    @property
    def banner_note(self) -> str:
        others = len(self.brokers) - 1
        return (f"Tier of tiered storage (read-only): broker {self.cluster}/{self.broker}"
                + (f" ({others} more broker(s) in the tier: choose with brokerName)" if others else "")
                + ". Queue offsets and commit-log offsets are the tier's (per queue), as TieredMessageStore answers.")

    def broker_holding_lock(self) -> None:
        return None

    def config_json(self, name: str) -> None:
        return None     # a tier holds no broker config files (topics.json, delayOffset.json, ...)

    def topic_config(self) -> dict:
        return {}

    def consumer_lag(self) -> list:
        return []       # consumer offsets live with the broker's store, not in the tier

    def consumer_offsets(self) -> dict:
        return {}

    tier_store = property(lambda self: self)   # the tier a view draws (a store with its tier: its tier)
    local_store = None                          # no local files of its own

    def find_queue(self, topic: str, queue_id: int) -> TierQueue | None:
        return self.queues.get((topic, queue_id))

    def scan_sources(self) -> tuple[None, list[TierRange]]:
        """What a bulk scan reads: no local store, every queue's whole tiered commit log."""
        return None, [TierRange(q, q.commitlog.min_offset, q.commitlog.max_offset)
                      for _, q in sorted(self.queues.items()) if q.commitlog.segments]

    def find_batch_queue(self, topic: str, queue_id: int):
        return None

    def lmq_dispatch(self, msg) -> None:
        return None

    def queue_bounds(self, topic: str, queue_id: int) -> tuple[str, int, int] | None:
        q = self.find_queue(topic, queue_id)
        return None if q is None else ("SimpleCQ", q.min_offset, q.max_offset)

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.queues})

    def queue_list(self) -> list[dict]:
        return [{"topic": t, "queueId": q, "minOffset": fq.min_offset, "maxOffset": fq.max_offset,
                 "cqType": "SimpleCQ", "lmq": False, "commitLogMinOffset": fq.commitlog.min_offset,
                 "commitLogMaxOffset": fq.commitlog.max_offset, "commitLogSegments": len(fq.commitlog.segments),
                 "consumeQueueSegments": len(fq.cq.segments), "topicId": self.topic_id(t)}
                for (t, q), fq in sorted(self.queues.items())]

    def get_message(self, topic: str, queue_id: int, offset: int, max_count: int = 32,
                    broker: bool = False) -> GetMessageResult:
        """MessageStoreFetcherImpl.getMessageAsync over the tier (getMessageFromTieredStoreAsync):
        the status table of its offset ranges, then up to max_count messages from the CQ units."""
        q = self.find_queue(topic, queue_id)
        if q is None:
            return GetMessageResult("NO_MATCHED_LOGIC_QUEUE", offset, 0, 0)
        mn, mx = q.min_offset, q.max_offset
        out = offset_status(offset, mn, mx, empty_next=offset)
        if out is not None:
            return out
        count = max(1, min(max_count, mx - offset, READ_AHEAD_COUNT))
        units = q.units(offset, offset + count)
        units = units.tolist() if units is not None else []
        if not units:
            return GetMessageResult("OFFSET_FOUND_NULL", offset, mn, mx)
        first = units[0][0]
        while len(units) > 1 and units[-1][0] - first + units[-1][1] > READ_AHEAD_BYTES:
            units.pop()
        msgs, skipped, total = [], [], 0
        for i, (phy, size, _tags) in enumerate(units):
            m = q.message(phy, size)
            if m is None:
                skipped.append((offset + i, f"no message of {size} bytes at tiered commit-log offset {phy}"))
                continue
            msgs.append(m)
            total += size
        status = "FOUND" if msgs else "NO_MATCHED_MESSAGE"
        return GetMessageResult(status, offset + len(units), mn, mx, msgs, total, skipped)

    def topic_id(self, topic: str) -> int | None:
        """The topicId index items carry for `topic`: the metadata's topicMetadataTable, else what
        verified index items showed."""
        table = self.metadata.get("topicMetadataTable") if self.metadata else None
        entry = table.get(topic) if isinstance(table, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("topicId"), int):
            return entry["topicId"]
        return self._topic_ids.get(topic)

    def query_message(self, topic: str, key: str, begin: int = 0, end: int = LONG_MAX, max_num: int = 64,
                      raw: bool = False, cap: int | None = None) -> QueryResult:
        """TieredMessageStore.queryMessage over the tier (IndexStoreService.queryAsync, then
        MessageStoreFetcherImpl). raw: its answer as is (hash, time and topicId only); default:
        each hit also checked to be a message of `topic` carrying `key`."""
        if cap is not None and cap == 0:
            max_num = LONG_MAX
        if begin > end or max_num <= 0:
            return QueryResult([], False, [])
        h = L.tiered_key_hash(topic, key)
        found: dict[tuple[int, int], tuple] = {}
        for f in sorted(self.index_files + self.local_index, key=lambda f: f.begin_timestamp, reverse=True):
            if not begin <= f.begin_timestamp <= end:
                continue
            for item in f.items(h, begin, end, max_num if raw else LONG_MAX):
                if not raw or len(found) < max_num:
                    found[(item[2], item[3])] = item
        tid = self.topic_id(topic)
        if tid is None:  # no metadata: an item that really is this topic's message says its id
            tid = next((it[1] for it in found.values() if self._proves(topic, key, it)), None)
        msgs, offsets, false_hits = [], [], []
        for item in found.values():
            _h, item_tid, qid, off, size, _t = item
            if raw and item_tid != tid:
                continue
            q = self.find_queue(topic, qid)
            m = q.message(off, size) if q is not None else None
            if not raw:
                if not self._proves(topic, key, item, m):  # the segments decide, not the metadata
                    false_hits.append(off)
                    continue
            if m is not None:
                msgs.append(m)
                offsets.append(off)
            if len(msgs) >= max_num:
                break
        return QueryResult(msgs, len(found) > len(msgs) + len(false_hits), offsets, false_hits)

    def _classic_info(self, segs) -> dict:
        """The keys a classic store's info() has, as a tier fills them (the overview reads them):
        the commit-log segments of every queue as files, no abort, checkpoint or recovery."""
        return {"abort": False, "checkpoint": {}, "config": {"mappedFileSizeCommitLog": max(
                    (s.size for _, s in segs), default=0)},
                "commitlog": {"minOffset": 0, "maxOffset": self.max_offset,
                              "files": [{"name": n, "size": s.size, "wrotePosition": s.size} for n, s in segs]},
                "recovery": {"abnormal": False, "endOffset": "- (per queue)",
                             "stopReason": "a tier is read as its segments hold it (no recovery)"},
                "generation": {"version": "5.x", "evidence": [{"points": "5.x", "kind": "tier", "detail": "tiered storage "
                               "(TieredMessageStore) exists in RocketMQ 5.x only"}], "defaults": {}},
                "consumeQueueStore": {"storeType": "tiered"}, "configFiles": [], "timerStore": None, "dledger": None}

    def _proves(self, topic: str, key: str, item: tuple, m=None) -> bool:
        """The item points at a message of `topic` in its queue that carries `key` (then its
        topicId is the topic's: learned when no metadata says it)."""
        if m is None:
            q = self.find_queue(topic, item[2])
            m = q.message(item[3], item[4]) if q is not None else None
        ok = m is not None and m.topic == topic and key in [m.uniqKey] + m.key_list
        if ok:
            self._topic_ids.setdefault(topic, item[1])
        return ok

    def info(self) -> dict:
        segs = [(f"{t}/{q}/{L.COMMIT_LOG}/{s.path.name}", s) for (t, q), fq in sorted(self.queues.items())
                for s in fq.commitlog.segments]
        return {**self._classic_info(segs),
                "root": str(self.root), "kind": "tiered", "readOnly": True, "cluster": self.cluster,
                "broker": self.broker, "brokers": [{"cluster": c, "broker": b, "folder": str(p)}
                                                   for c, b, p in self.brokers],
                "folder": str(self.folder), "metadata": str(self.metadata_path) if self.metadata_path else None,
                "queues": self.queue_list(), "indexFiles": [dict(f.to_json(), beginPhyOffset=-1, endPhyOffset=-1,
                                                                 indexCount=f.item_count + 1)  # classic: next index
                                                            for f in self.index_files],
                "localIndexFiles": [f.to_json() for f in self.local_index],
                "warnings": list(self.warnings)}


def _names(brokers) -> str:
    return ", ".join(f"{c}/{b}" if c else b for c, b, _ in brokers)


def _find_metadata(folder: Path, broker: str) -> Path | None:
    """The tieredStoreMetadata.json of the store beside the tier (`<parent>/<store>/config/`,
    the usual layout when tieredStoreFilePath sits next to storePathRootDir), only if it speaks
    of this broker's flat files; None otherwise (the segments then say the topic ids)."""
    tier = folder.parent.parent          # <tieredStoreFilePath>/<md5>_<cluster>/<broker>
    for cand in [tier.parent / "config" / L.METADATA_FILE] + [
            d / "config" / L.METADATA_FILE for d in _dirs(tier.parent)]:
        try:
            if cand.is_file() and cand.stat().st_size < (64 << 20) and \
                    f'"{broker}/' in cand.read_text("utf-8", "replace"):
                return cand
        except OSError:
            continue
    return None
