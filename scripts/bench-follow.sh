# The follow scenario of scripts/bench.sh, which sources this file after
# setting what it uses: bin_dir, work, db_url, log, sql, serve, stop,
# follow_rows, follow_rate, follow_secs.
#
# A PostgreSQL table of follow_rows rows is loaded by `sql2ddb run --follow`
# into a null sink (the follow stops once idle; its slot is kept), then:
#   lag         `sql2ddb follow` runs while the source takes follow_rate row
#               updates a second for follow_secs seconds (50 transactions a
#               second); every 0.1 s the source's WAL position and the slot's
#               applied position are sampled. A sample's lag is how long it
#               took until the slot was applied past the WAL position of
#               that moment: the time a change waits to be in the table.
#   apply rate  with no follower, every row is updated once (transactions
#               of 10,000 rows), then `sql2ddb follow --cutover --no-verify`
#               applies that backlog and drops the slot; changes applied
#               over its wall time (start-up included).
# shellcheck shell=bash
# shellcheck disable=SC2154 # those variables and functions are bench.sh's

follow_schema="bench_follow"
follow_results="$work/follow.tsv"

# follow_data: the source table, made afresh (the scenario changes it).
follow_data() {
  log "follow: generating ${follow_rows} rows in ${follow_schema}.orders"
  sql -1 <<SQL
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS ${follow_schema} CASCADE;
CREATE SCHEMA ${follow_schema};
CREATE TABLE ${follow_schema}.orders (
  order_id    bigint PRIMARY KEY,
  customer_id integer NOT NULL,
  status      text NOT NULL,
  total       numeric(12,2) NOT NULL,
  version     integer NOT NULL
);
INSERT INTO ${follow_schema}.orders
SELECT g, 1 + g % 1000, 'new', (g % 10000) / 100.0, 0
FROM generate_series(1::bigint, ${follow_rows}) AS g;
SQL
  sql -c "VACUUM ANALYZE ${follow_schema}.orders"
}

follow_mapping() {
  cat >"$work/follow.toml" <<TOML
version = 1

[source]
url = "${db_url}"

[target]
table = "bench_follow"
create = true
pk = { name = "PK", type = "S" }

[[entity]]
name = "order"
from = "${follow_schema}.orders"
pk = "ORDER#{order_id}"
[entity.attributes]
entity = "order"
TOML
}

# slot_positions: epoch seconds, the source's WAL position and the slot's
# applied position (both in bytes), on one line.
slot_positions() {
  sql -F ' ' -c "SELECT extract(epoch FROM clock_timestamp()),
      pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0'),
      pg_wal_lsn_diff(confirmed_flush_lsn, '0/0')
    FROM pg_replication_slots WHERE slot_name = '$1'"
}

# wait_applied SLOT BYTES: until the slot is applied past BYTES (60 s at most).
wait_applied() {
  for _ in $(seq 1 600); do
    local applied
    applied=$(slot_positions "$1" | awk '{ print $3 }')
    if awk -v a="$applied" -v b="$2" 'BEGIN { exit !(a >= b) }'; then return 0; fi
    sleep 0.1
  done
  log "follow: slot $1 was not applied past $2 within 60 s"; return 1
}

