# The follow scenario of scripts/bench.sh, which sources this file after
# setting what it uses: bin_dir, work, db_url, log, sql, serve, stop,
# follow_rows, follow_rate, follow_secs, follow_source.
#
# A table of follow_rows rows (PostgreSQL, or MariaDB with
# follow_source=mariadb) is loaded by `sql2ddb run --follow` into a null
# sink (the follow stops once idle; PostgreSQL: its slot is kept;
# MariaDB: its binary log position is kept in the run's directory), then:
#   lag         `sql2ddb follow` runs while the source takes follow_rate row
#               updates a second for follow_secs seconds (50 transactions a
#               second); every 0.1 s the source's log position (WAL, or
#               binary log) and the follower's applied position (the slot's,
#               or the run's checkpoint file) are sampled. A sample's lag is
#               how long it took until the applied position passed the
#               source's position of that moment: the time a change waits to
#               be in the table.
#   apply rate  with no follower, every row is updated once (transactions
#               of 10,000 rows), then `sql2ddb follow --cutover --no-verify`
#               applies that backlog (PostgreSQL: and drops the slot);
#               changes applied over its wall time (start-up included).
# shellcheck shell=bash
# shellcheck disable=SC2154 # those variables and functions are bench.sh's

follow_schema="bench_follow" # PostgreSQL's schema, MariaDB's database
follow_results="$work/follow.tsv"
follow_runs="$work/follow-runs"
# MariaDB: the replica server id the bench's followers read the binary log
# as, outside the range each run derives its own id from (4,000,000,000 up).
follow_server_id=4231200
mariadb_url=${BENCH_MARIADB_URL:-mysql://root@127.0.0.1:3306/test}

# msql ARGS…: the mariadb client on mariadb_url (its password, if any,
# through MYSQL_PWD, never on the command line).
msql() {
  local re='^(mysql|mariadb)://([^:@/]+)(:([^@]*))?@([^:/]+)(:([0-9]+))?/([^?]+)'
  [[ $mariadb_url =~ $re ]] || { log "follow: cannot read BENCH_MARIADB_URL"; exit 1; }
  MYSQL_PWD="${BASH_REMATCH[4]}" mariadb -h "${BASH_REMATCH[5]}" -P "${BASH_REMATCH[7]:-3306}" \
    -u "${BASH_REMATCH[2]}" -N -B "$@" "${BASH_REMATCH[8]}"
}

# follow_data: the source table, made afresh (the scenario changes it).
follow_data() {
  log "follow: generating ${follow_rows} rows in ${follow_schema}.orders (${follow_source})"
  if [ "$follow_source" = mariadb ]; then
    msql <<SQL
DROP DATABASE IF EXISTS ${follow_schema};
CREATE DATABASE ${follow_schema};
CREATE TABLE ${follow_schema}.orders (
  order_id    bigint PRIMARY KEY,
  customer_id integer NOT NULL,
  status      varchar(20) NOT NULL,
  total       decimal(12,2) NOT NULL,
  version     integer NOT NULL
);
INSERT INTO ${follow_schema}.orders
SELECT seq, 1 + seq % 1000, 'new', (seq % 10000) / 100.0, 0 FROM seq_1_to_${follow_rows};
SQL
    return
  fi
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
  local url=$db_url
  if [ "$follow_source" = mariadb ]; then url=$mariadb_url; fi
  cat >"$work/follow.toml" <<TOML
version = 1

[source]
url = "${url}"

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

# follow_positions: epoch seconds, the source's log position and the
# follower's applied position, on one line; positions as numbers that
# order as the log does (PostgreSQL: WAL bytes; MariaDB: the binary log
# file's number times 2^32 plus the offset in it).
follow_positions() {
  if [ "$follow_source" = mariadb ]; then
    local checkpoint="$follow_runs/$follow_run_id/binlog-position"
    { msql -e "SELECT UNIX_TIMESTAMP(NOW(6)); SHOW MASTER STATUS" | cut -f 1,2 | tr '\t' ':'
      cat "$checkpoint" 2>/dev/null || echo "none.0:0"; } |
      awk -F: 'function ord(f, p) { sub(/.*\./, "", f); return f * 4294967296 + p }
        NR == 1 { t = $1 } NR == 2 { cur = ord($1, $2) } NR == 3 { applied = ord($1, $2) }
        END { printf "%s %.0f %.0f\n", t, cur, applied }'
    return
  fi
  sql -F ' ' -c "SELECT extract(epoch FROM clock_timestamp()),
      pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0'),
      pg_wal_lsn_diff(confirmed_flush_lsn, '0/0')
    FROM pg_replication_slots WHERE slot_name = '$follow_slot'"
}

# wait_applied POSITION: until the follower has applied past POSITION (60 s at most).
wait_applied() {
  for _ in $(seq 1 600); do
    local applied
    applied=$(follow_positions | awk '{ print $3 }')
    if awk -v a="$applied" -v b="$1" 'BEGIN { exit !(a >= b) }'; then return 0; fi
    sleep 0.1
  done
  log "follow: the follower did not apply past $1 within 60 s"; return 1
}

# follow_steady RATE SECS: RATE row updates a second for SECS seconds, in
# 50 transactions a second, each row in turn.
follow_steady() {
  local per_tick=$(( ($1 + 49) / 50 )) ticks=$(( $2 * 50 ))
  if [ "$follow_source" = mariadb ]; then
    msql <<SQL
DROP PROCEDURE IF EXISTS ${follow_schema}.steady;
DELIMITER //
CREATE PROCEDURE ${follow_schema}.steady()
BEGIN
  DECLARE started DATETIME(6) DEFAULT NOW(6);
  DECLARE tick INT DEFAULT 0;
  DECLARE next_id BIGINT DEFAULT 1;
  WHILE tick < ${ticks} DO
    UPDATE ${follow_schema}.orders SET version = version + 1, status = 'paid'
      WHERE order_id >= next_id AND order_id < next_id + ${per_tick};
    SET next_id = next_id + ${per_tick};
    IF next_id > ${follow_rows} THEN SET next_id = 1; END IF;
    SET tick = tick + 1;
    DO SLEEP(GREATEST(0, TIMESTAMPDIFF(MICROSECOND, NOW(6),
      started + INTERVAL tick * 20000 MICROSECOND) / 1e6));
  END WHILE;
END//
DELIMITER ;
CALL ${follow_schema}.steady();
SQL
    return
  fi
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
}

# follow_backlog: every row updated once, in transactions of 10,000 rows.
follow_backlog() {
  if [ "$follow_source" = mariadb ]; then
    msql <<SQL
DROP PROCEDURE IF EXISTS ${follow_schema}.backlog;
DELIMITER //
CREATE PROCEDURE ${follow_schema}.backlog()
BEGIN
  DECLARE low BIGINT DEFAULT 0;
  WHILE low < ${follow_rows} DO
    UPDATE ${follow_schema}.orders SET version = version + 1, status = 'shipped'
      WHERE order_id > low AND order_id <= low + 10000;
    SET low = low + 10000;
  END WHILE;
END//
DELIMITER ;
CALL ${follow_schema}.backlog();
SQL
    return
  fi
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
}

follow_scenario() {
  follow_data
  follow_mapping
  serve follow-sink null-sink --port 0 --keys PK:S
  local sink_pid=$served_pid sink_url=$served_url
  local runs=$follow_runs
  local -a server_id=()
  if [ "$follow_source" = mariadb ]; then server_id=(--server-id "$follow_server_id"); fi

  log "follow: full load with --follow (stops once idle)"
  "$bin_dir/sql2ddb" run "$work/follow.toml" --endpoint "$sink_url" --runs-dir "$runs" \
    --follow --follow-until-idle 1 "${server_id[@]}" --json --quiet \
    >"$work/follow-run.json" 2>"$work/follow-run.err" || {
    log "follow: run --follow failed"; cat "$work/follow-run.err" >&2; exit 1
  }
  # Read by follow_positions.
  follow_run_id=$(head -n 1 "$work/follow-run.json" | jq -r '.run_id')
  follow_slot=$(echo "sql2ddb_${follow_run_id}" | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' '_' | cut -c1-63)
  local -a which=(--slot "$follow_slot")
  if [ "$follow_source" = mariadb ]; then
    which=(--run "$follow_run_id" "${server_id[@]}")
  else
    echo "$follow_slot" >"$work/follow-slot" # dropped by follow_cleanup if the scenario fails
  fi

  log "follow: lag at ${follow_rate} changes/s for ${follow_secs} s (${which[*]})"
  "$bin_dir/sql2ddb" follow "$work/follow.toml" "${which[@]}" --endpoint "$sink_url" \
    --runs-dir "$runs" --json >"$work/follow-lag.json" 2>"$work/follow-lag.err" &
  local follower=$!
  servers+=("$follower")
  local samples="$work/follow-samples.txt"
  : >"$samples"
  (while true; do follow_positions >>"$samples"; sleep 0.1; done) &
  local sampler=$!
  servers+=("$sampler")
  local generated_from generated_to
  generated_from=$(date +%s.%N)
  follow_steady "$follow_rate" "$follow_secs"
  generated_to=$(date +%s.%N)
  local end_position
  end_position=$(follow_positions | awk '{ print $2 }')
  wait_applied "$end_position"
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  kill -INT "$follower"
  wait "$follower" 2>/dev/null || true
  local lag_changes
  lag_changes=$(jq -r '.counts.changes' "$work/follow-lag.json")
  # A sample's lag: from its moment to the first sample whose applied
  # position is past its source position; samples in the last 0.2 s of the
  # load are left out (the log after the last change may hold other work).
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
  follow_backlog
  local started ended
  started=$(date +%s.%N)
  "$bin_dir/sql2ddb" follow "$work/follow.toml" "${which[@]}" --endpoint "$sink_url" \
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
  if [ "$follow_source" = mariadb ]; then
    msql -e "DROP DATABASE ${follow_schema}"
  else
    sql -c "DROP SCHEMA ${follow_schema} CASCADE"
  fi
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
  local name=PostgreSQL
  if [ "$follow_source" = mariadb ]; then name=MariaDB; fi
  echo
  echo "follow (${name}, ${follow_rows} rows, null sink):"
  awk -F'\t' '
    $1 == "lag" { printf "  lag at %s changes/s: %s changes applied; lag median %s s, p95 %s s, max %s s (target: under 1 s at 5,000/s)\n", $2, $3, $4, $5, $6 }
    $1 == "apply" { printf "  apply rate: %s changes in %s s = %s changes/s (target: at least 50,000/s)\n", $3, $4, $5 }
  ' "$follow_results"
}
