"""The local sites the README's "Headers, cookies, auth and proxies" examples crawl.

``python -m tests.http_sites`` serves, on 127.0.0.1 until Ctrl-C:

* 18941: a site behind HTTP Basic auth (``crawl-user:s3cret-Pa55word``) whose ``/away``
  redirects to 18942, another origin, which must never get the credentials;
* 18942: a plain site that logs the Authorization and Via headers it gets;
* 18943: a site that sets a session cookie on ``/`` and demands it on every other page;
* 18944: a logging forward proxy.

At exit it prints what the plain site and the proxy saw. The same classes are the tests'
(tests/authsite.py, tests/proxyserver.py, tests/test_cookies.py).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from tests.authsite import AuthSite, LogSite
from tests.proxyserver import ForwardProxy
from tests.test_cookies import CookieSite

AUTH, PLAIN, COOKIES, PROXY = 18941, 18942, 18943, 18944


async def main() -> None:
    runners: list[web.AppRunner] = []

    async def start(app: web.Application, port: int) -> None:
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        runners.append(runner)

    log = LogSite()
    proxy = ForwardProxy()
    await start(log.app(), PLAIN)
    await start(AuthSite(away=f"http://127.0.0.1:{PLAIN}").app(), AUTH)
    await start(CookieSite().app(), COOKIES)
    await start(proxy.app(), PROXY)
    ports = f"auth {AUTH}, plain {PLAIN}, cookies {COOKIES}, proxy {PROXY}"
    print(f"{ports}: Ctrl-C to stop", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        print("the plain site saw:", log.seen, flush=True)
        print("the proxy forwarded:", proxy.log, flush=True)
        for runner in runners:
            await runner.cleanup()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
