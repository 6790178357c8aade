"""rmqstore engine: a RocketMQ message store in Python (numpy + mmap), with optional compiled
fast paths (engine/accel). No Qt here."""
import os as _os

# numpy's OpenBLAS starts a thread per core that spins between calls; the store never uses BLAS,
# and on a small machine that spinning thread takes the core the writer and the kernel need
# (seen in profiles: 9-16% of samples). Only when numpy is not imported yet and not configured.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from engine.config import StoreConfig
from engine.errors import (ConfigError, CorruptDataError, MessageRejectedError, NotAStoreError,
                     ReadOnlyStoreError, StoreError, StoreFullError, StoreLockedError)
from engine.format.message import Message
from engine.store.message_store import GetMessageResult, MessageStore, QueryResult
from engine.store.demo import demo_task, ensure_demo_task  # File > New Demo Store; the first-run store
from engine.store.tiered import TieredStore, is_tier_folder  # a tier folder opened on its own
from engine.store.tiered_view import StoreWithTier, parse_level as parse_tier_level  # a store with its tier
from engine.store.compaction import (compaction_of, key_summary, key_summary_task, mark_compacted,  # compacted
                                     open_compaction)                                               # topics' view
from engine.store.page import WHY_EXPIRED, WHY_FILLER, WHY_INVALID  # getMessage's reasons for a skipped unit

__version__ = "0.1.0"
__all__ = ["MessageStore", "StoreConfig", "Message", "GetMessageResult", "QueryResult", "StoreError",
           "NotAStoreError", "ConfigError", "CorruptDataError", "StoreLockedError", "ReadOnlyStoreError",
           "MessageRejectedError", "StoreFullError", "WHY_FILLER", "WHY_EXPIRED", "WHY_INVALID", "ensure_demo_task",
           "demo_task", "TieredStore", "is_tier_folder", "open_compaction", "key_summary", "key_summary_task",
           "compaction_of", "mark_compacted", "StoreWithTier", "parse_tier_level",
           "__version__"]
