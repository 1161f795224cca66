# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of `crawler.urls.seen.MemorySeenSetPy` and `crawler.urls.fingerprint.FingerprinterPy`.

``MemorySeenSet``: the same sorted open-addressing table as the pure-Python seen set (read
`crawler.urls.seen` first), slot for slot: the same scattering (``m = fp * MUL``), home
(``(m * size) >> 64``, a 64x64->128-bit multiply), tail and sentinel rule, load limit and 1.5x
growth, so that tests/test_seen_hypothesis.py compares the two tables operation by operation.
The table is allocated with ``PyMem_Raw*`` (tracemalloc sees it, as it sees the Python twin's
array) and grows in place (``_grow``: a realloc and the values moved right, last to first),
where the Python twin copies into a new array: the same slots, a lower peak. ``has``/``put``
are its C-level API (``_hash_c.pxd``).

``Fingerprinter``: keyed BLAKE2b with an 8-byte digest, written here from RFC 7693 (sections
2.5-3.3: the G mixing function, the compression function F with its 12 rounds and the message
schedule SIGMA, the parameter block word ``0x0101kknn``, the key padded to one 128-byte block
of its own), returning ``int.from_bytes(digest, "little") or 1``: exactly
``crawler.urls.fingerprint.fingerprint``, as tests/test_fingerprint.py checks against hashlib at
every key length 0..64 and message lengths across the block boundaries. The key block is
compressed once, in the constructor; a URL of up to 128 bytes then costs one compression.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_RawCalloc, PyMem_RawFree, PyMem_RawMalloc, PyMem_RawRealloc
from libc.stdint cimport uint64_t
from libc.string cimport memcpy, memmove, memset

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object)
    void* PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    object PyUnicode_AsEncodedString(object, const char*, const char*)
    Py_ssize_t PyObject_Hash(object) except -1

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>

    /* The high 64 bits of a 64x64-bit product: a seen-set value's home slot. */
    static inline uint64_t hc_mulhi(uint64_t a, uint64_t b) {
    #if defined(__SIZEOF_INT128__)
        return (uint64_t)(((unsigned __int128)a * b) >> 64);
    #else
        uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
        uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
        uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
        return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    #endif
    }

    /* BLAKE2b (RFC 7693), 64-bit words, little-endian loads whatever the host's order. */
    static const uint64_t hc_iv[8] = {
        0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
        0xa54ff53a5f1d36f1ULL, 0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
        0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
    };
    /* SIGMA: the message word order of each of the 12 rounds (rounds 10 and 11 reuse 0, 1). */
    static const unsigned char hc_sigma[12][16] = {
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
        {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
        {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
        {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
        {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
        {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
        {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
        {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
        {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
        {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
        {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    };

    static inline uint64_t hc_load64(const unsigned char* p) {
        return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16)
            | ((uint64_t)p[3] << 24) | ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40)
            | ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
    }

    #define HC_ROTR(x, n) (((x) >> (n)) | ((x) << (64 - (n))))
    /* G (RFC 7693 3.1): rotations 32, 24, 16, 63 */
    #define HC_G(a, b, c, d, x, y)                       \\
        do {                                            \\
            v[a] = v[a] + v[b] + (x);                   \\
            v[d] = HC_ROTR(v[d] ^ v[a], 32);            \\
            v[c] = v[c] + v[d];                         \\
            v[b] = HC_ROTR(v[b] ^ v[c], 24);            \\
            v[a] = v[a] + v[b] + (y);                   \\
            v[d] = HC_ROTR(v[d] ^ v[a], 16);            \\
            v[c] = v[c] + v[d];                         \\
            v[b] = HC_ROTR(v[b] ^ v[c], 63);            \\
        } while (0)

    #define HC_ROUND(r)                                                   \\
        do {                                                             \\
            HC_G(0, 4, 8, 12, m[hc_sigma[r][0]], m[hc_sigma[r][1]]);     \\
            HC_G(1, 5, 9, 13, m[hc_sigma[r][2]], m[hc_sigma[r][3]]);     \\
            HC_G(2, 6, 10, 14, m[hc_sigma[r][4]], m[hc_sigma[r][5]]);    \\
            HC_G(3, 7, 11, 15, m[hc_sigma[r][6]], m[hc_sigma[r][7]]);    \\
            HC_G(0, 5, 10, 15, m[hc_sigma[r][8]], m[hc_sigma[r][9]]);    \\
            HC_G(1, 6, 11, 12, m[hc_sigma[r][10]], m[hc_sigma[r][11]]);  \\
            HC_G(2, 7, 8, 13, m[hc_sigma[r][12]], m[hc_sigma[r][13]]);   \\
            HC_G(3, 4, 9, 14, m[hc_sigma[r][14]], m[hc_sigma[r][15]]);   \\
        } while (0)

    /* F (RFC 7693 3.2): compress one 128-byte block into h; t = bytes so far (its low 64
       bits: a URL is far shorter than 2**64 bytes), last = the final block. */
    static void hc_compress(uint64_t h[8], const unsigned char* block, uint64_t t, int last) {
        uint64_t v[16], m[16];
        int i;
        for (i = 0; i < 16; i++) m[i] = hc_load64(block + 8 * i);
        for (i = 0; i < 8; i++) { v[i] = h[i]; v[i + 8] = hc_iv[i]; }
        v[12] ^= t;
        if (last) v[14] = ~v[14];
        /* the 12 rounds unrolled: the SIGMA indices become constants (m stays in registers) */
        HC_ROUND(0); HC_ROUND(1); HC_ROUND(2); HC_ROUND(3); HC_ROUND(4); HC_ROUND(5);
        HC_ROUND(6); HC_ROUND(7); HC_ROUND(8); HC_ROUND(9); HC_ROUND(10); HC_ROUND(11);
        for (i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
    }

    /* The first digest word of p[:n] from state h0 after t0 bytes (0, or 128: the key
       block); n > 0. The digest is 8 bytes: int.from_bytes(digest, "little") == h[0]. */
    static uint64_t hc_finish(const uint64_t h0[8], uint64_t t0, const unsigned char* p, size_t n) {
        uint64_t h[8];
        unsigned char last[128];
        uint64_t t = t0;
        memcpy(h, h0, sizeof(h));
        while (n > 128) {
            t += 128;
            hc_compress(h, p, t, 0);
            p += 128;
            n -= 128;
        }
        memset(last, 0, sizeof(last));
        memcpy(last, p, n);
        hc_compress(h, last, t + n, 1);
        return h[0];
    }
    """
    uint64_t hc_mulhi(uint64_t a, uint64_t b) noexcept nogil
    const uint64_t* hc_iv
    void hc_compress(uint64_t* h, const unsigned char* block, uint64_t t, int last) noexcept nogil
    uint64_t hc_finish(const uint64_t* h0, uint64_t t0, const unsigned char* p, size_t n) noexcept nogil

# Keep in step with crawler/urls/seen.py (tests/test_seen.py checks the constants match).
MUL = 0x9E3779B97F4A7C15
TAIL = 32
cdef uint64_t _MUL = 0x9E3779B97F4A7C15ULL
cdef Py_ssize_t _TAIL = 32
cdef Py_ssize_t _MIN_SIZE = 16
cdef Py_ssize_t _BLOCK = 4096  # old slots a block of the in-place growth


cdef inline Py_ssize_t _limit(Py_ssize_t size) noexcept:
    return size * 4 // 5


cdef class MemorySeenSet:
    """Compact in-memory seen set (compiled): `crawler.urls.seen.MemorySeenSetPy` in C.

    Args:
        capacity: URLs it holds before its first growth.
    """

    def __cinit__(self, Py_ssize_t capacity=1 << 14):
        cdef Py_ssize_t size = max(_MIN_SIZE, (max(<Py_ssize_t>0, capacity) * 5 + 3) // 4)
        self._table = <uint64_t*>PyMem_RawCalloc(size + _TAIL, 8)
        if self._table == NULL:
            raise MemoryError()
        self._size = size
        self._len = size + _TAIL
        self._limit = _limit(size)
        self._count = 0

    def __dealloc__(self):
        PyMem_RawFree(self._table)

    cdef bint has(self, uint64_t fp) noexcept:
        cdef uint64_t m = fp * _MUL
        if m == 0:
            m = _MUL
        cdef const uint64_t* t = self._table
        cdef Py_ssize_t i = <Py_ssize_t>hc_mulhi(m, <uint64_t>self._size)
        while t[i] != 0 and t[i] < m:
            i += 1
        return t[i] == m

    cdef bint put(self, uint64_t fp) except -1:
        cdef uint64_t m = fp * _MUL
        if m == 0:
            m = _MUL
        return self._put(m)

    cdef bint _put(self, uint64_t m) except -1:
        cdef uint64_t* t = self._table
        cdef Py_ssize_t i = <Py_ssize_t>hc_mulhi(m, <uint64_t>self._size)
        cdef Py_ssize_t j
        while t[i] != 0 and t[i] < m:
            i += 1
        if t[i] == m:
            return False
        j = i
        while t[j] != 0:
            j += 1
        if j == self._len - 1:  # the sentinel: make room first
            self._extend()
            t = self._table
        if j > i:
            memmove(t + i + 1, t + i, <size_t>(j - i) * 8)
        t[i] = m
        self._count += 1
        if self._count > self._limit:
            self._grow()
        return True

    cdef int _extend(self) except -1:
        cdef Py_ssize_t n = self._len + (self._len - self._size)
        cdef uint64_t* t = <uint64_t*>PyMem_RawRealloc(self._table, <size_t>n * 8)
        if t == NULL:
            raise MemoryError()
        memset(t + self._len, 0, <size_t>(n - self._len) * 8)
        self._table = t
        self._len = n
        return 0

    cdef int _grow(self) except -1:
        # In place: every value's new slot is at or right of its old one (its home only grows
        # with the size, and slot = max(home, previous + 1) keeps that), so after a realloc
        # the values can be moved right from the last to the first without a second table:
        # the peak is the new table alone (glibc grows a large block by mremap, no copy).
        # The new slot of a value is a prefix maximum (max(home, previous + 1)), computed
        # forward: pass 1 records it at the start of each block of _BLOCK old slots (and
        # gives the final length), pass 2 takes the blocks last to first, recomputes the
        # block's new slots forward into a buffer and moves its values backward. A value
        # moved right never lands in a block not yet processed (those lie to its left).
        cdef Py_ssize_t size = self._size + (self._size >> 1)
        cdef Py_ssize_t old_len = self._len
        cdef Py_ssize_t n = size + _TAIL
        cdef Py_ssize_t nblocks = (old_len + _BLOCK - 1) // _BLOCK
        cdef Py_ssize_t b, k, lo, hi, i, q = -1
        cdef uint64_t m
        cdef uint64_t* t = self._table
        cdef Py_ssize_t* starts
        cdef Py_ssize_t* slot
        starts = <Py_ssize_t*>PyMem_RawMalloc(<size_t>(nblocks + _BLOCK) * sizeof(Py_ssize_t))
        if starts == NULL:
            raise MemoryError()
        slot = starts + nblocks
        for b in range(nblocks):
            starts[b] = q
            for k in range(b * _BLOCK, min(old_len, (b + 1) * _BLOCK)):
                m = t[k]
                if m != 0:
                    i = <Py_ssize_t>hc_mulhi(m, <uint64_t>size)
                    q = i if i > q else q + 1
        while q >= n - 1:  # the last slot stays empty: the tail doubles as the twin's does
            n += n - size
        if n < old_len:  # an old tail longer than the new table's (tiny sets only)
            PyMem_RawFree(starts)
            return self._grow_copy(size, n)
        t = <uint64_t*>PyMem_RawRealloc(t, <size_t>n * 8)
        if t == NULL:
            PyMem_RawFree(starts)
            raise MemoryError()
        memset(t + old_len, 0, <size_t>(n - old_len) * 8)
        for b in range(nblocks - 1, -1, -1):
            q = starts[b]
            lo = b * _BLOCK
            hi = min(old_len, lo + _BLOCK)
            for k in range(lo, hi):
                m = t[k]
                if m != 0:
                    i = <Py_ssize_t>hc_mulhi(m, <uint64_t>size)
                    q = i if i > q else q + 1
                    slot[k - lo] = q
            for k in range(hi - 1, lo - 1, -1):
                m = t[k]
                if m != 0 and slot[k - lo] != k:
                    t[slot[k - lo]] = m
                    t[k] = 0
        PyMem_RawFree(starts)
        self._table = t
        self._len = n
        self._size = size
        self._limit = _limit(size)
        return 0

    cdef int _grow_copy(self, Py_ssize_t size, Py_ssize_t n) except -1:
        # into a new table of n slots (n: the length pass 1 found, tail doublings included)
        cdef Py_ssize_t k, i, last = -1
        cdef uint64_t m
        cdef uint64_t* old = self._table
        cdef uint64_t* t = <uint64_t*>PyMem_RawCalloc(n, 8)
        if t == NULL:
            raise MemoryError()
        for k in range(self._len):
            m = old[k]
            if m != 0:
                i = <Py_ssize_t>hc_mulhi(m, <uint64_t>size)
                if i <= last:
                    i = last + 1
                t[i] = m
                last = i
        PyMem_RawFree(old)
        self._table = t
        self._len = n
        self._size = size
        self._limit = _limit(size)
        return 0

    def add(self, url):
        """Add ``url`` by Python's ``hash``; True if it was new."""
        cdef uint64_t fp = <uint64_t>PyObject_Hash(url)
        return self.put(fp if fp != 0 else 1)

    def add_fp(self, uint64_t fp):
        """Add a fingerprint (an int in [1, 2**64)); True if new."""
        if fp == 0:
            raise ValueError("0 is not a fingerprint (they are in [1, 2**64))")
        return self.put(fp)

    def update_fps(self, fps):
        """Add many fingerprints (loading a stored crawl); returns how many were new."""
        cdef Py_ssize_t before = self._count
        cdef uint64_t fp
        for obj in fps:
            fp = obj
            if fp == 0:
                raise ValueError("0 is not a fingerprint (they are in [1, 2**64))")
            self.put(fp)
        return self._count - before

    def contains_fp(self, uint64_t fp):
        """Whether fingerprint ``fp`` was added."""
        return fp != 0 and self.has(fp)

    def __contains__(self, url):
        if not isinstance(url, str):
            return False
        cdef uint64_t fp = <uint64_t>PyObject_Hash(url)
        return self.has(fp if fp != 0 else 1)

    def __len__(self):
        return self._count

    @property
    def nbytes(self):
        """Bytes held by the table itself."""
        return self._len * 8

    def _dump(self):
        """The table's slots (native byte order), to compare the twins' layouts in tests."""
        return (<char*>self._table)[:self._len * 8]


cdef class Fingerprinter:
    """Keyed BLAKE2b-64 of a URL's UTF-8 (compiled): `crawler.urls.fingerprint.FingerprinterPy`.

    ``Fingerprinter(key)(url) == int.from_bytes(blake2b(url_utf8, digest_size=8,
    key=key).digest(), "little") or 1``, the UTF-8 with ``surrogatepass``.
    """

    def __init__(self, key):
        cdef bytes k = bytes(key)
        cdef Py_ssize_t kk = PyBytes_GET_SIZE(k)
        cdef unsigned char block[128]
        cdef uint64_t h[8]
        cdef int i
        if kk > 64:
            raise ValueError("maximum key length is 64 bytes")
        self.key = k
        for i in range(8):
            self._h[i] = hc_iv[i]
        # the parameter block's first word: digest length 8, key length kk, fanout 1, depth 1
        self._h[0] ^= 0x01010000 ^ (<uint64_t>kk << 8) ^ 8
        if kk:
            memset(block, 0, 128)
            memcpy(block, PyBytes_AS_STRING(k), kk)
            self._t0 = 128
            # the empty message: the key block is the last one
            self._empty = hc_finish(self._h, 0, block, 128) or 1
            hc_compress(self._h, block, 128, 0)
        else:
            # unkeyed and empty: one all-zero final block, counter 0
            self._t0 = 0
            memset(block, 0, 128)
            memcpy(h, self._h, sizeof(h))
            hc_compress(h, block, 0, 1)
            self._empty = h[0] or 1

    cdef uint64_t fp_bytes(self, const unsigned char* p, Py_ssize_t n) noexcept nogil:
        if n <= 0:
            return self._empty
        return hc_finish(self._h, self._t0, p, <size_t>n) or 1

    def __call__(self, str url):
        cdef bytes b
        if PyUnicode_IS_ASCII(url):
            return self.fp_bytes(<const unsigned char*>PyUnicode_DATA(url), PyUnicode_GET_LENGTH(url))
        # surrogatepass: a lone surrogate still gets a fingerprint (no UTF-8 cached in the str)
        b = PyUnicode_AsEncodedString(url, "utf-8", "surrogatepass")
        return self.fp_bytes(<const unsigned char*>PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))

    def __repr__(self):
        return "Fingerprinter(<key>)"  # the key stays out of logs


def fingerprint(str url, key):
    """The fingerprint of ``url`` under ``key`` (compiled): ``Fingerprinter(key)(url)``."""
    return Fingerprinter(key)(url)
