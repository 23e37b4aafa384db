#!/usr/bin/env bash
# Runs the criterion `tick` bench (the Rust core) and the Node bench of the JavaScript port of
# the seed's supervisor on the same fixture shape, alternately for ROUNDS rounds, and prints the
# core-vs-JS ratio per path and size (the median of the rounds).
#
#   benches/js/compare.sh                  # one round
#   ROUNDS=3 benches/js/compare.sh         # three alternating rounds
#   PLOT=docs/failover-tick.svg benches/js/compare.sh   # also draw the log-log picture
#
# Needs cargo and node (v20+). Results: target/tick-compare/ (one folder per round).
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS="${ROUNDS:-1}"
OUT=target/tick-compare
rm -rf "$OUT"
mkdir -p "$OUT"

node benches/js/check_port.mjs
cargo bench -p switchyard-benches --bench tick --no-run
for round in $(seq 1 "$ROUNDS"); do
  dir="$OUT/round-$round"
  mkdir -p "$dir"
  echo "== round $round of $ROUNDS: core (criterion)" >&2
  cargo bench -p switchyard-benches --bench tick -- --warm-up-time 1 --measurement-time 3 \
    >"$dir/criterion.txt" 2>&1
  cp -r target/criterion/failover_tick "$dir/criterion"
  echo "== round $round of $ROUNDS: JavaScript port (node $(node --version))" >&2
  node --expose-gc benches/js/bench_tick.mjs >"$dir/js.json"
done

node benches/js/compare.mjs "$OUT" ${PLOT:+--plot "$PLOT"}
