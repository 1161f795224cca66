"""The crawl's TLS client context: one ``ssl.SSLContext`` per configuration, built once, in a
thread, and the options that shape it (``--insecure``, ``--ca-cert``, ``--client-cert``,
``--client-key``, ``--client-key-password-env``).

Why a thread: loading the system's CA store costs 20-30 ms of CPU on the benchmark machine
(OpenSSL parses some 140 certificates), a fifth of a one-page crawl. :meth:`TlsClient.start`
begins it in a thread as soon as the crawl knows it will need https (an https seed), while
the event loop goes on starting up (OpenSSL loads the store with the GIL released);
:meth:`TlsClient.context_async` is what a connection awaits. An http-only crawl builds
nothing.

What the context is: TLS 1.2 or later, certificates and host names verified against the
system's CA store (``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured, as OpenSSL does), ALPN
``http/1.1``. ``--ca-cert FILE`` *replaces* the system store with the PEM bundle in FILE, as
curl's ``--cacert`` does (a private CA then vouches for nothing but what it signed; add the
system bundle to FILE to trust both). ``--insecure`` verifies nothing (said once on stderr).

TLS session resumption: asyncio's (and uvloop's) ``create_connection`` take no ``session=``,
but both make the connection's ``SSLObject`` with ``context.wrap_bio(..., server_hostname=)``.
:class:`ResumingContext` overrides that method to offer the last session (a TLS 1.3 ticket)
received from the same host name: connections after the first to an origin resume instead of
a full handshake. benchmarks/HTTPS.md measures what it saves.

Options that cannot work (a file missing, unreadable, not PEM, a key that does not match, an
encrypted key without its passphrase) are :class:`~crawler.http.errors.OptionError` naming the
option, raised by :func:`check_tls_options` at start, never mid-crawl. No key material, no
passphrase is ever printed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import ssl
import sys
import threading
import time
from contextvars import ContextVar
from typing import Any

from crawler.config import CrawlConfig
from crawler.http.errors import OptionError

__all__ = [
    "INSECURE_WARNING",
    "ResumingContext",
    "TlsClient",
    "check_tls_options",
    "start_for_seeds",
    "tls_client",
    "tls_custom",
]

#: Said once on stderr by a process whose crawl runs with ``--insecure``.
INSECURE_WARNING = (
    "crawler: warning: --insecure: TLS certificates and host names are NOT verified; anyone on"
    " the network path can read and change what this crawl fetches over https\n"
)
_warned = False
#: Seconds a kept TLS session is offered before a newer one is read (servers give tickets a
#: lifetime of minutes: nginx 5, the RFC 8446 bound 7 days).
SESSION_REFRESH = 60.0
_ENCRYPTED = "the private key is encrypted: give its passphrase with --client-key-password-env VAR"


#: The origin ("host:port") a connection being opened goes to: set by the pool around
#: ``create_connection``; the event loop makes the connection's ``SSLObject`` in a callback
#: that runs in the context of the task that asked (a copy of it), so ``wrap_bio`` reads it.
CONNECTING_TO: ContextVar[str | None] = ContextVar("crawler_tls_connecting_to", default=None)


class ResumingContext(ssl.SSLContext):
    """An ``SSLContext`` whose connections offer the last TLS session of their origin.

    ``sessions`` maps an origin ("host:port", :data:`CONNECTING_TO`; the host name alone when
    a connection is opened without it) to the newest session a connection to it received
    (:meth:`remember`); ``wrap_bio``, called by asyncio's and uvloop's TLS transports for every
    new connection, offers it. A server that does not accept it does a full handshake: never
    an error.
    """

    #: origin ("host:port", else the host name) -> (its newest session, time.monotonic() when
    #: it was kept)
    sessions: dict[str, tuple[ssl.SSLSession, float]]

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        if session is None and server_hostname is not None and not server_side:
            kept = self.sessions.get(CONNECTING_TO.get() or str(server_hostname))
            if kept is not None:
                session = kept[0]
        return super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)

    def _encode_hostname(self, hostname: Any) -> Any:
        """An ASCII host name as it is (what the ``idna`` codec gives for one): the codec, and
        the ``unicodedata`` and ``stringprep`` it imports, only for a name that needs it."""
        if isinstance(hostname, str) and hostname.isascii():
            return hostname
        return super()._encode_hostname(hostname)  # type: ignore[misc]

    def remember(self, origin: str, ssl_object: Any, *, resumed: bool = True) -> None:
        """Keep the session ``ssl_object`` holds now (with a resumption ticket) for ``origin``,
        unless one kept less than SESSION_REFRESH seconds ago is there and the connection
        resumed (reading a session copies it, about 0.3 ms: once per connection would be more
        than it saves). A connection that did not resume (the kept one was refused: another
        server of that name, a ticket expired) always replaces it."""
        now = time.monotonic()
        kept = self.sessions.get(origin)
        if resumed and kept is not None and now - kept[1] < SESSION_REFRESH:
            return
        session = getattr(ssl_object, "session", None)
        if session is not None and session.has_ticket:
            if len(self.sessions) > 4096:
                self.sessions.clear()
            self.sessions[origin] = (session, now)


def tls_custom(config: CrawlConfig) -> bool:
    """Whether the config changes TLS from the default (verified, the system's store)."""
    return bool(config.insecure or config.ca_cert or config.client_cert)


def check_tls_options(config: CrawlConfig) -> None:
    """OptionError now for a TLS option that cannot work (names the option, never the key)."""
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _load_files(probe, config)


def _readable(option: str, path: str) -> None:
    try:
        with open(path, "rb") as fh:
            fh.read(1)
    except OSError as exc:
        raise OptionError(option, f"cannot read {path}: {exc.strerror or exc}") from None


def _password(config: CrawlConfig) -> Any:
    """What ``load_cert_chain`` takes as ``password``: never None (OpenSSL would prompt on the
    terminal for an encrypted key), a callable that names the missing option instead."""
    name = config.client_key_password_env
    if name:
        value = os.environ.get(name)
        if not value:
            raise OptionError(
                "--client-key-password-env",
                f"the environment variable {name} is not set (or empty)",
            )
        return value.encode("utf-8")

    def missing() -> bytes:
        raise OptionError("--client-key", _ENCRYPTED)

    return missing


def _load_files(context: ssl.SSLContext, config: CrawlConfig) -> None:
    """The CA bundle and the client certificate of ``config`` into ``context``."""
    if config.ca_cert:
        _readable("--ca-cert", config.ca_cert)
        try:
            context.load_verify_locations(cafile=config.ca_cert)
        except (ssl.SSLError, ValueError) as exc:
            raise OptionError(
                "--ca-cert", f"{config.ca_cert} holds no usable PEM certificate ({_why(exc)})"
            ) from None
    if config.client_key and not config.client_cert:
        raise OptionError("--client-key", "needs --client-cert (the certificate it goes with)")
    if config.client_cert:
        _readable("--client-cert", config.client_cert)
        if config.client_key:
            _readable("--client-key", config.client_key)
        password = _password(config)
        try:
            context.load_cert_chain(config.client_cert, config.client_key or None, password)
        except ssl.SSLError as exc:
            raise OptionError(*_chain_problem(config, exc)) from None


def _why(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason).replace("_", " ").lower() if reason else str(exc)


def _chain_problem(config: CrawlConfig, exc: ssl.SSLError) -> tuple[str, str]:
    """(option, reason) of a client certificate and key that OpenSSL refused (its message,
    "PEM lib", says little: the files are looked at for what is missing)."""
    why = _why(exc)
    cert, key = config.client_cert or "", config.client_key
    if "key values mismatch" in why:
        return "--client-key", f"the private key does not match the certificate in {cert}"
    if "bad decrypt" in why or "bad password" in why:
        return "--client-key-password-env", "the passphrase does not decrypt the private key"
    if b"-----BEGIN CERTIFICATE-----" not in _head(cert):
        return "--client-cert", f"{cert} holds no PEM certificate"
    if key is None and b"PRIVATE KEY-----" not in _head(cert):
        return "--client-cert", f"{cert} holds no private key: give it with --client-key FILE"
    if key is not None and b"PRIVATE KEY-----" not in _head(key):
        return "--client-key", f"{key} holds no PEM private key"
    if b"ENCRYPTED" in _head(key or cert):
        if config.client_key_password_env:
            return "--client-key-password-env", "the passphrase does not decrypt the private key"
        return "--client-key", _ENCRYPTED
    where = key or cert
    return "--client-key", f"the private key in {where} cannot be used ({why})"


def _head(path: str) -> bytes:
    """The first megabyte of ``path`` (readable: checked before), to name what it lacks."""
    with open(path, "rb") as fh:
        return fh.read(1 << 20)


def build_context(config: CrawlConfig) -> ResumingContext:
    """The crawl's client context (seconds' hundredths: the CA store is loaded)."""
    context = ResumingContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies certificates and names
    context.sessions = {}
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    if config.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif not config.ca_cert:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    _load_files(context, config)
    return context


class TlsClient:
    """The crawl's one TLS context, built once (in a thread) when first asked for.

    Both transports take their context from here: the plain path's pool awaits
    :meth:`context_async`; aiohttp's session takes :meth:`context` when the config changes
    TLS (else aiohttp's own verified context, which is the same default).
    """

    def __init__(self, config: CrawlConfig) -> None:
        self.config = config
        self._context: ResumingContext | None = None
        self._future: concurrent.futures.Future[ResumingContext] | None = None
        self._lock = threading.Lock()
        if config.insecure:
            warn_insecure()

    def start(self) -> None:
        """Begin building the context in a thread (once; nothing if it is built)."""
        with self._lock:
            if self._context is not None or self._future is not None:
                return
            future: concurrent.futures.Future[ResumingContext] = concurrent.futures.Future()
            self._future = future
        # Not a daemon: the interpreter waits for it at exit (tens of ms at most); a daemon
        # thread still inside OpenSSL while the interpreter finalises crashes the process.
        thread = threading.Thread(
            target=self._build_into, args=(future,), name="crawler-tls", daemon=False
        )
        thread.start()

    def _build_into(self, future: concurrent.futures.Future[ResumingContext]) -> None:
        try:
            context = build_context(self.config)
        except BaseException as exc:  # handed to whoever awaits it
            future.set_exception(exc)
        else:
            self._context = context
            future.set_result(context)

    @property
    def built(self) -> ResumingContext | None:
        """The context, if it is built."""
        return self._context

    async def context_async(self) -> ResumingContext:
        """The context; built in a thread the first time, awaited without blocking the loop."""
        context = self._context
        if context is not None:
            return context
        self.start()
        assert self._future is not None
        return await asyncio.wrap_future(self._future)

    def context(self) -> ResumingContext:
        """The context, built now (blocking) if no thread is building it."""
        context = self._context
        if context is not None:
            return context
        self.start()
        assert self._future is not None
        return self._future.result()


_clients: dict[tuple[object, ...], TlsClient] = {}
_clients_lock = threading.Lock()


def tls_client(config: CrawlConfig) -> TlsClient:
    """The process's one :class:`TlsClient` for ``config``'s TLS options: the CLI starts its
    build while the crawl's modules import (:func:`start_for_seeds`), the fetcher awaits the
    same one; two fetchers of a process (a crawl's, a check's) share context and sessions."""
    key = (
        config.insecure,
        config.ca_cert,
        config.client_cert,
        config.client_key,
        config.client_key_password_env,
    )
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = TlsClient(config)
        return client


def start_for_seeds(config: CrawlConfig) -> None:
    """Begin building the context in a thread now if a seed is https (else nothing)."""
    if any(seed[:6].lower() == "https:" for seed in config.seeds):
        tls_client(config).start()


def warn_insecure() -> None:
    """Say once per process, on stderr, that certificates are not verified."""
    global _warned
    if not _warned:
        _warned = True
        sys.stderr.write(INSECURE_WARNING)
