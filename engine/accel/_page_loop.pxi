# included by engine/accel/_page.pyx: the page loop and getMessage

# ---- the page loop (engine.store.page.read_page; its pure twin _read_page_py is the reference) ----------
# The page class and check_record's callback are the caller's (arguments, or MessageStore._page_kit).
from engine.errors import CorruptDataError
from engine.format.cq_unit import WHY_EXPIRED, WHY_FILLER, WHY_INVALID, roll_next_file


cdef inline Py_ssize_t unit_cap(Py_ssize_t max_count) noexcept:
    """engine.format.cq_unit.broker_unit_cap: the units one broker getMessage examines at most."""
    cdef Py_ssize_t n = max_count * CQ_UNIT_SIZE
    return (n if n > MAX_FILTER_MESSAGE_SIZE else MAX_FILTER_MESSAGE_SIZE) // CQ_UNIT_SIZE


cdef class PageState:
    """A MessagePage's storage, owned by the page (engine.store.page.PageState is the pure twin):
    a page of small messages is read in a few microseconds, so building it, its length and its
    items must not cost Python frames. `rows` holds a Row per message; a Message is built from
    its row and the map when first asked for."""
    cdef public Py_ssize_t n
    cdef public object rows, views, cache, cols, fidx, froms
    cdef public object opts, files, units   # a broker page's: to check its rows when read
    cdef list _anchors   # an Anchor per view, made when a Message first needs it

    def __init__(self, Py_ssize_t n=0, bytearray rows not None=bytearray(), views=(), cache=None):
        self.n, self.rows, self.views, self.cache = n, rows, views, cache

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.get(k) for k in range(*i.indices(self.n))]
        cdef Py_ssize_t k = index(i)
        if k < 0:
            k += self.n
        if not 0 <= k < self.n:
            raise IndexError("page index out of range")
        return self.get(k)

    def __iter__(self):
        """Every message built in one pass (a Message per row, from the row and the map)."""
        cdef Py_ssize_t i
        for i in range(self.n):
            self.get(i)
        return iter(self.cache if self.cache is not None else ())

    cdef Anchor anchor(self, Py_ssize_t k):
        if self._anchors is None:
            self._anchors = [None] * len(self.views)
        a = self._anchors[k]
        if a is None:
            a = self._anchors[k] = new_anchor(self.views[k])
        return <Anchor>a

    cpdef object get(self, Py_ssize_t i):
        cdef list c = self.cache
        cdef Row* r = <Row*>(<char*>self.rows + i * sizeof(Row))
        cdef Py_ssize_t k
        if c is None:
            c = self.cache = [None] * self.n
        m = c[i]
        if m is None:
            if r.magicCode == UNCHECKED:
                if i == 0:
                    self.touch_rows()
                self.prefetch_ahead(i + PREFETCH_AHEAD)
                self.check_row(r, i)
                m = c[i]
                if m is not None:  # check_record's own answer
                    return m
            m = c[i] = page_message(self.anchor(r.file), r)
        return m

    cdef void touch_rows(self):
        """At the first message: records far apart (far_apart) loaded in one loop (touch_record)
        for the checks after it; records close together asked for PREFETCH_AHEAD rows ahead."""
        global rmq_sink
        cdef Py_ssize_t i, f = -1
        cdef Row* r = <Row*><char*>self.rows
        cdef Anchor a = None
        cdef uint32_t acc = 0
        if self.n == 0 or not far_apart(r.commitLogOffset, (r + self.n - 1).commitLogOffset):
            for i in range(PREFETCH_AHEAD):
                self.prefetch_ahead(i)
            return
        for i in range(self.n):
            if r[i].magicCode == UNCHECKED:
                if r[i].file != f:
                    f, a = r[i].file, self.anchor(r[i].file)
                acc += touch_record(<const uint8_t*>a.v.buf, a.v.len, r[i].bodyPos, r[i].storeSize)
        rmq_sink = acc

    cdef void prefetch_ahead(self, Py_ssize_t i):
        """Row i's record (the unit's size: no load of the record) asked for a few rows before
        its check reads the head and the tail and a reader copies the body."""
        cdef Row* r
        cdef Anchor a
        if i < self.n:
            r = <Row*>(<char*>self.rows + i * sizeof(Row))
            if r.magicCode == UNCHECKED:
                a = self.anchor(r.file)
                prefetch_lines(<const uint8_t*>a.v.buf, a.v.len, r.bodyPos, r.storeSize)

    cdef int check_row(self, Row* r, Py_ssize_t i) except -1:
        """Read a broker page's row i when first asked for (the broker hands out the unit's
        bytes unread): its record must be a message of the unit's size, as the reference
        page requires (engine.store.page: PageState.unit_message). A record the Python rules
        decide goes through check_record (its Message kept in the cache)."""
        cdef Anchor a = self.anchor(r.file)
        cdef Row t
        cdef int32_t size
        cdef int64_t phy = r.commitLogOffset
        cdef Py_ssize_t pos = r.bodyPos
        st = check(<const uint8_t*>a.v.buf, a.v.len, pos, pos + r.storeSize, read_flags(self.opts), &t, &size)
        if st == S_MESSAGE and size == r.storeSize:
            t.commitLogOffset, t.file = phy, r.file
            r[0] = t
            return 0
        if st == S_PY and size == r.storeSize:
            res = check_record(self.views[r.file], pos, pos + size, phy, self.opts)
            if res.status is _MESSAGE and res.size == size:
                t.commitLogOffset, t.file, t.tagsCode = phy, r.file, res.message.tagsCode
                r[0] = t
                self.cache = [None] * self.n if self.cache is None else self.cache
                self.cache[i] = res.message
                return 0
        raise CorruptDataError(f"no message of the ConsumeQueue unit's size ({r.storeSize}) at commitlog offset {phy}",
                               path=getattr(self.files[r.file], "path", None), offset=phy)

    def fill(self):
        """Every row checked (the columns read them all)."""
        cdef Py_ssize_t i
        cdef Row* r
        for i in range(self.n):
            r = <Row*>(<char*>self.rows + i * sizeof(Row))
            if r.magicCode == UNCHECKED:
                self.check_row(r, i)


