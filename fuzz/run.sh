#!/usr/bin/env bash
# Fuzz both link extractors for SECONDS, the compiled one under AddressSanitizer:
#   fuzz/run.sh SECONDS [extra libFuzzer/atheris args]
# e.g. fuzz/run.sh 60 (the CI run), fuzz/run.sh 3600 -max_len=65536 (a long one).
#
# Builds fuzz/build/ with build_asan.sh if needed (clang, the clang runtime, Cython and
# atheris must be installed: see fuzz/README.md), then runs fuzz/fuzz_extract.py with the
# merged ASan+libFuzzer runtime preloaded. New inputs go to fuzz/build/corpus (the committed
# seeds in fuzz/corpus are only read); a finding is written to fuzz/build/findings/ and the
# script exits non-zero, naming the file and the command that replays it.
#
# Environment: FUZZ_NO_ASAN=1 fuzzes the installed compiled module instead (no clang needed:
# the twins are still compared, memory errors are not seen); FUZZ_PYTHON picks the interpreter
# (default: python, the one on PATH, e.g. the active venv's); FUZZ_PY_COVERAGE=0 leaves the
# Python twin untraced (C coverage only, ~4x faster); FUZZ_NICE (default 15) the niceness.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${FUZZ_PYTHON:-python}
secs=${1:?usage: fuzz/run.sh SECONDS [extra atheris args]}
shift

work=fuzz/build/corpus
findings=fuzz/build/findings
mkdir -p "$work" "$findings"

env_run=(env)
if [ -z "${FUZZ_NO_ASAN:-}" ]; then
  mapfile -t built < <(fuzz/build_asan.sh)
  rt=$(realpath "${built[0]}")
  so=$(realpath "${built[1]}")
  # PYTHONMALLOC=malloc: Python objects (the bytes the C twin reads) come from malloc, so an
  # access past their end is seen; detect_leaks=0: the interpreter itself leaks on purpose;
  # malloc_context_size=2: recording 30 frames of every malloc through the interpreter made
  # the run 3x slower (the stack of a bad access is still complete).
  env_run=(env LD_PRELOAD="$rt" CRAWLER_FUZZ_ASAN_SO="$so" PYTHONMALLOC=malloc
    ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:malloc_context_size=2:${ASAN_OPTIONS:-}")
fi

log=fuzz/build/last-run.log
start=$(date +%s)
set +e
# -timeout: an input that takes 10 s is a finding (linear time is a promise);
# -rss_limit_mb: so is one that needs 2 GB. Later arguments override these.
nice -n "${FUZZ_NICE:-15}" "${env_run[@]}" "$PY" fuzz/fuzz_extract.py \
  -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
  -dict=fuzz/html.dict -artifact_prefix="$findings/" -print_final_stats=1 \
  "$@" "$work" fuzz/corpus 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
echo "fuzz/run.sh: ran $(($(date +%s) - start)) s, exit $status; log in $log" >&2
if [ "$status" -ne 0 ]; then
  new=$(find "$findings" -type f -newermt "@$start" | sort)
  echo "fuzz/run.sh: FINDING. Reproducer(s):" >&2
  for f in $new; do echo "  $f" >&2; done
  echo "replay: ${env_run[*]} $PY fuzz/fuzz_extract.py FILE" >&2
  exit "$status"
fi
