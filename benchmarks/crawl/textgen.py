"""Seeded filler text for the link-dense and small-page benchmark sites (no corpus needed).

A fixed vocabulary of pronounceable pseudo-words (the same on every machine: it is built
from a fixed seed, not from the page seed) and a few helpers that draw sentences and
paragraphs from it with a caller's ``random.Random``. Plain ASCII, nothing that needs
escaping in HTML, no URLs: only the links the generators place are links.
"""

from __future__ import annotations

import random
from functools import lru_cache

_ONSETS = "b c d f g h j k l m n p r s t v w z br cl dr fl gr pl pr st tr sh ch th".split()
_VOWELS = "a e i o u ai ea ou io".split()
_CODAS = ["", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck"]


@lru_cache(maxsize=1)
def vocabulary() -> tuple[str, ...]:
    """2,000 distinct pseudo-words of 1-4 syllables (deterministic)."""
    rng = random.Random(20_261_201)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < 2000:
        n = rng.choice((1, 2, 2, 2, 3, 3, 4))
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(n))
        w += rng.choice(_CODAS)
        if 2 <= len(w) <= 14 and w not in seen:
            seen.add(w)
            words.append(w)
    return tuple(words)


def words(rng: random.Random, k: int) -> list[str]:
    """``k`` words, weighted towards the front of the vocabulary (a Zipf-like mix)."""
    vocab = vocabulary()
    top = len(vocab) - 1
    # min of two uniforms: small indexes are drawn more often, as common words are.
    return [vocab[min(int(rng.random() * top), int(rng.random() * top))] for _ in range(k)]


def phrase(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(words(rng, rng.randint(lo, hi)))


def sentence(rng: random.Random) -> str:
    w = words(rng, rng.randint(6, 18))
    w[0] = w[0].capitalize()
    if len(w) > 8 and rng.random() < 0.4:
        w[len(w) // 2] += ","
    return " ".join(w) + "."


def paragraph(rng: random.Random, size: int) -> str:
    """Sentences until about ``size`` characters."""
    out: list[str] = []
    n = 0
    while n < size:
        s = sentence(rng)
        out.append(s)
        n += len(s) + 1
    return " ".join(out)
