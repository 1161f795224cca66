"""Bot walls: answers that refuse or challenge an automated client, not a broken link.

A site behind a bot-management service answers a checker's request with a 403, 429 or 503
and a challenge page a browser would solve (JavaScript, a CAPTCHA): reporting that link as
broken is the most common false alarm of link checkers. ``wall`` tells such an answer from a
real error by exact, documented markers only (no guessing from words like "denied"):

* headers the services set on a challenge, on any 4xx/5xx: Cloudflare's
  ``cf-mitigated: challenge`` (its documented way to tell a challenge from the origin's
  answer), AWS WAF's ``x-amzn-waf-action: challenge|captcha``;
* the challenge pages themselves, only in a 403, 429 or 503 (`BODY_STATUSES`) and only in its
  first `BODY_BYTES` bytes: Cloudflare's ``_cf_chl_opt`` and ``/cdn-cgi/challenge-platform/h/``
  (its challenge scripts; not ``/scripts/jsd/``, which Cloudflare injects into every page of a
  site with JavaScript detections, real 403s and 404s included), Akamai's
  ``errors.edgesuite.net`` (the reference link of its "Access Denied" page), PerimeterX's
  ``px-captcha``, DataDome's ``captcha-delivery.com``, AWS WAF's ``AwsWafIntegration`` and
  Sucuri's ``Sucuri WebSite Firewall``.

Two more answers are walls by what they mean rather than by a marker, decided by the prober
(probe.py): a 429 that is still a 429 after the retries (the server limits the rate of this
client; it says nothing of the link), and a 403 to the checker that one GET with a browser's
headers (`BROWSER_HEADERS`) does not get.

Sans-I/O: headers and a body prefix in, the wall's name (or None) out.
"""

from __future__ import annotations

from collections.abc import Mapping

from crawler.check.model import BLOCKED_KIND

__all__ = ["BLOCKED", "BODY_BYTES", "BODY_STATUSES", "BROWSER_HEADERS", "HINT", "wall"]

#: The verdict's kind of a link behind a bot wall.
BLOCKED = BLOCKED_KIND
#: What every report says of a blocked link.
HINT = "the site answered with a bot challenge; the link may work in a browser"
#: Statuses whose body is read (up to BODY_BYTES) for a challenge page.
BODY_STATUSES = frozenset({403, 429, 503})
#: Bytes of such a body read: challenge pages carry their markers in the head, within 10 KB.
BODY_BYTES = 32 * 1024

#: The one GET a 403 gets again: what a current desktop browser sends for a page.
BROWSER_HEADERS = {
    "User-Agent": (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
        "Chrome/131.0.0.0 Safari/537.36"
    ),
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "Accept-Language": "en-US,en;q=0.9",
}

# (header, values it must have (lower case; empty: any value), the wall's name)
_HEADERS: tuple[tuple[str, frozenset[str], str], ...] = (
    ("cf-mitigated", frozenset({"challenge"}), "Cloudflare challenge"),
    ("x-amzn-waf-action", frozenset({"challenge", "captcha"}), "AWS WAF challenge"),
)
_BODIES: tuple[tuple[bytes, str], ...] = (
    (b"_cf_chl_opt", "Cloudflare challenge page"),
    (b"/cdn-cgi/challenge-platform/h/", "Cloudflare challenge page"),
    (b"errors.edgesuite.net", "Akamai bot manager page"),
    (b"px-captcha", "PerimeterX challenge page"),
    (b"captcha-delivery.com", "DataDome challenge page"),
    (b"AwsWafIntegration", "AWS WAF challenge page"),
    (b"Sucuri WebSite Firewall", "Sucuri firewall page"),
)


def wall(status: int, headers: Mapping[str, str], body: bytes = b"") -> str | None:
    """The bot wall an answer is (``"Cloudflare challenge (cf-mitigated: challenge)"``), or
    None. ``headers`` is looked up by lower-case name (aiohttp's are case-insensitive);
    ``body`` is the start of the body, for a status of BODY_STATUSES."""
    if status < 400:
        return None
    for name, values, what in _HEADERS:
        value = headers.get(name)
        if value is not None and (not values or value.strip().lower() in values):
            return f"{what} ({name}: {value.strip()[:40]})"
    if status in BODY_STATUSES and body:
        head = body[:BODY_BYTES]
        for marker, what in _BODIES:
            if marker in head:
                return f"{what} ({marker.decode()!r} in the body)"
    return None
