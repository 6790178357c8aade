"""Columnar decoding of commitlog records for bulk scans.

A scan first *hops* from record to record reading only TOTALSIZE and MAGICCODE (8 bytes per
record, the one inherently sequential step: engine.format.record.hop), then gathers every other
field for a whole block of record starts at once with numpy fancy indexing, and decodes the
variable-length fields (topic, body, properties) only when a job asks for them. The byte layout
is engine/format/record.py's.

Classification follows `engine.format.message.check_record` (STORE_FORMAT §5): a record whose fields
disagree with TOTALSIZE is skipped by its size (SIZE_MISMATCH) and the hop goes on; a record
with an impossible topic length ends the slice (INVALID), like the end of valid data."""
from __future__ import annotations

import re

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from engine.format import properties as P
from engine.format.javahash import index_key_hash, tags_code
from engine.format.body_decode import decode_body
from engine.format.text import HEX
from engine.format.message import COMPRESSED_FLAG, SCHEDULE_TOPIC, TRANSACTION_NAMES, decompress_body, format_host
from engine.format.record import (HEAD_SIZE, MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2, OFF_BODY, OFF_BODYLENGTH, OFF_BORNHOST,
                                  OFF_PREPAREDTXOFFSET, OFF_RECONSUMETIMES, OFF_STOREHOST, OFF_STORETIMESTAMP,
                                  RECORD_FIXED, Hop, hop, host_sizes, record_sizes)

HEAD_DTYPE = np.dtype([
    ("totalSize", ">i4"),             # whole record length
    ("magicCode", ">i4"),             # V1 0xDAA320A7, V2 0xDAA320AB, BLANK 0xCBD43194
    ("bodyCRC", ">i4"),               # crc32(body) & 0x7FFFFFFF
    ("queueId", ">i4"),
    ("flag", ">i4"),
    ("queueOffset", ">i8"),           # 0 for PREPARED / ROLLBACK
    ("physicalOffsetField", ">i8"),   # PHYSICALOFFSET as written
    ("sysFlag", ">i4"),
    ("bornTimestamp", ">i8"),
])
assert HEAD_DTYPE.itemsize == HEAD_SIZE
_INT_RE = re.compile(r"[+-]?\d+\Z")

# Every column a message row can have, with a type name the Arrow/Spark layers map.
# Names are RocketMQ's (MessageExt), plus keyList (KEYS split like the index does).
MESSAGE_COLUMNS: list[tuple[str, str]] = [
    ("topic", "string"), ("queueId", "int"), ("queueOffset", "long"), ("commitLogOffset", "long"),
    ("storeSize", "int"), ("bodyCRC", "int"), ("flag", "int"), ("sysFlag", "int"),
    ("bornTimestamp", "long"), ("bornHost", "string"), ("storeTimestamp", "long"), ("storeHost", "string"),
    ("reconsumeTimes", "int"), ("preparedTransactionOffset", "long"), ("body", "binary"),
    ("properties", "map"), ("msgId", "string"), ("uniqKey", "string"), ("tags", "string"),
    ("keys", "string"), ("keyList", "array"), ("tagsCode", "long"), ("transactionType", "string"),
    ("magicCode", "int"), ("physicalOffsetField", "long"), ("bodyLength", "int"), ("bodyDecoded", "bool"),
]
MESSAGE_COLUMN_NAMES = [n for n, _ in MESSAGE_COLUMNS]
# Selectable on request only: what dispatch puts into the index for the record (nothing for
# ROLLBACK): the "topic#key" strings (UNIQ_KEY first, then each KEYS token) and their keyHash.
EXTRA_COLUMNS: list[tuple[str, str]] = [("indexKeys", "array"), ("indexKeyHashes", "intarray")]
COLUMN_KINDS = dict(MESSAGE_COLUMNS + EXTRA_COLUMNS)


