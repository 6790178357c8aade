"""Every scan job in one process with numpy: the oracle the Spark jobs are tested against,
and the engine for stores small enough not to need Spark. It reads the same plan (slices)
and decodes the same columns as the Spark data source; only the aggregation differs."""
from __future__ import annotations

import json
import os
import time
from collections import Counter, defaultdict

import numpy as np

from engine.scan.columns import MESSAGE_COLUMN_NAMES, RecordBlock
from engine.scan.consistency import (MAX_REPORTED, cq_file_size, cq_location, diff_row, index_chain_problems,
                                     index_file_for, index_file_ranges, merge_rows, pair_index_differences, unit_dict)
from engine.scan.jobs import (CSV_COLUMNS, DEFAULT_FILTER_LIMIT, DEFAULT_TOP, PERCENTILES, JobParams, discard,
                              dispatched, exact_percentile, is_uri, publish, temporary_sibling)
from engine.scan.planning import plan_commitlog, plan_consume_queues, plan_index
from engine.scan import consistency_5x as c5
from engine.scan import lineage_job as LJ
from engine.format.lmq import LMQ_PREFIX
from engine.scan.queue_reader import QueueRead, queue_read, read_queue_records
from engine.scan.reader import SliceStats, read_commitlog, read_cq, read_index
from engine.scan.stores import ORIGIN_COLUMNS, by_broker, members_of
from engine.tasks import CancelToken, Progress, ProgressFn


def iter_blocks(stores, params: JobParams, progress: ProgressFn | None, cancel: CancelToken,
                stats: SliceStats | None = None, apply_filter: bool = True):
    """The (filtered) blocks of one store or of ScanStores, store after store; each block's
    `origin` is (broker, store path)."""
    members = members_of(stores)
    plans = [(m, plan_commitlog(m.store, params.split_bytes)) for m in members]
    flt = params.filter
    if params.via_consume_queue and apply_filter:   # the selected queues' records only
        plans = [(m, [(queue_read(m.store, p, flt.topics, flt.queue_ids), p.delay_level_millis)]) for m, p in plans]
    else:
        plans = [(m, [(s, p.delay_level_millis) for s in p.commitlog]) for m, p in plans]
    total = sum(len(p) for _, p in plans)
    i = 0
    for m, plan in plans:
        for s, delays in plan:
            reads = (read_queue_records(s, delays, stats) if isinstance(s, QueueRead)
                     else read_commitlog(s, delays, stats))
            for block in reads:
                cancel.raise_if_cancelled()
                if params.throttle_ms:
                    time.sleep(params.throttle_ms / 1000)
                if apply_filter:
                    block = flt.apply(block)
                if len(block):
                    block.origin = (m.broker, m.path)
                    yield block
            i += 1
            if progress:
                progress(Progress(i, total, "local", "slices", message=f"slice {i}/{total}"))


class _Topics:
    """Global ids for topic names met block by block."""

    def __init__(self):
        self.ids: dict[str, int] = {}
        self.names: list[str] = []

    def codes(self, block: RecordBlock) -> np.ndarray:
        codes, names = block.topic_codes
        remap = np.empty(len(names), dtype=np.int64)
        for i, n in enumerate(names):
            g = self.ids.get(n)
            if g is None:
                g = self.ids[n] = len(self.names)
                self.names.append(n)
            remap[i] = g
        return remap[codes]


class _GroupAgg:
    """count / sum / min / max (and all sizes, for percentiles) per int64 group key."""

    def __init__(self, keep_sizes: bool = False):
        self.stats: dict[int, list[int]] = {}
        self.sizes: dict[int, list[np.ndarray]] = defaultdict(list) if keep_sizes else None

    def add(self, keys: np.ndarray, size: np.ndarray, ts: np.ndarray | None) -> None:
        uk, inv, counts = np.unique(keys, return_inverse=True, return_counts=True)
        sums = np.zeros(len(uk), dtype=np.int64)
        np.add.at(sums, inv, size)
        if ts is not None:
            mins = np.full(len(uk), np.iinfo(np.int64).max)
            maxs = np.full(len(uk), np.iinfo(np.int64).min)
            np.minimum.at(mins, inv, ts)
            np.maximum.at(maxs, inv, ts)
        else:
            mins = maxs = np.zeros(len(uk), dtype=np.int64)
        for j, k in enumerate(uk.tolist()):
            s = self.stats.get(k)
            if s is None:
                self.stats[k] = [int(counts[j]), int(sums[j]), int(mins[j]), int(maxs[j])]
            else:
                s[0] += int(counts[j])
                s[1] += int(sums[j])
                s[2] = min(s[2], int(mins[j]))
                s[3] = max(s[3], int(maxs[j]))
        if self.sizes is not None:
            order = np.argsort(inv, kind="stable")
            parts = np.split(size[order], np.cumsum(counts)[:-1])
            for k, part in zip(uk.tolist(), parts):
                self.sizes[k].append(part)


