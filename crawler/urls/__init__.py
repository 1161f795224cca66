"""From a link to a URL the crawl may not know yet: URL rules, fingerprints, seen sets, the intake.

May import: ``crawler.extract`` and the package root's helpers (tests/test_layers.py).
"""
