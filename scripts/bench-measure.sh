# The measuring functions of scripts/bench.sh, which sources this file after
# setting what they use: rows, bin_dir, work, results, run_args, servers.
# shellcheck shell=bash
# shellcheck disable=SC2154 # those variables are bench.sh's

# Busy and total jiffies of the whole host, from /proc/stat.
host_cpu() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }

# measure NAME ARGS…: one `sql2ddb run` (`sql2ddb export` when NAME starts
# with "export") under /usr/bin/time -v; appends name, rows, wall s, user+sys
# s, peak RSS KB, host CPU busy %, file bytes per item (exports) to the results.
measure() {
  local name=$1; shift
  local file="$work/${name//[^a-z]/_}"
  local out="$file.json" timing="$file.time"
  local command=(run "$work/orders.toml") extra=(${run_args[@]+"${run_args[@]}"})
  if [[ $name == export* ]]; then command=(export "$work/orders.toml"); extra=(); fi
  log "running: $name"
  local before after
  before=$(host_cpu)
  set +e
  /usr/bin/time -v -o "$timing" "$bin_dir/sql2ddb" "${command[@]}" \
    --runs-dir "$work/runs" --json --quiet "$@" ${extra[@]+"${extra[@]}"} \
    >"$out" 2>"$file.err"
  local code=$?
  set -e
  after=$(host_cpu)
  if [ $code -ne 0 ]; then
    log "$name: sql2ddb exited with $code"; cat "$file.err" "$out" >&2; exit 1
  fi
  local written
  written=$(jq -r '.totals.items_written' "$out")
  if [ "$written" != "$rows" ]; then
    log "$name: $written items written, expected $rows"; jq . "$out" >&2; exit 1
  fi
  local busy per_item=-
  busy=$(echo "$before $after" | awk '{ d = $4 - $2; print (d > 0) ? 100 * ($3 - $1) / d : 0 }')
  if [[ $name == export* ]]; then
    per_item=$(jq -r '([.manifest.files[].compressed_bytes] | add) / .manifest.items | floor' "$out")
  fi
  awk -v name="$name" -v rows="$rows" -v busy="$busy" -v per_item="$per_item" -F': ' '
    /User time/ { user = $2 }
    /System time/ { sys = $2 }
    /Maximum resident set size/ { rss = $2 }
    /Elapsed \(wall clock\)/ {
      n = split($2, p, ":"); wall = 0
      for (i = 1; i <= n; i++) wall = wall * 60 + p[i]
    }
    END { printf "%s\t%s\t%.2f\t%.2f\t%d\t%.0f\t%s\n", name, rows, wall, user + sys, rss, busy, per_item }
  ' "$timing" >>"$results"
  rm -rf "$work/runs" "$work/export"
}

# serve NAME TESTKIT-ARGS…: a `sql2ddb-testkit` server in the background,
# its stdout in $work/NAME.out; sets served_pid and served_url (its first line).
serve() {
  local name=$1; shift
  # Emptied here, not only by the redirection below: that one happens in
  # the background child, and until it does, the check below could read
  # the URL an earlier server of the same name left in the file.
  : >"$work/$name.out"
  "$bin_dir/sql2ddb-testkit" "$@" >"$work/$name.out" &
  served_pid=$!
  servers+=("$served_pid")
  # Up to 30 s: a busy host (or a debug build) starts slowly.
  for _ in $(seq 1 300); do
    [ -s "$work/$name.out" ] && break
    kill -0 "$served_pid" 2>/dev/null || break
    sleep 0.1
  done
  served_url=$(head -n 1 "$work/$name.out")
  [ -n "$served_url" ] || { log "the $name server did not start"; exit 1; }
}

# stop PID…: stops testkit servers (which then print their counts).
stop() {
  kill -TERM "$@"; wait "$@" || true
  local keep=() pid gone stopped
  for pid in ${servers[@]+"${servers[@]}"}; do
    gone=false
    for stopped in "$@"; do [ "$pid" = "$stopped" ] && gone=true; done
    $gone || keep+=("$pid")
  done
  servers=(${keep[@]+"${keep[@]}"})
}

# start_sink: a null sink; sets sink_pid and sink_url.
start_sink() {
  serve sink null-sink --port 0 --keys PK:S,SK:S
  sink_pid=$served_pid sink_url=$served_url
}

# export_items NAME: the bench's items as an untimed, uncompressed export in
# $work/NAME-items (its files under data/), for the scenarios that send
# prebuilt items.
export_items() {
  log "exporting the items for the $1 scenario (untimed)"
  "$bin_dir/sql2ddb" export "$work/orders.toml" --out "$work/$1-items" --compression none \
    --runs-dir "$work/runs" --json --quiet >/dev/null 2>"$work/$1-export.err" \
    || { log "the export for the $1 scenario failed"; cat "$work/$1-export.err" >&2; exit 1; }
}

