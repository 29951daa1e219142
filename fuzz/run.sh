#!/usr/bin/env bash
# Runs every fuzz target of the workspace (or the ones named) for a while each; see
# fuzz/README.md.
#
#   fuzz/run.sh                      # every target, 60 s of CPU each (the short run)
#   fuzz/run.sh --cpu 1800 csv uci   # 30 CPU-minutes each for two targets
#   fuzz/run.sh --jobs 2 --cpu 1800  # two targets at a time
#   fuzz/run.sh --wall 1200 ...      # and at most 20 minutes of wall-clock time each
#
# Each target runs as its own libFuzzer process under `nice -n 15` on the corpus
# fuzz/corpus/<target> (grown, not committed) seeded from fuzz/seeds/<target>
# (committed), until it has used the given CPU time (measured from /proc, so a busy
# machine lengthens the run instead of shortening the fuzzing), or until it finds a
# crash, a hang (-timeout) or an allocation over -rss_limit_mb / -malloc_limit_mb, or
# (with --wall) until that many seconds of wall-clock time have passed.
# Findings go to fuzz/artifacts/<target>/; the script then exits non-zero.
# A summary line per target is printed at the end and appended to fuzz/campaign.log:
# target, CPU seconds, executions, coverage (edges) and features, findings.
set -euo pipefail
cd "$(dirname "$0")"

CPU=60
WALL=0
JOBS=1
TARGETS=()
while (($#)); do
  case "$1" in
    --cpu) CPU="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --wall) WALL="$2"; shift 2 ;;
    -h|--help) sed -n 2,17p "$0"; exit 0 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
ALL=(uci csv parquet rowstore model_file checkpoint cli_args)
((${#TARGETS[@]})) || TARGETS=("${ALL[@]}")

# cargo-fuzz from crates.io; the instrumentation flags it passes need a nightly compiler,
# or the stable one told to accept them (RUSTC_BOOTSTRAP=1).
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  FUZZ=(cargo +nightly fuzz)
else
  export RUSTC_BOOTSTRAP=1
  FUZZ=(cargo fuzz)
fi
# No sanitizer: the code under test is safe Rust apart from the row store's read-only
# mapping; debug assertions and overflow checks are on (cargo fuzz's default).
"${FUZZ[@]}" build -s none --codegen-units 16
BIN=target/x86_64-unknown-linux-gnu/release

run_one() {
  local t="$1" log="logs/$1.log"
  mkdir -p "corpus/$t" "artifacts/$t" logs
  nice -n 15 "$BIN/$t" "corpus/$t" "seeds/$t" \
    -artifact_prefix="artifacts/$t/" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
    -max_total_time=$((WALL > 0 ? WALL : CPU * 20)) -print_final_stats=1 >"$log" 2>&1 &
  local pid=$! tck used=0 now
  tck=$(getconf CLK_TCK)
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    now=$(awk -v t="$tck" '{print int(($14 + $15) / t)}' "/proc/$pid/stat" 2>/dev/null || echo "$used")
    used=$now
    if ((used >= CPU)); then kill -INT "$pid" 2>/dev/null || true; fi
  done
  local rc=0
  wait "$pid" || rc=$?
  local execs cov ft found
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  found=$(find "artifacts/$t" -type f | wc -l)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$used" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$found" |
    tee -a campaign.log
  # libFuzzer exits 0 after -max_total_time, 72 when interrupted at the CPU budget.
  [[ "$found" == 0 ]] && { [[ $rc == 0 ]] || [[ $rc == 72 ]] || [[ $rc == 130 ]]; }
}

printf 'target\tcpu_s\texecs\tcov\tft\tfindings\n'
failed=0
pids=()
for t in "${TARGETS[@]}"; do
  run_one "$t" & pids+=($!)
  if ((${#pids[@]} >= JOBS)); then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit $failed