follow_scenario() {
  follow_data
  follow_mapping
  serve follow-sink null-sink --port 0 --keys PK:S
  local sink_pid=$served_pid sink_url=$served_url
  local runs="$work/follow-runs"

  log "follow: full load with --follow (stops once idle)"
  "$bin_dir/sql2ddb" run "$work/follow.toml" --endpoint "$sink_url" --runs-dir "$runs" \
    --follow --follow-until-idle 1 --json --quiet >"$work/follow-run.json" 2>"$work/follow-run.err" || {
    log "follow: run --follow failed"; cat "$work/follow-run.err" >&2; exit 1
  }
  local run_id slot
  run_id=$(head -n 1 "$work/follow-run.json" | jq -r '.run_id')
  slot=$(echo "sql2ddb_${run_id}" | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' '_' | cut -c1-63)
  echo "$slot" >"$work/follow-slot" # dropped by follow_cleanup if the scenario fails

  log "follow: lag at ${follow_rate} changes/s for ${follow_secs} s (slot ${slot})"
  "$bin_dir/sql2ddb" follow "$work/follow.toml" --slot "$slot" --endpoint "$sink_url" \
    --runs-dir "$runs" --json >"$work/follow-lag.json" 2>"$work/follow-lag.err" &
  local follower=$!
  servers+=("$follower")
  local samples="$work/follow-samples.txt"
  : >"$samples"
  (while true; do slot_positions "$slot" >>"$samples"; sleep 0.1; done) &
  local sampler=$!
  servers+=("$sampler")
  local per_tick=$(( (follow_rate + 49) / 50 )) ticks=$(( follow_secs * 50 ))
  local generated_from generated_to
  generated_from=$(date +%s.%N)
  sql <<SQL
DO \$\$
DECLARE
  started timestamptz := clock_timestamp();
  next_id bigint := 1;
BEGIN
  FOR tick IN 0..${ticks} - 1 LOOP
    UPDATE ${follow_schema}.orders SET version = version + 1, status = 'paid'
      WHERE order_id >= next_id AND order_id < next_id + ${per_tick};
    COMMIT;
    next_id := next_id + ${per_tick};
    IF next_id > ${follow_rows} THEN next_id := 1; END IF;
    PERFORM pg_sleep(greatest(0, extract(epoch FROM
      started + (tick + 1) * interval '20 milliseconds' - clock_timestamp())));
  END LOOP;
END
\$\$;
SQL
  generated_to=$(date +%s.%N)
  local end_bytes
  end_bytes=$(slot_positions "$slot" | awk '{ print $2 }')
  wait_applied "$slot" "$end_bytes"
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  kill -INT "$follower"
  wait "$follower" 2>/dev/null || true
  local lag_changes
  lag_changes=$(jq -r '.counts.changes' "$work/follow-lag.json")
  # A sample's lag: from its moment to the first sample whose applied
  # position is past its WAL position; samples in the last 0.2 s of the
  # load are left out (the WAL after the last change may hold other work).
  awk -v from="$generated_from" -v to="$generated_to" '
    { t[NR] = $1; cur[NR] = $2; applied[NR] = $3 }
    END {
      for (i = 1; i <= NR; i++) {
        if (t[i] < from || t[i] > to - 0.2) continue
        for (j = i; j <= NR && applied[j] < cur[i]; j++) {}
        if (j <= NR) printf "%.3f\n", t[j] - t[i]
      }
    }' "$samples" | sort -n >"$work/follow-lags.txt"
  awk -v rate="$follow_rate" -v changes="$lag_changes" '
    { lag[NR] = $1 }
    END {
      if (NR == 0) { printf "lag\t%s\t%s\t-\t-\t-\n", rate, changes; exit }
      p95 = int(NR * 0.95); if (p95 < 1) p95 = 1
      printf "lag\t%s\t%s\t%.2f\t%.2f\t%.2f\n", rate, changes, lag[int((NR + 1) / 2)], lag[p95], lag[NR]
    }' "$work/follow-lags.txt" >>"$follow_results"

  log "follow: backlog of ${follow_rows} updates, then follow --cutover"
  sql <<SQL
DO \$\$
BEGIN
  FOR low IN 0..${follow_rows} - 1 BY 10000 LOOP
    UPDATE ${follow_schema}.orders SET version = version + 1, status = 'shipped'
      WHERE order_id > low AND order_id <= low + 10000;
    COMMIT;
  END LOOP;
END
\$\$;
SQL
  local started ended
  started=$(date +%s.%N)
  "$bin_dir/sql2ddb" follow "$work/follow.toml" --slot "$slot" --endpoint "$sink_url" \
    --runs-dir "$runs" --cutover --no-verify --json >"$work/follow-apply.json" 2>"$work/follow-apply.err" || {
    log "follow: follow --cutover failed"; cat "$work/follow-apply.err" >&2; exit 1
  }
  ended=$(date +%s.%N)
  local applied
  applied=$(jq -r '.counts.changes' "$work/follow-apply.json")
  if [ "$applied" -lt "$follow_rows" ]; then
    log "follow: $applied changes applied, expected at least ${follow_rows}"; exit 1
  fi
  awk -v a="$applied" -v s="$started" -v e="$ended" \
    'BEGIN { printf "apply\t-\t%s\t%.2f\t%.0f\t-\n", a, e - s, a / (e - s) }' >>"$follow_results"
  rm -f "$work/follow-slot" # the cutover dropped it
  stop "$sink_pid"
  sql -c "DROP SCHEMA ${follow_schema} CASCADE"
}

# follow_cleanup: on a failed scenario, drops the slot and publication it
# left, which would otherwise keep the source's WAL.
follow_cleanup() {
  [ -s "$work/follow-slot" ] || return 0
  local slot
  slot=$(cat "$work/follow-slot")
  sql -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$slot'" >/dev/null || true
  sql -c "DROP PUBLICATION IF EXISTS $slot" || true
}

follow_report() {
  echo
  echo "follow (PostgreSQL, ${follow_rows} rows, null sink):"
  awk -F'\t' '
    $1 == "lag" { printf "  lag at %s changes/s: %s changes applied; lag median %s s, p95 %s s, max %s s (target: under 1 s at 5,000/s)\n", $2, $3, $4, $5, $6 }
    $1 == "apply" { printf "  apply rate: %s changes in %s s = %s changes/s (target: at least 20,000/s)\n", $3, $4, $5 }
  ' "$follow_results"
}