# self_timed NAME FILE BEFORE AFTER: appends the row of a program that timed
# itself (FILE.json: items, seconds, cpu_seconds; FILE.time: /usr/bin/time -v
# for its peak RSS), the host's CPU readings BEFORE and AFTER around it.
self_timed() {
  local name=$1 file=$2 busy rss sent
  sent=$(jq -r '.items' "$file.json")
  if [ "$sent" != "$rows" ]; then log "$name: $sent items, expected $rows"; exit 1; fi
  busy=$(echo "$3 $4" | awk '{ d = $4 - $2; printf "%.0f", (d > 0) ? 100 * ($3 - $1) / d : 0 }')
  rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$file.time")
  jq -r --arg name "$name" --arg rows "$rows" --arg rss "$rss" --arg busy "$busy" \
    '[$name, $rows, (.seconds * 100 | round / 100), (.cpu_seconds * 100 | round / 100), $rss, $busy, "-"] | @tsv' \
    "$file.json" >>"$results"
}

# timed NAME FILE ROWS COMMAND…: COMMAND under /usr/bin/time -v, stdout to
# FILE.json; appends its row (ROWS items) to the results as measure does.
timed() {
  local name=$1 file=$2 items=$3; shift 3
  log "running: $name"
  local before after busy
  before=$(host_cpu)
  /usr/bin/time -v -o "$file.time" "$@" >"$file.json" 2>"$file.err" \
    || { log "$name failed"; cat "$file.err" "$file.json" >&2; exit 1; }
  after=$(host_cpu)
  busy=$(echo "$before $after" | awk '{ d = $4 - $2; print (d > 0) ? 100 * ($3 - $1) / d : 0 }')
  awk -v name="$name" -v rows="$items" -v busy="$busy" -F': ' '
    /User time/ { user = $2 }
    /System time/ { sys = $2 }
    /Maximum resident set size/ { rss = $2 }
    /Elapsed \(wall clock\)/ {
      n = split($2, p, ":"); wall = 0
      for (i = 1; i <= n; i++) wall = wall * 60 + p[i]
    }
    END { printf "%s\t%s\t%.2f\t%.2f\t%d\t%.0f\t-\n", name, rows, wall, user + sys, rss, busy }
  ' "$file.time" >>"$results"
}

# queue_bench NAME FILE PROGRAM: one of the queue consumers' benches (the
# Lambda handler's, the worker's) on the same items from one untimed
# export, as the pages a reader enqueues, into a null sink, each batch
# recorded in a dynoxide process; appends its self-timed row.
queue_bench() {
  local name=$1 file=$2 program=$3 before after
  [ -d "$work/queue-items" ] || export_items queue
  start_sink
  serve progress dynamodb --port 0
  progress_pid=$served_pid progress_url=$served_url
  log "running: $name"
  before=$(host_cpu)
  /usr/bin/time -v -o "$file.time" "$bin_dir/examples/$program" --endpoint "$sink_url" \
    --progress-endpoint "$progress_url" --items "$work/queue-items/data" --table bench_orders \
    >"$file.json" 2>"$file.err" || { log "$name failed"; cat "$file.err" >&2; exit 1; }
  after=$(host_cpu)
  stop "$sink_pid" "$progress_pid"
  # Wall and CPU seconds of the writing only, as the bench measured them.
  self_timed "$name" "$file" "$before" "$after"
  rm -rf "$work/runs"
}

# update_job TABLE: the update job the update scenarios run, on stdout:
# every item's status set; the `where` is the read's filter and each
# write's condition, and every item meets it.
update_job() {
  cat <<TOML
version = 1

[target]
table = "$1"
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }

[update]
name = "close-every-order"
scan = { segments = 8 }
where = "attribute_exists(#st)"
set = "SET #st = :closed"
names = { "#st" = "status" }
values = { ":closed" = "closed" }
TOML
}

# update_run NAME FILE ITEMS ENDPOINT: the update job of every item against
# ENDPOINT, timed; checks that all ITEMS were updated.
update_run() {
  local name=$1 file=$2 items=$3 endpoint=$4 updated
  timed "$name" "$file" "$items" "$bin_dir/sql2ddb" update "$work/update.toml" \
    --endpoint "$endpoint" --runs-dir "$work/runs" --json --quiet
  updated=$(jq -r '"\(.updated) \(.failed) \(.skipped)"' "$file.json")
  if [ "$updated" != "$items 0 0" ]; then
    log "$name: updated, failed, skipped = $updated; expected $items 0 0"; jq . "$file.json" >&2; exit 1
  fi
  rm -rf "$work/runs"
}
