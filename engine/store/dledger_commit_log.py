"""DLedgerCommitLog's read side: the commitlog of a broker in DLedger mode (RocketMQ 4.5+).

Each message is the body of a DLedger entry (engine/format/dledger_layout.py). RocketMQ's
offsets are entry pos + 48, byte addresses in the data files that point at the record, so
reading a record at an offset is the classic CommitLog read (this class inherits it, and the
compiled getMessage loop reads the same files); what differs is the walk (entry headers
skipped, -1 blanks end a file, size 0 ends the data), recovery (DLedgerMmapFileStore.recover:
entries checked against their index records), the bounds and the DLedger facts (term, index).

Read-only: writes go through the DLedger group (a quorum, terms), which this tool is not."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from engine.config import StoreConfig
from engine.errors import ConfigError, NotAStoreError, ReadOnlyStoreError
from engine.files.mapped_file_queue import MappedFileQueue
from engine.format import dledger_layout as L
from engine.format.message import DecodeOptions, Message, RecordResult, RecordStatus, check_record
from engine.store.commit_log import CommitLog, ScanResult

TEXT_LIMIT = 1 << 16  # checkpoint / currterm are a few dozen bytes
MAX_NOTED = 20       # index mismatches listed (all are counted)


@dataclass
class DLedgerFolder:
    """Where a store's DLedger files are (DLedgerConfig: <root>/dledger-<selfId>, data in
    storePathDLedgerCommitLog or <that>/data, index always <that>/index)."""
    path: Path
    self_id: str
    data_dir: Path
    index_dir: Path
    found_by: str
    old_dirs: list[Path] = field(default_factory=list)  # a mixed store: the old commitlog's folders

    def has_data(self) -> bool:
        return _numbered_files(self.data_dir) > 0

    @property
    def data_dirs(self) -> list[Path]:
        """Every folder of the log's data files (the old commitlog's first, in a mixed store)."""
        return [*self.old_dirs, self.data_dir]


def _numbered_files(d: Path) -> int:
    try:
        return sum(1 for n in os.listdir(d) if n.isdigit() and (d / n).is_file())
    except OSError:
        return 0


def locate(root: Path, cfg: StoreConfig) -> DLedgerFolder | None:
    """The store's DLedger folder, or None for a classic store. The selfId comes from
    dLegerSelfId when set, else from the one `dledger-<id>` folder there is."""
    data_set = cfg.storePathDLedgerCommitLog
    try:
        names = sorted(e.name for e in os.scandir(root) if e.name.startswith(L.FOLDER_PREFIX) and e.is_dir())
    except OSError:
        names = []
    if cfg.dLegerSelfId:
        p = root / f"{L.FOLDER_PREFIX}{cfg.dLegerSelfId}"
        if not p.is_dir() and not data_set:
            if cfg.enableDLegerCommitLog or names:
                raise NotAStoreError(f"no DLedger folder {p.name} (dLegerSelfId={cfg.dLegerSelfId}); the store has "
                                     f"{', '.join(names) or 'none'}", path=str(root))
            return None
        sid, how = cfg.dLegerSelfId, "dLegerSelfId"
    else:
        if len(names) > 1:
            raise ConfigError(f"several DLedger folders ({', '.join(names)}): set dLegerSelfId to choose one",
                              path=str(root))
        if not names:
            if cfg.enableDLegerCommitLog:
                raise NotAStoreError("enableDLegerCommitLog is set but there is no dledger-<selfId> folder; "
                                     "set dLegerSelfId", path=str(root))
            return None
        p, sid, how = root / names[0], names[0][len(L.FOLDER_PREFIX):], "folder name"
    data = Path(data_set) if data_set else p / L.DATA_DIR
    if not data_set and not _numbered_files(data):
        moved = _find_data_dir(root, p)
        if moved is not None:  # storePathDLedgerCommitLog was set on the broker: its files are elsewhere
            data, how = moved, f"{how}; data files found in {moved.name}/ by their entries"
    if data_set:
        real, base = os.path.realpath(data), os.path.realpath(root)
        if os.path.commonpath([real, base]) != base:
            raise ConfigError(f"storePathDLedgerCommitLog={data_set} is outside the store; files outside the store "
                              "are never used", path=str(root))
    return DLedgerFolder(p, sid, data, p / L.INDEX_DIR, how)


def _find_data_dir(root: Path, folder: Path) -> Path | None:
    """A folder inside the store (one level below the root or the DLedger folder) whose first
    20-digit file starts with a DLedger entry at its own position: where a broker configured
    with storePathDLedgerCommitLog kept the data, if the copy kept it inside the store."""
    skip = {"consumequeue", "index", "commitlog", "config", L.INDEX_DIR, "timerlog", "timerwheel"}
    for base in (folder, root):
        try:
            dirs = sorted(e.path for e in os.scandir(base) if e.is_dir() and e.name not in skip)
        except OSError:
            continue
        for d in dirs:
            try:
                names = sorted(n for n in os.listdir(d) if n.isdigit() and len(n) == 20)
                if not names:
                    continue
                with open(os.path.join(d, names[0]), "rb") as fh:
                    head = fh.read(L.ENTRY_BODY_OFFSET)
            except OSError:
                continue
            if len(head) == L.ENTRY_BODY_OFFSET:
                h = L.read_entry_header(head, 0)
                if h.magic == L.ENTRY_MAGIC and h.pos == int(names[0]) and h.size > L.ENTRY_HEADER_SIZE:
                    return Path(d)
    return None


def choose(root: Path, cfg: StoreConfig, read_only: bool) -> DLedgerFolder | None:
    """The DLedger folder a store is read through, None for a classic store (no DLedger folder,
    or one without entries beside an old commitlog). A write open is refused. A mixed store (an
    old commitlog/ beside DLedger data, as after switching a 4.x broker to DLedger) keeps its old
    folders in `old_dirs`: offsets below the first DLedger file are read from them."""
    folder = locate(root, cfg)
    if folder is None:
        return None
    old = [d for d in cfg.commitlog_dirs if _numbered_files(d)]
    if old and not folder.has_data():
        return None  # a DLedger folder without entries: the classic commitlog is the log
    if not read_only:
        raise ReadOnlyStoreError("a DLedger store opens read-only: its writes go through the DLedger group "
                                 "(quorum and terms), which rmqstore does not take part in", path=str(folder.path))
    folder.old_dirs = old
    return folder


def read_text(path: Path) -> tuple[str | None, str | None]:
    """(text, note): IOUtils.file2String; a missing file with a .bak beside it is noted
    (DLedger itself does not fall back to .bak)."""
    try:
        with open(path, "rb") as f:
            data = f.read(TEXT_LIMIT)
        return data.decode("utf-8", "replace"), None
    except FileNotFoundError:
        bak = path.with_name(path.name + ".bak")
        if bak.exists():
            return None, f"{path.name} is missing but {bak.name} exists (a crash between rewriting steps)"
        return None, None
    except OSError as e:
        return None, f"cannot read {path.name}: {e.strerror}"


@dataclass
class LedgerState:
    """What DLedger's recovery establishes (DLedgerMmapFileStore after load)."""
    begin_index: int = -1
    end_index: int = -1
    end_term: int = -1
    write_pos: int = 0             # end of the last good entry
    committed_index: int = -1      # from the checkpoint, clamped to the ledger end
    committed_pos: int = -1        # end of entry committed_index (RocketMQ's max offset after load)
    entries: int = 0               # entries the recovery walk checked
    stop_reason: str = ""
    index_mismatches: list[str] = field(default_factory=list)   # the first MAX_NOTED
    index_mismatch_count: int = 0  # entries whose index record disagrees (DLedger rewrites those records)
    checkpoint: L.LedgerCheckpoint | None = None
    term: L.TermFile | None = None
    notes: list[str] = field(default_factory=list)


