"""crawler.fingerprint: stable across processes and runs, keyed, never 0."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawler.fingerprint import KEY_BYTES, Fingerprinter, fingerprint, new_key

URLS = [
    "https://example.com/",
    "https://example.com/a?b=c",
    "http://xn--bcher-kva.example/%C3%A9t%C3%A9",
    "https://example.com/" + "x" * 5000,
    "https://例え.jp/パス",
    "",
]


def test_new_key_is_random_and_sized() -> None:
    a, b = new_key(), new_key()
    assert len(a) == len(b) == KEY_BYTES
    assert a != b


def test_same_in_another_process_with_another_hash_seed() -> None:
    key = bytes(range(KEY_BYTES))
    here = [fingerprint(u, key) for u in URLS]
    code = (
        "import json, sys\n"
        "from crawler.fingerprint import Fingerprinter, fingerprint\n"
        "key = bytes(range(16)); urls = json.loads(sys.stdin.read())\n"
        "f = Fingerprinter(key)\n"
        "print(json.dumps([[fingerprint(u, key) for u in urls], [f(u) for u in urls],"
        " [hash(u) for u in urls]]))\n"
    )
    outs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(URLS),
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=60,
        )
        outs.append(json.loads(proc.stdout))
    for plain, bound, _ in outs:
        assert plain == here
        assert bound == here
    # the control: Python's own hash really did differ between the two processes
    assert outs[0][2] != outs[1][2]


def test_known_value() -> None:
    # pinned: a persistent state written by one version must dedup the same in the next
    key = bytes(range(KEY_BYTES))
    assert fingerprint("https://example.com/", key) == fingerprint("https://example.com/", key)
    expect = int.from_bytes(
        hashlib.blake2b(b"https://example.com/", digest_size=8, key=key).digest(), "little"
    )
    assert fingerprint("https://example.com/", key) == expect


def test_keyed_another_key_gives_other_values() -> None:
    k1, k2 = new_key(), new_key()
    a = [fingerprint(u, k1) for u in URLS]
    b = [fingerprint(u, k2) for u in URLS]
    assert all(x != y for x, y in zip(a, b, strict=True))


def test_no_collisions_in_a_hundred_thousand() -> None:
    f = Fingerprinter(new_key())
    fps = {f(f"https://example.com/p/{i}") for i in range(100_000)}
    assert len(fps) == 100_000


def test_repr_hides_the_key() -> None:
    key = b"\x01" * KEY_BYTES
    assert key.hex() not in repr(Fingerprinter(key))
    assert str(key) not in repr(Fingerprinter(key))


@given(st.text(), st.binary(min_size=0, max_size=64))
def test_property_in_range_deterministic_and_both_forms_agree(url: str, key: bytes) -> None:
    fp = fingerprint(url, key)
    assert 1 <= fp < 2**64
    assert fingerprint(url, key) == fp
    assert Fingerprinter(key)(url) == fp


def test_zero_digest_maps_to_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0 marks an empty slot: the one digest in 2**64 that is 0 must come out as 1
    class Zero:
        def __init__(self, *a: object, **k: object) -> None:
            pass

        def digest(self) -> bytes:
            return bytes(8)

        def copy(self) -> Zero:
            return self

        def update(self, data: bytes) -> None:
            pass

    monkeypatch.setattr(hashlib, "blake2b", Zero)
    assert fingerprint("x", b"k") == 1
    assert Fingerprinter(b"k")("x") == 1
