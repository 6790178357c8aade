"""`rmqstore diff A B`: what differs between two stores (engine/analysis/diff.py). Both are
opened read-only. Exit 0 when identical, 1 when they differ, 2 on bad input."""
from __future__ import annotations

from engine.analysis.diff import diff_task
from engine.config import load_store_config
from engine.cli.output import CliError, cancel_on_sigint, cancelled, emit, fmt_time, nonneg, stderr_progress, table
from engine.store.message_store import MessageStore
from engine.tasks import Cancelled, CancelToken, run


def register(add, commands: dict) -> None:
    sp = add("diff", "compare two stores: first divergence, messages only in one, queues that differ")
    sp.add_argument("other", metavar="OTHER", help="the store to compare with (B; STORE is A)")
    sp.add_argument("--max", type=nonneg, default=0, help="list at most N messages per side (0 = all; counts stay exact)")
    commands["diff"] = cmd_diff


def _rows(refs: list[dict]) -> str:
    return table([[r["topic"], r["queueId"], r["queueOffset"], r["commitLogOffset"], fmt_time(r["storeTimestamp"]),
                   r["msgId"], r["uniqKey"] or ""] for r in refs],
                 ["TOPIC", "QUEUE", "QOFFSET", "PHYOFFSET", "STORED", "MSGID", "UNIQ_KEY"])


def human(d: dict, a: str, b: str) -> str:
    if d["identical"]:
        return f"identical: {a} and {b} hold the same commitlog bytes, messages and queues"
    cl = d["commitlog"]
    out = [f"differ: {a} and {b}",
           f"commitlog  A [{cl['a']['minOffset']}, {cl['a']['maxOffset']})  B [{cl['b']['minOffset']}, "
           f"{cl['b']['maxOffset']})",
           f"first divergence  {d['firstDivergence'] if d['firstDivergence'] is not None else 'none (same bytes)'}",
           f"only in A {d['onlyInACount']}  only in B {d['onlyInBCount']}  changed {len(d['changed'])}  "
           f"matched by key {d['matchedByKey']}"]
    for title, refs, n in (("only in A", d["onlyInA"], d["onlyInACount"]), ("only in B", d["onlyInB"], d["onlyInBCount"]),
                           ("changed (same offset and key, other bytes)", d["changed"], len(d["changed"]))):
        if n:
            out += ["", f"{title}:" + (f" (first {len(refs)} of {n})" if len(refs) < n else ""), _rows(refs)]
    if d["queues"]:
        out += ["", "queues whose offsets differ:",
                table([[q["topic"], q["queueId"], _r(q["minOffsetA"], q["maxOffsetA"]), _r(q["minOffsetB"], q["maxOffsetB"])]
                       for q in d["queues"]], ["TOPIC", "QUEUE", "A [MIN, MAX)", "B [MIN, MAX)"])]
    return "\n".join(out)


def _r(lo, hi) -> str:
    return "absent" if lo is None else f"[{lo}, {hi})"


def cmd_diff(store: MessageStore, args) -> int:
    if args.max < 0:
        raise CliError("--max must be 0 or more")
    cfg = load_store_config(getattr(args, "sub_config", None) or args.config, getattr(args, "set", None))
    cancel = CancelToken()
    with MessageStore.open(args.other, config=cfg, read_only=True) as other:
        try:
            with cancel_on_sigint(cancel):
                result = run(diff_task(store, other, args.max, cancel), stderr_progress()).to_json()
        except Cancelled:
            return cancelled("diff")
    emit(args, result, human(result, str(store.root), str(other.root)))
    return 0 if result["identical"] else 1
