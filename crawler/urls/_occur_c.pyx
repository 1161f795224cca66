# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled twin of `crawler.urls.occurrences.Occurrences.take_py` (read that module first).

A page's links come as the compiled extractor keeps them (``LinkRecord.compact``: the bytes
of each fast-path link's URL and raw value, its tag and attribute indexes, nofollow, line
and column; a Link for what a slow path made), and go into the ``Occurrences`` columns in C:
a URL already a target's key is found in a hash table of their bytes (`_tables_c._Ids`: a
hit is compared byte for byte with the interned string, so a collision costs a dict lookup,
never a wrong id), a raw value in `_tables_c.Texts` (the raw values' interner: their bytes
in one buffer, found the same way, no object each), the
tag/attribute pair by its indexes in a per-page cache. A link makes a Python object only
when its URL is new to the run (its ``str``, handed to the dict or to ``target_of``), so a
page of known links costs none. Any other sequence of Links is read tuple by tuple (the
same results, the strings already made). The targets' hash table lives in
``Occurrences._c`` (a ``_Tables``, for one targets ``Interner``); the readers of the
columns are in ``_occur_read_c.pyx``.
"""

from cpython cimport array
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memchr, memcpy

from array import array as _array

from crawler.extract import LinkRecord as _LinkRecord
from crawler.urls._tables_c cimport Texts, _hash, _Ids

cdef extern from "Python.h":
    ctypedef struct PyObject
    PyObject* PyDict_GetItemWithError(object, object) except? NULL
    object PyUnicode_DecodeASCII(const char*, Py_ssize_t, const char*)

# (k, j) -> tag/attr id, a page's few pairs (a linear search; past it, the dict)
DEF TAG_CACHE = 32
# a page's links are read in blocks of this many: each block's hashes first, the tables'
# slots fetched ahead, then its probes (`take`)
DEF BLOCK = 16
# a column's largest value, a C constant: a bare 0xFFFFFFFF literal is a Python int to
# Cython (past a C int), and a comparison with it made a Python object a link
cdef extern from *:
    """
    #define CRAWLER_U32_MAX ((int64_t)0xFFFFFFFFLL)
    """
    const int64_t U32_MAX "CRAWLER_U32_MAX"
_CODES = "BHI"


cdef class _Tables:
    """The compiled twin's state in an ``Occurrences``: the hash tables of known target keys
    (for one targets ``Interner``) and raw values, and a page's columns before they fit."""

    cdef object targets
    cdef _Ids tids
    cdef int64_t* tid
    cdef int64_t* tag
    cdef int64_t* raw
    cdef int64_t* line
    cdef int64_t* col
    cdef unsigned char* nf
    cdef Py_ssize_t cap

    def __cinit__(self, targets):
        self.targets = targets
        self.tids = _Ids()

    def __dealloc__(self):
        free(self.tid)
        free(self.tag)
        free(self.raw)
        free(self.line)
        free(self.col)
        free(self.nf)

    cdef int room(self, Py_ssize_t n) except -1:
        if n <= self.cap:
            return 0
        n = max(n, 2 * self.cap, 256)
        self.tid = <int64_t*>_grow(self.tid, n * sizeof(int64_t))
        self.tag = <int64_t*>_grow(self.tag, n * sizeof(int64_t))
        self.raw = <int64_t*>_grow(self.raw, n * sizeof(int64_t))
        self.line = <int64_t*>_grow(self.line, n * sizeof(int64_t))
        self.col = <int64_t*>_grow(self.col, n * sizeof(int64_t))
        self.nf = <unsigned char*>_grow(self.nf, n)
        self.cap = n
        return 0


cdef void* _grow(void* p, size_t n) except NULL:
    cdef void* q = realloc(p, n)
    if q == NULL:
        raise MemoryError()
    return q


cdef int64_t _sat(object v) except? -1:
    """A line or column as int64 (one past it saturates: it is clamped in the column)."""
    try:
        return <int64_t>v
    except OverflowError:
        return INT64_MAX if v > 0 else INT64_MIN


cdef Py_ssize_t _tag_id(occ, tag, attr) except -1:
    """The tag/attr id of (tag, attr) in ``occ`` (``Occurrences.add_page``'s interning)."""
    pair = (tag, attr)
    cdef dict tag_ids = occ._tag_ids
    found = tag_ids.get(pair)
    if found is None:
        found = tag_ids[pair] = occ.tags.id(f"{tag}\0{attr}")
    return found


