# The key query front other compiled modules call straight (engine/accel/_page.pyx's
# query_message); the rest of _query.pyx is its own.

cdef class IndexState:
    cdef public object files, cfg, _kidx


cdef object query_fast(IndexState st, str topic, str key, Py_ssize_t max_num, begin, end, cap)
