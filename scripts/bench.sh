#!/usr/bin/env bash
# The throughput benchmark: generates an `orders` table in PostgreSQL, then
# measures these scenarios (the default set: ceiling, null, dynoxide, export,
# memory):
#   read ceiling  `sql2ddb run --dry-run`: every page read and mapped, nothing written
#   null sink     into `sql2ddb-testkit null-sink`, which parses each
#                 BatchWriteItem and answers {"UnprocessedItems":{}}
#   dynoxide      into the embedded DynamoDB-compatible server (`--endpoint
#                 local`, in the sql2ddb process, data in a SQLite file)
#   export        `sql2ddb export` to a directory, gzip and zstd (import-from-S3
#                 files; its target: at least the null sink's rate)
#   sdk           the yardstick: a bare aws-sdk-dynamodb loop
#                 (`sql2ddb-testkit sdk-load`) sending the same items, prebuilt
#                 in memory before its clock starts (from an untimed export),
#                 into a null sink with the same concurrency; with `null` in
#                 the same run, the last lines compare the two
#   verify        `sql2ddb verify --deep` of the table an untimed run wrote
#                 into a `sql2ddb-testkit dynamodb` server (its own process:
#                 the verifier's CPU is its own), against a bare read of the
#                 source (`run --dry-run`) and a bare parallel Scan
#                 (`sql2ddb-testkit scan`) of the same table in the same run;
#                 the last line compares them
#   lambda        the Lambda worker handler (crates/lambda), called in process
#                 with SQS events of 10 messages holding the same items as
#                 500-item pages (encoded before its clock starts), into a
#                 null sink, each batch recorded in a `sql2ddb-testkit
#                 dynamodb` process; its CPU per item is the write side's
#   worker        the `sql2ddb worker` write path (crates/engine example
#                 queue_worker_bench): the same 500-item pages as SQS message
#                 bodies, encoded before its clock starts, taken from an
#                 in-memory queue that decodes each as it is received, written
#                 into a null sink and recorded as the lambda scenario does;
#                 with `lambda` in the same run, the last lines compare their
#                 CPU per item
#   codec         the queue message codec (crates/queue example
#                 codec_bench): 200,000 synthetic items shaped like the
#                 orders, in 500-item pages, encoded and decoded in
#                 format 4 (zstd, migration pages) and, for the same keys,
#                 format 2 (update pages), in turns in one process; the
#                 last lines print CPU per item and body bytes per item of
#                 each
#   memory        the heap bytes per item in flight (crates/testkit example
#                 item_memory): the first 100,000 items of an untimed export
#                 as a run holds them (serialised once, with their key values
#                 and source key) and as attribute maps, counted by the
#                 allocator; the last lines print both and the overhead over
#                 the item's size by DynamoDB's rules
#   update        `sql2ddb update` of every item (a parallel Scan in 8
#                 segments, a `where` every item meets, one conditional
#                 UpdateItem each): ROWS synthetic items served by a null sink
#                 (`null-sink --scan-items`), then at most 100,000 of them
#                 loaded (untimed, `sql2ddb-testkit load`) into a
#                 `sql2ddb-testkit dynamodb` server
#   capacity      at the service's limit (scripts/bench-capacity.sh): three
#                 data sets of --capacity-rows rows (uniform keys; item
#                 collections of 200 read in key order; 4 keys holding 20%)
#                 written by `sql2ddb run`, by the worker write path
#                 (example queue_worker_bench) and by the bare SDK loop with the
#                 SDK's standard and adaptive retry modes into
#                 `sql2ddb-testkit proxy --capacity` (2,000 WCU/s over 8
#                 partitions of 250, no burst) in front of a null sink;
#                 prints time / ideal, throttled calls, retried items and
#                 consumed / needed write units of each (not the table below)
#   follow        zero-downtime changes (scripts/bench-follow.sh): a
#                 PostgreSQL (or, with --follow-source mariadb, MariaDB)
#                 table of --follow-rows rows loaded by `run --follow` into
#                 a null sink, then the lag while the source takes
#                 --follow-rate row updates a second, and the apply rate of
#                 a backlog of one update per row (not the table below)
# and prints, per run: rows, wall seconds, items per second, CPU seconds per
# million items, peak RSS, the share of the read ceiling's rate, and for
# exports the file bytes per item.
#
#   scripts/bench.sh [--rows N] [--clean] [--skip-build] [--only SCENARIOS]
#                    [--capacity-rows N] [--capacity-scale S]
#                    [--follow-rows N] [--follow-rate R] [--follow-secs S]
#                    [--follow-source postgres|mariadb] [-- RUN ARGS…]
#
#   --rows N        rows to generate (default 1000000); the data lives in schema
#                   bench_<N> and is reused by later runs
#   --clean         drop the bench_<N> schema afterwards
#   --skip-build    use the release binaries already built
#   --only LIST     comma-separated subset of:
#                   ceiling,null,dynoxide,export,memory,sdk,lambda,worker,update,verify,codec,capacity,follow,
#                   pointer-memory
#   --pointer-messages N  messages of the pointer-memory scenario, each with
#                   a pointer item of its own (default 1000000)
#   --capacity-rows N   rows of each capacity data set (default 20000: an
#                   ideal of 10 model seconds); kept in schema bench_capacity_<N>
#   --capacity-scale S  the capacity model's seconds per real second
#                   (default 1); under 1 slows the model for slow builds
#   --follow-rows N     rows of the follow scenario's table (default 100000)
#   --follow-rate R     row updates a second while the lag is measured
#                   (default 5000)
#   --follow-secs S     how long the lag is measured (default 30)
#   --follow-source DB  the follow scenario's source: postgres (a logical
#                   replication slot; default) or mariadb (the binary log)
#   -- RUN ARGS     passed to every `sql2ddb run` (e.g. -- --concurrency 16),
#                   not to `sql2ddb export`
#
# BENCH_DATABASE_URL overrides the PostgreSQL URL
# (default postgres://root@127.0.0.1:5432/test), BENCH_MARIADB_URL the
# MariaDB one of --follow-source mariadb (default
# mysql://root@127.0.0.1:3306/test). Everything binds to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

