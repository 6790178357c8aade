"""Analysis of a store's files: segment fill, ConsumeQueue series, index chains and their
collisions, and `check`. Read-only and Qt-free; the GUI's internals views and the CLI's
`slots`, `chain` and `fill` commands are built on it. The names below are the public ones."""
from .check import CheckCancelled, check_store, check_task
from .chains import (ChainHistogram, SlotStats, bin_slots, chain_census, chain_cycles, chain_histogram,
                     chain_lengths, chain_lengths_numpy, longest_slot_in, poisson_expected, slot_stats,
                     slots_used_per_bin)
from .collisions import (COLLISION, MATCH, SAME_KEY, SHARES_SLOT, UNRESOLVED, ChainResolution, ResolvedEntry,
                         resolve_chain)
from .commitlog_fill import CommitLogFileFill, CommitLogFillCache, commitlog_fill, commitlog_fill_task
from .diff import StoreDiff, compare_task, diff_task
from .fill import (FillProgress, IndexFill, QueueFileFill, StoreFill, index_fill, queue_file_fill, store_fill,
                   store_fill_task)
from .segments import (BLANK, CATEGORY_NAMES, DAMAGED, ENTRY_HEADER, FILLER, FREE, RESERVED, SLOTS, USED, Segments,
                       run_length)
from .series import QueueSeries, queue_series, store_times

__all__ = [
    "CheckCancelled", "check_store", "check_task",
    "ChainHistogram", "SlotStats", "bin_slots", "chain_census", "chain_cycles", "chain_histogram", "chain_lengths",
    "chain_lengths_numpy", "longest_slot_in", "poisson_expected", "slot_stats", "slots_used_per_bin",
    "COLLISION", "MATCH", "SAME_KEY", "SHARES_SLOT", "UNRESOLVED", "ChainResolution", "ResolvedEntry", "resolve_chain",
    "CommitLogFileFill", "CommitLogFillCache", "commitlog_fill", "commitlog_fill_task",
    "StoreDiff", "compare_task", "diff_task",
    "FillProgress", "IndexFill", "QueueFileFill", "StoreFill", "index_fill", "queue_file_fill", "store_fill", "store_fill_task",
    "BLANK", "CATEGORY_NAMES", "DAMAGED", "ENTRY_HEADER", "FILLER", "FREE", "RESERVED", "SLOTS", "USED", "Segments", "run_length",
    "QueueSeries", "queue_series", "store_times",
]
