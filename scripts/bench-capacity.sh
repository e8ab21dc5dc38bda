# The capacity scenario of scripts/bench.sh, which sources this file after
# setting what it uses: capacity_rows, capacity_scale, db_url, bin_dir,
# work, run_args, servers, and the functions sql, log, serve and stop.
#
# Three data sets of capacity_rows rows each, in schema
# bench_capacity_<rows>, written into `sql2ddb-testkit proxy --capacity` in
# front of a null sink (a provisioned table of 2,000 WCU/s over 8
# partitions of 250 WCU/s, no burst credit; every item one write unit):
#   uniform     one item per partition key (`ITEM#{id}`)
#   collection  item collections read in key order: 200 items per
#               partition key (`CUSTOMER#{customer_id}`), adjacent
#   skewed      4 partition keys hold 20% of the items (5% each), the rest
#               one item per key; the busiest partition makes the ideal
#               longer than the table's
# each by `sql2ddb run`, by the worker path (one worker, and a fleet of four
# sharing --max-wcu 2000), and by the bare SDK loop (`sql2ddb-testkit
# sdk-load`, the same items from an untimed export) with the SDK's standard
# and adaptive retry modes. A fresh model for each load. Each set is also
# planned with `sql2ddb plan --capacity` on the same model, and each load's
# time is shown over the plan's prediction (target: `run` within 15%).
# Then `sql2ddb update` of capacity_rows items a null sink serves to its
# Scan, through the same model: its Scan pages charged in read units, its
# conditional writes in write units; its ideal is the larger of the write
# units over what the table and its busiest partition allow and the read
# units over the partitions' read capacity, from the model's own counts.
# shellcheck shell=bash
# shellcheck disable=SC2154 # those variables are bench.sh's

capacity_schema="bench_capacity_${capacity_rows}"
capacity_table="bench_capacity"
capacity_results="$work/capacity.tsv"

# capacity_data: the three source tables, created once per row count in one
# transaction (a schema that exists is complete).
capacity_data() {
  local have
  have=$(sql -c "SELECT to_regclass('${capacity_schema}.skewed') IS NOT NULL")
  [ "$have" = t ] && return 0
  log "generating ${capacity_rows} rows per data set in ${capacity_schema}"
  sql -1 <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS ${capacity_schema} CASCADE;
CREATE SCHEMA ${capacity_schema};
CREATE TABLE ${capacity_schema}.uniform (
  id bigint PRIMARY KEY, status text NOT NULL, note text NOT NULL);
INSERT INTO ${capacity_schema}.uniform
SELECT g, (ARRAY['new','paid','shipped','delivered','returned'])[1 + g % 5], md5(g::text)
FROM generate_series(1::bigint, ${capacity_rows}) AS g;
CREATE TABLE ${capacity_schema}.collection (
  customer_id integer NOT NULL, seq integer NOT NULL, status text NOT NULL, note text NOT NULL,
  PRIMARY KEY (customer_id, seq));
INSERT INTO ${capacity_schema}.collection
SELECT (g - 1) / 200, (g - 1) % 200, (ARRAY['new','paid','shipped','delivered','returned'])[1 + g % 5], md5(g::text)
FROM generate_series(1, ${capacity_rows}) AS g;
CREATE TABLE ${capacity_schema}.skewed (
  id bigint PRIMARY KEY, customer_id integer NOT NULL, status text NOT NULL, note text NOT NULL);
INSERT INTO ${capacity_schema}.skewed
SELECT g, CASE WHEN g % 5 = 0 THEN (g / 5) % 4 ELSE 1000 + g END,
       (ARRAY['new','paid','shipped','delivered','returned'])[1 + g % 5], md5(g::text)
FROM generate_series(1::bigint, ${capacity_rows}) AS g;
SQL
}

# capacity_mapping SET: the mapping of data set SET in $work/capacity-SET.toml.
capacity_mapping() {
  local pk sk
  case $1 in
    uniform) pk='ITEM#{id}'; sk='ITEM#{id}' ;;
    collection) pk='CUSTOMER#{customer_id}'; sk='ORDER#{seq:05}' ;;
    skewed) pk='CUSTOMER#{customer_id}'; sk='ITEM#{id:010}' ;;
  esac
  cat >"$work/capacity-$1.toml" <<TOML
