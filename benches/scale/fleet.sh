#!/usr/bin/env bash
# SCALE-6 / HO-L3: the director at fleet size (benches/benches/director_fleet.rs) on a durable
# throwaway PostgreSQL, with the release `switchyard` it runs built first. Keeps its output in
# benches/scale/fleet-LABEL.txt:
#
#   LABEL=after SWEEP=1 benches/scale/fleet.sh
#
# HOSTS (default 1000000), PHASE_S (each phase, s; default 120) and SWEEP (1: also time a full
# sweep at the defaults, about 9 minutes at 1M hosts) are passed on.
set -euo pipefail
cd "$(dirname "$0")/../.."
LABEL=${LABEL:-run}
cargo build --release -p switchyard-tools --bin switchyard 2>&1 | tail -n 1
cargo bench -p switchyard-benches --bench director_fleet --no-run 2>&1 | tail -n 1
export SWITCHYARD_TEST_PG_DURABLE=1
export SWITCHYARD_FLEET_HOSTS=${HOSTS:-1000000}
export SWITCHYARD_FLEET_PHASE_S=${PHASE_S:-120}
export SWITCHYARD_FLEET_SWEEP=${SWEEP:-0}
export SWITCHYARD_BIN=$PWD/target/release/switchyard
{
  echo "commit $(git rev-parse --short HEAD) ($(git log -1 --format=%s | cut -c1-80))"
  if ! git diff --quiet HEAD -- . ':!benches/scale'; then
    echo "with uncommitted changes:"; git diff --stat HEAD -- . ':!benches/scale'
  fi
  echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, load $(uptime | sed 's/.*load average: //')"
  cargo bench -p switchyard-benches --bench director_fleet 2>/dev/null
  echo "load at the end: $(uptime | sed 's/.*load average: //')"
} | tee "benches/scale/fleet-$LABEL.txt"