cdef object new_page(page_cls, Py_ssize_t n, rows, views, cache, opts=None, files=None):
    """A `page_cls` (MessagePage) owning a PageState of n rows."""
    cdef PageState s = PageState.__new__(PageState)
    s.n, s.rows, s.views, s.cache, s.opts, s.files = n, rows, views, cache, opts, files
    p = rmq_new(page_cls)
    p.state = s
    return p


cdef struct Found:
    int64_t start   # a file's start in its queue (file_from_offset)
    int64_t wrote   # its write position
    int64_t size    # the queue's file size
    int64_t first   # the queue's first file's start (0: no file)


cdef inline object span_of(f, Found* o):
    """o.start, o.wrote: f's offset and write position from its FileState (returned), else the attributes."""
    st = getattr(f, "state", None)
    if type(st) is FileState and not (<FileState>st).start_py and not (<FileState>st).wrote_py:
        o.start, o.wrote = (<FileState>st).start, (<FileState>st).wrote
        return st
    o.start, o.wrote = f.file_from_offset, f.wrote_position
    return None


cdef inline object queue_files(q, int64_t* size):
    """q.files, and q.file_size in *size: its state's C fields (MappedFileQueue.state, a FilesState)."""
    st = getattr(q, "state", None)
    if type(st) is FilesState:
        size[0] = (<FilesState>st).file_size
        return (<FilesState>st).files
    size[0] = q.file_size
    return q.files


cdef object find_file(q, int64_t offset, Found* o):
    """MappedFileQueue.find(offset), its span, the queue's file size and first start in *o: straight
    to the index, files being `file_size` apart (else the bisect); each file's state read once."""
    cdef int64_t size
    cdef Py_ssize_t i, n
    files = queue_files(q, &size)
    n = len(files)
    o.size, o.first = size, 0
    if n:
        f = files[0]
        span_of(f, o)
        o.first = o.start
        if offset >= o.first and size > 0:
            i = (offset - o.first) // size
            if i < n:
                if i:
                    f = files[i]
                    span_of(f, o)
                if o.start <= offset < o.start + size:
                    return f
    f = q.find(offset)
    if f is not None:
        span_of(f, o)
    return f


cdef int64_t roll_next(cl, int64_t phy, bint* past) except? -1:
    """cl.roll_next_file(phy); *past when it lies beyond int64 (no record can: every unit is below it)."""
    n = cl.roll_next_file(phy)
    past[0] = n > 0x7FFFFFFFFFFFFFFF
    return 0x7FFFFFFFFFFFFFFF if past[0] else n


