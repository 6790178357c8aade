# The write path's hot state as C fields (engine/accel/_state.pyx says why). Each field X is
# an int64 `X` when its value is an exact int that fits, else `X_py` is set and `X_o` holds
# the value as it was given; the compiled put leaves such state to Python.
from libc.stdint cimport int64_t


cdef class FileState:
    cdef public object buf          # the map's memoryview (MappedFile.buf)
    cdef int64_t start              # file_from_offset
    cdef bint start_py
    cdef object start_o
    cdef int64_t wrote
    cdef bint wrote_py
    cdef object wrote_o
    cdef int64_t reserved
    cdef bint reserved_py
    cdef object reserved_o


cdef class QueueState:
    cdef int64_t max_phy
    cdef bint max_phy_py
    cdef object max_phy_o


cdef class WriterState:
    cdef int64_t store_ts
    cdef bint store_ts_py
    cdef object store_ts_o
    cdef int64_t dispatched_ts
    cdef bint dispatched_ts_py
    cdef object dispatched_ts_o
    cdef public object broken, clock
    cdef public bint _dirty         # a put since the last flush (StoreWriter._dirty)


cdef class UniqState:
    cdef int64_t count
    cdef bint count_py
    cdef object count_o
    cdef int64_t month_start
    cdef bint month_start_py
    cdef object month_start_o
    cdef int64_t month_end
    cdef bint month_end_py
    cdef object month_end_o


cdef class FilesState:
    cdef public object files, file_size
