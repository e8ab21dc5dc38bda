#!/usr/bin/env bash
# Rebuilds examples/shop.db from examples/shop.sql (needs python3).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -f examples/shop.db
python3 - <<'PY'
import sqlite3
db = sqlite3.connect("examples/shop.db")
db.executescript(open("examples/shop.sql").read())
db.commit()
db.execute("VACUUM")
db.close()
PY
echo "examples/shop.db rebuilt"
