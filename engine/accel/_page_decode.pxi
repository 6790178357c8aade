# included by engine/accel/_page.pyx: one record decoded into a Message (check_record's MESSAGE
# answer built in C: the fields, the hosts, the body, the topic and the properties dict)

cdef object _Message = None
cdef object _RecordResult = None
cdef object _MESSAGE_STATUS = None


def bind_message(message_cls, result_cls, message_status):
    """engine.format.message's Message, RecordResult and RecordStatus.MESSAGE."""
    global _Message, _RecordResult, _MESSAGE_STATUS
    _Message, _RecordResult, _MESSAGE_STATUS = message_cls, result_cls, message_status


cdef inline str utf8(const uint8_t* b, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char*>b, n, "replace")


cdef dict parse_props(const uint8_t* b, Py_ssize_t p, Py_ssize_t n):
    """engine.format.properties.parse_properties over the raw bytes: segments split by 0x02,
    the name up to the first 0x01, both non-empty, later duplicates win. (0x01 and 0x02 are
    never inside a UTF-8 sequence, so decoding each part gives what decoding the whole does.)"""
    cdef dict out = {}
    cdef Py_ssize_t q = p, stop = p + n, seg, k
    while q <= stop:
        seg = q
        q = find_sep(b, q, stop)
        k = seg
        while k < q and b[k] != 1:
            k += 1
        if seg < k < q - 1:
            out[utf8(b + seg, k - seg)] = utf8(b + k + 1, q - k - 1)
        q += 1
    return out


def decode(buf, Py_ssize_t pos, Py_ssize_t limit, int64_t offset, opts):
    """check_record(buf, pos, limit, offset, opts) when its answer is a MESSAGE (a RecordResult);
    None for every other answer (blank, damage, a record that needs the Python rules): the
    caller asks check_record, which also gives the reason."""
    cdef Py_buffer v
    cdef Row r
    cdef int32_t size
    cdef int st, flags
    cdef const uint8_t* b
    flags = (F_CRC if opts.check_crc else 0) | (F_FORCE if opts.force_verify_prop_crc else 0) | (F_V2 if opts.accept_v2 else 0)
    PyObject_GetBuffer(buf, &v, PyBUF_SIMPLE)
    try:
        if limit > v.len:
            limit = v.len
        if pos < 0 or pos >= limit:
            return None
        b = <const uint8_t*>v.buf
        st = check(b, v.len, pos, limit, flags, &r, &size)
        if st != S_MESSAGE:
            return None
        return _RecordResult(_MESSAGE_STATUS, size, lazy_message(b, pos, &r, offset, None))
    finally:
        PyBuffer_Release(&v)


def messages_at(cl, offsets):
    """CommitLog.messages_at: lookMessageByOffset for each offset of a key query's answer, in
    one call (bound to the CommitLog, no Python frame): the records the compiled check decides
    become Messages here; any other answer is cl.get_message's (a Message or None). Offsets
    with no message are left out. The queue's file list is read once per call, not per offset
    (a key query's hits are a few offsets: the lookups were most of its cost)."""
    q, opts = cl.queue, cl.read_opts
    cdef Row r
    cdef int32_t size
    cdef int st, flags
    cdef int64_t o, start = 0, wp, base = 0, fsize = 0
    cdef Py_ssize_t n
    cdef Py_buffer v
    cdef list out = []
    cdef list files = q.files
    flags = (F_CRC if opts.check_crc else 0) | (F_FORCE if opts.force_verify_prop_crc else 0) | (F_V2 if opts.accept_v2 else 0)
    n = len(files)
    if n:
        fsize = q.file_size
        base = files[0].file_from_offset
    for off in offsets:
        o = off
        f = file_at(files, n, base, fsize, o, &start)
        if f is None:
            f = q.find(o)
            if f is None:
                continue
            start = f.file_from_offset
        wp = f.wrote_position
        if o - start >= wp or o < start:
            continue
        PyObject_GetBuffer(f.buf, &v, PyBUF_SIMPLE)
        try:
            st = check(<const uint8_t*>v.buf, v.len, o - start, min(wp, v.len), flags, &r, &size)
            if st == S_MESSAGE:
                out.append(lazy_message(<const uint8_t*>v.buf, o - start, &r, o, None))
        finally:
            PyBuffer_Release(&v)
        if st != S_MESSAGE:
            m = cl.get_message(o)
            if m is not None:
                out.append(m)
    return out


cdef object _QueryResult = None
cdef Py_ssize_t _qr_off[6]
cdef bint _qr_direct = False
QUERY_RESULT_FIELDS = ("messages", "truncated", "offsets", "false_hits", "indexLastUpdateTimestamp",
                       "indexLastUpdatePhyoffset")


def bind_query_result(result_cls):
    """engine.store.queries.QueryResult (a slots dataclass). Its six slots are filled here
    straight from their member descriptors' offsets (the dataclass __init__ is a Python frame,
    a third of a raw key query's overhead); any other shape falls back to setattr."""
    global _QueryResult, _qr_direct
    _QueryResult = result_cls
    _qr_direct = False
    for i, name in enumerate(QUERY_RESULT_FIELDS):
        _qr_off[i] = rmq_slot_offset(result_cls.__dict__.get(name))
        if _qr_off[i] < 0:
            return
    _qr_direct = True


def query_result_direct():
    """Are QueryResults filled through their slots (the bound class has the expected shape)?"""
    return _qr_direct


cdef object new_query_result(messages, truncated, offsets, false_hits, lts, loff):
    cdef object r = rmq_new_instance(_QueryResult)
    if _qr_direct:
        rmq_slot_set(r, _qr_off[0], messages)
        rmq_slot_set(r, _qr_off[1], truncated)
        rmq_slot_set(r, _qr_off[2], offsets)
        rmq_slot_set(r, _qr_off[3], false_hits)
        rmq_slot_set(r, _qr_off[4], lts)
        rmq_slot_set(r, _qr_off[5], loff)
        return r
    for name, v in zip(QUERY_RESULT_FIELDS, (messages, truncated, offsets, false_hits, lts, loff)):
        setattr(r, name, v)
    return r


def query_message(self, topic, key, begin=0, end=0x7FFFFFFFFFFFFFFF, max_num=64, raw=False, cap=None):
    """Queries.query_message (the reference, and its docstring, is engine/store/queries.py): the
    raw answer -- IndexService.query_offset, then lookMessageByOffset for every hit -- with no
    Python frame; the default (exact) answer is Queries._query_exact's."""
    if not raw:
        return self._query_exact(topic, key, begin, end, max_num, cap)
    offs, lts, loff = self.index.query_offset(topic, key, max_num, begin, end, cap)
    return new_query_result(self.commitlog.messages_at(offs), False, offs, [], lts, loff)
