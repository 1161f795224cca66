"""MemoryFrontier (breadth-first, per-origin round-robin, politeness); the seen set is tested
in tests/test_seen.py."""

from __future__ import annotations

import random
import tracemalloc

from crawler.state.frontier import MemoryFrontier, Request


def req(url: str, depth: int = 0, origin: str | None = None) -> Request:
    return Request(url, depth, None, origin or url.split("/", 3)[0] + "//" + url.split("/", 3)[2])


def drain(f: MemoryFrontier, now: float = 0.0) -> list[str]:
    out = []
    while (r := f.pop(now)) is not None:
        out.append(r.url)
        f.release(r.origin, now)
    return out


def test_breadth_first_within_a_host() -> None:
    f = MemoryFrontier(per_host=100)
    f.push(req("http://a/d2", 2))
    f.push(req("http://a/d1", 1))
    f.push(req("http://a/d0", 0))
    f.push(req("http://a/d1b", 1))
    assert len(f) == 4
    assert drain(f) == ["http://a/d0", "http://a/d1", "http://a/d1b", "http://a/d2"]
    assert len(f) == 0


def test_hosts_served_round_robin() -> None:
    f = MemoryFrontier(per_host=100)
    for i in range(3):
        f.push(req(f"http://a/{i}"))
    for i in range(3):
        f.push(req(f"http://b/{i}"))
    f.push(req("http://c/0"))
    assert drain(f) == [
        "http://a/0",
        "http://b/0",
        "http://c/0",
        "http://a/1",
        "http://b/1",
        "http://a/2",
        "http://b/2",
    ]


def test_per_host_limit_does_not_block_other_hosts() -> None:
    f = MemoryFrontier(per_host=2)
    for i in range(5):
        f.push(req(f"http://slow/{i}"))
    f.push(req("http://fast/0"))
    f.push(req("http://fast/1"))
    got = [f.pop(0.0) for _ in range(5)]
    urls = [r.url for r in got if r is not None]
    # slow host gets 2 in flight, fast host 2: then nothing until a release
    assert sorted(urls) == ["http://fast/0", "http://fast/1", "http://slow/0", "http://slow/1"]
    assert got[4] is None
    assert f.active("http://slow") == 2
    f.release("http://slow", 0.0)
    nxt = f.pop(0.0)
    assert nxt is not None and nxt.url == "http://slow/2"


def test_delay_between_requests_to_a_host() -> None:
    f = MemoryFrontier(per_host=4, delay=0.0)
    f.set_delay("http://a", 2.0)
    for i in range(3):
        f.push(req(f"http://a/{i}"))
    f.push(req("http://b/0"))
    first = f.pop(10.0)
    assert first is not None and first.url == "http://a/0"
    second = f.pop(10.0)
    assert second is not None and second.url == "http://b/0"
    assert f.pop(10.5) is None  # a is waiting for its delay, b is empty
    assert f.wait_time(10.5) == 1.5
    third = f.pop(12.0)
    assert third is not None and third.url == "http://a/1"
    assert f.pop(13.9) is None
    fourth = f.pop(14.0)
    assert fourth is not None and fourth.url == "http://a/2"


def test_release_reschedules_host_with_work() -> None:
    f = MemoryFrontier(per_host=1)
    f.push(req("http://a/0"))
    f.push(req("http://a/1"))
    r0 = f.pop(0.0)
    assert r0 is not None and f.pop(0.0) is None
    f.release("http://a", 0.0)
    r1 = f.pop(0.0)
    assert r1 is not None and r1.url == "http://a/1"


def test_random_workload_hands_out_everything_once() -> None:
    rng = random.Random(7)
    f = MemoryFrontier(per_host=3)
    pushed = set()
    for i in range(2000):
        url = f"http://h{rng.randrange(20)}/{i}"
        pushed.add(url)
        f.push(req(url, rng.randrange(5)))
    got: list[str] = []
    inflight: list[Request] = []
    while len(f) or inflight:
        r = f.pop(0.0)
        if r is not None:
            got.append(r.url)
            inflight.append(r)
            assert f.active(r.origin) <= 3
        if r is None or rng.random() < 0.5:
            if inflight:
                done = inflight.pop(rng.randrange(len(inflight)))
                f.release(done.origin, 0.0)
    assert sorted(got) == sorted(pushed)


def test_origins_with_a_delay_are_forgotten_once_it_has_passed() -> None:
    # A wide crawl with a delay on every origin (robots.txt Crawl-delay, --delay): the table
    # holds the origins with work or whose delay still runs, not every origin ever met.
    f = MemoryFrontier(per_host=2, delay=0.5)
    now = 0.0
    for i in range(20_000):
        origin = f"http://o{i}.test"
        f.set_delay(origin, 1.0)
        f.push(req(origin + "/"))
        r = f.pop(now)
        assert r is not None and r.origin == origin
        f.release(origin, now)
        now += 0.001  # 1,000 origins a second: about a delay's worth (1 s) are held
        assert len(f._hosts) <= 1_100
    assert f.pop(now + 5) is None
    assert len(f._hosts) == 0 and len(f._retired) == 0


def test_a_forgotten_origin_keeps_its_politeness_until_then() -> None:
    f = MemoryFrontier(per_host=1)
    f.set_delay("http://a", 2.0)
    f.push(req("http://a/0"))
    assert f.pop(10.0) is not None
    f.release("http://a", 10.5)
    assert f.knows("http://a")  # idle, but its next request may not come before 12.0
    f.push(req("http://a/1"))
    assert f.pop(11.9) is None
    r = f.pop(12.0)
    assert r is not None and r.url == "http://a/1"
    f.release("http://a", 12.1)
    assert f.pop(14.1) is None  # the sweep forgets it once its delay has passed
    assert not f.knows("http://a")
    f.push(req("http://a/2"))  # back with the default delay: the caller sets its own again
    r = f.pop(14.2)
    assert r is not None and r.url == "http://a/2"


def test_memory_follows_the_depths_queued_not_the_depth_reached() -> None:
    # A chain of origins thousands of hops deep (--max-depth 0): each new origin's queue
    # must not hold one (empty) FIFO per depth above it.
    f = MemoryFrontier(per_host=1)
    tracemalloc.start()
    for i in range(50):
        f.push(req(f"http://o{i}.test/", depth=5_000 + i))
        f.push(req(f"http://o{i}.test/b", depth=5_001 + i))
    traced = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert traced < 1 << 20, traced  # was 50 x 5,000 deques: ~150 MB
    got = drain(f)
    assert len(got) == 100
    assert got.index("http://o3.test/") < got.index("http://o3.test/b")
    # breadth-first within an origin still holds across depths pushed out of order
    f.push(req("http://a/d9", 9))
    f.push(req("http://a/d2", 2))
    f.push(req("http://a/d5", 5))
    f.push(req("http://a/d2b", 2))
    assert drain(f) == ["http://a/d2", "http://a/d2b", "http://a/d5", "http://a/d9"]