def take(occ, Py_ssize_t page, links, targets, target_of, bint check_frags):
    """`Occurrences.take` (see `crawler.urls.occurrences`): the same columns, ids and calls
    of ``target_of``; how many links were read."""
    cdef _Tables tb = occ._c
    if tb is None or tb.targets is not targets:
        tb = occ._c = _Tables(targets)
    cdef dict table = targets.table
    cdef list strings = targets.strings
    raws = occ.raws
    cdef Texts texts = raws if type(raws) is Texts else None
    cdef Py_ssize_t n = 0, kept = 0, i, count, k, tid, rid, tagid, nt = 0, c, b0, b1, j
    cdef int64_t e[8]
    cdef const unsigned char* text
    cdef const unsigned char* up
    cdef const unsigned char* rp
    cdef const char* ent_bytes
    cdef PyObject* v
    cdef uint64_t h
    cdef uint64_t hu[BLOCK]  # a block's URL hashes (those looked up by their bytes)
    cdef uint64_t hr[BLOCK]  # and raw value hashes
    cdef bint direct[BLOCK]  # the URL is looked up by its bytes (no "%" nor "#")
    cdef int tk[TAG_CACHE]
    cdef int tj[TAG_CACHE]
    cdef Py_ssize_t tv[TAG_CACHE]
    cdef bytes ents
    if _LinkRecord is not None and type(links) is _LinkRecord:
        text_b, ents, objs, tagstrs, astrs = links.compact()
        text = <const unsigned char*>PyBytes_AS_STRING(text_b)
        ent_bytes = PyBytes_AS_STRING(ents)
        count = PyBytes_GET_SIZE(ents) // (8 * sizeof(int64_t))
        tb.room(count)
        b0 = 0
        while b0 < count:
            b1 = min(b0 + BLOCK, count)
            # The block's hashes first, each table's first slot fetched ahead: the tables
            # are past the nearest caches, and so a block's probes wait on memory together
            # rather than one after the other (the probes, in order, are as before).
            for i in range(b0, b1):
                memcpy(e, ent_bytes + i * 8 * sizeof(int64_t), 8 * sizeof(int64_t))
                if e[1] < 0:
                    continue
                j = i - b0
                up = text + e[0]
                rp = up + e[1]
                direct[j] = (memchr(up, 0x25, e[1]) == NULL and memchr(up, 0x23, e[1]) == NULL
                             and not (check_frags and memchr(rp, 0x23, e[2]) != NULL))
                if direct[j]:
                    hu[j] = _hash(up, e[1])
                    tb.tids.ahead(hu[j])
                if texts is not None:
                    hr[j] = _hash(rp, e[2])
                    texts.ahead(hr[j])
            for i in range(b0, b1):
                memcpy(e, ent_bytes + i * 8 * sizeof(int64_t), 8 * sizeof(int64_t))
                n += 1
                if e[1] < 0:  # a Link a slow path made
                    kept += _one(occ, tb, kept, <tuple>objs[e[0]], table, raws, target_of,
                                 check_frags)
                    continue
                j = i - b0
                up = text + e[0]
                rp = up + e[1]
                url = raw = None
                tid = -1
                if direct[j]:
                    h = hu[j]
                    tid = tb.tids.find(h, up, e[1], strings)
                    if tid < 0:
                        url = PyUnicode_DecodeASCII(<const char*>up, e[1], NULL)
                        v = PyDict_GetItemWithError(table, url)
                        if v != NULL:
                            tid = <object>v
                            tb.tids.put(h, tid, strings)
                if tid < 0:
                    if url is None:
                        url = PyUnicode_DecodeASCII(<const char*>up, e[1], NULL)
                    raw = PyUnicode_DecodeASCII(<const char*>rp, e[2], NULL)
                    tid = target_of(url, raw)
                    if tid < 0:
                        continue
                if texts is not None:  # no object made for the raw value
                    rid = texts.id_of_hashed(hr[j], <const char*>rp, e[2])
                else:
                    if raw is None:
                        raw = PyUnicode_DecodeASCII(<const char*>rp, e[2], NULL)
                    rid = raws.id(raw)
                tagid = -1
                for c in range(nt):
                    if tk[c] == e[3] and tj[c] == e[4]:
                        tagid = tv[c]
                        break
                if tagid < 0:
                    tagid = _tag_id(occ, tagstrs[e[3]], astrs[e[4]])
                    if nt < TAG_CACHE:
                        tk[nt] = <int>e[3]
                        tj[nt] = <int>e[4]
                        tv[nt] = tagid
                        nt += 1
                tb.tid[kept] = tid
                tb.raw[kept] = rid
                tb.tag[kept] = tagid
                tb.line[kept] = e[6]
                tb.col[kept] = e[7]
                tb.nf[kept] = e[5] != 0
                kept += 1
            b0 = b1
    else:
        for link in links:
            n += 1
            tb.room(kept + 1)
            kept += _one(occ, tb, kept, <tuple>link, table, raws, target_of, check_frags)
    _commit(occ, tb, page, kept)
    return n


cdef Py_ssize_t _one(occ, _Tables tb, Py_ssize_t at, tuple link, dict table, raws, target_of,
                     bint check_frags) except -1:
    """A Link (its strings made already) into the page's row ``at``: 1, or 0 (no target)."""
    cdef PyObject* v
    url = link[0]
    raw = link[1]
    tid = None
    if not (url is None or "%" in url or "#" in url or (check_frags and "#" in raw)):
        v = PyDict_GetItemWithError(table, url)
        if v != NULL:
            tid = <object>v
    if tid is None:
        tid = target_of(url, raw)
        if tid < 0:
            return 0
    tb.tid[at] = tid
    tb.raw[at] = raws.id(raw)
    tb.tag[at] = _tag_id(occ, link[2], link[3])
    tb.nf[at] = 1 if link[4] else 0
    tb.line[at] = _sat(link[5])
    tb.col[at] = _sat(link[6])
    return 1


