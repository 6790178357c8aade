"""Stores on a Hadoop-compatible filesystem (hdfs://, s3://, gs://, ... as pyarrow.fs opens
them; fsspec's filesystems where fsspec is installed), scanned without a local copy: planned
here, on the driver, from listings and headers; read by byte ranges (engine.scan.ranges).

A store given as a URI is never mapped or recovered. The commitlog is planned from the listing
of `commitlog/` alone (a file's first offset is its 20-digit name, its size the listing's): a
file is one slice, or pieces cut at byte positions (each finds its first record when read);
a broker.conf beside the store gives the broker name. A DLedger store's log is the listing of
`dledger-<selfId>/data/` (entries; a slice per file), after a mixed store's old commitlog files.

Local stores (a path or a file:// URI) stay mapped, unless RMQSTORE_SCAN_FS_READER=1 asks for
this path for them too (file:// URIs through pyarrow's LocalFileSystem): how the tests run the
remote code for real.

ConsumeQueues and index files (the consistency job, the rocketmq-cq / rocketmq-index sources),
also planned from listings and headers only:
- `consumequeue/<topic>/<queueId>/<name>`: one recursive listing; a file's first queue offset
  is its name / 20, its units its size / 20. The written end of a queue is not known there: the
  tasks reading the last three files of each queue cut them at the first unit that is not
  (offset >= 0, size > 0), RocketMQ's ConsumeQueue.recover rule (STORE_FORMAT §8.9). There is
  no recovery otherwise: units past the commitlog's data (a crashed store) are kept, not
  truncated (§8.10), and are reported by the consistency job as units without a record.
- `index/<timestamp>`: the 40-byte header of each file (one ranged read); its slot and entry
  counts from maxHashSlotNum / maxIndexNum when they give the file's size, else from the size
  with RocketMQ's ratio maxIndexNum = 4 x maxHashSlotNum.
The tasks read units and entries by byte ranges (engine.scan.ranges.read_range). A store whose
queues are in RocksDB or that has BatchConsumeQueues is refused by the jobs that need them."""
from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property, singledispatch
from urllib.parse import quote

import numpy as np

from engine.format.dledger_layout import DATA_DIR as DLEDGER_DATA_DIR
from engine.format.dledger_layout import ENTRY_BODY_OFFSET, FOLDER_PREFIX as DLEDGER_PREFIX
from engine.format.cq_unit import CQ_UNIT_DTYPE, CQ_UNIT_SIZE
from engine.format.index_layout import (INDEX_ENTRY_DTYPE, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE,
                                        INDEX_SLOT_SIZE, index_file_size)
from engine.store.index_file import IndexHeader
from engine.scan.planning import (CQ_PROBED_FILES, INDEX_ENTRIES_PER_PARTITION, CommitLogSlice, CQSlice, cut_regions,
                                  index_step, plan_consume_queues)
from engine.scan.ranges import (FIRST_WINDOW_BYTES, WINDOW_BYTES, filesystem, join, read_commitlog_ranges,  # noqa: F401
                                read_range, record_starts_in, redacted, sync_start)

FORCE_ENV = "RMQSTORE_SCAN_FS_READER"
_NAME_DIGITS = 20


def forced() -> bool:
    """RMQSTORE_SCAN_FS_READER=1: local stores too are planned from listings and read by ranges."""
    return os.environ.get(FORCE_ENV, "") not in ("", "0")


def is_remote(spec: str) -> bool:
    """A store spec read through a filesystem: any URI but file:, or any store when forced."""
    from engine.scan.jobs import is_uri, local_path_of
    return forced() or (is_uri(spec) and local_path_of(spec) is None)


def store_uri(spec: str) -> str:
    """The URI a remote store spec is opened by (a local path becomes file:///abs/path)."""
    from engine.scan.jobs import local_path_of
    local = local_path_of(spec)
    if local is None:
        return spec.rstrip("/")
    from urllib.parse import quote
    return "file://" + quote(os.path.abspath(local))   # pyarrow parses URIs: a space must be %20


# ---- the driver: a store from its listing --------------------------------------------------------
@dataclass
class RemoteFile:
    path: str             # URI of the file
    file_from_offset: int
    file_size: int

    @property
    def wrote_position(self) -> int:
        return self.file_size     # unknown without reading: the walk finds the end


