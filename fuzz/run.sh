#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets with clang 16, AddressSanitizer and
# UndefinedBehaviorSanitizer in $FUZZ_BUILD, then runs each for $FUZZ_SECONDS over its
# checked-in corpus (fuzz/corpus/<target>, read only) plus a scratch corpus in
# $FUZZ_BUILD/corpus/<target> where new inputs go. Prints executions per target; exits
# non-zero when any target found a crash, leak or sanitizer report (the input is saved
# under $FUZZ_BUILD/artifacts/<target>/).
#
#   FUZZ_SECONDS=60 FUZZ_TARGETS="graph_text idx" FUZZ_FLAGS="-seed=1" fuzz/run.sh
set -uo pipefail
cd "$(dirname "$0")/.."

FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_TARGETS=${FUZZ_TARGETS:-}
FUZZ_FLAGS=${FUZZ_FLAGS:-}
JOBS=${JOBS:-$(nproc)}

if ! command -v clang++-16 >/dev/null; then
  echo "fuzz: clang++-16 not found (scripts/install-deps installs clang-16 and libclang-rt-16-dev)" >&2
  exit 2
fi
if [ ! -e /usr/lib/llvm-16/lib/libomp.so ]; then
  echo "fuzz: clang 16's OpenMP runtime is missing (apt-get install libomp-16-dev)" >&2
  exit 2
fi

if [ ! -f "$FUZZ_BUILD/CMakeCache.txt" ]; then
  # -O2 -g without NDEBUG: fast enough, readable stacks, and assertions stay on.
  CC=clang-16 CXX=clang++-16 cmake -S . -B "$FUZZ_BUILD" $(command -v ninja >/dev/null && echo -G Ninja) \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g" \
    -DBATON_FUZZ=ON -DBATON_SANITIZE=ON \
    -DBATON_TESTS=OFF -DBATON_BENCH=OFF -DBATON_EXAMPLES=OFF || exit 1
fi
cmake --build "$FUZZ_BUILD" -j "$JOBS" --target baton-fuzzers || exit 1

if [ -z "$FUZZ_TARGETS" ]; then
  for t in graph_text checkpoint idx cli; do
    [ -x "$FUZZ_BUILD/bin/${t}_fuzz" ] && FUZZ_TARGETS="$FUZZ_TARGETS $t"
  done
fi

# UBSan only reports by default; halting makes every report a finding libFuzzer keeps.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:handle_abort=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/fuzz/lsan.supp:print_suppressions=0}

max_len() {
  case $1 in
    graph_text) echo 4096 ;;
    checkpoint) echo 4096 ;;
    idx) echo 2048 ;;
    cli) echo 512 ;;
  esac
}

failed=()
summary=()
for t in $FUZZ_TARGETS; do
  bin="$FUZZ_BUILD/bin/${t}_fuzz"
  scratch="$FUZZ_BUILD/corpus/$t"
  artifacts="$FUZZ_BUILD/artifacts/$t"
  log="$FUZZ_BUILD/fuzz-$t.log"
  mkdir -p "$scratch" "$artifacts"
  dict=()
  [ -f "fuzz/$t.dict" ] && dict=("-dict=fuzz/$t.dict")
  echo "== fuzz $t for ${FUZZ_SECONDS}s (log: $log)"
  # shellcheck disable=SC2086
  "$bin" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 -max_len="$(max_len "$t")" \
    -timeout=30 -rss_limit_mb=4096 -artifact_prefix="$artifacts/" "${dict[@]}" $FUZZ_FLAGS \
    "$scratch" "fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  line=$(printf '%-11s %10s execs  %6s exec/s  %s' "$t" "${execs:-?}" "${rate:-?}" "${cov:-}")
  if [ $rc -ne 0 ]; then
    failed+=("$t")
    line="$line  FAILED (exit $rc)"
    grep -E '^(==[0-9]+==ERROR|SUMMARY|FUZZ FINDING|.*runtime error)' "$log" | head -5
    ls -t "$artifacts" | head -3 | sed "s|^|  artifact: $artifacts/|"
  fi
  echo "$line"
  summary+=("$line")
done

echo "== fuzz summary (${FUZZ_SECONDS}s per target)"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: findings in ${failed[*]}; see the logs and artifacts in $FUZZ_BUILD" >&2
  exit 1
fi
