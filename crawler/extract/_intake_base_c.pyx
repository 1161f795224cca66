# cython: language_level=3
"""The base class of a compiled link intake, as the compiled extractor sees it.

``LinkExtractor(..., intake=)`` (compiled) hands each link of the page to an ``IntakeBase``:
``resolved`` with the bytes of a URL its fast path resolved, ``take_link`` with a Link a slow
path made; the intake appends its items to ``out``. ``crawler.urls._intake_c.Intake`` is the
implementation (a subclass): the extractor calls it through this class's C method table, so
that extraction depends on nothing above it and the call costs what a call to the subclass
did. This base alone takes no link (there is no pure-Python twin: the pure extractor calls a
pure intake's methods by name).
"""


cdef class IntakeBase:
    cdef int resolved(self, const unsigned char* url, Py_ssize_t n, bint nofollow, list out) except -1:
        raise NotImplementedError("IntakeBase.resolved: a subclass takes the links")

    cdef int take_link(self, object link, list out) except -1:
        raise NotImplementedError("IntakeBase.take_link: a subclass takes the links")
