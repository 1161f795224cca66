# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The compiled readers of `crawler.urls.occurrences.Occurrences`' columns (read that module
first): the rows of wanted targets (`rows_of`, a report's places), and the audit's link
graph in one pass over the runs (`walk`: a stamp a target and a node per run, no set a
page) and breadth first (`depths`), the delta-coded lines and columns of some runs
(`decode`). Their pure-Python twins are ``Occurrences``' own ``rows_of`` fallback,
``walk_py``, ``depths_py`` and ``decode_py``: the same results."""

from cpython cimport array
from libc.stdint cimport int64_t, uint32_t
from libc.stdlib cimport calloc, free, malloc

from array import array as _array


cdef inline uint32_t _id(const char* p, bint wide, Py_ssize_t i) noexcept:
    """Item ``i`` of an id column ("H", or "I" once widened)."""
    return (<const uint32_t*>p)[i] if wide else (<const unsigned short*>p)[i]


cdef bint _wide(array.array column) except -1:
    cdef Py_ssize_t size = column.ob_descr.itemsize
    if size != 2 and size != 4:
        raise ValueError(f"an id column of {size}-byte items")
    return size == 4


def rows_of(occ, const unsigned char[:] wanted):
    """`Occurrences.rows_of`: the indexes of the occurrences whose target is wanted (a byte
    a target id; ids past ``wanted`` are not), in order, as an array("Q")."""
    cdef array.array target = occ._target
    cdef const char* tg = target.data.as_chars
    cdef bint wide = _wide(target)
    cdef Py_ssize_t n = len(target), size = wanted.shape[0], i, k = 0
    cdef uint32_t t
    out = _array("Q")
    cdef array.array rows = out
    for i in range(n):
        t = _id(tg, wide, i)
        if t < size and wanted[t]:
            k += 1
    array.resize(rows, k)
    k = 0
    for i in range(n):
        t = _id(tg, wide, i)
        if t < size and wanted[t]:
            rows.data.as_ulonglongs[k] = i
            k += 1
    return out


cdef Py_ssize_t _first_at(array.array at, Py_ssize_t row) noexcept:
    """The index of the first item of the ascending "Q" array ``at`` not below ``row``."""
    cdef Py_ssize_t lo = 0, hi = len(at), mid
    while lo < hi:
        mid = (lo + hi) // 2
        if <Py_ssize_t>at.data.as_ulonglongs[mid] < row:
            lo = mid + 1
        else:
            hi = mid
    return lo


def decode(occ, Py_ssize_t first, Py_ssize_t last):
    """`Occurrences.decode_py` in C: the lines and columns ("I" arrays) of the occurrences
    of runs ``first`` to ``last`` (excluded)."""
    cdef array.array starts = occ._run_start, lc = occ._line, cc = occ._col
    cdef array.array lwa = occ._line_wide_at, lw = occ._line_wide
    cdef array.array cwa = occ._col_wide_at, cw = occ._col_wide
    lines_out, cols_out = _array("I"), _array("I")
    cdef array.array lines = lines_out, cols = cols_out
    cdef Py_ssize_t n = len(occ._target), start, end, next_start, r, row, li, ci, k
    cdef int64_t line = 0, col = 0, new_line, step
    if first < 0 or last > len(starts):
        raise IndexError("runs out of range")
    if first >= last:
        return lines_out, cols_out
    if lc.ob_descr.itemsize != 1 or cc.ob_descr.itemsize != 2:
        raise ValueError("line and column columns of 1 and 2 bytes expected")
    start = <Py_ssize_t>starts.data.as_ulonglongs[first]
    end = _run_end(starts, last - 1, n)
    array.resize(lines, end - start)
    array.resize(cols, end - start)
    li = _first_at(lwa, start)
    ci = _first_at(cwa, start)
    r = first
    next_start = start
    for row in range(start, end):
        if row == next_start:
            line = col = 0
            next_start = _run_end(starts, r, n)
            r += 1
        step = lc.data.as_uchars[row]
        if step == 0xFF:
            new_line = lw.data.as_uints[li]
            li += 1
        else:
            new_line = line + step
        step = cc.data.as_ushorts[row]
        if step == 0xFFFF:
            col = cw.data.as_uints[ci]
            ci += 1
        elif new_line == line:
            col = col + step
        else:
            col = step
        line = new_line
        k = row - start
        lines.data.as_uints[k] = <unsigned int>line
        cols.data.as_uints[k] = <unsigned int>col
    return lines_out, cols_out


cdef inline Py_ssize_t _run_end(array.array run_start, Py_ssize_t r, Py_ssize_t n) noexcept:
    return <Py_ssize_t>run_start.data.as_ulonglongs[r + 1] if r + 1 < len(run_start) else n


def walk(occ, array.array node_of_tid, array.array node_of_page, bytearray linked,
         array.array outlinks, array.array inlinks, array.array followed):
    """`Occurrences.walk_py` in C: a pass over the links, a stamp a target and a node per
    run (no set a page); the same counts. ``outlinks``, ``inlinks``, ``followed``: "I"
    arrays, their last slot the count of no node (-1)."""
    cdef array.array target = occ._target, nofollow = occ._nofollow
    cdef array.array run_page = occ._run_page, run_start = occ._run_start
    cdef const char* tg = target.data.as_chars
    cdef bint wide = _wide(target)
    cdef const unsigned char* nf = nofollow.data.as_uchars
    cdef const int* node_t = node_of_tid.data.as_ints
    cdef const int* node_p = node_of_page.data.as_ints
    cdef unsigned int* outs = outlinks.data.as_uints
    cdef unsigned int* ins = inlinks.data.as_uints
    cdef unsigned int* fol = followed.data.as_uints
    cdef unsigned char* lk = linked
    cdef Py_ssize_t ntargets = len(node_of_tid), size = len(inlinks), n = len(target)
    cdef Py_ssize_t npages = len(node_of_page), r, i, end, nd, edges = 0, idx
    cdef uint32_t t, stamp, page
    cdef int src, node
    if (len(linked) < ntargets or len(outlinks) < size or len(followed) < size
            or size < 1 or len(nofollow) != n):
        raise ValueError("walk: arrays of the wrong sizes")
    cdef uint32_t* seen_t = <uint32_t*>calloc(max(ntargets, 1), sizeof(uint32_t))
    cdef uint32_t* seen_n = <uint32_t*>calloc(size, sizeof(uint32_t))
    cdef uint32_t* seen_f = <uint32_t*>calloc(size, sizeof(uint32_t))
    try:
        if seen_t == NULL or seen_n == NULL or seen_f == NULL:
            raise MemoryError()
        for r in range(len(run_page)):
            page = run_page.data.as_uints[r]
            if page >= npages:
                raise IndexError("walk: a page without its node")
            src = node_p[page]
            stamp = <uint32_t>(r + 1)
            nd = 0
            end = _run_end(run_start, r, n)
            for i in range(<Py_ssize_t>run_start.data.as_ulonglongs[r], end):
                t = _id(tg, wide, i)
                if t >= ntargets:
                    raise IndexError("walk: a target without its node")
                node = node_t[t]
                idx = node if node >= 0 else size - 1
                if seen_t[t] != stamp:
                    seen_t[t] = stamp
                    nd += 1
                    lk[t] = 1
                    if node != src and seen_n[idx] != stamp:
                        seen_n[idx] = stamp
                        ins[idx] += 1
                if nf[i] == 0 and node != src and seen_f[idx] != stamp:
                    seen_f[idx] = stamp
                    fol[idx] += 1
            edges += nd
            if src >= 0:
                outs[src] += <unsigned int>nd
    finally:
        free(seen_t)
        free(seen_n)
        free(seen_f)
    return edges


def depths(occ, array.array node_of_tid, array.array node_of_page, seeds, Py_ssize_t size):
    """`Occurrences.depths_py` in C: breadth first from the ``seeds`` nodes, a page's runs
    read again from the columns when it is reached; the same depths."""
    cdef array.array target = occ._target
    cdef array.array run_page = occ._run_page, run_start = occ._run_start
    cdef const char* tg = target.data.as_chars
    cdef bint wide = _wide(target)
    cdef const int* node_t = node_of_tid.data.as_ints
    cdef const int* node_p = node_of_page.data.as_ints
    cdef Py_ssize_t nruns = len(run_page), n = len(target), ntargets = len(node_of_tid)
    cdef Py_ssize_t npages = len(node_of_page), r, i, k, nlevel = 0, nbelow, d = 0
    cdef int node, src
    cdef int* swap
    cdef uint32_t page
    out = _array("i", [-1]) * (size + 1)
    cdef array.array depth_a = out
    cdef int* depth = depth_a.data.as_ints
    cdef int* first_run = <int*>malloc(max(size, 1) * sizeof(int))
    cdef int* next_run = <int*>malloc(max(nruns, 1) * sizeof(int))
    cdef int* level = <int*>malloc(max(size, 1) * sizeof(int))
    cdef int* below = <int*>malloc(max(size, 1) * sizeof(int))
    try:
        if first_run == NULL or next_run == NULL or level == NULL or below == NULL:
            raise MemoryError()
        for k in range(size):
            first_run[k] = -1
        for r in range(nruns):
            page = run_page.data.as_uints[r]
            if page >= npages:
                raise IndexError("depths: a page without its node")
            src = node_p[page]
            next_run[r] = -1
            if 0 <= src < size:
                next_run[r] = first_run[src]
                first_run[src] = <int>r
        for seed in seeds:
            k = seed
            if 0 <= k < size and depth[k] < 0:
                depth[k] = 0
                level[nlevel] = <int>k
                nlevel += 1
        while nlevel:
            d += 1
            nbelow = 0
            for k in range(nlevel):
                r = first_run[level[k]]
                while r >= 0:
                    for i in range(<Py_ssize_t>run_start.data.as_ulonglongs[r],
                                   _run_end(run_start, r, n)):
                        if _id(tg, wide, i) >= ntargets:
                            raise IndexError("depths: a target without its node")
                        node = node_t[_id(tg, wide, i)]
                        if 0 <= node < size and depth[node] < 0:
                            depth[node] = <int>d
                            below[nbelow] = node
                            nbelow += 1
                    r = next_run[r]
            swap = level
            level = below
            below = swap
            nlevel = nbelow
    finally:
        free(first_run)
        free(next_run)
        free(level)
        free(below)
    return out
