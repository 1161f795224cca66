# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled occurrences' hash tables (read `crawler.urls._occur_c` first): the keyed hash
they probe with, `_Ids` (a target key's bytes -> its id in the targets `Interner`) and `Texts`
(the raw values' interner: their bytes in one buffer). Open addressing, linear probing,
grown at 3/4 full; a slot holds the high half of the hash and the id, and a hit is compared
byte for byte, so the hash decides where to look, never the answer. `_occur_c.take` cimports
them (``_tables_c.pxd``)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy

import os

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object)
    void* PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)

cdef extern from *:
    """
    #define crawler_prefetch(p) __builtin_prefetch((const void*)(p))
    """
    void prefetch "crawler_prefetch"(const void*) noexcept nogil
# The tables' hash: keyed at random per process (a page cannot aim its values at one slot),
# and a multiply-fold a 16 bytes (the wyhash construction: each 64-bit word XORed with a
# secret, multiplied to 128 bits and the halves folded) rather than SipHash-1-3, which took
# ~35% of `take`'s own CPU (two hashes a link; rustdoc's URLs are ~70 bytes). A hit is still
# compared byte for byte: the hash decides where to look, never the answer.
cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    static inline uint64_t crawler_mum(uint64_t a, uint64_t b) {
    #if defined(__SIZEOF_INT128__)
        unsigned __int128 r = (unsigned __int128)a * b;
        return (uint64_t)r ^ (uint64_t)(r >> 64);
    #else
        uint64_t ha = a >> 32, hb = b >> 32, la = (uint32_t)a, lb = (uint32_t)b;
        uint64_t rh = ha * hb, rm0 = ha * lb, rm1 = hb * la, rl = la * lb;
        uint64_t t = rl + (rm0 << 32), c = t < rl, lo, hi;
        lo = t + (rm1 << 32); c += lo < t;
        hi = rh + (rm0 >> 32) + (rm1 >> 32) + c;
        return lo ^ hi;
    #endif
    }
    static inline uint64_t crawler_r64(const unsigned char* p) {
        uint64_t v; memcpy(&v, p, 8); return v;
    }
    static inline uint64_t crawler_r32(const unsigned char* p) {
        uint32_t v; memcpy(&v, p, 4); return v;
    }
    static uint64_t crawler_keys[4];
    static uint64_t crawler_hash(const unsigned char* p, size_t n) {
        const uint64_t* k = crawler_keys;
        uint64_t seed = k[0], a, b;
        size_t i = n;
        if (n <= 16) {
            if (n >= 4) {
                size_t q = (n >> 3) << 2;
                a = (crawler_r32(p) << 32) | crawler_r32(p + q);
                b = (crawler_r32(p + n - 4) << 32) | crawler_r32(p + n - 4 - q);
            } else if (n > 0) {
                a = ((uint64_t)p[0] << 16) | ((uint64_t)p[n >> 1] << 8) | p[n - 1];
                b = 0;
            } else {
                a = b = 0;
            }
        } else {
            if (i > 48) {
                uint64_t s1 = seed, s2 = seed;
                do {
                    seed = crawler_mum(crawler_r64(p) ^ k[1], crawler_r64(p + 8) ^ seed);
                    s1 = crawler_mum(crawler_r64(p + 16) ^ k[2], crawler_r64(p + 24) ^ s1);
                    s2 = crawler_mum(crawler_r64(p + 32) ^ k[3], crawler_r64(p + 40) ^ s2);
                    p += 48;
                    i -= 48;
                } while (i > 48);
                seed ^= s1 ^ s2;
            }
            while (i > 16) {
                seed = crawler_mum(crawler_r64(p) ^ k[1], crawler_r64(p + 8) ^ seed);
                p += 16;
                i -= 16;
            }
            a = crawler_r64(p + i - 16);
            b = crawler_r64(p + i - 8);
        }
        return crawler_mum(crawler_mum(a ^ k[1], b ^ seed) ^ k[0] ^ (uint64_t)n, k[1] ^ b);
    }
    """
    uint64_t[4] crawler_keys
    uint64_t crawler_hash(const unsigned char*, size_t) noexcept nogil


cdef void _set_keys(bytes key) noexcept:
    """The hash's keys, odd (a secret of 0 would lose what it multiplies)."""
    cdef int i
    for i in range(4):
        memcpy(&crawler_keys[i], PyBytes_AS_STRING(key) + 8 * i, 8)
        crawler_keys[i] |= 1


