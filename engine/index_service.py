"""All index files of a store, oldest first, and RocketMQ's query across them."""
from __future__ import annotations

import os
import time

from .config import StoreConfig
from .errors import ConfigError, StoreError
from .index_file import LONG_MAX, IndexFile
from .javahash import index_key
from .message import TRANSACTION_ROLLBACK_TYPE, Message
from .properties import split_keys


class IndexService:
    def __init__(self, cfg: StoreConfig, writable: bool = False):
        self.cfg = cfg
        self.directory = cfg.root / "index"
        self.writable = writable
        self.files: list[IndexFile] = []
        self.skipped: list[str] = []
        self.warnings: list[str] = []
        self.on_file_full = None  # callback(endTimestamp) -> checkpoint.indexMsgTimestamp

    def load(self) -> "IndexService":
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return self
        except OSError as e:
            raise StoreError(f"cannot list directory: {e.strerror}", path=str(self.directory)) from None
        for name in names:
            p = self.directory / name
            if not name.isdigit() or not p.is_file():
                self.skipped.append(str(p))
                continue
            if self.writable and p.stat().st_size == 0:
                p.unlink(missing_ok=True)  # a creation cut short by a crash: nothing in it
                continue
            try:
                self.files.append(IndexFile(p, self.cfg.maxHashSlotNum, self.cfg.maxIndexNum, writable=self.writable))
            except ConfigError as e:
                if self.writable:
                    raise
                self.warnings.append(f"skipped index file: {e}")  # a reader carries on without it
        if self.writable and self.files:
            self.files[-1].repair_torn_put()  # the only file a crashed writer was appending to
        return self

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

    def query_offset(self, topic: str, key: str, max_num: int, begin: int = 0, end: int = LONG_MAX,
                     cap: int | None = None) -> tuple[list[int], int, int]:
        """IndexService.queryOffset: (offsets newest first, lastUpdateTimestamp, lastUpdatePhyOffset).
        `cap` defaults to maxMsgsNumBatch, as in RocketMQ; None/0 in callers means no cap."""
        cap = self.cfg.maxMsgsNumBatch if cap is None else cap
        max_num = min(max_num, cap) if cap else max_num
        out: list[int] = []
        last_ts = last_off = 0
        k = index_key(topic, key)
        for i in range(len(self.files) - 1, -1, -1):
            f = self.files[i]
            if i == len(self.files) - 1:
                last_ts, last_off = f.header.endTimestamp, f.header.endPhyOffset
            if f.is_time_matched(begin, end):
                f.select(k, max_num, begin, end, out)
            if f.header.beginTimestamp < begin:
                break
            if len(out) >= max_num:
                break
        return out, last_ts, last_off

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

    def last_file_for_write(self) -> IndexFile:
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_write_full:
            return last
        name = self._new_name()
        self.directory.mkdir(parents=True, exist_ok=True)
        f = IndexFile(self.directory / name, self.cfg.maxHashSlotNum, self.cfg.maxIndexNum, writable=True, create=True)
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

    def _new_name(self) -> str:
        """yyyyMMddHHmmssSSS in local time; never the name of an existing file."""
        existing = {f.name for f in self.files}
        while True:
            ms = int(time.time() * 1000)
            name = time.strftime("%Y%m%d%H%M%S", time.localtime(ms / 1000)) + f"{ms % 1000:03d}"
            if name not in existing and not (self.directory / name).exists():
                return name
            time.sleep(0.001)

    def delete_after(self, timestamp: int) -> list[str]:
        """Crash recovery: index files whose endTimestamp > the checkpoint's indexMsgTimestamp go."""
        gone = []
        for f in list(self.files):
            if f.header.endTimestamp > timestamp:
                gone.append(f.name)
                path = f.path
                f.close()
                path.unlink(missing_ok=True)
                self.files.remove(f)
        return gone

    def flush(self) -> None:
        if self.files:
            self.files[-1].flush()

    def close(self) -> None:
        for f in self.files:
            f.close()
