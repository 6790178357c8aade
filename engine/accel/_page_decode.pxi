# included by engine/accel/_page.pyx: one record decoded into a Message (check_record's MESSAGE
# answer built in C: the fields, the hosts, the body, the topic and the properties dict)

# check_record's answer types (engine.format.message imports _message, not this module: no cycle)
from engine.format.message import RecordResult, RecordStatus, check_record

cdef object _MESSAGE = RecordStatus.MESSAGE
cdef object _flags_of = None   # the (frozen) DecodeOptions whose flags _flags holds: the last one asked
cdef int _flags = 0
cdef int read_flags(opts) except -1:
    """check's F_* flags from a DecodeOptions (a store's reads keep asking with the same one)."""
    global _flags_of, _flags
    if opts is not _flags_of:
        _flags = (F_CRC if opts.check_crc else 0) | (F_FORCE if opts.force_verify_prop_crc else 0) | (F_V2 if opts.accept_v2 else 0)
        _flags_of = opts
    return _flags


cdef object lazy_message(const uint8_t* b, Py_ssize_t start, const Row* r, int64_t offset, Anchor src):
    """Message for the record at b[start:] whose check wrote `r` (positions in r count from b).
    With `src` (an Anchor on b's map) the lazy parts are read from the map (pages and key
    queries); without, from a copy of the record made here, so the message is a
    snapshot (single reads: what check, recovery and tools compare against later)."""
    cdef Message m = Message.__new__(Message)
    cdef Py_ssize_t bh = HOST_V6 if r.sysFlag & BORNHOST_V6_FLAG else HOST_V4
    cdef Py_ssize_t sh = HOST_V6 if r.sysFlag & STOREHOST_V6_FLAG else HOST_V4
    if src is not None:
        m._src = src
        m._b = b + start
    else:
        m._src = PyBytes_FromStringAndSize(<const char*>b + start, r.storeSize)
        m._b = <const uint8_t*>PyBytes_AS_STRING(m._src)
    m.queueOffset, m.commitLogOffset, m.bornTimestamp = r.queueOffset, offset, r.bornTimestamp
    m.storeTimestamp, m.preparedTransactionOffset = r.storeTimestamp, r.preparedTransactionOffset
    m.physicalOffsetField, m.tagsCode = r.physicalOffsetField, r.tagsCode
    m.queueId, m.storeSize, m.bodyCRC, m.flag, m.sysFlag = r.queueId, r.storeSize, r.bodyCRC, r.flag, r.sysFlag
    m.reconsumeTimes, m.magicCode = r.reconsumeTimes, r.magicCode
    m._tp, m._tl = <int32_t>(r.topicPos - start), r.topicLength
    m._bp, m._bl = <int32_t>(r.bodyPos - start), r.bodyLength
    m._pp, m._pl = <int32_t>(r.propertiesPos - start), r.propertiesLength
    m._hp, m._hl = OFF_BORNHOST, <int32_t>bh
    m._sp, m._sl = <int32_t>(OFF_BORNHOST + bh + (OFF_STOREHOST - OFF_BORNHOST)), <int32_t>sh
    m._have = 0
    return m


cdef object page_message(Anchor src, const Row* r):
    """Message for a page row (positions in the file src holds)."""
    cdef Py_ssize_t bh = HOST_V6 if r.sysFlag & BORNHOST_V6_FLAG else HOST_V4
    cdef Py_ssize_t sh = HOST_V6 if r.sysFlag & STOREHOST_V6_FLAG else HOST_V4
    return lazy_message(<const uint8_t*>src.v.buf, r.bodyPos - OFF_BODY - bh - sh, r, r.commitLogOffset, src)


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
        return RecordResult(_MESSAGE, size, lazy_message(b, pos, &r, offset, None))
    finally:
        PyBuffer_Release(&v)


