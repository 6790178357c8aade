"""`rmqstore scan STORE JOB ...`: bulk scans on Spark (or `--local` numpy).

    --json   prints one object {job, engine, master, rows: [...]} (plus "truncated": true when a
             listing was cut at --limit); otherwise an aligned table.
Errors are one line on stderr and exit code 2; Ctrl-C cancels the Spark job group (exit 130).
pyspark is imported only when a Spark job actually runs."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys

from engine.cli.output import EXIT_CANCELLED, cancel_on_sigint, nonneg, positive
from engine.scan.api import (EXPORT_FORMATS, FILTER_TABLE_COLUMNS, JOBS, JobParams, MessageFilter, ScanStore,
                             format_table, one_line, redacted, resolve_stores, scan_task, validate)
from engine.cli.tiered import open_scan_member, take_tier_settings
from engine.scan.jobs import TOPIC_STATS_NOTE
from engine.tasks import Cancelled, CancelToken, Progress, run

EXIT_ERROR = 2


def add_scan_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "scan", help="bulk scans of the whole store on Spark (topic stats, traffic, filters, consistency, export)",
        description="Bulk scans of a whole store, on Spark (local[*] unless --master / $RMQSTORE_SPARK_MASTER) "
                    "or with --local in this process.")
    p.add_argument("store", metavar="STORE", nargs="?", help="store root folder (or use --store)")
    p.add_argument("job", metavar="JOB", choices=JOBS, help="one of: " + ", ".join(JOBS))
    p.add_argument("--store", dest="stores", action="append", default=[], metavar="PATH",
                   help="a store, a glob of stores, or a cluster layout <root>/<brokerName>/store (repeatable): "
                        "one job over all of them; rows then carry broker")
    g = p.add_argument_group("selection (every job)")
    g.add_argument("--topic", action="append", default=[], help="only this topic (repeatable)")
    g.add_argument("--queue", action="append", type=nonneg, default=[], metavar="QUEUE_ID",
                   help="only this queue id (repeatable)")
    g.add_argument("--body", metavar="REGEX", help="body matches REGEX (decompressed when compressed)")
    g.add_argument("--body-decoded", action="store_true",
                   help="--body searches the decoded text (Protobuf, MessagePack, CBOR, Avro bodies as JSON)")
    g.add_argument("--tags", metavar="EXPR", help="subscription expression, e.g. 'TagA || TagB'")
    g.add_argument("--key", metavar="K", help="a KEYS token or the UNIQ_KEY equals K")
    g.add_argument("--prop", metavar="NAME=REGEX", help="property NAME exists and matches REGEX")
    g.add_argument("--via-consume-queue", action="store_true",
                   help="with --topic/--queue: read only the records those queues' ConsumeQueue units name "
                        "(a consumer's view: no PREPARED/ROLLBACK or undispatched records)")
    g = p.add_argument_group("job options")
    g.add_argument("--by-queue", action="store_true", help="topic-stats: one row per queue")
    g.add_argument("--bucket", default="1m", help="traffic: bucket length (1s, 1m, 5m, 1h, 1d; default 1m)")
    g.add_argument("--limit", type=nonneg, default=None,
                   help="rows to list (filter: 1000, top-keys/top-tags: 20, duplicates: all)")
    g.add_argument("--per-topic", action="store_true", help="duplicates: per (topic, UNIQ_KEY)")
    g.add_argument("--format", choices=EXPORT_FORMATS, default="parquet", help="export format")
    g.add_argument("--out", metavar="PATH", help="export: output path (a directory on Spark)")
    g.add_argument("--overwrite", action="store_true", help="export: replace PATH")
    g.add_argument("--decode-body", action="store_true",
                   help="filter, export (jsonl, csv): each row gains decodedBody {format, compression, value, confidence}")
    g.add_argument("--split-bytes", type=positive, default=None, metavar="N",
                   help="largest commitlog slice per task (default: automatic)")
    g = p.add_argument_group("engine")
    g.add_argument("--master", metavar="URL", help="Spark master (default $RMQSTORE_SPARK_MASTER or local[*])")
    g.add_argument("--remote", metavar="sc://HOST:PORT",
                   help="reuse a running Spark through Spark Connect (default $RMQSTORE_SPARK_REMOTE when no --master)")
    g.add_argument("--memory", metavar="SIZE", help="Spark driver/executor memory, e.g. 4g")
    g.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    g.add_argument("--local", action="store_true", help="run in this process with numpy instead of Spark")
    g = p.add_argument_group("output and store")
    g.add_argument("--json", action="store_true", help="one JSON object {job, engine, master, rows}")
    g.add_argument("--config", dest="sub_config", metavar="FILE", help="broker.conf-style store settings")
    g.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a store setting by its RocketMQ name, e.g. mappedFileSizeCommitLog=65536")
    return p


def params_from_args(args) -> JobParams:
    flt = MessageFilter.build(topics=args.topic or None, queue_ids=args.queue or None, body=args.body,
                              tags=args.tags, key=args.key, prop=args.prop, body_decoded=args.body_decoded)
    return JobParams(filter=flt, by_queue=args.by_queue, bucket=args.bucket, limit=args.limit,
                     per_topic=args.per_topic, format=args.format, out=args.out, overwrite=args.overwrite,
                     split_bytes=args.split_bytes, via_consume_queue=args.via_consume_queue,
                     decode_body=args.decode_body)


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for s in items or []:
        k, sep, v = s.partition("=")
        if not sep or not k.strip():
            raise ValueError(f"{what} expects KEY=VALUE, got {s!r}")
        out[k.strip()] = v
    return out


def _store_config(args):
    from engine.config import load_store_config
    return load_store_config(getattr(args, "sub_config", None) or getattr(args, "config", None),
                             getattr(args, "set", None))


def run_scan(args) -> int:
    from engine.errors import StoreError
    cancel = CancelToken()
    try:
        params = params_from_args(args)
        validate(args.job, params)
        conf = _pairs(args.conf, "--conf")
        tier_settings = take_tier_settings(args)   # brokerName, tieredStoreFilePath, ...: not store settings
        cfg = _store_config(args)
        specs = ([args.store] if args.store else []) + list(args.stores)
        if not specs:
            raise ValueError("name a store: STORE or --store PATH (repeatable, globs and cluster layouts too)")
        refs = resolve_stores(specs)
        with contextlib.ExitStack() as opened:
            stores = [ScanStore(r.broker, redacted(r.path), opened.enter_context(
                open_scan_member(r.path, cfg, args, tier_settings))) for r in refs]
            result = _run(stores if len(stores) > 1 else stores[0].store, args, params, conf, cancel)
    except KeyboardInterrupt:
        cancel.cancel()
        print("rmqstore: scan cancelled", file=sys.stderr)
        return EXIT_CANCELLED
    except Cancelled:
        print("rmqstore: scan cancelled", file=sys.stderr)
        return EXIT_CANCELLED
    except (StoreError, ValueError, OSError) as e:
        print(f"rmqstore: error: {one_line(e)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as e:  # Spark / JVM failures arrive as many kinds of exceptions
        print(f"rmqstore: error: {type(e).__name__}: {one_line(e)}" if not _is_spark_error(e)
              else f"rmqstore: error: {one_line(e)}", file=sys.stderr)
        return EXIT_ERROR
    try:
        if args.json:
            json.dump(result.to_json(), sys.stdout, ensure_ascii=False)
            sys.stdout.write("\n")
        else:
            rows = result.rows
            cols = FILTER_TABLE_COLUMNS if args.job == "filter" else None
            if cols and result.stores:
                cols = ["broker"] + cols
            sys.stdout.write(format_table(rows, cols))
            if rows and args.job == "topic-stats":
                sys.stdout.write(TOPIC_STATS_NOTE + "\n")
            if not rows and args.job == "consistency":
                sys.stdout.write("no differences: the ConsumeQueues and the index match the commitlog\n")
            where = f"{result.engine}" + (f" on {result.master}" if result.master else "")
            more = f", first {len(rows)} shown (--limit)" if result.truncated else ""
            sys.stdout.write(f"{len(rows)} row(s){more}; {args.job} ran on {where} in {result.seconds:.1f} s\n")
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return 0


def _is_spark_error(e: BaseException) -> bool:
    mod = type(e).__module__ or ""
    return mod.startswith(("pyspark", "py4j")) or type(e).__name__ == "SparkUnavailable"


def _run(store, args, params, conf, cancel):
    """The job as a task; its thread runs the work, this one prints progress, so Ctrl-C here
    sets `cancel` (cancel_on_sigint), which stops it (the Spark job group with it); a second
    Ctrl-C closes the task, which waits for the job to stop."""
    task = scan_task(store, args.job, params, engine="local" if args.local else "spark", cancel=cancel,
                     master=args.master, memory=args.memory, conf=conf, remote=args.remote)
    show = _progress_printer(args)
    try:
        with cancel_on_sigint(cancel):
            return run(task, show)
    except KeyboardInterrupt:
        task.close()
        raise


def _progress_printer(args):
    if args.json or not sys.stderr.isatty():
        return None
    state = {"last": ""}

    def show(p: Progress) -> None:
        line = f"\r{p.message}" + (f" ({p.done}/{p.total} {p.unit or 'tasks'})" if p.total else "")
        if line != state["last"]:
            sys.stderr.write(line.ljust(60))
            sys.stderr.flush()
            state["last"] = line
    return show


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (`python -m engine.cli.scan STORE JOB ...`), same as `rmqstore scan`."""
    parser = argparse.ArgumentParser(prog="rmqstore")
    sub = parser.add_subparsers(dest="command", required=True)
    add_scan_parser(sub)
    args = parser.parse_args(["scan", *(sys.argv[1:] if argv is None else argv)])
    return run_scan(args)


if __name__ == "__main__":
    sys.exit(main())
