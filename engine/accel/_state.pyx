# cython: language_level=3
"""The hot state of writes as C fields, in objects the core classes own: a MappedFile's
`state` is a FileState, a ConsumeQueue's a QueueState, a StoreWriter's a WriterState, a
UniqKeyGenerator's a UniqState. Each owner picks this class or its pure-Python twin (same
attribute names, next to the owner) once, at import, and reads and writes the fields through
properties of the same names as before. A MappedFileQueue's `state` is a FilesState.

The compiled put (_append.pyx) takes these objects and reads and writes their positions and
timestamps as struct fields, where plain attributes cost a dict lookup and a new int each;
the Python path takes over at any put and sees what the compiled one left. Any value can still
be set, as on a plain attribute: one that is not an int64 (a hostile store's offset past
2**63, a bool) is kept as it was given and read back unchanged. Nothing here imports the
engine."""
from libc.stdint cimport int64_t


cdef inline bint as_int64(object v, int64_t* out):
    """v as an int64 when it is an exact int that fits."""
    if type(v) is not int:
        return False
    try:
        out[0] = v
    except OverflowError:
        return False
    return True


cdef class FileState:
    """MappedFile's offset in its queue, its positions (written up to, blocks reserved up to)
    and its map's view."""

    @property
    def file_from_offset(self):
        return self.start_o if self.start_py else self.start

    @file_from_offset.setter
    def file_from_offset(self, v):
        self.start_py = not as_int64(v, &self.start)
        self.start_o = v if self.start_py else None

    @property
    def wrote_position(self):
        return self.wrote_o if self.wrote_py else self.wrote

    @wrote_position.setter
    def wrote_position(self, v):
        self.wrote_py = not as_int64(v, &self.wrote)
        self.wrote_o = v if self.wrote_py else None

    @property
    def reserved_until(self):
        return self.reserved_o if self.reserved_py else self.reserved

    @reserved_until.setter
    def reserved_until(self, v):
        self.reserved_py = not as_int64(v, &self.reserved)
        self.reserved_o = v if self.reserved_py else None


cdef class QueueState:
    """ConsumeQueue.max_physic_offset: the end of its last unit's record (-1: none)."""

    @property
    def max_physic_offset(self):
        return self.max_phy_o if self.max_phy_py else self.max_phy

    @max_physic_offset.setter
    def max_physic_offset(self, v):
        self.max_phy_py = not as_int64(v, &self.max_phy)
        self.max_phy_o = v if self.max_phy_py else None


cdef class WriterState:
    """StoreWriter's store and dispatch timestamps, its failure and its time source."""

    @property
    def last_store_ts(self):
        return self.store_ts_o if self.store_ts_py else self.store_ts

    @last_store_ts.setter
    def last_store_ts(self, v):
        self.store_ts_py = not as_int64(v, &self.store_ts)
        self.store_ts_o = v if self.store_ts_py else None

    @property
    def last_dispatched_ts(self):
        return self.dispatched_ts_o if self.dispatched_ts_py else self.dispatched_ts

    @last_dispatched_ts.setter
    def last_dispatched_ts(self, v):
        self.dispatched_ts_py = not as_int64(v, &self.dispatched_ts)
        self.dispatched_ts_o = v if self.dispatched_ts_py else None


cdef class UniqState:
    """UniqKeyGenerator's counter and the cached [start, end) of the current month."""

    @property
    def counter(self):
        return self.count_o if self.count_py else self.count

    @counter.setter
    def counter(self, v):
        self.count_py = not as_int64(v, &self.count)
        self.count_o = v if self.count_py else None

    @property
    def _month_start_cached(self):
        return self.month_start_o if self.month_start_py else self.month_start

    @_month_start_cached.setter
    def _month_start_cached(self, v):
        self.month_start_py = not as_int64(v, &self.month_start)
        self.month_start_o = v if self.month_start_py else None

    @property
    def _month_end_cached(self):
        return self.month_end_o if self.month_end_py else self.month_end

    @_month_end_cached.setter
    def _month_end_cached(self, v):
        self.month_end_py = not as_int64(v, &self.month_end)
        self.month_end_o = v if self.month_end_py else None


cdef class FilesState:
    """MappedFileQueue's files and their size, which the compiled reads take as C fields."""


# ---- an owner's sequence answers, by its state ------------------------------------------------
# MessagePage (engine/store/page.py) is a Sequence whose items, length and iteration are its
# `state`'s. As Python methods each is a frame around one C call -- len(page) cost ~730
# instructions, a 32-message page ~18,000 in all -- so the page takes these as its methods.
def state_len(owner):
    """len(owner.state)"""
    return len(owner.state)


def state_bool(owner):
    """len(owner.state) > 0"""
    return len(owner.state) > 0


def state_item(owner, i):
    """owner.state[i]"""
    return owner.state[i]


def state_iter(owner):
    """iter(owner.state)"""
    return iter(owner.state)
