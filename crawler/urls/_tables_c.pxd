# The compiled occurrences' hash tables (crawler/urls/_tables_c.pyx), for `_occur_c.take`.
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t


cdef struct Slot:
    uint32_t check  # the hash's high half (its low bits chose the slot)
    int32_t id  # -1: empty


cdef uint64_t _hash(const unsigned char* p, Py_ssize_t n) noexcept


cdef class _Ids:
    cdef Slot* _slots
    cdef Py_ssize_t _mask
    cdef Py_ssize_t _used

    cdef Py_ssize_t find(self, uint64_t h, const unsigned char* p, Py_ssize_t n,
                         list strings) noexcept
    cdef void ahead(self, uint64_t h) noexcept
    cdef int put(self, uint64_t h, Py_ssize_t k, list strings) except -1


cdef class Texts:
    cdef char* _data
    cdef Py_ssize_t _size
    cdef Py_ssize_t _cap
    cdef int64_t* _ends
    cdef Py_ssize_t _count
    cdef Py_ssize_t _ecap
    cdef Slot* _slots
    cdef Py_ssize_t _mask

    cdef const char* _at(self, Py_ssize_t k, Py_ssize_t* n) noexcept
    cdef Py_ssize_t find(self, uint64_t h, const char* p, Py_ssize_t n) noexcept
    cdef void ahead(self, uint64_t h) noexcept
    cdef Py_ssize_t add(self, uint64_t h, const char* p, Py_ssize_t n) except -1
    cdef Py_ssize_t id_of_hashed(self, uint64_t h, const char* p, Py_ssize_t n) except -1
    cdef Py_ssize_t id_of_bytes(self, const char* p, Py_ssize_t n) except -1
