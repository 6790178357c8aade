# included by engine/accel/_page.pyx: the page loop and getMessage

# ---- the page loop (engine.store.page.read_page; its pure twin _read_page_py is the reference) ----------
# The page and result classes and the check_record callback are the caller's: engine.store.page and
# MessageStore pass them with every call (this module imports nothing above engine.format).
from engine.errors import CorruptDataError
from engine.format.cq_unit import WHY_EXPIRED, WHY_FILLER, WHY_INVALID


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
        if c is None:
            c = self.cache = [None] * self.n
        m = c[i]
        if m is None:
            if r.magicCode == UNCHECKED:
                self.check_row(r, i)
                m = c[i]
                if m is not None:  # check_record's own answer
                    return m
            m = c[i] = page_message(self.anchor(r.file), r)
        return m

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


cdef inline int64_t file_start(f) except? -1:
    """f.file_from_offset / f.wrote_position (file_wrote): the C fields of its state (MappedFile.state,
    a FileState), else the attributes."""
    st = getattr(f, "state", None)
    return (<FileState>st).start if type(st) is FileState and not (<FileState>st).start_py else f.file_from_offset


cdef inline int64_t file_wrote(f) except? -1:
    st = getattr(f, "state", None)
    return (<FileState>st).wrote if type(st) is FileState and not (<FileState>st).wrote_py else f.wrote_position


cdef inline object queue_files(q, int64_t* size):
    """q.files, and q.file_size in *size: its state's C fields (MappedFileQueue.state, a FilesState)."""
    st = getattr(q, "state", None)
    if type(st) is FilesState:
        size[0] = (<FilesState>st).file_size
        return (<FilesState>st).files
    size[0] = q.file_size
    return q.files


cdef object file_at(files, Py_ssize_t n, int64_t base, int64_t size, int64_t offset, int64_t* start):
    """The file holding `offset` when the files are `size` apart from `base` (the first's
    offset), its start in *start; None when it is not where that puts it."""
    cdef Py_ssize_t i
    if n and offset >= base and size > 0:
        i = (offset - base) // size
        if i < n:
            f = files[i]
            start[0] = file_start(f)
            if start[0] <= offset < start[0] + size:
                return f
    return None


cdef object find_file(q, int64_t offset):
    """MappedFileQueue.find(offset): straight to the index, files being `file_size` apart (else the bisect)."""
    cdef int64_t size, start
    files = queue_files(q, &size)
    f = file_at(files, len(files), file_start(files[0]), size, offset, &start) if files else None
    return f if f is not None else q.find(offset)


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
    """Commitlog file g's index in the page's files (added, with the view the page keeps, when
    new); its map exported into *cv last (the caller releases it)."""
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
    cdef bint removing = False, took, have_nfs = False, ok
    cdef Py_buffer cv, qv, rv
    cdef bint has_cv = False, has_qv = False, has_rv = False
    cdef const uint8_t* cqp
    cdef int flags
    opts = cl.read_opts
    flags = 0 if broker else read_flags(opts)  # the broker's page reads no record here
    clq = cl.queue
    fq = find_file(cqq, offset * CQ_UNIT_SIZE)
    if fq is None:
        return (None if broker else "NO_MATCHED_MESSAGE"), offset, new_page(page_cls, 0, bytearray(), (), None), 0, []
    first = file_start(fq) // CQ_UNIT_SIZE
    u = offset - first
    u_end = file_wrote(fq) // CQ_UNIT_SIZE
    if not broker and u_end > mx - first:
        u_end = mx - first
    if broker and u_end - u > unit_cap(max_count):  # maxFilterMessageSize
        u_end = u + unit_cap(max_count)
    if u >= u_end:
        return (None if broker else "NO_MATCHED_MESSAGE"), offset, new_page(page_cls, 0, bytearray(), (), None), 0, []
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
    cl_min = queue_min(clq)
    try:
        cqmm = fq.mm
        cqp = take_units(cqmm, &qv, &u_end)
        has_qv = True
        PyObject_GetBuffer(rows, &rv, PyBUF_WRITABLE)
        has_rv = True
        phy = be64(cqp + u * CQ_UNIT_SIZE)  # the commitlog file of the first record (the loop finds others)
        if phy >= cl_min and u < u_end and not (phy == 0 and be32(cqp + u * CQ_UNIT_SIZE + OFF_UNIT_SIZE) == FILLER_SIZE):
            g = find_file(clq, phy)
            if g is not None:
                f = g
                fi = take_file(g, files, views, &cv)
                has_cv = True
                f_from, f_size, f_wrote = file_start(g), g.file_size, file_wrote(g)
        while True:
            if u >= u_end:  # this CQ file's units are done
                if broker or q >= mx or j >= max_count:
                    break
                fq = find_file(cqq, q * CQ_UNIT_SIZE)
                if fq is None:
                    break
                first = file_start(fq) // CQ_UNIT_SIZE
                u = q - first
                u_end = file_wrote(fq) // CQ_UNIT_SIZE
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
                            nfs = cl.roll_next_file(be64(cqp + u * CQ_UNIT_SIZE))
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
            if have_nfs and phy < nfs:
                continue
            if phy == 0 and size == FILLER_SIZE:
                skipped.append((q - 1, WHY_FILLER))
                if broker:  # commitLog.getMessage(0, Integer.MAX_VALUE) is null (engine/store/page.py)
                    removing = True
                    nfs = cl.roll_next_file(0)
                    have_nfs = True
                continue
            took = False
            if phy >= cl_min:
                if not has_cv or not (f_from <= phy < f_from + f_size):
                    g = find_file(clq, phy)
                    if g is not None:
                        if has_cv:
                            PyBuffer_Release(&cv)
                            has_cv = False
                        f = g
                        fi = take_file(g, files, views, &cv)
                        has_cv = True
                        f_from, f_size, f_wrote = file_start(g), g.file_size, file_wrote(g)
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
                    nfs = cl.roll_next_file(phy)
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


