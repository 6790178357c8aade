"""DLedger's commitlog layout (RocketMQ 4.5+ DLedger mode, DLedger 0.3.x), declared once.

A DLedger store keeps its messages in `dledger-<selfId>/data/`: one *entry* per message, a
48-byte entry header and then the RocketMQ record as the body. Every offset RocketMQ shows
(CQ units, index entries, msgIds) is the entry's position + ENTRY_BODY_OFFSET, a byte address
in the data files that points at the record itself. Big-endian (java.nio.ByteBuffer):

    entry  +0 magic i32 (1) | +4 size i32 (48 + body) | +8 index i64 | +16 term i64
           +24 pos i64 (absolute) | +32 channel i32 | +36 chainCrc i32 | +40 bodyCrc i32
           +44 bodySize i32 | +48 body (the RocketMQ message record)
    blank  +0 -1 i32 | +4 bytes left in the file i32 | zeros     (ends every full data file)
    index  +0 magic i32 | +4 pos i64 | +12 size i32 | +16 index i64 | +24 term i64   (32 bytes,
           one per entry at index * 32 of `dledger-<selfId>/index/`, 5 Mi records a file)

`checkpoint` (endIndex, committedIndex) and `currterm` (currTerm, voteLeader) beside them are
java.util.Properties text, rewritten through a .tmp file with the old content kept as .bak."""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

ENTRY_MAGIC = 1                # DLedgerEntry.MAGIC_1 (CURRENT_MAGIC in 0.3.x)
BLANK_MAGIC = -1               # MmapFileList.BLANK_MAGIC_CODE: the rest of the data file is unused
MIN_BLANK_LEN = 8              # room preAppend keeps after an entry for the blank
ENTRY_HEADER_SIZE = 44         # DLedgerEntry.HEADER_SIZE: everything before bodySize
ENTRY_BODY_OFFSET = 48         # DLedgerEntry.BODY_OFFSET: where the RocketMQ record starts
ENTRY_POS_OFFSET = 24          # DLedgerEntry.POS_OFFSET
INDEX_UNIT_SIZE = 32           # DLedgerMmapFileStore.INDEX_UNIT_SIZE
INDEX_FILE_SIZE = INDEX_UNIT_SIZE * 5 * 1024 * 1024   # 160 MiB, not settable from RocketMQ 4.9

ENTRY_HEADER = struct.Struct(">iiqqqiiii")   # magic size index term pos channel chainCrc bodyCrc bodySize
BLANK_HEAD = struct.Struct(">ii")            # magic (-1), bytes left in the file
INDEX_RECORD = struct.Struct(">iqiqq")       # magic pos size index term
INDEX_DTYPE = np.dtype([("magic", ">i4"), ("pos", ">i8"), ("size", ">i4"), ("index", ">i8"), ("term", ">i8")])
assert ENTRY_HEADER.size == ENTRY_BODY_OFFSET and INDEX_RECORD.size == INDEX_DTYPE.itemsize == INDEX_UNIT_SIZE

DATA_DIR = "data"              # DLedgerConfig.getDataStorePath() default, under the default path
INDEX_DIR = "index"
CHECKPOINT_FILE = "checkpoint"
TERM_FILE = "currterm"
FOLDER_PREFIX = "dledger-"     # DLedgerConfig.getDefaultPath(): <storeBaseDir>/dledger-<selfId>


@dataclass(frozen=True, slots=True)
class EntryHeader:
    magic: int
    size: int
    index: int
    term: int
    pos: int
    channel: int
    chainCrc: int
    bodyCrc: int
    bodySize: int

    @property
    def body_offset(self) -> int:
        """The RocketMQ offset of the message inside this entry."""
        return self.pos + ENTRY_BODY_OFFSET

    def to_json(self) -> dict:
        return {"index": self.index, "term": self.term, "pos": self.pos, "size": self.size, "magic": self.magic,
                "channel": self.channel, "chainCrc": self.chainCrc, "bodyCrc": self.bodyCrc,
                "bodySize": self.bodySize}


