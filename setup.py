"""Optional build of the compiled extractor (crawler/extract/_extract_c.pyx).

Everything else about the package is in pyproject.toml. The extension is built with Cython
unless ``CRAWLER_NO_EXTENSIONS`` is set or the interpreter is not CPython. When it cannot be
built (no compiler, no Python headers, no Cython) the install goes on with the pure-Python
extractor, which is complete on its own: the failure is reported, not fatal, unless
``CRAWLER_REQUIRE_EXTENSIONS`` is set (CI on a machine with a compiler), which makes it fatal.
The failure is caught inside ``build_ext`` (not by running ``setup()`` a second time, which
PEP 660 editable builds do not survive).
"""

from __future__ import annotations

import glob
import os
import platform
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NO_EXTENSIONS = (
    bool(os.environ.get("CRAWLER_NO_EXTENSIONS")) or platform.python_implementation() != "CPython"
)
# CI on a machine with a compiler: a build that fails must fail the install, not fall back.
REQUIRE_EXTENSIONS = bool(os.environ.get("CRAWLER_REQUIRE_EXTENSIONS")) and not NO_EXTENSIONS
ROOT = os.path.dirname(os.path.abspath(__file__))
# Every compiled accelerator is a ``_*_c.pyx`` beside its pure-Python twin.
PYX = sorted(
    os.path.relpath(p, ROOT)
    for p in glob.glob(os.path.join(ROOT, "crawler", "**", "_*_c.pyx"), recursive=True)
)


def _module(path: str) -> str:
    return os.path.splitext(path)[0].replace(os.sep, ".")


def _banner(*lines: str) -> None:
    print("*" * 75, file=sys.stderr)
    for line in lines:
        print(line, file=sys.stderr)
    print("*" * 75, file=sys.stderr)


def _fallback(reason: object) -> None:
    if REQUIRE_EXTENSIONS:
        _banner("ERROR: CRAWLER_REQUIRE_EXTENSIONS is set and the compiled extractor failed:")
        raise SystemExit(f"compiled extractor not built: {reason}")
    _banner(
        "WARNING: the compiled extractor could not be built; the pure-Python one is",
        "installed instead (same results, slower). Reason:",
        str(reason),
        "Set CRAWLER_NO_EXTENSIONS=1 to skip this attempt.",
    )


class OptionalBuildExt(build_ext):
    """build_ext whose failure (no compiler, no headers, a compile error) is not fatal."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # DistutilsPlatformError (no compiler) and the like
            _fallback(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # CCompilerError, CompileError, LinkError...
            _fallback(exc)
        else:
            print("**********************\n* Accelerated build *\n**********************")


def _extensions() -> list[Extension]:
    if NO_EXTENSIONS:
        print("*********************\n* Pure Python build *\n*********************")
        return []
    try:
        from Cython.Build import cythonize  # noqa: PLC0415 - optional: absent means pure
    except ImportError as exc:
        if REQUIRE_EXTENSIONS:
            _fallback(exc)
        _banner("Pure Python build: Cython is not installed; the extractor runs in pure Python.")
        return []
    try:
        return cythonize(  # type: ignore[no-any-return]
            [Extension(_module(p), [p], extra_compile_args=["-O2"]) for p in PYX],
            compiler_directives={"language_level": "3"},
            # The generated C stays out of the source tree (and out of the wheel).
            build_dir=os.path.join("build", "cython"),
            quiet=True,
        )
    except Exception as exc:  # a Cython error: still install the pure-Python extractor
        _fallback(exc)
        return []


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