# ---- jobs ------------------------------------------------------------------------------------
def topic_stats(store, params, progress, cancel):
    topics, agg, disp = _Topics(), _GroupAgg(keep_sizes=True), {}
    for b in iter_blocks(store, params, progress, cancel):
        g = topics.codes(b)
        keys = (g << 32) | (b.array("queueId") & 0xFFFFFFFF) if params.by_queue else g
        agg.add(keys, b.array("storeSize"), b.array("storeTimestamp"))
        uk, inv = np.unique(keys, return_inverse=True)
        counts = np.bincount(inv.ravel(), weights=dispatched(b.array("sysFlag")), minlength=len(uk))
        for k, c in zip(uk.tolist(), counts.tolist()):
            disp[k] = disp.get(k, 0) + int(c)
    rows = []
    for k, (n, total, first, last) in agg.stats.items():
        sizes = np.sort(np.concatenate(agg.sizes[k]))
        row = {"topic": topics.names[k >> 32 if params.by_queue else k]}
        if params.by_queue:
            q = k & 0xFFFFFFFF
            row["queueId"] = q - (1 << 32) if q >= 1 << 31 else q
        row.update(messages=n, dispatched=disp.get(k, 0), bytes=total, firstStoreTimestamp=first,
                   lastStoreTimestamp=last,
                   **{name: exact_percentile(sizes, pct) for name, pct in PERCENTILES.items()})
        rows.append(row)
    rows.sort(key=lambda r: (r["topic"], r.get("queueId", 0)))
    return rows, False


def traffic(store, params, progress, cancel):
    ms = params.bucket_ms
    topics, agg = _Topics(), {}
    for b in iter_blocks(store, params, progress, cancel):
        g = topics.codes(b)
        ts = b.array("storeTimestamp")
        bucket = ts - ts % ms
        keys = np.stack([g, bucket], axis=1)
        uk, inv = np.unique(keys, axis=0, return_inverse=True)
        inv = inv.ravel()
        counts = np.bincount(inv, minlength=len(uk))
        sums = np.zeros(len(uk), dtype=np.int64)
        np.add.at(sums, inv, b.array("storeSize"))
        for (gi, bk), c, s in zip(uk.tolist(), counts.tolist(), sums.tolist()):
            cur = agg.setdefault((gi, bk), [0, 0])
            cur[0] += c
            cur[1] += s
    rows = [{"topic": topics.names[gi], "bucketStart": bk, "messages": c, "bytes": s}
            for (gi, bk), (c, s) in agg.items()]
    rows.sort(key=lambda r: (r["topic"], r["bucketStart"]))
    return rows, False


def size_bucket(size: np.ndarray) -> np.ndarray:
    """Largest power of two <= size (0 for size 0)."""
    out = np.zeros(len(size), dtype=np.int64)
    pos = size > 0
    out[pos] = 1 << (np.floor(np.log2(size[pos])).astype(np.int64))
    # guard against log2 rounding at exact powers of two
    too_big = out > size
    out[too_big] >>= 1
    too_small = pos & (out * 2 <= size)
    out[too_small] <<= 1
    return out


def size_histogram(store, params, progress, cancel):
    agg: dict[int, list[int]] = {}
    for b in iter_blocks(store, params, progress, cancel):
        size = b.array("storeSize")
        bk = size_bucket(size)
        uk, inv = np.unique(bk, return_inverse=True)
        counts = np.bincount(inv, minlength=len(uk))
        sums = np.zeros(len(uk), dtype=np.int64)
        np.add.at(sums, inv, size)
        for k, c, s in zip(uk.tolist(), counts.tolist(), sums.tolist()):
            cur = agg.setdefault(k, [0, 0])
            cur[0] += c
            cur[1] += s
    rows = [{"sizeFrom": k, "sizeTo": max(2 * k, 1), "messages": c, "bytes": s} for k, (c, s) in sorted(agg.items())]
    return rows, False


