"""The HTTP exchange: one request in, one response with its body stream out.

May import: ``crawler.config`` and the package root's helpers; never the crawl core, the
state, the outputs or the commands (tests/test_layers.py).
"""