cdef int _level(array.array column) except -1:
    return _CODES.index(chr(column.ob_descr.typecode))


cdef array.array _fit(occ, str name, const int64_t* src, Py_ssize_t n):
    """The column ``name`` with room for ``n`` more, widened first to the narrowest width
    the values need (``Occurrences._fit``'s rule), the values written at its end."""
    cdef array.array col = getattr(occ, name)
    cdef int have = _level(col), need = 0
    cdef Py_ssize_t i, at
    cdef bint clamp = False
    cdef int64_t x
    cdef uint64_t top = 0
    for i in range(n):
        x = src[i]
        if x < 0 or x > U32_MAX:
            clamp = True
        elif <uint64_t>x > top:
            top = <uint64_t>x
    if clamp or top > 0xFFFF:
        need = 2
    elif top > 0xFF:
        need = 1
    if need > have:
        col = _array(_CODES[need], col)
        setattr(occ, name, col)
        have = need
    at = len(col)
    array.resize_smart(col, at + n)
    for i in range(n):
        x = src[i]
        if x < 0:
            x = 0
        elif x > U32_MAX:
            x = U32_MAX
        if have == 0:
            col.data.as_uchars[at + i] = <unsigned char>x
        elif have == 1:
            col.data.as_ushorts[at + i] = <unsigned short>x
        else:
            col.data.as_uints[at + i] = <unsigned int>x
    return col


cdef int _push_wide(occ, str name, Py_ssize_t row, int64_t value) except -1:
    """(row, value) at the end of the side table of column ``name``."""
    cdef array.array wide_at = getattr(occ, name + "_wide_at")
    cdef array.array wide = getattr(occ, name + "_wide")
    cdef Py_ssize_t w = len(wide_at)
    array.resize_smart(wide_at, w + 1)
    array.resize_smart(wide, w + 1)
    wide_at.data.as_ulonglongs[w] = <unsigned long long>row
    wide.data.as_uints[w] = <unsigned int>value
    return 0


cdef inline int64_t _clamp(int64_t x) noexcept:
    return 0 if x < 0 else (U32_MAX if x > U32_MAX else x)


cdef int _positions(occ, const int64_t* lines, const int64_t* cols, Py_ssize_t n) except -1:
    """A page's ``n`` lines and columns delta-coded at the end of the line ("B") and column
    ("H") columns, those that do not fit in the side tables (``Occurrences._positions``'
    rule: the same columns and tables)."""
    cdef array.array lc = occ._line, cc = occ._col
    cdef Py_ssize_t i, la = len(lc), ca = len(cc), base = len(occ._target)
    cdef int64_t line, col, step, line_at, col_at
    line_at, col_at = occ._at
    array.resize_smart(lc, la + n)
    array.resize_smart(cc, ca + n)
    for i in range(n):
        line = _clamp(lines[i])
        col = _clamp(cols[i])
        step = line - line_at
        if 0 <= step < 0xFF:
            lc.data.as_uchars[la + i] = <unsigned char>step
        else:
            lc.data.as_uchars[la + i] = 0xFF
            _push_wide(occ, "_line", base + i, line)
        step = col - col_at if line == line_at else col
        if 0 <= step < 0xFFFF:
            cc.data.as_ushorts[ca + i] = <unsigned short>step
        else:
            cc.data.as_ushorts[ca + i] = 0xFFFF
            _push_wide(occ, "_col", base + i, col)
        line_at = line
        col_at = col
    occ._at = (line_at, col_at)
    return 0


cdef int _append(occ, str name, const void* src, Py_ssize_t n) except -1:
    """``n`` items of the column's own width from ``src`` at the end of column ``name``."""
    cdef array.array col = getattr(occ, name)
    cdef Py_ssize_t at = len(col), size = col.ob_descr.itemsize
    array.resize_smart(col, at + n)
    memcpy(col.data.as_chars + at * size, src, n * size)
    return 0


cdef int _commit(occ, _Tables tb, Py_ssize_t page, Py_ssize_t n) except -1:
    """The page's ``n`` rows into the columns (nothing when none, as ``add_page``)."""
    if n == 0:
        return 0
    run_page = occ._run_page
    if not len(run_page) or run_page[len(run_page) - 1] != page:
        run_page.append(page)
        occ._run_start.append(len(occ._target))
        occ._at = (0, 0)
    _positions(occ, tb.line, tb.col, n)
    _fit(occ, "_tagattr", tb.tag, n)
    _fit(occ, "_target", tb.tid, n)
    _fit(occ, "_raw", tb.raw, n)
    _append(occ, "_nofollow", tb.nf, n)
    return 0