version = 1

[source]
url = "${db_url}"

[target]
table = "${capacity_table}"
create = true
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }

[[entity]]
name = "$1"
from = "${capacity_schema}.$1"
pk = "${pk}"
sk = "${sk}"
TOML
}

# capacity_load SET LOADER: one load of SET (LOADER: run, worker, fleet, "sdk standard"
# or "sdk adaptive") through a fresh model; appends
# set, loader, status, items, ideal s, model s, throttled calls, partial
# calls, retried items, consumed units, needed units, plan's predicted s to
# the results.
capacity_load() {
  local set=$1 loader=$2 file="$work/capacity-$1-${2// /-}" code started ended seconds items
  serve capacity-proxy proxy --upstream "$sink_url" --port 0 --capacity "$work/capacity-model.toml"
  local proxy_pid=$served_pid proxy_url=$served_url
  local progress_pid="" progress_url=""
  if [ "$loader" = worker ] || [ "$loader" = fleet ]; then
    serve capacity-progress dynamodb --port 0
    progress_pid=$served_pid progress_url=$served_url
  fi
  log "running: capacity, $set, $loader"
  set +e
  started=$(date +%s.%N)
  case $loader in
    worker)
      # The `sql2ddb worker` write path: the set's items as the pages a
      # reader enqueues, taken from an in-memory queue (no SQS), each batch
      # recorded in a progress table of its own.
      "$bin_dir/examples/queue_worker_bench" --endpoint "$proxy_url" --progress-endpoint "$progress_url" \
        --items "$work/capacity-$set-items/data" --table "$capacity_table" \
        --concurrency "$capacity_concurrency" >"$file.json" 2>"$file.err"
      code=$? ;;
    fleet)
      # Four workers of the same write path taking the pages from one
      # queue, each given the table's 2,000 WCU/s as --max-wcu: they share
      # it through the run's progress table.
      "$bin_dir/examples/queue_worker_bench" --endpoint "$proxy_url" --progress-endpoint "$progress_url" \
        --items "$work/capacity-$set-items/data" --table "$capacity_table" \
        --concurrency "$capacity_concurrency" --workers 4 --max-wcu 2000 >"$file.json" 2>"$file.err"
      code=$? ;;
    run)
      "$bin_dir/sql2ddb" run "$work/capacity-$set.toml" --endpoint "$proxy_url" --runs-dir "$work/runs" \
        --json --quiet ${run_args[@]+"${run_args[@]}"} >"$file.json" 2>"$file.err"
      code=$? ;;
    sdk*)
      "$bin_dir/sql2ddb-testkit" sdk-load --endpoint "$proxy_url" --table "$capacity_table" \
        --items "$work/capacity-$set-items/data" --concurrency "$capacity_concurrency" \
        --retry-mode "${loader#sdk }" >"$file.json" 2>"$file.err"
      code=$? ;;
  esac
  ended=$(date +%s.%N)
  set -e
  stop "$proxy_pid" ${progress_pid:+"$progress_pid"}
  rm -rf "$work/runs"
  items=-
  if [ $code -eq 0 ]; then
    case $loader in
      run) items=$(jq -r '.totals.items_written' "$file.json"); seconds=$(echo "$started $ended" | awk '{ print $2 - $1 }') ;;
      *) items=$(jq -r '.items' "$file.json"); seconds=$(jq -r '.seconds' "$file.json") ;;
    esac
  else
    log "capacity, $set, $loader: exited with $code: $(tail -n 1 "$file.err")"
    seconds=$(echo "$started $ended" | awk '{ print $2 - $1 }')
  fi
  local status=ok
  if [ $code -ne 0 ]; then status="failed"; elif [ "$items" != "$capacity_rows" ]; then status="incomplete"; fi
  sed -n '2,$p' "$work/capacity-proxy.out" >"$file.proxy.json"
  jq -r --arg set "$set" --arg loader "$loader" --arg status "$status" --arg items "$items" \
    --arg seconds "$seconds" --arg scale "$capacity_scale" --arg table "$capacity_table" \
    --slurpfile ideal "$work/capacity-$set-ideal.json" --slurpfile plan "$work/capacity-$set-plan.json" '
    .capacity as $c | ($c.tables[$table] // {}) as $t |
    [$set, $loader, $status, $items, $ideal[0].ideal_seconds, (($seconds | tonumber) * ($scale | tonumber)),
     ($c.provisioned_throughput_exceeded + $c.throttling), $c.partial_calls, $c.refused_items,
     ($t.write_units // 0), $ideal[0].write_units, ($plan[0].capacity.seconds // 0)] | @tsv' "$file.proxy.json" >>"$capacity_results"
}

# capacity_plan SET: `sql2ddb plan --capacity` of SET on the model's table
# (exit 2, warnings, is a plan too: the skewed set's hot keys warn).
capacity_plan() {
  local code=0
  "$bin_dir/sql2ddb" plan "$work/capacity-$1.toml" --json --capacity 2000 --partitions 8 \
    --partition-wcu 250 >"$work/capacity-$1-plan.json" 2>"$work/capacity-plan.err" || code=$?
  if [ $code -ne 0 ] && [ $code -ne 2 ]; then
    log "the plan of $1 failed"; cat "$work/capacity-plan.err" >&2; exit 1
  fi
  log "capacity, $1: plan predicts $(jq -r '.capacity.seconds' "$work/capacity-$1-plan.json") model s, the ideal is $(jq -r '.ideal_seconds' "$work/capacity-$1-ideal.json")"
}

capacity_scenario() {
  capacity_concurrency=8
  for ((i = 0; i < ${#run_args[@]}; i++)); do
    if [ "${run_args[$i]}" = --concurrency ]; then capacity_concurrency=${run_args[$((i + 1))]}; fi
  done
  capacity_data
  cat >"$work/capacity-model.toml" <<TOML
time_scale = ${capacity_scale}
partitions = 8
partition_wcu = 250
burst = false
partition_key = "PK"

[table]
mode = "provisioned"
wcu = 2000
TOML
  : >"$capacity_results"
  start_sink
  local set loader
  for set in uniform collection skewed; do
    capacity_mapping "$set"
    log "exporting the $set items for the capacity scenario (untimed)"
    "$bin_dir/sql2ddb" export "$work/capacity-$set.toml" --out "$work/capacity-$set-items" \
      --compression none --runs-dir "$work/runs" --json --quiet >/dev/null 2>"$work/capacity-export.err" \
      || { log "the export of $set failed"; cat "$work/capacity-export.err" >&2; exit 1; }
    rm -rf "$work/runs"
    "$bin_dir/sql2ddb-testkit" capacity-ideal --capacity "$work/capacity-model.toml" \
      --items "$work/capacity-$set-items/data" >"$work/capacity-$set-ideal.json"
    capacity_plan "$set"
    for loader in run worker fleet "sdk standard" "sdk adaptive"; do
      capacity_load "$set" "$loader"
    done
    rm -rf "$work/capacity-$set-items"
  done
  stop "$sink_pid"
  capacity_update
}

# capacity_update: `sql2ddb update` of every item of a scannable null sink
# through a fresh model; appends its line to the results.
capacity_update() {
  local file="$work/capacity-update" code started ended seconds items=- status=ok
  update_job "$capacity_table" >"$work/capacity-update.toml"
  serve capacity-update-sink null-sink --port 0 --keys PK:S,SK:S --scan-items "$capacity_rows"
  local update_sink_pid=$served_pid
  serve capacity-proxy proxy --upstream "$served_url" --port 0 --capacity "$work/capacity-model.toml"
  local proxy_pid=$served_pid proxy_url=$served_url
  log "running: capacity, update"
  set +e
  started=$(date +%s.%N)
  "$bin_dir/sql2ddb" update "$work/capacity-update.toml" --endpoint "$proxy_url" --runs-dir "$work/runs" \
    --json --quiet >"$file.json" 2>"$file.err"
  code=$?
  ended=$(date +%s.%N)
  set -e
  stop "$proxy_pid" ${progress_pid:+"$progress_pid"} "$update_sink_pid"
  rm -rf "$work/runs"
  seconds=$(echo "$started $ended" | awk '{ print $2 - $1 }')
  if [ $code -eq 0 ]; then
    items=$(jq -r '.updated' "$file.json")
  else
    log "capacity, update: exited with $code: $(tail -n 1 "$file.err")"; status=failed
  fi
  if [ $code -eq 0 ] && [ "$items" != "$capacity_rows" ]; then status=incomplete; fi
  sed -n '2,$p' "$work/capacity-proxy.out" >"$file.proxy.json"
  jq -r --arg status "$status" --arg items "$items" --arg seconds "$seconds" --arg scale "$capacity_scale" \
    --arg table "$capacity_table" --arg rows "$capacity_rows" '
    .capacity as $c | ($c.tables[$table] // {}) as $t |
    ($t.partition_write_units // [0]) as $p |
    ([($t.write_units // 0) / 2000, ($p | max) / 250, (($t.read_half_units // 0) / 2) / (8 * 3000)] | max) as $ideal |
    ["update", "run", $status, $items, $ideal, (($seconds | tonumber) * ($scale | tonumber)),
     ($c.provisioned_throughput_exceeded + $c.throttling), $c.partial_calls, ($c.refused_items + $c.refused_reads),
     ($t.write_units // 0), ($rows | tonumber), 0] | @tsv' "$file.proxy.json" >>"$capacity_results"
}

# capacity_table: the figures, one line per data set and loader.
capacity_report() {
  echo
  echo "capacity: ${capacity_rows} rows per data set; model: provisioned table of 2,000 WCU/s over 8 partitions of 250 WCU/s, no burst credit; time scale ${capacity_scale} model s per real s"
  awk -F'\t' '
    BEGIN {
      printf "%-11s %-13s %-10s %7s %8s %8s %11s %10s %8s %9s %16s %7s %10s\n", "data set", "loader", "status", "items", "ideal s", "model s", "time/ideal", "throttled", "partial", "retried", "consumed/needed", "plan s", "time/plan"
    }
    {
      ratio = ($5 > 0) ? sprintf("%.2f", $6 / $5) : "-"
      waste = ($11 > 0) ? sprintf("%.3f", $10 / $11) : "-"
      versus = ($12 > 0) ? sprintf("%.2f", $6 / $12) : "-"
      printf "%-11s %-13s %-10s %7s %8.1f %8.1f %11s %10d %8d %9d %16s %7.1f %10s\n", $1, $2, $3, $4, $5, $6, ratio, $7, $8, $9, waste, $12, versus
    }
  ' "$capacity_results"
  echo "time/ideal: the load's wall time (sql2ddb run: the whole process; worker: its writing of the pages, already encoded; fleet: the same by four workers sharing --max-wcu 2000; sdk: its sending only) in model seconds over the ideal; throttled: calls answered ProvisionedThroughputExceeded or Throttling; partial: BatchWriteItem calls answered with items unprocessed; retried: items refused (each sent again), and for update the reads refused too; update: the update job of every item, its ideal from the model's counts of what it wrote and read; consumed/needed: write units the model charged over the items' own; plan s: \`sql2ddb plan --capacity\`'s prediction for the set (from its sample); time/plan: model s over it (target for run: 0.85 to 1.15)"
  # The targets of `run`, checked against the figures above.
  awk -F'\t' '
    $2 == "run" && $1 != "update" {
      sets++
      if ($3 != "ok") bad_status = bad_status " " $1
      if (($1 == "uniform" || $1 == "collection") && !($5 > 0 && $6 / $5 <= 1.10)) slow = slow " " $1
      if (!($12 > 0 && $6 / $12 >= 0.85 && $6 / $12 <= 1.15)) off_plan = off_plan " " $1
      if (!($11 > 0 && $10 / $11 <= 1.02)) wasted = wasted " " $1
    }
    function verdict(what, failed) { printf "  %s: %s\n", what, (failed == "" ? "met" : "NOT met (" substr(failed, 2) ")") }
    END {
      if (sets == 0) exit
      print "targets of run:"
      verdict("every item written", bad_status)
      verdict("at most 1.10x the ideal on the uniform and collection sets", slow)
      verdict("within 15% of plan on every set", off_plan)
      verdict("consumed / needed at most 1.02", wasted)
    }
  ' "$capacity_results"
}
