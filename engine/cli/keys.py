"""`query-keys STORE TOPIC KEYFILE`: many keys at once -- which of them the store holds, and
where -- through MessageStore.query_messages (the keys' index walks batched, their cache misses
overlapped; each candidate checked against its message's topic, KEYS and UNIQ_KEY, as
query-key's default answer is). KEYFILE has one key per line, `-` for standard input; blank
lines are passed over. `--json`: {"topic", "keys", "found", "missing": [keys without a message],
"answers": [{"key", "offsets", "storeTimestamps", "truncated", "falseHits"}]}; without it, one
line per key. Exit code 0 when every key was found, 1 when some were not."""
from __future__ import annotations

import sys

from engine.cli.output import CliError, emit, fmt_time, nonneg, safe
from engine.format.text import parse_time
from engine.store.index_file import LONG_MAX


def register(add, commands: dict) -> None:
    sp = add("query-keys", "many keys at once (a file of keys): which exist, at which commitlog offsets")
    sp.add_argument("topic", help="topic the messages were stored under")
    sp.add_argument("keyfile", help="a text file with one key per line (KEYS or UNIQ_KEY), - for standard input")
    sp.add_argument("--begin", metavar="TIME", help="earliest store time (as query-key)")
    sp.add_argument("--end", metavar="TIME", help="latest store time (as query-key)")
    sp.add_argument("--max", type=nonneg, default=64, help="messages per key (0 = no cap)")
    commands["query-keys"] = cmd_query_keys


def read_keys(path: str) -> list[str]:
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except OSError as e:
        raise CliError(f"cannot read the key file {safe(path)}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise CliError(f"the key file {safe(path)} is not UTF-8 text (one key per line)") from None
    return [k for k in (line.strip() for line in text.splitlines()) if k]


def cmd_query_keys(store, args) -> int:
    if args.max < 0:
        raise CliError("--max must be 0 (no cap) or more")
    keys = read_keys(args.keyfile)
    begin = parse_time(args.begin) if args.begin else 0
    end = parse_time(args.end) if args.end else LONG_MAX
    results = store.query_messages(args.topic, keys, begin, end, args.max)
    answers = [{"key": k, "offsets": r.offsets, "storeTimestamps": [m.storeTimestamp for m in r.messages],
                "truncated": r.truncated, "falseHits": r.false_hits} for k, r in zip(keys, results)]
    missing = [a["key"] for a in answers if not a["offsets"]]
    human = "\n".join(f"{safe(a['key'])}\t{len(a['offsets'])}\t" + " ".join(
        f"{o}@{fmt_time(t)}" for o, t in zip(a["offsets"], a["storeTimestamps"])) for a in answers)
    human += f"\n({len(keys) - len(missing)} of {len(keys)} keys found)"
    emit(args, {"topic": args.topic, "keys": len(keys), "found": len(keys) - len(missing), "missing": missing,
                "answers": answers}, human)
    return 0 if not missing else 1