@dataclass
class RemoteCommitLog:
    files: list[RemoteFile] = field(default_factory=list)
    entries: bool = False  # DLedger: records sit in entries from `divided` on
    divided: int = 0       # DLedger: the first data file's offset (files below: an old commitlog's)

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """The last file's end (not recovered: its records' end is found by the readers)."""
        return self.files[-1].file_from_offset + self.files[-1].file_size if self.files else 0

    def entry_header(self, f) -> int:
        """As the mapped logs' (CommitLog / DLedgerCommitLog.entry_header)."""
        return ENTRY_BODY_OFFSET if self.entries and f.file_from_offset >= self.divided else 0


class RemoteStore:
    """A store on any filesystem, as a StoreView (engine.store.view): its root URI, broker name,
    configuration, the listings of its commitlog, queues and index files (with their headers),
    read by byte ranges. Never mapped, never recovered: readers find each file's written end."""
    tier_store = None
    local_store = None   # no mapped files

    def __init__(self, uri: str, cfg=None, broker: str | None = None):
        from engine.config import StoreConfig
        self.root = uri
        self.display_root = redacted(uri)
        self.cfg = cfg or StoreConfig()
        self.fs, self.path = filesystem(uri)
        self.batch_topics: set = set()
        self.batch_queues: dict = {}
        self.commitlog = self._list_commitlog()
        self.scan_broker = broker or remote_broker_name(uri, self.fs, self.path)

    def _list_commitlog(self) -> RemoteCommitLog:
        """commitlog/'s files; in a DLedger store (a dledger-<selfId>/ folder with data files, as
        engine.store.dledger_commit_log.choose decides) the entries of dledger-<id>/data, after the
        old commitlog's files below the first of them (a mixed store)."""
        import pyarrow.fs as pafs
        d = join(self.path, "commitlog")
        classic = self._list_files("commitlog") if _is_dir(self.fs, d) else None
        ledgers = sorted(f.base_name for f in self.fs.get_file_info(pafs.FileSelector(self.path, allow_not_found=True))
                         if f.type == pafs.FileType.Directory and f.base_name.startswith(DLEDGER_PREFIX))
        sid = self.cfg.dLegerSelfId
        if ledgers:
            name = f"{DLEDGER_PREFIX}{sid}" if sid else ledgers[0]
            if name not in ledgers or (not sid and len(ledgers) > 1):
                what = f"no {name}/ folder" if sid else f"several DLedger folders ({', '.join(ledgers)}): set dLegerSelfId"
                raise ValueError(f"{self.display_root}: {what}")
            data = self._list_files(f"{name}/{DLEDGER_DATA_DIR}")
            if data:
                divided = data[0].file_from_offset   # dividedCommitlogOffset
                old = [f for f in classic or () if f.file_from_offset + f.file_size <= divided]
                return RemoteCommitLog(old + data, entries=True, divided=divided)
            if not classic:
                raise ValueError(f"{self.display_root}: {name}/{DLEDGER_DATA_DIR} holds no data files (a DLedger store "
                                 f"whose storePathDLedgerCommitLog is elsewhere is read from a local path only)")
        if classic is None:
            what = "no such folder" if self.fs.get_file_info(d).type == pafs.FileType.NotFound else "not a folder"
            raise ValueError(f"{join(self.display_root, 'commitlog')}: {what} (a store URI names the store folder)")
        return RemoteCommitLog(classic)

    def _list_files(self, rel: str) -> list[RemoteFile]:
        """The 20-digit-named files of the folder `rel`, by first offset."""
        import pyarrow.fs as pafs
        files = []
        for f in self.fs.get_file_info(pafs.FileSelector(join(self.path, *rel.split("/")))):
            name = f.base_name
            if f.type == pafs.FileType.File and len(name) == _NAME_DIGITS and name.isdigit() and f.size:
                files.append(RemoteFile(join(self.root, *rel.split("/"), name), int(name), int(f.size)))
        return sorted(files, key=lambda f: f.file_from_offset)

    @cached_property
    def queues(self) -> dict:
        """{(topic, queueId): [RemoteCQFile]}: listed when a job first needs the queues."""
        return list_consume_queues(self)

    @cached_property
    def index(self) -> "RemoteIndex":
        """The index files with their headers: read when a job first needs the index."""
        return list_index(self)

    @property
    def cq_file_size(self) -> int:
        """Learnt from the listing of the queues (made here if not yet)."""
        self.queues   # noqa: B018  (list_consume_queues sets the size)
        return self.cfg.mappedFileSizeConsumeQueue

    @property
    def min_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def max_offset(self) -> int:
        return self.commitlog.max_offset

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _is_dir(fs, path: str) -> bool:
    import pyarrow.fs as pafs
    return fs.get_file_info(path).type == pafs.FileType.Directory


