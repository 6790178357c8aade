"""What a put answers (RocketMQ's AppendMessageResult as PutMessageResult carries it), and the
store's clock: declared at the bottom layer because the compiled put loop builds them too
(engine/accel imports nothing above engine.format)."""
from __future__ import annotations

import time
from typing import NamedTuple


def wall_clock_ms() -> int:
    """The store's default time source (the demo generator and tests inject their own)."""
    return int(time.time() * 1000)


class PutResult(NamedTuple):
    """What a put returns (a tuple: the compiled put loop builds thousands per second)."""
    status: str                  # PUT_OK (RocketMQ's PutMessageStatus name)
    commitLogOffset: int
    queueOffset: int
    storeTimestamp: int
    msgId: str
    uniqKey: str | None
    topic: str
    queueId: int
    storeSize: int

    def to_json(self) -> dict:
        return self._asdict()
