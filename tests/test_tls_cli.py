"""The TLS options on the command line and in a config file, their errors at start, and the
``tls`` error kind with its reason in what ``crawler crawl`` (jsonl, the summary; the csv
format has a row per link, none for a failed page) and ``crawler check`` (its JSON and text
reports) write. Real TLS servers on 127.0.0.1 (tests/test_tls.py's
fixtures), the crawler in a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from tests.test_tls import Pki, StartSite, pki, tls_site  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parent.parent


async def run(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``crawler ARGV`` in a subprocess (without blocking the loop that serves the site)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", *argv,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_an_expired_certificate_is_tls_in_jsonl_and_the_summary(
    pki: Pki,  # noqa: F811
    tls_site: StartSite,  # noqa: F811
) -> None:
    site = await tls_site("expired")
    url = site.url("/")
    base = ("crawl", url, "--ca-cert", str(pki.ca_file), "--retries", "0")
    code, out, err = await run(*base, "-f", "jsonl")
    assert code == 1, err
    (page,) = [json.loads(line) for line in out.splitlines()]
    assert (page["url"], page["error"]) == (url, "tls")
    # (robots.txt failed first: the host is unreachable, and why)
    assert page["error_detail"].startswith("host unreachable: certificate has expired (")
    assert "crawler: errors: tls 1" in err
    assert "crawler: tls: certificate has expired 1" in err

    code, out, err = await run(*base, "-f", "jsonl", "--ignore-robots")
    assert code == 1, err
    (page,) = [json.loads(line) for line in out.splitlines()]
    assert (page["error"], page["error_detail"][:25]) == ("tls", "certificate has expired (")


async def test_crawler_check_reports_the_tls_reason(
    pki: Pki,  # noqa: F811
    tls_site: StartSite,  # noqa: F811
) -> None:
    site = await tls_site("wrong-host")
    url = site.url("/")
    code, out, err = await run("check", url, "--ca-cert", str(pki.ca_file), "-f", "json")
    assert code == 1, err
    report = json.loads(out)
    (broken,) = report["broken"]
    assert (broken["url"], broken["error"]) == (url, "tls")
    assert "hostname mismatch (" in broken["detail"]
    code, out, err = await run("check", url, "--ca-cert", str(pki.ca_file))
    assert code == 1, err
    assert f"tls  {url}" in out and "hostname mismatch (" in out


async def test_insecure_crawls_a_self_signed_site_and_says_so_once(
    tls_site: StartSite,  # noqa: F811
) -> None:
    site = await tls_site("self-signed")
    url = site.url("/")
    code, out, err = await run("crawl", url, "-k", "--max-pages", "5", "-f", "jsonl")
    assert code == 0, err
    pages = [json.loads(line) for line in out.splitlines()]
    assert len(pages) == 5 and all(p["status"] == 200 for p in pages)
    assert err.count("--insecure: TLS certificates and host names are NOT verified") == 1
    # without it: refused, with the reason
    code, out, err = await run("crawl", url, "--max-pages", "5", "--retries", "0")
    assert code == 1
    assert "crawler: tls: self-signed certificate 1" in err


async def test_the_tls_keys_of_a_config_file(
    pki: Pki,  # noqa: F811
    tls_site: StartSite,  # noqa: F811
    tmp_path: Path,
) -> None:
    site = await tls_site("valid", client_ca=True)
    client = pki.certs["client"]
    both = tmp_path / "client.pem"
    client.private_key_and_cert_chain_pem.write_to_path(str(both))
    toml = tmp_path / "crawl.toml"
    toml.write_text(
        f'[http]\nca_cert = "{pki.ca_file}"\nclient_cert = "{both}"\ninsecure = false\n'
    )
    code, out, err = await run("crawl", site.url("/"), "--config", str(toml), "-q")
    assert code == 0, err
    assert out.split() == [site.url("/")]
    assert site.requests >= 1 and site.client_subjects[0]  # presented, and taken


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ca-cert", "{tmp}/missing.pem"], "--ca-cert: cannot read {tmp}/missing.pem"),
        (["--ca-cert", "{tmp}/junk.pem"], "--ca-cert: {tmp}/junk.pem holds no usable PEM"),
        (
            ["--client-cert", "{tmp}/junk.pem"],
            "--client-cert: {tmp}/junk.pem holds no PEM certificate",
        ),
        (["--client-cert", "{tmp}/cert.pem"], "--client-cert: {tmp}/cert.pem holds no private key"),
        (
            ["--client-cert", "{tmp}/cert.pem", "--client-key", "{tmp}/other-key.pem"],
            "--client-key: the private key does not match the certificate",
        ),
        (
            ["--client-cert", "{tmp}/cert.pem", "--client-key", "{tmp}/encrypted.pem"],
            "--client-key: the private key is encrypted: give its passphrase with"
            " --client-key-password-env",
        ),
        (
            [
                "--client-cert",
                "{tmp}/cert.pem",
                "--client-key",
                "{tmp}/encrypted.pem",
                "--client-key-password-env",
                "TEST_UNSET_PASS",
            ],
            "--client-key-password-env: the environment variable TEST_UNSET_PASS is not set",
        ),  # fmt: skip
        (
            [
                "--client-cert",
                "{tmp}/cert.pem",
                "--client-key",
                "{tmp}/encrypted.pem",
                "--client-key-password-env",
                "TEST_WRONG_PASS",
            ],
            "--client-key-password-env: the passphrase does not decrypt the private key",
        ),  # fmt: skip
        (["--client-key", "{tmp}/key.pem"], "--client-key: needs client_cert (--client-cert)"),
    ],
)
async def test_a_tls_file_that_cannot_be_used_is_refused_at_start(
    pki: Pki,  # noqa: F811
    tmp_path: Path,
    args: list[str],
    message: str,
) -> None:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    client = pki.certs["client"]
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    (tmp_path / "cert.pem").write_bytes(client.cert_chain_pems[0].bytes())
    client.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    pki.certs["valid"].private_key_pem.write_to_path(str(tmp_path / "other-key.pem"))
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"right-passphrase"),
    )
    (tmp_path / "encrypted.pem").write_bytes(encrypted)
    argv = [a.format(tmp=tmp_path) for a in args]
    # (the URL is never fetched: nothing listens there)
    code, out, err = await run(
        "crawl", "https://127.0.0.1:9/", *argv, env={"TEST_WRONG_PASS": "wrong-passphrase"}
    )
    assert code == 2, err
    assert out == ""
    assert err.startswith("crawler: error: " + message.format(tmp=tmp_path)), err
    assert "PRIVATE KEY" not in err
    assert "right-passphrase" not in err and "wrong-passphrase" not in err


async def test_the_tls_options_are_kept_for_a_resumed_crawl(
    pki: Pki,  # noqa: F811
    tls_site: StartSite,  # noqa: F811
    tmp_path: Path,
) -> None:
    """--ca-cert is a per-run setting: stored (as an absolute path) and taken again by a run
    that resumes without it."""
    site = await tls_site("valid")
    state = tmp_path / "state"
    first = ("crawl", site.url("/"), "--state", str(state), "--max-pages", "3", "-f", "jsonl")
    code, out, err = await run(*first, "--ca-cert", str(pki.ca_file))
    assert code == 0, err
    assert [json.loads(line)["error"] for line in out.splitlines()] == [None] * 3
    code, out, err = await run("crawl", "--state", str(state), "--max-pages", "6")
    assert code == 0, err
    pages = [json.loads(line) for line in out.splitlines()]
    assert len(pages) == 3 and all(p["status"] == 200 and p["error"] is None for p in pages)