def _subdirs(fs, path: str) -> list[str]:
    import pyarrow.fs as pafs
    return sorted(f.base_name for f in fs.get_file_info(pafs.FileSelector(path))
                  if f.type == pafs.FileType.Directory and not f.base_name.startswith("."))


def remote_stores(uri: str) -> list[tuple[str, str]]:
    """(store URI, broker name) of a store URI, or of a cluster layout under it
    (<root>/<brokerName>/store, <root>/<brokerName>/<store>...): from listings only."""
    fs, path = filesystem(uri)
    if not _is_dir(fs, path) or _is_dir(fs, join(path, "commitlog")):
        return [(uri, remote_broker_name(uri, fs, path))]   # a store (or nothing: opening says why)
    out = []
    for b in _subdirs(fs, path):
        if _is_dir(fs, join(path, b, "commitlog")):
            out.append((join(uri, b), remote_broker_name(join(uri, b), fs, join(path, b))))
            continue
        for s in _subdirs(fs, join(path, b)):
            if _is_dir(fs, join(path, b, s, "commitlog")):
                name = remote_broker_name(join(uri, b, s), fs, join(path, b, s), default=b)
                out.append((join(uri, b, s), name))
    return out or [(uri, remote_broker_name(uri, fs, path))]


def remote_broker_name(uri: str, fs=None, path: str | None = None, default: str | None = None) -> str:
    """brokerName of a broker.conf beside the store (read whole: a few hundred bytes), else
    `default` (a layout's broker folder), else the folder's name (the parent's when the folder
    is called `store`)."""
    if fs is None:
        fs, path = filesystem(uri)
    for rel in ("broker.conf", "config/broker.conf", "../broker.conf", "../conf/broker.conf"):
        p = os.path.normpath(join(path, rel))
        try:
            with fs.open_input_file(p) as fh:
                if fh.size() > 1 << 20:
                    continue
                name = _properties(fh.read().decode("utf-8", "replace")).get("brokerName", "").strip()
        except Exception:   # absent or unreadable: the folder names the broker
            continue
        if name:
            return name
    if default:
        return default
    parts = [p for p in path.rstrip("/").split("/") if p]
    if len(parts) >= 2 and parts[-1] == "store":
        return parts[-2]
    return parts[-1] if parts else uri