_BLANK = RecordResult(RecordStatus.END_OF_FILE, 0, None, "DLedger blank (-1): the rest of the file is unused")


class DLedgerCommitLog(CommitLog):
    redispatches_after_crash = False  # DLedgerMmapFileStore: the reput resumes at the queues' end

    def look_message(self, offset: int) -> Message | None:
        """get_message alone: position 0 of a data file is an entry header, never a record."""
        return self.get_message(offset)

    def entry_header(self, f) -> int:
        """Records sit in entries from the first data file on (below `divided`: the old commitlog's)."""
        return L.ENTRY_BODY_OFFSET if f.file_from_offset >= self.divided else 0

    def rebuild_refusal(self, root: Path) -> tuple[str, Path]:
        return "a DLedger store is read-only here: its consume queues and index are not rebuilt (nothing was changed)", root

    def own_recovery_start(self) -> tuple[int, str]:
        # DLedgerMmapFileStore.recover picks its own start, crash or not
        return self.normal_start_index(), ("DLedger: from the third-last data file (earlier while a file's first "
                                           "entry disagrees with its index record)")

    def after_recovery(self, store) -> None:
        """What the restarted broker serves (its reput, its index, in memory), unless the store is
        read as its files are (the scans: served_view=False)."""
        if store.served_view:
            from engine.store.dledger_reput import restart_view
            restart_view(store)

    def __init__(self, cfg: StoreConfig, folder: DLedgerFolder, writable: bool = False):
        if writable:
            raise ReadOnlyStoreError("a DLedger store opens read-only: its writes go through the DLedger group "
                                     "(quorum and terms), which rmqstore does not take part in", path=str(folder.path))
        self.cfg = cfg
        self.folder = folder
        self.file_size = cfg.mappedFileSizeCommitLog
        self.queue = MappedFileQueue(folder.data_dir, self.file_size).load(cfg.tolerant)
        self.divided = self.queue.files[0].file_from_offset if self.queue.files else 0  # dividedCommitlogOffset
        self.old_files = []
        self.warnings: list[str] = []
        if folder.old_dirs:  # a mixed store: the old files (mapped whole, as RocketMQ loads them) come first
            old = MappedFileQueue(folder.old_dirs, self.file_size).load(cfg.tolerant)
            self.old_files = [f for f in old.files if f.end_offset <= self.divided]
            for f in old.files:
                if f not in self.old_files:
                    f.close()
                    self.warnings.append(f"{f.path}: an old commitlog file reaching past the first DLedger "
                                         f"file ({self.divided}); not read (RocketMQ reads DLedger there)")
            self.queue.files[:0] = self.old_files
            self.queue.skipped.extend(old.skipped)
            self.queue.refused.extend(old.refused)
            starts = self.queue.files
            self.queue.gaps = [(a.end_offset, b.file_from_offset) for a, b in zip(starts, starts[1:])
                               if b.file_from_offset != a.end_offset]
        self.index_file_size = _index_file_size(folder.index_dir)
        self.index_queue = MappedFileQueue(folder.index_dir, self.index_file_size).load(cfg.tolerant)
        delays = cfg.delay_level_millis
        self.read_opts = DecodeOptions(check_crc=False, delay_level_millis=delays)
        self.recover_opts = self.read_opts  # DLedger's recovery checks entry headers, not message CRCs
        self.ledger = LedgerState()
        self.restart = None  # engine.store.dledger_reput.RestartView: what the restarted broker serves

    @property
    def data_files(self) -> list:
        """The DLedger data files (self.files also holds the old commitlog's in a mixed store)."""
        return self.queue.files[len(self.old_files):]

    # ---- the entries -------------------------------------------------------------------
    def entry_at(self, offset: int) -> L.EntryHeader | None:
        """The entry whose message is at RocketMQ offset `offset` (its header 48 bytes before)."""
        pos = offset - L.ENTRY_BODY_OFFSET
        f = self.queue.find(pos)
        if f is None or pos < self.divided:
            return None
        rel = pos - f.file_from_offset
        if rel + L.ENTRY_BODY_OFFSET > f.file_size:
            return None
        h = L.read_entry_header(f.buf, rel)
        if h.magic != L.ENTRY_MAGIC or h.pos != pos or h.size < L.ENTRY_BODY_OFFSET or rel + h.size > f.file_size:
            return None
        return h

    def index_record(self, index: int) -> L.IndexRecord | None:
        at = index * L.INDEX_UNIT_SIZE
        f = self.index_queue.find(at)
        if f is None or index < 0:
            return None
        return L.read_index_record(f.buf, at - f.file_from_offset)

    def iter_entries(self, start_file: int = 0) -> Iterator[tuple[str, int, object]]:
        """("entry", pos, EntryHeader), ("blank", pos, bytes left), ("end", pos, why) in log
        order from data_files[start_file], each file to its blank or its end of data (size 0), up
        to the files' ends (write positions are not looked at). A header that cannot be an
        entry yields ("bad", pos, why) and its file is left."""
        for f in self.data_files[start_file:]:
            buf, base, fs = f.buf, f.file_from_offset, f.file_size
            rel = 0
            while True:
                if fs - rel < L.BLANK_HEAD.size:
                    yield "end", base + rel, "file ends without a blank"
                    break
                magic, size = L.BLANK_HEAD.unpack_from(buf, rel)
                if magic == L.BLANK_MAGIC:
                    yield "blank", base + rel, size
                    break
                if size == 0:
                    yield "end", base + rel, "end of data (size 0)"
                    break
                if fs - rel < L.ENTRY_BODY_OFFSET:
                    yield "bad", base + rel, "an entry header runs past the end of the file"
                    break
                h = L.read_entry_header(buf, rel)
                why = _header_problem(h, base + rel, fs - rel)
                if why:
                    yield "bad", base + rel, why
                    break
                yield "entry", base + rel, h
                rel += h.size

    # ---- reading -----------------------------------------------------------------------
    def walk(self, start: int | None = None, end: int | None = None,
             opts=None) -> Iterator[tuple[int, RecordResult]]:
        """Every message in [start, end) by RocketMQ offset (entry pos + 48), each entry's
        header skipped; blanks are END_OF_FILE at their own position; a damaged entry header is
        INVALID at its position and the rest of its file is passed over."""
        lo = self.min_offset if start is None else max(start, self.min_offset)
        hi = self.max_offset if end is None else min(end, self.max_offset)
        if lo < self.divided:  # a mixed store: the old commitlog's records first, by the classic walk
            yield from CommitLog.walk(self, lo, min(hi, self.divided), opts)
            lo = self.divided
        if lo >= hi:
            return
        data = self.data_files
        first = self.queue.find(lo - L.ENTRY_BODY_OFFSET) or self.queue.find(lo)
        i = data.index(first) if first in data else 0
        opts = opts or self.read_opts
        for kind, pos, what in self.iter_entries(i):
            if pos >= hi:
                return
            if kind == "entry":
                off = pos + L.ENTRY_BODY_OFFSET
                if off < lo:
                    continue
                f = self.queue.find(pos)
                rel = pos - f.file_from_offset
                yield off, check_record(f.buf, rel + L.ENTRY_BODY_OFFSET, rel + what.size, off, opts)
            elif pos >= lo:
                if kind == "blank":
                    yield pos, _BLANK
                elif kind == "bad":
                    yield pos, RecordResult(RecordStatus.INVALID, -1, None, f"DLedger entry header: {what}")

    # ---- recovery (DLedgerMmapFileStore.recover; nothing is written) -------------------
    def scan(self, start_index: int = 0, start_pos: int = 0, opts=None, to_file_end: bool = False) -> ScanResult:
        """Where the ledger ends: from the third-last data file (walking back while a file's
        first entry disagrees with its index record), every entry checked (pos, size,
        magic, consecutive index, terms not decreasing, the index record) up to the first that
        fails, the blanks followed into the next file. Sets self.ledger; the arguments of
        CommitLog.scan are not used (DLedger picks its own start)."""
        self.index_queue.load_new()
        st = self.ledger = LedgerState()
        self._read_text_files(st)
        files = self.data_files
        if not files:
            st.stop_reason = "no DLedger data files"
            return ScanResult(None, 0, 0, stop_reason=st.stop_reason)
        i = max(0, len(files) - 3)
        while i > 0 and not self._first_entry_matches(i):
            i -= 1
        last_valid = files[i].file_from_offset
        end = files[i].file_from_offset
        expect, last_term, n = None, -1, 0
        reason = "end of data"
        for kind, pos, what in self.iter_entries(i):  # the end stays at the last good entry's end
            if kind == "blank":
                continue  # the next file (if any) continues the ledger
            if kind != "entry":
                reason = f"{what} at {pos}"
                break
            h = what
            if expect is not None and h.index != expect:
                reason = f"entry index {h.index} at {pos}, expected {expect}"
                break
            if h.term < last_term:
                reason = f"entry {h.index} at {pos} has term {h.term} < {last_term}"
                break
            rec = self.index_record(h.index)
            if rec is None or (rec.pos, rec.size, rec.index, rec.term) != (h.pos, h.size, h.index, h.term):
                st.index_mismatch_count += 1
                if len(st.index_mismatches) < MAX_NOTED:
                    st.index_mismatches.append(f"entry {h.index} at {pos}: index record "
                                               f"{rec.to_json() if rec else 'missing'}")
            expect, last_term, n = h.index + 1, h.term, n + 1
            last_valid = pos + L.ENTRY_BODY_OFFSET
            end = pos + h.size
            if st.begin_index < 0:
                st.begin_index = h.index
            st.end_index, st.end_term = h.index, h.term
        st.entries, st.stop_reason, st.write_pos = n, reason, end
        first = self._first_index()
        if first is not None:
            st.begin_index = first
        self._set_committed(st)
        return ScanResult(files[i].path.name, end, last_valid, n, reason, end)

    def _first_entry_matches(self, i: int) -> bool:
        f = self.data_files[i]
        h = L.read_entry_header(f.buf, 0)
        if h.magic != L.ENTRY_MAGIC or h.pos != f.file_from_offset:
            return False
        rec = self.index_record(h.index)
        return rec is not None and rec.pos == h.pos and rec.size == h.size

    def _first_index(self) -> int | None:
        """ledgerBeginIndex: the index of the first data file's first entry."""
        data = self.data_files
        if not data:
            return None
        h = L.read_entry_header(data[0].buf, 0)
        return h.index if h.magic == L.ENTRY_MAGIC and h.pos == data[0].file_from_offset else None

    def _read_text_files(self, st: LedgerState) -> None:
        text, note = read_text(self.folder.path / L.CHECKPOINT_FILE)
        st.checkpoint = L.LedgerCheckpoint.parse(text) if text is not None else None
        if note:
            st.notes.append(note)
        text, note = read_text(self.folder.path / L.TERM_FILE)
        st.term = L.TermFile.parse(text) if text is not None else None
        if note:
            st.notes.append(note)

    def _set_committed(self, st: LedgerState) -> None:
        """updateCommittedIndex from the checkpoint: clamped to the ledger end; committedPos
        is the end of that entry."""
        ci = st.checkpoint.committedIndex if st.checkpoint else None
        if ci is None or ci < 0 or st.end_index < 0 or ci < st.begin_index:
            return
        ci = min(ci, st.end_index)
        rec = self.index_record(ci)
        if rec is not None and rec.index == ci and rec.magic == L.ENTRY_MAGIC:
            st.committed_index, st.committed_pos = ci, rec.pos + rec.size

    def normal_start_index(self, cq_max: int = -1) -> int:
        return len(self.old_files) + max(0, len(self.data_files) - 3)

    def abnormal_start_index(self, checkpoint) -> int:
        return self.normal_start_index()  # DLedger recovers the same way after a crash

    def apply_end(self, end: int, zero: bool) -> list[str]:
        """Files before the one holding `end` are whole (DLedger maps them so); nothing past it is read."""
        for f in self.data_files:  # old files of a mixed store stay whole
            if f.end_offset <= end:
                f.wrote_position = f.flushed_position = f.file_size
            else:
                f.wrote_position = f.flushed_position = max(0, end - f.file_from_offset)
        return []

    # ---- what the overview shows --------------------------------------------------------
    def info(self) -> dict:
        st = self.ledger
        cp, term = st.checkpoint, st.term
        return {
            "folder": self.folder.path.name, "selfId": self.folder.self_id, "foundBy": self.folder.found_by,
            "dataDir": str(self.folder.data_dir), "indexDir": str(self.folder.index_dir),
            "currTerm": term.currTerm if term else None, "voteLeader": term.voteLeader if term else None,
            "checkpoint": {"endIndex": cp.endIndex, "committedIndex": cp.committedIndex} if cp else None,
            "ledgerBeginIndex": st.begin_index, "ledgerEndIndex": st.end_index, "ledgerEndTerm": st.end_term,
            "committedIndex": st.committed_index, "committedPos": st.committed_pos, "writePos": st.write_pos,
            "entriesChecked": st.entries, "stopReason": st.stop_reason,
            "indexFileSize": self.index_file_size,
            "indexFiles": [f.path.name for f in self.index_queue.files],
            "indexMismatches": st.index_mismatches, "indexMismatchCount": st.index_mismatch_count,
            "notes": list(st.notes),
            "dividedCommitlogOffset": self.divided, "oldCommitlogFiles": [f.path.name for f in self.old_files],
            "restart": self.restart.to_json() if self.restart is not None else None,
        }

    def close(self) -> None:
        self.queue.close()
        self.index_queue.close()


def _header_problem(h: L.EntryHeader, pos: int, room: int) -> str:
    if h.magic != L.ENTRY_MAGIC:
        return f"magic {h.magic}, expected {L.ENTRY_MAGIC}"
    if h.size <= L.ENTRY_HEADER_SIZE or h.size > room:
        return f"entry size {h.size} does not fit (room {room})"
    if h.pos != pos:
        return f"pos field {h.pos}, expected {pos}"
    if h.bodySize + L.ENTRY_BODY_OFFSET != h.size:
        return f"bodySize {h.bodySize} + 48 != size {h.size}"
    return ""


def _index_file_size(d: Path) -> int:
    """160 MiB unless the index files all share another multiple of 32 (a DLedger configured
    with another mappedFileSizeForEntryIndex)."""
    sizes = set()
    try:
        for e in os.scandir(d):
            if e.name.isdigit() and e.is_file() and e.stat().st_size:
                sizes.add(e.stat().st_size)
    except OSError:
        pass
    if len(sizes) == 1:
        (s,) = sizes
        if s % L.INDEX_UNIT_SIZE == 0:
            return s
    return L.INDEX_FILE_SIZE
