# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled link intake (the twin of `crawler.urls.intake.IntakePy`; read that module first).

Per link, in C: canonicalise a WHATWG-serialised URL exactly as
`crawler.urls.policy.UrlPolicy.canonical_resolved` does (fragment, userinfo, percent-escapes, an
empty query, ``sort_query`` and ``drop_params``), hash the canonical bytes (SipHash-1-3 under a
random per-process key) and probe the recent table; on a miss, when a state is bound
(`Intake.bind`), fingerprint it (the state's keyed BLAKE2b, `crawler.urls._hash_c`) and probe the
state's seen set. A repeat costs no Python object; a URL neither knows comes out as its
canonical ``str``, unless the host rule puts it out of scope and a host scope is set
(`Intake.set_host_scope`): then only its fingerprint is kept, in a C buffer
(`Intake.take_external`).

The compiled extractor calls `Intake.resolved` with the resolved URL still in its own buffer
(`crawler.extract._extract_c`), so that a repeated link never becomes a ``Link`` at all.
"""

from cpython cimport array
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport uint64_t
from libc.stdlib cimport free, malloc, qsort, realloc
from posix.stdlib cimport posix_memalign
from libc.string cimport memchr, memcmp, memcpy, memset

import os
from array import array as _array

from crawler.urls._hash_c cimport Fingerprinter, MemorySeenSet

cdef extern from "Python.h":
    ctypedef struct PyObject
    PyObject* PyDict_GetItemWithError(object, object) except? NULL
    bint PyUnicode_IS_ASCII(object)
    void* PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    object PyUnicode_DecodeASCII(const char*, Py_ssize_t, const char*)
    const Py_ssize_t PY_SSIZE_T_MAX

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* SipHash-1-3 (Aumasson and Bernstein; one compression round, three finalisation rounds,
       as CPython's str hash since 3.11): a keyed 64-bit PRF, so that a page cannot aim for a
       collision in the recent table without knowing the key. */
    #define IN_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
    #define IN_ROUND                                                       \\
        do {                                                               \\
            v0 += v1; v1 = IN_ROTL(v1, 13); v1 ^= v0; v0 = IN_ROTL(v0, 32); \\
            v2 += v3; v3 = IN_ROTL(v3, 16); v3 ^= v2;                      \\
            v0 += v3; v3 = IN_ROTL(v3, 21); v3 ^= v0;                      \\
            v2 += v1; v1 = IN_ROTL(v1, 17); v1 ^= v2; v2 = IN_ROTL(v2, 32); \\
        } while (0)
    static inline uint64_t in_load64(const unsigned char* p) {
        return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16)
            | ((uint64_t)p[3] << 24) | ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40)
            | ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
    }
    static uint64_t in_siphash13(uint64_t k0, uint64_t k1, const unsigned char* p, size_t n) {
        uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
        uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
        uint64_t b = ((uint64_t)n) << 56, m;
        const unsigned char* end = p + (n & ~(size_t)7);
        for (; p < end; p += 8) {
            m = in_load64(p);
            v3 ^= m; IN_ROUND; v0 ^= m;
        }
        switch (n & 7) {
            case 7: b |= ((uint64_t)p[6]) << 48; /* fall through */
            case 6: b |= ((uint64_t)p[5]) << 40; /* fall through */
            case 5: b |= ((uint64_t)p[4]) << 32; /* fall through */
            case 4: b |= ((uint64_t)p[3]) << 24; /* fall through */
            case 3: b |= ((uint64_t)p[2]) << 16; /* fall through */
            case 2: b |= ((uint64_t)p[1]) << 8; /* fall through */
            case 1: b |= ((uint64_t)p[0]); break;
            case 0: break;
        }
        v3 ^= b; IN_ROUND; v0 ^= b;
        v2 ^= 0xff; IN_ROUND; IN_ROUND; IN_ROUND;
        return v0 ^ v1 ^ v2 ^ v3;
    }
    typedef struct { const unsigned char* p; Py_ssize_t n; } in_slice;
    static int in_slice_cmp(const void* a, const void* b) {
        const in_slice* x = (const in_slice*)a;
        const in_slice* y = (const in_slice*)b;
        Py_ssize_t n = x->n < y->n ? x->n : y->n;
        int c = n ? memcmp(x->p, y->p, (size_t)n) : 0;
        if (c) return c;
        return x->n < y->n ? -1 : (x->n > y->n ? 1 : 0);
    }
    /* fnmatch of an ASCII name against a pattern of literals, '*' and '?' (the caller sends
       patterns with '[' to Python): greedy with one backtrack point, linear in practice. */
    static int in_glob(const unsigned char* pat, Py_ssize_t m, const unsigned char* s, Py_ssize_t n) {
        Py_ssize_t p = 0, i = 0, star = -1, mark = 0;
        while (i < n) {
            if (p < m && (pat[p] == '?' || (pat[p] != '*' && pat[p] == s[i]))) { p++; i++; }
            else if (p < m && pat[p] == '*') { star = p++; mark = i; }
            else if (star >= 0) { p = star + 1; i = ++mark; }
            else return 0;
        }
        while (p < m && pat[p] == '*') p++;
        return p == m;
    }
    """
    uint64_t in_siphash13(uint64_t k0, uint64_t k1, const unsigned char* p, size_t n) noexcept nogil
    ctypedef struct in_slice:
        const unsigned char* p
        Py_ssize_t n
    int in_slice_cmp(const void* a, const void* b) noexcept nogil
    int in_glob(const unsigned char* pat, Py_ssize_t m, const unsigned char* s, Py_ssize_t n) noexcept nogil

DEF NOT_HTTP = -1
DEF NEED_PY = -3

# RFC 3986 unreserved characters: decoding their escapes never changes a URL's meaning.
cdef unsigned char UNRESERVED[256]
cdef signed char HEX[256]


cdef void _init_tables() noexcept:
    cdef int i
    for i in range(256):
        UNRESERVED[i] = 0
        HEX[i] = -1
    for c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~":
        UNRESERVED[c] = 1
    for i in range(10):
        HEX[0x30 + i] = i
    for i in range(6):
        HEX[0x41 + i] = 10 + i
        HEX[0x61 + i] = 10 + i


_init_tables()
cdef const char* _UPPER_HEX = b"0123456789ABCDEF"


cdef array.array _EMPTY_Q = _array("Q")


cdef class Intake:
    """Links of a chunk in, the canonical URLs the recent table does not know out.

    Args:
        policy: the crawl's ``UrlPolicy`` (canonicalisation the C code cannot do goes to it).
        sort_query, drop_params: the crawl's query rules (as ``UrlPolicy`` got them).
        respect_nofollow: drop links whose ``rel`` has ``nofollow``.
        all_links: keep non-http(s) links (as ``Link`` items) for listing.
        slots: entries of the recent table (a power of two; 8 bytes each).
    """

    def __cinit__(self):
        self.limit = PY_SSIZE_T_MAX
        self._table = NULL
        self._buf = NULL
        self._params = NULL
        self._ext = NULL

    def __init__(self, policy, *, bint sort_query=False, drop_params=(),
                 bint respect_nofollow=False, bint all_links=False, Py_ssize_t slots=1 << 18):
        cdef int bits = 0
        if slots < 4 or slots & (slots - 1):
            raise ValueError("slots must be a power of two (at least 4)")
        while (<Py_ssize_t>1 << bits) < slots:
            bits += 1
        self._policy = policy
        self.respect_nofollow = respect_nofollow
        self.all_links = all_links
        self._sort = sort_query
        pats = [p for p in drop_params if p]
        self._drop = [p.encode("ascii") for p in pats if p.isascii() and "[" not in p]
        # A pattern with a character class (or not ASCII): every URL with a query is
        # canonicalised by the policy (fnmatch), a rare setting that is exact rather than fast.
        self._drop_py = len(self._drop) != len(pats)
        self._shift = 64 - bits
        self._mask = <uint64_t>slots - 1
        free(self._table)
        # 64-byte aligned, so that a 4-way bucket (32 bytes) never straddles two cache lines:
        # a probe is one line (glibc's malloc of a table this size is 16 bytes past a page).
        self._table = NULL
        if posix_memalign(<void**>&self._table, 64, slots * sizeof(uint64_t)) != 0:
            self._table = NULL
            raise MemoryError()
        memset(self._table, 0, slots * sizeof(uint64_t))
        key = os.urandom(16)
        self._k0 = int.from_bytes(key[:8], "little")
        self._k1 = int.from_bytes(key[8:], "little")
        self._cap = 0
        self._pcap = 0
        self.found = 0
        self.repeated = 0
        self.known = 0
        self.external = 0
        self._seen = None
        self._fper = None
        self._host_scope = None
        self._scope_cache = None
        self._next = 0

    def __dealloc__(self):
        free(self._table)
        free(self._buf)
        free(self._params)
        free(self._ext)

    # -- the C API (crawler/urls/_intake_c.pxd) --

    cdef int _ensure(self, Py_ssize_t n) except -1:
        cdef unsigned char* b
        if n <= self._cap:
            return 0
        n = n * 2 + 256
        b = <unsigned char*>realloc(self._buf, n)
        if b == NULL:
            raise MemoryError()
        self._buf = b
        self._cap = n
        return 0

    cdef Py_ssize_t _canon(self, const unsigned char* s, Py_ssize_t n) except -2:
        """`UrlPolicy.canonical_resolved` of s[:n] into ``_buf``: its length, NOT_HTTP or NEED_PY."""
        cdef Py_ssize_t pre, i, end, lim, at, m, q, j
        cdef bint stray
        cdef const unsigned char* h
        cdef unsigned char* o
        cdef int a, b
        if n >= 7 and memcmp(s, b"http://", 7) == 0:
            pre = 7
        elif n >= 8 and memcmp(s, b"https://", 8) == 0:
            pre = 8
        else:
            return NOT_HTTP
        h = <const unsigned char*>memchr(s, 0x23, n)
        if h != NULL:
            n = h - s
        end = -1
        for i in range(8, n):
            if s[i] == 0x2F:
                end = i
                break
        lim = end if end >= 0 else n
        at = -1
        i = lim - 1
        while i >= 0:
            if s[i] == 0x40:
                at = i
                break
            i -= 1
        self._ensure(2 * n + 2)
        o = self._buf
        if at >= 0:
            memcpy(o, s, pre)
            memcpy(o + pre, s + at + 1, n - at - 1)
            m = pre + n - at - 1
        else:
            memcpy(o, s, n)
            m = n
        if memchr(o, 0x25, m) != NULL:
            # (a stray '%', not followed by two hex digits: escapes only upper-cased, as
            # `policy._STRAY` says why)
            stray = False
            for i in range(m):
                if o[i] == 0x25 and not (i + 2 < m and HEX[o[i + 1]] >= 0 and HEX[o[i + 2]] >= 0):
                    stray = True
                    break
            j = 0
            i = 0
            while i < m:
                if o[i] == 0x25 and i + 2 < m and HEX[o[i + 1]] >= 0 and HEX[o[i + 2]] >= 0:
                    a = HEX[o[i + 1]]
                    b = HEX[o[i + 2]]
                    if UNRESERVED[a * 16 + b] and not stray:
                        o[j] = <unsigned char>(a * 16 + b)
                        j += 1
                    else:
                        o[j] = 0x25
                        o[j + 1] = _UPPER_HEX[a]
                        o[j + 2] = _UPPER_HEX[b]
                        j += 3
                    i += 3
                else:
                    o[j] = o[i]
                    j += 1
                    i += 1
            m = j
        h = <const unsigned char*>memchr(o, 0x3F, m)
        if h != NULL:
            q = h - o
            if q == m - 1:
                m -= 1
            elif self._sort or self._drop or self._drop_py:
                if self._drop_py:
                    return NEED_PY
                m = self._fix_query(q, m)
        return m

    cdef Py_ssize_t _fix_query(self, Py_ssize_t q, Py_ssize_t m) except -1:
        # `UrlPolicy._fix_query` on _buf[:m], whose '?' is at q (the buffer has room for 2m+2).
        cdef unsigned char* o = self._buf
        cdef unsigned char* t = o + m + 1
        cdef Py_ssize_t n = m - q - 1, i, start, k = 0, e, j, out
        cdef in_slice* ps
        cdef bytes pat
        cdef bint drop
        memcpy(t, o + q + 1, n)
        if n + 1 > self._pcap:
            ps = <in_slice*>realloc(self._params, (n + 1) * sizeof(in_slice))
            if ps == NULL:
                raise MemoryError()
            self._params = ps
            self._pcap = n + 1
        ps = <in_slice*>self._params
        start = 0
        for i in range(n + 1):
            if i == n or t[i] == 0x26:
                if i > start:
                    drop = False
                    if self._drop:
                        e = start
                        while e < i and t[e] != 0x3D:
                            e += 1
                        for pat in self._drop:
                            if in_glob(<const unsigned char*>PyBytes_AS_STRING(pat),
                                       PyBytes_GET_SIZE(pat), t + start, e - start):
                                drop = True
                                break
                    if not drop:
                        ps[k].p = t + start
                        ps[k].n = i - start
                        k += 1
                start = i + 1
        if k == 0:
            return q
        if self._sort and k > 1:
            qsort(ps, k, sizeof(in_slice), in_slice_cmp)
        out = q + 1
        for j in range(k):
            if j:
                o[out] = 0x26
                out += 1
            memcpy(o + out, ps[j].p, ps[j].n)
            out += ps[j].n
        return out

    # The table is 4-way set-associative: a URL's hash picks a bucket of four entries (one
    # cache line's half), so that two URLs evict each other only when five meet in a bucket
    # (direct-mapped, 20,000 URLs in 2**18 entries lost ~4% to collisions; 4-way, none).

    cdef bint _known(self, const unsigned char* p, Py_ssize_t n) noexcept:
        cdef uint64_t h = in_siphash13(self._k0, self._k1, p, n) | 1
        cdef uint64_t* b = self._table + ((h >> self._shift) & ~(<uint64_t>3))
        return b[0] == h or b[1] == h or b[2] == h or b[3] == h

    cdef void _put(self, const unsigned char* p, Py_ssize_t n) noexcept:
        cdef uint64_t h = in_siphash13(self._k0, self._k1, p, n) | 1
        cdef uint64_t* b = self._table + ((h >> self._shift) & ~(<uint64_t>3))
        cdef int i
        for i in range(4):
            if b[i] == h:
                return
        for i in range(4):
            if b[i] == 0:
                b[i] = h
                return
        b[(h >> 1) & 3] = h  # full: a victim the hash picks

    cdef int resolved(self, const unsigned char* url, Py_ssize_t n, bint nofollow, list out) except -1:
        """One link whose resolved (WHATWG-serialised) URL is url[:n]; 1: not http(s), not
        taken (the caller makes a ``Link`` of it for `take_link`)."""
        cdef Py_ssize_t m
        self.found += 1
        if self.found > self.limit:  # past the page's cap: counted only
            return 0
        if nofollow and self.respect_nofollow:
            return 0
        m = self._canon(url, n)
        if m >= 0:
            if self._known(self._buf, m):
                self.repeated += 1
                return 0
            return self._new(self._buf, m, None, out)
        if m == NOT_HTTP:
            self.found -= 1
            return 1  # not the fast path's kind of URL: the caller makes a Link of it
        self._py_canon(PyUnicode_DecodeASCII(<const char*>url, n, NULL), out)
        return 0

    cdef int _py_canon(self, str url, list out) except -1:
        canon = self._policy.canonical_resolved(url)  # http(s): never None
        return self._canon_str(canon, out)

    cdef int _canon_str(self, str canon, list out) except -1:
        cdef const unsigned char* p
        if not PyUnicode_IS_ASCII(canon):
            out.append(canon)  # (not WHATWG-serialised: admission decides it)
            return 0
        p = <const unsigned char*>PyUnicode_DATA(canon)
        if self._known(p, PyUnicode_GET_LENGTH(canon)):
            self.repeated += 1
            return 0
        return self._new(p, PyUnicode_GET_LENGTH(canon), canon, out)

    cdef int _new(self, const unsigned char* p, Py_ssize_t m, str s, list out) except -1:
        """A canonical ASCII URL p[:m] (``s``, or None: made here) the recent table does not
        hold: dropped (and put in the table) when the bound state knows it, else an item."""
        cdef uint64_t fp
        if self._seen is not None:
            if self._fper is not None:
                fp = self._fper.fp_bytes(p, m)
            else:
                if s is None:
                    s = PyUnicode_DecodeASCII(<const char*>p, m, NULL)
                fp = <uint64_t>hash(s)  # MemoryState's fingerprint: (hash & 2**64-1) or 1
                if fp == 0:
                    fp = 1
            if self._seen.has(fp):
                self._put(p, m)
                self.known += 1
                return 0
            if self._host_scope is not None and self._outside(p, m, s):
                if self._next == self._ecap:
                    self._grow_ext()
                self._ext[self._next] = fp
                self._next += 1
                self.external += 1
                return 0
        out.append(s if s is not None else PyUnicode_DecodeASCII(<const char*>p, m, NULL))
        return 0

    cdef int _outside(self, const unsigned char* p, Py_ssize_t m, str s) except -1:
        """1 if the host rule puts the canonical URL p[:m] out of scope: its origin text
        looked up in the policy's cache (``UrlPolicy.host_cache``, keyed as ``host_scope``
        keys it: up to the first "/" from index 8), ``host_scope`` on a miss."""
        cdef Py_ssize_t end = m
        cdef const unsigned char* slash
        cdef PyObject* v
        if self._scope_cache is not None:
            if m > 8:
                slash = <const unsigned char*>memchr(p + 8, b"/", m - 8)
                if slash != NULL:
                    end = slash - p
            key = PyUnicode_DecodeASCII(<const char*>p, end, NULL)
            v = PyDict_GetItemWithError(self._scope_cache, key)  # (NULL and no error: a miss)
            if v != NULL:
                return <object>v is None
        if s is None:
            s = PyUnicode_DecodeASCII(<const char*>p, m, NULL)
        return self._host_scope(s) is None

    cdef int _grow_ext(self) except -1:
        cdef Py_ssize_t n = self._ecap * 2 + 64
        cdef uint64_t* b = <uint64_t*>realloc(self._ext, n * sizeof(uint64_t))
        if b == NULL:
            raise MemoryError()
        self._ext = b
        self._ecap = n
        return 0

    cdef int take_link(self, object link, list out) except -1:
        """One ``Link``: its canonical URL if the table does not know it; the Link itself
        when its URL is None (invalid: counted, and listed with all_links) or, with all_links,
        not http(s)."""
        cdef tuple t = <tuple>link
        cdef Py_ssize_t m
        self.found += 1
        if self.found > self.limit:  # past the page's cap: counted only
            return 0
        if self.respect_nofollow and t[4]:
            return 0
        url = t[0]
        if url is None:
            out.append(link)
            return 0
        if PyUnicode_IS_ASCII(url):
            m = self._canon(<const unsigned char*>PyUnicode_DATA(url), PyUnicode_GET_LENGTH(url))
            if m >= 0:
                if self._known(self._buf, m):
                    self.repeated += 1
                    return 0
                return self._new(self._buf, m, None, out)
            if m == NOT_HTTP:
                if self.all_links:
                    out.append(link)
                return 0
        canon = self._policy.canonical_resolved(url)
        if canon is None:
            if self.all_links:
                out.append(link)
            return 0
        return self._canon_str(canon, out)

    # -- the Python API (the same as IntakePy's) --

    def bind(self, seen, fingerprinter=None):
        """Probe the crawl state's own seen set too (``CrawlState.probe_parts``): a URL the
        table does not hold but the state knows is dropped here (and put in the table).

        ``seen`` is the state's local seen set, ``fingerprinter`` its fingerprint (None:
        Python's ``hash``, as ``MemoryState``'s). Only the compiled ones can be probed from
        C: anything else (or ``seen`` None) unbinds, and admission probes alone."""
        if isinstance(seen, MemorySeenSet) and (
                fingerprinter is None or isinstance(fingerprinter, Fingerprinter)):
            self._seen = seen
            self._fper = fingerprinter
        else:
            self._seen = None
            self._fper = None

    def set_host_scope(self, host_scope, cache=None):
        """Keep only the fingerprint of a new URL the host rule puts out of scope.

        ``host_scope`` is ``UrlPolicy.host_scope`` (None: off), ``cache`` the dict it fills
        (``UrlPolicy.host_cache``), read here first. While a state is bound, a URL neither the
        table nor the state knows whose ``host_scope`` is None is no item: its fingerprint
        waits in `take_external` (the state records it seen, ``offer_seen``), as admission
        would have offered it ``queue=False``. Off with ``all_links`` (admission lists such
        URLs)."""
        if cache is not None and type(cache) is not dict:
            raise TypeError("cache must be a dict")
        self._host_scope = None if self.all_links else host_scope
        self._scope_cache = None if self._host_scope is None else cache

    @property
    def external_pending(self):
        """How many fingerprints `take_external` would return."""
        return self._next

    def take_external(self):
        """The fingerprints of the out-of-scope URLs kept since the last call, in order, as
        an ``array('Q')`` (empty when none); the buffer starts over."""
        cdef array.array out = array.clone(_EMPTY_Q, self._next, False)
        if self._next:
            memcpy(out.data.as_voidptr, self._ext, self._next * sizeof(uint64_t))
        self._next = 0
        return out

    def take(self, links):
        """The items of ``links`` (see `crawler.urls.intake`), in order."""
        cdef list out = []
        for link in links:
            self.take_link(link, out)
        return out

    def mark(self, str url):
        """``url`` (canonical) is known from now on: its repeats are dropped."""
        if PyUnicode_IS_ASCII(url):
            self._put(<const unsigned char*>PyUnicode_DATA(url), PyUnicode_GET_LENGTH(url))

    def mark_many(self, urls):
        """`mark` of each of ``urls``."""
        for url in urls:
            if PyUnicode_IS_ASCII(url):
                self._put(<const unsigned char*>PyUnicode_DATA(url), PyUnicode_GET_LENGTH(url))

    def knows(self, str url):
        """Whether the table holds ``url`` (canonical)."""
        return bool(PyUnicode_IS_ASCII(url) and self._known(
            <const unsigned char*>PyUnicode_DATA(url), PyUnicode_GET_LENGTH(url)))

    def forget(self):
        """Empty the table (the crawl state may have lost what it held)."""
        memset(self._table, 0, (self._mask + 1) * sizeof(uint64_t))

    def canonical(self, str url):
        """The C canonicalisation of a WHATWG-serialised URL (for tests): as
        ``UrlPolicy.canonical_resolved``."""
        cdef Py_ssize_t m
        if not PyUnicode_IS_ASCII(url):
            return self._policy.canonical_resolved(url)
        m = self._canon(<const unsigned char*>PyUnicode_DATA(url), PyUnicode_GET_LENGTH(url))
        if m == NOT_HTTP:
            return None
        if m == NEED_PY:
            return self._policy.canonical_resolved(url)
        return PyUnicode_DecodeASCII(<const char*>self._buf, m, NULL)

    def __repr__(self):
        return (f"<Intake (compiled) found={self.found} repeated={self.repeated}"
                f" known={self.known} external={self.external}>")
