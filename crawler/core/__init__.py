"""The crawl core: the engine (lifecycle, dispatcher, ledger), the page job, admission, robots.txt.

May import every package below it (extract, urls, config, http, state, output); never the
commands or the checker (tests/test_layers.py).
"""