cdef const uint8_t* take_units(cqmm, Py_buffer* qv, Py_ssize_t* u_end) except NULL:
    """Export a CQ file's map into *qv (the caller releases it); *u_end clamped to its units."""
    PyObject_GetBuffer(cqmm, qv, PyBUF_SIMPLE)
    if u_end[0] * CQ_UNIT_SIZE > qv.len:
        u_end[0] = qv.len // CQ_UNIT_SIZE
    return <const uint8_t*>qv.buf


cdef Py_ssize_t grow_rows(bytearray rows, Py_buffer* rv) except -1:
    """Double the row buffer, re-exported into *rv; returns its row count."""
    PyBuffer_Release(rv)  # leaves rv.obj NULL: a second release (the caller's finally) is a no-op
    rows.extend(bytes(len(rows)))
    PyObject_GetBuffer(rows, rv, PyBUF_WRITABLE)
    return len(rows) // sizeof(Row)


cdef Py_ssize_t take_file(g, list files, list views, Py_buffer* cv) except -1:
    """Commitlog file g's index in the page's files (added with its view when new); its map exported into *cv."""
    cdef Py_ssize_t k, fi = -1
    for k in range(len(files)):
        if files[k] is g:
            fi = k
            break
    mm = g.mm
    if fi < 0:
        fi = len(files)
        files.append(g)
        views.append(memoryview(mm))
    PyObject_GetBuffer(mm, cv, PyBUF_SIMPLE)
    return fi


