"""The byte layouts of RocketMQ 5.x compacted topics (`store/kv`: CompactionStore,
CompactionLog, SparseConsumeQueue), declared once. docs/formats/compaction.md explains them.

    <storePathRootDir>/compaction/compactionLog/<topic>/<queueId>/<20-digit fileFromOffset>
    <storePathRootDir>/compaction/compactionCq/<topic>/<queueId>/<same name as its log file>
    <storePathRootDir>/compaction/position-checkpoint     fastjson: {"empty":..,"queueOffsetMap":{"<topic>_<q>":offset}}

A compaction-log record is the CommitLog record copied verbatim except PHYSICALOFFSET, which
holds the record's own offset in the compaction log (CompactionLog.java:866-873). A log file
ends with `maxBlank i32 | BLANK_MAGIC i32` or, after a compaction, simply with zeros."""
from __future__ import annotations

from engine.format.batch_cq_unit import BATCH_CQ_UNIT_DTYPE, BATCH_CQ_UNIT_SIZE
from engine.format.record import BLANK_MAGIC  # noqa: F401 - the end-of-file marker, as in the CommitLog

COMPACTION_DIR = "compaction"
LOG_DIR = "compactionLog"
CQ_DIR = "compactionCq"
CHECKPOINT_FILE = "position-checkpoint"
COMPACTING_DIR = "compacting"            # a queue's swap folder while a compaction runs (CompactionLog.java:76)
CLEANUP_POLICY = "cleanup.policy"        # the topic attribute (TopicAttributes.CLEANUP_POLICY_ATTRIBUTE)
COMPACTION = "COMPACTION"

# the compactionCq unit is BatchConsumeQueue's 46-byte unit (SparseConsumeQueue extends it;
# BatchConsumeQueue.java:63,578-585), its commitLogOffset a compaction-log offset
CQ_UNIT_DTYPE, CQ_UNIT_SIZE = BATCH_CQ_UNIT_DTYPE, BATCH_CQ_UNIT_SIZE
END_UNIT_OFFSET = -1                     # SparseConsumeQueue's end unit: its log file was ended by the marker


def cleanup_policy(topic_config: dict | None) -> str | None:
    """A topic's cleanup.policy from its topics.json entry (attributes are stored with a
    leading '+' by updateTopic, bare by some writers); None when it says nothing."""
    attrs = (topic_config or {}).get("attributes") or {}
    if not isinstance(attrs, dict):
        return None
    for k in (CLEANUP_POLICY, "+" + CLEANUP_POLICY):
        if isinstance(attrs.get(k), str):
            return attrs[k].upper()
    return None
