"""All index files of a store, oldest first, and RocketMQ's query across them."""
from __future__ import annotations

import os
import time
from pathlib import Path

from engine import accel
from engine.config import INDEX_HEADER_SIZE, StoreConfig
from engine.errors import ConfigError, StoreError
from engine.files.mapped_file import fsync_dir
from engine.store import index_geometry
from engine.tasks import CancelToken, Task, run, steps
from engine.store.index_accel import build_accel, file_accel_bytes
from engine.store.index_file import LONG_MAX, IndexFile
from engine.format.javahash import index_key
from engine.format.message import TRANSACTION_ROLLBACK_TYPE, Message
from engine.format.properties import split_keys

_query = accel.load("_query")


class PyIndexState:
    """IndexState's pure twin (engine/accel/_query.pyx): an IndexService's files, settings and
    compiled walker."""
    __slots__ = ("files", "cfg", "_kidx")

    def __init__(self, cfg=None):
        self.files, self.cfg, self._kidx = [], cfg, None


IndexState = PyIndexState if _query is None else _query.IndexState   # C fields for the compiled query


ACCEL_BUDGET = 2 << 30  # bytes of chain copies accelerate() holds by default (a full default file: 340 MB)


def _int64(t: int) -> int:
    return min(max(t, -(1 << 63)), (1 << 63) - 1)


def short_files(directory: Path, cfg: StoreConfig) -> list[tuple[Path, int, str]]:
    """The non-empty index files shorter than cfg.index_file_size, by name: (path, size, why a
    writable load does not extend it; "" when it does).

    RocketMQ 4.9.7 maps every index file READ_WRITE from 0 for the configured size
    (MappedFile.init: `fileChannel.map(MapMode.READ_WRITE, 0, fileSize)`), which extends a
    shorter file with zeros; IndexService.load then reads its header and applies the crash
    rule. A writable load does the same (IndexService._extend) for a file that holds its whole
    40-byte header, beside another index file of the configured size (which vouches for the
    settings), whose own entries decide no other maxHashSlotNum (index_geometry; the same slot
    count with fewer entries is a cut in the zero tail, or a smaller maxIndexNum: the layout
    is the same). Refused otherwise (settings_fit, before anything is written): under 40
    bytes the broker would read a header whose missing fields are zeros (a field cut in two
    keeps only its high bytes); with no file of the configured size, or another slot table,
    the files were more likely written with other settings. A file longer than configured is
    refused too: RocketMQ maps only its first fileSize bytes, which for a file no crash makes
    (nothing grows an index file) means settings other than the writer's."""
    size = cfg.index_file_size
    try:
        found = sorted((e.name, Path(e.path), e.stat().st_size) for e in os.scandir(directory)
                       if e.name.isdigit() and e.is_file())
    except OSError:
        return []
    vouched = any(n == size for _, _, n in found)
    out = []
    for _, p, n in found:
        if not 0 < n < size:
            continue
        why = ""
        if n < INDEX_HEADER_SIZE:
            why = f"fewer bytes than its {INDEX_HEADER_SIZE}-byte header"
        elif not vouched:
            why = f"and no index file of {size} bytes vouches for those settings"
        else:
            g = index_geometry.read_file(p).geometry
            if g is not None and g.slots != cfg.maxHashSlotNum:
                why = f"and its entries say maxHashSlotNum={g.slots}"
        out.append((p, n, why))
    return out


