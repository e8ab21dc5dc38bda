#!/usr/bin/env bash
# Starts whatever the tests need that is not running: PostgreSQL on
# 127.0.0.1:5432 and MariaDB on 127.0.0.1:3306, each with a `test` database.
# Installs a server from the distribution's packages when it is missing.
set -euo pipefail

log() { echo "services: $*" >&2; }

wait_for() { # name, command...
  local name=$1; shift
  for _ in $(seq 1 60); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  log "$name did not come up"; return 1
}

apt_install() {
  log "installing $*"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "$@" >/dev/null
}

postgres() {
  if ! command -v pg_ctlcluster >/dev/null; then apt_install postgresql postgresql-client; fi
  if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
    log "starting PostgreSQL"
    local version
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
    wait_for PostgreSQL pg_isready -h 127.0.0.1 -p 5432 -q
  fi
  # The tests connect as root to database test (trust auth on loopback).
  if ! psql -h 127.0.0.1 -U root -d test -Atqc 'select 1' >/dev/null 2>&1; then
    log "creating role root and database test"
    su postgres -c "psql -q -c \"DO \\\$\\\$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname='root') THEN CREATE ROLE root SUPERUSER LOGIN; END IF; END\\\$\\\$;\"" || true
    su postgres -c "createdb -O root test" 2>/dev/null || true
  fi
  # Following changes (run --follow) reads a logical replication slot.
  if [ "$(psql -h 127.0.0.1 -U root -d test -Atqc 'show wal_level')" != logical ]; then
    log "setting PostgreSQL wal_level = logical (restart)"
    psql -h 127.0.0.1 -U root -d test -qc "ALTER SYSTEM SET wal_level = logical" >/dev/null
    local version
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main restart
    wait_for PostgreSQL pg_isready -h 127.0.0.1 -p 5432 -q
  fi
}

# Following changes (run --follow) reads the binary log in row format with
# full row images.
MARIADB_CDC=(--log-bin=mysql-bin --binlog-format=ROW --binlog-row-image=FULL --server-id=1)

mariadb_start() {
  log "starting MariaDB"
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql --bind-address=127.0.0.1 "${MARIADB_CDC[@]}"
  wait_for MariaDB mariadb-admin -h 127.0.0.1 -P 3306 -uroot ping
}

mariadb_server() {
  if ! command -v mariadbd >/dev/null; then apt_install mariadb-server mariadb-client; fi
  if ! mariadb-admin -h 127.0.0.1 -P 3306 -uroot ping >/dev/null 2>&1; then
    mariadb_start
  fi
  if [ "$(mariadb -h 127.0.0.1 -P 3306 -uroot -Nse 'select concat(@@log_bin, @@binlog_format)')" != ONROW ]; then
    log "turning MariaDB's binary log on in row format (restart)"
    mariadb-admin -h 127.0.0.1 -P 3306 -uroot shutdown
    for _ in $(seq 1 60); do
      if ! pidof mariadbd >/dev/null; then break; fi
      sleep 1
    done
    mariadb_start
  fi
  mariadb -h 127.0.0.1 -P 3306 -uroot -e 'CREATE DATABASE IF NOT EXISTS test' >/dev/null
}

postgres
mariadb_server
log "PostgreSQL and MariaDB are up"
