"""Which RocketMQ generation wrote a store: 4.x or 5.x, with the evidence that decided it.

Nothing records the broker version, so the answer is read from what each generation writes
differently (engine/format/generation.py): a bounded sample of records (the first few of up
to MAX_FILES commitlog or DLedger files spread over the log, the newest always among them:
O(files), never O(store)), the checkpoint, the abort file and the layout folders. Any 5.x
sign decides 5.x (a 4.9 broker cannot write it); 4.x needs a 4.x sign and no 5.x one; with
neither the answer is "unknown". The defaults follow the answer: the time-lookup rule and
whether appends carry the `__CRC32#` tail."""
from __future__ import annotations

import dataclasses
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from engine.config import StoreConfig
from engine.format import generation as G
from engine.format.message import RecordStatus, check_record, verify_prop_crc

MAX_FILES = 16            # commitlog (or DLedger data) files sampled, spread over the log
RECORDS_PER_FILE = 16     # records read from the start of each sampled file
SAMPLE_BYTES = 1 << 18    # bytes read from the start of each sampled file
_NAME_DIGITS = 20


@dataclass
class Evidence:
    kind: str       # property-separator, crc32-tail, v2-magic, long-topic, checkpoint, abort, folder
    detail: str
    points: str     # "4.x", "5.x" or "either"

    def to_json(self) -> dict:
        return {"kind": self.kind, "detail": self.detail, "points": self.points}


@dataclass
class Generation:
    version: str                      # "4.x", "5.x" or "unknown"
    evidence: list[Evidence] = field(default_factory=list)
    sampled_records: int = 0
    sampled_files: int = 0
    prop_crc: bool = False            # sampled records carry valid __CRC32# tails

    @property
    def mixed(self) -> bool:
        """Signs of both generations (e.g. a 4.9 store a 5.x broker went on writing)."""
        return {e.points for e in self.evidence} >= {G.V4, G.V5}

    @property
    def time_rule(self) -> str:
        """The getOffsetInQueueByTime rule a broker of this generation applies."""
        return "5.x" if self.version == G.V5 else "4.9"

    def to_json(self) -> dict:
        return {"version": self.version, "evidence": [e.to_json() for e in self.evidence],
                "mixed": self.mixed, "sampledRecords": self.sampled_records, "sampledFiles": self.sampled_files,
                "defaults": {"timeLookup": self.time_rule, "enabledAppendPropCRC": self.prop_crc}}

    def summary(self) -> str:
        deciding = [e.detail for e in self.evidence if e.points == self.version]
        return f"{self.version}" + (f" ({deciding[0]})" if deciding else "")


@dataclass
class _Counts:
    with_props: int = 0
    trailing: int = 0
    crc_tails: int = 0
    v2: int = 0
    records: int = 0
    newest: tuple[int, int] = (0, 0)   # (with props, trailing) in the newest sampled file with properties


def _data_files(folder: Path) -> list[Path]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    out = [Path(e.path) for e in entries if len(e.name) == _NAME_DIGITS and e.name.isdigit()
           and e.is_file(follow_symlinks=False)]
    return sorted(out, key=lambda p: int(p.name))


def _spread(files: list[Path], n: int) -> list[Path]:
    if len(files) <= n:
        return files
    step = (len(files) - 1) / (n - 1)
    return [files[round(i * step)] for i in range(n)]


