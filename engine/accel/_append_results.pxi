# included by engine/accel/_append.pyx: what a put returns

@cython.no_gc
cdef class PutResults:
    """What a put returns: a read-only sequence of PutResult, each built when it is looked
    at (a batch writer that only counts acknowledgements builds none)."""
    cdef int64_t* phys
    cdef int64_t* sizes
    cdef Py_ssize_t n
    cdef int64_t qoff0, store_ts
    cdef long qid
    cdef str topic, prefix
    cdef bytes tails          # n x 12 ASCII: each UNIQ_KEY after the generator's prefix
    cdef bytes store_host

    def __dealloc__(self):
        PyMem_Free(self.phys)

    def __len__(self):
        return self.n

    cdef object item(self, Py_ssize_t i):
        cdef const char* t = self.tails
        return tuple.__new__(PutResult, (
            "PUT_OK", self.phys[i], self.qoff0 + i, self.store_ts,
            msg_id(<const uint8_t*>self.store_host, len(self.store_host), self.phys[i]),
            self.prefix + PyUnicode_DecodeASCII(t + 12 * i, 12, NULL), self.topic, self.qid, self.sizes[i]))

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
