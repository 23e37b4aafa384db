#!/usr/bin/env bash
# The scale bench (benches/benches/scale.rs) on a durable throwaway PostgreSQL (fsync,
# synchronous_commit and full_page_writes on), with the relay and cell binaries it measures
# built first. Keeps what it printed, its summary and the per-page CSVs under benches/scale/:
#
#   LABEL=after SIZES=10000,100000,1000000 benches/scale/run.sh
#
# LABEL names the files (benches/scale/LABEL.txt, summary-LABEL.tsv, sweep-LABEL-N.csv);
# SIZES, PHASE_S (each phase's bound, s) and CONNECTIONS (idle WebSockets; 0 skips) are passed
# on. The commit the run was built from (and whether the tree had changes) heads the output.
set -euo pipefail
cd "$(dirname "$0")/../.."
LABEL=${LABEL:-run}
out=benches/scale
cargo build --release -p switchyard-tools --bin switchyard 2>&1 | tail -n 1
cargo bench -p switchyard-benches --bench scale --no-run 2>&1 | tail -n 1
export SWITCHYARD_TEST_PG_DURABLE=1
export SWITCHYARD_SCALE_SIZES=${SIZES:-10000,100000,1000000}
export SWITCHYARD_SCALE_PHASE_S=${PHASE_S:-300}
export SWITCHYARD_SCALE_CONNECTIONS=${CONNECTIONS:-1000}
export SWITCHYARD_SCALE_LABEL=$LABEL
export SWITCHYARD_SCALE_OUT=$PWD/$out
export SWITCHYARD_BIN=$PWD/target/release/switchyard
{
  echo "commit $(git rev-parse --short HEAD) ($(git log -1 --format=%s | cut -c1-80))"
  if ! git diff --quiet HEAD -- . ':!benches/scale'; then
    echo "with uncommitted changes:"; git diff --stat HEAD -- . ':!benches/scale'
  fi
  echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, load $(uptime | sed 's/.*load average: //')"
  cargo bench -p switchyard-benches --bench scale 2>/dev/null
  echo "load at the end: $(uptime | sed 's/.*load average: //')"
} | tee "$out/$LABEL.txt"
