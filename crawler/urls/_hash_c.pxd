# The C-level API of the compiled seen set and fingerprint (crawler/urls/_hash_c.pyx), for other
# compiled modules: `cimport crawler.urls._hash_c` and call these without a Python call.
from libc.stdint cimport uint64_t


cdef class MemorySeenSet:
    cdef uint64_t* _table   # _len slots: _size home slots, then the tail; _table[_len - 1] == 0
    cdef Py_ssize_t _size
    cdef Py_ssize_t _len
    cdef Py_ssize_t _count
    cdef Py_ssize_t _limit

    # A fingerprint (an int in [1, 2**64)); 0 is taken as 1, as `fingerprint` maps it.
    cdef bint has(self, uint64_t fp) noexcept
    # Add it; 1 if it was new. -1: MemoryError (set) while growing; the set stays valid.
    cdef bint put(self, uint64_t fp) except -1
    cdef bint _put(self, uint64_t m) except -1
    cdef int _extend(self) except -1
    cdef int _grow(self) except -1
    cdef int _grow_copy(self, Py_ssize_t size, Py_ssize_t n) except -1


cdef class Fingerprinter:
    cdef readonly bytes key
    cdef uint64_t _h[8]     # the BLAKE2b state after the key block (or the bare init state)
    cdef uint64_t _t0       # bytes compressed into _h: 128 with a key, 0 without
    cdef uint64_t _empty    # the fingerprint of b""

    # The fingerprint of p[:n] (UTF-8 bytes of a URL): as crawler.urls.fingerprint computes it.
    cdef uint64_t fp_bytes(self, const unsigned char* p, Py_ssize_t n) noexcept nogil