rows=1000000
clean=false
build=true
only="ceiling,null,dynoxide,export,memory"
capacity_rows=20000
pointer_messages=1000000
capacity_scale=1
follow_rows=100000
follow_rate=5000
follow_secs=30
follow_source=postgres
run_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --rows) rows=${2:?--rows needs a number}; shift 2 ;;
    --clean) clean=true; shift ;;
    --skip-build) build=false; shift ;;
    --only) only=${2:?--only needs a list}; shift 2 ;;
    --capacity-rows) capacity_rows=${2:?--capacity-rows needs a number}; shift 2 ;;
    --pointer-messages) pointer_messages=${2:?--pointer-messages needs a number}; shift 2 ;;
    --capacity-scale) capacity_scale=${2:?--capacity-scale needs a number}; shift 2 ;;
    --follow-rows) follow_rows=${2:?--follow-rows needs a number}; shift 2 ;;
    --follow-rate) follow_rate=${2:?--follow-rate needs a number}; shift 2 ;;
    --follow-secs) follow_secs=${2:?--follow-secs needs a number}; shift 2 ;;
    --follow-source) follow_source=${2:?--follow-source needs postgres or mariadb}; shift 2 ;;
    --) shift; run_args=("$@"); break ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench: unknown argument $1 (see --help)" >&2; exit 1 ;;
  esac
done
if ! [[ $rows =~ ^[1-9][0-9]*$ ]]; then
  echo "bench: --rows must be a positive integer, got $rows" >&2; exit 1
fi
if ! [[ $capacity_rows =~ ^[1-9][0-9]*$ ]]; then
  echo "bench: --capacity-rows must be a positive integer, got $capacity_rows" >&2; exit 1
fi
for n in "$follow_rows" "$follow_rate" "$follow_secs"; do
  if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then
    echo "bench: --follow-rows, --follow-rate and --follow-secs take positive integers, got $n" >&2; exit 1
  fi
done
case $follow_source in
  postgres | mariadb) ;;
  *) echo "bench: --follow-source takes postgres or mariadb, got $follow_source" >&2; exit 1 ;;
esac
if ! [[ $capacity_scale =~ ^[0-9]*\.?[0-9]+$ ]] || ! awk -v s="$capacity_scale" 'BEGIN { exit !(s > 0) }'; then
  echo "bench: --capacity-scale must be a positive number, got $capacity_scale" >&2; exit 1
fi