def filter_messages(store, params, progress, cancel):
    limit = DEFAULT_FILTER_LIMIT if params.limit is None else params.limit
    rows, truncated = [], False
    for b in iter_blocks(store, params, progress, cancel):
        rows.extend(b.rows_json(mark=True, decoded=params.decode_body))
        if len(rows) > limit:
            truncated = True
            break
    return rows[:limit], truncated


def _top(counter: Counter, limit: int | None, label: str):
    limit = DEFAULT_TOP if limit is None else limit
    items = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    rows = [{"topic": t, label: v, "messages": n} for (t, v), n in items[:limit]]
    return rows, len(items) > limit


def top_keys(store, params, progress, cancel):
    c = Counter()
    for b in iter_blocks(store, params, progress, cancel):
        for t, keys in zip(b.topics, b.key_lists):
            for k in set(keys):
                c[(t, k)] += 1
    return _top(c, params.limit, "key")


def top_tags(store, params, progress, cancel):
    c = Counter()
    for b in iter_blocks(store, params, progress, cancel):
        for t, tags in zip(b.topics, b.tags):
            if tags is not None:
                c[(t, tags)] += 1
    return _top(c, params.limit, "tags")


def duplicates(store, params, progress, cancel):
    seen: dict[tuple, list[tuple[int, str]]] = defaultdict(list)
    for b in iter_blocks(store, params, progress, cancel):
        for t, u, off in zip(b.topics, b.uniq_keys, b.commit_log_offsets.tolist()):
            if u is not None:
                seen[(u, t) if params.per_topic else (u,)].append((off, t))
    rows = []
    for k, hits in sorted(seen.items()):
        if len(hits) < 2:
            continue
        row = {"uniqKey": k[0]}
        if params.per_topic:
            row["topic"] = k[1]
        row.update(copies=len(hits), topics=sorted({t for _, t in hits}), commitLogOffsets=sorted(o for o, _ in hits))
        rows.append(row)
    if params.limit is not None and len(rows) > params.limit:
        return rows[:params.limit], True
    return rows, False


