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

cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --all-targets --locked