def _read_head(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.pread(fd, SAMPLE_BYTES, 0)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _note(counts: _Counts, buf: bytes, pos: int, total: int, message, per_file: list[int]) -> None:
    counts.records += 1
    if G.is_v2(message.magicCode):
        counts.v2 += 1
    raw = message.propertiesRaw
    sep = G.props_end_with_separator(raw)
    if sep is not None:
        counts.with_props += 1
        per_file[0] += 1
        if sep:
            counts.trailing += 1
            per_file[1] += 1
    if G.has_crc_tail(raw) and verify_prop_crc(buf, pos, total):
        counts.crc_tails += 1


def _sample_commitlog(files: list[Path], counts: _Counts) -> None:
    for path in files:
        buf = _read_head(path)
        base, pos, per_file = int(path.name), 0, [0, 0]
        for _ in range(RECORDS_PER_FILE):
            r = check_record(buf, pos, len(buf), base + pos)
            if r.status is not RecordStatus.MESSAGE:
                break
            _note(counts, buf, pos, r.size, r.message, per_file)
            pos += r.size
        if per_file[0]:
            counts.newest = (per_file[0], per_file[1])


def _sample_dledger(files: list[Path], counts: _Counts) -> None:
    for path in files:
        buf = _read_head(path)
        base, pos, per_file = int(path.name), 0, [0, 0]
        for _ in range(RECORDS_PER_FILE):
            entry = G.dledger_entry(buf, pos)
            if entry is None:
                break
            start, size = entry
            r = check_record(buf, start, min(len(buf), pos + size), base + start)
            if r.status is not RecordStatus.MESSAGE:
                break
            _note(counts, buf, start, r.size, r.message, per_file)
            pos += size
        if per_file[0]:
            counts.newest = (per_file[0], per_file[1])


def _record_evidence(c: _Counts) -> list[Evidence]:
    out = []
    if c.with_props:
        n, t = c.newest
        newest = G.V5 if t * 2 > n else G.V4
        older_n, older_t = c.with_props - n, c.trailing - t
        older = G.V5 if older_t * 2 > older_n else G.V4
        if c.trailing == c.with_props:
            detail = f"all {c.with_props} sampled records end their properties with 0x02 (5.x MessageDecoder)"
        elif c.trailing == 0:
            detail = (f"none of {c.with_props} sampled records ends its properties with 0x02 "
                      "(4.9 puts 0x02 only between pairs)")
        else:
            detail = (f"{c.trailing} of {c.with_props} sampled records end their properties with 0x02; "
                      f"in the newest file sampled {t} of {n} (the newest decide)")
        out.append(Evidence("property-separator", detail, newest))
        if older_n and older != newest:  # a store one generation began and the other went on writing
            form = "5.x" if older == G.V5 else "4.9"
            out.append(Evidence("property-separator", f"the older files sampled are in the {form} form "
                                                      f"({older_t} of {older_n} records end with 0x02)", older))
    if c.crc_tails:
        out.append(Evidence("crc32-tail", f"{c.crc_tails} sampled records end in a valid __CRC32# tail "
                                          "(5.2+ enabledAppendPropCRC)", G.V5))
    if c.v2:
        out.append(Evidence("v2-magic", f"{c.v2} sampled records carry the V2 magic 0xDAA320AB "
                                        "(5.1+, topics over 127 characters)", G.V5))
    return out


def _long_topics(root: Path) -> list[str]:
    out = []
    for sub in ("consumequeue", "batchconsumequeue"):
        try:
            out.extend(e.name for e in os.scandir(root / sub)
                       if e.is_dir(follow_symlinks=False) and len(e.name) > G.TOPIC_MAX_V1)
        except OSError:
            pass
    return out


def _file_evidence(root: Path) -> list[Evidence]:
    out = []
    for rel, what in G.FIVE_X_PATHS.items():
        if (root / rel).exists():
            out.append(Evidence("folder", f"{rel}: {what}", G.V5))
    dledger = sorted(p.name for p in root.glob("dledger-*") if p.is_dir())
    if dledger:
        out.append(Evidence("folder", f"{', '.join(dledger)}: DLedger commitlog (4.5+ and 5.x)", G.EITHER))
    long = _long_topics(root)
    if long:
        out.append(Evidence("long-topic", f"{len(long)} queue folder(s) of topics over {G.TOPIC_MAX_V1} characters "
                                          "(V2 records, 5.1+)", G.V5))
    cp = root / "checkpoint"
    if cp.is_file():
        try:
            with open(cp, "rb") as fh:
                master, confirm = G.checkpoint_extra_fields(fh.read(64))
        except OSError:
            master = confirm = 0
        if master or confirm:
            out.append(Evidence("checkpoint", f"checkpoint fields 4-5 set (masterFlushedOffset {master}, "
                                              f"confirmPhyOffset {confirm}): 5 fields, 5.x", G.V5))
        else:
            out.append(Evidence("checkpoint", "checkpoint fields 4-5 are zero: 3 fields written (4.9), or a 5.x "
                                              "master that never recovered", G.EITHER))
    abort = root / "abort"
    if abort.is_file():
        try:
            with open(abort, "rb") as fh:
                data = fh.read(64)
        except OSError:
            data = b""
        if G.abort_holds_pid(data):
            out.append(Evidence("abort", f"abort holds a PID ({data.strip().decode()}): 5.x writes it", G.V5))
        elif not data:
            out.append(Evidence("abort", "abort is empty: 4.9 creates it empty (5.x writes its PID)", G.V4))
    return out


def detect(root, cfg: StoreConfig | None = None) -> Generation:
    """The generation of the store at `root` (read-only: files are opened O_RDONLY, read in
    bounded slices, never mapped for writing)."""
    root = Path(root)
    dirs = cfg.commitlog_dirs if cfg is not None and cfg.storePathRootDir else [root / "commitlog"]
    files = sorted((f for d in dirs for f in _data_files(d)), key=lambda p: int(p.name))
    counts = _Counts()
    sampled = _spread(files, MAX_FILES)
    _sample_commitlog(sampled, counts)
    dl = [f for d in sorted(root.glob("dledger-*")) for f in _data_files(d / "data")]
    dl_sampled = _spread(dl, MAX_FILES)
    _sample_dledger(dl_sampled, counts)
    evidence = _record_evidence(counts) + _file_evidence(root)
    points = {e.points for e in evidence}
    version = G.V5 if G.V5 in points else G.V4 if G.V4 in points else G.UNKNOWN
    return Generation(version, evidence, counts.records, len(sampled) + len(dl_sampled), counts.crc_tails > 0)


def write_defaults(cfg: StoreConfig, gen: Generation) -> StoreConfig:
    """Appends take the form the store's generation writes, unless a setting says otherwise:
    records of a store whose records carry `__CRC32#` tails get them too (a record without
    one among them reads as damaged), and a 4.x store gets no V2 record (4.9 recovery would
    truncate the log there)."""
    values = {}
    if gen.prop_crc and "enabledAppendPropCRC" not in cfg.explicit:
        values["enabledAppendPropCRC"] = True
    if gen.version == G.V4 and "autoMessageVersionOnTopicLen" not in cfg.explicit:
        values["autoMessageVersionOnTopicLen"] = False
    if not values:
        return cfg
    new = dataclasses.replace(cfg, **values)
    new.explicit, new.detected = set(cfg.explicit), set(cfg.detected)
    new.notes, new.ignored = list(cfg.notes), list(cfg.ignored)
    return new