def hop_assisted(buf, u8: np.ndarray, pos: int, end: int, limit: int, cands: np.ndarray,
                 max_records: int = 1 << 16, max_bytes: int = 1 << 25) -> Hop:
    """`hop`, sped up by known record starts `cands` (sorted positions, e.g. from the
    ConsumeQueues): wherever the chain lands on a candidate, it runs along the following
    candidates in one vectorised step for as long as each one's TOTALSIZE leads exactly to
    the next and its header passes hop's checks; elsewhere it hops record by record. The
    result is exactly `hop`'s: a candidate is used only when the chain reaches it."""
    c = cands[(cands >= pos) & (cands < end)]
    m = len(c)
    if m == 0:
        return hop(buf, pos, end, limit, max_records, max_bytes)
    total = _take(u8, c, ">i4")
    magic = _take(u8, c + 4, ">i4")
    ok = (((magic == MESSAGE_MAGIC_V1) | (magic == MESSAGE_MAGIC_V2)) & (limit - c >= 8) & (total > 0)
          & (total <= limit - c))
    link = ok[:-1] & (c[:-1] + total[:-1] == c[1:])
    breaks = np.append(np.flatnonzero(~link), m - 1)
    out: list[np.ndarray] = []
    count, first = 0, pos
    stop = ""
    while True:
        if pos >= end:
            stop = "end"
            break
        if count >= max_records or pos - first >= max_bytes:
            break
        i = int(np.searchsorted(c, pos))
        if i < m and c[i] == pos and ok[i]:
            j = int(breaks[np.searchsorted(breaks, i)])     # c[i..j] chain; c[j] is fine (ok)
            room = max_records - count
            cum = np.cumsum(total[i:j + 1])
            n = min(j + 1 - i, room, max(1, int(np.searchsorted(cum, max_bytes - (pos - first), side="right"))))
            out.append(c[i:i + n])
            count += n
            pos = int(c[i + n - 1] + total[i + n - 1])
            continue
        nxt = c[i] if i < m and c[i] > pos else (c[i + 1] if i + 1 < m else end)
        h = hop(buf, pos, min(int(nxt), end), limit, max_records - count, max_bytes - (pos - first))
        if len(h.starts):
            out.append(h.starts)
            count += len(h.starts)
        pos = h.next_pos
        if h.stop in ("blank", "invalid"):
            stop = h.stop
            break
        if h.stop == "":
            break   # the block is full
    starts = np.concatenate(out) if out else np.empty(0, np.int64)
    if stop == "" and pos >= end:
        stop = "end"
    return Hop(starts.astype(np.int64, copy=False), pos, stop)


