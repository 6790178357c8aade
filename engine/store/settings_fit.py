"""Do the settings fit the files? Asked before a read-write open takes the lock or writes
`abort`, and by rebuild before it deletes anything: a refused command changes not one byte.

The rules are the loaders' (MappedFileQueue, IndexService): every commitlog and consume-queue
data file is exactly its configured size (a zero-length last file is a creation a crash cut
short) and named at a multiple of it; every non-empty index file is 40 + 4 x maxHashSlotNum
+ 20 x maxIndexNum bytes, or shorter where the writable load extends it as RocketMQ's map does
(IndexService.short_files says when), and when those two were given, the geometry its own
entries decide (engine.store.index_geometry) must be the one given."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engine.config import StoreConfig
from engine.errors import ConfigError
from engine.store import index_geometry
from engine.store.detect import _subdirs
from engine.store.index_service import short_files

COMMITLOG, CONSUME_QUEUE, INDEX = "commitlog", "consume queue", "index"


@dataclass(frozen=True)
class Misfit:
    """One file the settings contradict: what kind of file, where, and how."""
    kind: str
    path: str
    detail: str

    def error(self, advice: str = "") -> ConfigError:
        return ConfigError(f"{self.kind} file {self.detail}{advice}; nothing was changed", path=self.path)


def misfits(root: Path, cfg: StoreConfig) -> list[Misfit]:
    """Every file of the store the settings contradict (none: a writer may open it)."""
    out = []
    for d in cfg.commitlog_dirs:
        out += _queue_misfits(COMMITLOG, d, cfg.mappedFileSizeCommitLog, "mappedFileSizeCommitLog")
    for t in sorted(_subdirs(Path(root) / "consumequeue")):
        for q in sorted(_subdirs(t)):
            if q.name.isdigit():  # other names are passed over by the open (with a warning)
                out += _queue_misfits(CONSUME_QUEUE, q, cfg.mappedFileSizeConsumeQueue, "mappedFileSizeConsumeQueue")
    return out + _index_misfits(Path(root) / "index", cfg)


def refuse_misfits(root: Path, cfg: StoreConfig) -> None:
    """Raise ConfigError naming the first file the settings contradict."""
    found = misfits(root, cfg)
    if found:
        more = f" (and {len(found) - 1} more file(s))" if len(found) > 1 else ""
        raise found[0].error(more)


def _data_files(d: Path) -> list[tuple[int, Path, int]]:
    """(offset in its name, path, size) of the numbered regular files, by offset."""
    try:
        entries = list(os.scandir(d))
    except OSError:
        return []
    return sorted((int(e.name), Path(e.path), e.stat().st_size) for e in entries
                  if e.name.isdigit() and e.is_file())


def _queue_misfits(kind: str, d: Path, size: int, setting: str) -> list[Misfit]:
    files = _data_files(d)
    out = []
    for i, (start, p, actual) in enumerate(files):
        if actual == 0 and i == len(files) - 1:
            continue  # a creation cut short: the open deletes it
        if actual != size:
            out.append(Misfit(kind, str(p), f"is {actual} bytes but {setting}={size} makes files of {size} bytes"))
        elif start % size:
            out.append(Misfit(kind, str(p), f"name {start} is not a multiple of {setting}={size}"))
    return out


def _index_misfits(d: Path, cfg: StoreConfig) -> list[Misfit]:
    size = cfg.index_file_size
    geometry = f"maxHashSlotNum={cfg.maxHashSlotNum} maxIndexNum={cfg.maxIndexNum}"
    out, fitting = [], []
    short = {p.name: why for p, _, why in short_files(d, cfg)}
    for _, p, actual in _data_files(d):
        if actual == 0 or short.get(p.name) == "":
            continue  # a creation cut short (recovery deletes it), a file cut short (the load extends it)
        if actual != size:
            why = f", {short[p.name]}" if short.get(p.name) else ""
            out.append(Misfit(INDEX, str(p), f"is {actual} bytes but {geometry} makes files of {size} bytes "
                                             f"(40 + 4 x maxHashSlotNum + 20 x maxIndexNum){why}"))
        else:
            fitting.append(p)
    if {"maxHashSlotNum", "maxIndexNum"} & cfg.explicit:  # same size, other split? the newest file that
        for p in reversed(fitting):                        # decides speaks for all (one broker's settings)
            g = index_geometry.read_file(p).geometry
            if g is None:
                continue
            if (g.slots, g.entries) != (cfg.maxHashSlotNum, cfg.maxIndexNum):
                out.append(Misfit(INDEX, str(p), f"was written with maxHashSlotNum={g.slots} maxIndexNum="
                                                 f"{g.entries} (its entries say so), not {geometry}"))
            break
    return out
