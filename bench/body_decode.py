"""body-decode: engine.format.body_decode.decode_body of a 1 KiB MessagePack body and of a
1 KiB Protobuf body (no schema: the wire walk), each against json.loads of the same data as
JSON measured in the same run, interleaved rep by rep in many short windows (the machine's
load moves both alike; the best window of each is kept).
Issue 34's target: under 20 us a body; the ratio to json.loads is printed beside it, since on
a busy machine the absolute figure moves with the load.

`python -m bench --only body-decode` runs it with the other sections' machinery;
`python -m bench.body_decode` runs it alone and merges its rows into bench/results/latest.json
(rows of the same name replaced, the others kept)."""
from __future__ import annotations

import json
import struct
import sys
import time
from pathlib import Path

from engine.format.body_decode import decode_body

from .common import Row, log, row

TARGET_US = 20.0
BODY_BYTES = 1024


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def _ld(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _vi(num: int, v: int) -> bytes:
    return _varint(num << 3) + _varint(v)


def protobuf_order() -> tuple[bytes, object]:
    """A ~1 KiB order: id, time, customer, items (sku, qty, price), address; and its JSON twin."""
    items, jitems = [], []
    i = 0
    while True:
        sku, name = f"sku-{1000 + i}".encode(), f"Widget model {i}, blue".encode()
        item = _ld(1, sku) + _vi(2, 1 + i % 5) + _vi(3, 1999 + 10 * i) + _ld(4, name)
        head = _ld(1, b"order-000123") + _vi(2, 1732800000000) + _ld(3, b"customer-42")
        tail = _ld(6, b"1 Main Street, Hangzhou") + struct.pack("<B", 7 << 3 | 5) + struct.pack("<f", 0.5)
        body = head + b"".join(_ld(5, x) for x in items + [item]) + tail
        if len(body) > BODY_BYTES:
            break
        items.append(item)
        jitems.append({"1": sku.decode(), "2": 1 + i % 5, "3": 1999 + 10 * i, "4": name.decode()})
        i += 1
    body = head + b"".join(_ld(5, x) for x in items) + tail
    return body, {"1": "order-000123", "2": 1732800000000, "3": "customer-42", "5": jitems,
                  "6": "1 Main Street, Hangzhou", "7": 0.5}


def msgpack_order() -> tuple[bytes, object]:
    """A ~1 KiB MessagePack map (packed by the msgpack library: the bench is the decoder's)."""
    import msgpack
    obj = {"id": "order-000123", "ts": 1732800000000, "customer": "customer-42", "items": [],
           "address": "1 Main Street, Hangzhou", "discount": 0.5}
    i = 0
    while len(msgpack.packb(obj)) < BODY_BYTES - 60:
        obj["items"].append({"sku": f"sku-{1000 + i}", "qty": 1 + i % 5, "price": 1999 + 10 * i,
                             "name": f"Widget model {i}, blue"})
        i += 1
    return msgpack.packb(obj), obj


def _per_call_us(fn, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def measure(body: bytes, as_json: bytes, fmt: str, reps: int, n: int) -> dict:
    d = decode_body(body)
    assert d.format == fmt, (d.format, d.note)
    ours, base = [], []
    for _ in range(reps):   # interleaved, best of each
        ours.append(_per_call_us(lambda: decode_body(body), n))
        base.append(_per_call_us(lambda: json.loads(as_json), n))
    full = min(_per_call_us(lambda: decode_body(body).value, n) for _ in range(reps))
    return {"us": min(ours), "json_us": min(base), "with_value_us": full, "reps_us": [round(x, 2) for x in ours],
            "json_reps_us": [round(x, 2) for x in base], "bytes": len(body), "json_bytes": len(as_json)}


def run(ctx=None) -> list[Row]:
    quick = getattr(ctx, "quick", False)
    reps, n = (10, 1000) if quick else (30, 1000)   # many short windows: on a shared machine some are quiet
    rows = []
    for fmt, (body, obj) in (("msgpack", msgpack_order()), ("protobuf", protobuf_order())):
        as_json = json.dumps(obj).encode()
        r = measure(body, as_json, fmt, reps, n)
        log(f"body-decode {fmt}: {r['us']:.1f} us a {r['bytes']} B body, json.loads {r['json_us']:.1f} us")
        rows.append(row(f"body-decode {fmt} 1KiB", r["us"], "us", "json.loads of the same data", r["json_us"],
                        better="lower", target=f"< {TARGET_US:g} us", met=r["us"] < TARGET_US,
                        bodyBytes=r["bytes"], jsonBytes=r["json_bytes"], withValueUs=round(r["with_value_us"], 2),
                        repsUs=r["reps_us"], jsonRepsUs=r["json_reps_us"]))
    return rows


def main() -> int:
    from .common import table
    rows = run()
    out = Path(__file__).resolve().parent / "results" / "latest.json"
    data = json.loads(out.read_text()) if out.exists() else {"results": []}
    names = {r.name for r in rows}
    data["results"] = [r for r in data.get("results", []) if r.get("name") not in names] + [r.to_json() for r in rows]
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
