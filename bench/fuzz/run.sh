#!/usr/bin/env bash
# Builds the native fuzz targets (native/fuzz/) with libFuzzer + ASan + UBSan, replays
# their seed corpus and regression inputs, then fuzzes each for a bounded time and
# prints executions and crashes. CI runs it bounded (FUZZ_SECONDS=10 FUZZ_SEED=1); it
# installs clang itself when missing. See bench/fuzz/README.md.
#
#   bash bench/fuzz/run.sh                      # every target, 60 s each
#   FUZZ_SECONDS=300 bash bench/fuzz/run.sh     # longer
#   FUZZ_TARGETS="lexical-path fast-path" bash bench/fuzz/run.sh
#   FUZZ_SECONDS=0 bash bench/fuzz/run.sh       # build and replay only
#
# Environment: FUZZ_SECONDS (60), FUZZ_TARGETS (all in native/fuzz/targets.txt),
# FUZZ_OUT (build/fuzz: binaries, the growing corpus, crash artifacts, logs),
# FUZZ_TIMEOUT (5: seconds one input may take before it counts as a hang), FUZZ_SEED
# (libFuzzer's -seed; unset: a new random seed each run), CC (clang),
# FUZZ_SANDBOX_DIR (native/sandbox: the sources under test, e.g. a `git archive` snapshot).
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${FUZZ_SECONDS:-60}
seed=()
[ -z "${FUZZ_SEED:-}" ] || seed=("-seed=$FUZZ_SEED")
out=${FUZZ_OUT:-build/fuzz}
timeout=${FUZZ_TIMEOUT:-5}
cc=${CC:-clang}
sandbox=${FUZZ_SANDBOX_DIR:-native/sandbox}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# --- toolchain: clang with the libFuzzer runtime (Debian: clang, libclang-rt-dev) ---
probe() {
  printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){(void)d;(void)n;return 0;}\n' >"$out/probe.c"
  "$cc" -fsanitize=fuzzer,address,undefined "$out/probe.c" -o "$out/probe" >/dev/null 2>&1
}
if ! probe; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fuzz: installing clang and its libFuzzer runtime (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends clang libclang-rt-dev >/dev/null
  fi
  probe || { echo "fuzz: $cc cannot build -fsanitize=fuzzer; install clang and libclang-rt-dev" >&2; exit 2; }
fi
rm -f "$out/probe" "$out/probe.c"

# --- targets: "name: sources" lines of native/fuzz/targets.txt ---
declare -A sources=()
all=()
while IFS= read -r line; do
  case "$line" in '' | '#'*) continue ;; esac
  name=${line%%:*}
  sources[$name]=${line#*:}
  all+=("$name")
done <native/fuzz/targets.txt
read -r -a targets <<<"${FUZZ_TARGETS:-${all[*]}}"

cflags=(-g -O1 -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -Inative/include "-I$sandbox"
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)

failed=0
summary=()
for t in "${targets[@]}"; do
  [ -n "${sources[$t]+x}" ] || { echo "fuzz: unknown target $t (see native/fuzz/targets.txt)" >&2; exit 2; }
  srcs=()
  read -r -a words <<<"${sources[$t]}" # no globbing: a literal "*" is ours to expand
  for f in "${words[@]}"; do
    if [ "$f" = '*' ]; then
      for g in "$sandbox"/*.c; do [ "$(basename "$g")" = main.c ] || srcs+=("$g"); done
    else
      srcs+=("$sandbox/$f")
    fi
  done
  bin="$out/fuzz-$t"
  echo "== $t: build" >&2
  "$cc" "${cflags[@]}" "native/fuzz/fuzz-$t.c" "${srcs[@]}" -o "$bin" -lpthread

  # Replay: the seeds and every input that once crashed must pass.
  replay=(native/fuzz/corpus/"$t"/*)
  if [ -d "native/fuzz/regressions/$t" ]; then
    shopt -s nullglob
    replay+=(native/fuzz/regressions/"$t"/*)
    shopt -u nullglob
  fi
  echo "== $t: replay ${#replay[@]} seed and regression inputs" >&2
  if ! "$bin" -runs=0 "${replay[@]}" >"$out/$t.replay.log" 2>&1; then
    echo "fuzz: $t fails on a seed or regression input; see $out/$t.replay.log" >&2
    tail -30 "$out/$t.replay.log" >&2
    failed=1
    summary+=("$t|replay failed|-|-|-|-|-")
    continue
  fi
  [ "$seconds" -gt 0 ] || { summary+=("$t|0|0|-|-|-|0"); continue; }

  corpus="$out/corpus/$t"
  artifacts="$out/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  dict=()
  [ -f "native/fuzz/$t.dict" ] && dict=("-dict=native/fuzz/$t.dict")
  case "$t" in lexical-path | fast-path | syscall-decode) dict=("-dict=native/fuzz/paths.dict") ;; esac
  echo "== $t: fuzz for ${seconds}s" >&2
  set +e
  "$bin" -max_total_time="$seconds" -timeout="$timeout" -print_final_stats=1 "${seed[@]}" "${dict[@]}" \
    -artifact_prefix="$artifacts/" "$corpus" "native/fuzz/corpus/$t" >"$out/$t.fuzz.log" 2>&1
  status=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$t.fuzz.log" | tail -1 | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]*' "$out/$t.fuzz.log" | tail -1 | grep -o '[0-9]*$' || true)
  crashes=$(find "$artifacts" -type f -newer "$out/$t.replay.log" | wc -l)
  if [ "$status" -ne 0 ] || [ "$crashes" -gt 0 ]; then
    failed=1
    echo "fuzz: $t CRASHED (exit $status); artifacts in $artifacts, log $out/$t.fuzz.log" >&2
    grep -E 'property failed|ERROR: |SUMMARY|runtime error' "$out/$t.fuzz.log" | head -10 >&2 || true
  fi
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$out/$t.fuzz.log" | tail -1 | grep -o '[0-9]*$' || true)
  size=$(find "$corpus" -type f | wc -l)
  summary+=("$t|$seconds|${execs:-?}|${rate:-?}|${cov:-?}|$size|$crashes")
done

printf '\n| target | seconds | executions | exec/s | coverage (edges) | corpus | crashes |\n|---|---:|---:|---:|---:|---:|---:|\n'
for row in "${summary[@]}"; do
  IFS='|' read -r t s e r c z k <<<"$row"
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$t" "$s" "$e" "$r" "$c" "$z" "$k"
done
exit "$failed"
