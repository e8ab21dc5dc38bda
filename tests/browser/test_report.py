"""report.html in a real browser.

Runs the built `sql2ddb` binary end to end (a small SQLite source with rows
the mapping rejects, written into the embedded DynamoDB), then `plan` and
`verify --deep` of the same mapping, and an `update` job on the same rows
written into the test kit's DynamoDB server, and opens each `report.html` in
Chromium through Playwright. Each page must load without a console error,
make no request besides its own file, and show the same figures as the
report's JSON.

Needs: the binaries built (`cargo build --workspace --bins`: `sql2ddb`, or
SQL2DDB_BIN, and `sql2ddb-testkit`, or SQL2DDB_TESTKIT_BIN), the
Python package `playwright`, and a Chromium at /usr/bin/chromium (or
CHROMIUM); the browser is never downloaded.

    python3 tests/browser/test_report.py
"""

import json
import os
import sqlite3
import subprocess
import tempfile
import unittest
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
BIN = Path(os.environ.get("SQL2DDB_BIN", TARGET / "debug" / "sql2ddb"))
TESTKIT = Path(os.environ.get("SQL2DDB_TESTKIT_BIN", TARGET / "debug" / "sql2ddb-testkit"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")

READINGS = 300
# Every 25th reading's value is not a number: the mapping rejects it.
BAD = {i for i in range(1, READINGS + 1) if i % 25 == 0}

MAPPING = """\
version = 1

[source]
url = "sqlite://readings.db"

[target]
table = "readings"
endpoint = "local"
create = true
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }

[[entity]]
name = "sensor"
from = "sensors"
pk = "SENSOR#{sensor_id}"
sk = "SENSOR"

[[entity]]
name = "reading"
from = "readings"
pk = "SENSOR#{sensor_id}"
sk = "READING#{reading_id:08}"
[entity.attributes]
value = { column = "value", type = "N" }
"""

# Marks every reading the run wrote (the rejected ones are not in the table).
UPDATE_JOB = """\
version = 1

[target]
table = "readings"

[update]
name = "check-readings"
scan = { segments = 2 }
where = "begins_with(SK, :r)"
set = "SET checked = :yes"
values = { ":r" = "READING#", ":yes" = true }
"""


def make_source(directory: Path) -> None:
    db = sqlite3.connect(directory / "readings.db")
    db.execute("CREATE TABLE sensors (sensor_id INTEGER PRIMARY KEY, place TEXT NOT NULL)")
    db.execute(
        "CREATE TABLE readings (reading_id INTEGER PRIMARY KEY, "
        "sensor_id INTEGER NOT NULL, value TEXT NOT NULL)"
    )
    # A place name with markup: the page must show it as text.
    db.executemany(
        "INSERT INTO sensors VALUES (?, ?)",
        [(s, f"<b>hall {s}</b> & 'yard'") for s in range(1, 6)],
    )
    db.executemany(
        "INSERT INTO readings VALUES (?, ?, ?)",
        [
            (i, 1 + i % 5, f"n/a <{i}>" if i in BAD else str(i / 4))
            for i in range(1, READINGS + 1)
        ],
    )
    db.commit()
    db.close()
    (directory / "readings.toml").write_text(MAPPING)
    (directory / "check-readings.toml").write_text(UPDATE_JOB)


def start_dynamodb() -> tuple[subprocess.Popen, str]:
    """The test kit's in-memory DynamoDB server on a free port, and its URL."""
    server = subprocess.Popen(
        [str(TESTKIT), "dynamodb", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    url = server.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        server.terminate()
        server.wait(timeout=30)
        raise RuntimeError(f"sql2ddb-testkit dynamodb printed no URL: {url!r}")
    return server, url


def sql2ddb(directory: Path, *args: str, ok=(0,)) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(BIN), *args],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode not in ok:
        raise AssertionError(
            f"sql2ddb {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
        )
    return done


class ReportPages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for binary in [BIN, TESTKIT]:
            if not binary.exists():
                raise RuntimeError(f"{binary} is not built (cargo build --workspace --bins)")
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = Path(cls.tmp.name)
        make_source(cls.dir)
        runs = cls.dir / "runs"
        # 2: finished, some rows rejected.
        run = sql2ddb(cls.dir, "run", "readings.toml", "--runs-dir", str(runs), "--json", ok=(2,))
        cls.run_report = json.loads(run.stdout)
        cls.run_dir = Path(cls.run_report["run_dir"])
        if not cls.run_dir.is_absolute():
            cls.run_dir = cls.dir / cls.run_dir
        sql2ddb(cls.dir, "plan", "readings.toml", "--runs-dir", str(runs), "--json", ok=(0, 2))
        cls.plan_dir = next(runs.glob("plan-*"))
        deep = sql2ddb(
            cls.dir,
            "verify", "readings.toml", "--deep", "--run", cls.run_report["run_id"],
            "--runs-dir", str(runs), "--json",
        )
        cls.deep = json.loads(deep.stdout)
        # An update needs a table it can reach (the embedded server's data
        # belongs to its run): the same rows, written into a server of its own.
        cls.dynamodb, url = start_dynamodb()
        sql2ddb(cls.dir, "run", "readings.toml", "--endpoint", url, "--runs-dir", str(runs),
                "--json", "--quiet", ok=(2,))
        update = sql2ddb(cls.dir, "update", "check-readings.toml", "--endpoint", url,
                         "--runs-dir", str(runs), "--json", "--quiet")
        cls.update = json.loads(update.stdout)
        cls.update_dir = Path(cls.update["run_dir"])
        if not cls.update_dir.is_absolute():
            cls.update_dir = cls.dir / cls.update_dir
        cls.playwright = sync_playwright().start()
        cls.browser = cls.playwright.chromium.launch(
            executable_path=CHROMIUM,
            # As root (CI containers) Chromium needs no sandbox to start.
            args=["--no-sandbox"],
        )

    @classmethod
    def tearDownClass(cls):
        cls.browser.close()
        cls.playwright.stop()
        cls.dynamodb.terminate()
        cls.dynamodb.wait(timeout=30)
        cls.dynamodb.stdout.close()
        cls.tmp.cleanup()

    def open(self, path: Path):
        """Opens `path`; returns the page, its console errors and requests."""
        page = self.browser.new_page()
        errors, requests = [], []
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        url = path.resolve().as_uri()
        page.goto(url)
        page.wait_for_load_state("load")
        self.addCleanup(page.close)
        self.assertEqual(errors, [], f"console errors on {path.name}")
        self.assertEqual(requests, [url], "the page requested more than itself")
        return page

    def figure(self, page, selector: str, field: str) -> str:
        """`data-value` of the figure `field` in `selector`, checked
        against the number or text shown."""
        cell = page.locator(f'{selector} [data-field="{field}"]')
        self.assertEqual(cell.count(), 1, f"{selector} {field}")
        value = cell.get_attribute("data-value")
        shown = cell.inner_text().replace(",", "")
        try:
            self.assertAlmostEqual(float(shown), float(value), places=0)
        except ValueError:
            self.assertEqual(shown, value)
        return value

    def assert_timeline(self, page, t):
        """The page's throughput and throttling figures and its three charts
        equal the report's per-second timeline `t`."""
        self.assertEqual(int(self.figure(page, "#throughput", "timeline_seconds")),
                         len(t["items_written"]))
        self.assertEqual(int(self.figure(page, "#throughput", "timeline_items_written")),
                         sum(t["items_written"]))
        self.assertEqual(int(self.figure(page, "#throughput", "timeline_peak_items")),
                         max(t["items_written"]))
        self.assertEqual(int(self.figure(page, "#throttling", "timeline_throttled_calls")),
                         sum(t["throttled_calls"]))
        for chart in ["throughput-chart", "throttled-chart", "concurrency-chart"]:
            svg = page.locator(f"svg#{chart}")
            self.assertTrue(svg.is_visible(), chart)
            self.assertEqual(int(svg.get_attribute("data-seconds")), len(t["items_written"]))

    def test_the_run_page_shows_the_run_reports_figures(self):
        r = self.run_report
        page = self.open(self.run_dir / "report.html")
        saved = json.loads((self.run_dir / "report.json").read_text())
        self.assertEqual(saved["run_id"], r["run_id"])
        self.assertEqual(self.figure(page, "#summary", "status"), "rejected")
        self.assertEqual(self.figure(page, "#summary", "run_id"), r["run_id"])
        fields = ["rows_read", "rows_counted", "items_written", "overwritten",
                  "rejected", "failed", "pending", "bytes", "write_units",
                  "retries", "pages"]
        for e in r["entities"]:
            row = f'#entity-table tr[data-row="entity"][data-name="{e["name"]}"]'
            for f in fields:
                self.assertEqual(int(self.figure(page, row, f)), e[f], f"{e['name']} {f}")
        totals = '#entity-table tr[data-row="totals"]'
        for f in fields:
            self.assertEqual(int(self.figure(page, totals, f)), r["totals"][f], f"total {f}")
        self.assertEqual(r["totals"]["rejected"], len(BAD))

        t = r["timeline"]
        self.assertGreater(len(t["items_written"]), 0)
        self.assert_timeline(page, t)
        for f in ["max_concurrency", "min_concurrency", "final_concurrency",
                  "decreases", "increases", "throttled"]:
            self.assertEqual(int(self.figure(page, "#writer", f)), r["writer"][f], f)

        reasons = page.locator('#rejects-table tr[data-row="reason"]')
        self.assertEqual(reasons.count(), len(r["rejects_by_reason"]))
        self.assertEqual(sum(x["rows"] for x in r["rejects_by_reason"]), len(BAD))
        for i, x in enumerate(r["rejects_by_reason"]):
            row = reasons.nth(i)
            self.assertEqual(row.get_attribute("data-name"), x["reason"])
            self.assertIn(x["reason"], row.inner_text())
            self.assertEqual(int(row.locator('[data-field="rows"]').get_attribute("data-value")),
                             x["rows"])
        # The values in the reasons are masked, the rest is shown as text.
        self.assertIn('"…"', r["rejects_by_reason"][0]["reason"])
        self.assertEqual(page.locator("#rejects b").count(), 0)

    def test_the_plan_page_shows_the_size_histogram_and_the_partition_heat(self):
        p = json.loads((self.plan_dir / "report.json").read_text())
        page = self.open(self.plan_dir / "report.html")
        for f in ["rows", "items", "write_units", "storage_bytes"]:
            self.assertEqual(int(self.figure(page, "#summary", f)), p["totals"][f], f)
        for e in p["entities"]:
            row = f'#entity-table tr[data-row="entity"][data-name="{e["name"]}"]'
            for f in ["rows", "sampled_rows", "items", "write_units"]:
                self.assertEqual(int(self.figure(page, row, f)), e[f], f"{e['name']} {f}")
            buckets = page.locator(f'#sizes-{e["name"]} tr[data-row="bucket"]')
            self.assertEqual(buckets.count(), len(e["item_size"]["histogram"]))
            for i, b in enumerate(e["item_size"]["histogram"]):
                row = buckets.nth(i)
                self.assertEqual(row.get_attribute("data-name"), str(b["up_to"]))
                self.assertEqual(
                    int(row.locator('[data-field="items"]').get_attribute("data-value")),
                    b["items"])
            self.assertEqual(sum(b["items"] for b in e["item_size"]["histogram"]),
                             e["sampled_rows"] - sum(x["rows"] for x in e["rejects"]))
        heat = page.locator('#heat-table tr[data-row="partition"]')
        self.assertEqual(heat.count(), len(p["hot_partitions"]))
        self.assertGreater(heat.count(), 0)
        for i, h in enumerate(p["hot_partitions"]):
            row = heat.nth(i)
            self.assertEqual(row.get_attribute("data-name"), h["key"])
            self.assertEqual(int(row.locator('[data-field="items"]').get_attribute("data-value")),
                             h["items"])
            self.assertAlmostEqual(
                float(row.locator('[data-field="wcu_per_second"]').get_attribute("data-value")),
                h["wcu_per_second"])

    def test_the_update_page_shows_the_update_reports_figures(self):
        u = self.update
        page = self.open(self.update_dir / "report.html")
        saved = json.loads((self.update_dir / "report.json").read_text())
        self.assertEqual(saved["run_id"], u["run_id"])
        self.assertEqual(u["matched"], READINGS - len(BAD))
        self.assertEqual(u["updated"], u["matched"])
        self.assertEqual(self.figure(page, "#summary", "status"), "ok")
        for f in ["run_id", "job", "table", "mode"]:
            self.assertEqual(self.figure(page, "#summary", f), u[f], f)
        for f in ["scanned", "matched", "not_matched", "updated", "skipped", "failed",
                  "pending", "pages", "retries", "throttled"]:
            self.assertEqual(int(self.figure(page, "#summary", f)), u[f], f)
        for f in ["read_units", "write_units", "seconds"]:
            self.assertEqual(float(self.figure(page, "#summary", f)), float(u[f]), f)

        t = u["timeline"]
        self.assertEqual(sum(t["items_written"]), u["updated"])
        self.assert_timeline(page, t)

    def test_the_deep_verify_page_shows_the_differences_by_kind(self):
        d = self.deep
        page = self.open(self.run_dir / "verify-report.html")
        saved = json.loads((self.run_dir / "verify-report.json").read_text())
        self.assertEqual(saved["differences"], d["differences"])
        clean = page.locator('#summary [data-field="clean"]')
        self.assertEqual(clean.get_attribute("data-value"), "true")
        self.assertEqual(clean.inner_text(), "nothing differs")
        self.assertEqual(int(self.figure(page, "#summary", "differences")), d["differences"])
        self.assertEqual(int(self.figure(page, "#summary", "items_read")), d["items_read"])
        for kind in ["missing", "extra", "different", "collapsed"]:
            row = f'#kind-table tr[data-name="{kind}"]'
            self.assertEqual(int(self.figure(page, row, "count")),
                             sum(e[kind] for e in d["entities"]), kind)
        for e in d["entities"]:
            row = f'#entity-table tr[data-row="entity"][data-name="{e["entity"]}"]'
            for f in ["expected", "found", "identical", "missing", "extra",
                      "different", "collapsed", "rejected"]:
                self.assertEqual(int(self.figure(page, row, f)), e[f], f"{e['entity']} {f}")
        reading = next(e for e in d["entities"] if e["entity"] == "reading")
        self.assertEqual(reading["rejected"], len(BAD))
        self.assertEqual(reading["identical"], READINGS - len(BAD))


if __name__ == "__main__":
    unittest.main(verbosity=2)
