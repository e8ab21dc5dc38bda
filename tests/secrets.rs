//! Secrets never print, whatever characters a password holds; a DynamoDB
//! endpoint or region that cannot be right is refused with a clear message
//! before any call.

use std::path::Path;

use crate::common::*;

const MAPPING: &str = pg_mapping!(
    url = "SOURCE",
    "",
    r#"
[[entity]]
name = "item"
from = "FROM"
pk = "{name}"
sk = "ITEM#{id}"
"#
);

/// Passwords that break a parser looking for the first delimiter.
const TRICKY: &[&str] = &[
    "S3cr3t PW",
    "S3cr3t/PW",
    "S3cr?etPW",
    "p@ss#w0rd",
    "pa:ss@wd:x",
    "pässwörd€",
    "a/b?c#d@e f",
    "top@127.0.0.1",
];

/// Printable ASCII except `"` and `\`, which JSON output would escape (the
/// escaped form would hide a leak from a plain search; the unit property
/// test of the redaction covers them).
fn random_passwords(seed: u64, count: usize) -> Vec<String> {
    let alphabet: Vec<char> = (0x20u8..0x7f)
        .map(char::from)
        .filter(|c| *c != '"' && *c != '\\')
        .chain(['é', '€', '密'])
        .collect();
    let mut state = seed | 1;
    let mut next = move || {
        // xorshift64: reproducible from the seed printed on failure.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..count)
        .map(|_| {
            (0..12)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect()
        })
        .collect()
}

/// Percent-encodes what a URL's userinfo may not hold raw.
fn encode(password: &str) -> String {
    let mut out = String::new();
    for b in password.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A TOML basic string's content for `text`.
fn toml_escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Every file under `dir`, as text.
fn files_text(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_text(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((
                path.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    out
}

/// Everything one password's commands printed or wrote.
struct Seen {
    texts: Vec<(String, String)>,
}

impl Seen {
    fn add(&mut self, what: &str, run: &Run) {
        self.texts
            .push((format!("{what}: stdout"), run.stdout.clone()));
        self.texts
            .push((format!("{what}: stderr"), run.stderr.clone()));
    }

    fn assert_hidden(&self, secrets: &[&str], context: &str) {
        for (what, text) in &self.texts {
            for secret in secrets {
                assert!(
                    !text.contains(secret),
                    "{context}: {what} holds the password {secret:?}:\n{text}"
                );
            }
        }
    }
}

/// Runs check, run (PostgreSQL that accepts it, PostgreSQL that refuses the
/// connection, MariaDB that refuses the password), status and verify with
/// `password` written as `in_url` in the source URLs.
// Long on purpose: every command that could print a password, in turn.
async fn exercise(seen: &mut Seen, sc: &Scenario, in_url: &str, through_mapping: bool) {
    let dynamo = &sc.dynamo;
    let dir = tempfile::tempdir().unwrap();
    let table = unique("secrets");
    let pg = format!("postgres://root:{in_url}@127.0.0.1:5432/test");
    let mapping_source = match through_mapping {
        true => toml_escape(&pg),
        false => "postgres://root@127.0.0.1:5432/test".to_string(),
    };
    let mapping = write_mapping(
        dir.path(),
        &MAPPING
            .replace("SOURCE", &mapping_source)
            .replace("TABLE", &table)
            .replace("FROM", &format!("{}.items", sc.pg().name)),
    );
    let check = sql2ddb(dir.path(), &["check", &mapping]).await;
    seen.add("check", &check);

    // PostgreSQL trusts the loopback: with a URL it can parse, the run goes
    // through (one row rejected, so there is a rejects file too).
    let run = sql2ddb(
        dir.path(),
        &[
            "run",
            &mapping,
            "--source",
            &pg,
            "--endpoint",
            &dynamo.url,
            "--json",
            "--progress-table",
        ],
    )
    .await;
    seen.add("run", &run);
    // A raw delimiter breaks the URL: refused as written, or read as another
    // place that cannot be reached.
    let parses = !in_url.contains(|c: char| !c.is_ascii_alphanumeric() && !"-._~%".contains(c));
    assert!(
        matches!(run.code, 2 | EX_CONFIG | EX_UNAVAILABLE),
        "run: {}\n{}",
        run.code,
        run.stderr
    );
    let run_id = serde_json::from_str::<serde_json::Value>(&run.stdout)
        .ok()
        .and_then(|r| r["run_id"].as_str().map(str::to_string));
    if parses {
        // A URL that parses: the run wrote its report and rejects file.
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run_id.is_some(), "{}", run.stdout);
    }
    let run_id = run_id.unwrap_or_else(|| "no-such-run".to_string());
    for command in ["status", "verify"] {
        let out = sql2ddb(
            dir.path(),
            &[
                command,
                &mapping,
                "--run",
                &run_id,
                "--endpoint",
                &dynamo.url,
                "--json",
            ],
        )
        .await;
        seen.add(command, &out);
    }

    for url in [
        format!("postgres://root:{in_url}@127.0.0.1:1/test"),
        format!("mysql://root:{in_url}@127.0.0.1:3306/test"),
    ] {
        let failed = sql2ddb(
            dir.path(),
            &[
                "run",
                &mapping,
                "--source",
                &url,
                "--endpoint",
                &dynamo.url,
                "--if-not-empty",
                "append",
            ],
        )
        .await;
        // Nothing listens on port 1; MariaDB refuses the password.
        match parses {
            true => assert_eq!(failed.code, EX_UNAVAILABLE, "{url}: {}", failed.stderr),
            false => assert!(
                matches!(failed.code, EX_CONFIG | EX_UNAVAILABLE),
                "{url}: {}",
                failed.stderr
            ),
        }
        seen.add("failed run", &failed);
    }
    // What the runs wrote (report, rejects, checkpoints); the mapping file
    // itself holds the password, as the user wrote it.
    seen.texts
        .extend(files_text(&dir.path().join("sql2ddb-runs")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_lost_05_password_never_printed() {
    let sc = Scenario::new("secrets")
        .postgres(
            "CREATE TABLE {schema}.items (id int PRIMARY KEY, name text NOT NULL);
             INSERT INTO {schema}.items VALUES (1, 'a'), (2, '');",
        )
        .start()
        .await;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let random = random_passwords(seed, 3);
    let passwords = TRICKY
        .iter()
        .map(|p| p.to_string())
        .chain(random.iter().cloned());
    for (i, password) in passwords.enumerate() {
        let encoded = encode(&password);
        // The fixed ones also go through the mapping file; a random one may
        // hold `${`, which the mapping would read as a variable.
        let fixed = i < TRICKY.len();
        for in_url in [password.as_str(), encoded.as_str()] {
            let mut seen = Seen { texts: Vec::new() };
            exercise(&mut seen, &sc, in_url, fixed).await;
            let secrets: Vec<&str> = if in_url == password {
                vec![password.as_str()]
            } else {
                vec![password.as_str(), encoded.as_str()]
            };
            seen.assert_hidden(&secrets, &format!("random seed {seed}"));
        }
    }
}

/// A small SQLite file and a mapping over it, with no endpoint and no region.
async fn sqlite_scenario() -> (Scenario, String) {
    let sc = Scenario::new("no_region")
        .sqlite(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
             INSERT INTO items VALUES (1, 'a');",
        )
        .start()
        .await;
    let mapping = sc.mapping(
        &MAPPING
            .replace("SOURCE", &toml_escape(sc.sqlite_url()))
            .replace("FROM", "items"),
    );
    (sc, mapping)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_lost_06_aws_without_region_is_an_error() {
    let (sc, mapping) = sqlite_scenario().await;
    let dir = sc.path();
    // No region anywhere: empty AWS profile files, no AWS variables, and no
    // instance metadata service to ask.
    let config = dir.join("aws-config");
    let credentials = dir.join("aws-credentials");
    std::fs::write(&config, "").unwrap();
    std::fs::write(&credentials, "").unwrap();
    let out = command(dir, &["run", &mapping, "--json"])
        .env_clear()
        .env("HOME", dir)
        .env("AWS_CONFIG_FILE", &config)
        .env("AWS_SHARED_CREDENTIALS_FILE", &credentials)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EX_CONFIG), "{stderr}");
    for hint in [
        "no AWS region",
        "--region",
        "[target]",
        "AWS_REGION",
        "profile",
    ] {
        assert!(stderr.contains(hint), "{hint} missing from: {stderr}");
    }
    assert!(!stderr.contains("us-east-1"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_lost_12_endpoint_without_scheme_is_refused() {
    let (sc, mapping) = sqlite_scenario().await;
    for (endpoint, says) in [
        ("127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("localhost:8000", "http://localhost:8000"),
        ("Local", "`local`"),
    ] {
        let run = sc
            .sql2ddb(&[
                "run",
                &mapping,
                "--endpoint",
                endpoint,
                "--region",
                "eu-west-1",
            ])
            .await;
        let status = sc
            .sql2ddb(&["status", &mapping, "--run", "r", "--endpoint", endpoint])
            .await;
        for out in [&run, &status] {
            assert_eq!(out.code, EX_CONFIG, "{endpoint}: {}", out.stderr);
            assert!(out.stderr.contains(says), "{endpoint}: {}", out.stderr);
            for dump in ["DispatchFailure", "ConnectorError {", "SdkError", "{ "] {
                assert!(!out.stderr.contains(dump), "{endpoint}: {}", out.stderr);
            }
        }
    }
}