cdef int64_t queue_min(q) except? -1:
    """MappedFileQueue.min_offset."""
    cdef int64_t size
    files = queue_files(q, &size)
    return file_start(files[0]) if files else 0


cdef int64_t queue_max(q) except? -1:
    """MappedFileQueue.max_offset: the last file holding data, at its write position."""
    cdef int64_t size, w
    cdef Py_ssize_t i
    files = queue_files(q, &size)
    for i in range(len(files) - 1, -1, -1):
        f = files[i]
        w = file_wrote(f)
        if w > 0:
            return file_start(f) + w
    return file_start(files[0]) if files else 0


cdef object _result(result_cls, status, nxt, mn, mx, messages, total, skipped):
    r = rmq_new(result_cls)
    r.status, r.nextBeginOffset, r.minOffset, r.maxOffset = status, nxt, mn, mx
    r.messages, r.bufferTotalSize, r.skipped = messages, total, skipped
    return r


cdef int64_t LONG_MAX = 0x7FFFFFFFFFFFFFFF


def get_message(store, topic, queue_id, offset, max_count, broker, result_cls, page_cls, confirm):
    """getMessage. broker=True reproduces the broker exactly (a page stops at the end of
    a CQ file; 32 messages / 256 KiB per page); the default reads `max_count` messages
    across CQ files and reports units it had to skip.

    MessageStore.get_message's body compiled (engine/accel/_page.pyx) in one call: the queue's
    bounds and statuses, the page loop, the result (a `result_cls` holding a `page_cls`; units
    that need check_record go to `confirm`) -- for pages of small messages the Python frames
    around the loop cost as much as the loop. Anything unusual (arguments that are not
    integers or lie outside int64, LMQ and BatchCQ queues) goes to the reference,
    store._get_message_py."""
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
        return _result(result_cls, "NO_MESSAGE_IN_QUEUE", 0, mn, mx, [], 0, [])
    if off < mn:
        return _result(result_cls, "OFFSET_TOO_SMALL", mn, mn, mx, [], 0, [])
    if off == mx:
        return _result(result_cls, "OFFSET_OVERFLOW_ONE", off, mn, mx, [], 0, [])
    if off > mx:
        return _result(result_cls, "OFFSET_OVERFLOW_BADLY", mx, mn, mx, [], 0, [])
    cdef Py_ssize_t limit_count, n = max_count
    cdef int64_t limit_bytes
    if brk:
        cfg = store.cfg
        limit_count, limit_bytes = cfg.maxTransferCountOnMessageInMemory, cfg.maxTransferBytesOnMessageInMemory or 0
    else:
        limit_count, limit_bytes = n, 0
    status, nxt, page, total, skipped = read(store.commitlog, cqq, off, mx, n, brk, limit_count, limit_bytes,
                                              page_cls, confirm)
    if status is None:
        return _result(result_cls, "OFFSET_FOUND_NULL", off, mn, mx, [], 0, [])
    return _result(result_cls, status, nxt, mn, mx, page, total, skipped)
