"""The HTTP exchange: one request in, one response with its body stream out.

A request's way down, once: :mod:`~crawler.http.client` (the Fetcher: retries, the observer)
-> :mod:`~crawler.http.prepare` (headers, auth, proxy, cookies: which transport, what it sends)
-> :mod:`~crawler.http.plain` (our keep-alive :mod:`~crawler.http.pool` of
:mod:`~crawler.http.http1` connections) or :mod:`~crawler.http.aio` (an aiohttp
:mod:`~crawler.http.session`, the WARC tap :mod:`~crawler.http.archive`) -> the caller's
consumer. Below them: :mod:`~crawler.http.response`, :mod:`~crawler.http.errors`,
:mod:`~crawler.http.options`, :mod:`~crawler.http.decode`, and the policies
:mod:`~crawler.http.auth`, :mod:`~crawler.http.proxy`, :mod:`~crawler.http.cookies`,
:mod:`~crawler.http.tls`.

May import: ``crawler.config`` and the package root's helpers; never the crawl core, the
state, the outputs or the commands (tests/test_layers.py).
"""