def consistency(members, params, progress, cancel):
    store = members_of(members)[0].store
    cl_min = store.min_offset
    cq_size = cq_file_size(store)
    expected: dict[tuple, tuple] = {}
    rows: list[dict] = []
    idx_expected: Counter = Counter()
    idx_info: dict[tuple, tuple[str, str]] = {}
    index_on = store.cfg.messageIndexEnable
    unfiltered = JobParams(split_bytes=params.split_bytes, throttle_ms=params.throttle_ms)
    batch_topics, lmq_on = store.batch_topics, c5.lmq_active(store)
    lmq_exp: dict = {}
    lmq_act: dict = {}
    for b in iter_blocks(store, unfiltered, progress, cancel, apply_filter=False):
        tt = b.array("sysFlag") & 0x0C
        qid, qoff, phy = b.array("queueId").tolist(), b.array("queueOffset").tolist(), b.array("physicalOffsetField").tolist()
        size, tags = b.array("storeSize").tolist(), b.tags_codes.tolist()
        offs = b.commit_log_offsets.tolist()
        topics = b.topics
        for i in np.flatnonzero((tt == 0) | (tt == 8)).tolist():
            if batch_topics and topics[i] in batch_topics:
                continue  # batchconsumequeue/: consistency_5x.batch_problems
            if lmq_on:
                for lmq in c5.lmq_targets(topics[i], b.properties_raw[i]):
                    lmq_exp[(lmq, phy[i])] = (size[i], tags[i], offs[i])
            key = (topics[i], qid[i], qoff[i])
            if key in expected:
                f, pos = cq_location(topics[i], qid[i], qoff[i], cq_size)
                rows.append(diff_row(structure="consumequeue", problem="queue offset already used by an earlier record",
                                     file=f, fileOffset=pos, topic=topics[i], queueId=qid[i], queueOffset=qoff[i],
                                     commitLogOffset=offs[i], expected=unit_dict(phy[i], size[i], tags[i])))
                continue
            expected[key] = (phy[i], size[i], tags[i], offs[i])
        if index_on:
            for i, (ks, hs) in enumerate(zip(b.index_keys, b.index_key_hashes)):
                for k, h in zip(ks, hs):
                    idx_expected[(h, phy[i])] += 1
                    idx_info.setdefault((h, phy[i]), (topics[i], k))
    # consume queues on disk
    for s in plan_consume_queues(store):
        cancel.raise_if_cancelled()
        u = read_cq(s)
        lmq = lmq_on and s.topic.startswith(LMQ_PREFIX)
        for q, p, sz, tc, pos in zip(u["queueOffset"].tolist(), u["commitLogOffset"].tolist(), u["size"].tolist(),
                                     u["tagsCode"].tolist(), u["position"].tolist()):
            if p < cl_min:
                continue
            if lmq:
                lmq_act[(s.topic, p)] = (q, sz, tc, s.rel_path, pos)
                continue
            e = expected.pop((s.topic, s.queue_id, q), None)
            if e is None:
                rows.append(diff_row(structure="consumequeue", problem="unit without record", file=s.rel_path,
                                     fileOffset=pos, topic=s.topic, queueId=s.queue_id, queueOffset=q,
                                     commitLogOffset=p, actual=unit_dict(p, sz, tc)))
            elif (e[0], e[1], e[2]) != (p, sz, tc):
                rows.append(diff_row(structure="consumequeue", problem="unit differs", file=s.rel_path, fileOffset=pos,
                                     topic=s.topic, queueId=s.queue_id, queueOffset=q, commitLogOffset=e[3],
                                     expected=unit_dict(*e[:3]), actual=unit_dict(p, sz, tc)))
    rows += c5.lmq_problems(lmq_exp, lmq_act, cq_size) + c5.batch_problems(store, cl_min)
    for (t, qid, q), e in expected.items():
        f, pos = cq_location(t, qid, q, cq_size)
        rows.append(diff_row(structure="consumequeue", problem="unit missing", file=f, fileOffset=pos, topic=t,
                             queueId=qid, queueOffset=q, commitLogOffset=e[3], expected=unit_dict(*e[:3])))
    # index on disk
    actual: dict[tuple, list[dict]] = defaultdict(list)
    for s in plan_index(store):
        cancel.raise_if_cancelled()
        e = read_index(s)
        rel = os.path.join("index", s.name)
        for n, h, p, pos in zip(e["index"].tolist(), e["keyHash"].tolist(), e["commitLogOffset"].tolist(),
                                e["position"].tolist()):
            if p >= cl_min:
                actual[(h, p)].append({"keyHash": h, "commitLogOffset": p, "file": rel, "position": pos, "index": n})
    ranges = index_file_ranges(store)
    missing, extra = [], []
    for k in set(idx_expected) | set(actual):
        ce, got = idx_expected.get(k, 0), actual.get(k, [])
        if ce == len(got):
            continue
        if ce > len(got):
            topic, key = idx_info[k]
            for _ in range(ce - len(got)):
                missing.append({"keyHash": k[0], "commitLogOffset": k[1], "key": key, "topic": topic,
                                "file": index_file_for(ranges, k[1])})
        else:
            got = sorted(got, key=lambda e: (e["file"], e["index"]))
            extra.extend(got[ce:])
    rows += pair_index_differences(missing[:MAX_REPORTED], extra[:MAX_REPORTED])
    return merge_rows(rows, index_chain_problems(store, cl_min)), False


def export(store, params, progress, cancel):
    """One file at params.out (local engine); rows in commitlog order, written under a
    temporary name and renamed on success. A URI other than file:// is written through
    pyarrow.fs (s3://, hdfs://, gs://: whatever this pyarrow build can open)."""
    out, fmt = params.out, params.format
    if is_uri(out):
        return _export_uri(store, params, progress, cancel)
    if os.path.lexists(out) and not params.overwrite:
        raise FileExistsError(f"{out} exists (use --overwrite)")
    tmp = temporary_sibling(out)
    try:
        with open(tmp, "wb") as fh:
            n = _write_export(store, params, progress, cancel, fh, fmt)
        publish(tmp, out, params.overwrite)
    except BaseException:
        discard(tmp)
        raise
    return [{"path": out, "format": fmt, "rows": n, "files": 1}], False


def _export_uri(store, params, progress, cancel):
    import pyarrow.fs as pafs
    out, fmt = params.out, params.format
    try:
        fs, path = pafs.FileSystem.from_uri(out)
    except Exception as e:   # pyarrow.lib.ArrowInvalid / ArrowNotImplementedError / OSError
        raise ValueError(f"--out {out}: --local cannot write there ({str(e).splitlines()[0]}); "
                         f"use Spark, or a local path") from None
    if fs.get_file_info(path).type != pafs.FileType.NotFound and not params.overwrite:
        raise FileExistsError(f"{out} exists (use --overwrite)")
    tmp = temporary_sibling(path)
    try:
        with fs.open_output_stream(tmp) as fh:
            n = _write_export(store, params, progress, cancel, fh, fmt)
        if fs.get_file_info(path).type != pafs.FileType.NotFound:
            fs.delete_file(path)
        fs.move(tmp, path)
    except BaseException:
        try:
            fs.delete_file(tmp)
        except Exception:
            pass
        raise
    return [{"path": out, "format": fmt, "rows": n, "files": 1}], False