_set_keys(os.urandom(32))


cdef uint64_t _hash(const unsigned char* p, Py_ssize_t n) noexcept:
    return crawler_hash(p, <size_t>n)


def hash_bytes(const unsigned char[:] data):
    """The tables' hash of ``data`` (for tests: its spread)."""
    return _hash(&data[0] if data.shape[0] else <const unsigned char*>b"", data.shape[0])


cdef Slot* _empty_slots(Py_ssize_t n, bint python) except NULL:
    """``n`` empty slots (id -1) of a table, from Python's allocator (``python``: seen by
    tracemalloc, as a str's bytes would be) or from C's."""
    cdef Slot* slots = <Slot*>(PyMem_Malloc(n * sizeof(Slot)) if python
                               else malloc(n * sizeof(Slot)))
    cdef Py_ssize_t i
    if slots == NULL:
        raise MemoryError()
    for i in range(n):
        slots[i].id = -1
    return slots


cdef inline void _place(Slot* slots, Py_ssize_t mask, uint64_t h, int32_t k) noexcept:
    """Entry ``k``, of hash ``h``, in the first empty slot from ``h``'s (linear probing)."""
    cdef Py_ssize_t i = <Py_ssize_t>(h & <uint64_t>mask)
    while slots[i].id >= 0:
        i = (i + 1) & mask
    slots[i].check = <uint32_t>(h >> 32)
    slots[i].id = k


cdef class _Ids:
    """Bytes -> id of an interned ASCII string (``strings[id]``), exact."""


    def __cinit__(self):
        self._slots = _empty_slots(1024, False)
        self._mask = 1023

    def __dealloc__(self):
        free(self._slots)

    cdef Py_ssize_t find(self, uint64_t h, const unsigned char* p, Py_ssize_t n,
                         list strings) noexcept:
        cdef Py_ssize_t i = <Py_ssize_t>(h & <uint64_t>self._mask), k
        cdef Slot* s
        while True:
            s = &self._slots[i]
            if s.id < 0:
                return -1
            if s.check == <uint32_t>(h >> 32):
                k = s.id
                if k < PyList_GET_SIZE(strings):
                    t = <object>PyList_GET_ITEM(strings, k)
                    if (PyUnicode_IS_ASCII(t) and PyUnicode_GET_LENGTH(t) == n
                            and memcmp(PyUnicode_DATA(t), p, n) == 0):
                        return k
            i = (i + 1) & self._mask

    cdef void ahead(self, uint64_t h) noexcept:
        """The slot ``h`` probes first, fetched into the cache ahead of `find`."""
        prefetch(&self._slots[h & <uint64_t>self._mask])

    cdef int put(self, uint64_t h, Py_ssize_t k, list strings) except -1:
        """``strings[k]`` (ASCII), whose hash is ``h``, is known as ``k``. Grown at 3/4 full,
        each entry placed again by its string's hash (a slot keeps only its high half)."""
        cdef Py_ssize_t size = self._mask + 1, j
        cdef Slot* old
        if 4 * (self._used + 1) > 3 * size:  # grown at 3/4 full: probes stay short
            old = self._slots
            self._slots = _empty_slots(2 * size, False)
            self._mask = 2 * size - 1
            for j in range(size):
                if old[j].id >= 0:
                    t = <object>PyList_GET_ITEM(strings, old[j].id)
                    _place(self._slots, self._mask,
                           _hash(<const unsigned char*>PyUnicode_DATA(t), PyUnicode_GET_LENGTH(t)),
                           old[j].id)
            free(old)
        _place(self._slots, self._mask, h, <int32_t>k)
        self._used += 1
        return 0


