# The compiled extractor's side of the link intake: what `_extract_c.LinkExtractor(intake=...)`
# calls, from inside its buffers, for every link of the page. The intake itself (canonical
# form, recent table, fingerprint, seen probe) is `crawler.urls._intake_c.Intake`, a subclass:
# the extractor knows only this base, so that extraction imports nothing above it
# (tests/test_layers.py) and the urls layer plugs in from above.
cdef class IntakeBase:
    cdef readonly bint all_links
    cdef public Py_ssize_t found
    # links past it (``found`` > ``limit``) are counted and not taken (a page's cap)
    cdef public Py_ssize_t limit

    cdef int resolved(self, const unsigned char* url, Py_ssize_t n, bint nofollow, list out) except -1
    cdef int take_link(self, object link, list out) except -1
