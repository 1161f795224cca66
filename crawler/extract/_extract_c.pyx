# cython: language_level=3, boundscheck=False, cdivision=True, initializedcheck=False
"""Compiled twin of `_machine.LinkExtractor`: the same states, the same output, in C.

The pure-Python module (`_machine.py`) is the reference; this one must give identical results
for every input and every chunking (tests/test_extract_accel.py checks it differentially).
Where the Python version jumps with a regular expression, this one walks the bytes once with
``memchr`` and small per-state loops:

* data state: ``memchr`` to the next ``<``, then the same case analysis as `_machine._scan`;
* every tag (start or end, wanted or not) goes through the streaming tag machine (the
  ``TS_*`` sub-states of `_machine._tag_stream`), which keeps only the lower-cased tag name,
  the attribute name being read and the values of the wanted attributes (in a C arena);
* comments, bogus comments, CDATA, raw text and script data search for their end and, when
  it is not in the buffer, keep the same short tail as the Python version.

Python objects are built only for the links found. A link tag in HTML content (``a``,
``area``, ``iframe``... of the link set) is emitted straight from the C attribute slots
(`_emit_simple`): value decoding, character references of ASCII values, ``rel=nofollow`` and
URL resolution in C, the `Link` tuple allocated in C. The rarer logic (``<base>``, meta
refresh/robots/charset, srcset, non-ASCII values) is the reference's code compiled as is, on
the reference's ``{name: value}`` dict; the tree-builder state (the svg/math stack, frameset
documents, templates: `_tree.py`) is the very same source, included below and compiled;
encoding sniffing is shared Python code (`charset`). The URL fast path handles ASCII values of the common forms
(absolute http(s) with a plain host, scheme-relative, root-relative, path-relative,
query-only, empty or fragment-only); whatever it does not answer goes to the Python resolver
(`_resolve.Resolver`: its own fast path, then Ada), so a miss here can never change a result.

Positions (`_advance`, `_locate`): the same lazy counting as the reference; line breaks by
SSE2/AVX2 counting of LFs (CRs only in a buffer that has one), the last break by ``memrchr``,
columns of ASCII ranges by subtraction and of UTF-8 by the standard's decoder written in C
(the CJK encodings through the same Python decoder as the reference).

Memory: the tail kept between chunks is the reference's (at most 10 bytes, outside a tag); a
tag keeps its name (up to 256 bytes), the attribute name being read (64) and the wanted values,
each copied only up to ``max_token`` bytes and dropped whole beyond it.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from libc.stdlib cimport free, malloc, realloc
from libc.stdint cimport int64_t
from libc.string cimport memchr, memcmp, memcpy

import codecs
import json

from . import _resolve
from . import charset as _charset
from ._entities import C1, NAMED, unescape_attr
from ._link import Link
from ._html import _AUX, _BREAKOUT, _INTEGRATION, _RAWTEXT_NAMES, _SWITCH_NAMES, _WS_SPLIT
from ._html import LINK_SETS, dom_text, parse_srcset, refresh_url
from ._linkset import MAX_ID_CHARS, MAX_IDS, MAX_TOKEN, _link_config, link_set_key
from ._headfacts import HEAD_FACT_TAGS, HEAD_SCOPE, HeadFacts, head_tag
from ._states import _SWITCH
from .charset import MULTIBYTE_CODECS, Iso2022JPDecoder

# The tree-builder state both twins share, compiled here from the same source text
# (ForeignStack, FramesetState and their tables: `_tree.py`).
include "_tree.py"
from ._resolve import Resolver
from ._intake_base_c cimport IntakeBase

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object)
    void* PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    object PyUnicode_DecodeASCII(const char*, Py_ssize_t, const char*)

# Counting for `LinkExtractor._advance`: a byte's occurrences, CR LF pairs, the last
# occurrence, the leading ASCII run, with SSE2 (AVX2 when the CPU has it) on x86-64 and plain
# loops elsewhere. Every byte of a page is counted once, so these must cost well under one
# instruction a byte.
cdef extern from *:
    """
    #include <string.h>
    /* (-DLC_NO_AVX2, -DLC_NO_SIMD: build the other paths, to test them) */
    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(LC_NO_SIMD)
    #include <emmintrin.h>
    #include <immintrin.h>
    #define LC_SSE2 1
    #ifndef LC_NO_AVX2
    #define LC_AVX2 1
    #endif
    #endif

    #ifdef LC_SSE2
    #define LC_L(o) _mm_loadu_si128((const __m128i*)(p + (o)))
    /* LFs of p[i:n] counted 64 bytes at a time from i, into *k; returns where it stopped. */
    static Py_ssize_t lc_lf_sse2(const unsigned char* p, Py_ssize_t i, Py_ssize_t n,
                                 Py_ssize_t* k, int* high) {
        const __m128i lf = _mm_set1_epi8(10), z = _mm_setzero_si128();
        __m128i acc, s, hi = z, v0, v1, v2, v3;
        Py_ssize_t blocks, j;
        while (n - i >= 64) {
            blocks = (n - i) / 64;
            if (blocks > 63) blocks = 63;  /* a lane counts up to 4 * 63 < 256 */
            acc = z;
            for (j = 0; j < blocks; j++, i += 64) {
                v0 = LC_L(i);
                v1 = LC_L(i + 16);
                v2 = LC_L(i + 32);
                v3 = LC_L(i + 48);
                acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v0, lf));
                acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v1, lf));
                acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v2, lf));
                acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v3, lf));
                hi = _mm_or_si128(hi, _mm_or_si128(_mm_or_si128(v0, v1), _mm_or_si128(v2, v3)));
            }
            s = _mm_sad_epu8(acc, z);
            *k += _mm_cvtsi128_si32(s) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(s, s));
        }
        if (_mm_movemask_epi8(hi)) *high = 1;
        return i;
    }
    #endif

    #ifdef LC_AVX2
    #define LC_L2(o) _mm256_loadu_si256((const __m256i*)(p + (o)))
    __attribute__((target("avx2")))
    static Py_ssize_t lc_lf_avx2(const unsigned char* p, Py_ssize_t i, Py_ssize_t n,
                                 Py_ssize_t* k, int* high) {
        const __m256i lf = _mm256_set1_epi8(10), z = _mm256_setzero_si256();
        __m256i acc, s, hi = z, v0, v1, v2, v3;
        Py_ssize_t blocks, j;
        while (n - i >= 128) {
            blocks = (n - i) / 128;
            if (blocks > 63) blocks = 63;
            acc = z;
            for (j = 0; j < blocks; j++, i += 128) {
                v0 = LC_L2(i);
                v1 = LC_L2(i + 32);
                v2 = LC_L2(i + 64);
                v3 = LC_L2(i + 96);
                acc = _mm256_sub_epi8(acc, _mm256_cmpeq_epi8(v0, lf));
                acc = _mm256_sub_epi8(acc, _mm256_cmpeq_epi8(v1, lf));
                acc = _mm256_sub_epi8(acc, _mm256_cmpeq_epi8(v2, lf));
                acc = _mm256_sub_epi8(acc, _mm256_cmpeq_epi8(v3, lf));
                hi = _mm256_or_si256(hi, _mm256_or_si256(_mm256_or_si256(v0, v1),
                                                         _mm256_or_si256(v2, v3)));
            }
            s = _mm256_sad_epu8(acc, z);
            *k += _mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 1)
                  + _mm256_extract_epi64(s, 2) + _mm256_extract_epi64(s, 3);
        }
        if (_mm256_movemask_epi8(hi)) *high = 1;
        return i;
    }
    static int lc_have_avx2 = -1;
    #endif

    static inline int lc_pop16(unsigned int m) {
        m = m - ((m >> 1) & 0x5555);
        m = (m & 0x3333) + ((m >> 2) & 0x3333);
        m = (m + (m >> 4)) & 0x0F0F;
        return (int)((m + (m >> 8)) & 0x1F);
    }

    /* How many LFs p[:n] has; *high set to 1 if it has a byte >= 0x80 (else left alone). */
    static Py_ssize_t lc_count_lf(const unsigned char* p, Py_ssize_t n, int* high) {
        Py_ssize_t i = 0, k = 0;
        unsigned char h = 0;
    #ifdef LC_AVX2
        if (n >= 128) {
            if (lc_have_avx2 < 0) lc_have_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
            if (lc_have_avx2) i = lc_lf_avx2(p, i, n, &k, high);
        }
    #endif
    #ifdef LC_SSE2
        const __m128i lf = _mm_set1_epi8(10), z = _mm_setzero_si128();
        __m128i acc = z, s, v, hi = z;
        unsigned int m;
        i = lc_lf_sse2(p, i, n, &k, high);
        /* Then 16 bytes at a time (3 blocks at most), and the last few bytes as the end of
           an overlapping block, so that no range costs a byte-by-byte loop over 15 bytes. */
        while (n - i >= 16) {
            v = LC_L(i);
            acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v, lf));
            hi = _mm_or_si128(hi, v);
            i += 16;
        }
        s = _mm_sad_epu8(acc, z);
        k += _mm_cvtsi128_si32(s) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(s, s));
        if (i < n && n >= 16) {
            v = LC_L(n - 16);
            m = (unsigned int)_mm_movemask_epi8(_mm_cmpeq_epi8(v, lf));
            k += lc_pop16(m >> (16 - (n - i)));
            hi = _mm_or_si128(hi, v);  /* (bytes before i are in p[:n] too) */
            i = n;
        }
        if (_mm_movemask_epi8(hi)) *high = 1;
    #endif
        for (; i < n; i++) {
            k += (p[i] == 10);
            h |= p[i];
        }
        if (h & 0x80) *high = 1;
        return k;
    }

    /* How many CRs of p[:n] are not followed by an LF in p[:n] (the last byte's is not). */
    static Py_ssize_t lc_count_lone_cr(const unsigned char* p, Py_ssize_t n) {
        Py_ssize_t i = 0, k = 0, blocks, j;
    #ifdef LC_SSE2
        const __m128i cr = _mm_set1_epi8(13), lf = _mm_set1_epi8(10), z = _mm_setzero_si128();
        __m128i acc, s;
        while (n - i >= 17) {
            blocks = (n - i - 1) / 16;
            if (blocks > 255) blocks = 255;
            acc = z;
            for (j = 0; j < blocks; j++, i += 16)
                acc = _mm_sub_epi8(acc, _mm_andnot_si128(_mm_cmpeq_epi8(LC_L(i + 1), lf),
                                                         _mm_cmpeq_epi8(LC_L(i), cr)));
            s = _mm_sad_epu8(acc, z);
            k += _mm_cvtsi128_si32(s) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(s, s));
        }
    #endif
        for (; i < n; i++) k += (p[i] == 13 && (i + 1 >= n || p[i + 1] != 10));
        return k;
    }

    /* The index of the last b in p[:n], or -1. */
    static Py_ssize_t lc_last(const unsigned char* p, Py_ssize_t n, unsigned char b) {
    #ifdef __GLIBC__
        const unsigned char* q = (const unsigned char*)memrchr(p, b, (size_t)n);
        return q ? q - p : -1;
    #else
        while (n > 0) {
            n--;
            if (p[n] == b) return n;
        }
        return -1;
    #endif
    }

    /* The length of the ASCII run p[:n] starts with. */
    static Py_ssize_t lc_ascii_run(const unsigned char* p, Py_ssize_t n) {
        Py_ssize_t i = 0;
    #ifdef LC_SSE2
        while (n - i >= 64) {
            if (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(LC_L(i), LC_L(i + 16)),
                                               _mm_or_si128(LC_L(i + 32), LC_L(i + 48)))))
                break;
            i += 64;
        }
        unsigned int m;
        while (n - i >= 16) {
            m = (unsigned int)_mm_movemask_epi8(LC_L(i));
            if (m) return i + __builtin_ctz(m);
            i += 16;
        }
        if (i < n && n >= 16) {  /* the end of an overlapping block */
            m = (unsigned int)_mm_movemask_epi8(LC_L(n - 16)) >> (16 - (n - i));
            return m ? i + __builtin_ctz(m) : n;
        }
    #endif
        while (i < n && p[i] < 0x80) i++;
        return i;
    }
    """
    Py_ssize_t lc_count_lf(const unsigned char* p, Py_ssize_t n, int* high) nogil
    Py_ssize_t lc_count_lone_cr(const unsigned char* p, Py_ssize_t n) nogil
    Py_ssize_t lc_last(const unsigned char* p, Py_ssize_t n, unsigned char b) nogil
    Py_ssize_t lc_ascii_run(const unsigned char* p, Py_ssize_t n) nogil

# How code points are counted for columns: one a byte, UTF-8 (in C), or by a Python decoder.
DEF K_SINGLE = 0
DEF K_UTF8 = 1
DEF K_DECODE = 2

_new = tuple.__new__
_ResolverType = _resolve.Resolver
cdef object _MISS = object()

# Main states (the same values as `_states`).
DEF S_DATA = 0
DEF S_TAG = 1
DEF S_COMMENT_START = 2
DEF S_COMMENT = 3
DEF S_BOGUS = 4
DEF S_CDATA = 5
DEF S_RAWTEXT = 6
DEF S_SCRIPT = 7
DEF S_SCRIPT_ESC = 8
DEF S_SCRIPT_DESC = 9
DEF S_PLAINTEXT = 10
DEF S_DEAD = 11

# Streaming tag sub-states.
DEF TS_NAME = 0
DEF TS_ATTRS = 1
DEF TS_ANAME = 2
DEF TS_AFTER_NAME = 3
DEF TS_BEFORE_VALUE = 4
DEF TS_DQ = 5
DEF TS_SQ = 6
DEF TS_UNQ = 7

# Encoding decision.
DEF E_UNDECIDED = 0
DEF E_BYTES = 1
DEF E_TRANSCODE = 2
DEF E_REPLACEMENT = 3

# Current attribute: not kept (the reference's ``_a_name is None``), name being read, value
# being read for a wanted slot.
DEF A_NONE = 0
DEF A_NAME = 1
DEF A_VALUE = 2

# The tag name is kept up to this many bytes, plus one to know it is longer (the reference's
# `_tree._MAX_NAME`: a longer name matches no end tag and no entry); attribute names up to
# `_tree._MAX_ANAME`.
DEF NAME_CAP = 256
DEF ANAME_CAP = 64

# Entry flags.
DEF F_WANT = 1
DEF F_SVG = 2
DEF F_MATH = 4
DEF F_SIMPLE = 8    # a link tag whose links `_emit_simple` can make (not base, not meta)
DEF F_FRAME = 16    # <frame>: an element only in a frameset document
DEF F_FORM = 32     # <form> of a link set: no element while another form is open
DEF F_TEMPLATE = 64 # <template>: `_machine.FramesetState` keeps the open ones
DEF F_HEAD = 128    # stays in the head before the body (`_machine._HEAD_TAGS`)
DEF F_HSCOPE = 256  # (head_facts) may stand in a head: `_headfacts.HEAD_SCOPE`
DEF F_HFACT = 512   # (head_facts) <link>, <meta>, <base>: handed to `_headfacts.head_tag`
DEF F_HLINK = 1024  # (head_facts) <link>

# `_tree.FramesetState` modes (the same values as its FS_* names).
DEF CFS_HEAD = 0
DEF CFS_BODY = 1
DEF CFS_DONE = 2
DEF CFS_FRAMESET = 3
DEF CFS_TEMPLATE = 4
# `_tree` kinds of a foreign start tag and its depth cap, for the inline common cases.
DEF CF_ELEMENT = 1
DEF CF_LINK = 2
DEF FOREIGN_CAP = 1024

# Character classes.
DEF C_WS = 1        # \t \n \f \r space
DEF C_SLASH = 2     # /
DEF C_GT = 4        # >
DEF C_EQ = 8        # =
DEF C_SAFE = 16     # characters the resolver fast path accepts as they are
DEF C_ALPHA = 32
DEF C_HOST = 64     # A-Za-z0-9 . -
DEF C_SCHEME = 128  # A-Za-z0-9 + . -

cdef unsigned char CLS[256]
cdef unsigned char LOWER[256]
# What `_text` must know of a value's bytes, OR-ed over the value in one pass.
DEF V_HIGH = 1      # >= 0x80: not ASCII
DEF V_SPECIAL = 2   # & or NUL: character references or U+FFFD
DEF V_CR = 4        # CR: newline normalisation
cdef unsigned char VCLS[256]
# The resolver fast path's one pass over a value (`_FastResolver.fast_buf`).
DEF FV_BAD = 1      # not C_SAFE (and not '#'): the fast path cannot take the value
DEF FV_HASH = 2     # '#': the fragment starts
DEF FV_PCT = 4      # '%': look for %2e
DEF FV_AMP = 8      # '&': a character reference in a raw value
cdef unsigned char FV[256]


cdef void _init_tables():
    cdef int i
    for i in range(256):
        CLS[i] = 0
        LOWER[i] = i
        VCLS[i] = V_HIGH if i >= 0x80 else 0
    VCLS[ord('&')] = V_SPECIAL
    VCLS[0] = V_SPECIAL
    VCLS[ord('\r')] = V_CR
    for i in range(ord('A'), ord('Z') + 1):
        LOWER[i] = i + 32
        CLS[i] |= C_ALPHA | C_SAFE | C_HOST | C_SCHEME
        CLS[i + 32] |= C_ALPHA | C_SAFE | C_HOST | C_SCHEME
    for i in range(ord('0'), ord('9') + 1):
        CLS[i] |= C_SAFE | C_HOST | C_SCHEME
    for c in b"\t\n\x0c\r ":
        CLS[c] |= C_WS
    CLS[ord('/')] |= C_SLASH
    CLS[ord('>')] |= C_GT
    CLS[ord('=')] |= C_EQ
    for c in b"-._~!$&()*+,;=:@/?%":
        CLS[c] |= C_SAFE
    CLS[ord('-')] |= C_HOST | C_SCHEME
    CLS[ord('.')] |= C_HOST | C_SCHEME
    CLS[ord('+')] |= C_SCHEME
    for i in range(256):
        FV[i] = 0 if CLS[i] & C_SAFE else FV_BAD
    FV[ord('#')] = FV_HASH
    FV[ord('%')] = FV_PCT
    FV[ord('&')] = FV_AMP


_init_tables()
if NAME_CAP != _MAX_NAME or ANAME_CAP != _MAX_ANAME:  # the twins must keep the same caps
    raise ImportError("_extract_c: name caps differ from _machine's")
if CF_ELEMENT != F_ELEMENT or CF_LINK != F_LINK or FOREIGN_CAP != _MAX_FOREIGN_DEPTH:
    raise ImportError("_extract_c: foreign-content constants differ from _tree's")


cdef struct Entry:
    Py_ssize_t noff     # tag name (lower case) in the pool
    int nlen
    int wfirst          # wanted attribute names: wattrs[wfirst : wfirst + nwant]
    int nwant
    int sw              # tokenizer state after this start tag in HTML content (0: none)
    int rawidx          # index in _RAWTEXT_NAMES for S_RAWTEXT
    int flags


cdef struct WAttr:
    Py_ssize_t off
    int len


cdef inline bint _ci_eq(const unsigned char* p, const unsigned char* lower_name, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if LOWER[p[i]] != lower_name[i]:
            return False
    return True


cdef bint _ci_find(const unsigned char* p, Py_ssize_t n, const unsigned char* lower_name,
                   Py_ssize_t k) noexcept nogil:
    """Whether p[:n] holds ``lower_name`` (k bytes), ASCII case-insensitively."""
    cdef Py_ssize_t i
    for i in range(n - k + 1):
        if _ci_eq(p + i, lower_name, k):
            return True
    return False


cdef inline bint _is_end_char(unsigned char c) noexcept nogil:
    """ws, '/' or '>': what may follow an end tag name in the raw text end patterns."""
    return (CLS[c] & (C_WS | C_SLASH | C_GT)) != 0


cdef Py_ssize_t _find_end_tag(const unsigned char* p, Py_ssize_t pos, Py_ssize_t n,
                              const unsigned char* name, Py_ssize_t nl) noexcept nogil:
    """Leftmost ``</name`` + ws, '/' or '>' (name case-insensitive) at or after pos, or -1."""
    cdef const unsigned char* q
    cdef Py_ssize_t i
    while pos < n:
        q = <const unsigned char*>memchr(p + pos, 0x3C, n - pos)
        if q == NULL:
            return -1
        i = q - p
        if i + 2 + nl < n and p[i + 1] == 0x2F and _ci_eq(p + i + 2, name, nl) \
                and _is_end_char(p[i + 2 + nl]):
            return i
        pos = i + 1
    return -1


cdef const unsigned char* _SCRIPT = b"script"


cdef inline bint _fs_end_name(const unsigned char* n, Py_ssize_t l) noexcept nogil:
    """The end tags `_machine.FramesetState.end` acts on: br, body, html, frameset, template
    (the others it ignores, so they need not reach it)."""
    if l == 2:
        return n[0] == 0x62 and n[1] == 0x72
    if l == 4:
        return memcmp(n, b"body", 4) == 0 or memcmp(n, b"html", 4) == 0
    if l == 8:
        return memcmp(n, b"frameset", 8) == 0 or memcmp(n, b"template", 8) == 0
    return False


cdef Py_ssize_t _find_script_data(const unsigned char* p, Py_ssize_t pos, Py_ssize_t n) noexcept nogil:
    """Leftmost ``<!--`` or ``</script`` + end char (the reference's `_SCRIPT_DATA`)."""
    cdef const unsigned char* q
    cdef Py_ssize_t i
    while pos < n:
        q = <const unsigned char*>memchr(p + pos, 0x3C, n - pos)
        if q == NULL:
            return -1
        i = q - p
        if i + 3 < n and p[i + 1] == 0x21 and p[i + 2] == 0x2D and p[i + 3] == 0x2D:
            return i
        if i + 8 < n and p[i + 1] == 0x2F and _ci_eq(p + i + 2, _SCRIPT, 6) \
                and _is_end_char(p[i + 8]):
            return i
        pos = i + 1
    return -1


cdef Py_ssize_t _find_script_esc(const unsigned char* p, Py_ssize_t pos, Py_ssize_t n,
                                 bint open_too) noexcept nogil:
    """Leftmost ``-->``, ``</script`` + end char, and (open_too) ``<script`` + end char."""
    cdef unsigned char c
    cdef Py_ssize_t i = pos
    while i < n:
        c = p[i]
        if c == 0x2D:
            if i + 2 < n and p[i + 1] == 0x2D and p[i + 2] == 0x3E:
                return i
        elif c == 0x3C:
            if i + 8 < n and p[i + 1] == 0x2F and _ci_eq(p + i + 2, _SCRIPT, 6) \
                    and _is_end_char(p[i + 8]):
                return i
            if open_too and i + 7 < n and _ci_eq(p + i + 1, _SCRIPT, 6) \
                    and _is_end_char(p[i + 7]):
                return i
        i += 1
    return -1


cdef Py_ssize_t _find_comment_end(const unsigned char* p, Py_ssize_t pos, Py_ssize_t n,
                                  Py_ssize_t* end) noexcept nogil:
    """Leftmost ``--!?>`` starting at or after pos: its start, with its end in ``end``; or -1.

    Found from its '>' (rare in comment text, unlike '-'): the match with the leftmost '>' is
    also the leftmost match, and one '>' ends at most one of ``-->`` and ``--!>``."""
    cdef const unsigned char* q
    cdef Py_ssize_t i
    while pos < n:
        q = <const unsigned char*>memchr(p + pos, 0x3E, n - pos)
        if q == NULL:
            return -1
        i = q - p
        if i - 2 >= pos and p[i - 1] == 0x2D and p[i - 2] == 0x2D:
            end[0] = i + 1
            return i - 2
        if i - 3 >= pos and p[i - 1] == 0x21 and p[i - 2] == 0x2D and p[i - 3] == 0x2D:
            end[0] = i + 1
            return i - 3
        pos = i + 1
    return -1


cdef Py_ssize_t _find3(const unsigned char* p, Py_ssize_t pos, Py_ssize_t n,
                       unsigned char a, unsigned char b, unsigned char c) noexcept nogil:
    """Leftmost occurrence of the 3 bytes a b c, or -1."""
    cdef const unsigned char* q
    cdef Py_ssize_t i
    while pos + 2 < n:
        q = <const unsigned char*>memchr(p + pos, a, n - 2 - pos)
        if q == NULL:
            return -1
        i = q - p
        if p[i + 1] == b and p[i + 2] == c:
            return i
        pos = i + 1
    return -1


# URL resolution fast path -----------------------------------------------------------------

cdef Py_ssize_t _normalize(const unsigned char* s, Py_ssize_t n, unsigned char* o,
                           Py_ssize_t* stack) noexcept nogil:
    """`_resolve._normalize` of the absolute path s[:n] into o; returns its length.

    ``o`` and ``stack`` have room for n + 1 entries."""
    cdef Py_ssize_t i, j, k, top = 0, olen = 0, seglen
    cdef bint found = False, last
    for i in range(n - 1):
        if s[i] == 0x2F and s[i + 1] == 0x2E:
            found = True
            break
    if not found:
        memcpy(o, s, n)
        return n
    # segs = s.split("/"), processed from index 1 (s[0] is '/').
    i = 1
    while True:
        j = i
        while j < n and s[j] != 0x2F:
            j += 1
        seglen = j - i
        last = j >= n
        if seglen == 2 and s[i] == 0x2E and s[i + 1] == 0x2E:
            if top > 0:
                top -= 1
                olen = stack[top]
            if last:
                stack[top] = olen
                top += 1
                o[olen] = 0x2F
                olen += 1
        elif seglen == 1 and s[i] == 0x2E:
            if last:
                stack[top] = olen
                top += 1
                o[olen] = 0x2F
                olen += 1
        else:
            stack[top] = olen
            top += 1
            o[olen] = 0x2F
            olen += 1
            for k in range(seglen):
                o[olen + k] = s[i + k]
            olen += seglen
        if last:
            break
        i = j + 1
    if top == 0:
        o[0] = 0x2F
        return 1
    return olen


cdef inline bint _has_dot_seg(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n - 1):
        if s[i] == 0x2F and s[i + 1] == 0x2E:
            return True
    return False


cdef class _Scratch:
    """A growable byte buffer and index stack for building URLs."""
    cdef unsigned char* buf
    cdef Py_ssize_t* stack
    cdef Py_ssize_t cap

    def __cinit__(self):
        self.buf = NULL
        self.stack = NULL
        self.cap = 0

    def __dealloc__(self):
        free(self.buf)
        free(self.stack)

    cdef int ensure(self, Py_ssize_t n) except -1:
        cdef unsigned char* b
        cdef Py_ssize_t* st
        if n <= self.cap:
            return 0
        n = n * 2 + 64
        b = <unsigned char*>realloc(self.buf, n)
        if b == NULL:
            raise MemoryError()
        self.buf = b
        st = <Py_ssize_t*>realloc(self.stack, n * sizeof(Py_ssize_t))
        if st == NULL:
            raise MemoryError()
        self.stack = st
        self.cap = n
        return 0


cdef object _absolute(const unsigned char* s, Py_ssize_t n, _Scratch sc):
    """`_resolve._ABSOLUTE.fullmatch` + `_resolve._absolute` on s[:n] (all C_SAFE bytes).

    Returns the URL, or _MISS when it does not match or must go to the full resolver."""
    cdef Py_ssize_t olen = _absolute_buf(s, n, sc)
    if olen < 0:
        return _MISS
    return PyUnicode_DecodeASCII(<const char*>sc.buf, olen, NULL)


cdef Py_ssize_t _absolute_buf(const unsigned char* s, Py_ssize_t n, _Scratch sc) except -2:
    """`_absolute` into ``sc.buf`` (which must not hold s): the URL's length, or -1 (_MISS)."""
    cdef Py_ssize_t i, hs, he, ps = -1, pe = -1, qs, k, olen, plen
    cdef bint https
    cdef long port = -1
    cdef unsigned char* o
    cdef Py_ssize_t last_label, lab_start
    if n < 7 or LOWER[s[0]] != 0x68 or LOWER[s[1]] != 0x74 or LOWER[s[2]] != 0x74 \
            or LOWER[s[3]] != 0x70:
        return -1
    i = 4
    https = LOWER[s[4]] == 0x73
    if https:
        i = 5
    if i + 3 > n or s[i] != 0x3A or s[i + 1] != 0x2F or s[i + 2] != 0x2F:
        return -1
    hs = i + 3
    he = hs
    while he < n and (CLS[s[he]] & C_HOST):
        he += 1
    # Host: (label ".")* label-starting-with-a-letter "."? ; labels non-empty.
    if he == hs:
        return -1
    k = he
    if s[k - 1] == 0x2E:
        k -= 1  # the optional trailing dot
    if k == hs or s[k - 1] == 0x2E:
        return -1
    lab_start = hs
    for i in range(hs, k):
        if s[i] == 0x2E:
            if i == lab_start:
                return -1  # empty label
            lab_start = i + 1
    if not (CLS[s[lab_start]] & C_ALPHA) and not _dotted_quad(s + hs, he - hs):
        return -1  # a host ending in a number is IPv4: only its canonical form is kept as is
    i = he
    if i < n and s[i] == 0x3A:
        ps = i + 1
        pe = ps
        while pe < n and 0x30 <= s[pe] <= 0x39:
            pe += 1
        i = pe
    if i < n and s[i] != 0x2F and s[i] != 0x3F:
        return -1
    # The path (up to '?') and the query are C_SAFE already.
    qs = i
    while qs < n and s[qs] != 0x3F:
        qs += 1
    # Host lower-cased; "xn--" (punycode) goes to the full resolver.
    for k in range(hs, he - 3):
        if LOWER[s[k]] == 0x78 and LOWER[s[k + 1]] == 0x6E and s[k + 2] == 0x2D \
                and s[k + 3] == 0x2D:
            return -1
    if ps >= 0 and pe > ps:
        k = ps
        while k < pe - 1 and s[k] == 0x30:
            k += 1
        if pe - k > 5:
            return -1  # > 65535 (or a digit string Python's int() must judge)
        port = 0
        while k < pe:
            port = port * 10 + (s[k] - 0x30)
            k += 1
        if port > 65535:
            return -1
        if port == (443 if https else 80):
            port = -1
    plen = qs - i
    sc.ensure(n + 16)
    o = sc.buf
    olen = 0
    memcpy(o, b"https://" if https else b"http://", 8 if https else 7)
    olen = 8 if https else 7
    for k in range(hs, he):
        o[olen] = LOWER[s[k]]
        olen += 1
    if port >= 0:
        o[olen] = 0x3A
        olen += 1
        olen += _write_int(o + olen, port)
    if plen == 0:
        o[olen] = 0x2F
        olen += 1
    elif _has_dot_seg(s + i, plen):
        olen += _normalize(s + i, plen, o + olen, sc.stack)
    else:
        memcpy(o + olen, s + i, plen)
        olen += plen
    memcpy(o + olen, s + qs, n - qs)
    olen += n - qs
    return olen


cdef bint _dotted_quad(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Whether p[:n] is an IPv4 address as the WHATWG serializer writes it (four decimal
    parts of 0-255, no leading zero, no trailing dot), which the host parser leaves as is."""
    cdef Py_ssize_t i = 0, start
    cdef int parts = 0, v
    while parts < 4:
        start = i
        v = 0
        while i < n and 0x30 <= p[i] <= 0x39 and i - start < 3:
            v = v * 10 + (p[i] - 0x30)
            i += 1
        if i == start or v > 255 or (p[start] == 0x30 and i - start > 1):
            return False
        parts += 1
        if parts < 4:
            if i >= n or p[i] != 0x2E:
                return False
            i += 1
    return i == n


cdef Py_ssize_t _write_int(unsigned char* o, long v) noexcept nogil:
    cdef unsigned char tmp[24]
    cdef Py_ssize_t k = 0, i
    if v == 0:
        o[0] = 0x30
        return 1
    while v > 0:
        tmp[k] = 0x30 + (v % 10)
        v //= 10
        k += 1
    for i in range(k):
        o[i] = tmp[k - 1 - i]
    return k


cdef class _FastResolver:
    """C fast path in front of a Python resolver (`_resolve.Resolver` or a stand-in).

    The forms handled (ASCII only; anything else is left to the Python resolver): every byte
    before a '#' in `_resolve._SAFE`, no ``%2e``; then the empty string, root-relative,
    scheme-relative, query-only, absolute http(s) and path-relative, exactly as
    `_resolve.Resolver._fast_path` computes them."""
    cdef object py
    cdef bint fast
    cdef bint https
    cdef bytes prefix
    cdef bytes path
    cdef bytes dir
    cdef str base_nf
    cdef _Scratch sc
    cdef _Scratch sc2
    cdef const unsigned char* res
    # A base that is WHATWG-serialised already (`_lazy_resolver`): the Python resolver (an ada
    # parse of the base, a quarter of the link work of a small page) is made on first need.
    cdef str lazy_base
    cdef object lazy_qc

    def __init__(self, py):
        self.py = py
        self.lazy_base = None
        self.lazy_qc = None
        self.sc = _Scratch()
        self.sc2 = _Scratch()
        self.fast = False
        if type(py) is _ResolverType and py._fast:
            self.fast = True
            self.https = py._scheme == "https"
            self.prefix = py._prefix.encode("ascii")
            self.path = py._path.encode("ascii")
            self.dir = py._dir.encode("ascii")
            self.base_nf = py._base_nf

    cdef object resolve(self, str raw):
        # No cache here: the fast path costs less than a dict lookup of a fresh string, and
        # the Python resolver caches what it resolves itself.
        if self.fast and PyUnicode_IS_ASCII(raw):
            r = self._fast_path(<const unsigned char*>PyUnicode_DATA(raw), PyUnicode_GET_LENGTH(raw))
            if r is not _MISS:
                return r
        return self.get_py().resolve(raw)

    cdef object get_py(self):
        """The Python resolver behind the fast path (made now if it was left for later)."""
        if self.py is None:
            self.py = Resolver(self.lazy_base, self.lazy_qc)
        return self.py

    cdef object _fast_path(self, const unsigned char* s, Py_ssize_t n):
        cdef Py_ssize_t r = self.fast_buf(s, n)
        if r < 0:
            return _opaque_url(s, n)
        if r == PyUnicode_GET_LENGTH(self.base_nf) and self.res == PyUnicode_DATA(self.base_nf):
            return self.base_nf
        return PyUnicode_DecodeASCII(<const char*>self.res, r, NULL)

    cdef Py_ssize_t fast_buf(self, const unsigned char* s, Py_ssize_t n, bint plain=False) except -2:
        """`_fast_path` of s[:n] without a Python object: the URL's length, at ``self.res``
        (the scratch buffer, or the base's own text), or -1 (_MISS).

        ``plain``: s[:n] are an attribute value's raw bytes, taken only when its text is
        those bytes (no ``&``, nothing `LinkExtractor._text` must work on): one pass over
        the bytes checks both."""
        cdef Py_ssize_t h = 0, i, q, need, olen, lpre, lpath, ldir
        cdef unsigned char c, t, seen = 0, acc = 0
        cdef unsigned char stop = FV_BAD | FV_HASH | (FV_AMP if plain else 0)
        cdef unsigned char* o
        cdef const unsigned char* pre
        while h < n:
            t = FV[s[h]]
            if t & stop:
                if not (t & FV_HASH):
                    return -1
                break
            seen |= t
            h += 1
        if plain:
            for i in range(h + 1, n):
                acc |= VCLS[s[i]]
            if acc:
                return -1
        n = h
        if seen & FV_PCT:
            for i in range(n - 2):
                if s[i] == 0x25 and s[i + 1] == 0x32 and (s[i + 2] == 0x65 or s[i + 2] == 0x45):
                    return -1
        if n == 0:
            self.res = <const unsigned char*>PyUnicode_DATA(self.base_nf)
            return PyUnicode_GET_LENGTH(self.base_nf)
        c = s[0]
        pre = <const unsigned char*>PyBytes_AS_STRING(self.prefix)
        lpre = PyBytes_GET_SIZE(self.prefix)
        if c == 0x2F:
            if n > 1 and s[1] == 0x2F:
                return self._scheme_relative(s, n)
            q = 0
            while q < n and s[q] != 0x3F:
                q += 1
            self.sc.ensure(lpre + n + 1)
            o = self.sc.buf
            memcpy(o, pre, lpre)
            olen = lpre + _normalize(s, q, o + lpre, self.sc.stack)
            memcpy(o + olen, s + q, n - q)
            self.res = o
            return olen + n - q
        if c == 0x3F:
            lpath = PyBytes_GET_SIZE(self.path)
            self.sc.ensure(lpre + lpath + n)
            o = self.sc.buf
            memcpy(o, pre, lpre)
            memcpy(o + lpre, PyBytes_AS_STRING(self.path), lpath)
            memcpy(o + lpre + lpath, s, n)
            self.res = o
            return lpre + lpath + n
        olen = _absolute_buf(s, n, self.sc)
        if olen >= 0:
            self.res = self.sc.buf
            return olen
        # _SCHEME.match: [A-Za-z][A-Za-z0-9+.-]*: -> another scheme: the full resolver's job.
        if CLS[c] & C_ALPHA:
            i = 1
            while i < n and (CLS[s[i]] & C_SCHEME):
                i += 1
            if i < n and s[i] == 0x3A:
                return -1
        q = 0
        while q < n and s[q] != 0x3F:
            q += 1
        ldir = PyBytes_GET_SIZE(self.dir)
        need = lpre + 2 * (ldir + n) + 2
        self.sc.ensure(need)
        o = self.sc.buf
        # dir + s[:q] is built after the room for the result, then normalized into place.
        memcpy(o + lpre + ldir + n + 1, PyBytes_AS_STRING(self.dir), ldir)
        memcpy(o + lpre + ldir + n + 1 + ldir, s, q)
        memcpy(o, pre, lpre)
        olen = lpre + _normalize(o + lpre + ldir + n + 1, ldir + q, o + lpre, self.sc.stack)
        memcpy(o + olen, s + q, n - q)
        self.res = o
        return olen + n - q

    cdef Py_ssize_t _scheme_relative(self, const unsigned char* s, Py_ssize_t n) except -2:
        cdef Py_ssize_t ls = 6 if self.https else 5, olen
        self.sc2.ensure(ls + n)
        memcpy(self.sc2.buf, <const char*>(b"https:" if self.https else b"http:"), ls)
        memcpy(self.sc2.buf + ls, s, n)
        olen = _absolute_buf(self.sc2.buf, ls + n, self.sc)
        self.res = self.sc.buf
        return olen


cdef _FastResolver _lazy_resolver(str base, qc=None):
    """A fast resolver for ``base`` without parsing it with ada, when the base is an http(s)
    URL already WHATWG-serialised (as every page URL of a crawl is: the fast path's own
    serialisation leaves it unchanged, so ada's would too); None otherwise. (The query codec
    ``qc`` only matters to non-ASCII values, which the fast path leaves to the Python one.)"""
    cdef const unsigned char* s
    cdef Py_ssize_t n, i, cut, q, olen
    cdef _FastResolver fr
    if not PyUnicode_IS_ASCII(base):
        return None
    s = <const unsigned char*>PyUnicode_DATA(base)
    n = PyUnicode_GET_LENGTH(base)
    for i in range(n):
        if not (CLS[s[i]] & C_SAFE):
            return None  # ('#' is not C_SAFE: no fragment either)
        if s[i] == 0x25 and i + 2 < n and s[i + 1] == 0x32 and (s[i + 2] == 0x65 or s[i + 2] == 0x45):
            return None
    fr = _FastResolver(None)
    olen = _absolute_buf(s, n, fr.sc)
    if olen != n or memcmp(fr.sc.buf, s, n) != 0:
        return None
    cut = 8 if s[4] == 0x73 else 7
    while cut < n and s[cut] != 0x2F:
        cut += 1
    q = cut
    while q < n and s[q] != 0x3F:
        q += 1
    i = q - 1
    while s[i] != 0x2F:
        i -= 1
    fr.lazy_base = base
    fr.lazy_qc = qc
    fr.fast = True
    fr.https = s[4] == 0x73
    fr.prefix = PyBytes_FromStringAndSize(<const char*>s, cut)
    fr.path = PyBytes_FromStringAndSize(<const char*>s + cut, q - cut)
    fr.dir = PyBytes_FromStringAndSize(<const char*>s + cut, i + 1 - cut)
    fr.base_nf = base
    return fr


def _lazy_fields(str base):
    """(for tests) The fast fields `_lazy_resolver` derives from ``base``, or None."""
    cdef _FastResolver fr = _lazy_resolver(base)
    if fr is None:
        return None
    return (fr.https, fr.prefix.decode(), fr.path.decode(), fr.dir.decode(), fr.base_nf)


# The <meta> prescan (`charset.prescan`) in C ------------------------------------------------
# Every page without a transport charset is prescanned: in Python (regexes) that was ~20 us a
# page, most of a small page's extraction. The same steps on bytes, each regex of the Python
# one written out (tests/test_extract_prescan.py compares the two on generated heads); only the
# label lookups (`charset.lookup`, `charset_from_content`) stay in Python, once per <meta>.

cdef inline bint _pws(unsigned char c) noexcept nogil:
    return c == 0x09 or c == 0x0A or c == 0x0C or c == 0x0D or c == 0x20


cdef inline bint _palpha(unsigned char c) noexcept nogil:
    return (0x41 <= c <= 0x5A) or (0x61 <= c <= 0x7A)


cdef Py_ssize_t _pre_attr_end(const unsigned char* d, Py_ssize_t pos, Py_ssize_t n) noexcept nogil:
    """`_PRE_ATTR_END.match` (``[ws/]*>``): the end of the match, or -1."""
    while pos < n and (_pws(d[pos]) or d[pos] == 0x2F):
        pos += 1
    return pos + 1 if pos < n and d[pos] == 0x3E else -1


cdef Py_ssize_t _pre_attr(const unsigned char* d, Py_ssize_t pos, Py_ssize_t n,
                          Py_ssize_t* nm, Py_ssize_t* vm) noexcept nogil:
    """`_PRE_ATTR.match`: the end of the match or -1; nm[0:2] the name, vm[0:2] the value
    (vm[0] = -1: none)."""
    cdef Py_ssize_t i, k
    cdef unsigned char q
    while pos < n and (_pws(d[pos]) or d[pos] == 0x2F):
        pos += 1
    if pos >= n or d[pos] == 0x3E:  # the name's first byte: [^ws/>] (ws and / skipped)
        return -1
    nm[0] = pos
    pos += 1
    while pos < n and not (_pws(d[pos]) or d[pos] == 0x2F or d[pos] == 0x3D or d[pos] == 0x3E):
        pos += 1
    nm[1] = pos
    vm[0] = -1
    # (?:[ws]*=[ws]*(value))?
    i = pos
    while i < n and _pws(d[i]):
        i += 1
    if i >= n or d[i] != 0x3D:
        return pos
    i += 1
    while i < n and _pws(d[i]):
        i += 1
    if i < n and (d[i] == 0x22 or d[i] == 0x27):
        q = d[i]
        k = i + 1
        while k < n and d[k] != q:
            k += 1
        vm[0] = i + 1
        vm[1] = k
        return k + 1 if k < n else k
    k = i
    while k < n and not (_pws(d[k]) or d[k] == 0x3E):
        k += 1
    vm[0] = i
    vm[1] = k
    return k


cdef bint _ci(const unsigned char* d, Py_ssize_t a, Py_ssize_t b, const char* lower) noexcept nogil:
    """Whether d[a:b] is ``lower`` in ASCII case-insensitive comparison."""
    cdef Py_ssize_t i
    for i in range(b - a):
        if lower[i] == 0 or LOWER[d[a + i]] != <unsigned char>lower[i]:
            return False
    return lower[b - a] == 0


cdef object _pre_meta(const unsigned char* d, Py_ssize_t pos, Py_ssize_t n, bytes data,
                      Py_ssize_t* out):
    """`charset._meta`: the encoding or None; the position after the <meta> into out[0]."""
    cdef Py_ssize_t nm[2]
    cdef Py_ssize_t vm[2]
    cdef Py_ssize_t e
    cdef bint got_pragma = False
    cdef int need_pragma = -1  # -1: None
    cdef set seen = set()
    charset = None
    while True:
        e = _pre_attr_end(d, pos, n)
        if e >= 0:
            pos = e
            break
        e = _pre_attr(d, pos, n, nm, vm)
        if e < 0 or e >= n:
            out[0] = n
            return None
        pos = e
        name = data[nm[0]:nm[1]].lower()
        if name in seen:
            continue
        seen.add(name)
        value = data[vm[0]:vm[1]] if vm[0] >= 0 else b""
        if name == b"http-equiv":
            if value.lower() == b"content-type":
                got_pragma = True
        elif name == b"content":
            if charset is None:
                c = _charset.charset_from_content(value)
                if c is not None:
                    charset = c
                    need_pragma = 1
        elif name == b"charset":
            charset = _charset.lookup(value.decode("latin-1")) or ""
            need_pragma = 0
    out[0] = pos
    if not charset or need_pragma == -1 or (need_pragma == 1 and not got_pragma):
        return None
    if charset in ("utf-16be", "utf-16le"):
        return "utf-8"
    if charset == "x-user-defined":
        return "windows-1252"
    return charset


cdef object _prescan(bytes data):
    """`charset.prescan`: the encoding a <meta> in the first 1024 bytes declares, or None."""
    cdef const unsigned char* d = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = min(PyBytes_GET_SIZE(data), 1024), pos = 0, i, e
    cdef Py_ssize_t nm[2]
    cdef Py_ssize_t vm[2]
    cdef Py_ssize_t after[1]
    cdef unsigned char c
    while pos < n:
        # _PRE_TOKEN.search: the leftmost '<' that starts one of its four alternatives
        i = pos
        while True:
            while i < n and d[i] != 0x3C:
                i += 1
            if i >= n:
                return None
            if i + 1 < n:
                c = d[i + 1]
                if c == 0x21 or c == 0x2F or c == 0x3F or _palpha(c):
                    break
            i += 1
        c = d[i + 1]
        if c == 0x21 and i + 3 < n and d[i + 2] == 0x2D and d[i + 3] == 0x2D:  # <!--
            pos = i + 4
            e = -1
            i = pos - 2
            while i + 2 < n:
                if d[i] == 0x2D and d[i + 1] == 0x2D and d[i + 2] == 0x3E:
                    e = i
                    break
                i += 1
            if e < 0:
                return None
            pos = e + 3
        elif i + 5 < n and _ci(d, i + 1, i + 5, b"meta") and (_pws(d[i + 5]) or d[i + 5] == 0x2F):
            enc = _pre_meta(d, i + 6, n, data, after)
            pos = after[0]
            if enc is not None:
                return enc
        elif _palpha(c) or (c == 0x2F and i + 2 < n and _palpha(d[i + 2])):  # </?[A-Za-z]
            pos = i + (2 if _palpha(c) else 3)
            while pos < n and not (_pws(d[pos]) or d[pos] == 0x3E):  # _NAME_END.search
                pos += 1
            if pos >= n:
                return None
            while True:
                e = _pre_attr_end(d, pos, n)
                if e >= 0:
                    pos = e
                    break
                e = _pre_attr(d, pos, n, nm, vm)
                if e < 0 or e >= n:
                    return None
                pos = e
        else:  # <! </ <?
            pos = i + 2
            while pos < n and d[pos] != 0x3E:
                pos += 1
            if pos >= n:
                return None
            pos += 1
    return None


def prescan(bytes data):
    """(for tests) `_prescan`, the compiled `charset.prescan`."""
    return _prescan(data)


cdef class _Tables:
    """The C tag table of one link set: every tag whose start tag does something in HTML
    content (wanted attributes, a tokenizer switch, svg/math), built once per link set."""
    cdef dict links
    cdef dict want
    cdef dict tagstr
    cdef Entry* entries
    cdef int nentries
    cdef WAttr* wattrs
    cdef bytes pool
    cdef list entry_names
    cdef list entry_wnames
    cdef list entry_spec
    cdef list entry_rel
    cdef list entry_tagstr
    cdef int maxw
    # Collecting ids: the entry of every tag not in the table (kept attribute: id), and per
    # entry the slot of id and (<a> only) of name, or -1.
    cdef int dflt
    cdef int* idslot
    cdef int* nameslot
    # `entry_spec` and `entry_rel` as C arrays for `_emit_simple_links`: per entry the range
    # [spec_start, spec_start + spec_len) of the flat spec_slot/spec_srcset/spec_astr, and the
    # rel slot (-1: none).
    cdef int* spec_start
    cdef int* spec_len
    cdef int* spec_slot
    cdef unsigned char* spec_srcset
    cdef list spec_astr
    cdef int* rel_slot
    # head_facts: per entry the slot of the attribute that decides whether a <link> (rel) or
    # a <meta> (name) can be a fact (`LinkExtractor._head_tag`), or -1.
    cdef int* hslot
    # Per first byte of a tag name: bit n set when an entry of that length starts with it.
    cdef unsigned int first_len[256]

    def __cinit__(self):
        self.entries = NULL
        self.wattrs = NULL
        self.idslot = NULL
        self.nameslot = NULL
        self.spec_start = NULL
        self.spec_len = NULL
        self.spec_slot = NULL
        self.spec_srcset = NULL
        self.rel_slot = NULL
        self.hslot = NULL

    def __dealloc__(self):
        free(self.entries)
        free(self.wattrs)
        free(self.idslot)
        free(self.nameslot)
        free(self.spec_start)
        free(self.spec_len)
        free(self.spec_slot)
        free(self.spec_srcset)
        free(self.rel_slot)
        free(self.hslot)

    def __init__(self, spec, bint ids, bint head=False):
        cdef int i, j, nw
        cdef Entry* e
        # The reference's own table builder: same validation, same tables.
        self.links, self.want, self.tagstr, _ = _link_config(spec, ids, head)
        names = list(self.want)
        # (head_facts: every tag that may stand in a head has an entry, flagged F_HSCOPE)
        for t in [*_SWITCH_NAMES, b"template", *(sorted(HEAD_SCOPE) if head else ())]:
            if t not in self.want and t not in names:
                names.append(t)
        self.entry_names = names
        self.entry_wnames = []
        pool = bytearray()
        self.nentries = len(names)
        # (one more entry, after the named ones: the default while collecting ids)
        self.entries = <Entry*>malloc((self.nentries + 1) * sizeof(Entry))
        # (while collecting ids a tag not in `want` keeps its id, as `_machine` does)
        nodef = frozenset((b"id",)) if ids else frozenset()
        nw = sum(len(self.want.get(t, nodef)) for t in names)
        self.wattrs = <WAttr*>malloc((nw + 1) * sizeof(WAttr))
        self.idslot = <int*>malloc((self.nentries + 1) * sizeof(int))
        self.nameslot = <int*>malloc((self.nentries + 1) * sizeof(int))
        self.hslot = <int*>malloc((self.nentries + 1) * sizeof(int))
        if self.entries == NULL or self.wattrs == NULL or self.idslot == NULL \
                or self.nameslot == NULL or self.hslot == NULL:
            raise MemoryError()
        self.maxw = 1
        j = 0
        for i, t in enumerate(names):
            e = &self.entries[i]
            e.noff = len(pool)
            e.nlen = len(t)
            pool += t
            wn = sorted(self.want.get(t, nodef))
            self.entry_wnames.append(wn)
            e.wfirst = j
            e.nwant = len(wn)
            self.maxw = max(self.maxw, len(wn))
            for a in wn:
                self.wattrs[j].off = len(pool)
                self.wattrs[j].len = len(a)
                pool += a
                j += 1
            e.flags = F_WANT if t in self.want else 0
            if t == b"input" and t not in self.links:
                e.flags = 0  # only its type is read, for the frameset-ok flag (`_machine`)
            elif t == b"frame":
                e.flags |= F_FRAME
            elif t == b"form" and t in self.links:
                e.flags |= F_FORM
            elif t == b"template":
                e.flags |= F_TEMPLATE
            if t in _HEAD_TAGS:
                e.flags |= F_HEAD
            if head and t in HEAD_SCOPE:
                e.flags |= F_HSCOPE
                if t in HEAD_FACT_TAGS:
                    e.flags |= F_HFACT
                if t == b"link":
                    e.flags |= F_HLINK
            if t == b"svg":
                e.flags |= F_SVG
            elif t == b"math":
                e.flags |= F_MATH
            e.sw = 0
            e.rawidx = -1
            if t in _RAWTEXT_NAMES:
                e.sw = S_RAWTEXT
                e.rawidx = _RAWTEXT_NAMES.index(t)
            elif t == b"script":
                e.sw = S_SCRIPT
            elif t == b"plaintext":
                e.sw = S_PLAINTEXT
            self.idslot[i] = wn.index(b"id") if ids and b"id" in wn else -1
            self.nameslot[i] = wn.index(b"name") if ids and t == b"a" else -1
            decides = {b"link": b"rel", b"meta": b"name"}.get(t) if head else None
            self.hslot[i] = wn.index(decides) if decides is not None else -1
        self.dflt = -1
        if ids:
            i = self.nentries
            self.dflt = i
            e = &self.entries[i]
            e.noff = len(pool)
            e.nlen = -1  # matches no name
            e.wfirst = j
            e.nwant = 1
            e.flags = 0
            e.sw = 0
            e.rawidx = -1
            self.wattrs[j].off = len(pool)
            self.wattrs[j].len = 2
            pool += b"id"
            self.entry_wnames.append([b"id"])
            self.idslot[i] = 0
            self.nameslot[i] = -1
            self.hslot[i] = -1
        self.pool = bytes(pool)
        for i in range(256):
            self.first_len[i] = 0
        for t in names:
            if 0 < len(t) < 32:
                self.first_len[t[0]] |= (<unsigned int>1) << len(t)
        # The direct emit path (`LinkExtractor._emit_simple`): link tags other than base and
        # meta, as (slot, attribute name, is srcset) in the reference's order, and the rel slot.
        self.entry_spec = []
        self.entry_rel = []
        self.entry_tagstr = []
        for i, t in enumerate(names):
            wn = self.entry_wnames[i]
            spec = self.links.get(t)
            if spec is None or t == b"base" or t == b"meta":
                self.entry_spec.append(None)
            else:
                self.entry_spec.append([(wn.index(a), astr, a == b"srcset") for a, astr in spec])
                self.entries[i].flags |= F_SIMPLE
            self.entry_rel.append(wn.index(b"rel") if b"rel" in wn else -1)
            self.entry_tagstr.append(self.tagstr.get(t))
        if ids:
            self.entry_spec.append(None)
            self.entry_rel.append(-1)
            self.entry_tagstr.append(None)
        cdef int ne = len(self.entry_spec), total = 0, at = 0
        for sp in self.entry_spec:
            if sp is not None:
                total += len(sp)
        self.spec_start = <int*>malloc((ne + 1) * sizeof(int))
        self.spec_len = <int*>malloc((ne + 1) * sizeof(int))
        self.rel_slot = <int*>malloc((ne + 1) * sizeof(int))
        self.spec_slot = <int*>malloc((total + 1) * sizeof(int))
        self.spec_srcset = <unsigned char*>malloc(total + 1)
        if self.spec_start == NULL or self.spec_len == NULL or self.rel_slot == NULL \
                or self.spec_slot == NULL or self.spec_srcset == NULL:
            raise MemoryError()
        self.spec_astr = []
        for i in range(ne):
            sp = self.entry_spec[i]
            self.rel_slot[i] = self.entry_rel[i]
            self.spec_start[i] = at
            self.spec_len[i] = 0 if sp is None else len(sp)
            if sp is not None:
                for slot, astr, srcset in sp:
                    self.spec_slot[at] = slot
                    self.spec_srcset[at] = srcset
                    self.spec_astr.append(astr)
                    at += 1


cdef dict _TABLES = {}


cdef _Tables _tables(link_set, bint ids, bint head=False):
    """The tables for a ``link_set`` argument, validated by the reference's own function."""
    key = (link_set_key(link_set), ids, head)
    tb = _TABLES.get(key)
    if tb is None:
        tb = _Tables(LINK_SETS[key[0]] if isinstance(key[0], str) else dict(key[0]), ids, head)
        _TABLES[key] = tb
    return tb


# Character references in attribute values (`_entities.unescape_attr`, for ASCII values) ---

cdef dict _NAMED = NAMED
cdef Py_UCS4 _C1MAP[32]


cdef void _init_c1():
    cdef int i
    for i in range(32):
        _C1MAP[i] = ord(C1.get(0x80 + i, chr(0x80 + i)))


_init_c1()


cdef inline bint _is_alnum(unsigned char c) noexcept nogil:
    return (CLS[c] & C_ALPHA) != 0 or (0x30 <= c <= 0x39)


cdef inline bint _is_hex(unsigned char c) noexcept nogil:
    return (0x30 <= c <= 0x39) or (0x41 <= (c & 0xDF) <= 0x46)


cdef str _numeric(const unsigned char* d, Py_ssize_t n, int base):
    """`_entities._numeric`: the digits d[:n] in ``base`` as the standard maps them."""
    cdef Py_ssize_t i = 0
    cdef long cp = 0
    cdef unsigned char c
    while i < n and d[i] == 0x30:
        i += 1
    if n - i > 8:
        cp = 0x110000
    else:
        while i < n:
            c = d[i]
            if c <= 0x39:
                cp = cp * base + (c - 0x30)
            else:
                cp = cp * base + ((c & 0xDF) - 0x41 + 10)
            i += 1
    if cp == 0 or cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
        return "\ufffd"
    if 0x80 <= cp <= 0x9F:
        return chr(_C1MAP[cp - 0x80])
    return chr(cp)


cdef str _unescape_ascii(const unsigned char* p, Py_ssize_t n):
    """`_entities.unescape_attr` of an ASCII value: the same left-to-right matching of
    ``&(?:#[xX]([0-9A-Fa-f]+);?|#([0-9]+);?|([A-Za-z0-9]+;?))`` and the same replacements."""
    cdef list parts = []
    cdef Py_ssize_t i = 0, last = 0, j, k, end
    cdef const unsigned char* q
    cdef PyObject* hit
    cdef str rep
    while True:
        q = <const unsigned char*>memchr(p + i, 0x26, n - i)
        if q == NULL:
            break
        i = q - p
        rep = None
        end = i + 1
        if i + 1 < n and p[i + 1] == 0x23:
            if i + 2 < n and (p[i + 2] == 0x78 or p[i + 2] == 0x58) and i + 3 < n \
                    and _is_hex(p[i + 3]):
                j = i + 3
                while j < n and _is_hex(p[j]):
                    j += 1
                rep = _numeric(p + i + 3, j - i - 3, 16)
                end = j + 1 if j < n and p[j] == 0x3B else j
            elif i + 2 < n and 0x30 <= p[i + 2] <= 0x39:
                j = i + 2
                while j < n and 0x30 <= p[j] <= 0x39:
                    j += 1
                rep = _numeric(p + i + 2, j - i - 2, 10)
                end = j + 1 if j < n and p[j] == 0x3B else j
        elif i + 1 < n and _is_alnum(p[i + 1]):
            j = i + 1
            while j < n and _is_alnum(p[j]):
                j += 1
            k = j + 1 if j < n and p[j] == 0x3B else j  # end of the name, ';' included
            name = PyUnicode_DecodeASCII(<const char*>p + i + 1, k - i - 1, NULL)
            hit = PyDict_GetItem(_NAMED, name)
            if hit != NULL:
                if k > j or not (k < n and p[k] == 0x3D):
                    rep = <str>hit
            elif k > j:
                hit = PyDict_GetItem(_NAMED, name[:-1])
                if hit != NULL:
                    rep = <str>hit + ";"
            end = k
        if rep is not None:
            if i > last:
                parts.append(PyUnicode_DecodeASCII(<const char*>p + last, i - last, NULL))
            parts.append(rep)
            last = end
        i = end
    if last == 0:
        return PyUnicode_DecodeASCII(<const char*>p, n, NULL)
    if last < n:
        parts.append(PyUnicode_DecodeASCII(<const char*>p + last, n - last, NULL))
    return "".join(parts)


cdef object _opaque_url(const unsigned char* s, Py_ssize_t n):
    """The URL of s[:n] when it has a non-special scheme and an opaque path (``mailto:x@y``,
    ``javascript:void(0)``, ``tel:+1``) and every byte before any '#' is C_SAFE: the URL
    parser lower-cases the scheme and keeps the rest as it is (no C_SAFE byte is in the
    C0-control or query percent-encode sets), the fragment cut; else _MISS (special schemes:
    ``http:x`` is relative to an http base; a rest starting with '/': hierarchical). Only for
    the Link path's `_FastResolver.resolve`: the intake's direct path drops these values
    (`_opaque_other`) and `fast_buf` stays as it is."""
    cdef Py_ssize_t i = 1, h, k
    cdef str out
    if n < 2 or not (CLS[s[0]] & C_ALPHA):
        return _MISS
    while i < n and (CLS[s[i]] & C_SCHEME):
        i += 1
    if i >= n or s[i] != 0x3A or _special_scheme(s, i) or (i + 1 < n and s[i + 1] == 0x2F):
        return _MISS
    h = i + 1
    while h < n and (CLS[s[h]] & C_SAFE):
        h += 1
    if h < n and s[h] != 0x23:
        return _MISS
    out = PyUnicode_DecodeASCII(<const char*>s, h, NULL)
    for k in range(i):
        if s[k] != LOWER[s[k]]:
            return out[:i].lower() + out[i:]
    return out


cdef bint _opaque_other(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Whether the raw value p[:n] is surely a URL of a non-special scheme with an opaque path
    (``mailto:x``, ``javascript:...``, ``tel:...``): it always parses, and is never http(s).

    The scheme is read from the raw bytes (a character reference is not a scheme character,
    so it ends the scheme and the answer is no); after the ':' the first byte that is not a
    tab or newline (the URL parser drops those) must be neither '/' nor '&' (which could
    decode to one)."""
    cdef Py_ssize_t i = 1
    if n < 2 or not (CLS[p[0]] & C_ALPHA):
        return False
    while i < n and (CLS[p[i]] & C_SCHEME):
        i += 1
    if i >= n or p[i] != 0x3A:
        return False
    if _special_scheme(p, i):
        return False
    i += 1
    while i < n and (p[i] == 0x09 or p[i] == 0x0A or p[i] == 0x0D):
        i += 1
    return i < n and p[i] != 0x2F and p[i] != 0x26


cdef bint _special_scheme(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Whether the scheme p[:n] is one of the URL standard's special ones (any case)."""
    cdef unsigned char b[6]
    cdef Py_ssize_t i
    if n < 2 or n > 5:
        return False
    for i in range(n):
        b[i] = LOWER[p[i]]
    if n == 2:
        return b[0] == 0x77 and b[1] == 0x73  # ws
    if n == 3:
        return (b[0] == 0x77 and b[1] == 0x73 and b[2] == 0x73) \
            or (b[0] == 0x66 and b[1] == 0x74 and b[2] == 0x70)  # wss ftp
    if n == 4:
        return memcmp(b, b"http", 4) == 0 or memcmp(b, b"file", 4) == 0
    return memcmp(b, b"https", 5) == 0


cdef int _rel_nofollow(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Whether the rel value p[:n] has the token ``nofollow`` (ASCII case-insensitive, split on
    ASCII whitespace): 1 or 0; -1 when the value is not plain ASCII (a byte >= 0x80, '&',
    CR or NUL), which the caller decodes and checks as the reference does."""
    cdef Py_ssize_t i, start = -1
    cdef unsigned char c
    cdef int found = 0
    for i in range(n + 1):
        c = p[i] if i < n else 0x20
        if c >= 0x80 or c == 0x26 or c == 0x0D or c == 0:
            return -1
        if CLS[c] & C_WS:
            if start >= 0 and i - start == 8 and _ci_eq(p + start, <const unsigned char*>b"nofollow", 8):
                found = 1
            start = -1
        elif start < 0:
            start = i
    return found


cdef extern from "Python.h":
    ctypedef struct PyTypeObject
    object PyType_GenericAlloc(PyTypeObject*, Py_ssize_t)
    void PyTuple_SET_ITEM(PyObject*, Py_ssize_t, PyObject*)
    void Py_INCREF(PyObject*)
    void PyObject_GC_UnTrack(void*)

cdef object _LinkType = Link
# Line and column numbers up to this are shared int objects (a link costs no allocation for
# them; Python itself shares only those up to 256).
DEF N_INTS = 8192
cdef list _INTS = list(range(N_INTS))


cdef inline object _int(Py_ssize_t v):
    if 0 <= v < N_INTS:
        return <object>PyList_GET_ITEM(_INTS, v)
    return v


cdef inline object _mklink(object url, object raw, object tag, object attr, bint nofollow,
                           object line, object column):
    """``Link(url, raw, tag, attr, nofollow, line, column)`` built as `tuple.__new__(Link,
    ...)` builds it."""
    cdef object o = PyType_GenericAlloc(<PyTypeObject*>_LinkType, 7)
    cdef PyObject* t = <PyObject*>o
    cdef object nfo = True if nofollow else False
    cdef PyObject* nf = <PyObject*>nfo
    Py_INCREF(<PyObject*>url)
    PyTuple_SET_ITEM(t, 0, <PyObject*>url)
    Py_INCREF(<PyObject*>raw)
    PyTuple_SET_ITEM(t, 1, <PyObject*>raw)
    Py_INCREF(<PyObject*>tag)
    PyTuple_SET_ITEM(t, 2, <PyObject*>tag)
    Py_INCREF(<PyObject*>attr)
    PyTuple_SET_ITEM(t, 3, <PyObject*>attr)
    Py_INCREF(nf)
    PyTuple_SET_ITEM(t, 4, nf)
    Py_INCREF(<PyObject*>line)
    PyTuple_SET_ITEM(t, 5, <PyObject*>line)
    Py_INCREF(<PyObject*>column)
    PyTuple_SET_ITEM(t, 6, <PyObject*>column)
    # Its fields are str, int, bool or None: it can be in no cycle, so the cyclic GC need not
    # track it (CPython untracks such a tuple itself, but only at the first collection that
    # visits it: a page's thousands of Links made each young collection walk them).
    PyObject_GC_UnTrack(t)
    return o


# The page's link record ---------------------------------------------------------------------

cdef struct RecEnt:
    Py_ssize_t off  # where the URL's bytes start in the text (the raw value's follow); or the
                    # index of the Link in `_objs`
    Py_ssize_t line
    Py_ssize_t col
    int ulen        # -1: a Link (made by a slow path) in `_objs`
    int rlen
    int k           # the tag's entry (its name: `_Tables.entry_tagstr`)
    int j           # the attribute's spec (its name: `_Tables.spec_astr`)
    int nofollow


cdef class LinkRecord:
    """Every link of one page, in order, kept compact: the page's Links, made when read.

    What ``LinkExtractor(..., intake=..., record=True)`` fills as it hands its links to the
    intake: a value the C fast path resolved is kept as the bytes of its URL and raw value,
    its tag, attribute, ``nofollow``, line and column (no Python object); a Link a slow path
    made is kept as it is. A sequence of Links equal to the list the extractor alone returns
    (``list(record) == links``); outputs that need every link read it without making the
    Links: `urls`, `invalid`, `json_urls`, `csv_rows`.
    """

    cdef _Tables _tb
    cdef unsigned char* _text
    cdef Py_ssize_t _tlen
    cdef Py_ssize_t _tcap
    cdef RecEnt* _ents
    cdef Py_ssize_t _n
    cdef Py_ssize_t _cap
    # compact entries the extractor made in this step, each committed in order where its
    # marker (None) stands among the step's Links (`LinkExtractor._items`)
    cdef RecEnt* _pend
    cdef Py_ssize_t _np
    cdef Py_ssize_t _pcap
    cdef Py_ssize_t _pi
    cdef list _objs

    def __cinit__(self):
        self._text = NULL
        self._ents = NULL
        self._pend = NULL
        self._objs = []

    def __dealloc__(self):
        free(self._text)
        free(self._ents)
        free(self._pend)

    def __init__(self):
        raise TypeError("a LinkRecord is made by the compiled LinkExtractor (record=True)")

    cdef int add(self, const unsigned char* url, Py_ssize_t ulen, const unsigned char* raw,
                 Py_ssize_t rlen, int k, int j, bint nofollow, Py_ssize_t line,
                 Py_ssize_t col) except -1:
        """A compact link (ASCII URL and raw value), pending until its marker is read."""
        cdef Py_ssize_t need = self._tlen + ulen + rlen, cap
        cdef void* q
        cdef RecEnt* e
        self._text = _room(self._text, &self._tcap, need)
        if self._np == self._pcap:
            cap = max(16, 2 * self._pcap)
            q = realloc(self._pend, cap * sizeof(RecEnt))
            if q == NULL:
                raise MemoryError()
            self._pend = <RecEnt*>q
            self._pcap = cap
        e = &self._pend[self._np]
        e.off = self._tlen
        e.ulen = <int>ulen
        e.rlen = <int>rlen
        e.k = k
        e.j = j
        e.nofollow = nofollow
        e.line = line
        e.col = col
        memcpy(self._text + self._tlen, url, ulen)
        memcpy(self._text + self._tlen + ulen, raw, rlen)
        self._tlen = need
        self._np += 1
        return 0

    cdef int _grow(self) except -1:
        cdef Py_ssize_t cap = max(64, 2 * self._cap)
        cdef void* q = realloc(self._ents, cap * sizeof(RecEnt))
        if q == NULL:
            raise MemoryError()
        self._ents = <RecEnt*>q
        self._cap = cap
        return 0

    cdef int commit(self) except -1:
        """The next pending compact link, in its place."""
        if self._pi >= self._np:
            raise RuntimeError("LinkRecord: a marker without its link")
        if self._n == self._cap:
            self._grow()
        self._ents[self._n] = self._pend[self._pi]
        self._n += 1
        self._pi += 1
        if self._pi == self._np:
            self._pi = 0
            self._np = 0
        return 0

    cdef int add_obj(self, object link) except -1:
        """A Link a slow path made, in its place."""
        if self._n == self._cap:
            self._grow()
        self._ents[self._n].off = PyList_GET_SIZE(self._objs)
        self._ents[self._n].ulen = -1
        self._objs.append(link)
        self._n += 1
        return 0

    cdef object _link(self, Py_ssize_t i):
        cdef RecEnt* e = &self._ents[i]
        if e.ulen < 0:
            return <object>PyList_GET_ITEM(self._objs, e.off)
        cdef const char* t = <const char*>self._text + e.off
        return _mklink(PyUnicode_DecodeASCII(t, e.ulen, NULL),
                       PyUnicode_DecodeASCII(t + e.ulen, e.rlen, NULL),
                       <object>PyList_GET_ITEM(self._tb.entry_tagstr, e.k),
                       <object>PyList_GET_ITEM(self._tb.spec_astr, e.j),
                       e.nofollow, _int(e.line), _int(e.col))

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        cdef Py_ssize_t k
        if isinstance(i, slice):
            return [self._link(k) for k in range(*i.indices(self._n))]
        k = i
        if k < 0:
            k += self._n
        if not 0 <= k < self._n:
            raise IndexError("LinkRecord index out of range")
        return self._link(k)

    def __iter__(self):
        cdef Py_ssize_t i = 0
        while i < self._n:  # (a record only grows: one being filled is read as far as it is)
            yield self._link(i)
            i += 1

    def __contains__(self, value):
        return any(link == value for link in self)

    def index(self, value, start=0, stop=None):
        return list(self).index(value, start, self._n if stop is None else stop)

    def count(self, value):
        return list(self).count(value)

    def __eq__(self, other):
        if isinstance(other, (LinkRecord, list)):  # (as a list: never equal to a tuple)
            return len(other) == self._n and list(self) == list(other)
        return NotImplemented

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __repr__(self):
        return f"LinkRecord({list(self)!r})"

    def __reduce__(self):
        return (list, (list(self),))  # (pickled and copied as the list of its Links)

    def urls(self):
        """The URLs of the links that have one (``[l.url for l in links if l.url]``)."""
        cdef list out = []
        cdef RecEnt* e
        cdef Py_ssize_t i
        for i in range(self._n):
            e = &self._ents[i]
            if e.ulen >= 0:
                out.append(PyUnicode_DecodeASCII(<const char*>self._text + e.off, e.ulen, NULL))
            else:
                u = (<tuple>PyList_GET_ITEM(self._objs, e.off))[0]
                if u is not None:
                    out.append(u)
        return out

    def compact(self):
        """The record as it is kept, for a reader of every link that makes no Link (the
        checker's occurrences: `crawler.urls._occur_c`): ``(text, entries, links, tags,
        attrs)``. ``entries`` holds 8 native int64 a link, in order: off, ulen, rlen, k, j,
        nofollow, line, column. ulen -1: the link is ``links[off]`` (a Link a slow path
        made); else its URL is ``text[off:off + ulen]``, its raw value the ``rlen`` bytes
        after it (both ASCII), its tag ``tags[k]``, its attribute ``attrs[j]``."""
        cdef Py_ssize_t i
        cdef RecEnt* e
        cdef int64_t* buf = <int64_t*>malloc(max(1, self._n) * 8 * sizeof(int64_t))
        if buf == NULL:
            raise MemoryError()
        try:
            for i in range(self._n):
                e = &self._ents[i]
                buf[8 * i] = e.off
                buf[8 * i + 1] = e.ulen
                buf[8 * i + 2] = e.rlen
                buf[8 * i + 3] = e.k
                buf[8 * i + 4] = e.j
                buf[8 * i + 5] = e.nofollow
                buf[8 * i + 6] = e.line
                buf[8 * i + 7] = e.col
            entries = PyBytes_FromStringAndSize(<const char*>buf, self._n * 8 * sizeof(int64_t))
        finally:
            free(buf)
        text = PyBytes_FromStringAndSize(<const char*>self._text, self._tlen) if self._tlen else b""
        return text, entries, self._objs, self._tb.entry_tagstr, self._tb.spec_astr

    def invalid(self):
        """The raw values of the links that do not resolve (``url`` None), in order."""
        return [link[1] for link in self._objs if link[0] is None]

    def json_urls(self):
        """`urls` as JSON text, as ``json.dumps(urls, ensure_ascii=True, separators=(",",
        ":"))`` writes it (what `crawler.output.sinks.JsonlSink` puts in a page's line)."""
        cdef Py_ssize_t i, at = 1, cap = 0, ul
        cdef RecEnt* e
        cdef const unsigned char* up
        cdef unsigned char* buf = NULL
        cdef bint first = True, plain
        try:
            buf = _room(buf, &cap, 4096)
            buf[0] = 91  # [
            for i in range(self._n):
                e = &self._ents[i]
                plain = True
                if e.ulen >= 0:
                    up = self._text + e.off
                    ul = e.ulen
                else:
                    u = (<tuple>PyList_GET_ITEM(self._objs, e.off))[0]
                    if u is None:
                        continue
                    if not PyUnicode_IS_ASCII(u):
                        u = _json_dumps(u)  # (json's own escapes, quotes included)
                        plain = False
                    up = <const unsigned char*>PyUnicode_DATA(u)
                    ul = PyUnicode_GET_LENGTH(u)
                # (plain: every byte as \u00XX at worst, and quotes; a comma; the "]")
                buf = _room(buf, &cap, at + (6 * ul + 2 if plain else ul) + 2)
                if not first:
                    buf[at] = 44
                    at += 1
                first = False
                if plain:
                    at = _json_put(buf, at, up, ul)
                else:
                    memcpy(buf + at, up, ul)
                    at += ul
            buf[at] = 93  # ]
            return PyUnicode_DecodeASCII(<const char*>buf, at + 1, NULL)
        finally:
            free(buf)

    def csv_rows(self, str source):
        """The CSV rows of `crawler.output.sinks.CsvSink` (source, target, tag, nofollow; a link
        without a URL has none) as ``csv.writer`` writes them, CR LF each; None when a value
        is not ASCII (the caller writes those rows its own way)."""
        src = _csv_field(source)
        if not PyUnicode_IS_ASCII(src):
            return None
        cdef Py_ssize_t sl = PyUnicode_GET_LENGTH(src), i, cap = 0, at = 0
        cdef const unsigned char* sp = <const unsigned char*>PyUnicode_DATA(src)
        cdef const unsigned char* up
        cdef const unsigned char* tp
        cdef Py_ssize_t ul, tl
        cdef RecEnt* e
        cdef unsigned char* buf = NULL
        cdef list tags = self._tb.entry_tagstr
        cdef dict tag_fields = {}
        try:
            for i in range(self._n):
                e = &self._ents[i]
                if e.ulen >= 0:
                    up = self._text + e.off
                    ul = e.ulen
                    tag = <object>PyList_GET_ITEM(tags, e.k)
                    nf = e.nofollow
                else:
                    link = <tuple>PyList_GET_ITEM(self._objs, e.off)
                    u = link[0]
                    if u is None:
                        continue
                    if not PyUnicode_IS_ASCII(u):
                        return None
                    up = <const unsigned char*>PyUnicode_DATA(u)
                    ul = PyUnicode_GET_LENGTH(u)
                    tag = link[2]
                    nf = link[4]
                tf = tag_fields.get(tag)
                if tf is None:
                    tf = _csv_field(tag)
                    if not PyUnicode_IS_ASCII(tf):
                        return None
                    tag_fields[tag] = tf
                tp = <const unsigned char*>PyUnicode_DATA(tf)
                tl = PyUnicode_GET_LENGTH(tf)
                # at most: source, the URL quoted (each byte doubled, 2 quotes), the tag,
                # "false", 3 commas, CR LF
                buf = _room(buf, &cap, at + sl + 2 * ul + 2 + tl + 5 + 5)
                memcpy(buf + at, sp, sl)
                at += sl
                buf[at] = 44  # ,
                at += 1
                at = _csv_put(buf, at, up, ul)
                buf[at] = 44
                at += 1
                memcpy(buf + at, tp, tl)
                at += tl
                if nf:
                    memcpy(buf + at, b",true\r\n", 7)
                    at += 7
                else:
                    memcpy(buf + at, b",false\r\n", 8)
                    at += 8
            return PyUnicode_DecodeASCII(<const char*>buf, at, NULL)
        finally:
            free(buf)


cdef unsigned char* _room(unsigned char* buf, Py_ssize_t* cap, Py_ssize_t need) except NULL:
    """``buf`` (a malloc'ed output buffer of ``cap[0]`` bytes, or NULL) with room for ``need``
    bytes: grown by realloc, at least doubled. On MemoryError ``buf`` is still the caller's."""
    cdef Py_ssize_t c
    cdef void* q
    if need <= cap[0] and buf != NULL:
        return buf
    c = max(need, 2 * cap[0], 4096)
    q = realloc(buf, c)
    if q == NULL:
        raise MemoryError()
    cap[0] = c
    return <unsigned char*>q


cdef object _json_dumps = json.JSONEncoder(separators=(",", ":")).encode
cdef const char* _HEX = b"0123456789abcdef"


cdef Py_ssize_t _json_put(unsigned char* buf, Py_ssize_t at, const unsigned char* p,
                          Py_ssize_t n) noexcept:
    """ASCII bytes p[:n] as a JSON string into buf at ``at`` (json's escapes); the end."""
    cdef Py_ssize_t i
    cdef unsigned char c
    buf[at] = 34
    at += 1
    for i in range(n):
        c = p[i]
        if c >= 32 and c != 34 and c != 92:
            buf[at] = c
            at += 1
            continue
        buf[at] = 92
        if c == 34 or c == 92:
            buf[at + 1] = c
        elif c == 10:
            buf[at + 1] = 110  # n
        elif c == 13:
            buf[at + 1] = 114  # r
        elif c == 9:
            buf[at + 1] = 116  # t
        elif c == 8:
            buf[at + 1] = 98  # b
        elif c == 12:
            buf[at + 1] = 102  # f
        else:
            buf[at + 1] = 117  # u
            buf[at + 2] = 48
            buf[at + 3] = 48
            buf[at + 4] = _HEX[c >> 4]
            buf[at + 5] = _HEX[c & 15]
            at += 4
        at += 2
    buf[at] = 34
    return at + 1


cdef str _csv_field(str value):
    """One field as ``csv.writer`` (the excel dialect, QUOTE_MINIMAL) writes it."""
    if "," in value or '"' in value or "\r" in value or "\n" in value:
        return '"' + value.replace('"', '""') + '"'
    return value


cdef Py_ssize_t _csv_put(unsigned char* buf, Py_ssize_t at, const unsigned char* p,
                         Py_ssize_t n) noexcept:
    """`_csv_field` of ASCII bytes p[:n] into buf at ``at``; returns the end."""
    cdef Py_ssize_t i
    cdef bint quote = False
    for i in range(n):
        if p[i] == 44 or p[i] == 34 or p[i] == 13 or p[i] == 10:
            quote = True
            break
    if not quote:
        memcpy(buf + at, p, n)
        return at + n
    buf[at] = 34
    at += 1
    for i in range(n):
        buf[at] = p[i]
        at += 1
        if p[i] == 34:
            buf[at] = 34
            at += 1
    buf[at] = 34
    return at + 1


# The extractor ------------------------------------------------------------------------------

cdef class LinkExtractor:
    """Streaming link extractor for one HTML document (compiled; see `_machine.LinkExtractor`).

    Args:
        base_url: the document's URL; relative links resolve against it until a ``<base
            href>`` is seen.
        encoding: the charset label from the Content-Type header, if any.
        link_set: ``"links"``, ``"resources"`` or a mapping ``{tag: (attr, ...)}``.
        max_token: the longest attribute value kept (bytes); longer values are dropped.
        collect_ids: collect the document's fragment targets in ``ids`` (see `_machine`).
        intake: a compiled ``crawler.urls.intake.Intake``: ``feed`` and ``close`` then return its
            items (canonical URLs it does not know, and the Links it keeps) instead of Links;
            a plain value resolved by the C fast path never becomes a Python object.
        record: with an intake, also keep every link of the page in ``record`` (a
            `LinkRecord`: the Links ``feed`` and ``close`` would return without an intake,
            kept compact and made when read).
    """

    cdef public bint _strict
    cdef public bint nofollow
    cdef IntakeBase _intake
    cdef readonly LinkRecord record
    cdef public str encoding
    cdef public set ids
    cdef public bint ids_complete
    cdef readonly object head  # head_facts: `_headfacts.HeadFacts`, else None
    cdef bint _hscan  # the head is being read (head_facts, until its first body tag)
    cdef object _ids
    cdef Py_ssize_t _id_chars
    # Where links stand (`_machine.LinkExtractor._locate`): stream offsets.
    cdef bytes _cur
    cdef Py_ssize_t _off
    cdef Py_ssize_t _end
    cdef Py_ssize_t _cnt
    cdef Py_ssize_t _lines
    cdef Py_ssize_t _col
    cdef bint _cr
    cdef int _ckind
    cdef object _cdec
    # The WHATWG UTF-8 decoder's state, counting (K_UTF8): bytes needed, seen, bounds.
    cdef int _u_need
    cdef int _u_seen
    cdef int _u_lo
    cdef int _u_hi
    cdef Py_ssize_t _t_at
    cdef Py_ssize_t _t_stop  # stream offset just past the start tag being emitted
    cdef int _dflt  # the table's entry for a tag not in it (collecting ids), or -1
    cdef bint _has_cr  # the buffer being scanned has a CR (most pages have none)
    cdef Py_ssize_t _w_line
    cdef Py_ssize_t _w_col
    cdef str _doc_url
    cdef object _query_codec
    cdef _FastResolver _fr
    cdef bint _base_seen
    cdef Py_ssize_t _max
    cdef dict _links
    cdef dict _want
    cdef dict _tagstr
    # encoding
    cdef object _transport
    cdef int _estate
    cdef bint _tentative
    cdef bint _sniff
    cdef bytes _pending
    cdef str _codec
    cdef str _errors
    cdef object _decoder
    # tokenizer
    cdef bytes _buf
    cdef int _state
    cdef int _rawidx
    cdef object _fst
    cdef object _fst_start
    cdef object _fst_end
    cdef object _fst_push
    # The ForeignStack's own containers (the same objects; it never replaces them), read by
    # the inline common cases `_fst_start_fast` and `_fst_end_fast`.
    cdef list _fkeys
    cdef list _fcounts
    cdef list _fhtml
    cdef dict _fopen
    cdef list _foreign
    cdef object _fs
    cdef int _fmode
    cdef bint _form
    cdef bint _closed
    # tag table (shared, per link set)
    cdef _Tables _tb
    cdef Entry* _entries
    cdef int _nentries
    cdef WAttr* _wattrs
    cdef bytes _pool
    cdef list _entry_names
    cdef list _entry_wnames
    cdef list _raw_names
    # streaming tag
    cdef int _ts
    cdef bint _t_end
    cdef bint _t_slash
    cdef unsigned char _t_name[NAME_CAP + 1]
    cdef Py_ssize_t _t_nlen
    cdef int _t_tag
    # current attribute
    cdef int _a_mode
    cdef unsigned char _a_name[ANAME_CAP + 1]
    cdef Py_ssize_t _a_nlen
    cdef int _a_slot
    cdef Py_ssize_t _a_off
    cdef Py_ssize_t _a_len
    cdef bint _a_over
    # kept attributes of the current tag: state 0 absent, 1 value, 2 None (too long)
    cdef int* _sl_state
    cdef Py_ssize_t* _sl_off
    cdef Py_ssize_t* _sl_len
    cdef int _maxw
    cdef unsigned char* _arena
    cdef Py_ssize_t _arena_len
    cdef Py_ssize_t _arena_cap

    def __cinit__(self, *args, **kwargs):
        self._entries = NULL
        self._wattrs = NULL
        self._sl_state = NULL
        self._sl_off = NULL
        self._sl_len = NULL
        self._arena = NULL

    def __dealloc__(self):
        free(self._sl_state)
        free(self._sl_off)
        free(self._sl_len)
        free(self._arena)

    def __init__(self, str base_url, encoding=None, *, link_set="links", max_token=MAX_TOKEN,
                 collect_ids=False, IntakeBase intake=None, record=False, head_facts=False):
        cdef _Tables tb = _tables(link_set, bool(collect_ids), bool(head_facts))
        self.head = HeadFacts() if head_facts else None
        self._hscan = bool(head_facts)
        self._intake = intake
        self.record = None
        if record:
            if intake is None:
                raise ValueError("record=True needs an intake (without one, feed returns the Links)")
            self.record = LinkRecord.__new__(LinkRecord)
            self.record._tb = tb
        self.ids = set()
        self._ids = self.ids if collect_ids else None
        self._id_chars = 0
        self.ids_complete = bool(collect_ids)
        self._cur = b""
        self._off = 0
        self._end = 0
        self._cnt = 0
        self._lines = 0
        self._col = 0
        self._cr = False
        self._ckind = K_SINGLE
        self._cdec = None
        self._u_need = 0
        self._u_seen = 0
        self._u_lo = 0x80
        self._u_hi = 0xBF
        self._w_line = 1
        self._w_col = 1
        self._tb = tb
        self._dflt = tb.dflt
        self._links = tb.links
        self._want = tb.want
        self._tagstr = tb.tagstr
        self._entries = tb.entries
        self._nentries = tb.nentries
        self._wattrs = tb.wattrs
        self._pool = tb.pool
        self._entry_names = tb.entry_names
        self._entry_wnames = tb.entry_wnames
        self._maxw = tb.maxw
        self._raw_names = list(_RAWTEXT_NAMES)
        self._strict = False
        self._doc_url = base_url
        self._set_base(base_url, None)
        self._query_codec = None
        self._base_seen = False
        self.nofollow = False
        self._max = max_token
        free(self._sl_state)
        free(self._sl_off)
        free(self._sl_len)
        free(self._arena)
        self._sl_state = <int*>malloc(self._maxw * sizeof(int))
        self._sl_off = <Py_ssize_t*>malloc(self._maxw * sizeof(Py_ssize_t))
        self._sl_len = <Py_ssize_t*>malloc(self._maxw * sizeof(Py_ssize_t))
        self._arena_cap = 256
        self._arena = <unsigned char*>malloc(self._arena_cap)
        if self._sl_state == NULL or self._sl_off == NULL or self._sl_len == NULL \
                or self._arena == NULL:
            raise MemoryError()
        # Encoding.
        self._transport = _charset.lookup(encoding)
        self.encoding = self._transport or "windows-1252"
        self._estate = E_UNDECIDED
        self._tentative = False
        self._sniff = False
        self._pending = b""
        self._codec = "cp1252"
        self._errors = "crawler-whatwg"
        self._decoder = None
        # Tokenizer.
        self._buf = b""
        self._state = S_DATA
        self._rawidx = -1
        self._fst = ForeignStack()
        self._foreign = self._fst.runs  # the same list: empty means HTML content
        # Bound once: a method lookup per svg/math tag costs as much as the method.
        self._fst_start = self._fst.start
        self._fst_end = self._fst.end
        self._fst_push = self._fst.push
        self._fkeys = self._fst.keys
        self._fcounts = self._fst.counts
        self._fhtml = self._fst.html
        self._fopen = self._fst.open
        self._fs = FramesetState()
        self._fmode = CFS_HEAD
        self._form = False
        self._closed = False
        self._begin_tag(False, 0)
        self._t_at = -1
        self._t_stop = 0
        self._state = S_DATA

    cdef int _set_base(self, str url, qc) except -1:
        cdef _FastResolver fr = _lazy_resolver(url, qc)
        self._fr = fr if fr is not None else _FastResolver(Resolver(url, qc))
        return 0

    @property
    def base_url(self):
        """The base URL links resolve against now (the first ``<base href>`` once seen)."""
        if self._fr.lazy_base is not None:
            return self._fr.lazy_base
        r = self._fr.get_py()
        return r.base if r.valid else self._doc_url

    # Public API ---------------------------------------------------------------------------

    def feed(self, data):
        """Consume the next chunk; return the links it completed, in document order."""
        cdef list out = []
        if self._closed or self._state == S_DEAD:
            return out
        try:
            self._feed(data if type(data) is bytes else bytes(data), False, out)
        except Exception:
            if self._strict:
                raise
            self._state = S_DEAD
            self.ids_complete = False
            self._fs.release(out)
        if self._intake is not None and PyList_GET_SIZE(out):
            return self._items(out)
        return out

    def close(self):
        """End of document: return the last links (a tag cut by the end is not a tag)."""
        cdef list out = []
        if self._closed:
            return out
        self._closed = True
        if self._state == S_DEAD:
            return out
        try:
            self._feed(b"", True, out)
        except Exception:
            if self._strict:
                raise
            self.ids_complete = False
        self._fs.release(out)
        self._state = S_DEAD
        self._buf = b""
        if self._intake is not None and PyList_GET_SIZE(out):
            return self._items(out)
        return out

    cdef list _items(self, list out):
        """With an intake: its items, in order (the Links the slow paths made go through it).
        With a record, a None in ``out`` marks where the next compact link of the step stands
        among them."""
        cdef list items = []
        cdef IntakeBase it = self._intake
        cdef LinkRecord rec = self.record
        for x in out:
            if type(x) is str:
                items.append(x)
            elif x is None:
                rec.commit()
            else:
                if rec is not None and it.found < it.limit:  # (take_link counts it)
                    rec.add_obj(x)
                it.take_link(x, items)
        return items

    # Encoding -----------------------------------------------------------------------------

    cdef int _feed(self, bytes data, bint final, list out) except -1:
        cdef int st = self._estate
        if st == E_BYTES:
            return self._scan(data, final, out)
        if st == E_UNDECIDED:
            data = self._pending + data
            need = 3 if self._transport is not None else 1024
            b = _charset.bom(data)
            if b is None and len(data) < need and not final:
                self._pending = data
                return 0
            self._pending = b""
            if b is not None:
                name, skip = b
                data = data[skip:]
            else:
                found = self._transport or _prescan(data)
                self._tentative = found is None
                name = found or self._undeclared(data, final)
            self._decide(name)
            st = self._estate
            if st == E_BYTES:
                return self._scan(data, final, out)
        if st == E_TRANSCODE:
            text = self._decoder.decode(data, final)
            self._scan(text.encode("utf-8", "surrogatepass"), final, out)
        return 0

    cdef str _undeclared(self, bytes data, bint final):
        """`_machine.LinkExtractor._undeclared`."""
        name = _charset.detect_undeclared(data[:1024], final and len(data) <= 1024)
        self._sniff = name is None
        return name or "windows-1252"

    cdef int _sniff_value(self, bytes v) except -1:
        """`_machine.LinkExtractor._sniff_value`."""
        self._sniff = False
        name = _charset.detect_undeclared(v, True)
        if name is not None and name != self.encoding:
            self._count_tag()
            self._decide(name)
        return 0

    cdef int _count_tag(self) except -1:
        """`_machine.LinkExtractor._count_tag`: count to the end of the start tag that
        changes the encoding."""
        self._locate()
        self._advance(<const unsigned char*>PyBytes_AS_STRING(self._cur), self._t_stop - self._off)
        return 0

    cdef _decide(self, str name):
        self.encoding = name
        if name == "replacement":
            self._estate = E_REPLACEMENT
            return
        codec, errors = _charset.python_codec(name)
        try:
            codecs.lookup(codec)
        except LookupError:
            codec, errors = "cp1252", "crawler-whatwg"
            self.encoding = "windows-1252"
        if name in _charset.TRANSCODE:
            if name == "iso-2022-jp":
                self._decoder = Iso2022JPDecoder()
            else:
                self._decoder = codecs.getincrementaldecoder(codec)("replace")
            self._estate = E_TRANSCODE
            self._codec, self._errors = "utf-8", "replace"
        else:
            self._estate = E_BYTES
            self._codec, self._errors = codec, errors
        self._count_as(self._codec, self._errors)
        # Link queries are percent-encoded in the document's encoding (UTF-16 pages use UTF-8).
        qc = None if name in ("utf-8", "utf-16le", "utf-16be") else codec
        self._query_codec = qc
        if self._fr.lazy_base is not None:
            if qc != self._fr.lazy_qc or self._fr.lazy_base != self._doc_url:
                self._set_base(self._fr.lazy_base, qc)
            return
        r = self._fr.get_py()
        if qc is None and type(r) is _ResolverType and r.query_codec is None and r.valid \
                and r.base == self._doc_url:
            return  # Resolver(r.base, None) would be built exactly as r was: keep r
        self._set_base(r.base if r.valid else self._doc_url, qc)

    # Where links stand ----------------------------------------------------------------------

    cdef inline int _partial(self) except -1:
        """A partial character is pending (it is one U+FFFD at the '<' that ends it)."""
        if self._ckind == K_UTF8:
            return self._u_need != 0
        if self._ckind == K_DECODE:
            return len(self._cdec.getstate()[0]) != 0
        return False

    cdef int _count_as(self, str codec, str errors) except -1:
        """`_machine.LinkExtractor._count_as`."""
        if self._partial():
            self._col += 1
        self._u_need = 0
        self._u_seen = 0
        self._u_lo = 0x80
        self._u_hi = 0xBF
        self._cdec = None
        if codec == "utf-8":
            self._ckind = K_UTF8
        elif codec in MULTIBYTE_CODECS:
            self._ckind = K_DECODE
            self._cdec = codecs.getincrementaldecoder(codec)(errors)
        else:
            self._ckind = K_SINGLE
        return 0

    cdef Py_ssize_t _utf8_count(self, const unsigned char* p, Py_ssize_t n) noexcept:
        """Code points of p[:n] as the standard's UTF-8 decoder (errors: one U+FFFD per
        maximal invalid subpart, as Python's "replace") gives them, resumable."""
        cdef Py_ssize_t i = 0, k = 0
        cdef int need = self._u_need, seen = self._u_seen, lo = self._u_lo, hi = self._u_hi
        cdef Py_ssize_t run
        cdef unsigned char b
        while i < n:
            b = p[i]
            if need == 0:
                if b < 0x80:
                    run = lc_ascii_run(p + i, n - i)
                    k += run
                    i += run
                    continue
                i += 1
                if 0xC2 <= b <= 0xDF:
                    need = 1
                    lo = 0x80
                    hi = 0xBF
                elif 0xE0 <= b <= 0xEF:
                    need = 2
                    lo = 0xA0 if b == 0xE0 else 0x80
                    hi = 0x9F if b == 0xED else 0xBF
                elif 0xF0 <= b <= 0xF4:
                    need = 3
                    lo = 0x90 if b == 0xF0 else 0x80
                    hi = 0x8F if b == 0xF4 else 0xBF
                else:
                    k += 1
            elif b < lo or b > hi:
                need = 0  # an error; the byte is read again
                seen = 0
                k += 1
            else:
                lo = 0x80
                hi = 0xBF
                seen += 1
                i += 1
                if seen == need:
                    need = 0
                    seen = 0
                    k += 1
        self._u_need = need
        self._u_seen = seen
        self._u_lo = lo
        self._u_hi = hi
        return k

    cdef int _advance(self, const unsigned char* p, Py_ssize_t x) except -1:
        """`_machine.LinkExtractor._advance`: line breaks by memchr, code points from the
        last one."""
        cdef Py_ssize_t c = self._cnt - self._off, nl, last = -1, j
        cdef int high = 0
        if x <= c:
            return 0
        nl = lc_count_lf(p + c, x - c, &high)
        if nl:
            last = c + lc_last(p + c, x - c, 0x0A)
        if self._has_cr:  # (the buffer has a CR somewhere)
            j = lc_last(p + c, x - c, 0x0D)
            if j >= 0:
                # A CR not followed by LF (here) is a break of its own.
                nl += lc_count_lone_cr(p + c, x - c)
                j += c
                if (j + 1 >= x or p[j + 1] != 0x0A) and j > last:
                    last = j
        if self._cr and p[c] == 0x0A:
            nl -= 1  # the LF of a CR LF split between two buffers
        self._cr = p[x - 1] == 0x0D
        self._lines += nl
        if last >= 0:
            c = last + 1
            self._col = 0
            self._u_need = 0
            self._u_seen = 0
            if self._cdec is not None:
                self._cdec.reset()
        if x > c:
            if self._ckind == K_SINGLE or (not high and self._u_need == 0
                                           and self._ckind == K_UTF8):
                self._col += x - c  # (one byte, one code point; or ASCII, no partial one)
            elif self._ckind == K_UTF8:
                self._col += self._utf8_count(p + c, x - c)
            else:
                self._col += len(self._cdec.decode(PyBytes_FromStringAndSize(<const char*>p + c, x - c)))
        self._cnt = self._off + x
        return 0

    cdef int _locate(self) except -1:
        """The line and column of the current tag's '<' into `_w_line`, `_w_col`."""
        cdef Py_ssize_t at = self._t_at
        if at >= 0:
            self._t_at = -1
            self._advance(<const unsigned char*>PyBytes_AS_STRING(self._cur), at - self._off)
            self._w_line = self._lines + 1
            self._w_col = self._col + (2 if self._partial() else 1)
        return 0

    # Values and links ---------------------------------------------------------------------

    cdef str _text(self, bytes v, bint sniff=True):
        """An attribute value as the DOM holds it: decoded, references and newlines done."""
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(v)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(v), i
        cdef bint high, special, cr
        cdef unsigned char acc = 0
        cdef str s
        for i in range(n):
            acc |= VCLS[p[i]]
        high = acc & V_HIGH
        special = acc & V_SPECIAL
        cr = acc & V_CR
        if not high:
            if not special and not cr:
                return PyUnicode_DecodeASCII(<const char*>p, n, NULL)
            # The reference's order: newlines (input stream), NUL, then character references,
            # so that "&#13;" keeps U+000D.
            if cr:
                v = v.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                p = <const unsigned char*>PyBytes_AS_STRING(v)
                n = PyBytes_GET_SIZE(v)
            if not special:
                return PyUnicode_DecodeASCII(<const char*>p, n, NULL)
            s = _unescape_ascii(p, n)
            if "\x00" in s:
                s = s.replace("\x00", "\ufffd")
            return s
        if sniff and self._sniff and self._tentative:
            self._sniff_value(v)
        s = v.decode(self._codec, self._errors)
        if "\r" in s:
            s = s.replace("\r\n", "\n").replace("\r", "\n")
        if "\x00" in s:
            s = s.replace("\x00", "\ufffd")
        if "&" in s:
            s = unescape_attr(s)
        return s

    cdef int _add_id(self, object v) except -1:
        """`_machine.LinkExtractor._add_id`."""
        cdef set ids = <set>self._ids
        if v is None:
            self.ids_complete = False
            return 0
        s = self._text(<bytes>v, False)
        more = None
        if self._sniff and self._tentative and not (<bytes>v).isascii():
            more = dom_text((<bytes>v).decode("utf-8", "replace"))
        for t in (s, more):
            if t and t not in ids:
                if len(ids) >= MAX_IDS or self._id_chars + len(<str>t) > MAX_ID_CHARS:
                    self.ids_complete = False
                    return 0
                self._id_chars += len(<str>t)
                ids.add(t)
        return 0

    cdef int _collect(self, bytes name, dict attrs, bint html) except -1:
        """`_machine.LinkExtractor._collect`."""
        if b"id" in attrs:
            self._add_id(attrs[b"id"])
        if html and name == b"a" and b"name" in attrs:
            self._add_id(attrs[b"name"])
        return 0

    cdef int _collect_slots(self, int k) except -1:
        """`_collect` of an HTML start tag from its kept attributes, in place."""
        cdef int slot = self._tb.idslot[k]
        if slot >= 0 and self._sl_state[slot] != 0:
            self._add_id(self._slot_value(slot) if self._sl_state[slot] == 1 else None)
        slot = self._tb.nameslot[k]
        if slot >= 0 and self._sl_state[slot] != 0:
            self._add_id(self._slot_value(slot) if self._sl_state[slot] == 1 else None)
        return 0

    cdef int _emit(self, bytes tag, dict attrs, list out) except -1:
        """`_machine.LinkExtractor._emit`: an error drops this tag's links only."""
        cdef Py_ssize_t n = PyList_GET_SIZE(out)
        self._locate()
        try:
            self._emit_links(tag, attrs, out)
        except Exception:
            if self._strict:
                raise
            del out[n:]
        return 0

    cdef int _emit_simple(self, int k, list out) except -1:
        """`_emit_simple_links`, guarded as `_emit` is."""
        cdef Py_ssize_t n = PyList_GET_SIZE(out)
        cdef LinkRecord rec = self.record
        cdef Py_ssize_t pending = rec._np if rec is not None else 0
        if self._intake is None:  # (with one, located only when a Link is made: the count
            self._locate()        # is cumulative, so a tag not located costs nothing)
        try:
            self._emit_simple_links(k, out)
        except Exception:
            if self._strict:
                raise
            del out[n:]
            if rec is not None:
                rec._np = pending  # (their markers went with them)
        return 0

    cdef int _emit_links(self, bytes tag, dict attrs, list out) except -1:
        """Links of a start tag in HTML content (or a foreign element with a link attr)."""
        spec = self._links.get(tag)
        cdef bint nofollow
        if spec is not None and attrs:
            nofollow = False
            rel = attrs.get(b"rel")
            if rel is not None:
                nofollow = "nofollow" in _WS_SPLIT.split(self._text(rel).lower())
            tagstr = self._tagstr[tag]
            fr = self._fr
            ln = _int(self._w_line)
            co = _int(self._w_col)
            for a, astr in spec:
                v = attrs.get(a)
                if v is None:
                    continue
                raw = self._text(v)
                if a == b"srcset":
                    for u in parse_srcset(raw):
                        out.append(_mklink(fr.resolve(u), u, tagstr, astr, nofollow, ln, co))
                    continue
                out.append(_mklink(fr.resolve(raw), raw, tagstr, astr, nofollow, ln, co))
        if tag == b"base":
            if not self._base_seen and attrs.get(b"href") is not None \
                    and self._fmode != CFS_TEMPLATE:
                self._base_seen = True
                href = attrs[b"href"]
                url = self._fr.resolve(self._text(href))
                if url is not None and not url.startswith(("data:", "javascript:")):
                    self._set_base(url, self._query_codec)
        elif tag == b"meta":
            self._meta(attrs, out)
        return 0

    cdef int _meta(self, dict attrs, list out) except -1:
        if self._tentative:
            self._meta_charset(attrs)
        content = attrs.get(b"content")
        if content is None:
            return 0
        equiv = attrs.get(b"http-equiv")
        if equiv is not None and self._text(equiv).lower() == "refresh":
            raw = refresh_url(self._text(content))
            if raw is not None:
                out.append(_mklink(self._fr.resolve(raw), raw, "meta", "content", False,
                                   _int(self._w_line), _int(self._w_col)))
        name = attrs.get(b"name")
        if name is not None and self._text(name).lower() == "robots":
            for tok in self._text(content).lower().replace(",", " ").split():
                if tok == "nofollow" or tok == "none":
                    self.nofollow = True
        return 0

    cdef int _meta_charset(self, dict attrs) except -1:
        cs = attrs.get(b"charset")
        name = None
        if cs is not None:
            name = _charset.lookup(cs.decode("latin-1"))
        else:
            equiv = attrs.get(b"http-equiv")
            content = attrs.get(b"content")
            if equiv is not None and content is not None and equiv.lower() == b"content-type":
                name = _charset.charset_from_content(content)
        if name is None:
            return 0
        self._tentative = False
        if name in ("utf-16be", "utf-16le"):
            name = "utf-8"
        elif name == "x-user-defined":
            name = "windows-1252"
        if name != self.encoding and name not in _charset.TRANSCODE and name != "replacement":
            self._count_tag()
            self._decide(name)
        return 0

    # Tags ---------------------------------------------------------------------------------

    cdef int _emit_body(self, bytes name, dict attrs, list out) except -1:
        """`_machine.LinkExtractor._emit_body`: held while a <frameset> could remove the body."""
        if self._fmode == CFS_BODY:
            self._emit(name, attrs, self._fs.held)
            self._fs.cap_held(out)
            self._fmode = self._fs.view
        else:
            self._emit(name, attrs, out)
        return 0

    cdef int _start(self, bytes name, dict attrs, bint sc, list out) except -1:
        """A complete start tag: links, then the tokenizer state the tree builder would set."""
        cdef int kind
        if PyList_GET_SIZE(self._foreign):
            kind = self._fst_start_fast(name, sc)
            if kind < 0:
                kind = self._fst_start(name, attrs, sc)
            if kind != F_HTML:
                if self._ids is not None and self._fmode != CFS_TEMPLATE:
                    self._collect(name, attrs, False)
                if kind == F_LINK and b"a" in self._links:
                    self._emit_body(name, attrs, out)
                return 0
        if self._ids is not None and self._fmode != CFS_TEMPLATE:
            self._collect(name, attrs, True)
        if self._fmode != CFS_DONE or name == b"template":
            ignored = self._fs.start(name, attrs, out)
            self._fmode = self._fs.view
            if ignored:
                return 0
        elif name == b"frame":
            return 0
        if name in self._want:
            if name == b"form":
                if self._form:
                    return 0
                self._form = True
            self._emit_body(name, attrs, out)
        sw = _SWITCH.get(name)
        if sw is not None:
            self._state = sw
            if sw == S_RAWTEXT:
                self._rawidx = _RAWTEXT_NAMES.index(name)
        elif name == b"svg" and not sc:
            self._fst_push(b"s:svg", b"svg")
        elif name == b"math" and not sc:
            self._fst_push(b"m:math", b"math")
        return 0

    cdef int _fst_start_fast(self, bytes name, bint sc) except -2:
        """`ForeignStack.start` for the common case, inline: no HTML element open in an
        integration point, a top that is none, and a name with no special rule (the shared
        method does everything else, and is the reference for this): returns the F_* kind,
        or -1 when the shared method must decide."""
        cdef list runs = self._foreign
        cdef Py_ssize_t n = PyList_GET_SIZE(runs)
        cdef bytes top, entry
        if PyList_GET_SIZE(self._fhtml) or PyBytes_GET_SIZE(name) > NAME_CAP:
            return -1
        top = <bytes>runs[n - 1]
        if top in _INTEG or name in _BREAKOUT or name == b"font" or name == b"svg" \
                or name == b"annotation-xml":
            return -1
        if not sc:
            entry = (b"s:" if (<const unsigned char*>PyBytes_AS_STRING(top))[0] == 0x73
                     else b"m:") + name
            if top == entry:
                self._fcounts[n - 1] += 1
                self._fopen[name] += 1
            elif n < FOREIGN_CAP:
                runs.append(entry)
                self._fkeys.append(name)
                self._fcounts.append(1)
                self._fopen[name] = self._fopen.get(name, 0) + 1
        return CF_LINK if name == b"a" else CF_ELEMENT

    cdef bint _fst_end_fast(self, bytes name) except -1:
        """`ForeignStack.end` for the common case, inline: no HTML element open in an
        integration point, and the end tag closes the top run (False: the shared method must
        do it)."""
        cdef list runs = self._foreign, keys = self._fkeys, counts = self._fcounts
        cdef Py_ssize_t n = PyList_GET_SIZE(runs)
        cdef long c
        if PyList_GET_SIZE(self._fhtml) or n == 0 or <bytes>keys[n - 1] != name \
                or name == b"br" or name == b"p":
            return False
        self._fopen[name] -= 1
        c = <long>counts[n - 1] - 1
        if c:
            counts[n - 1] = c
        else:
            runs.pop()
            keys.pop()
            counts.pop()
        return True

    cdef int _fs_end(self, bytes name, list out) except -1:
        self._fs.end(name, out)
        self._fmode = self._fs.view
        return 0

    cdef int _fs_text(self, list out) except -1:
        self._fs.text(out)
        self._fmode = self._fs.view
        return 0

    cdef inline void _switch(self, int k) noexcept:
        cdef int sw = self._entries[k].sw
        if sw != 0:
            self._state = sw
            if sw == S_RAWTEXT:
                self._rawidx = self._entries[k].rawidx

    # The streaming tag machine --------------------------------------------------------------

    cdef inline void _begin_tag(self, bint end, Py_ssize_t at) noexcept:
        """A tag whose '<' is at ``buf[at]``."""
        self._t_at = self._off + at
        self._state = S_TAG
        self._ts = TS_NAME
        self._t_end = end
        self._t_nlen = 0
        self._t_tag = -1
        self._t_slash = False
        self._a_mode = A_NONE

    cdef void _name_end(self) noexcept:
        """The tag name is complete: find its entry; clear the kept attributes."""
        cdef int i
        cdef Entry* e
        cdef const unsigned char* pool = <const unsigned char*>PyBytes_AS_STRING(self._pool)
        self._t_tag = -1
        if (self._t_nlen < 32 and (self._tb.first_len[self._t_name[0]] >> self._t_nlen) & 1) \
                or 32 <= self._t_nlen <= NAME_CAP:
            for i in range(self._nentries):
                e = &self._entries[i]
                if e.nlen == self._t_nlen and pool[e.noff] == self._t_name[0] \
                        and memcmp(pool + e.noff, self._t_name, self._t_nlen) == 0:
                    self._t_tag = i
                    break
        if self._t_tag < 0:
            self._t_tag = self._dflt  # (-1 unless ids are collected)
        if self._t_tag >= 0:
            e = &self._entries[self._t_tag]
            for i in range(e.nwant):
                self._sl_state[i] = 0
        self._arena_len = 0

    cdef inline void _begin_attr(self, unsigned char c) noexcept:
        if self._t_tag >= 0 and not self._t_end and self._entries[self._t_tag].nwant > 0:
            self._a_mode = A_NAME
            self._a_name[0] = LOWER[c]
            self._a_nlen = 1
        else:
            self._a_mode = A_NONE

    cdef void _aname_done(self) noexcept:
        cdef Entry* e
        cdef int i
        cdef WAttr* w
        cdef const unsigned char* pool
        if self._a_mode != A_NAME:
            return
        self._a_mode = A_NONE
        e = &self._entries[self._t_tag]
        pool = <const unsigned char*>PyBytes_AS_STRING(self._pool)
        for i in range(e.nwant):
            w = &self._wattrs[e.wfirst + i]
            if w.len == self._a_nlen and memcmp(pool + w.off, self._a_name, w.len) == 0:
                self._a_mode = A_VALUE
                self._a_slot = i
                self._a_off = self._arena_len
                self._a_len = 0
                self._a_over = False
                return

    cdef int _add_val(self, const unsigned char* p, Py_ssize_t s, Py_ssize_t e) except -1:
        cdef Py_ssize_t need, cap
        cdef unsigned char* a
        if self._a_mode != A_VALUE or e <= s or self._a_over:
            return 0
        self._a_len += e - s
        if self._a_len > self._max:
            self._a_over = True
            self._arena_len = self._a_off
            return 0
        need = self._arena_len + (e - s)
        if need > self._arena_cap:
            cap = need * 2
            a = <unsigned char*>realloc(self._arena, cap)
            if a == NULL:
                raise MemoryError()
            self._arena = a
            self._arena_cap = cap
        memcpy(self._arena + self._arena_len, p + s, e - s)
        self._arena_len = need
        return 0

    cdef inline void _end_attr(self) noexcept:
        """The attribute ends (with the value read so far, or empty): keep it if first."""
        cdef int slot
        if self._a_mode == A_VALUE:
            slot = self._a_slot
            if self._sl_state[slot] == 0:
                if self._a_over:
                    self._sl_state[slot] = 2
                else:
                    self._sl_state[slot] = 1
                    self._sl_off[slot] = self._a_off
                    self._sl_len[slot] = self._a_len
            else:
                self._arena_len = self._a_off
        self._a_mode = A_NONE

    cdef dict _attrs(self):
        """The kept attributes of the current tag as the reference's dict."""
        cdef dict attrs = {}
        cdef int i
        cdef Entry* e
        if self._t_tag < 0:
            return attrs
        e = &self._entries[self._t_tag]
        wn = self._entry_wnames[self._t_tag]
        for i in range(e.nwant):
            st = self._sl_state[i]
            if st == 1:
                attrs[wn[i]] = PyBytes_FromStringAndSize(
                    <const char*>self._arena + self._sl_off[i], self._sl_len[i])
            elif st == 2:
                attrs[wn[i]] = None
        return attrs

    cdef inline bytes _slot_value(self, int i):
        return PyBytes_FromStringAndSize(<const char*>self._arena + self._sl_off[i], self._sl_len[i])

    cdef int _emit_simple_links(self, int k, list out) except -1:
        """`_emit` for a link tag in HTML content, reading the kept attributes in place."""
        cdef int i, n = self._entries[k].nwant, slot
        cdef bint nofollow = False, any_attr = False
        cdef _FastResolver fr = self._fr
        for i in range(n):
            if self._sl_state[i] != 0:
                any_attr = True
                break
        if not any_attr:
            return 0
        cdef _Tables tb = self._tb
        slot = tb.rel_slot[k]
        if slot >= 0 and self._sl_state[slot] == 1:
            i = _rel_nofollow(self._arena + self._sl_off[slot], self._sl_len[slot])
            if i < 0:  # not plain ASCII: the reference's computation on the decoded text
                nofollow = "nofollow" in _WS_SPLIT.split(self._text(self._slot_value(slot)).lower())
            else:
                nofollow = i == 1
        cdef object ln = None
        cdef object co = None
        cdef object tagstr = None
        cdef IntakeBase it = self._intake
        cdef LinkRecord rec = self.record
        cdef bint located = False
        cdef const unsigned char* p
        cdef Py_ssize_t vlen, r
        cdef int j, j0 = tb.spec_start[k], j1 = tb.spec_start[k] + tb.spec_len[k]
        cdef bint srcset
        for j in range(j0, j1):
            slot = tb.spec_slot[j]
            if self._sl_state[slot] != 1:
                continue
            srcset = tb.spec_srcset[j]
            r = -1
            if not srcset and fr.fast:
                # A plain ASCII value (its text is its bytes) the fast path resolves: with an
                # intake, it goes there from the buffers and no Python object is made; without
                # one, its Link is made from the buffers (no bytes copy, no second pass).
                p = self._arena + self._sl_off[slot]
                vlen = self._sl_len[slot]
                r = fr.fast_buf(p, vlen, True)
                if it is not None:
                    if r >= 0:
                        if it.resolved(fr.res, r, nofollow, out) == 0:
                            # kept compact, and its place marked (not past the intake's
                            # limit: the page's cap holds for its record too)
                            if rec is not None and it.found <= it.limit:
                                if not located:
                                    self._locate()
                                    located = True
                                rec.add(fr.res, r, p, vlen, k, j, nofollow, self._w_line,
                                        self._w_col)
                                out.append(None)
                            continue
                        r = -1
                    elif rec is None and not it.all_links and _opaque_other(p, vlen):
                        it.found += 1  # (mailto:, javascript:, tel:...: never a crawl's URL)
                        continue
            if ln is None:
                if it is not None:
                    self._locate()
                ln = _int(self._w_line)
                co = _int(self._w_col)
                tagstr = tb.entry_tagstr[k]
            astr = <object>PyList_GET_ITEM(tb.spec_astr, j)
            if r >= 0:
                out.append(_mklink(PyUnicode_DecodeASCII(<const char*>fr.res, r, NULL),
                                   PyUnicode_DecodeASCII(<const char*>p, vlen, NULL),
                                   tagstr, astr, nofollow, ln, co))
                continue
            raw = self._text(self._slot_value(slot))
            if srcset:
                for u in parse_srcset(raw):
                    out.append(_mklink(fr.resolve(u), u, tagstr, astr, nofollow, ln, co))
                continue
            out.append(_mklink(fr.resolve(raw), raw, tagstr, astr, nofollow, ln, co))
        return 0

    cdef int _tag_done(self, list out) except -1:
        cdef Entry* e
        cdef int k = self._t_tag
        self._state = S_DATA
        if self._t_end:
            if k >= 0 and (self._entries[k].flags & F_FORM):
                self._form = False
            if PyList_GET_SIZE(self._foreign) or (self._fmode != CFS_DONE
                                                  and _fs_end_name(self._t_name, self._t_nlen)):
                name = PyBytes_FromStringAndSize(<const char*>self._t_name, self._t_nlen)
                if PyList_GET_SIZE(self._foreign):
                    if not self._fst_end_fast(name):
                        self._fst_end(name)
                if self._fmode != CFS_DONE:
                    self._fs_end(name, out)
            return 0
        if self._hscan:
            self._head_tag(k)
        if k >= 0:
            e = &self._entries[k]
            # (a head element before the body: what the slow path would do, done here)
            if PyList_GET_SIZE(self._foreign) == 0 and not (e.flags & (F_SVG | F_MATH | F_TEMPLATE)) \
                    and (self._fmode == CFS_DONE or (self._fmode == CFS_HEAD and (e.flags & F_HEAD))):
                if self._ids is not None:
                    self._collect_slots(k)
                if e.flags & F_FRAME:
                    return 0  # no frame element outside a frameset
                if e.flags & F_FORM:
                    if self._form:
                        return 0
                    self._form = True
                if e.flags & F_SIMPLE:
                    self._emit_simple(k, out)
                elif e.flags & F_WANT:
                    self._emit(self._entry_names[k], self._attrs(), out)
                self._switch(k)
                return 0
        elif PyList_GET_SIZE(self._foreign) == 0 and self._fmode == CFS_DONE:
            return 0
        self._start(PyBytes_FromStringAndSize(<const char*>self._t_name, self._t_nlen),
                    self._attrs(), self._t_slash, out)
        return 0

    cdef int _head_tag(self, int k) except -1:
        """`_machine.LinkExtractor._head_tag`: a start tag while the head is read (entry ``k``,
        -1: none), recognised by its entry's flags; only a fact tag goes to Python code."""
        cdef int flags
        if PyList_GET_SIZE(self._foreign) or self._fmode == CFS_TEMPLATE:
            return 0
        flags = self._entries[k].flags if k >= 0 else 0
        if not (flags & F_HSCOPE):
            self._hscan = False
        elif flags & F_HFACT and self._head_maybe(k):
            self._locate()
            try:
                head_tag(self.head, self._entry_names[k], self._attrs(), self._w_line,
                         self._w_col, self._head_text)
            except Exception:
                if self._strict:
                    raise
        return 0

    cdef bint _head_maybe(self, int k) noexcept:
        """Whether a head <link>/<meta> can be a fact, decided in C on its kept bytes: a link's
        rel must hold "canonical" or "alternate", a meta's name "robots" (ASCII case-insensitive).
        Exact, not a guess: a value with non-ASCII bytes or a '&' (a character reference)
        goes to `_headfacts.head_tag` whatever it holds; without either, its text is its bytes
        (a NUL or CR changes no letter)."""
        cdef int slot = self._tb.hslot[k]
        cdef const unsigned char* p
        cdef Py_ssize_t n, i
        if slot < 0:
            return True  # <base>
        if self._sl_state[slot] != 1:
            return False  # no rel / no name (or one over max_token: no fact either)
        p = self._arena + self._sl_off[slot]
        n = self._sl_len[slot]
        for i in range(n):
            if p[i] >= 0x80 or p[i] == 0x26:
                return True
        if self._entries[k].flags & F_HLINK:
            return _ci_find(p, n, <const unsigned char*>b"canonical", 9) \
                or _ci_find(p, n, <const unsigned char*>b"alternate", 9)
        return _ci_find(p, n, <const unsigned char*>b"robots", 6)

    def _head_text(self, bytes v):
        return self._text(v, False)  # (a head fact decides no guessed encoding)

    cdef Py_ssize_t _tag_stream(self, const unsigned char* p, Py_ssize_t pos, Py_ssize_t n,
                                list out) except -2:
        """Continue the current tag; return where it stopped (n, or just after its '>')."""
        cdef int ts
        cdef unsigned char c
        cdef Py_ssize_t e, k, i
        cdef const unsigned char* q
        # The blocks follow the usual order of the states (name, attributes, attribute name,
        # value) so that a complete attribute goes through them in one pass of the loop.
        while pos < n:
            if self._ts == TS_NAME:
                e = pos
                while e < n and not (CLS[p[e]] & (C_WS | C_SLASH | C_GT)):
                    e += 1
                if e > pos:
                    k = e - pos
                    if k > NAME_CAP + 1 - self._t_nlen:
                        k = NAME_CAP + 1 - self._t_nlen
                    for i in range(k):
                        self._t_name[self._t_nlen + i] = LOWER[p[pos + i]]
                    self._t_nlen += k
                    pos = e
                if pos >= n:
                    return pos
                self._name_end()
                self._ts = TS_ATTRS
                self._t_slash = False
            if self._ts == TS_ATTRS:
                if pos >= n:
                    return pos
                e = pos
                while e < n and (CLS[p[e]] & (C_WS | C_SLASH)):
                    e += 1
                if e > pos:
                    self._t_slash = p[e - 1] == 0x2F
                    pos = e
                    if pos >= n:
                        return pos
                c = p[pos]
                if c == 0x3E:
                    self._t_stop = self._off + pos + 1
                    self._tag_done(out)
                    return pos + 1
                self._t_slash = False
                self._begin_attr(c)
                self._ts = TS_ANAME
                pos += 1
            if self._ts == TS_ANAME:
                e = pos
                while e < n and not (CLS[p[e]] & (C_WS | C_SLASH | C_GT | C_EQ)):
                    e += 1
                if self._a_mode == A_NAME and e > pos:
                    if self._a_nlen + (e - pos) > ANAME_CAP:
                        self._a_mode = A_NONE
                    else:
                        for k in range(e - pos):
                            self._a_name[self._a_nlen + k] = LOWER[p[pos + k]]
                        self._a_nlen += e - pos
                pos = e
                if pos >= n:
                    return pos
                self._aname_done()
                c = p[pos]
                if c == 0x3D:
                    self._ts = TS_BEFORE_VALUE
                    pos += 1
                elif c == 0x2F or c == 0x3E:
                    self._end_attr()
                    self._ts = TS_ATTRS
                else:
                    self._ts = TS_AFTER_NAME
            if self._ts == TS_AFTER_NAME:
                while pos < n and (CLS[p[pos]] & C_WS):
                    pos += 1
                if pos >= n:
                    return pos
                if p[pos] == 0x3D:
                    self._ts = TS_BEFORE_VALUE
                    pos += 1
                else:
                    self._end_attr()
                    self._ts = TS_ATTRS
            if self._ts == TS_BEFORE_VALUE:
                while pos < n and (CLS[p[pos]] & C_WS):
                    pos += 1
                if pos >= n:
                    return pos
                c = p[pos]
                if c == 0x22:
                    self._ts = TS_DQ
                    pos += 1
                elif c == 0x27:
                    self._ts = TS_SQ
                    pos += 1
                elif c == 0x3E:
                    self._end_attr()
                    self._ts = TS_ATTRS
                else:
                    self._ts = TS_UNQ
            if self._ts == TS_DQ or self._ts == TS_SQ:
                ts = self._ts
                q = <const unsigned char*>memchr(p + pos, 0x22 if ts == TS_DQ else 0x27, n - pos)
                if q == NULL:
                    self._add_val(p, pos, n)
                    return n
                e = q - p
                self._add_val(p, pos, e)
                self._end_attr()
                self._ts = TS_ATTRS
                pos = e + 1
            if self._ts == TS_UNQ:
                e = pos
                while e < n and not (CLS[p[e]] & (C_WS | C_GT)):
                    e += 1
                self._add_val(p, pos, e)
                pos = e
                if pos >= n:
                    return pos
                self._end_attr()
                self._ts = TS_ATTRS
        return pos

    # The scanner --------------------------------------------------------------------------

    cdef int _scan(self, bytes data, bint final, list out) except -1:
        cdef bytes buf = self._buf + data if self._buf else data
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(buf)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(buf)
        cdef Py_ssize_t pos = 0, keep = -1, i, end = 0
        cdef const unsigned char* q
        cdef unsigned char c
        cdef int state
        cdef bytes rn
        cdef bint foreign
        self._off = self._end - PyBytes_GET_SIZE(self._buf)
        self._end += PyBytes_GET_SIZE(data)
        self._cur = buf
        self._has_cr = memchr(p, 0x0D, n) != NULL
        self._buf = b""
        while pos < n:
            state = self._state
            if state == S_DATA:
                if self._fmode < CFS_DONE:
                    # A <frameset> could still take effect: all text matters (`_machine`).
                    while pos < n:
                        c = p[pos]
                        if c == 0x3C:
                            break
                        if (CLS[c] & C_WS) or c == 0:
                            pos += 1
                        else:
                            self._fs_text(out)
                            break
                    if pos >= n:
                        break
                    if p[pos] != 0x3C:
                        continue
                    if pos + 1 < n and p[pos + 1] == 0x3C:
                        self._fs_text(out)  # a '<' that starts nothing is text
                q = <const unsigned char*>memchr(p + pos, 0x3C, n - pos)
                if q == NULL:
                    pos = n
                    break
                pos = q - p
                # A run of '<': each but the last is text.
                while pos + 1 < n and p[pos + 1] == 0x3C:
                    pos += 1
                if pos + 1 >= n:
                    keep = pos
                    break
                c = p[pos + 1]
                if CLS[c] & C_ALPHA:
                    self._begin_tag(False, pos)
                    pos += 1
                elif c == 0x2F:
                    if pos + 2 >= n:
                        keep = pos
                        break
                    c = p[pos + 2]
                    if CLS[c] & C_ALPHA:
                        self._begin_tag(True, pos)
                        pos += 2
                    elif c == 0x3E:
                        pos += 3
                    else:
                        self._state = S_BOGUS
                        pos += 2
                elif c == 0x21:
                    foreign = PyList_GET_SIZE(self._foreign) > 0
                    rest = buf[pos + 2 : pos + 9]
                    if rest[:2] == b"--":
                        self._state = S_COMMENT_START
                        pos += 4
                    elif foreign and rest == b"[CDATA[":
                        self._state = S_CDATA
                        pos += 9
                        if self._fmode < CFS_DONE:
                            self._fs_text(out)
                    elif len(rest) < 7 and (
                        b"--".startswith(rest) or (foreign and b"[CDATA[".startswith(rest))
                    ):
                        keep = pos
                        break
                    else:
                        self._state = S_BOGUS
                        pos += 2
                elif c == 0x3F:
                    self._state = S_BOGUS
                    pos += 1
                else:
                    pos += 1
                    if self._fmode < CFS_DONE:
                        self._fs_text(out)
            elif state == S_TAG:
                pos = self._tag_stream(p, pos, n, out)
            elif state == S_COMMENT_START:
                c = p[pos]
                if c == 0x3E:
                    self._state = S_DATA
                    pos += 1
                elif c == 0x2D:
                    if pos + 1 >= n:
                        keep = pos
                        break
                    if p[pos + 1] == 0x3E:
                        self._state = S_DATA
                        pos += 2
                    else:
                        self._state = S_COMMENT
                else:
                    self._state = S_COMMENT
            elif state == S_COMMENT:
                i = _find_comment_end(p, pos, n, &end)
                if i < 0:
                    keep = max(pos, n - 3)
                    break
                self._state = S_DATA
                pos = end
            elif state == S_BOGUS:
                q = <const unsigned char*>memchr(p + pos, 0x3E, n - pos)
                if q == NULL:
                    pos = n
                    break
                self._state = S_DATA
                pos = q - p + 1
            elif state == S_CDATA:
                i = _find3(p, pos, n, 0x5D, 0x5D, 0x3E)
                if i < 0:
                    keep = max(pos, n - 2)
                    break
                self._state = S_DATA
                pos = i + 3
            elif state == S_RAWTEXT:
                rn = self._raw_names[self._rawidx]
                i = _find_end_tag(p, pos, n, <const unsigned char*>PyBytes_AS_STRING(rn),
                                  PyBytes_GET_SIZE(rn))
                if i < 0:
                    keep = max(pos, n - 10)
                    break
                self._state = S_DATA
                pos = i
            elif state == S_SCRIPT:
                i = _find_script_data(p, pos, n)
                if i < 0:
                    keep = max(pos, n - 8)
                    break
                if p[i + 1] == 0x21:
                    self._state = S_SCRIPT_ESC
                    pos = i + 2
                else:
                    self._state = S_DATA
                    pos = i
            elif state == S_SCRIPT_ESC:
                i = _find_script_esc(p, pos, n, True)
                if i < 0:
                    keep = max(pos, n - 8)
                    break
                if p[i] == 0x2D:
                    self._state = S_SCRIPT
                    pos = i + 3
                elif p[i + 1] == 0x2F:
                    self._state = S_DATA
                    pos = i
                else:
                    self._state = S_SCRIPT_DESC
                    pos = i + 8
            elif state == S_SCRIPT_DESC:
                i = _find_script_esc(p, pos, n, False)
                if i < 0:
                    keep = max(pos, n - 8)
                    break
                if p[i] == 0x2D:
                    self._state = S_SCRIPT
                    pos = i + 3
                else:
                    self._state = S_SCRIPT_ESC
                    pos = i + 9
            else:  # S_PLAINTEXT, S_DEAD
                pos = n
        if not final:
            # The buffer is let go: count it (the kept tail is scanned again), first finding
            # where a tag that goes on in the next chunk began.
            if self._state == S_TAG and self._t_at >= 0:
                self._locate()
            self._advance(p, keep if keep >= 0 else n)
        self._cur = b""
        if keep >= 0 and not final:
            self._buf = buf[keep:]
        return 0


def unescape(bytes value):
    """The character references of an ASCII attribute value, decoded (for the tests)."""
    return _unescape_ascii(<const unsigned char*>PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))


def resolve(str base, str raw):
    """Resolve ``raw`` against ``base`` as the extractor does (C fast path, then
    `_resolve.Resolver`): for the differential tests."""
    cdef _FastResolver fr = _FastResolver(_ResolverType(base))
    return fr.resolve(raw)


def resolve_all(str base, raws):
    """`resolve` for many values against one base (one resolver, as in a document)."""
    cdef _FastResolver fr = _FastResolver(_ResolverType(base))
    return [fr.resolve(r) for r in raws]


def memchr_count(bytes data, int byte=0x3C):
    """How many times ``byte`` occurs in ``data``, by a plain ``memchr`` loop: the physical
    floor the benchmark compares the extractor with (one pass, nothing else done)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data), pos = 0, count = 0
    cdef const unsigned char* q
    with nogil:
        while pos < n:
            q = <const unsigned char*>memchr(p + pos, byte, n - pos)
            if q == NULL:
                break
            count += 1
            pos = q - p + 1
    return count
