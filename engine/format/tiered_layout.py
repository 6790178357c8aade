"""The byte layouts of RocketMQ 5.x tiered storage (`tieredstore`, POSIX provider), declared
once. Sources are the 5.3.3 tree; docs/formats/tiered.md explains what differs from the
classic store.

Folders (PosixFileSegment.java:71-75, MessageStoreUtil.java:30,64-100):
    <tieredStoreFilePath>/<md5(cluster)[0:8]>_<cluster>/<broker>/<topic>/<queueId>/COMMIT_LOG|CONSUME_QUEUE/<seg>
    <tieredStoreFilePath>/<md5(cluster)[0:8]>_<cluster>/<broker>/rmq_sys_INDEX/0/INDEX/<seg>
    <seg> = md5(str(base))[0:8] + base as 20 digits; base is a byte offset in the flat file.

COMMIT_LOG segments hold CommitLog records back to back (no blank or end record) whose
PHYSICALOFFSET field is rewritten to the record's offset in the queue's tiered commit log.
CONSUME_QUEUE segments hold 20-byte units (tiered commit-log offset, size, tagsCode).
INDEX segments hold one compacted index file each (IndexStoreFile.java:66-80,418-448)."""
from __future__ import annotations

import hashlib
import json
import re
import struct

from engine.format.cq_unit import CQ_UNIT, CQ_UNIT_SIZE  # noqa: F401 - the tier's CQ unit
from engine.format.index_layout import slot_of  # noqa: F401 - the tier's slots follow the classic rule
from engine.format.javahash import java_hash

COMMIT_LOG, CONSUME_QUEUE, INDEX = "COMMIT_LOG", "CONSUME_QUEUE", "INDEX"   # FileSegmentType names
SEGMENT_TYPES = {0: COMMIT_LOG, 1: CONSUME_QUEUE, 2: INDEX}                 # metadata "type" codes
INDEX_TOPIC = "rmq_sys_INDEX"            # MessageStoreUtil.java:30: the index flat file's "topic"
METADATA_FILE = "tieredStoreMetadata.json"   # <storePathRootDir>/config/ (DefaultMetadataStore)
# MessageStoreTopicFilter: topics always read from the local store (TopicValidator.SYSTEM_TOPIC_SET,
# the rmq_sys_ prefix, the pop revive prefix, LMQs)
SYSTEM_TOPICS = frozenset({"TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
                           "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
                           "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC"})
SYSTEM_TOPIC_PREFIXES = ("rmq_sys_", "%LMQ%")   # rmq_sys_REVIVE_LOG_ (revive) is under rmq_sys_

# CONSUME_QUEUE units are the classic 20-byte unit (commitLogOffset, here the tiered one | size |
# tagsCode; MessageFormatUtil.java:54)

INDEX_HEADER = struct.Struct(">iqqii")   # magic | beginTimestamp | endTimestamp | hashSlotCount | indexItemCount
INDEX_HEADER_SIZE = INDEX_HEADER.size    # 28
INDEX_SLOT = struct.Struct(">ii")        # itemStart (absolute position) | itemsLength (bytes)
INDEX_SLOT_SIZE = INDEX_SLOT.size        # 8
INDEX_ITEM = struct.Struct(">iiiqii")    # hashCode | topicId | queueId | offset | size | timeDiff (s)
INDEX_ITEM_SIZE = INDEX_ITEM.size        # 28: the compacted item (the local form adds a 4-byte next index)
MAX_ITEMS_READ = 28 * 1024               # queryAsyncFromSegmentFile reads at most this many bytes per slot

# The local, unsealed index a running broker writes before compacting it to an INDEX segment:
# <storePathRootDir>/tiered_index_file/<beginTimestamp> (IndexStoreService.java:56,121-141;
# IndexStoreFile.java:66-80,101-112,190-230). The same 28-byte header; hashSlotMaxCount slots of
# 8 bytes whose first int is the newest item's index (0: empty); items of 32 bytes from index 1:
# the compacted item then the index of the item before it in the slot's chain (0: the end).
# File size = 28 + 8 x hashSlotMaxCount + 32 x indexItemMaxCount (neither count is stored).
LOCAL_INDEX_DIR = "tiered_index_file"
LOCAL_INDEX_ITEM = struct.Struct(">iiiqiii")   # INDEX_ITEM's fields | itemIndex (previous in the chain)
LOCAL_INDEX_ITEM_SIZE = LOCAL_INDEX_ITEM.size  # 32
LOCAL_SLOT = struct.Struct(">i")               # the newest item's index, in an 8-byte slot
LOCAL_MAX_QUERY = 512                          # queryAsyncFromUnsealedFile walks at most this many items
DEFAULT_INDEX_SLOTS = 5_000_000                # tieredStoreIndexFileMaxHashSlotNum (default)
DEFAULT_INDEX_ITEMS = 5_000_000 * 4            # tieredStoreIndexFileMaxIndexNum (default)