def _properties(text: str) -> dict[str, str]:
    """key=value (or key:value) lines of a broker.conf; comments and odd lines ignored."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and line[0] not in "#!":
            seps = [i for i in (line.find("="), line.find(":")) if i >= 0]
            if seps:
                out[line[:min(seps)].strip()] = line[min(seps) + 1:].strip()
    return out


def open_scan_store(spec: str, cfg=None):
    """A store for a scan: mapped and recovered (MessageStore, read-only) when local, else a
    RemoteStore planned from its listing."""
    if is_remote(spec):
        return RemoteStore(store_uri(spec), cfg)
    from engine.store.message_store import MessageStore
    # the scans read the files by path: a DLedger store as its files are, without what a
    # restarted broker adds in memory (engine.store.dledger_reput)
    return MessageStore.open(spec, config=cfg, read_only=True, served_view=False)


def refuse_remote(stores, job: str) -> None:
    """A job that reads the queues of a store reads ConsumeQueue files: a store on a filesystem
    whose queues are in RocksDB or that has BatchConsumeQueues is refused in one line."""
    for m in stores:
        queue_job_refusal(getattr(m, "store", m), job)


@singledispatch
def queue_job_refusal(store, job: str) -> None:
    """(A mapped store's queues are read whatever keeps them.)"""


@queue_job_refusal.register
def _(store: RemoteStore, job: str) -> None:
    import pyarrow.fs as pafs
    for rel, kind, what in (("batchconsumequeue", pafs.FileType.Directory, "BatchConsumeQueues"),
                            ("consumequeue/CURRENT", pafs.FileType.File, "RocksDB ConsumeQueues")):
        if store.fs.get_file_info(join(store.path, rel)).type == kind:
            raise ValueError(f"{store.display_root}: {job} reads {what} from local stores only "
                             f"(a path or a file:// URI on every node)")


# ---- how the scans cut a store read through a filesystem (engine.scan.planning's seams) ----------
@cut_regions.register
def _(store: RemoteStore, plan, regions: list, split: int, use_cq: bool, hop_hints: bool) -> None:
    """A listing only (paths URIs, nothing recovered): files cut at byte positions, each piece
    finds its first record itself (DLedger: entries, each holding its own position)."""
    for f, limit in regions:
        entry = store.commitlog.entry_header(f)
        n = max(1, math.ceil(limit / split))
        cuts = [limit * k // n for k in range(n)] + [limit]
        plan.commitlog += [CommitLogSlice(f.path, f.file_from_offset, f.file_size, a, b, limit, entry_header=entry,
                                          sync=a > 0) for a, b in zip(cuts, cuts[1:]) if b > a]


@plan_consume_queues.register
def _(store: RemoteStore, topics: set[str] | None = None, queue_ids: set[int] | None = None) -> list[CQSlice]:
    """Listed, not recovered: a slice a file, the last three of a queue find their end."""
    out = []
    for (topic, qid), files in sorted(store.queues.items()):
        if topics and topic not in topics or queue_ids and qid not in queue_ids:
            continue
        out += [CQSlice(topic, qid, f.path, f.rel_path, f.file_from_offset, f.file_size, 0,
                        f.file_size // CQ_UNIT_SIZE, probe_end=k >= len(files) - CQ_PROBED_FILES)
                for k, f in enumerate(files)]
    return out


@index_step.register
def _(store: RemoteStore) -> int:
    return INDEX_ENTRIES_PER_PARTITION   # header read, entries by ranges


# ---- ConsumeQueues and index files: listings, headers, ranges -------------------------------------


@dataclass
class RemoteCQFile:
    path: str         # URI
    rel_path: str     # consumequeue/<topic>/<queueId>/<name>
    file_from_offset: int
    file_size: int


def list_consume_queues(store) -> dict[tuple[str, int], list[RemoteCQFile]]:
    """{(topic, queueId): files by first offset} from one recursive listing of consumequeue/."""
    import pyarrow.fs as pafs
    base = join(store.path, "consumequeue")
    if store.fs.get_file_info(base).type != pafs.FileType.Directory:
        return {}
    out: dict[tuple[str, int], list[RemoteCQFile]] = {}
    prefix = base.partition("?")[0].rstrip("/") + "/"
    for f in store.fs.get_file_info(pafs.FileSelector(base, recursive=True)):
        if f.type != pafs.FileType.File or not f.size:
            continue
        rel = f.path[len(prefix):] if f.path.startswith(prefix) else f.path.split("/consumequeue/", 1)[-1]
        parts = rel.split("/")
        if len(parts) != 3 or not parts[2].isdigit() or not parts[1].lstrip("-").isdigit():
            continue
        topic, qid, name = parts[0], int(parts[1]), parts[2]
        out.setdefault((topic, qid), []).append(
            RemoteCQFile(join(store.root, "consumequeue", quote(topic, safe=""), str(qid), name),   # %RETRY%...
                         os.path.join("consumequeue", topic, str(qid), name), int(name), int(f.size)))
    for files in out.values():
        files.sort(key=lambda x: x.file_from_offset)
    sizes = Counter(f.file_size for fs in out.values() for f in fs)   # files are made whole: the mapped size
    if "mappedFileSizeConsumeQueue" not in store.cfg.explicit and sizes:
        store.cfg.mappedFileSizeConsumeQueue = sizes.most_common(1)[0][0]
        store.cfg.detected.add("mappedFileSizeConsumeQueue")
    return out


def read_cq_units(s) -> np.ndarray:
    """The units of a remote slice (a numpy CQ_UNIT_DTYPE array), cut at the recovery end when
    the slice is one of its queue's last files."""
    raw = read_range(s.path, s.unit_start * CQ_UNIT_SIZE, (s.unit_end - s.unit_start) * CQ_UNIT_SIZE)
    u = np.frombuffer(raw, dtype=CQ_UNIT_DTYPE, count=len(raw) // CQ_UNIT_SIZE)
    if s.probe_end:
        bad = np.flatnonzero((u["commitLogOffset"] < 0) | (u["size"] <= 0))
        if bad.size:
            u = u[:int(bad[0])]
    return u


# ---- index files ---------------------------------------------------------------------------------
@dataclass
class _Size:
    file_size: int


@dataclass
class RemoteIndexFile:
    """An index file as the scans use IndexFile (header, slot_num, index_num, slots, entries),
    its slots and entries read by byte ranges when asked for."""
    path: str
    name: str
    header: IndexHeader
    slot_num: int
    index_num: int
    file: _Size = field(default_factory=lambda: _Size(0))

    @cached_property
    def slots(self) -> np.ndarray:
        raw = read_range(self.path, INDEX_HEADER_SIZE, self.slot_num * INDEX_SLOT_SIZE)
        return np.frombuffer(raw, dtype=">i4", count=len(raw) // INDEX_SLOT_SIZE)

    @cached_property
    def entries(self) -> np.ndarray:
        """Entries 0 .. indexCount - 1 (those after are unused)."""
        n = min(max(self.header.indexCount, 1), self.index_num)
        raw = read_range(self.path, INDEX_HEADER_SIZE + self.slot_num * INDEX_SLOT_SIZE, n * INDEX_ENTRY_SIZE)
        return np.frombuffer(raw, dtype=INDEX_ENTRY_DTYPE, count=len(raw) // INDEX_ENTRY_SIZE)

    def to_json(self) -> str:
        """What a task needs to read this file again (consistency's chain check on the executors)."""
        import json
        return json.dumps({"path": self.path, "name": self.name, "header": self.header.to_json(),
                           "slot_num": self.slot_num, "index_num": self.index_num, "size": self.file.file_size})

    @classmethod
    def from_json(cls, text: str) -> "RemoteIndexFile":
        import json
        d = json.loads(text)
        return cls(d["path"], d["name"], IndexHeader(**d["header"]), d["slot_num"], d["index_num"], _Size(d["size"]))


def index_geometry(cfg, size: int) -> tuple[int, int] | None:
    """(slots, entries) of an index file of `size` bytes: the settings' when they fit, else
    RocketMQ's ratio (entries = 4 x slots) when one pair fits; None when neither does."""
    if index_file_size(cfg.maxHashSlotNum, cfg.maxIndexNum) == size:
        return cfg.maxHashSlotNum, cfg.maxIndexNum
    body = size - INDEX_HEADER_SIZE
    per = INDEX_SLOT_SIZE + 4 * INDEX_ENTRY_SIZE
    if body > 0 and body % per == 0:
        return body // per, 4 * (body // per)
    return None


@dataclass
class RemoteIndex:
    files: list[RemoteIndexFile]


def list_index(store) -> RemoteIndex:
    """index/'s files with their headers (40 bytes read from each), oldest first."""
    import pyarrow.fs as pafs
    d = join(store.path, "index")
    if store.fs.get_file_info(d).type != pafs.FileType.Directory:
        return RemoteIndex([])
    files = []
    for f in sorted(store.fs.get_file_info(pafs.FileSelector(d)), key=lambda x: x.base_name):
        if f.type != pafs.FileType.File or not f.base_name.isdigit() or not f.size:
            continue
        uri = join(store.root, "index", f.base_name)
        geo = index_geometry(store.cfg, int(f.size))
        if geo is None:
            raise ValueError(f"{join(store.display_root, 'index', f.base_name)}: {f.size} bytes fit no index geometry; "
                             f"set maxHashSlotNum and maxIndexNum (--set) to the broker's")
        raw = read_range(uri, 0, INDEX_HEADER_SIZE)
        if len(raw) < INDEX_HEADER_SIZE:
            continue
        files.append(RemoteIndexFile(uri, f.base_name, IndexHeader.read(raw), geo[0], geo[1], _Size(int(f.size))))
    return RemoteIndex(files)


def read_index_entries(s, base: int) -> np.ndarray:
    """Entries [first, last) of a remote index slice; `base` is entry 0's byte position."""
    raw = read_range(s.path, base + s.first * INDEX_ENTRY_SIZE, (s.last - s.first) * INDEX_ENTRY_SIZE)
    return np.frombuffer(raw, dtype=INDEX_ENTRY_DTYPE, count=len(raw) // INDEX_ENTRY_SIZE)