def _rows(u8: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """(n, width) copy of the bytes at each position: fancy indexing of a sliding-window
    view, so no (n, width) index array is built."""
    return sliding_window_view(u8, width)[pos]


def _take(u8: np.ndarray, pos: np.ndarray, dtype: str) -> np.ndarray:
    """Big-endian scalar at each position (positions clipped into the file; validity is
    decided by the caller), as a native int64 array."""
    w = np.dtype(dtype).itemsize
    pos = np.clip(pos, 0, len(u8) - w)
    return _rows(u8, pos, w).view(dtype).ravel().astype(np.int64)


class RecordBlock:
    """Valid message records of one file: fixed fields as numpy arrays (eager, vectorised),
    variable fields decoded on first use. `select(mask)` keeps a subset."""

    def __init__(self, u8: np.ndarray, file_from_offset: int, starts: np.ndarray, arrays: dict[str, np.ndarray],
                 delay_level_millis: list[int]):
        self.u8 = u8
        self.file_from_offset = file_from_offset
        self.starts = starts
        self.a = arrays
        self.delays = delay_level_millis
        self._cache: dict[str, object] = {}
        self.origin: tuple[str, str] | None = None   # (broker, store path) when a scan set it

    def __len__(self) -> int:
        return len(self.starts)

    # ---- construction ----------------------------------------------------------------
    @classmethod
    def decode(cls, u8: np.ndarray, file_from_offset: int, starts: np.ndarray,
               delay_level_millis: list[int]) -> tuple["RecordBlock", int, int | None]:
        """(block of valid messages, number of SIZE_MISMATCH records skipped, index into
        `starts` of the first INVALID record or None)."""
        n = len(starts)
        if n == 0:
            return cls(u8, file_from_offset, starts, {}, delay_level_millis), 0, None
        head = _rows(u8, starts, HEAD_SIZE).view(HEAD_DTYPE).ravel()
        a = {name: head[name].astype(np.int64) for name in HEAD_DTYPE.names}
        sysflag = a["sysFlag"]
        bh, sh = host_sizes(sysflag)
        tls = np.where(a["magicCode"] == MESSAGE_MAGIC_V2, 2, 1)
        total = a["totalSize"]
        end = starts + total
        a["storeTimestamp"] = _take(u8, starts + OFF_STORETIMESTAMP + bh, ">i8")
        hosts = starts + bh + sh
        a["reconsumeTimes"] = _take(u8, hosts + OFF_RECONSUMETIMES, ">i4")
        a["preparedTransactionOffset"] = _take(u8, hosts + OFF_PREPAREDTXOFFSET, ">i8")
        body_pos = hosts + OFF_BODY
        body_len = _take(u8, hosts + OFF_BODYLENGTH, ">i4")
        tpos = body_pos + np.maximum(body_len, 0)
        t1 = _take(u8, tpos, ">i1")
        t2 = _take(u8, tpos, ">i2")
        topic_len = np.where(tls == 1, t1, t2)
        topic_pos = tpos + tls
        ppos = topic_pos + topic_len
        prop_len = _take(u8, ppos, ">i2")
        expected = record_sizes(bh, sh, body_len, tls, topic_len, prop_len)
        # check_record's order: body past the record -> mismatch; bad topic -> invalid; ...
        too_short = total < RECORD_FIXED + bh + sh + tls
        body_past = (body_len > 0) & (body_pos + body_len > end)
        bad_topic = ~too_short & ~body_past & ((topic_len < 0) | (topic_pos + topic_len > end))
        mismatch = too_short | body_past | (~bad_topic & (
            (ppos + 2 > end) | ((prop_len > 0) & (ppos + 2 + prop_len > end)) | (expected != total)))
        invalid_at = None
        bad = np.flatnonzero(bad_topic)
        limit = n
        if bad.size:
            invalid_at = int(bad[0])
            limit = invalid_at
        keep = ~mismatch
        keep[limit:] = False
        skipped = int(np.count_nonzero(mismatch[:limit]))
        a.update(bh=bh, sh=sh, bodyLength=body_len, body_pos=body_pos, topic_len=topic_len,
                 topic_pos=topic_pos, prop_len=prop_len, prop_pos=ppos + 2)
        idx = np.flatnonzero(keep)
        if len(idx) != n:
            a = {k: v[idx] for k, v in a.items()}
            starts = starts[idx]
        return cls(u8, file_from_offset, starts, a, delay_level_millis), skipped, invalid_at

    def select(self, mask_or_index: np.ndarray) -> "RecordBlock":
        idx = mask_or_index if mask_or_index.dtype != bool else np.flatnonzero(mask_or_index)
        sub = RecordBlock(self.u8, self.file_from_offset, self.starts[idx], {k: v[idx] for k, v in self.a.items()},
                          self.delays)
        for k, v in self._cache.items():
            if isinstance(v, np.ndarray):
                sub._cache[k] = v[idx]
            elif isinstance(v, list):
                sub._cache[k] = [v[i] for i in idx]
        if "topic_codes" in self._cache:
            codes, names = self._cache["topic_codes"]
            sub._cache["topic_codes"] = (codes[idx], names)
        return sub

    # ---- fixed fields ------------------------------------------------------------------
    @property
    def commit_log_offsets(self) -> np.ndarray:
        return self.starts + self.file_from_offset

    def array(self, name: str) -> np.ndarray:
        """A numeric column: any HEAD_DTYPE field, storeTimestamp, reconsumeTimes,
        preparedTransactionOffset, bodyLength, commitLogOffset, storeSize."""
        if name == "commitLogOffset":
            return self.commit_log_offsets
        if name == "storeSize":
            return self.a["totalSize"]
        return self.a[name]

    # ---- variable fields ---------------------------------------------------------------
    def _bytes_at(self, pos: np.ndarray, length: np.ndarray) -> list[bytes]:
        mv = memoryview(self.u8)
        return [bytes(mv[p:p + n]) if n > 0 else b"" for p, n in zip(pos.tolist(), length.tolist())]

    @property
    def topic_codes(self) -> tuple[np.ndarray, list[str]]:
        """Dictionary-encoded topics: (code per record, topic names)."""
        c = self._cache.get("topic_codes")
        if c is None:
            codes = np.empty(len(self), dtype=np.int32)
            names: list[str] = []
            seen: dict[bytes, int] = {}
            pos, length = self.a["topic_pos"], self.a["topic_len"]
            for n in np.unique(length).tolist():   # vectorised per topic length
                sel = np.flatnonzero(length == n)
                if n == 0:
                    uniq, inv = [b""], np.zeros(len(sel), dtype=np.int64)
                else:
                    rows = np.ascontiguousarray(_rows(self.u8, pos[sel], n)).view(f"V{n}").ravel()
                    uniq, inv = np.unique(rows, return_inverse=True)
                    uniq = [u.tobytes() for u in uniq]
                remap = np.empty(len(uniq), dtype=np.int32)
                for k, raw in enumerate(uniq):
                    code = seen.get(raw)
                    if code is None:
                        code = seen[raw] = len(names)
                        names.append(raw.decode("utf-8", "replace"))
                    remap[k] = code
                codes[sel] = remap[inv.ravel()]
            c = self._cache["topic_codes"] = (codes, names)
        return c

    @property
    def topics(self) -> list[str]:
        codes, names = self.topic_codes
        return [names[c] for c in codes.tolist()]

    @property
    def bodies(self) -> list[bytes]:
        b = self._cache.get("bodies")
        if b is None:
            b = self._cache["bodies"] = self._bytes_at(self.a["body_pos"], self.a["bodyLength"])
        return b

    def body_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions, lengths) of the bodies inside the file (for zero-copy gathers)."""
        return self.a["body_pos"], np.maximum(self.a["bodyLength"], 0)

    @property
    def properties_raw(self) -> list[str]:
        r = self._cache.get("properties_raw")
        if r is None:
            raw = self._bytes_at(self.a["prop_pos"], self.a["prop_len"])
            r = self._cache["properties_raw"] = [x.decode("utf-8", "replace") for x in raw]
        return r

    @property
    def properties(self) -> list[dict]:
        r = self._cache.get("properties")
        if r is None:
            r = self._cache["properties"] = [P.parse_properties(s) if s else {} for s in self.properties_raw]
        return r

    def _prop(self, name: str) -> list[str | None]:
        key = "prop:" + name
        r = self._cache.get(key)
        if r is None:
            r = self._cache[key] = [p.get(name) for p in self.properties]
        return r

    @property
    def tags(self) -> list[str | None]:
        return self._prop(P.TAGS)

    @property
    def keys(self) -> list[str | None]:
        return self._prop(P.KEYS)

    @property
    def uniq_keys(self) -> list[str | None]:
        return self._prop(P.UNIQ_KEY)

    @property
    def key_lists(self) -> list[list[str]]:
        r = self._cache.get("key_lists")
        if r is None:
            r = self._cache["key_lists"] = [P.split_keys(k) for k in self.keys]
        return r

    @property
    def index_keys(self) -> list[list[str]]:
        r = self._cache.get("index_keys")
        if r is None:
            r = []
            for t, tt, u, keys in zip(self.topics, (self.a["sysFlag"] & 0x0C).tolist(), self.uniq_keys,
                                      self.key_lists):
                if tt == 0x0C:
                    r.append([])
                    continue
                ks = [f"{t}#{u}"] if u else []
                ks.extend(f"{t}#{k}" for k in keys)
                r.append(ks)
            self._cache["index_keys"] = r
        return r

    @property
    def index_key_hashes(self) -> list[list[int]]:
        r = self._cache.get("index_key_hashes")
        if r is None:
            r = self._cache["index_key_hashes"] = [[index_key_hash(k) for k in ks] for ks in self.index_keys]
        return r

    @property
    def tags_codes(self) -> np.ndarray:
        """ConsumeQueue tagsCode (§7): tag hash, or delivery time for a delayed message."""
        r = self._cache.get("tags_codes")
        if r is None:
            hashes: dict[str, int] = {}
            out = np.zeros(len(self), dtype=np.int64)
            codes, names = self.topic_codes
            sched = names.index(SCHEDULE_TOPIC) if SCHEDULE_TOPIC in names else -1
            store_ts = self.a["storeTimestamp"]
            delays = self.delays
            for i, (t, props) in enumerate(zip(self.tags, self.properties)):
                if t:
                    h = hashes.get(t)
                    if h is None:
                        h = hashes[t] = tags_code(t)
                    out[i] = h
                if sched >= 0 and codes[i] == sched:
                    level = props.get(P.DELAY)
                    if level is not None and _INT_RE.match(level):
                        lv = min(int(level), len(delays))
                        if lv > 0:
                            out[i] = int(store_ts[i]) + delays[lv - 1]
            r = self._cache["tags_codes"] = out
        return r

    def _hosts(self, start: np.ndarray, width: np.ndarray) -> list[str]:
        mv = memoryview(self.u8)
        cache: dict[bytes, str] = {}
        out = []
        for p, w in zip(start.tolist(), width.tolist()):
            raw = bytes(mv[p:p + w])
            s = cache.get(raw)
            if s is None:
                s = cache[raw] = format_host(raw[:-4], int.from_bytes(raw[-4:], "big", signed=True))
            out.append(s)
        return out

    @property
    def born_hosts(self) -> list[str]:
        return self._hosts(self.starts + OFF_BORNHOST, self.a["bh"])

    @property
    def store_hosts(self) -> list[str]:
        return self._hosts(self.starts + OFF_STOREHOST + self.a["bh"], self.a["sh"])

    @property
    def msg_ids(self) -> list[str]:
        """Offset msgId: store host bytes + PHYSICALOFFSET, upper-case hex."""
        mv = memoryview(self.u8)
        out = []
        for p, w, phys in zip((self.starts + OFF_STOREHOST + self.a["bh"]).tolist(), self.a["sh"].tolist(),
                              self.a["physicalOffsetField"].tolist()):
            out.append((bytes(mv[p:p + w]) + phys.to_bytes(8, "big", signed=True)).hex().upper())
        return out

    @property
    def transaction_types(self) -> list[str]:
        return [TRANSACTION_NAMES[f & 0x0C] for f in self.a["sysFlag"].tolist()]

    def decoded_body(self, i: int) -> bytes | None:
        """Body i as the producer sent it: decompressed when the record says it is compressed;
        None when it cannot be (codec module missing, e.g. lz4 / zstandard, or damaged data)."""
        body = self.bodies[i]
        flag = int(self.a["sysFlag"][i])
        if not flag & COMPRESSED_FLAG or not body:
            return body
        try:
            return decompress_body(body, (flag >> 8) & 0x7)
        except Exception:   # ImportError (no codec), zlib.error, LZ4/ZSTD errors, unknown type
            return None

    @property
    def body_decoded(self) -> np.ndarray:
        """bodyDecoded: False where a compressed body cannot be decompressed here (it is then
        never matched as if its compressed bytes were text)."""
        r = self._cache.get("body_decoded")
        if r is None:
            r = np.ones(len(self), dtype=bool)
            for i in np.flatnonzero(self.a["sysFlag"] & COMPRESSED_FLAG).tolist():
                r[i] = self.decoded_body(i) is not None
            self._cache["body_decoded"] = r
        return r

    def body_text(self, i: int, decoded: bool = False) -> str | None:
        """Body i as text for matching (decompressed), None when it cannot be decoded.
        `decoded`: the text of body_decode's value (Protobuf, MessagePack, CBOR, Avro shown as
        JSON), the UTF-8 reading where no format fits."""
        body = self.decoded_body(i)
        if body is None:
            return None
        if decoded:
            d = decode_body(body)
            if d.format != HEX:
                return d.text()
        return body.decode("utf-8", "replace")

    # ---- generic access ----------------------------------------------------------------
    def column(self, name: str):
        """Column `name` of MESSAGE_COLUMNS: a numpy int64 array for numbers, else a list."""
        if name == "topic":
            return self.topics
        if name == "body":
            return self.bodies
        if name == "properties":
            return self.properties
        if name == "bornHost":
            return self.born_hosts
        if name == "storeHost":
            return self.store_hosts
        if name == "msgId":
            return self.msg_ids
        if name == "uniqKey":
            return self.uniq_keys
        if name == "tags":
            return self.tags
        if name == "keys":
            return self.keys
        if name == "keyList":
            return self.key_lists
        if name == "tagsCode":
            return self.tags_codes
        if name == "transactionType":
            return self.transaction_types
        if name == "indexKeys":
            return self.index_keys
        if name == "indexKeyHashes":
            return self.index_key_hashes
        if name == "bodyDecoded":
            return self.body_decoded
        return self.array(name)

    def rows_json(self, with_body: bool = True, mark: bool = False, decoded: bool = False) -> list[dict]:
        """Message.to_json() of every record, built from the columns; `mark` adds
        "bodyDecoded": false to the rows whose compressed body cannot be decoded; `decoded`
        adds `decodedBody` (engine.format.body_decode) to every row."""
        names = MESSAGE_COLUMN_NAMES if mark else [n for n in MESSAGE_COLUMN_NAMES if n != "bodyDecoded"]
        return [row_json(r, with_body, decoded) for r in self.rows(names)]

    def rows(self, names: list[str]) -> list[dict]:
        cols = [self.column(n) for n in names]
        cols = [c.tolist() if isinstance(c, np.ndarray) else c for c in cols]
        return [dict(zip(names, vals)) for vals in zip(*cols)]


def row_json(r: dict, with_body: bool = True, decoded: bool = False) -> dict:
    """A message row (all MESSAGE_COLUMNS) in the shape of engine.Message.to_json(); with
    `decoded` also `decodedBody` (decoded here, for the rows a scan returns, never for all)."""
    import base64
    body = r["body"]
    body = bytes(body) if body is not None else b""
    d = {
        "topic": r["topic"], "queueId": r["queueId"], "queueOffset": r["queueOffset"],
        "commitLogOffset": r["commitLogOffset"], "storeSize": r["storeSize"],
        "bodyCRC": r["bodyCRC"], "flag": r["flag"], "sysFlag": r["sysFlag"],
        "bornTimestamp": r["bornTimestamp"], "bornHost": r["bornHost"],
        "storeTimestamp": r["storeTimestamp"], "storeHost": r["storeHost"],
        "reconsumeTimes": r["reconsumeTimes"],
        "preparedTransactionOffset": r["preparedTransactionOffset"],
        "properties": dict(r["properties"] or {}), "msgId": r["msgId"], "uniqKey": r["uniqKey"],
        "tags": r["tags"], "keys": r["keys"], "tagsCode": r["tagsCode"],
        "transactionType": r["transactionType"], "magicCode": r["magicCode"],
        "bodyLength": len(body),
    }
    if with_body:
        d["body"] = base64.b64encode(body).decode("ascii")
    if r.get("bodyDecoded") is False:   # a compressed body this process cannot decompress
        d["bodyDecoded"] = False
    if decoded:
        d["decodedBody"] = decode_body(body, r["sysFlag"]).to_json()
    return d
