"""Broker metadata in ROOT/config/*.json: written by fastjson, so integer map keys come
unquoted ({0:250}); a missing or empty file falls back to its .bak, like the broker."""
from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from engine.errors import CorruptDataError, StoreError, StoreFullError

CONFIG_FILES = ("topics.json", "consumerOffset.json", "subscriptionGroup.json", "delayOffset.json")


def fastjson_to_json(text: str) -> str:
    """Quote bare integer object keys, leaving strings alone."""
    out, i, n, in_str = [], 0, len(text), False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
            out.append(c)
            i += 1
            continue
        if c in "{,":
            out.append(c)
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            k = j + 1 if j < n and text[j] == "-" else j
            while k < n and text[k].isdigit():
                k += 1
            m = k
            while m < n and text[m] in " \t\r\n":
                m += 1
            if k > j and text[j:k] != "-" and m < n and text[m] == ":":
                out.append(text[i + 1:j] + '"' + text[j:k] + '"')
                i = k
                continue
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def to_fastjson(obj) -> str:
    """Serialize like fastjson: tab-indented, integer-keyed maps with bare keys."""
    def enc(o, depth):
        pad = "\t" * (depth + 1)
        if isinstance(o, dict):
            if not o:
                return "{}"
            items = []
            for k, v in o.items():
                key = str(k) if isinstance(k, int) else json.dumps(str(k), ensure_ascii=False)
                items.append(f"{pad}{key}:{enc(v, depth + 1)}")
            return "{\n" + ",\n".join(items) + "\n" + "\t" * depth + "}"
        if isinstance(o, list):
            return "[" + ",".join(enc(v, depth + 1) for v in o) + "]"
        return json.dumps(o, ensure_ascii=False)
    return enc(obj, 0)


def load_config_json(config_dir: Path, name: str) -> dict | None:
    """The parsed file, its .bak when the file is missing or empty, None when neither exists."""
    for candidate in (config_dir / name, config_dir / (name + ".bak")):
        try:
            if not stat.S_ISREG(os.stat(candidate).st_mode):  # a FIFO would block, /dev/zero never end
                raise CorruptDataError("not a regular file", path=str(candidate))
            text = candidate.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue
        except OSError as e:
            raise CorruptDataError(f"cannot read: {e.strerror}", path=str(candidate)) from None
        if not text.strip():
            continue
        try:
            data = json.loads(fastjson_to_json(text))
        except json.JSONDecodeError as e:
            raise CorruptDataError(f"not valid JSON: {e.msg}", path=str(candidate), offset=e.pos) from None
        except (ValueError, RecursionError) as e:  # absurd nesting, integers past Python's digit limit
            raise CorruptDataError(f"not valid JSON: {type(e).__name__}", path=str(candidate)) from None
        if not isinstance(data, dict):
            raise CorruptDataError("expected a JSON object", path=str(candidate))
        return data
    return None


def store_config_json(config_dir: Path, name: str, data: dict) -> None:
    """Crash-safe rewrite: temp file, fsync, old content kept as .bak, rename."""
    target = config_dir / name
    tmp = config_dir / (name + ".tmp")
    try:
        config_dir.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(to_fastjson(data))
            fh.flush()
            os.fsync(fh.fileno())
        if target.exists():
            bak = config_dir / (name + ".bak")
            with open(target, "rb") as src, open(bak, "wb") as dst:
                dst.write(src.read())
                dst.flush()
                os.fsync(dst.fileno())
        os.replace(tmp, target)
    except OSError as e:  # the old file is untouched; a full disk is a typed error like any write
        tmp.unlink(missing_ok=True)
        full = e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
        raise (StoreFullError if full else StoreError)(f"cannot write: {e.strerror}", path=str(target)) from None


def consumer_offsets(data: dict | None) -> dict[tuple[str, str, int], int]:
    """consumerOffset.json -> {(topic, group, queueId): offset}."""
    out: dict[tuple[str, str, int], int] = {}
    table = (data or {}).get("offsetTable") or {}
    if not isinstance(table, dict):
        return out
    for tg, queues in table.items():
        topic, sep, group = str(tg).partition("@")
        if not sep or not isinstance(queues, dict):
            continue
        for qid, off in queues.items():
            try:
                out[(topic, group, int(qid))] = int(off)
            except (TypeError, ValueError):
                continue
    return out
