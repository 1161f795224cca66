"""When a rendered page counts as settled (crawler.render.settle), without a browser.

The rule's inputs are what the page's tracker answers to a poll and the renderer's own view of
the network; the tracker itself runs in a real Chromium in tests/test_render_browser.py.
"""

from __future__ import annotations

import pytest

from crawler.render.settle import TRACKER, TRACKER_KEY, PageState, next_look, settled_by

QUIET, IDLE, POLL = 0.1, 0.5, 0.05


def answer(**fields: object) -> dict[str, object]:
    """A tracker's answer (milliseconds, as the page gives them): done and quiet 0.2 s."""
    base: dict[str, object] = {
        "now": 1500.0,
        "tracked": True,
        "loaded": True,
        "timers": 0,
        "frames": 0,
        "intervals": 0,
        "requests": 0,
        "domQuiet": 200.0,
        "quiet": 200.0,
    }
    return {**base, **fields}


def test_the_tracked_rule_settles_a_page_whose_work_is_done_after_quiet() -> None:
    state = PageState.parse(answer())
    assert state == PageState(now=1.5, dom_quiet=0.2, tracked=True, loaded=True, quiet=0.2)
    assert settled_by(state, 0.2, quiet=QUIET, idle=IDLE) == "tracked"
    # the network moved too recently (a response just ended: its reader may run next)
    assert settled_by(state, 0.05, quiet=QUIET, idle=IDLE) is None
    # the DOM changed or a tracked callback ran within `quiet`
    assert settled_by(PageState.parse(answer(quiet=50)), 0.2, quiet=QUIET, idle=IDLE) is None


@pytest.mark.parametrize(
    "pending",
    [{"timers": 1}, {"frames": 1}, {"intervals": 1}, {"requests": 2}, {"loaded": False}],
)
def test_pending_work_holds_the_tracked_rule_but_not_the_idle_bound(
    pending: dict[str, object],
) -> None:
    state = PageState.parse(answer(**pending))
    assert settled_by(state, 0.3, quiet=QUIET, idle=IDLE) is None
    assert next_look(state, 0.3, quiet=QUIET, idle=IDLE, poll=POLL) == POLL
    # quiet for `idle` (network and DOM), pending work or not: settled as before the tracker
    calm = PageState.parse(answer(domQuiet=600, quiet=600, **pending))
    assert settled_by(calm, 0.6, quiet=QUIET, idle=IDLE) == "idle"


@pytest.mark.parametrize(
    "value",
    [
        None,
        "settled",
        {"now": 900, "tracked": False, "domQuiet": 600},  # the poll without a tracker
        answer(tracked="yes"),
        answer(timers=-1),
        answer(requests=0.5),
        answer(frames=True),
        answer(intervals=None),
    ],
)
def test_a_missing_or_tampered_tracker_leaves_the_idle_rule_only(value: object) -> None:
    state = PageState.parse(value)
    assert not state.tracked
    assert settled_by(state, 10.0, quiet=QUIET, idle=IDLE) in (None, "idle")
    done = PageState(now=state.now, dom_quiet=0.6)
    assert settled_by(done, 0.6, quiet=QUIET, idle=IDLE) == "idle"
    assert settled_by(done, 0.4, quiet=QUIET, idle=IDLE) is None  # network moved 0.4 s ago
    if isinstance(value, dict) and value.get("tracked") is False:
        assert state == PageState(now=0.9, dom_quiet=0.6)


def test_times_that_are_not_numbers_count_as_just_now() -> None:
    state = PageState.parse(answer(quiet="long", domQuiet=float("nan"), now=None))
    assert state.tracked and state.quiet == 0.0 and state.dom_quiet == 0.0 and state.now == 0.0
    assert settled_by(state, 5.0, quiet=QUIET, idle=IDLE) is None


def test_the_next_look_waits_out_the_quiet_time_left() -> None:
    nearly = PageState.parse(answer(quiet=30, domQuiet=30))
    assert next_look(nearly, 0.5, quiet=QUIET, idle=IDLE, poll=POLL) == pytest.approx(0.07)
    assert next_look(nearly, 0.01, quiet=QUIET, idle=IDLE, poll=POLL) == pytest.approx(0.09)
    almost = PageState.parse(answer(quiet=95, domQuiet=95))  # not sooner than half a poll
    assert next_look(almost, 0.5, quiet=QUIET, idle=IDLE, poll=POLL) == pytest.approx(POLL / 2)
    untracked = PageState(now=1.0, dom_quiet=0.1)
    assert next_look(untracked, 0.3, quiet=QUIET, idle=IDLE, poll=POLL) == pytest.approx(0.4)


def test_the_tracker_lives_under_its_key_and_keeps_the_mutation_clock_first() -> None:
    assert f'KEY = "{TRACKER_KEY}"' in TRACKER
    # the clock is set up before the tracker's try block: it stands if the tracker fails
    assert TRACKER.index("new MutationObserver") < TRACKER.index("try {")
