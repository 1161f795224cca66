"""Optional build of the compiled extractor (crawler/extract/_extract_c.pyx).

Everything else about the package is in pyproject.toml. The extension is built with Cython
unless ``CRAWLER_NO_EXTENSIONS`` is set or the interpreter is not CPython; when it cannot be
built (no compiler, no Python headers, no Cython) the install goes on with the pure-Python
extractor, which is complete on its own (the aiohttp/multidict pattern).
"""

from __future__ import annotations

import os
import platform
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NO_EXTENSIONS = (
    bool(os.environ.get("CRAWLER_NO_EXTENSIONS")) or platform.python_implementation() != "CPython"
)
HERE = os.path.dirname(os.path.abspath(__file__))
PYX = os.path.join("crawler", "extract", "_extract_c.pyx")


class BuildFailed(Exception):
    pass


class OptionalBuildExt(build_ext):
    """build_ext that turns any compile failure into BuildFailed (caught below)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # DistutilsPlatformError, CCompilerError, missing headers...
            raise BuildFailed(str(exc)) from exc

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # CCompilerError, CompileError, LinkError, ValueError...
            raise BuildFailed(str(exc)) from exc


def _extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize  # noqa: PLC0415 - optional: absent means pure
    except ImportError:
        print("*** Cython is not installed: building the pure-Python extractor only ***")
        return []
    return cythonize(  # type: ignore[no-any-return]
        [Extension("crawler.extract._extract_c", [PYX], extra_compile_args=["-O2"])],
        compiler_directives={"language_level": "3"},
        # The generated C stays out of the source tree (and out of the wheel).
        build_dir=os.path.join("build", "cython"),
        quiet=True,
    )


def _banner(msg: str) -> None:
    print("*" * 75, file=sys.stderr)
    print(msg, file=sys.stderr)
    print("*" * 75, file=sys.stderr)


if NO_EXTENSIONS:
    print("*********************\n* Pure Python build *\n*********************")
    setup()
else:
    exts = _extensions()
    if not exts:
        _banner("Pure Python build: Cython unavailable; the extractor runs in pure Python.")
        setup()
    else:
        try:
            setup(ext_modules=exts, cmdclass={"build_ext": OptionalBuildExt})
            print("**********************\n* Accelerated build *\n**********************")
        except BuildFailed as exc:
            _banner(
                "WARNING: the compiled extractor could not be built; installing the pure-Python\n"
                f"one instead (same results, slower). Reason: {exc}\n"
                "Set CRAWLER_NO_EXTENSIONS=1 to skip this attempt."
            )
            setup()