cdef class Texts:
    """Strings by id (an `Interner`'s interface: ``id``, ``get``, ``[id]``, ``len``), kept as
    their UTF-8 bytes end to end in one buffer with an end offset each, found again by a
    hash table of those bytes (open addressing on `_hash`, a hit compared
    byte for byte): no Python object a string. The link's raw values (a link's ``take`` in
    C finds or adds one straight from the extractor's bytes); ``[id]`` decodes it again,
    as it is needed only for the places of the links a report lists."""


    def __cinit__(self):
        # (PyMem: its blocks are Python's, seen by tracemalloc as a str's would be)
        self._slots = _empty_slots(1024, True)
        self._mask = 1023

    def __dealloc__(self):
        PyMem_Free(self._data)
        PyMem_Free(self._ends)
        PyMem_Free(self._slots)

    def __len__(self):
        return self._count

    cdef const char* _at(self, Py_ssize_t k, Py_ssize_t* n) noexcept:
        cdef int64_t start = self._ends[k - 1] if k else 0
        n[0] = <Py_ssize_t>(self._ends[k] - start)
        return self._data + start

    cdef Py_ssize_t find(self, uint64_t h, const char* p, Py_ssize_t n) noexcept:
        """The id of the ``n`` bytes at ``p`` (hash ``h``), or -1."""
        cdef Py_ssize_t i = <Py_ssize_t>(h & <uint64_t>self._mask), m
        cdef Slot* s
        cdef const char* q
        while True:
            s = &self._slots[i]
            if s.id < 0:
                return -1
            if s.check == <uint32_t>(h >> 32):
                q = self._at(s.id, &m)
                if m == n and memcmp(q, p, n) == 0:
                    return s.id
            i = (i + 1) & self._mask

    cdef Py_ssize_t add(self, uint64_t h, const char* p, Py_ssize_t n) except -1:
        """The ``n`` bytes at ``p`` (hash ``h``, not found) as the next id."""
        cdef Py_ssize_t k = self._count, need, j, size = self._mask + 1, m
        cdef Slot* old
        if k >= 0x7FFFFFFF:
            raise OverflowError("more than 2**31 distinct texts")
        if self._size + n > self._cap:
            need = max(self._size + n, self._cap + self._cap // 2, 4096)
            self._data = <char*>_grow_py(self._data, need)
            self._cap = need
        if k >= self._ecap:
            need = max(k + 1, self._ecap + self._ecap // 2, 1024)
            self._ends = <int64_t*>_grow_py(self._ends, need * sizeof(int64_t))
            self._ecap = need
        if 4 * (k + 1) > 3 * size:  # grown at 3/4 full: probes stay short
            old = self._slots
            self._slots = _empty_slots(2 * size, True)
            self._mask = 2 * size - 1
            for j in range(size):
                if old[j].id >= 0:
                    q = self._at(old[j].id, &m)
                    _place(self._slots, self._mask, _hash(<const unsigned char*>q, m), old[j].id)
            PyMem_Free(old)
        memcpy(self._data + self._size, p, n)
        self._size += n
        self._ends[k] = self._size
        self._count = k + 1
        _place(self._slots, self._mask, h, <int32_t>k)
        return k

    cdef void ahead(self, uint64_t h) noexcept:
        """The slot ``h`` probes first, fetched into the cache ahead of `find`."""
        prefetch(&self._slots[h & <uint64_t>self._mask])

    cdef Py_ssize_t id_of_hashed(self, uint64_t h, const char* p, Py_ssize_t n) except -1:
        """`id_of_bytes` with the bytes' hash ``h`` given."""
        cdef Py_ssize_t k = self.find(h, p, n)
        return k if k >= 0 else self.add(h, p, n)

    cdef Py_ssize_t id_of_bytes(self, const char* p, Py_ssize_t n) except -1:
        return self.id_of_hashed(_hash(<const unsigned char*>p, n), p, n)

    def id(self, str text):
        """The id of ``text`` (new ones get the next id)."""
        b = text.encode("utf-8", "surrogatepass")
        return self.id_of_bytes(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))

    def get(self, str text):
        """The id of ``text`` if it is known, else None (nothing added)."""
        b = text.encode("utf-8", "surrogatepass")
        cdef const char* p = PyBytes_AS_STRING(b)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(b)
        cdef Py_ssize_t k = self.find(_hash(<const unsigned char*>p, n), p, n)
        return None if k < 0 else k

    def __getitem__(self, Py_ssize_t k):
        cdef Py_ssize_t n
        if k < 0:
            k += self._count
        if not 0 <= k < self._count:
            raise IndexError("text id out of range")
        cdef const char* p = self._at(k, &n)
        return p[:n].decode("utf-8", "surrogatepass")

    def nbytes(self):
        """Bytes held: the buffer, the offsets and the hash table."""
        return self._cap + self._ecap * sizeof(int64_t) + (self._mask + 1) * sizeof(Slot)


cdef void* _grow_py(void* p, size_t n) except NULL:
    cdef void* q = PyMem_Realloc(p, n)
    if q == NULL:
        raise MemoryError()
    return q
