"""The CommitLog: every message of every topic, appended to fixed-size files.

A record never spans files; each finished file ends with a BLANK record. The end of valid
data is not stored anywhere: recovery rediscovers it by scanning (normal: from the
third-last file; after a crash: from the last file whose first message is older than the
checkpoint says is safe) and stops at the first invalid record."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from engine.store.checkpoint import Checkpoint
from engine.config import StoreConfig
from engine.files.mapped_file import MappedFile
from engine.files.mapped_file_queue import MappedFileQueue
from engine.store import record_scan
from engine.format.message import (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2, DecodeOptions, Message,
                      RecordResult, RecordStatus, _invalid, check_record, peek_store_timestamp)

import os
import struct

from engine import accel

_I32 = struct.Struct(">i")

_PAGE = accel.load("_page")   # the compiled record decode (None: check_record alone)
_decode = _PAGE.decode if _PAGE is not None else None


def read_record_at(buf, pos: int, limit: int, offset: int, opts: DecodeOptions) -> RecordResult:
    """check_record's answer. The compiled decoder builds MESSAGE answers in C; any other
    answer (a blank, damage, the delay rule, non-ASCII tags) comes from check_record itself."""
    if _decode is not None:
        r = _decode(buf, pos, limit, offset, opts)
        if r is not None:
            return r
    return check_record(buf, pos, limit, offset, opts)

COMMITLOG_RESERVE_STEP = 16 << 20  # blocks reserved ahead of the appends: one fallocate per 16 MiB


@dataclass
class ScanResult:
    """What a recovery scan found: where valid data ends and why it stopped there."""
    start_file: str | None
    end_offset: int
    last_valid_start: int
    messages: int = 0
    stop_reason: str = ""
    stop_offset: int | None = None
    deleted_files: list[str] = field(default_factory=list)


class CommitLog:
    __slots__ = ("queue", "read_opts", "__dict__", "__weakref__")  # (read by the page loop and messages_at)

    def __init__(self, cfg: StoreConfig, writable: bool = False):
        self.cfg = cfg
        self.queue = MappedFileQueue(cfg.commitlog_dirs, cfg.mappedFileSizeCommitLog, writable,
                                     reserve_step=COMMITLOG_RESERVE_STEP,
                                     populate=os.environ.get("RMQSTORE_NO_POPULATE") != "1").load(cfg.tolerant)
        delays = cfg.delay_level_millis
        self.read_opts = DecodeOptions(check_crc=False, delay_level_millis=delays)
        self.recover_opts = DecodeOptions(check_crc=cfg.checkCRCOnRecover,
                                          force_verify_prop_crc=cfg.forceVerifyPropCRC,
                                          delay_level_millis=delays)
        self.file_size = cfg.mappedFileSizeCommitLog

    # ---- bounds ------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    @property
    def files(self) -> list[MappedFile]:
        return self.queue.files

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    # ---- reading -----------------------------------------------------------------------
    def read_record(self, offset: int, opts: DecodeOptions | None = None) -> RecordResult:
        f = self.queue.find(offset)
        if f is None or offset - f.file_from_offset >= f.wrote_position:
            return _invalid("offset outside the valid commitlog")
        return read_record_at(f.buf, offset - f.file_from_offset, f.wrote_position, offset, opts or self.read_opts)

    def get_message(self, offset: int, size: int | None = None) -> Message | None:
        """The message at `offset`, or None when no valid record of that size starts there."""
        r = self.read_record(offset)
        if r.status is not RecordStatus.MESSAGE or (size is not None and r.size != size):
            return None
        return r.message

    def look_message(self, offset: int) -> Message | None:
        """lookMessageByOffset's read: get_message, except that offset 0 where no file holds it
        (the first file deleted) reads the first file's first record, as CommitLog.getMessage's
        findMappedFileByOffset(offset, offset == 0) returns the first file, read at 0 % size."""
        m = self.get_message(offset)
        if m is None and offset == 0 and self.files and self.files[0].file_from_offset > 0:
            m = self.get_message(self.files[0].file_from_offset)
        return m

    def _messages_at_py(self, offsets) -> list[Message]:
        """get_message for each offset (a key query's answer), the misses left out."""
        return [m for m in map(self.get_message, offsets) if m is not None]

    # messages_at: the compiled one-call version (the records it decides, the rest by
    # get_message) is the method itself when built, else the reference
    messages_at = _PAGE.messages_at if _PAGE is not None else _messages_at_py

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        f = self.queue.find(offset)
        if offset < self.min_offset or f is None or offset - f.file_from_offset + size > f.wrote_position:
            return -1
        try:
            return peek_store_timestamp(f.buf, offset - f.file_from_offset)
        except struct.error:  # a CQ unit with an absurd size pointing at the end of a file
            return -1

    def walk(self, start: int | None = None, end: int | None = None,
             opts: DecodeOptions | None = None) -> Iterator[tuple[int, RecordResult]]:
        """Every record in [start, end) in commitlog order, blanks and damage included.
        Damage inside an earlier file skips to the next file, like a careful reader would."""
        offset = self.min_offset if start is None else max(start, self.min_offset)
        end = self.max_offset if end is None else min(end, self.max_offset)
        while offset < end:
            f = self.queue.find(offset)
            if f is None:
                nxt = [g.file_from_offset for g in self.files if g.file_from_offset > offset]
                if not nxt:
                    return
                offset = nxt[0]
                continue
            r = read_record_at(f.buf, offset - f.file_from_offset, f.wrote_position, offset, opts or self.read_opts)
            yield offset, r
            if r.status is RecordStatus.MESSAGE or (r.status is RecordStatus.SIZE_MISMATCH and r.size > 0):
                offset += r.size
            else:
                offset = f.end_offset

    def iter_messages(self, start: int | None = None, end: int | None = None) -> Iterator[Message]:
        for _, r in self.walk(start, end):
            if r.message is not None:
                yield r.message

    # ---- recovery ------------------------------------------------------------------------
    def scan(self, start_index: int, start_pos: int = 0, opts: DecodeOptions | None = None,
             to_file_end: bool = False) -> ScanResult:
        """§12.2: walk from files[start_index] with CRC checks until the first invalid record
        (recovery.plan's one walk; apply re-dispatches after it). to_file_end: ignore write
        positions (how far records reach on disk, before recovery)."""
        opts = opts or self.recover_opts
        files = self.files
        if not files:
            return ScanResult(None, 0, 0, stop_reason="no commitlog files")
        i = start_index
        f = files[i]
        pos, count = start_pos, 0
        last_valid = f.file_from_offset
        reason = ""
        # runs of ordinary records are vouched for in bulk (record_scan); check_record still
        # classifies every record after a run, so each stop and its reason are its own
        fast = not to_file_end and record_scan.supports(opts)
        run, slow = record_scan.FIRST_RUN, 0
        while True:
            if fast and slow <= 0:
                n, last, nxt, clean = record_scan.run_of_messages(f.buf, pos, f.file_size, opts, run)
                if n:
                    count += n
                    last_valid = f.file_from_offset + last
                    record_scan.drop_pages(f.buf, pos, nxt)
                    pos = nxt
                run, slow = (min(2 * run, record_scan.MAX_RECORDS), 0) if clean else \
                    (record_scan.FIRST_RUN, record_scan.SLOW_AFTER_MISS)
            slow -= 1
            r = check_record(f.buf, pos, f.file_size, f.file_from_offset + pos, opts)
            if r.status is RecordStatus.MESSAGE:
                last_valid = f.file_from_offset + pos
                count += 1
                pos += r.size
            elif r.status is RecordStatus.SIZE_MISMATCH and to_file_end and r.size > 0:
                pos += r.size
            elif r.status is RecordStatus.END_OF_FILE:
                if i + 1 == len(files):
                    reason = "blank record at the end of the last file"
                    break
                i += 1
                f, pos = files[i], 0
            else:
                reason = r.reason or r.status.value
                break
        end = f.file_from_offset + pos
        return ScanResult(files[start_index].path.name, end, last_valid, count, reason, end)

    def normal_start_index(self, cq_max: int = -1) -> int:
        """Third-last file, or an older one if the consume queues end before it."""
        idx = max(0, len(self.files) - 3)
        if 0 <= cq_max < (self.files[idx].file_from_offset if self.files else 0):
            f = self.queue.find(cq_max)
            if f is not None:
                idx = min(idx, self.queue.index_of(f))
        return idx

    def abnormal_start_index(self, checkpoint: Checkpoint) -> int:
        """§12.4: the newest file whose first message is no newer than the safe checkpoint time."""
        limit = (checkpoint.min_timestamp_index if self.cfg.messageIndexEnable and self.cfg.messageIndexSafe
                 else checkpoint.min_timestamp)
        return self.newest_file_matched(lambda buf: 0 != peek_store_timestamp(buf, 0) <= limit)

    def newest_file_matched(self, accept) -> int:
        """isMappedFileMatchedRecover's walk: the newest file whose first record has a message's
        magic and is accepted (`accept(buf)`); the first file when none is."""
        for i in range(len(self.files) - 1, -1, -1):
            buf = self.files[i].buf
            if _I32.unpack_from(buf, 4)[0] in (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2) and accept(buf):
                return i
        return 0

    def apply_end(self, end: int, zero: bool) -> list[str]:
        """Truncate at `end`: in a writable store files after it are deleted; read-only, the
        files are only marked empty so nothing past `end` is ever read."""
        if self.queue.writable:
            return self.queue.truncate_to(end, zero=zero)
        for f in self.files:
            if f.end_offset <= end:
                continue
            f.wrote_position = f.flushed_position = max(0, end - f.file_from_offset)
        return []

    def close(self) -> None:
        self.queue.close()

    # ---- where log kinds differ (DLedgerCommitLog overrides): callers ask these, never the kind
    redispatches_after_crash = True  # abnormal recovery re-dispatches the records it scans

    def entry_header(self, f) -> int:
        """Bytes of framing before each record of file `f` (0: records back to back)."""
        return 0

    def entry_at(self, offset: int):
        """The framing entry around the record at `offset` (none: records are not framed)."""
        return None

    def own_recovery_start(self) -> tuple[int, str] | None:
        """(file index, rule) when the log picks its recovery start itself; None: the store's rule."""
        return None

    def after_recovery(self, store) -> None:
        """What the broker adds in memory once recovery is done (nothing for a classic log)."""

    def info(self) -> dict | None:
        """The log's own state for the overview (None: nothing beyond its files)."""
        return None

    def rebuild_refusal(self, root: Path) -> tuple[str, Path] | None:
        """(why, where) when the queues and index of a store on this log may not be rebuilt."""
        return None