db_url=${BENCH_DATABASE_URL:-postgres://root@127.0.0.1:5432/test}
schema="bench_${rows}"
bin_dir="${CARGO_TARGET_DIR:-target}/release"
log() { echo "bench: $*" >&2; }

need() { # program path or name, Debian package
  if [ -x "$1" ] || command -v "$1" >/dev/null; then return 0; fi
  log "installing $2"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}
need psql postgresql-client
need jq jq
need /usr/bin/time time # GNU time: peak RSS and CPU seconds of a process
if [[ ,$only, == *,follow,* && $follow_source == mariadb ]]; then need mariadb mariadb-client; fi

if $build; then
  log "building release binaries"
  # One cargo invocation for every binary and example the scenarios need:
  # features are unified across the packages, so each dependency (the AWS SDK
  # above all) is built once instead of once per feature set.
  pkgs=(-p sql2ddb -p sql2ddb-testkit)
  examples=()
  if [[ ,$only, == *,lambda,* ]]; then pkgs+=(-p sql2ddb-lambda); examples+=(--example worker_bench); fi
  if [[ ,$only, == *,worker,* || ,$only, == *,capacity,* ]]; then pkgs+=(-p sql2ddb-engine); examples+=(--example queue_worker_bench); fi
  if [[ ,$only, == *,memory,* ]]; then examples+=(--example item_memory); fi
  if [[ ,$only, == *,pointer-memory,* ]]; then pkgs+=(-p sql2ddb-engine); examples+=(--example pointer_memory); fi
  if [[ ,$only, == *,codec,* ]]; then pkgs+=(-p sql2ddb-queue); examples+=(--example codec_bench); fi
  cargo build --release --locked "${pkgs[@]}" --bins ${examples[@]+"${examples[@]}"}
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/sql2ddb-bench.XXXXXX")
servers=() # pids of the testkit servers still running
cleanup() {
  for pid in ${servers[@]+"${servers[@]}"}; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  if declare -F follow_cleanup >/dev/null; then follow_cleanup; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sql() { psql "$db_url" -X -q -v ON_ERROR_STOP=1 -At "$@"; }

# --- data: created once per row count, in one transaction, so a table that
# exists is complete.
# The capacity scenario has data sets of its own.
orders=false # only the capacity and follow scenarios make their own data
for scenario in ${only//,/ }; do
  case $scenario in capacity | follow | pointer-memory) ;; *) orders=true ;; esac
done
have=$(sql -c "SELECT to_regclass('${schema}.orders') IS NOT NULL")
if $orders && [ "$have" != t ]; then
  log "generating $rows rows in ${schema}.orders"
  started=$(date +%s)
  sql -1 <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS ${schema} CASCADE;
CREATE SCHEMA ${schema};
CREATE TABLE ${schema}.orders (
  order_id    bigint PRIMARY KEY,
  customer_id integer NOT NULL,
  status      text NOT NULL,
  currency    text NOT NULL,
  total       numeric(12,2) NOT NULL,
  quantity    integer NOT NULL,
  created_at  timestamptz NOT NULL,
  shipped     boolean NOT NULL,
  sku         text NOT NULL,
  note        text
);
INSERT INTO ${schema}.orders
SELECT g,
       1 + (g * 7919) % 100000,
       (ARRAY['new','paid','shipped','delivered','returned'])[1 + g % 5],
       'EUR',
       ((g * 37) % 100000) / 100.0,
       1 + g % 9,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second',
       g % 3 = 0,
       'SKU-' || lpad((g % 5000)::text, 6, '0'),
       md5(g::text) || ' ' || md5((g + 1)::text) || ' ' || md5((g + 2)::text)
FROM generate_series(1::bigint, ${rows}) AS g;
SQL
  sql -c "VACUUM ANALYZE ${schema}.orders"
  log "generated in $(( $(date +%s) - started ))s"
fi
if $orders; then
  count=$(sql -c "SELECT count(*) FROM ${schema}.orders")
  if [ "$count" != "$rows" ]; then
    log "${schema}.orders has $count rows, expected $rows; rerun with --clean"; exit 1
  fi
  row_bytes=$(sql -c "SELECT pg_relation_size('${schema}.orders') / ${rows}")
  log "${schema}.orders: $count rows, ~${row_bytes} bytes per row"
fi

needed=(sql2ddb sql2ddb-testkit)
if [[ ,$only, == *,lambda,* ]]; then needed+=(examples/worker_bench); fi
if [[ ,$only, == *,worker,* || ,$only, == *,capacity,* ]]; then needed+=(examples/queue_worker_bench); fi
if [[ ,$only, == *,memory,* ]]; then needed+=(examples/item_memory); fi
if [[ ,$only, == *,pointer-memory,* ]]; then needed+=(examples/pointer_memory); fi
if [[ ,$only, == *,codec,* ]]; then needed+=(examples/codec_bench); fi
for b in "${needed[@]}"; do
  [ -x "$bin_dir/$b" ] || { log "$bin_dir/$b is missing (run without --skip-build)"; exit 1; }
done

cat >"$work/orders.toml" <<TOML
version = 1

[source]
url = "${db_url}"

[target]
table = "bench_orders"
create = true
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }

[[entity]]
name = "order"
from = "${schema}.orders"
pk = "CUSTOMER#{customer_id}"
sk = "ORDER#{order_id:010}"
[entity.attributes]
entity = "order"
TOML

results="$work/results.tsv"
: >"$results"

# The measuring functions: measure, timed, self_timed, serve, stop, …
# shellcheck source=scripts/bench-measure.sh
source scripts/bench-measure.sh

has() { [[ ,$only, == *,$1,* ]]; }

if has ceiling; then
  measure "read ceiling (--dry-run)" --dry-run
fi

if has null; then
  start_sink
  measure "null sink" --endpoint "$sink_url"
  # The sink's own CPU time (utime + stime, in clock ticks) shares the host.
  sink_cpu=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.1f", ($14 + $15) / hz }' "/proc/$sink_pid/stat")
  stop "$sink_pid"
  sink_items=$(sed -n '2,$p' "$work/sink.out" | jq -r '.items')
  if [ "$sink_items" -lt "$rows" ]; then
    log "the null sink received $sink_items items, expected at least $rows"; exit 1
  fi
  log "the null sink process used ${sink_cpu} CPU seconds"
fi

if has sdk; then
  # The same items, from an untimed export, sent by the bare SDK loop with
  # the concurrency `run` used (`-- --concurrency N`, else the default 8).
  concurrency=8
  for ((i = 0; i < ${#run_args[@]}; i++)); do
    if [ "${run_args[$i]}" = --concurrency ]; then concurrency=${run_args[$((i + 1))]}; fi
  done
  export_items sdk
  start_sink
  log "running: sdk (bare loop)"
  before=$(host_cpu)
  /usr/bin/time -v -o "$work/sdk.time" "$bin_dir/sql2ddb-testkit" sdk-load --endpoint "$sink_url" \
    --table bench_orders --items "$work/sdk-items/data" --concurrency "$concurrency" >"$work/sdk.json"
  after=$(host_cpu)
  stop "$sink_pid"
  # Wall and CPU seconds of the sending only, as the load measured them.
  self_timed "sdk (bare loop)" "$work/sdk" "$before" "$after"
  rm -rf "$work/sdk-items" "$work/runs"
fi

if has lambda; then
  queue_bench "lambda worker handler" "$work/lambda" worker_bench
fi

if has worker; then
  queue_bench "queue worker" "$work/worker" queue_worker_bench
fi

if has memory; then
  [ -d "$work/queue-items" ] || export_items queue
  log "running: memory per item in flight"
  "$bin_dir/examples/item_memory" --items "$work/queue-items/data" --count 100000 >"$work/memory.json"
fi
rm -rf "$work/queue-items"

if has pointer-memory; then
  # A worker writing one pointer item of its own per message, a million of
  # them: its resident set sampled along the way must stay flat.
  start_sink
  serve progress dynamodb --port 0
  progress_pid=$served_pid progress_url=$served_url
  log "running: worker memory over $pointer_messages messages with distinct pointer items"
  "$bin_dir/examples/pointer_memory" --endpoint "$sink_url" --progress-endpoint "$progress_url" \
    --table bench_pointers --messages "$pointer_messages" >"$work/pointer-memory.json" 2>"$work/pointer-memory.err" \
    || { log "the pointer-memory scenario failed"; cat "$work/pointer-memory.err" >&2; exit 1; }
  stop "$sink_pid" "$progress_pid"
fi

if has codec; then
  log "running: queue message codec"
  "$bin_dir/examples/codec_bench" --items 200000 >"$work/codec.json"
fi

if has update; then
  update_job bench_orders >"$work/update.toml"
  serve update-sink null-sink --port 0 --keys PK:S,SK:S --scan-items "$rows"
  update_sink_pid=$served_pid
  update_run "update (null sink)" "$work/update-null" "$rows" "$served_url"
  sink_cpu=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.1f", ($14 + $15) / hz }' "/proc/$update_sink_pid/stat")
  stop "$update_sink_pid"
  sink_updates=$(sed -n '2,$p' "$work/update-sink.out" | jq -r '"\(.scanned_items) \(.update_items)"')
  if [ "$sink_updates" != "$rows $rows" ]; then
    log "the null sink served and received (scanned, updated) $sink_updates, expected $rows each"; exit 1
  fi
  log "the null sink process (scans and updates) used ${sink_cpu} CPU seconds"

  # On dynoxide: at most 100,000 of the same items, loaded untimed.
  update_db_items=$(( rows < 100000 ? rows : 100000 ))
  serve update-db dynamodb --port 0
  update_db_pid=$served_pid
  log "loading $update_db_items items for the update scenario (untimed)"
  "$bin_dir/sql2ddb-testkit" load --endpoint "$served_url" --table bench_orders --keys PK:S,SK:S \
    --items "$update_db_items" >"$work/update-load.json" 2>"$work/update-load.err" \
    || { log "loading dynoxide for the update scenario failed"; cat "$work/update-load.err" >&2; exit 1; }
  update_run "update (dynoxide)" "$work/update-db" "$update_db_items" "$served_url"
  stop "$update_db_pid"
fi

if has verify; then
  # verify --deep of the table a run wrote into a dynoxide server, then a
  # bare parallel Scan of it and a bare read of the source, in that order.
  serve verify-db dynamodb --port 0
  verify_pid=$served_pid verify_url=$served_url
  log "loading the table for the verify scenario (untimed)"
  "$bin_dir/sql2ddb" run "$work/orders.toml" --endpoint "$verify_url" --runs-dir "$work/runs" \
    --json --quiet >"$work/verify-load.json" 2>"$work/verify-load.err" \
    || { log "the run for the verify scenario failed"; cat "$work/verify-load.err" >&2; exit 1; }
  timed "verify --deep" "$work/verify" "$rows" "$bin_dir/sql2ddb" verify "$work/orders.toml" --deep \
    --endpoint "$verify_url" --runs-dir "$work/runs" --segments 4 --json
  identical=$(jq -r '[.entities[].identical] | add' "$work/verify.json")
  if [ "$identical" != "$rows" ]; then
    log "verify --deep: $identical items identical, expected $rows"; jq . "$work/verify.json" >&2; exit 1
  fi
  timed "verify: bare scan" "$work/verify-scan" "$rows" "$bin_dir/sql2ddb-testkit" scan \
    --endpoint "$verify_url" --table bench_orders --segments 4
  scanned=$(jq -r '.items' "$work/verify-scan.json")
  if [ "$scanned" != "$rows" ]; then log "verify: $scanned items scanned, expected $rows"; exit 1; fi
  stop "$verify_pid"
  measure "verify: source read" --dry-run
fi

if has dynoxide; then
  measure "dynoxide (embedded)" --endpoint local
fi

if has capacity; then
  # shellcheck source=scripts/bench-capacity.sh
  source scripts/bench-capacity.sh
  capacity_scenario
fi

if has follow; then
  # shellcheck source=scripts/bench-follow.sh
  source scripts/bench-follow.sh
  follow_scenario
fi

if has export; then
  for compression in gzip zstd; do
    # Each export replaces the one before in the same folder.
    measure "export ($compression)" --out "$work/export" --compression "$compression" \
      --if-not-empty truncate
  done
fi

# --- the table
if [ -s "$results" ]; then
ceiling_rate=$(awk -F'\t' '$1 ~ /^read ceiling/ { if ($3 > 0) print $2 / $3 }' "$results")
echo
echo "sql2ddb bench: ${rows} rows of ${schema}.orders (~${row_bytes} bytes per row), $(nproc) CPUs"
awk -F'\t' -v ceiling="${ceiling_rate:-0}" '
  BEGIN {
    printf "%-26s %10s %8s %10s %14s %12s %10s %11s %11s\n", "scenario", "rows", "wall s", "items/s", "CPU s/M items", "peak RSS MB", "% ceiling", "host CPU %", "bytes/item"
  }
  {
    rate = ($3 > 0) ? $2 / $3 : 0
    share = (ceiling > 0) ? sprintf("%.0f%%", 100 * rate / ceiling) : "-"
    printf "%-26s %10d %8.2f %10.0f %14.2f %12.1f %10s %11s %11s\n", $1, $2, $3, rate, $4 / ($2 / 1e6), $5 / 1024, share, $6 "%", $7
  }
' "$results"
fi

# sql2ddb against the bare SDK loop, both into a null sink, in this run.
awk -F'\t' '
  $1 == "null sink" { r = $2 / $3; c = 1e6 * $4 / $2 }
  $1 == "sdk (bare loop)" { sr = $2 / $3; sc = 1e6 * $4 / $2 }
  END {
    if (r > 0 && sr > 0)
      printf "\nsql2ddb run / bare SDK loop: %.2fx the items/s; CPU per item: sql2ddb %.2f us (read, map, check and send), SDK %.2f us (send only)\n", r / sr, c, sc
  }
' "$results"

# The Lambda handler against the worker process's write path, same pages.
awk -F'\t' '
  $1 == "lambda worker handler" { l = 1e6 * $4 / $2 }
  $1 == "queue worker" { w = 1e6 * $4 / $2 }
  END {
    if (l > 0 && w > 0)
      printf "\nlambda handler CPU per item / queue worker CPU per item: %.2f us / %.2f us = %.2fx\n", l, w, l / w
  }
' "$results"

# verify --deep against reading the source and scanning the table alone.
awk -F'\t' '
  $1 == "verify --deep" { n = $2; vw = $3; vc = $4 }
  $1 == "verify: bare scan" { sw = $3; sc = $4 }
  $1 == "verify: source read" { rw = $3; rc = $4 }
  END {
    if (vw > 0 && rw + sw > 0)
      printf "\nverify --deep / (source read + bare scan): %.2fx the wall time, %.2fx the CPU; verifier CPU per item compared %.2f us (target: at most 1.5x the time)\n", vw / (rw + sw), (rc + sc > 0) ? vc / (rc + sc) : 0, 1e6 * vc / n
  }
' "$results"
# Its memory must not grow with the table: what it holds beyond reading the
# source (the same reads) stays under a bound no per-key structure fits in.
verify_extra_mb=$(awk -F'\t' '
  $1 == "verify --deep" { v = $5 } $1 == "verify: source read" { r = $5 }
  END { if (v > 0 && r > 0) printf "%.0f", (v - r) / 1024 }
' "$results")
if [ -n "$verify_extra_mb" ]; then
  echo "verify --deep held ${verify_extra_mb} MB beyond the source read's peak RSS (bound: 96 MB whatever the rows; a map of every key would pass it from about a million rows)"
  if [ "$verify_extra_mb" -gt 96 ]; then
    log "verify --deep's memory grows with the table: ${verify_extra_mb} MB beyond the source read"; exit 1
  fi
fi

# Memory per item in flight: what a run holds for each item between the
# reader and the writers (target: under 1 KB beyond the item itself).
if [ -s "$work/codec.json" ]; then
  jq -r 'def r: . * 100 | round / 100; "\nqueue message codec, \(.items) items of \(.item_text_bytes) bytes of text: format \(.format) (migration pages) decodes in \(.decode_us_per_item | r) us per item and encodes in \(.encode_us_per_item | r) us, \(.body_bytes_per_item | r) body bytes per item; format \(.update_format) (update pages of the same keys): \(.update_decode_us_per_item | r) us, \(.update_encode_us_per_item | r) us, \(.update_body_bytes_per_item | r) bytes"' "$work/codec.json"
fi
if [ -s "$work/pointer-memory.json" ]; then
  jq -r '"\nworker memory, \(.messages) messages each moving a pointer item of its own (\(.seconds | round) s, \(.cpu_seconds | round) CPU s): " + ([.samples[] | "RSS \(.rss_kb / 1024 | round) MB after \(.messages)"] | join(", ")) + "; peak \([.samples[].peak_rss_kb] | max / 1024 | round) MB"' "$work/pointer-memory.json"
  jq -e '(.samples | last | .rss_kb) <= 2 * (.samples | first | .rss_kb) + 16384' "$work/pointer-memory.json" >/dev/null \
    || { log "the worker's memory grew with the pointer items it wrote"; exit 1; }
fi
if [ -s "$work/memory.json" ]; then
  jq -r '"\nmemory per item in flight (first \(.items) items): \(.encoded_bytes) bytes serialised once, \(.encoded_overhead) beyond the \(.item_bytes) bytes of the item by DynamoDB size rules (target: under 1024); as an attribute map: \(.mapped_bytes)"' "$work/memory.json"
fi

if has follow; then
  follow_report
fi

if has capacity; then
  capacity_report
fi

if $clean; then
  log "dropping schema ${schema}"
  sql -c "DROP SCHEMA IF EXISTS ${schema} CASCADE"
  if has capacity; then sql -c "DROP SCHEMA IF EXISTS bench_capacity_${capacity_rows} CASCADE"; fi
fi