def _write_export(store, params, progress, cancel, fh, fmt: str) -> int:
    """Rows into the binary stream `fh` (broker and store first when there are many stores)."""
    import io
    from engine.scan.arrow import block_to_arrow, message_arrow_schema
    n = 0
    multi = len(members_of(store)) > 1
    names = ([n for n, _ in ORIGIN_COLUMNS] if multi else []) + MESSAGE_COLUMN_NAMES
    if fmt == "parquet":
        import pyarrow.parquet as pq
        schema = message_arrow_schema(names)
        with pq.ParquetWriter(fh, schema) as w:
            for b in iter_blocks(store, params, progress, cancel):
                w.write_batch(block_to_arrow(b, names, schema))
                n += len(b)
        return n
    text = io.TextIOWrapper(fh, encoding="utf-8", newline="")
    if fmt == "jsonl":
        for b in iter_blocks(store, params, progress, cancel):
            origin = {"broker": b.origin[0], "store": b.origin[1]} if multi else {}
            for r in b.rows_json(mark=True, decoded=params.decode_body):
                text.write(json.dumps({**origin, **r}, ensure_ascii=False) + "\n")
            n += len(b)
    else:
        import csv
        w = csv.writer(text)
        cols = CSV_COLUMNS + (["decodedBody"] if params.decode_body else [])
        w.writerow((["broker", "store"] if multi else []) + cols)
        for b in iter_blocks(store, params, progress, cancel):
            origin = list(b.origin) if multi else []
            for r, ok in zip(b.rows_json(decoded=params.decode_body), b.body_decoded.tolist()):
                r["bodyDecoded"] = ok
                w.writerow(origin + [csv_value(r.get(c)) for c in cols])
            n += len(b)
    text.flush()
    text.detach()
    return n


def csv_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    return "" if v is None else v


def lineage(store, params, progress, cancel):
    """One row per life (engine.scan.lineage_job): every record read, lives picked by --topic."""
    members = members_of(store)
    first = members[0].store
    blocks = iter_blocks(members, params, progress, cancel, apply_filter=False)
    rows = LJ.selected(LJ.finish(LJ.local_rows(blocks, LJ.LifeRules.of_store(first)), first), params)
    if params.limit is not None and len(rows) > params.limit:
        return rows[:params.limit], True
    return rows, False


def fates(store, params, progress, cancel):
    rows, _ = lineage(store, JobParams(filter=params.filter), progress, cancel)
    return LJ.fates(rows), False


JOB_FUNCS = {"topic-stats": topic_stats, "traffic": traffic, "size-histogram": size_histogram,
             "filter": filter_messages, "top-keys": top_keys, "top-tags": top_tags, "duplicates": duplicates,
             "consistency": consistency, "export": export, "lineage": lineage, "fates": fates}


def run(stores, job: str, params: JobParams, progress: ProgressFn | None, cancel: CancelToken):
    """`job` over one store (a MessageStore) or ScanStores: with many, rows gain `broker`
    (aggregates per broker), and filter / consistency rows `store` too."""
    members = members_of(stores)
    if len(members) == 1 or job == "export":
        return JOB_FUNCS[job](members, params, progress, cancel)
    per_store = job in ("filter", "consistency")
    units = [(m.broker, [m]) for m in members] if per_store else by_broker(members)
    rows, truncated = [], False
    for broker, group in units:
        part, cut = JOB_FUNCS[job](group, params, progress, cancel)
        origin = {"broker": broker, "store": group[0].path} if per_store else {"broker": broker}
        rows += [{**origin, **r} for r in part]
        truncated |= cut
    limit = params.limit
    if job in ("top-keys", "top-tags"):
        label = "key" if job == "top-keys" else "tags"
        rows.sort(key=lambda r: (-r["messages"], r["broker"], r["topic"], r[label]))
        limit = DEFAULT_TOP if limit is None else limit
    elif job == "filter":
        limit = DEFAULT_FILTER_LIMIT if limit is None else limit
    elif job == "fates":
        rows.sort(key=lambda r: (r["broker"], r["topic"], r["group"] or ""))
        limit = None
    elif job not in ("duplicates", "lineage"):
        limit = None
    if limit is not None and len(rows) > limit:
        rows, truncated = rows[:limit], True
    return rows, truncated
