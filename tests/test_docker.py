"""The Dockerfile, checked without a container engine.

What can be checked statically: it parses (known instructions, valid JSON forms, no heredocs),
the base image tag is pinned, the entry point is the console script pyproject installs, the
files it copies exist and are not ignored, it runs as a non-root user, and its install steps
are the ones .ci/run proves on a fresh machine. Building it for real is a slow test (podman).
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from subprocess import PIPE

import pytest
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
KNOWN = {
    "FROM",
    "RUN",
    "CMD",
    "LABEL",
    "EXPOSE",
    "ENV",
    "ADD",
    "COPY",
    "ENTRYPOINT",
    "VOLUME",
    "USER",
    "WORKDIR",
    "ARG",
    "ONBUILD",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "SHELL",
}


@dataclass
class Instruction:
    line: int
    keyword: str
    args: str


def parse(text: str) -> list[Instruction]:
    """Docker's line rules: comments, blank lines, backslash continuations."""
    out: list[Instruction] = []
    buf = ""
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not buf):
            continue  # comment lines inside a continuation are skipped too, as Docker does
        if not buf:
            start = n
        if stripped.endswith("\\"):
            buf += stripped[:-1].rstrip() + " "
            continue
        buf += stripped
        keyword, _, args = buf.partition(" ")
        out.append(Instruction(start, keyword, args.strip()))
        buf = ""
    assert not buf, "the Dockerfile ends inside a line continuation"
    return out


@pytest.fixture(scope="module")
def instructions() -> list[Instruction]:
    return parse(DOCKERFILE.read_text(encoding="utf-8"))


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    result: list[list[Instruction]] = []
    for ins in instructions:
        if ins.keyword.upper() == "FROM":
            result.append([])
        result[-1].append(ins)
    return result


def test_parse_handles_continuations_and_comments() -> None:
    got = parse('# c\nFROM a:1 AS b\n\nRUN x \\\n  # inner\n  && y\nCMD ["z"]\n')
    assert [(i.line, i.keyword, i.args) for i in got] == [
        (2, "FROM", "a:1 AS b"),
        (4, "RUN", "x && y"),
        (7, "CMD", '["z"]'),
    ]


def test_dockerfile_parses(instructions: list[Instruction]) -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert instructions[0].keyword == "FROM"
    for ins in instructions:
        assert ins.keyword in KNOWN, f"line {ins.line}: unknown instruction {ins.keyword}"
        assert ins.args, f"line {ins.line}: {ins.keyword} without arguments"
        if ins.keyword in ("ENTRYPOINT", "CMD") and ins.args.startswith("["):
            value = json.loads(ins.args)
            assert isinstance(value, list) and all(isinstance(v, str) for v in value)
    # the builders on these machines reject heredocs and syntax directives
    assert "<<" not in text
    assert not re.search(r"^#\s*syntax\s*=", text, flags=re.M | re.I)


def test_multi_stage_with_a_pinned_slim_base(instructions: list[Instruction]) -> None:
    froms = [i for i in instructions if i.keyword == "FROM"]
    assert len(froms) >= 2, "multi-stage: a build stage and a runtime stage"
    names = set()
    for ins in froms:
        parts = ins.args.split()
        image = parts[0]
        assert image == "python:3.12-slim", f"line {ins.line}: base {image!r}"
        name, _, tag = image.partition(":")
        assert tag and tag != "latest" and re.match(r"\d+\.\d+", tag), f"unpinned: {image}"
        if len(parts) == 3 and parts[1].upper() == "AS":
            names.add(parts[2])
    assert "build" in names
    runtime = stages(instructions)[-1]
    copies_from = [i for i in runtime if i.keyword == "COPY" and i.args.startswith("--from=")]
    assert copies_from, "the runtime stage takes the built wheels from the build stage"
    assert all(i.args.split()[0].removeprefix("--from=") in names for i in copies_from)
    build = stages(instructions)[0]
    assert any("gcc" in i.args for i in build if i.keyword == "RUN"), "no compiler in the build"
    assert not any("gcc" in i.args for i in runtime if i.keyword == "RUN")


