# included by engine/accel/_append.pyx: what a put returns
cdef object _PUT_OK = "PUT_OK"


cdef object put_result(str topic, long qid, int64_t phy, int64_t qoff, int64_t store_ts, int64_t size,
                       bytes store_host, bytes prefix, const char* tail12):
    """A PutResult; its UNIQ_KEY decoded once from the prefix and the 12 characters after it."""
    cdef char u[80]
    cdef Py_ssize_t pl = len(prefix)
    if pl > 64:
        uniq = prefix.decode("ascii") + PyUnicode_DecodeASCII(tail12, 12, NULL)
    else:
        memcpy(u, <const char*>prefix, pl)
        memcpy(u + pl, tail12, 12)
        uniq = PyUnicode_DecodeASCII(u, pl + 12, NULL)
    mid = msg_id_of(<const uint8_t*>store_host, len(store_host), phy)
    return rmq_new_as(tuple, PutResult, ((_PUT_OK, phy, qoff, store_ts, mid, uniq, topic, qid, size),))


@cython.no_gc
cdef class PutResults:
    """What a put returns: a read-only sequence of PutResult, each built when it is looked
    at (a batch writer that only counts acknowledgements builds none)."""
    cdef int64_t* phys
    cdef int64_t* sizes
    cdef Py_ssize_t n
    cdef int64_t qoff0, store_ts
    cdef long qid
    cdef str topic
    cdef bytes prefix_b
    cdef bytes tails          # n x 12 ASCII: each UNIQ_KEY after the generator's prefix
    cdef bytes store_host

    def __dealloc__(self):
        PyMem_Free(self.phys)

    def __len__(self):
        return self.n

    cdef object item(self, Py_ssize_t i):
        cdef const char* t = self.tails
        return put_result(self.topic, self.qid, self.phys[i], self.qoff0 + i, self.store_ts, self.sizes[i],
                          self.store_host, self.prefix_b, t + 12 * i)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.item(k) for k in range(*i.indices(self.n))]
        cdef Py_ssize_t k = i
        if k < 0:
            k += self.n
        if not 0 <= k < self.n:
            raise IndexError("PutResults index out of range")
        return self.item(k)

    def __iter__(self):
        cdef Py_ssize_t k
        for k in range(self.n):
            yield self.item(k)

    def __eq__(self, other):
        try:
            return list(self) == list(other)
        except TypeError:
            return NotImplemented

    def __repr__(self):
        return repr(list(self))


import collections.abc
collections.abc.Sequence.register(PutResults)


def appender(w):
    """The writer's Appender (made on first use)."""
    a = w._appender
    if a is None:
        a = w._appender = Appender(w)
    return a
