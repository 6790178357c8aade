# included by engine/accel/_page.pyx: one record decoded into a Message (check_record's MESSAGE
# answer built in C: the fields, the hosts, the body, the topic and the properties dict)

cdef object _Message = None
cdef object _RecordResult = None
cdef object _MESSAGE_STATUS = None


cdef object _CommitLog = None    # engine.store.commit_log.CommitLog (its messages_at is this module's)
cdef object _Options = None      # engine.format.message.DecodeOptions (a slots dataclass)
cdef Py_ssize_t _opt_off[3]     # its check_crc, force_verify_prop_crc and accept_v2 slots (-1: not one)
OPTION_FLAGS = ("check_crc", "force_verify_prop_crc", "accept_v2")


def bind_message(message_cls, result_cls, message_status, options_cls=None):
    """engine.format.message's Message, RecordResult, RecordStatus.MESSAGE and DecodeOptions."""
    global _Message, _RecordResult, _MESSAGE_STATUS, _Options
    _Message, _RecordResult, _MESSAGE_STATUS, _Options = message_cls, result_cls, message_status, options_cls
    for i, name in enumerate(OPTION_FLAGS):
        _opt_off[i] = rmq_slot_offset(options_cls.__dict__.get(name)) if options_cls is not None else -1


def bind_commit_log(cls):
    """engine.store.commit_log.CommitLog, whose messages_at is this module's: a key query of
    one calls _messages_at straight (a subclass may have its own, called by name)."""
    global _CommitLog
    _CommitLog = cls


cdef int read_flags(opts) except -1:
    """check's F_* flags from a DecodeOptions: its slots read in place (three attribute lookups
    were a tenth of a key query's record read), any other object by attribute."""
    if type(opts) is _Options and _opt_off[0] >= 0 and _opt_off[1] >= 0 and _opt_off[2] >= 0:
        return ((F_CRC if rmq_slot_truth(opts, _opt_off[0]) else 0) | (F_FORCE if rmq_slot_truth(opts, _opt_off[1]) else 0)
                | (F_V2 if rmq_slot_truth(opts, _opt_off[2]) else 0))
    return (F_CRC if opts.check_crc else 0) | (F_FORCE if opts.force_verify_prop_crc else 0) | (F_V2 if opts.accept_v2 else 0)


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
    flags = read_flags(opts)
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


cdef inline void prefetch_whole(const uint8_t* b, Py_ssize_t L, Py_ssize_t pos) noexcept nogil:
    """Ask for every line of the record at pos (its size from its first field) before check
    reads it: check jumps from the head past the body to the topic and properties, and the
    copy that follows reads the rest; requested together, the misses overlap. At most the
    first 16 KiB (a damaged size field must not cost a sweep of the file)."""
    cdef int32_t size
    cdef Py_ssize_t k, end
    if pos < 0 or pos + 4 > L:
        return
    size = be32(b + pos)
    if size <= 0:
        return
    end = pos + (size if size < 16384 else 16384)
    if end > L:
        end = L
    k = (pos & ~63) + 64
    while k < end:
        rmq_prefetch(b + k)
        k += 64


def messages_at(cl, offsets):
    """CommitLog.messages_at (query_message calls _messages_at straight)."""
    return _messages_at(cl, offsets)


cdef list _messages_at(cl, offsets):
    """CommitLog.messages_at: lookMessageByOffset for each offset of a key query's answer, in
    one call (bound to the CommitLog, no Python frame): the records the compiled check decides
    become Messages here; any other answer is cl.get_message's (a Message or None). Offsets
    with no message are left out. The queue's file list is read once per call, not per offset
    (a key query's hits are a few offsets: the lookups were most of its cost)."""
    if isinstance(cl, LogState):
        q, opts = (<LogState>cl).queue, (<LogState>cl).read_opts
    else:
        q, opts = cl.queue, cl.read_opts
    cdef Row r
    cdef int32_t size
    cdef int st, flags
    cdef int64_t o, start = 0, wp, base = 0, fsize = 0
    cdef Py_ssize_t n
    cdef Py_buffer v
    cdef list out = []
    cdef list files
    if isinstance(q, FilesState):
        files, fsize = (<FilesState>q).files, (<FilesState>q).file_size
    else:
        files, fsize = q.files, q.file_size
    flags = read_flags(opts)
    n = len(files)
    if n:
        base = file_start(files[0])
    for off in offsets:
        o = off
        f = file_at(files, n, base, fsize, o, &start)
        if f is None:
            f = q.find(o)
            if f is None:
                continue
            start = file_start(f)
        if isinstance(f, FileState) and not (<FileState>f).wrote_py:
            wp, buf = (<FileState>f).wrote, (<FileState>f).buf
        else:
            wp, buf = f.wrote_position, f.buf
        if o - start >= wp or o < start:
            continue
        PyObject_GetBuffer(buf, &v, PyBUF_SIMPLE)
        try:
            prefetch_whole(<const uint8_t*>v.buf, v.len, o - start)
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
    if isinstance(self, StoreState):
        idx, cl = (<StoreState>self).index, (<StoreState>self).commitlog
    else:
        idx, cl = self.index, self.commitlog
    r = None
    if isinstance(idx, IndexServiceBase) and type(topic) is str and type(key) is str and type(max_num) is int:
        r = (<IndexServiceBase>idx).fast(topic, key, max_num, begin, end, cap)
    offs, lts, loff = r if r is not None else idx.query_offset(topic, key, max_num, begin, end, cap)
    msgs = _messages_at(cl, offs) if type(cl) is _CommitLog else cl.messages_at(offs)
    return new_query_result(msgs, False, offs, [], lts, loff)
