"""All index files of a store, oldest first, and RocketMQ's query across them."""
from __future__ import annotations

import os
from pathlib import Path

from .config import StoreConfig
from .errors import StoreError
from .index_file import LONG_MAX, IndexFile
from .javahash import index_key


class IndexService:
    def __init__(self, cfg: StoreConfig, writable: bool = False):
        self.cfg = cfg
        self.directory = cfg.root / "index"
        self.writable = writable
        self.files: list[IndexFile] = []
        self.skipped: list[str] = []

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
            self.files.append(IndexFile(p, self.cfg.maxHashSlotNum, self.cfg.maxIndexNum, writable=self.writable))
        return self

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

    def close(self) -> None:
        for f in self.files:
            f.close()
