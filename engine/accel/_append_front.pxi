# included by engine/accel/_append.pyx: the writer's Appender and MessageStore.put_message

def appender(w):
    """The writer's Appender (made on first use)."""
    a = w._appender
    if a is None:
        a = w._appender = Appender(w)
    return a


cdef dict _store_globals = {}


def bind_store_module(dict g):
    """engine.store.message_store's globals: put_message reads its `_APPEND` at every call,
    as the Python method does (tests set it to None to compare the two paths)."""
    global _store_globals
    _store_globals = g


def put_message(store, topic, body=b"", queue_id=None, tags=None, keys=None, properties=None, flag=0, **kw):
    """Append one message (RocketMQ encoding, UNIQ_KEY generated unless given) and dispatch it.

    MessageStore.put_message when the kernels are built: a plain message goes to the writer's
    Appender without a Python frame (a sixth of a put's time); anything else, and any put the
    Appender hands back, is MessageStore._put_message_py, the reference."""
    if properties is None and not flag and not kw and type(topic) is str \
            and _store_globals.get("_APPEND") is not None:
        w = store.writer
        if w is not None:
            a = w._appender
            if a is None:
                a = appender(w)
            out = (<Appender?>a)._put1(<str>topic, body, queue_id, tags, keys)
            if out is not None:
                return out
    return store._put_message_py(topic, body, queue_id, tags, keys, properties, flag, **kw)
