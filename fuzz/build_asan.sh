#!/usr/bin/env bash
# Build what the fuzzer needs to run the compiled extractor under AddressSanitizer, into
# fuzz/build/ (never crawler/extract/, which holds the normal build everyone else uses):
#
#   fuzz/build/asan/_extract_c.*.so   crawler/extract/_extract_c.pyx, cythonized and compiled by
#                                     clang with -fsanitize=address,fuzzer-no-link
#   fuzz/build/asan_with_fuzzer.so    clang's static ASan runtime and atheris's libFuzzer
#                                     (libclang_rt.fuzzer_no_main.a, shipped in its wheel)
#                                     linked into one shared library, for LD_PRELOAD
#
# Why the merged runtime: the atheris wheel does not ship asan_with_fuzzer.so (only a source
# install on a machine with clang makes one). ASan defines the coverage callbacks
# (__sanitizer_cov_*) as weak symbols; preloaded alone, they would win over libFuzzer's, which
# arrives later inside atheris, and the extension's coverage would be lost. Linked together,
# libFuzzer's strong definitions replace the weak ones. asan_preinit.o is left out: a shared
# library may not have a .preinit_array (LD_PRELOAD runs the initialiser early enough).
#
# Needs: clang, the clang runtime (Debian: clang libclang-rt-dev), Python headers, Cython and
# atheris in the current Python. Rebuilds only what is older than its inputs. Usage:
#   fuzz/build_asan.sh            build if needed, print the two paths
#   fuzz/build_asan.sh --force    rebuild both
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${FUZZ_PYTHON:-python}
CC=${CC_ASAN:-clang}
OUT=fuzz/build
PYX=crawler/extract/_extract_c.pyx
force=0
[ "${1:-}" = "--force" ] && force=1

command -v "$CC" >/dev/null || {
  echo "build_asan.sh: $CC not found (Debian: apt-get install clang libclang-rt-dev)" >&2
  exit 2
}
mkdir -p "$OUT/asan"

# -- the merged ASan + libFuzzer runtime --
rt_dir=$("$CC" -print-resource-dir)/lib/linux
asan_a=$rt_dir/libclang_rt.asan-x86_64.a
[ -f "$asan_a" ] || asan_a=$("$CC" -print-file-name=libclang_rt.asan-x86_64.a)
[ -f "$asan_a" ] || {
  echo "build_asan.sh: no libclang_rt.asan-x86_64.a (Debian: apt-get install libclang-rt-dev)" >&2
  exit 2
}
fuzzer_a=$("$PY" -c 'import atheris, os; print(os.path.join(atheris.path(), "libclang_rt.fuzzer_no_main.a"))')
[ -f "$fuzzer_a" ] || {
  echo "build_asan.sh: atheris has no $fuzzer_a (pip install atheris)" >&2
  exit 2
}
rt=$OUT/asan_with_fuzzer.so
if [ $force = 1 ] || [ ! -f "$rt" ] || [ "$asan_a" -nt "$rt" ] || [ "$fuzzer_a" -nt "$rt" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && ar x "$asan_a" && rm -f asan_preinit.cpp.o && ar rcs asan.a ./*.o)
  "$CC" -shared -o "$rt.tmp" \
    -Wl,--whole-archive "$tmp/asan.a" "$fuzzer_a" -Wl,--no-whole-archive \
    -lpthread -ldl -lrt -lm -lstdc++
  mv "$rt.tmp" "$rt"
  echo "build_asan.sh: built $rt" >&2
fi

# -- the extension, instrumented --
suffix=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
# The intake's base class (which the extractor calls), the compiled intake and the extractor,
# each rebuilt when one of its sources is newer than its module.
build() {  # build PYX MODULE_SO SOURCES...
  local pyx=$1 out=$2 csrc stale=0 syms src
  shift 2
  csrc=$OUT/$(basename "$pyx" .pyx).c
  for src in "$@" "$0"; do
    if [ "$src" -nt "$out" ]; then stale=1; fi
  done
  if [ $force = 1 ] || [ ! -f "$out" ] || [ $stale = 1 ]; then
    # Cython takes the module name from the package layout (crawler.extract._extract_c), so
    # the relative imports in the .pyx resolve against crawler.extract when the target loads it.
    "$PY" -m cython -3 --fast-fail -o "$csrc" "$pyx"
    # -O1 -g and frame pointers: readable ASan stacks; the normal build is -O2.
    "$CC" -shared -fPIC -O1 -g -fno-omit-frame-pointer \
      -fsanitize=address,fuzzer-no-link -I"$inc" "$csrc" -o "$out.tmp"
    mv "$out.tmp" "$out"
    echo "build_asan.sh: built $out" >&2
  fi
  # Prove the instrumentation is there (the docs' check: ASan and sancov symbols).
  # (grep -c, not -q: -q would stop reading and fail the pipe under pipefail.)
  syms=$(nm -D "$out")
  grep -c __asan_report <<<"$syms" >/dev/null || { echo "build_asan.sh: $out has no ASan symbols" >&2; exit 1; }
  grep -c __sanitizer_cov <<<"$syms" >/dev/null || { echo "build_asan.sh: $out has no coverage" >&2; exit 1; }
}
so=$OUT/asan/_extract_c$suffix
base=crawler/extract/_intake_base_c
build $base.pyx "$OUT/asan/_intake_base_c$suffix" $base.pyx $base.pxd
build crawler/urls/_intake_c.pyx "$OUT/asan/_intake_c$suffix" crawler/urls/_intake_c.pyx \
  crawler/urls/_intake_c.pxd crawler/urls/_hash_c.pxd $base.pxd
build "$PYX" "$so" "$PYX" crawler/extract/*.py $base.pxd
echo "$rt"
echo "$so"