def read_entry_header(buf, pos: int) -> EntryHeader:
    return EntryHeader(*ENTRY_HEADER.unpack_from(buf, pos))


@dataclass(frozen=True, slots=True)
class IndexRecord:
    magic: int
    pos: int
    size: int
    index: int
    term: int

    def to_json(self) -> dict:
        return {"magic": self.magic, "pos": self.pos, "size": self.size, "index": self.index, "term": self.term}


def read_index_record(buf, at: int) -> IndexRecord:
    return IndexRecord(*INDEX_RECORD.unpack_from(buf, at))


# ---- the text files -----------------------------------------------------------------------------
def parse_properties_text(text: str) -> dict[str, str]:
    """IOUtils.string2Properties: `key=value` lines (also `key: value`), # and ! comments.
    Enough of java.util.Properties for what DLedger writes (no escapes, no continuations)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        seps = [i for i in (line.find("="), line.find(":")) if i >= 0]
        if not seps:
            out[line] = ""
            continue
        k = min(seps)
        out[line[:k].strip()] = line[k + 1:].strip()
    return out


def _int(values: dict, key: str, default: int = -1) -> int | None:
    raw = values.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        return None


@dataclass
class LedgerCheckpoint:
    """dledger-<id>/checkpoint: the ledger end and committed index at its last write (every
    3 s and at shutdown, so up to 3 s behind after a crash); -1 where a key is missing,
    None where its value is not a number."""
    endIndex: int | None = -1
    committedIndex: int | None = -1

    @classmethod
    def parse(cls, text: str) -> "LedgerCheckpoint":
        v = parse_properties_text(text)
        return cls(_int(v, "endIndex"), _int(v, "committedIndex"))


@dataclass
class TermFile:
    """dledger-<id>/currterm: the member's current term and whom it voted for."""
    currTerm: int | None = 0
    voteLeader: str | None = None

    @classmethod
    def parse(cls, text: str) -> "TermFile":
        v = parse_properties_text(text)
        return cls(_int(v, "currTerm", 0), v.get("voteLeader") or None)


# ---- the entry walker (the scans' counterpart of engine.format.record.hop) ----------------------
_HEAD2 = struct.Struct(">ii")
_POS = struct.Struct(">q")


def hop_entries(buf, pos: int, end: int, limit: int, file_from: int, max_records: int = 1 << 16,
                max_bytes: int = 1 << 25):
    """The messages of the DLedger entries starting in [pos, end) of one data file whose data
    ends at `limit`: `starts` are the message positions (entry + 48), `next_pos` the next
    entry. Stops with "blank" at the -1 blank or the end of data (size 0), "invalid" at a
    header that cannot be an entry (magic, size, pos field), like the DLedger recovery."""
    from array import array

    from engine.format.record import Hop
    starts = array("q")
    first, n, stop = pos, 0, ""
    while True:
        if pos >= end:
            stop = "end"
            break
        if limit - pos < BLANK_HEAD.size:
            stop = "blank"
            break
        magic, size = _HEAD2.unpack_from(buf, pos)
        if magic == BLANK_MAGIC or size == 0:
            stop = "blank"
            break
        if (magic != ENTRY_MAGIC or size <= ENTRY_BODY_OFFSET or size > limit - pos
                or _POS.unpack_from(buf, pos + ENTRY_POS_OFFSET)[0] != file_from + pos):
            stop = "invalid"
            break
        starts.append(pos + ENTRY_BODY_OFFSET)
        pos += size
        n += 1
        if n >= max_records or pos - first >= max_bytes:
            if pos >= end:
                stop = "end"
            break
    return Hop(np.frombuffer(starts, dtype=np.int64) if n else np.empty(0, np.int64), pos, stop)
