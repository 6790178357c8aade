# included by engine/accel/_append.pyx: the Appender made on first use, and put_message's compiled front
def appender(w):
    """The writer's Appender (made on first use)."""
    a = w._appender
    if a is None:
        a = w._appender = Appender(w)
    return a


def put_message(store, topic, body=b"", queue_id=None, tags=None, keys=None, properties=None, flag=0, **kw):
    """MessageStore.put_message compiled (engine/store/message_store.py's _put_message_py is the
    reference): a plain message goes to the writer's Appender without a Python frame; anything
    else, and any put the Appender hands back, is the reference's."""
    if properties is None and not flag and not kw and type(topic) is str:
        w = store.writer
        if w is not None:
            a = w._appender
            if a is None:
                a = appender(w)
            out = (<Appender?>a)._put1(<str>topic, body, queue_id, tags, keys)
            if out is not None:
                return out
    return store._put_message_py(topic, body, queue_id, tags, keys, properties, flag, **kw)
