"""The demo store: a realistic small store (orders, payments, inventory; JSON bodies; keys;
tags incl. CJK; a retry topic; delayed messages; consumer offsets with lag) written by our
own write path, so `make run` has something to show on a fresh machine.

Writing it is a task (engine.tasks): `demo_task` yields Progress (messages written) and can be
cancelled; a cancelled demo leaves no half store behind. `generate_demo_store` and
`ensure_demo_store` run it to the end for callers that only want the folder.

Fast because the per-message Python is small: the random parts of PROGRESS_EVERY messages are
drawn at once with numpy (deterministic for a seed), bodies come from a byte template, and plain
messages go through the store's compiled put (no user properties). The few that need the full
put path (retried and delayed, traced) are rare: each costs about 15 plain puts."""
from __future__ import annotations

import json
import time
from functools import partial
from importlib import resources
from operator import getitem
from pathlib import Path

import numpy as np

from engine.config import StoreConfig
from engine.format.config_json import store_config_json
from engine.tasks import CancelToken, Progress, Task, run

DEMO_SIZES = dict(mappedFileSizeCommitLog=1024 * 1024, mappedFileSizeConsumeQueue=1000 * 20,
                  maxHashSlotNum=4096, maxIndexNum=4 * 4096)
MARKER = ".rmqstore-demo"
SPAN = 6 * 3600 * 1000  # the demo's traffic covers the last six hours (ms)
PROGRESS_EVERY = 2048  # messages between two progress reports (and cancel checks); drawn at once
RETRY_EVERY = 199      # one message in RETRY_EVERY is consumed again later: %RETRY% topic, delay level 3
BATCH_EVERY = 500      # one message in BATCH_EVERY comes with an InventorySync batch of 5
TRACED = 1 / 256       # messages a tracer sampled: a traceId user property (the rest take the compiled put)


def demo_data() -> dict:
    try:
        text = resources.files("resources").joinpath("demo/demo_data.json").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, TypeError):
        text = (Path(__file__).resolve().parent.parent / "resources" / "demo" / "demo_data.json").read_text("utf-8")
    return json.loads(text)


def generate_demo_store(root, messages: int = 12000, seed: int = 7, config: StoreConfig | None = None) -> Path:
    """`config`'s explicit settings (the CLI's --set) go over the demo's small sizes."""
    return run(demo_task(root, messages, seed, config))


def demo_task(root, messages: int = 12000, seed: int = 7, config: StoreConfig | None = None,
              cancel: CancelToken | None = None) -> Task[Path]:
    """The demo store written at `root` (a new or empty folder) as a task: Progress every
    PROGRESS_EVERY messages; when cancelled (or failing), what it wrote is removed again (a
    folder it created, or the contents of the empty folder it was given): no half store remains."""
    root = Path(root)
    created = not root.exists()
    empty = created or (root.is_dir() and not any(root.iterdir()))
    try:
        yield from _write_demo(root, messages, seed, config, cancel)
    except BaseException:
        import shutil
        if created:
            shutil.rmtree(root, ignore_errors=True)
        elif empty:  # a folder the caller made for it: emptied again, kept
            for p in root.iterdir():
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
        raise
    return root


def _write_demo(root: Path, messages: int, seed: int, config: StoreConfig | None, cancel: CancelToken | None):
    from engine.store.message_store import MessageStore
    data = demo_data()
    rng = np.random.default_rng(seed)
    plan = _Plan(data)
    cfg = StoreConfig.from_mapping({**DEMO_SIZES, **{k: getattr(config, k) for k in config.explicit}}
                                   if config else DEMO_SIZES)
    with MessageStore.create(root, cfg) as store:
        # traffic spread over the last six hours, with a busy hour, so time views have a shape
        now = int(time.time() * 1000)
        span = SPAN
        clock = [now - span]
        store.writer.clock = partial(getitem, clock, 0)
        put, put_batch = store.put_message, store.put_messages
        yield Progress(0, messages, "demo", "messages", message=f"writing the demo store in {root}")
        for start in range(0, messages, PROGRESS_EVERY):
            if start:
                if cancel is not None:
                    cancel.raise_if_cancelled()
                yield Progress(start, messages, "demo", "messages")
            end = min(messages, start + PROGRESS_EVERY)
            stamps, topics, bodies, queues, tags, keys, traced = plan.messages(
                rng, start, end, messages, span, clock[0], now)
            # runs of plain messages (the compiled put), each ended by one that needs more
            extra = sorted({*traced, *range(-start % RETRY_EVERY, end - start, RETRY_EVERY),
                            *range(-start % BATCH_EVERY, end - start, BATCH_EVERY)}) + [end - start]
            lo = 0
            for j in extra:
                for stamp, t, body, q, tag, key in zip(stamps[lo:j], topics[lo:j], bodies[lo:j], queues[lo:j],
                                                       tags[lo:j], keys[lo:j]):
                    clock[0] = stamp
                    put(t, body, q, tag, key)
                if j == end - start:
                    break
                i, lo = start + j, j + 1
                clock[0], t, body, tag, key = stamps[j], topics[j], bodies[j], tags[j], keys[j]
                if j in traced:
                    put(t, body, queues[j], tag, key, properties={"traceId": traced[j]})
                else:
                    put(t, body, queues[j], tag, key)
                if i % RETRY_EVERY == 0:
                    put("%RETRY%cg_billing", body, 0, tag, key,
                        properties={"RETRY_TOPIC": t, "RECONSUME_TIME": "1"}, delay_level=3)
                if i % BATCH_EVERY == 0:
                    put_batch("InventorySync", [b'{"batch":%d,"n":%d}' % (i, n) for n in range(5)], 0, "Reserve",
                              f"batch-{i}")
        offsets = {}
        for group, subs in data["groups"].items():
            for t in subs:
                table = offsets.setdefault(f"{t}@{group}", {})
                for (tt, q), cq in store.queues.items():
                    if tt == t:
                        table[q] = int(cq.max_offset * rng.uniform(0.6, 1.0))
    store_config_json(root / "config", "consumerOffset.json", {"offsetTable": offsets})
    store_config_json(root / "config", "subscriptionGroup.json", {"subscriptionGroupTable": {
        g: {"groupName": g, "consumeEnable": True, "retryQueueNums": 1} for g in data["groups"]}})
    (root / MARKER).write_text("generated by rmqstore\n")
    yield Progress(messages, messages, "demo", "messages")


