# included by engine/accel/_append.pyx: the writer's Appender, made on first use

def appender(w):
    """The writer's Appender (made on first use)."""
    a = w._appender
    if a is None:
        a = w._appender = Appender(w)
    return a
