# The compiled link intake's C-level API. The compiled extractor (crawler/extract/_extract_c.pyx)
# hands it resolved URLs straight from its buffers (a repeated link creates no Python object)
# through its base class, crawler/extract/_intake_base_c.pxd: the extractor never imports this.
from libc.stdint cimport uint64_t

from crawler.extract._intake_base_c cimport IntakeBase
from crawler.urls._hash_c cimport Fingerprinter, MemorySeenSet


cdef class Intake(IntakeBase):
    cdef object _policy
    cdef readonly bint respect_nofollow
    cdef bint _sort
    cdef bint _drop_py
    cdef list _drop
    cdef uint64_t* _table
    cdef uint64_t _mask
    cdef int _shift
    cdef uint64_t _k0
    cdef uint64_t _k1
    cdef unsigned char* _buf
    cdef Py_ssize_t _cap
    cdef void* _params
    cdef Py_ssize_t _pcap
    cdef MemorySeenSet _seen
    cdef Fingerprinter _fper
    cdef object _host_scope
    cdef dict _scope_cache
    cdef uint64_t* _ext
    cdef Py_ssize_t _next
    cdef Py_ssize_t _ecap
    cdef public Py_ssize_t repeated
    cdef public Py_ssize_t known
    cdef public Py_ssize_t external

    cdef int _ensure(self, Py_ssize_t n) except -1
    cdef Py_ssize_t _canon(self, const unsigned char* s, Py_ssize_t n) except -2
    cdef Py_ssize_t _fix_query(self, Py_ssize_t q, Py_ssize_t m) except -1
    cdef bint _known(self, const unsigned char* p, Py_ssize_t n) noexcept
    cdef void _put(self, const unsigned char* p, Py_ssize_t n) noexcept
    cdef int _py_canon(self, str url, list out) except -1
    cdef int _canon_str(self, str canon, list out) except -1
    cdef int _outside(self, const unsigned char* p, Py_ssize_t m, str s) except -1
    cdef int _grow_ext(self) except -1
    cdef int _new(self, const unsigned char* p, Py_ssize_t m, str s, list out) except -1
    cdef int resolved(self, const unsigned char* url, Py_ssize_t n, bint nofollow, list out) except -1
    cdef int take_link(self, object link, list out) except -1
