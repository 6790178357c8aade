"""The demo store: a realistic small store (orders, payments, inventory; JSON bodies; keys;
tags incl. CJK; a retry topic; delayed messages; consumer offsets with lag) written by our
own write path, so `make run` has something to show on a fresh machine.

Writing it is a task (engine.tasks): `demo_task` yields Progress (messages written) and can be
cancelled; a cancelled demo leaves no half store behind. `generate_demo_store` and
`ensure_demo_store` run it to the end for callers that only want the folder."""
from __future__ import annotations

import json
import random
import time
from importlib import resources
from pathlib import Path

from engine.config import StoreConfig
from engine.format.config_json import store_config_json
from engine.tasks import CancelToken, Progress, Task, run

DEMO_SIZES = dict(mappedFileSizeCommitLog=1024 * 1024, mappedFileSizeConsumeQueue=1000 * 20,
                  maxHashSlotNum=4096, maxIndexNum=4 * 4096)
MARKER = ".rmqstore-demo"
PROGRESS_EVERY = 250   # messages between two progress reports (and cancel checks)


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
    """The demo store written at `root` as a task: Progress every few hundred messages; when
    cancelled (or failing), a folder it created is removed again, so no half store remains."""
    root = Path(root)
    created = not root.exists()
    try:
        yield from _write_demo(root, messages, seed, config, cancel)
    except BaseException:
        if created:
            import shutil
            shutil.rmtree(root, ignore_errors=True)
        raise
    return root


def _write_demo(root: Path, messages: int, seed: int, config: StoreConfig | None, cancel: CancelToken | None):
    from engine.store.message_store import MessageStore
    data = demo_data()
    rng = random.Random(seed)
    topics = data["topics"]
    names = list(topics)
    weights = [topics[t]["weight"] for t in names]
    cfg = StoreConfig.from_mapping({**DEMO_SIZES, **{k: getattr(config, k) for k in config.explicit}}
                                   if config else DEMO_SIZES)
    with MessageStore.create(root, cfg) as store:
        # traffic spread over the last six hours, with a busy hour, so time views have a shape
        now = int(time.time() * 1000)
        span = 6 * 3600 * 1000
        clock = [now - span]
        store.writer.clock = lambda: clock[0]
        yield Progress(0, messages, "demo", "messages", message=f"writing the demo store in {root}")
        for i in range(messages):
            if i % PROGRESS_EVERY == 0 and i:
                if cancel is not None:
                    cancel.raise_if_cancelled()
                yield Progress(i, messages, "demo", "messages")
            busy = 0.25 < i / messages < 0.4
            clock[0] = min(now, clock[0] + int(rng.expovariate(1.0 / (span / messages / (4 if busy else 1.3)))))
            t = rng.choices(names, weights)[0]
            spec = topics[t]
            order = f"ORD-{100000 + i // 3}"
            body = json.dumps({"orderId": order, "amount": round(rng.uniform(1, 999), 2),
                               "city": rng.choice(data["cities"]), "sku": rng.choice(data["skus"]),
                               "seq": i}, ensure_ascii=False).encode()
            tags = rng.choice(spec["tags"]) if spec["tags"] else None
            keys = [order] + ([f"user-{rng.randrange(500)}"] if rng.random() < 0.5 else [])
            store.put_message(t, body, queue_id=rng.randrange(spec["queues"]), tags=tags, keys=keys,
                              properties={"traceId": f"{rng.getrandbits(64):016x}"})
            if i % 97 == 0:
                store.put_message("%RETRY%cg_billing", body, queue_id=0, tags=tags, keys=keys,
                                  properties={"RETRY_TOPIC": t, "RECONSUME_TIME": "1"}, delay_level=3)
            if i % 500 == 0:
                store.put_messages("InventorySync", [b'{"batch":%d,"n":%d}' % (i, n) for n in range(5)],
                                   queue_id=0, tags="Reserve", keys=f"batch-{i}")
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
