//! `sql2ddb get MAPPING ENTITY KEY=VALUE…`: one source row explained — the
//! item(s) the mapping makes of it beside what the table holds at their
//! keys, the differences marked.

use std::path::PathBuf;

use sql2ddb_engine::get::{get as explain, GetOptions, GetOutcome, GetReport, ItemCheck};
use sql2ddb_engine::{new_run_id, RunId, RunOptions};

use crate::deep::shorten_pair;
use crate::load;
use crate::outcome::{Ended, Output};

/// Exit codes of `get`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  every item the row makes is in the table, every attribute equal
  1  an item is missing in the table or differs, the row is not in the
     source, or the mapping rejects it
  64 usage error: unknown option, missing argument, a key not KEY=VALUE
  69 the source or DynamoDB could not be reached, or refused
  74 the mapping could not be read
  75 DynamoDB kept throttling past the retries: try again later
  78 the mapping is invalid or does not fit its source, no such entity,
     or the key columns given are not the entity's key";

/// The arguments of `get`.
#[derive(clap::Args)]
pub struct GetArgs {
    /// The mapping.
    pub mapping: PathBuf,
    /// The entity the row belongs to.
    pub entity: String,
    /// The row's key: every key column of the entity (its primary key, or
    /// its `key = [...]`), as COLUMN=VALUE.
    #[arg(required = true, value_name = "KEY=VALUE", value_parser = key_pair)]
    pub key: Vec<(String, String)>,
    /// DynamoDB endpoint: a URL, or `local` for the data a run's embedded
    /// endpoint kept in its directory (overriding the mapping's; default AWS).
    #[arg(long, value_name = "URL|local")]
    pub endpoint: Option<String>,
    /// AWS region, overriding the mapping's and the environment's.
    #[arg(long)]
    pub region: Option<String>,
    /// Source URL, overriding the mapping's.
    #[arg(long, value_name = "URL")]
    pub source: Option<String>,
    /// With `--endpoint local`: the run whose data is read (default: the
    /// newest run of the mapping).
    #[arg(long, value_name = "RUN_ID|latest")]
    pub run: Option<String>,
    /// Where run directories are.
    #[arg(long, value_name = "DIR", default_value = "sql2ddb-runs")]
    pub runs_dir: PathBuf,
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `COLUMN=VALUE`.
fn key_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("{text:?} is not COLUMN=VALUE")),
    }
}

/// Runs `get`; 0 when every item the row makes is in the table, equal.
pub async fn get(args: GetArgs) -> Ended {
    let plan = load(&args.mapping, args.source.as_deref())?;
    let endpoint = args.endpoint.as_deref().or(plan.target.endpoint.as_deref());
    // The embedded `local` endpoint's data is in a run's directory (the
    // newest run of the mapping by default); any other endpoint reads from
    // a directory of its own.
    // A directory of its own is left only when it holds something (the
    // rejects file of a rejected row).
    let own_dir = !matches!(endpoint, Some("local")) && args.run.is_none();
    let run_id = match endpoint {
        Some("local") => {
            crate::runs::chosen_run(args.run.as_deref(), &args.runs_dir, Some(&args.mapping))?
        }
        _ => match args.run.as_deref() {
            Some(run) => RunId::parse(run)?,
            None => new_run_id(),
        },
    };
    let opts = GetOptions {
        run: RunOptions {
            source: args.source.clone(),
            endpoint: args.endpoint.clone(),
            region: args.region.clone(),
            runs_dir: args.runs_dir.clone(),
            run_id: Some(run_id.clone()),
            ..RunOptions::default()
        },
        entity: args.entity.clone(),
        key: args.key.clone(),
    };
    let result = explain(&plan, &opts).await;
    if own_dir {
        let _ = std::fs::remove_dir(args.runs_dir.join(&run_id));
    }
    let report = result?;
    let output = Output::new(args.json);
    output.json(&report);
    if !output.is_json() {
        print!("{}", render(&report));
    }
    Ok(u8::from(!report.equal()))
}

/// The report for the terminal.
pub fn render(r: &GetReport) -> String {
    let key: Vec<String> = r
        .source_key
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    let mut out = format!(
        "{} {}  table {}  endpoint {}\n",
        r.entity,
        key.join(" "),
        r.table,
        r.endpoint
    );
    match &r.outcome {
        GetOutcome::NotInSource => out.push_str(&format!(
            "not in the source: no row of {} has this key\n",
            r.entity
        )),
        GetOutcome::Rejected {
            reasons,
            rejects_file,
        } => out.push_str(&format!(
            "rejected by the mapping, so no item is made of it: {} (the row is in {rejects_file})\n",
            reasons.join("; ")
        )),
        GetOutcome::Items { items } => {
            for item in items {
                out.push_str(&render_item(item));
            }
        }
    }
    out
}

/// One item: its key, its verdict, then each attribute, expected beside
/// actual, `≠` before those that differ.
fn render_item(item: &ItemCheck) -> String {
    let differing: Vec<&str> = item
        .attributes
        .iter()
        .filter(|a| a.differs)
        .map(|a| a.name.as_str())
        .collect();
    let verdict = match (item.missing, differing.is_empty()) {
        (true, _) => "missing in the table".to_string(),
        (false, true) => "equal".to_string(),
        (false, false) => format!("differs in {}", differing.join(", ")),
    };
    let mut out = format!("item {}: {verdict}\n", item.key);
    let text = |v: &Option<serde_json::Value>| v.as_ref().map(|v| v.to_string());
    let rows: Vec<(bool, &str, String, String)> = item
        .attributes
        .iter()
        .map(|a| {
            // Each alone (from its start) unless they differ: then both
            // are cut around where they part.
            let alone = |v: &Option<serde_json::Value>| shorten_pair(text(v), None).0;
            let (expected, actual) = match (item.missing, a.differs) {
                (true, _) => (alone(&a.expected), "—".to_string()),
                (false, true) => shorten_pair(text(&a.expected), text(&a.actual)),
                (false, false) => (alone(&a.expected), alone(&a.actual)),
            };
            (a.differs, a.name.as_str(), expected, actual)
        })
        .collect();
    let name_w = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
    let name_w = name_w.max("attribute".len());
    let exp_w = rows.iter().map(|r| r.2.chars().count()).max().unwrap_or(0);
    let exp_w = exp_w.max("expected".len());
    out.push_str(&format!(
        "    {:<name_w$}  {:<exp_w$}  actual\n",
        "attribute", "expected"
    ));
    for (differs, name, expected, actual) in rows {
        let mark = if differs { "≠" } else { " " };
        out.push_str(&format!(
            "  {mark} {name:<name_w$}  {expected:<exp_w$}  {actual}\n"
        ));
    }
    out
}