def test_entrypoint_is_the_installed_console_script(instructions: list[Instruction]) -> None:
    (entry,) = [i for i in instructions if i.keyword == "ENTRYPOINT"]
    argv = json.loads(entry.args)
    assert argv == ["crawler", "crawl"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts[argv[0]] == "crawler.cli.main:main"
    from crawler.cli.main import build_parser  # noqa: PLC0415 - keeps the module import light

    args = build_parser().parse_args([*argv[1:], "https://example.org/", "--max-pages", "50"])
    assert args.command == "crawl" and args.seeds == ["https://example.org/"]


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def ignored(path: str, patterns: list[str]) -> bool:
    parts = Path(path).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern.lstrip("!").rstrip("/")
        if any(
            fnmatch.fnmatch(p, pat) or fnmatch.fnmatch(p, pat.removeprefix("**/")) for p in prefixes
        ):
            result = not negate
    return result


def copy_sources(instructions: list[Instruction]) -> list[str]:
    sources: list[str] = []
    for ins in instructions:
        if ins.keyword in ("COPY", "ADD"):
            args = [a for a in shlex.split(ins.args) if not a.startswith("--")]
            if any(a.startswith("--from") for a in shlex.split(ins.args)):
                continue
            sources += args[:-1]
    return sources


def test_copied_files_exist_and_are_not_ignored(instructions: list[Instruction]) -> None:
    sources = copy_sources(instructions)
    assert sources
    patterns = dockerignore_patterns()
    for src in sources:
        assert (ROOT / src).exists(), f"COPY {src}: no such file"
        assert not ignored(src.rstrip("/"), patterns), f"COPY {src} is excluded by .dockerignore"
    # and what a build must never see
    assert ignored(".git", patterns)
    assert ignored("crawler/extract/_extract_c.cpython-312-x86_64-linux-gnu.so", patterns)
    assert not ignored("crawler/cli/main.py", patterns)


def test_everything_the_build_reads_is_copied(instructions: list[Instruction]) -> None:
    sources = {s.rstrip("/") for s in copy_sources(instructions)}
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = {"pyproject.toml", pyproject["project"]["readme"], "crawler"}
    # a setup.py (the compiled extractor's build) or friends must reach the build stage too
    needed |= {n for n in ("setup.py", "setup.cfg", "MANIFEST.in") if (ROOT / n).exists()}
    assert needed <= sources, f"not copied: {needed - sources}"


def test_runs_as_a_non_root_user(instructions: list[Instruction]) -> None:
    runtime = stages(instructions)[-1]
    users = [i.args for i in runtime if i.keyword == "USER"]
    assert users, "the runtime stage sets no USER"
    assert users[-1].split(":")[0] not in ("root", "0")
    last_user = max(i.line for i in runtime if i.keyword == "USER")
    entry = max(i.line for i in runtime if i.keyword == "ENTRYPOINT")
    assert last_user < entry


def pip_steps(text: str, wheel_dir: str) -> list[list[str]]:
    """Every `pip wheel` / `pip install --no-index` command, paths and cache flags normalised."""
    steps = []
    for m in re.finditer(r"(?:\S*/)?pip\"? (wheel|install) ([^&\n;|]*)", text):
        words = [w for w in shlex.split(m.group(0)) if w != "--no-cache-dir"]
        words[0] = "pip"
        if words[1] == "install" and "--no-index" not in words:
            continue  # .ci/run's other installs (the test extra, the dev tools)
        steps.append([w.replace(wheel_dir, "WHEELS") for w in words])
    return steps


def test_install_steps_are_the_ones_ci_proves(instructions: list[Instruction]) -> None:
    docker_runs = "\n".join(i.args for i in instructions if i.keyword == "RUN")
    ci = (ROOT / ".ci" / "run").read_text()
    docker = pip_steps(docker_runs, "/wheels")
    proved = pip_steps(ci, "$work/wheels")
    assert docker == [
        ["pip", "wheel", "--wheel-dir", "WHEELS", "."],
        ["pip", "wheel", "--wheel-dir", "WHEELS", ".[render]"],  # RENDER=1 only
        ["pip", "install", "--no-index", "--find-links", "WHEELS", "WHEELS/crawler-*.whl"],
        ["pip", "install", "--no-index", "--find-links", "WHEELS", "WHEELS/playwright-*.whl"],
    ]
    assert proved == docker


def test_readme_shows_build_and_run() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "docker build -t crawler ." in readme
    assert re.search(r"docker run --rm crawler https?://\S+ --max-pages \d+", readme)


@pytest.mark.skipif(shutil.which("hadolint") is None, reason="hadolint not installed")
def test_hadolint_is_clean() -> None:
    proc = subprocess.run(
        ["hadolint", "--failure-threshold", "warning", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def podman_ready() -> bool:
    """podman and the base image (the stand-in from make-local-base.sh, or a pulled one)."""
    if shutil.which("podman") is None:
        return False
    env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
    probe = subprocess.run(
        ["podman", "image", "exists", "docker.io/library/python:3.12-slim"], env=env, timeout=60
    )
    return probe.returncode == 0


CONTAINERS_CONF = ROOT.parent / "shared" / "tools" / "docker" / "containers.conf"


@pytest.mark.slow
async def test_image_builds_and_crawls_a_local_site() -> None:
    """Builds the image (minutes), then crawls a site on 127.0.0.1 from the container."""
    if not podman_ready():
        pytest.skip("podman or the python:3.12-slim base image missing")
    env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}
    tag = "localhost/crawler:pytest"

    async def podman(*args: str, timeout: float) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            "podman", *args, env=env, stdout=PIPE, stderr=PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
        return proc.returncode or 0, out.decode(), err.decode()

    rc, _, err = await podman("build", "--network", "host", "-t", tag, str(ROOT), timeout=1200)
    assert rc == 0, err
    rc, out, _ = await podman("run", "--rm", "--network", "none", tag, "--help", timeout=120)
    assert rc == 0 and "usage: crawler crawl" in out
    rc, out, _ = await podman("run", "--rm", "--entrypoint", "id", tag, "-u", timeout=120)
    assert out.strip() != "0", "the image runs as root"

    async def page(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        links = "".join(f'<a href="/p/{n * 2 + k}">x</a>' for k in (1, 2) if n * 2 + k < 15)
        return web.Response(text=links, content_type="text/html")

    app = web.Application()
    app.router.add_get("/p/{n}", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        rc, out, err = await podman(
            "run", "--rm", "--network", "host", tag, f"http://127.0.0.1:{port}/p/0", timeout=120
        )
    finally:
        await runner.cleanup()
    assert rc == 0, err
    assert sorted(out.split()) == sorted(f"http://127.0.0.1:{port}/p/{n}" for n in range(15))
    assert "15 pages (15 ok, 0 failed)" in err