cpdef tuple read(cl, cqq, int64_t offset, int64_t mx, Py_ssize_t max_count, bint broker, Py_ssize_t limit_count,
                 int64_t limit_bytes, page_cls, confirm):
    """getMessage's loop from queue offset `offset` over the ConsumeQueue's files `cqq` (max_count
    >= 1, min <= offset < mx): (status, nextBeginOffset, page, bufferTotalSize, skipped), status
    None for OFFSET_FOUND_NULL. Runs of units go through `run`; every other unit through the
    reference loop body (fillers, expired records and the skip after them, other files)."""
    cdef Py_ssize_t cap = max_count if max_count < limit_count else limit_count
    cdef Py_ssize_t u, u_end, unit, j = 0, j0, nrows, fi = -1
    cdef int64_t first, q = offset, phy, cl_min, nbytes = 0, nfs = 0
    cdef int64_t f_from = 0, f_size = 0, f_wrote = 0
    cdef int32_t size
    cdef int stop
    cdef bint removing = False, took, have_nfs = False, ok, nfs_past = False
    cdef Py_buffer cv, qv, rv
    cdef Found fo, go
    cdef bint has_cv = False, has_qv = False, has_rv = False
    cdef const uint8_t* cqp
    cdef int flags
    opts = cl.read_opts
    flags = 0 if broker else read_flags(opts)  # the broker's page reads no record here
    clq = cl.queue
    fq = find_file(cqq, offset * CQ_UNIT_SIZE, &fo)
    if fq is None:
        return None, offset, new_page(page_cls, 0, bytearray(), (), None), 0, []
    first = fo.start // CQ_UNIT_SIZE
    u = offset - first
    u_end = fo.wrote // CQ_UNIT_SIZE
    if not broker and u_end > mx - first:
        u_end = mx - first
    if broker and u_end - u > unit_cap(max_count):  # maxFilterMessageSize
        u_end = u + unit_cap(max_count)
    if u >= u_end:
        return None, offset, new_page(page_cls, 0, bytearray(), (), None), 0, []
    nrows = u_end - u
    if nrows > cap:
        nrows = cap
    if nrows < 1:
        nrows = 1
    rows = PyByteArray_FromStringAndSize(NULL, nrows * sizeof(Row))  # not zeroed: rows past j are never read
    skipped = []
    cache = None
    files = []
    views = []
    f = None
    try:
        cqmm = fq.mm
        cqp = take_units(cqmm, &qv, &u_end)
        has_qv = True
        PyObject_GetBuffer(rows, &rv, PyBUF_WRITABLE)
        has_rv = True
        phy = be64(cqp + u * CQ_UNIT_SIZE)  # the commitlog file of the first record (the loop finds others)
        g = find_file(clq, phy, &go)
        cl_min = go.first   # the log's min offset
        if g is not None and phy >= cl_min and not (phy == 0 and be32(cqp + u * CQ_UNIT_SIZE + OFF_UNIT_SIZE) == FILLER_SIZE):
            f = g
            fi = take_file(g, files, views, &cv)
            has_cv = True
            f_from, f_size, f_wrote = go.start, go.size, go.wrote
        while True:
            if u >= u_end:  # this CQ file's units are done
                if broker or q >= mx or j >= max_count:
                    break
                fq = find_file(cqq, q * CQ_UNIT_SIZE, &fo)
                if fq is None:
                    break
                first = fo.start // CQ_UNIT_SIZE
                u = q - first
                u_end = fo.wrote // CQ_UNIT_SIZE
                if u_end > mx - first:
                    u_end = mx - first
                if u >= u_end:
                    break
                PyBuffer_Release(&qv)
                has_qv = False
                cqmm = fq.mm
                cqp = take_units(cqmm, &qv, &u_end)
                has_qv = True
                continue
            if has_cv and not have_nfs:  # a run of records in file f
                unit = u
                if broker:  # a few instructions a unit: not worth releasing the GIL
                    stop = run(<const uint8_t*>cv.buf, cv.len, f_wrote, f_from, f_size, cqp, &u, u_end,
                               <Row*>rv.buf, nrows, &j, cap, &nbytes, limit_bytes, fi, 0, False, True)
                else:
                    with nogil:
                        stop = run(<const uint8_t*>cv.buf, cv.len, f_wrote, f_from, f_size, cqp, &u, u_end,
                                   <Row*>rv.buf, nrows, &j, cap, &nbytes, limit_bytes, fi, flags, False, False)
                q += u - unit
                if stop == 0:
                    continue
                if stop == 1:
                    break
                if stop == 2:
                    nrows = grow_rows(rows, &rv)
                    continue
                if stop == 5 or stop == 4:
                    ok = False
                    if stop == 5:
                        cache, ok = confirm(cl, f, cqmm, u, rows, j, cache)
                    if ok:
                        nbytes += be32(cqp + u * CQ_UNIT_SIZE + OFF_UNIT_SIZE)
                        j += 1
                    else:
                        removing = True
                        skipped.append((q, WHY_INVALID))
                        if broker:  # commitLog.getMessage was null: rollNextFile
                            nfs = roll_next(cl, be64(cqp + u * CQ_UNIT_SIZE), &nfs_past)
                            have_nfs = True
                    u += 1
                    q += 1
                    continue
                # stop 3: the reference loop body decides this unit
            phy = be64(cqp + u * CQ_UNIT_SIZE)
            size = be32(cqp + u * CQ_UNIT_SIZE + OFF_UNIT_SIZE)
            if j and (j >= cap or (limit_bytes and nbytes + size > limit_bytes)):
                break
            unit = u
            u += 1
            q += 1
            if have_nfs and (phy < nfs or nfs_past):
                continue
            if phy == 0 and size == FILLER_SIZE:
                skipped.append((q - 1, WHY_FILLER))
                if broker:  # commitLog.getMessage(0, Integer.MAX_VALUE) is null (engine/store/page.py)
                    removing = True
                    nfs = roll_next(cl, 0, &nfs_past)
                    have_nfs = True
                continue
            took = False
            if phy >= cl_min:
                if not has_cv or not (f_from <= phy < f_from + f_size):
                    g = find_file(clq, phy, &go)
                    if g is not None:
                        if has_cv:
                            PyBuffer_Release(&cv)
                            has_cv = False
                        f = g
                        fi = take_file(g, files, views, &cv)
                        has_cv = True
                        f_from, f_size, f_wrote = go.start, go.size, go.wrote
                if has_cv and f_from <= phy < f_from + f_size and phy - f_from < f_wrote:
                    if j >= nrows:
                        nrows = grow_rows(rows, &rv)
                    j0 = j
                    u = unit
                    stop = run(<const uint8_t*>cv.buf, cv.len, f_wrote, f_from, f_size, cqp, &u, unit + 1,
                               <Row*>rv.buf, nrows, &j, j + 1, &nbytes, 0, fi, flags, True, broker)
                    if stop == 5:
                        cache, ok = confirm(cl, f, cqmm, unit, rows, j, cache)
                        if ok:
                            nbytes += size
                            j += 1
                    u = unit + 1
                    took = j > j0
            if not took:
                removing = True
                skipped.append((q - 1, WHY_EXPIRED if phy < cl_min else WHY_INVALID))
                if phy < cl_min or broker:  # the broker rolls past any null (DefaultMessageStore.getMessage)
                    nfs = roll_next(cl, phy, &nfs_past)
                    have_nfs = True
                continue
            have_nfs = False
    finally:
        if has_cv:
            PyBuffer_Release(&cv)
        if has_qv:
            PyBuffer_Release(&qv)
        if has_rv:
            PyBuffer_Release(&rv)
    if cache is not None and len(cache) != j:  # only confirmed rows hold a Message
        del cache[j:]
        cache.extend([None] * (j - len(cache)))
    if j:
        status = "FOUND"
    else:
        status = "MESSAGE_WAS_REMOVING" if removing else "NO_MATCHED_MESSAGE"
    page = new_page(page_cls, j, rows, views, cache, opts if broker else None, files if broker else None)
    return status, q, page, nbytes, skipped


