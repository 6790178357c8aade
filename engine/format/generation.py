"""What in a store's bytes tells the RocketMQ generation that wrote it (docs/formats/generation.md).

Each rule reads one thing a 4.9 broker never writes, or always writes differently:
- the property string: 5.x's MessageDecoder ends every pair with 0x02, the last one too;
  4.9 separates pairs, so its string ends with the last value (STORE_FORMAT §3.5);
- the `__CRC32#` tail (5.2+, enabledAppendPropCRC): 20 bytes ending the properties;
- the V2 magic (5.1+, topics over 127 characters): 4.9 reads it as corruption;
- the checkpoint's fourth and fifth fields (masterFlushedOffset 5.0+, confirmPhyOffset 5.1.1+):
  4.9 writes three, so bytes 24-39 are zero (a 5.x master that never recovered leaves them 0 too);
- the abort file: 5.x writes its PID into it (and leaves abort.bak), 4.9 leaves it empty.
The DLedger entry header (engine/format/dledger_layout.py) is used only to reach the message
inside an entry for sampling (STORE_FORMAT_DLEDGER §2)."""
from __future__ import annotations

from engine.format.checkpoint_layout import CHECKPOINT_FIELDS
from engine.format.dledger_layout import BLANK_HEAD, BLANK_MAGIC, ENTRY_BODY_OFFSET
from engine.format.properties import PROPERTY_SEPARATOR
from engine.format.record import MESSAGE_MAGIC_V2, PROP_CRC_TAIL_SIZE

V4, V5, UNKNOWN = "4.x", "5.x", "unknown"
EITHER = "either"  # evidence that fits both generations (shown, decides nothing)

TOPIC_MAX_V1 = 127  # longer topics need a V2 record: only 5.1+ writes them

# layout folders and files under the store root that only a 5.x store has
FIVE_X_PATHS = {
    "timerlog": "timer store log (TimerMessageStore, 5.x)",
    "timerwheel": "timer wheel (TimerMessageStore, 5.x)",
    "config/timercheck": "timer checkpoint (5.x)",
    "batchconsumequeue": "BatchConsumeQueue folder (5.x BatchCQ topics)",
    "consumequeue/CURRENT": "ConsumeQueue kept in RocksDB (5.x storeType=defaultRocksDB)",
    "compaction": "compacted-topic store (5.x)",
    "abort.bak": "left by 5.x, which writes its PID into abort through a .bak",
    "config/rdb": "broker metadata in RocksDB (5.x)",
}

# DLedger data entries (STORE_FORMAT_DLEDGER §2): the message record starts 48 bytes in
DLEDGER_ENTRY_HEADER = ENTRY_BODY_OFFSET


def props_end_with_separator(raw_props: str) -> bool | None:
    """True: the 5.x form (a trailing 0x02); False: 4.9's; None: no properties to tell by."""
    if not raw_props:
        return None
    return raw_props.endswith(PROPERTY_SEPARATOR)


def has_crc_tail(raw_props: str) -> bool:
    """The properties end in `__CRC32#` 0x01 <10 digits> 0x02 (whether the CRC matches is
    format.message.verify_prop_crc's question)."""
    tail = raw_props[-PROP_CRC_TAIL_SIZE:]
    return len(tail) == PROP_CRC_TAIL_SIZE and tail.startswith("__CRC32#\x01") and tail.endswith("\x02") \
        and tail[9:19].isdigit()


def is_v2(magic: int) -> bool:
    return magic == MESSAGE_MAGIC_V2


def checkpoint_extra_fields(data: bytes) -> tuple[int, int]:
    """(masterFlushedOffset, confirmPhyOffset): the fields 4.9 does not write."""
    values = CHECKPOINT_FIELDS.unpack(data[:CHECKPOINT_FIELDS.size].ljust(CHECKPOINT_FIELDS.size, b"\0"))
    return values[3], values[4]


def abort_holds_pid(data: bytes) -> bool:
    """5.x writes the broker's PID (decimal text) into `abort`; 4.9 creates it empty."""
    text = data.strip()
    return bool(text) and text.isdigit()


def dledger_entry(buf: bytes, pos: int) -> tuple[int, int] | None:
    """(message start, entry size) of the DLedger entry at pos, or None at a blank or the end."""
    if pos + DLEDGER_ENTRY_HEADER > len(buf):
        return None
    magic, size = BLANK_HEAD.unpack_from(buf, pos)  # an entry starts magic, size as a blank does
    if magic == BLANK_MAGIC or size <= DLEDGER_ENTRY_HEADER:
        return None
    return pos + DLEDGER_ENTRY_HEADER, size
