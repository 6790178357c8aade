"""What a 5.x store adds to a message at put, under the append lock, before it is encoded:
INNER_MULTI_QUEUE_OFFSET for LMQ multi-dispatch (LmqDispatch.wrapLmqDispatch) and INNER_BASE
for an inner batch put to a BatchCQ topic (BatchConsumeQueue.assignQueueOffset), with the
checks DefaultMessageStore.asyncPutMessage makes first."""
from __future__ import annotations

from engine.errors import MessageRejectedError
from engine.format import lmq as L
from engine.format.inner_batch import INNER_BASE, INNER_BATCH_FLAG, INNER_NUM, inner_num
from engine.store import lmq as _lmq


def needs_assign(store, drafts) -> bool:
    bt = store.batch_topics
    for d in drafts:
        p = d.properties
        if (bt and d.topic in bt) or L.INNER_MULTI_DISPATCH in p or INNER_NUM in p or d.sysFlag & INNER_BATCH_FLAG:
            return True
    return False


def assign(writer, drafts) -> list[str]:
    """Checks and sets the store-added properties (the caller holds the writer's lock and puts
    the drafts right after); returns the LMQ names whose counters advance once they are in."""
    store = writer.store
    advance: list[str] = []
    for d in drafts:
        p = d.properties
        inner = bool(d.sysFlag & INNER_BATCH_FLAG)
        if INNER_NUM in p and not inner:
            raise MessageRejectedError("the message has INNER_NUM but is not an inner batch (MESSAGE_ILLEGAL)")
        if inner:
            if d.topic not in store.batch_topics:
                raise MessageRejectedError(f"an inner batch needs a BatchCQ topic; {d.topic!r} is not one "
                                           "(queue.type=BatchCQ in its topic config) (MESSAGE_ILLEGAL)")
            if len(drafts) > 1:
                raise MessageRejectedError("an inner batch is one record: put it alone")
            if not (inner_num(p) or 0) > 0 or inner_num(p) > 0x7FFF:
                raise MessageRejectedError(f"INNER_NUM {p.get(INNER_NUM)!r} is not a count of 1..32767")
            set_property(d, INNER_BASE, str(writer.queue_offsets.get((d.topic, d.queueId), 0)))
        tmp = dict(p)
        names = _lmq.wrap(writer, d.topic, tmp)
        if names is not None:
            set_property(d, L.INNER_MULTI_QUEUE_OFFSET, tmp[L.INNER_MULTI_QUEUE_OFFSET])
            advance += names
    return advance


def set_property(d, name: str, value: str) -> None:
    """In the draft's map and, when it carries its exact stored string, appended to that."""
    d.properties[name] = value
    raw = d.propertiesRaw
    if raw is not None:
        pair = f"{name}\x01{value}"
        if not raw:
            d.propertiesRaw = pair + "\x02"
        elif raw.endswith("\x02"):
            d.propertiesRaw = raw + pair + "\x02"
        else:
            d.propertiesRaw = raw + "\x02" + pair


def queue_step(d) -> int:
    """Queue offsets one record takes: INNER_NUM for an inner batch, else 1."""
    if d.sysFlag & INNER_BATCH_FLAG:
        return inner_num(d.properties) or 1
    return 1


def inner_batch_draft(writer, topic: str, messages, queue_id=None, properties=None, keys=None, tags=None):
    """The record SendMessageProcessor.sendBatchMessage builds for a BatchCQ topic: the client's
    messages ((body, properties) each; a UNIQ_KEY given to each that has none) encoded into one
    body, INNER_NUM, sysFlag NEED_UNWRAP | INNER_BATCH."""
    from engine.format import properties as P
    from engine.format.inner_batch import NEED_UNWRAP_FLAG, encode_inner
    if not messages:
        raise MessageRejectedError("an inner batch needs at least one message")
    if len(messages) > 0x7FFF:
        raise MessageRejectedError(f"an inner batch holds at most 32767 messages, not {len(messages)}")
    inner = []
    for body, props in messages:
        props = dict(props or {})
        props.setdefault(P.UNIQ_KEY, writer.uniq.next())
        inner.append((bytes(body), props, 0))
    props = dict(properties or {})
    props[INNER_NUM] = str(len(inner))
    return writer.draft(topic, encode_inner(inner), queue_id, tags, keys, props,
                        sys_flag=NEED_UNWRAP_FLAG | INNER_BATCH_FLAG)