cpdef list messages_at(cl, offsets):
    """CommitLog.messages_at: lookMessageByOffset for each offset of a key query's answer, in one
    call: the records the compiled check decides become Messages here, on the map like a page's
    (the broker answers slices too; no copy of a record nobody may read), any other answer is
    cl.get_message's; offsets with no message are left out. The file list is read once a call."""
    if not offsets:   # (a key with no hit: nothing of the log read)
        return []
    q, opts = cl.queue, cl.read_opts
    cdef Row r
    cdef int32_t size
    cdef int k, flags
    cdef int64_t o, base = 0, fsize = 0
    cdef Found fo
    cdef Py_ssize_t n, i
    cdef Anchor a = None
    cdef list out = [], files = queue_files(q, &fsize)
    held = None
    flags = read_flags(opts)
    n = len(files)
    if n:
        span_of(files[0], &fo)
        base = fo.start
    for off in offsets:
        o = off
        f = None
        if n and o >= base and fsize > 0:  # straight to the file, files being fsize apart
            i = (o - base) // fsize
            if i < n:
                f = files[i]
                st = span_of(f, &fo)   # MappedFile's offset, positions and view (engine/accel/_state.pyx)
                if not fo.start <= o < fo.start + fsize:
                    f = None
        if f is None:
            f = q.find(o)
            if f is None:
                continue
            st = span_of(f, &fo)
        buf = (<FileState>st).buf if st is not None else f.buf
        if o - fo.start >= fo.wrote or o < fo.start:
            continue
        if buf is not held:   # one export a file, held by its messages as a page's are
            a, held = new_anchor(buf), buf
        if o - fo.start + 4 <= a.v.len:   # (check jumps from the head past the body to the topic)
            prefetch_lines(<const uint8_t*>a.v.buf, a.v.len, o - fo.start, be32(<const uint8_t*>a.v.buf + o - fo.start))
        k = check(<const uint8_t*>a.v.buf, a.v.len, o - fo.start, min(fo.wrote, a.v.len), flags, &r, &size)
        if k == S_MESSAGE:
            out.append(lazy_message(<const uint8_t*>a.v.buf, o - fo.start, &r, o, a))
        else:
            m = cl.get_message(o)
            if m is not None:
                out.append(m)
    return out


_MESSAGES_AT = messages_at   # CommitLog.messages_at when this module is built (a subclass may answer its own)
cdef object _log_type = None  # the last commitlog class found to answer with _MESSAGES_AT


def query_message(store, topic, key, begin=0, end=0x7FFFFFFFFFFFFFFF, max_num=64, raw=False, cap=None):
    """Queries.query_message compiled (queries.py's _query_message_py is the reference and says
    what it answers): the raw answer in one call -- IndexService.query_offset (its compiled front
    in the common case), the hits sorted, lookMessageByOffset for each; the exact one is _query_exact."""
    global _log_type
    if not raw:
        return store.queries._query_exact(topic, key, begin, end, max_num, cap)
    idx, cl = store.index, store.commitlog
    r = None
    st = getattr(idx, "state", None)   # IndexService.state: its files, cfg and walker
    if type(st) is IndexState and type(topic) is str and type(key) is str and type(max_num) is int:
        r = query_fast(<IndexState>st, topic, key, max_num, begin, end, cap)
    offs, lts, loff = r if r is not None else idx.query_offset(topic, key, max_num, begin, end, cap)
    cdef QueryResult q = QueryResult.__new__(QueryResult)
    if type(cl) is not _log_type and type(cl).messages_at is _MESSAGES_AT:
        _log_type = type(cl)
    srt = offs if len(offs) < 2 else sorted(offs)   # (not copied: messages_at only reads it)
    q.messages = messages_at(cl, srt) if type(cl) is _log_type else cl.messages_at(srt)
    q.truncated, q.offsets, q.false_hits = False, offs, []
    q.indexLastUpdateTimestamp, q.indexLastUpdatePhyoffset = lts, loff
    return q
