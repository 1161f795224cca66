"""When a rendered page is done: the page's pending work, tracked in the page, and the rule.

Waiting for a generic "network and DOM quiet for ``idle`` (0.5 s)" costs every page that half
second after its last change. A page can be known to be done sooner: nothing it scheduled is
still to run. `TRACKER`, an init script that runs in every document before the page's own
scripts, keeps count of the page's pending asynchronous work:

* ``setTimeout`` callbacks not yet run (cleared ones removed), each with the time it is due;
* ``requestAnimationFrame`` callbacks requested outside a frame callback (one requested
  inside a frame callback is an animation loop, not work that ends: it does not count, and a
  one-off "next frame" of such a callback runs within the quiet time below anyway);
* ``fetch()`` calls, ``XMLHttpRequest`` sends and the reading of a response's body
  (``json()``, ``text()``, ...) until they settle: a promise's reactions run before the next
  task, so the page's code that uses the answer has run when the count drops; and
  ``<script src>`` elements inserted (a chunk loader's) until they loaded or failed;
* a ``setInterval``'s first run counts as a timer's; after it the interval counts only if a
  run changed the DOM (the page keeps changing, and ends as before): a harmless interval (a
  clock, a poll) must not hold the page;
* the DOM's last change (a ``MutationObserver`` on the document and on every shadow root,
  open or closed, as they are attached), and the last time a tracked callback ran.

`settled_by` is the rule, over what the poll returns (`PageState`) and the renderer's own view
of the network (requests in flight through its route and the gate):

* **tracked**: the load event has fired, no request is in flight (in the route, in the gate,
  or in the page), no tracked callback is pending (a timer counts only if it is due before
  the budget ends: its links could not come in time), and neither the DOM nor a tracked
  callback nor the network has moved for ``quiet`` (0.1 s). ``quiet`` covers what is not
  tracked: the hop from a page's request to the renderer's route (milliseconds over the
  DevTools pipe), a framework's render task posted after its data came (``postMessage``,
  ``MessageChannel``), a script inserted by a script (its insertion is a DOM change).
* **idle**, the rule from before, stays: no request in flight and neither network nor DOM
  moved for ``idle``. It is the only rule when the tracker is absent (its init script failed
  or the page removed it), and the bound when tracked work keeps coming: a page with a timer
  that re-arms itself (a carousel, a poll) settles as it did before instead of running to its
  budget. So no page waits longer than before; a page whose work is done waits ``quiet``.

Pure: the scripts are strings, the rule a function of numbers (tests/test_render_settle.py).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["POLL_STATE", "TRACKER", "TRACKER_KEY", "PageState", "next_look", "settled_by"]

#: The window property the tracker lives under (non-enumerable; a page may delete it).
TRACKER_KEY = "__crawlerSettle"

SETTLED_TRACKED = "tracked"
SETTLED_IDLE = "idle"

# The mutation clock comes first and stands alone (``__crawlerLastMutation``): if the tracker's
# set-up fails, the idle rule still sees the DOM. Then the tracker, all or nothing.
TRACKER = """
(() => {
  const W = window, KEY = "__KEY__";
  if (Object.prototype.hasOwnProperty.call(W, KEY)) return;
  const now = () => performance.now();
  W.__crawlerLastMutation = now();
  let lastActivity = now();
  const OPTIONS = {subtree: true, childList: true, attributes: true, characterData: true};
  let observer = null;
  const watch = (root) => observer.observe(root, OPTIONS);
  let added = () => {};
  const seen = (records) => {
    W.__crawlerLastMutation = now();
    for (const r of records) {
      for (const n of r.addedNodes) {
        if (n.shadowRoot) watch(n.shadowRoot);
        added(n);
      }
    }
  };
  observer = new MutationObserver(seen);
  watch(document);
  try {
    const timers = new Map();  // setTimeout id -> when it is due
    const frames = new Set();  // requestAnimationFrame ids asked outside a frame callback
    const live = new Set();    // setInterval ids whose callback changed the DOM
    let requests = 0, inFrame = false;
    const ran = () => { lastActivity = now(); };
    const track = (promise) => {
      requests++;
      const done = () => { requests--; ran(); };
      promise.then(done, done);  // before the page's own reactions: no task in between
      return promise;
    };
    // A script element with a src, inserted (by the parser or a script): pending until it
    // loaded or failed, so that the hop from its request to the renderer's route is covered.
    const scripts = new WeakSet();
    added = (n) => {
      if (n.nodeName !== "SCRIPT" || !n.src || scripts.has(n)) return;
      scripts.add(n);
      requests++;
      let open = true;
      const end = () => { if (open) { open = false; requests--; ran(); } };
      n.addEventListener("load", end);
      n.addEventListener("error", end);
    };
    const attach = Element.prototype.attachShadow;
    Element.prototype.attachShadow = function (init) {
      const root = attach.call(this, init);
      watch(root);
      W.__crawlerLastMutation = now();
      return root;
    };
    const setT = W.setTimeout, clearT = W.clearTimeout;
    const setI = W.setInterval, clearI = W.clearInterval;
    W.setTimeout = function (handler, delay, ...args) {
      if (typeof handler !== "function") return setT.call(W, handler, delay, ...args);
      let id;
      id = setT.call(W, function (...a) {
        timers.delete(id);
        ran();
        try { return handler.apply(this, a); } finally { ran(); }
      }, delay, ...args);
      timers.set(id, now() + Math.max(0, Number(delay) || 0));
      return id;
    };
    W.setInterval = function (handler, delay, ...args) {
      if (typeof handler !== "function") return setI.call(W, handler, delay, ...args);
      let id;
      id = setI.call(W, function (...a) {
        const first = timers.delete(id);
        if (first) ran();
        try { return handler.apply(this, a); } finally {
          const records = observer.takeRecords();
          if (records.length) { live.add(id); seen(records); }
          if (first) ran();
        }
      }, delay, ...args);
      timers.set(id, now() + Math.max(0, Number(delay) || 0));  // its first run, as a timer's
      return id;
    };
    const forget = (id) => { timers.delete(id); live.delete(id); };  // (one id space for both)
    W.clearTimeout = function (id) { forget(id); return clearT.call(W, id); };
    W.clearInterval = function (id) { forget(id); return clearI.call(W, id); };
    const raf = W.requestAnimationFrame, caf = W.cancelAnimationFrame;
    W.requestAnimationFrame = function (callback) {
      if (typeof callback !== "function") return raf.call(W, callback);
      const counted = !inFrame;  // asked inside a frame callback: a loop, not counted
      let id;
      id = raf.call(W, function (t) {
        frames.delete(id);
        const outer = inFrame;
        inFrame = true;
        if (counted) ran();
        try { return callback.call(this, t); } finally { inFrame = outer; if (counted) ran(); }
      });
      if (counted) frames.add(id);
      return id;
    };
    W.cancelAnimationFrame = function (id) { frames.delete(id); return caf.call(W, id); };
    const fetch = W.fetch;
    if (typeof fetch === "function") {
      W.fetch = function (...a) { return track(fetch.apply(W, a)); };
    }
    for (const name of ["json", "text", "arrayBuffer", "blob", "formData", "bytes"]) {
      const read = Response.prototype[name];
      if (typeof read !== "function") continue;
      Response.prototype[name] = function (...a) { return track(read.apply(this, a)); };
    }
    const send = XMLHttpRequest.prototype.send;
    XMLHttpRequest.prototype.send = function (...a) {
      requests++;
      let open = true;
      const end = () => { if (open) { open = false; requests--; ran(); } };
      this.addEventListener("loadend", end);
      try { return send.apply(this, a); } catch (e) { end(); throw e; }
    };
    const state = (left) => {
      const t = now(), horizon = t + left;
      let due = 0;
      for (const when of timers.values()) if (when <= horizon) due++;
      const changed = W.__crawlerLastMutation || 0;
      return {
        now: t, tracked: true, loaded: document.readyState === "complete",
        timers: due, frames: frames.size, intervals: live.size, requests,
        domQuiet: t - changed, quiet: t - Math.max(changed, lastActivity),
      };
    };
    Object.defineProperty(W, KEY, {value: {state}, configurable: true, enumerable: false});
  } catch (e) {
    // no tracker: the renderer settles by the idle rule
  }
})();
""".replace("__KEY__", TRACKER_KEY)

# The poll: ``left`` is what remains of the budget in milliseconds. Without the tracker it
# still gives the page's clock and the DOM's quiet (the mutation clock).
POLL_STATE = """
(left) => {
  const tracker = window.__KEY__;
  if (tracker && typeof tracker.state === "function") {
    try { return tracker.state(left); } catch (e) { /* the idle rule */ }
  }
  const now = performance.now();
  return {now, tracked: false, domQuiet: now - (window.__crawlerLastMutation || 0)};
}
""".replace("__KEY__", TRACKER_KEY)


@dataclass(frozen=True, slots=True)
class PageState:
    """What the poll found, in seconds (times on the page's clock, from its navigation).

    ``tracked`` False: no tracker answered; only ``now`` and ``dom_quiet`` mean something.
    """

    now: float
    dom_quiet: float
    tracked: bool = False
    loaded: bool = False
    pending: int = 0  # due timers, frames, DOM-changing intervals, requests of the page
    quiet: float = 0.0  # since the DOM changed or a tracked callback ran

    @classmethod
    def parse(cls, value: object) -> PageState:
        """The poll's answer; anything malformed (a page that tampered with the tracker)
        counts as untracked, and unknown times as "just changed"."""
        if not isinstance(value, dict):
            return cls(now=0.0, dom_quiet=0.0)
        now = _seconds(value.get("now"))
        dom_quiet = _seconds(value.get("domQuiet"))
        if value.get("tracked") is not True:
            return cls(now=now, dom_quiet=dom_quiet)
        counts = [_count(value.get(k)) for k in ("timers", "frames", "intervals", "requests")]
        if None in counts:
            return cls(now=now, dom_quiet=dom_quiet)
        return cls(
            now=now,
            dom_quiet=dom_quiet,
            tracked=True,
            loaded=value.get("loaded") is True,
            pending=sum(c for c in counts if c is not None),
            quiet=_seconds(value.get("quiet")),
        )


def settled_by(state: PageState, net_quiet: float, *, quiet: float, idle: float) -> str | None:
    """``"tracked"`` or ``"idle"`` if the page counts as settled, else None.

    ``net_quiet``: seconds since a request of the page last started or ended, with none in
    flight now (the caller does not ask while one is).
    """
    if (
        state.tracked
        and state.loaded
        and not state.pending
        and state.quiet >= quiet
        and net_quiet >= quiet
    ):
        return SETTLED_TRACKED
    if net_quiet >= idle and state.dom_quiet >= idle:
        return SETTLED_IDLE
    return None


def next_look(
    state: PageState, net_quiet: float, *, quiet: float, idle: float, poll: float
) -> float:
    """Seconds to wait before the next poll of a page that has not settled."""
    if state.tracked and state.loaded and not state.pending:
        return max(poll / 2, quiet - min(state.quiet, net_quiet))
    if state.tracked:
        return poll  # pending work: it may end any moment
    return max(poll, idle - min(state.dom_quiet, net_quiet))


def _seconds(value: object) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return max(0.0, float(value) / 1000)
    return 0.0


def _count(value: object) -> int | None:
    """A count from the page (a JavaScript number), None if it is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value != value or value < 0 or value != int(value):
        return None
    return int(value)
