#!/usr/bin/env bash
# The SQL handoff bench (benches/benches/sql_handoff.rs) on one durable PostgreSQL cluster
# (initdb defaults: fsync, synchronous_commit and full_page_writes on), ROUNDS rounds; with
# BEFORE=<an older sql_handoff bench binary> the two binaries alternate in every round, so both
# see the same machine and the same cluster. Prints the medians per binary x workers, and with
# PLOT=<file.svg> draws tx/s and p99 against workers.
#
#   ROUNDS=3 WORKERS=1,8,32 RESIDENTS=0 BEFORE=/path/to/old/sql_handoff PLOT=docs/sql-handoff.svg \
#     benches/sql/compare.sh
#
# RESIDENTS seeds that many hosts on the target cell that stay there (an older binary ignores
# it, and WORKERS: it runs 1, 8 and 32). Needs PostgreSQL's initdb/pg_ctl (as root: runs them as
# the postgres user) and node for the summary.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-3}
WORKERS=${WORKERS:-1,8,32}
RESIDENTS=${RESIDENTS:-0}

cargo bench -p switchyard-benches --bench sql_handoff --no-run 2>/dev/null
AFTER=$(ls -t target/release/deps/sql_handoff-* | grep -v '\.d$' | head -n 1)

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$pgbin/initdb" ] || { echo "compare.sh: no PostgreSQL initdb under /usr/lib/postgresql" >&2; exit 2; }
dir=$(mktemp -d /tmp/switchyard-durable-XXXXXX)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
[ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
as_pg "$pgbin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
as_pg "$pgbin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
trap 'as_pg "$pgbin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null 2>&1; rm -rf "$dir"' EXIT
export SWITCHYARD_TEST_PG_URL="postgres://postgres@127.0.0.1:$port/postgres"
export SWITCHYARD_BENCH_STORES=pg SWITCHYARD_BENCH_WORKERS="$WORKERS" SWITCHYARD_BENCH_RESIDENTS="$RESIDENTS"

results="$dir/results.tsv"
: > "$results"
run() { # label binary round
  echo "round $3: $1 ($(uptime | sed 's/.*load average: //'))" >&2
  "$2" --bench | awk -v l="$1" -v r="$3" -F'|' '/^\| PostgreSQL/ {
      gsub(/ /, ""); print l "\t" r "\t" $3 "\t" $4 "\t" $5 "\t" $6 "\t" $9 "\t" $10 }' >> "$results"
}
for round in $(seq 1 "$ROUNDS"); do
  if [ -n "${BEFORE:-}" ]; then run before "$BEFORE" "$round"; fi
  run after "$AFTER" "$round"
done
node benches/sql/summary.mjs "$results" "${PLOT:-}" "$RESIDENTS"
