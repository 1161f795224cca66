"""The commands: ``crawler crawl|check|status|extract``, one module each, and their options.

The top of the house: may import every other package (tests/test_layers.py).
"""