class IndexService:
    """With the compiled module, query_offset is engine.accel._query.query_offset, which answers
    the common case in C from `state` (an IndexState: files, cfg, _kidx); _query_offset_py is
    the whole method and the reference."""
    __slots__ = ("state", "__dict__")
    files = accel.state_property("files", "the index files, oldest first")
    cfg = accel.state_property("cfg")
    _kidx = accel.state_property("_kidx", "the compiled key walker over `files` (_key_index)")

    def __init__(self, cfg: StoreConfig, writable: bool = False):
        self.state = IndexState(cfg)
        self.directory = cfg.root / "index"
        self.writable = writable
        self.files: list[IndexFile] = []
        self.skipped: list[str] = []
        self.warnings: list[str] = []
        self.refused: list[tuple[Path, str]] = []  # files a read-only load passed over, and why (check judges them)
        self.on_file_full = None  # callback(endTimestamp) -> checkpoint.indexMsgTimestamp
        self.entries_added = 0  # by build_index (recovery's report)
        self.empty_files: list[str] = []  # zero-length files a writable load found (recovery deletes them)
        self.extended_files: list[tuple[str, int]] = []  # files a writable load extended, and their old size
        self._kidx = None  # the compiled key walker over `files` (_key_index)
        self._short: list | None = None  # short_files as the load found them (`short`)

    def load(self) -> "IndexService":
        """Map the index files, oldest first. Read-only, a file of the wrong size is passed over
        (`refused`, with why; check judges it). Writable, a zero-length one is left to recovery
        (`empty_files`) and a shorter one extended to the configured size first, as RocketMQ's
        map does (`short_files`, `extended_files`); any other size raises ConfigError (the
        settings check refused such a store before the lock)."""
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return self
        except OSError as e:
            raise StoreError(f"cannot list directory: {e.strerror}", path=str(self.directory)) from None
        short = {p.name: n for p, n, why in self.short() if not why} if self.writable else {}
        for name in names:
            p = self.directory / name
            if not name.isdigit() or not p.is_file():
                self.skipped.append(str(p))
                continue
            if self.writable and p.stat().st_size == 0:
                self.empty_files.append(name)  # a creation cut short by a crash: recovery deletes it
                continue
            if name in short:
                self._extend(p, short[name])
            try:
                self.files.append(IndexFile(p, self.cfg.maxHashSlotNum, self.cfg.maxIndexNum, writable=self.writable))
            except ConfigError as e:
                if self.writable:
                    raise
                self.refused.append((p, str(e)))  # which file and why (check judges it: analysis.check_index)
                self.warnings.append(f"skipped index file: {e}")  # a reader carries on without it
        return self

    def short(self) -> list[tuple[Path, int, str]]:
        """short_files of this service's folder, read once (the writable load, recovery's plan
        and check all ask; each asks index_geometry about every short file)."""
        if self._short is None:
            self._short = short_files(self.directory, self.cfg)
        return self._short

    def _extend(self, p: Path, size: int) -> None:
        """The file extended to the configured size with zeros (sparse) and the new size made
        durable (fsync of the file and of the folder) before anything is mapped, planned or
        written: a kill before the fsync leaves the old size or the new one, and the next load
        does this again (a file of the configured size is loaded as it is). The bytes it had
        are not touched."""
        try:
            fd = os.open(p, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
            try:
                os.ftruncate(fd, self.cfg.index_file_size)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise StoreError(f"cannot extend the index file to {self.cfg.index_file_size} bytes: {e.strerror}",
                             path=str(p)) from None
        fsync_dir(self.directory)
        self.extended_files.append((p.name, size))

    def repair_after_crash(self, torn: bool = True) -> int:
        """Recovery's first writes to the index (writable only): the empty files deleted, the
        torn slots of the last file (the only one a crashed writer was appending to) pointed
        back, and an empty last file given its inherited header. Returns the slots repaired.
        torn=False: the plan counted no torn slot, so the slot table is not read again."""
        for name in self.empty_files:
            (self.directory / name).unlink(missing_ok=True)
        self.empty_files = []
        if not (self.writable and self.files):
            return 0
        repaired = self.files[-1].repair_torn_put() if torn else 0
        self._kidx = None  # (it may hold the file's chain copy, which the repair set aside)
        self._inherit_into_empty_last()
        return repaired

    def _inherit_into_empty_last(self) -> None:
        """A writer killed between creating an index file and writing its inherited header
        leaves a last file with no entry and an all-zero header: its endPhyOffset 0 would make
        build_index take every re-dispatched record again (an index overlapping the older files)
        and recovery resume from offset 0. Give it the header last_file_for_write gives."""
        if len(self.files) < 2:
            return
        f, prev = self.files[-1], self.files[-2]
        h, p = f.header, prev.header
        if f.entry_count or h.endPhyOffset or h.endTimestamp:
            return
        if p.endPhyOffset > 0:
            h.beginPhyOffset = h.endPhyOffset = p.endPhyOffset
        if p.endTimestamp > 0:
            h.beginTimestamp = h.endTimestamp = p.endTimestamp
        f.write_header(counts=False)

    def load_new(self) -> None:
        known = {f.name for f in self.files}
        try:
            names = sorted(os.listdir(self.directory))
        except OSError:
            return
        for name in names:
            if name.isdigit() and name not in known and name > (self.files[-1].name if self.files else ""):
                try:
                    self.files.append(IndexFile(self.directory / name, self.cfg.maxHashSlotNum, self.cfg.maxIndexNum))
                except StoreError:
                    continue

    def _query_offset_py(self, topic: str, key: str, max_num: int, begin: int = 0, end: int = LONG_MAX,
                         cap: int | None = None, accel: bool = True) -> tuple[list[int], int, int]:
        """IndexService.queryOffset: (offsets newest first, lastUpdateTimestamp, lastUpdatePhyOffset).
        `cap` defaults to maxMsgsNumBatch, as in RocketMQ; None/0 in callers means no cap.
        The compiled walker answers when built (accel=False: the Python reference)."""
        cap = self.cfg.maxMsgsNumBatch if cap is None else cap
        begin, end = _int64(begin), _int64(end)  # times are int64: beyond it is the same as its ends
        ki = self._key_index() if accel and type(topic) is str and type(key) is str else None
        if ki is not None:
            return ki.query_offset(topic, key, max_num, cap, begin, end)
        max_num = min(max_num, cap) if cap else max_num
        out: list[int] = []
        k = index_key(topic, key)
        last_ts, last_off = self.last_update()
        for i in range(len(self.files) - 1, -1, -1):
            f = self.files[i]
            if f.is_time_matched(begin, end):
                f.select(k, max_num, begin, end, out)
            if f.header.beginTimestamp < begin:
                break
            if len(out) >= max_num:
                break
        return out, last_ts, last_off

    query_offset = _query_offset_py if _query is None else _query.query_offset

    def last_update(self) -> tuple[int, int]:
        """A query's indexLastUpdateTimestamp and indexLastUpdatePhyoffset: the newest index
        file's endTimestamp and endPhyOffset (0, 0 without one)."""
        if not self.files:
            return 0, 0
        h = self.files[-1].header
        return h.endTimestamp, h.endPhyOffset

    def query_offsets(self, topic: str, keys, max_num: int, begin: int = 0, end: int = LONG_MAX,
                      cap: int | None = None, accel: bool = True) -> list[list[int]]:
        """query_offset for many keys in one call (the GUI's and the scans' batches): one list
        of offsets per key, in the order of `keys`."""
        cap = self.cfg.maxMsgsNumBatch if cap is None else cap
        max_num = min(max_num, cap) if cap else max_num
        ki = self._key_index() if accel else None
        if ki is not None:
            return ki.query_many(topic, keys, max_num, _int64(begin), _int64(end))
        return [self.query_offset(topic, k, max_num, begin, end, cap=0, accel=False)[0] for k in keys]

    def accelerate(self, budget: int = ACCEL_BUDGET) -> dict:
        """Give the files, newest first, an in-memory copy of their chains in slot order
        (engine/store/index_accel.py) while their total stays within `budget` bytes: a key
        query then costs one or two cache misses per file instead of one per chain entry. A file
        whose chains are not in the writer's shape (damage) keeps being walked in place, and a
        copy stops being used when its file gets a new entry. Returns what was done."""
        return run(self.accelerate_task(budget))

    def accelerate_task(self, budget: int = ACCEL_BUDGET, cancel: CancelToken | None = None) -> Task[dict]:
        """accelerate() as a task (a file a step; the GUI runs it after an open). Each copy is
        put in place as it is made, so a cancel keeps the ones already made. The newest files
        that fit the budget keep or get a copy; every older one gives its copy up. The answer:
        the files copied ("built"), refused (not in the writer's shape), how many kept a
        fresh copy, the bytes held and the seconds taken."""
        t = time.perf_counter()
        held = 0
        built: list[str] = []
        refused: list[str] = []
        kept = 0
        newest_first = list(reversed(self.files))
        for k, (f, progress) in enumerate(steps(newest_first, cancel, "chain copies", "files")):
            fresh = f.accel is not None and f.accel.fresh(f)
            need = f.accel.nbytes if fresh else file_accel_bytes(f)
            if held + need > budget:
                for older in newest_first[k:]:
                    older.accel = None
                self._kidx = None
                break
            if fresh:
                kept += 1
            else:
                f.accel = build_accel(f)
                (built if f.accel is not None else refused).append(f.name)
                self._kidx = None  # the next query's walker takes the copy
            if f.accel is not None:
                held += f.accel.nbytes
            yield progress
        return {"built": built, "refused": refused, "kept": kept, "bytes": held,
                "seconds": round(time.perf_counter() - t, 3)}

    def release_accel(self) -> int:
        """Let go of every chain copy (the GUI's setting turned off): queries walk the files
        again. Returns the bytes released."""
        held = sum(f.accel.nbytes for f in self.files if f.accel is not None)
        for f in self.files:
            f.accel = None
        self._kidx = None
        return held

    def _key_index(self):
        """The compiled walker over the current files (None without the compiled module),
        rebuilt when the file list changed (a roll, a deletion, a reload)."""
        if _query is None:
            return None
        ki = self._kidx
        if ki is None or not ki.fresh(self.files):
            ki = self._kidx = _query.KeyIndex(self.files)
        return ki

    # ---- writing (dispatch) -----------------------------------------------------------
    def build_index(self, msg: Message) -> None:
        """§9.8: UNIQ_KEY then each KEYS token as "topic#key"; ROLLBACK records are not indexed;
        a record below the last file's endPhyOffset was indexed already."""
        f = self.last_file_for_write()
        if msg.physicalOffsetField < f.header.endPhyOffset:
            return
        if msg.sysFlag & 0x0C == TRANSACTION_ROLLBACK_TYPE:
            return
        keys = ([msg.uniqKey] if msg.uniqKey else []) + split_keys(msg.keys)
        for k in keys:
            key = index_key(msg.topic, k)
            if not f.put_key(key, msg.physicalOffsetField, msg.storeTimestamp):
                f = self.last_file_for_write()
                f.put_key(key, msg.physicalOffsetField, msg.storeTimestamp)
            self.entries_added += 1

    def resume_offset(self, commitlog, files: list | None = None) -> int:
        """The commitlog offset from which records still need indexing: after the last
        indexed record if all its keys are in, at it if a crash cut its keys short (they are
        then added again: duplicates, as RocketMQ's re-dispatch makes), 0 with no index file.
        `files`: those of this index a recovery keeps (default: all)."""
        files = self.files if files is None else files
        if not files:
            return 0
        last = files[-1]
        end = last.header.endPhyOffset
        if end <= 0 and last.entry_count == 0 and len(files) == 1:
            return 0
        msg = commitlog.get_message(end)
        if msg is None or msg.physicalOffsetField != end:
            return end  # past the log, or not a record (damage): nothing to re-add there
        if msg.sysFlag & 0x0C == TRANSACTION_ROLLBACK_TYPE:
            return end + msg.storeSize
        want = (1 if msg.uniqKey else 0) + len(split_keys(msg.keys))
        have = 0
        for f in reversed(files):  # a record's keys can straddle a full file and the next
            e = f.entries[1:f.header.indexCount]["commitLogOffset"][::-1]
            run = int((e == end).cumprod().sum()) if len(e) else 0
            have += run
            if run < len(e) or have >= want or f.header.beginPhyOffset != end:
                break
        return end + msg.storeSize if have >= want else end

    def clamp_end(self, end: int) -> None:
        """After the commitlog was cut at `end`: the last file's endPhyOffset past it would make
        build_index skip every record written below it again (their keys never indexed; RocketMQ
        has this flaw). It is lowered to the last entry below `end`; entries past it stay (stale
        hits, which exact queries check against the record)."""
        if not self.files or not self.writable:
            return
        f = self.files[-1]
        h = f.header
        if h.endPhyOffset <= end:
            return
        e = f.entries[1:h.indexCount]["commitLogOffset"]
        below = e[e < end]
        h.endPhyOffset = int(below.max()) if len(below) else min(h.beginPhyOffset, end)
        f.write_header()

    def last_file_for_write(self) -> IndexFile:
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_write_full:
            return last
        f = self._create_file(self._new_name())
        if last is not None:
            h = f.header
            if last.header.endPhyOffset > 0:
                h.beginPhyOffset = h.endPhyOffset = last.header.endPhyOffset
            if last.header.endTimestamp > 0:
                h.beginTimestamp = h.endTimestamp = last.header.endTimestamp
            f.write_header(counts=False)
            last.flush()
            if self.on_file_full is not None:
                self.on_file_full(last.header.endTimestamp)
        self.files.append(f)
        return f

    def _create_file(self, name: str) -> IndexFile:
        """A new empty index file on disk (a DLedger restart's view makes its own in memory)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        return IndexFile(self.directory / name, self.cfg.maxHashSlotNum, self.cfg.maxIndexNum, writable=True, create=True)

    def _new_name(self) -> str:
        """yyyyMMddHHmmssSSS in local time; never the name of an existing file."""
        existing = {f.name for f in self.files}
        while True:
            ms = int(time.time() * 1000)
            name = time.strftime("%Y%m%d%H%M%S", time.localtime(ms / 1000)) + f"{ms % 1000:03d}"
            if name not in existing and not (self.directory / name).exists():
                return name
            time.sleep(0.001)

    def files_after(self, timestamp: int) -> list[IndexFile]:
        """Crash recovery's rule (§12.6): index files whose endTimestamp > the checkpoint's
        indexMsgTimestamp go, and (unlike RocketMQ, which tests each file alone) every file
        after the first that goes: a later file kept (store times that went back, an empty file
        whose header was never written) would leave a hole recovery cannot see, since it
        resumes after the last file."""
        for i, f in enumerate(self.files):
            if f.header.endTimestamp > timestamp:
                return self.files[i:]
        return []

    def delete_after(self, timestamp: int) -> list[str]:
        """Delete `files_after(timestamp)`; returns their names."""
        gone = []
        self._kidx = None  # it holds the maps of the files about to go
        for f in list(self.files_after(timestamp)):
            gone.append(f.name)
            path = f.path
            f.close()
            path.unlink(missing_ok=True)
            self.files.remove(f)
        if gone:
            fsync_dir(self.directory)  # the deletions are durable before anything is rebuilt after them
        if gone and self.writable:
            self._inherit_into_empty_last()
        return gone

    def flush(self, header_only: bool = False, checkpoint=None) -> None:
        """The file being written: all of it, or (the background rounds) its header only once
        its endTimestamp is past the checkpoint's indexMsgTimestamp: from then on a crash
        recovery deletes the file whatever its other pages hold (§12.6); until then (its first
        entries in the full file's last millisecond) it would be kept, so all of it. (The file
        is chosen first: a roll moves the checkpoint's time before it appends the new file.)"""
        if self.files:
            f = self.files[-1]
            if header_only and checkpoint is not None and f.header.endTimestamp > checkpoint.indexMsgTimestamp:
                f.flush_header()
            else:
                f.flush()

    def close(self) -> None:
        self._kidx = None
        for f in self.files:
            f.close()
