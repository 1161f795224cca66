"""The crawl core: the engine (lifecycle, dispatcher, ledger), the page job, admission, robots.txt,
and the crawl's side of ``--render`` (which pages, their rendered links, the browser's gate).

May import every package below it (extract, urls, config, http, state, output, render); never
the commands or the checker (tests/test_layers.py).
"""
