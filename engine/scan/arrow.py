"""RecordBlocks, CQ units and index entries as pyarrow RecordBatches (pyarrow only; the
Spark data source and the local parquet export share this). Numbers go over zero-copy from
numpy; bodies are one contiguous buffer plus offsets."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine.scan.columns import COLUMN_KINDS, RecordBlock
from engine.scan.stores import ORIGIN_COLUMNS

ORIGIN_KINDS = dict(ORIGIN_COLUMNS)

ARROW_KINDS = {
    "int": pa.int32(), "long": pa.int64(), "string": pa.string(), "binary": pa.binary(),
    "map": pa.map_(pa.string(), pa.string()), "array": pa.list_(pa.field("element", pa.string())),
    "intarray": pa.list_(pa.field("element", pa.int32())), "bool": pa.bool_(),
}
CQ_COLUMNS = [("topic", "string"), ("queueId", "int"), ("queueOffset", "long"), ("commitLogOffset", "long"),
              ("size", "int"), ("tagsCode", "long"), ("file", "string"), ("position", "long"),
              ("phyOffset", "long"),   # phyOffset: commitLogOffset under its name before issue 18, kept
              ("broker", "string"), ("store", "string")]
INDEX_COLUMNS = [("file", "string"), ("slot", "int"), ("index", "int"), ("keyHash", "int"), ("commitLogOffset", "long"),
                 ("timeDiff", "int"), ("prevIndex", "int"), ("timestamp", "long"), ("position", "long"),
                 ("phyOffset", "long"), ("broker", "string"), ("store", "string")]


def arrow_schema(columns: list[tuple[str, str]]) -> pa.Schema:
    return pa.schema([pa.field(n, ARROW_KINDS[k]) for n, k in columns])


def message_arrow_schema(names: list[str]) -> pa.Schema:
    return arrow_schema([(n, COLUMN_KINDS.get(n) or ORIGIN_KINDS[n]) for n in names])


def _constant(value: str, n: int) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value])).cast(pa.string())


def _binary(block: RecordBlock) -> pa.Array:
    pos, length = block.body_spans()
    offsets = np.zeros(len(block) + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    mv = memoryview(block.u8)
    data = b"".join(mv[p:p + n] for p, n in zip(pos.tolist(), length.tolist()) if n)
    if offsets[-1] < 2 ** 31:
        return pa.Array.from_buffers(pa.binary(), len(block), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                               pa.py_buffer(data)])
    return pa.Array.from_buffers(pa.large_binary(), len(block), [None, pa.py_buffer(offsets),
                                                                 pa.py_buffer(data)]).cast(pa.binary())


def _strings_from_codes(codes: np.ndarray, names: list[str]) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(names, pa.string())).cast(pa.string())


def block_to_arrow(block: RecordBlock, names: list[str], schema: pa.Schema,
                   origin: tuple[str, str] | None = None) -> pa.RecordBatch:
    """The columns `names` of a block; broker / store from `origin` (else block.origin)."""
    arrays = []
    for n in names:
        t = schema.field(n).type
        kind = COLUMN_KINDS.get(n)
        if n in ORIGIN_KINDS:
            o = origin or getattr(block, "origin", ("", ""))
            arrays.append(_constant(o[0] if n == "broker" else o[1], len(block)))
        elif n == "topic":
            arrays.append(_strings_from_codes(*block.topic_codes))
        elif n == "body":
            arrays.append(_binary(block))
        elif n == "properties":
            arrays.append(pa.array([list(p.items()) for p in block.properties], type=t))
        elif kind == "bool":
            arrays.append(pa.array(block.column(n), type=t))
        elif kind in ("int", "long"):
            arrays.append(pa.array(block.column(n).astype(np.int32 if kind == "int" else np.int64), type=t))
        else:
            arrays.append(pa.array(block.column(n), type=t))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def numpy_to_arrow(cols: dict, columns: list[tuple[str, str]], schema: pa.Schema, n: int) -> pa.RecordBatch:
    """CQ / index rows: numeric numpy arrays, and str constants repeated."""
    arrays = []
    for name, kind in columns:
        v = cols[name]
        t = schema.field(name).type
        if isinstance(v, str):
            arrays.append(pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([v])).cast(t))
        else:
            arrays.append(pa.array(np.asarray(v).astype(np.int32 if kind == "int" else np.int64), type=t))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
