"""The checkpoint file's layout, declared once: one 4096-byte page whose first fields are
big-endian i64 store times (3 in 4.9, 5 in 5.1.1+; the rest zero)."""
from __future__ import annotations

import struct

CHECKPOINT_SIZE = 4096
CHECKPOINT_FIELDS = struct.Struct(">qqqqq")  # physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp,
#                                              masterFlushedOffset, confirmPhyOffset