def local_index_size(slots: int, items: int) -> int:
    """The mapped size of a local index file (getItemPosition(indexItemMaxCount))."""
    return INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE + items * LOCAL_INDEX_ITEM_SIZE


def local_item_position(slots: int, index: int) -> int:
    return INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE + index * LOCAL_INDEX_ITEM_SIZE


def _i32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


BEGIN_MAGIC = _i32(0xCCDDEEFF ^ (1880681586 + 4))   # Java precedence: ^ binds after +
END_MAGIC = _i32(0xCCDDEEFF ^ (1880681586 + 8))     # a sealed (compacted, uploaded) index file

_SEGMENT_RE = re.compile(r"([0-9a-f]{8})(\d{20})\Z")


def md5_prefix(text: str) -> str:
    """MessageStoreUtil.getHash: the first 8 lower-case hex digits of MD5(UTF-8)."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()[:8]


def cluster_folder(cluster: str) -> str:
    return f"{md5_prefix(cluster)}_{cluster}"


def parse_cluster_folder(name: str) -> str | None:
    """The cluster name of a `<md5(cluster)[0:8]>_<cluster>` folder, None if the prefix does not
    match (then it is not a tier's cluster folder)."""
    if len(name) > 9 and name[8] == "_" and md5_prefix(name[9:]) == name[:8]:
        return name[9:]
    return None


def segment_name(base: int) -> str:
    return f"{md5_prefix(str(base))}{base:020d}"


def parse_segment_name(name: str) -> int | None:
    """A segment's base offset from its file name; None for a name the provider never writes
    (the hash prefix must match too, as a tier may sit beside other files)."""
    m = _SEGMENT_RE.match(name)
    if m is None:
        return None
    base = int(m.group(2))
    return base if md5_prefix(str(base)) == m.group(1) else None


def tiered_key_hash(topic: str, key: str) -> int:
    """IndexStoreFile.hashCode(buildKey): abs(("topic#key").hashCode()); Integer.MIN_VALUE
    stays negative there (no slot: the broker's lookup fails and answers nothing)."""
    h = java_hash(f"{topic}#{key}")
    return -h if h < 0 and h != -(1 << 31) else h


def slot_count(file_size: int, item_count: int, first_item_start: int | None = None) -> int | None:
    """hashSlotMaxCount of a compacted index file. It is not stored: the compaction writes every
    slot, empty ones too, with the position items start from, so slot 0's itemStart is
    28 + 8 x slots (IndexStoreFile.compactToNewFile); else it is what the file's size leaves
    after the header and the items. None when neither gives a whole number of slots."""
    if first_item_start is not None:
        rest = first_item_start - INDEX_HEADER_SIZE
        if rest > 0 and rest % INDEX_SLOT_SIZE == 0 and first_item_start <= file_size:
            return rest // INDEX_SLOT_SIZE
    rest = file_size - INDEX_HEADER_SIZE - INDEX_ITEM_SIZE * item_count
    if rest <= 0 or rest % INDEX_SLOT_SIZE:
        return None
    return rest // INDEX_SLOT_SIZE


# fastjson writes map keys that are not Strings bare (`0:{...}`): quote them for json.loads
_BARE_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


def load_fastjson(text: str):
    """fastjson's (PrettyFormat) JSON, read tolerantly: bare numeric keys quoted, trailing
    commas dropped. Raises ValueError when it still is not JSON."""
    fixed = _BARE_KEY.sub(r'\1"\2"\3', text)
    fixed = re.sub(r",(\s*[}\]])", r"\1", fixed)
    return json.loads(fixed)