cdef int64_t queue_max(q) except? -1:
    """MappedFileQueue.max_offset: the last file holding data, at its write position."""
    cdef Found o
    cdef Py_ssize_t i
    files = queue_files(q, &o.size)
    for i in range(len(files) - 1, -1, -1):
        span_of(files[i], &o)
        if o.wrote > 0:
            return o.start + o.wrote
    return o.start if files else 0   # the first file's start, none holding data


cdef object _result(status, nxt, mn, mx, messages, total, skipped):
    cdef GetMessageResult r = GetMessageResult.__new__(GetMessageResult)
    r.status, r.nextBeginOffset, r.minOffset, r.maxOffset = status, nxt, mn, mx
    r.messages, r.bufferTotalSize, r.skipped = messages, total, skipped
    return r


cdef int64_t LONG_MAX = 0x7FFFFFFFFFFFFFFF


def get_message(store, topic, queue_id, offset, max_count=32, broker=False):
    """getMessage. broker=True reproduces the broker exactly (a page stops at the end of
    a CQ file; 32 messages / 256 KiB per page); the default reads `max_count` messages
    across CQ files and reports units it had to skip.

    MessageStore.get_message itself, compiled (engine/accel/_page.pyx): the queue's bounds and
    statuses, the page loop, the result (a GetMessageResult holding a page of the store's
    `_page_kit` class; units that need check_record go to its confirm hook) -- for pages of
    small messages a Python frame around the loop costs a tenth of the page. Anything unusual
    (queues the loop does not read, arguments that are not integers or lie outside int64, LMQ
    and BatchCQ queues) goes to the reference, store._get_message_py."""
    if not store.pages_compiled:
        return store._get_message_py(topic, queue_id, offset, max_count, broker)
    if type(offset) is not int or type(max_count) is not int:  # numpy integers, bool
        try:
            offset, max_count = index(offset), index(max_count)
        except TypeError:
            return store._get_message_py(topic, queue_id, offset, max_count, broker)
    if not 1 <= max_count <= LONG_MAX or not -LONG_MAX <= offset <= LONG_MAX:
        return store._get_message_py(topic, queue_id, offset, max_count, broker)
    queues = store.queues
    key = (topic, queue_id)
    cq = (<dict>queues).get(key) if type(queues) is dict else queues.get(key)
    if cq is None or cq.lmq:  # BatchCQ queues (not in store.queues) and LMQs: the reference answers
        return store._get_message_py(topic, queue_id, offset, max_count, broker)
    cqq = cq.queue
    cdef int64_t off = offset, mn = cq.min_logic_offset, mx = queue_max(cqq)
    mn //= CQ_UNIT_SIZE
    mx //= CQ_UNIT_SIZE
    cdef bint brk = broker
    if mx == 0:
        return _result("NO_MESSAGE_IN_QUEUE", 0, mn, mx, [], 0, [])
    if off < mn:
        return _result("OFFSET_TOO_SMALL", mn, mn, mx, [], 0, [])
    if off == mx:
        return _result("OFFSET_OVERFLOW_ONE", off, mn, mx, [], 0, [])
    if off > mx:
        return _result("OFFSET_OVERFLOW_BADLY", mx, mn, mx, [], 0, [])
    cdef Py_ssize_t limit_count, n = max_count
    cdef int64_t limit_bytes
    if brk:
        cfg = store.cfg
        limit_count, limit_bytes = cfg.maxTransferCountOnMessageInMemory, cfg.maxTransferBytesOnMessageInMemory or 0
    else:
        limit_count, limit_bytes = n, 0
    page_cls, confirm = store._page_kit
    status, nxt, page, total, skipped = read(store.commitlog, cqq, off, mx, n, brk, limit_count, limit_bytes,
                                              page_cls, confirm)
    if status is None:
        return _result("OFFSET_FOUND_NULL", roll_next_file(off, cq.file_size), mn, mx, [], 0, [])
    return _result(status, nxt, mn, mx, page, total, skipped)
