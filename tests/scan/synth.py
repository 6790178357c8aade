"""A synthetic store of any size, written fast with numpy (for split and throughput tests):
one record template from engine.format.message.encode_record, tiled, with per-record fields patched
in place (queue id/offset, physical offset, times, KEYS, UNIQ_KEY, TAGS). Every record has
the same length; every commitlog file ends with a BLANK; ConsumeQueues are written too."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from engine.store.consume_queue import CQ_UNIT_DTYPE
from engine.format.javahash import tags_code
from engine.format.message import BLANK_MAGIC, MessageDraft, encode_record

TOPICS = ["BenchTopicA", "BenchTopicB", "BenchTopicC", "BenchTopicD"]   # equal lengths
QUEUES = 4
T0 = 1_795_000_000_000


def _digits(values: np.ndarray, width: int, base: int) -> np.ndarray:
    """(n, width) ASCII digits of `values`, most significant first."""
    out = np.empty((len(values), width), dtype=np.uint8)
    v = values.astype(np.uint64)
    alphabet = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
    for j in range(width - 1, -1, -1):
        out[:, j] = alphabet[(v % base).astype(np.int64)]
        v //= base
    return out


def make_store(root: Path, messages: int, file_size: int = 64 << 20, body_size: int = 1000,
               cq_file_size: int = 300_000 * 20, ms_per_message: float = 0.01) -> dict:
    """Write a store of `messages` records under `root`; returns facts for assertions."""
    root = Path(root)
    (root / "commitlog").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    body = rng.integers(0, 256, body_size, dtype=np.uint8).tobytes()
    props = {"KEYS": "k-00000000", "UNIQ_KEY": "0" * 32, "TAGS": "TagA"}
    rec = bytes(encode_record(MessageDraft(topic=TOPICS[0], body=body, properties=props)).data)
    length = len(rec)
    key_at = rec.index(b"k-00000000") + 2
    uniq_at = rec.index(b"0" * 32)
    tag_at = rec.index(b"TagA") + 3
    topic_at = rec.index(TOPICS[0].encode()) + len(TOPICS[0]) - 1
    per_file = (file_size - 8) // length
    template = np.frombuffer(rec, dtype=np.uint8)
    tag_codes = {c: tags_code("Tag" + c) for c in "AB"}
    cq: dict[tuple[int, int], list[np.ndarray]] = {}
    i0, file_no = 0, 0
    while i0 < messages:
        n = min(per_file, messages - i0)
        idx = np.arange(i0, i0 + n, dtype=np.int64)
        buf = np.tile(template, n).reshape(n, length)
        topic_no = idx % len(TOPICS)
        qid = (idx // len(TOPICS)) % QUEUES
        qoff = idx // (len(TOPICS) * QUEUES)
        start = file_no * file_size
        phys = start + (idx - i0) * length
        ts = T0 + (idx * ms_per_message).astype(np.int64)
        buf[:, topic_at] = np.frombuffer(b"ABCD", dtype=np.uint8)[topic_no]
        buf[:, 12:16] = qid.astype(">i4").view(np.uint8).reshape(n, 4)
        buf[:, 20:28] = qoff.astype(">i8").view(np.uint8).reshape(n, 8)
        buf[:, 28:36] = phys.astype(">i8").view(np.uint8).reshape(n, 8)
        buf[:, 40:48] = (ts - 5).astype(">i8").view(np.uint8).reshape(n, 8)
        buf[:, 56:64] = ts.astype(">i8").view(np.uint8).reshape(n, 8)
        buf[:, key_at:key_at + 8] = _digits(idx, 8, 10)
        buf[:, uniq_at:uniq_at + 32] = _digits(idx, 32, 16)
        tag = np.where(idx % 3 == 0, ord("B"), ord("A")).astype(np.uint8)
        buf[:, tag_at] = tag
        data = np.zeros(file_size, dtype=np.uint8)
        data[:n * length] = buf.ravel()
        if n == per_file:  # full file: BLANK at the end
            struct.pack_into(">ii", data, n * length, file_size - n * length, BLANK_MAGIC)
        data.tofile(root / "commitlog" / f"{start:020d}")
        units = np.empty(n, dtype=CQ_UNIT_DTYPE)
        units["commitLogOffset"] = phys
        units["size"] = length
        units["tagsCode"] = np.where(tag == ord("B"), tag_codes["B"], tag_codes["A"])
        for t in range(len(TOPICS)):
            for q in range(QUEUES):
                sel = (topic_no == t) & (qid == q)
                if sel.any():
                    cq.setdefault((t, q), []).append(units[sel])
        i0 += n
        file_no += 1
    per_cq = cq_file_size // 20
    for (t, q), parts in cq.items():
        units = np.concatenate(parts)
        d = root / "consumequeue" / TOPICS[t] / str(q)
        d.mkdir(parents=True, exist_ok=True)
        for k in range(0, len(units), per_cq):
            data = np.zeros(per_cq, dtype=CQ_UNIT_DTYPE)
            chunk = units[k:k + per_cq]
            data[:len(chunk)] = chunk
            data.tofile(d / f"{k * 20:020d}")
    return {"messages": messages, "record_size": length, "per_file": per_file, "files": file_no,
            "bytes": messages * length}