# what json.dumps(..., ensure_ascii=False) wrote for the same fields (city and sku come quoted)
_BODY = b'{"orderId": "ORD-%d", "amount": %d.%02d, "city": %s, "sku": %s, "seq": %d}'


class _Plan:
    """The demo data as tables the put loop indexes (topic names, tags of every topic in one
    list, JSON-quoted cities and skus) and `draw`, the random parts of a run of messages."""

    def __init__(self, data: dict):
        topics = data["topics"]
        self.names = list(topics)
        self.weights = np.array([topics[t]["weight"] for t in self.names], dtype=float)
        self.weights /= self.weights.sum()
        self.queues = np.array([topics[t]["queues"] for t in self.names], dtype=np.int64)
        # the tags of topic k: tag_table[tag_base[k]:tag_base[k] + tag_count[k]] (no tags: one None)
        self.tag_table: list[str | None] = []
        base, count = [], []
        for t in self.names:
            base.append(len(self.tag_table))
            self.tag_table += topics[t]["tags"] or [None]
            count.append(len(topics[t]["tags"]) or 1)
        self.tag_base, self.tag_count = np.array(base), np.array(count)
        self.cities = [json.dumps(c, ensure_ascii=False).encode() for c in data["cities"]]
        self.skus = [json.dumps(s, ensure_ascii=False).encode() for s in data["skus"]]

    def messages(self, rng, start: int, end: int, messages: int, span: int, last: int, now: int) -> tuple:
        """Messages start..end-1 (of `messages`) as columns: store times (after `last`, at most
        `now`), topics, bodies, queues, tags, keys; and the traced ones {position: traceId}. The
        random parts are drawn with one numpy call per field, not a random call per field and
        message."""
        n = end - start
        i = np.arange(start, end)
        busy = (i > 0.25 * messages) & (i < 0.4 * messages)
        gaps = np.floor(rng.exponential(span / messages / np.where(busy, 4, 1.3))).astype(np.int64)
        stamps = np.minimum(now, last + np.cumsum(gaps)).tolist()
        k = rng.choice(len(self.names), n, p=self.weights)
        queues = (rng.integers(0, 1 << 30, n) % self.queues[k]).tolist()
        tags = list(map(self.tag_table.__getitem__,
                        (self.tag_base[k] + rng.integers(0, 1 << 30, n) % self.tag_count[k]).tolist()))
        cents = rng.integers(100, 99_900, n)
        cities = map(self.cities.__getitem__, rng.integers(0, len(self.cities), n).tolist())
        skus = map(self.skus.__getitem__, rng.integers(0, len(self.skus), n).tolist())
        users = np.where(rng.random(n) < 0.5, rng.integers(0, 500, n), -1).tolist()
        traced = np.flatnonzero(rng.random(n) < TRACED).tolist()
        bits = rng.integers(0, 1 << 63, len(traced)).tolist()
        orders = (i // 3 + 100000).tolist()
        bodies = [_BODY % t for t in zip(orders, (cents // 100).tolist(), (cents % 100).tolist(), cities, skus,
                                         i.tolist())]
        keys = [f"ORD-{o} user-{u}" if u >= 0 else f"ORD-{o}" for o, u in zip(orders, users)]
        return (stamps, list(map(self.names.__getitem__, k.tolist())), bodies, queues, tags, keys,
                {j: f"{b:016x}" for j, b in zip(traced, bits)})


def demo_messages(messages: int, seed: int = 7, chunk: int = PROGRESS_EVERY):
    """The demo's own messages (as `demo_task` draws them for `seed`), `chunk` at a time, as
    lists of (topic, body, queueId, tags, keys): the bench's single-put reference puts the
    same messages the demo writes."""
    rng = np.random.default_rng(seed)
    plan = _Plan(demo_data())
    now = int(time.time() * 1000)
    for start in range(0, messages, chunk):
        yield list(zip(*plan.messages(rng, start, min(messages, start + chunk), messages, SPAN, now, now)[1:6]))


def ensure_demo_store(root) -> Path:
    """The demo store at `root`, generated on first use."""
    return run(ensure_demo_task(root))


def ensure_demo_task(root, cancel: CancelToken | None = None) -> Task[Path]:
    """`ensure_demo_store` as a task: nothing to report when the demo store is there."""
    root = Path(root)
    if not (root / MARKER).exists():
        import shutil
        shutil.rmtree(root, ignore_errors=True)
        yield from demo_task(root, cancel=cancel)
    return root
