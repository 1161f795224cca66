"""What a crawl writes: result sinks, sitemaps, WARC, progress lines, Prometheus metrics.

May import: extract, urls, config, http; never the crawl core (but for types), the state or
the commands (tests/test_layers.py).
"""
