//! SQLite cursor values as the table stores them: a date, timestamp or JSON
//! key is bound as its stored text, which is what SQLite orders.

use sql2ddb_core::SqlValue;
use sqlx::sqlite::SqlitePool;
use sqlx::{AssertSqlSafe, Sqlite};

use crate::sqlite::{text_value, Hint};
use crate::SourceError;

/// Cursor values as SQLite stored them.
///
/// A key of declared type `DATE`, `DATETIME`/`TIMESTAMP` or `JSON` decodes
/// to a date, timestamp or JSON value, but SQLite orders the stored text:
/// `2024-01-02T03:04:05` and `2024-01-02 03:04:05` decode alike and sort
/// apart. Binding any one rendering would step over or repeat rows, so each
/// such cursor value is looked up as the text the table holds (among the
/// renderings that decode to it) and bound as that text. Two stored texts of
/// one value are an error. A value no longer stored (deleted since it was read)
/// falls back to SQLite's own rendering (`YYYY-MM-DD HH:MM:SS.SSS`).
pub(crate) async fn stored_key_values(
    pool: &SqlitePool,
    relation: &str,
    key_refs: &[String],
    hints: &[Hint],
    values: &[SqlValue],
) -> Result<Vec<SqlValue>, SourceError> {
    let mut out = Vec::with_capacity(values.len());
    for ((key_ref, hint), value) in key_refs.iter().zip(hints).zip(values) {
        let forms = renderings(value);
        if forms.is_empty() {
            out.push(value.clone());
            continue;
        }
        let mut found = stored_text(pool, relation, key_ref, *hint, value, &forms).await?;
        if found.is_none() {
            if let SqlValue::TimestampTz(ts) = value {
                // Written with a zone other than UTC: try every quarter-hour offset.
                let forms = offset_renderings(ts);
                found = stored_text(pool, relation, key_ref, *hint, value, &forms).await?;
            }
            if let SqlValue::Json(json) = value {
                // JSON spaced some other way: compare minified (a scan, but
                // only for texts in none of the usual spacings).
                let sql = format!(
                    "SELECT {key_ref} FROM {relation} WHERE typeof({key_ref}) = 'text' \
                     AND json_valid({key_ref}) AND json({key_ref}) = json(?)"
                );
                let stored: Vec<String> = sqlx::query_scalar(AssertSqlSafe(sql))
                    .bind(json.to_string())
                    .fetch_all(pool)
                    .await
                    .map_err(|e| {
                        SourceError::query(format!("find the stored text of key {value:?}"), e)
                    })?;
                found = one_text(key_ref, hint, value, stored, None)?;
            }
        }
        let text = found.unwrap_or_else(|| {
            tracing::warn!(
                "key value {value:?} is no longer stored; paging on from its usual rendering {}",
                forms[0]
            );
            forms[0].clone()
        });
        out.push(SqlValue::Text(text));
    }
    Ok(out)
}

/// The stored text among `forms` that reads back as `value`; two are an error.
async fn stored_text(
    pool: &SqlitePool,
    relation: &str,
    key_ref: &str,
    hint: Hint,
    value: &SqlValue,
    forms: &[String],
) -> Result<Option<String>, SourceError> {
    let mut found: Option<String> = None;
    // Under SQLite's bind limit, whatever the number of forms.
    for chunk in forms.chunks(10_000) {
        let marks = vec!["?"; chunk.len()].join(", ");
        let sql = format!(
            "SELECT DISTINCT {key_ref} FROM {relation} WHERE typeof({key_ref}) = 'text' \
             AND {key_ref} IN ({marks}) ORDER BY {key_ref} DESC"
        );
        let mut query = sqlx::query_scalar::<Sqlite, String>(AssertSqlSafe(sql));
        for f in chunk {
            query = query.bind(f.clone());
        }
        let stored = query
            .fetch_all(pool)
            .await
            .map_err(|e| SourceError::query(format!("find the stored text of key {value:?}"), e))?;
        found = one_text(key_ref, &hint, value, stored, found)?;
    }
    Ok(found)
}

/// The one text among `stored` (and `found` so far) that reads back as `value`.
fn one_text(
    key_ref: &str,
    hint: &Hint,
    value: &SqlValue,
    stored: Vec<String>,
    mut found: Option<String>,
) -> Result<Option<String>, SourceError> {
    for text in stored {
        if &text_value(*hint, text.clone()) != value {
            continue;
        }
        if found.as_deref() == Some(text.as_str()) {
            // The same text in several rows (one column of a composite key).
            continue;
        }
        if let Some(other) = &found {
            // Two rows whose keys read as one value: no cursor can tell
            // them apart, and paging would skip or repeat rows.
            return Err(SourceError::config(format!(
                "key column {key_ref} holds the same value {value:?} as two texts, {other:?} and {text:?}: \
                 the key is not unique once read; store one format, or choose another key"
            )));
        }
        found = Some(text);
    }
    Ok(found)
}

/// JSON with `, ` and `: ` between items (Python's `json.dumps` default).
fn spaced_json(j: &serde_json::Value) -> String {
    use serde_json::Value;
    match j {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(spaced_json).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let items: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), spaced_json(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        scalar => scalar.to_string(),
    }
}

/// Renderings of an instant in every zone at a quarter-hour offset from UTC.
fn offset_renderings(ts: &chrono::DateTime<chrono::Utc>) -> Vec<String> {
    use chrono::Timelike;
    let nanos = ts.nanosecond();
    let mut fractions = vec![String::new(), format!(".{:03}", nanos / 1_000_000)];
    fractions.push(format!(".{:06}", nanos / 1000));
    fractions.push(format!(".{nanos:09}"));
    let mut out = Vec::new();
    for quarter in -56..=56 {
        if quarter == 0 {
            continue;
        }
        let Some(zone) = chrono::FixedOffset::east_opt(quarter * 15 * 60) else {
            continue;
        };
        let local = ts.with_timezone(&zone);
        let wall = local.format("%Y-%m-%d{}%H:%M:%S").to_string();
        let offset = local.format("%:z").to_string();
        for fraction in &fractions {
            for sep in [" ", "T"] {
                out.push(format!("{}{fraction}{offset}", wall.replace("{}", sep)));
            }
        }
    }
    out
}

/// The texts SQLite may hold for a decoded date, timestamp or JSON value,
/// SQLite's own rendering first; empty for values bound as they are.
pub(crate) fn renderings(value: &SqlValue) -> Vec<String> {
    use chrono::{Datelike, Timelike};
    let fractions = |nanos: u32| -> Vec<String> {
        let mut out = Vec::new();
        if nanos == 0 {
            out.push(String::new());
        }
        for digits in 1..=9u32 {
            let unit = 10u32.pow(9 - digits);
            if nanos.is_multiple_of(unit) {
                out.push(format!(
                    ".{:0width$}",
                    nanos / unit,
                    width = digits as usize
                ));
            }
        }
        // SQLite's own `%f` has three digits: try it first.
        out.sort_by_key(|f| f.len() != 4);
        out
    };
    let wall = |ts: &chrono::NaiveDateTime, suffixes: &[&str]| -> Vec<String> {
        let date = ts.format("%Y-%m-%d").to_string();
        let time = ts.format("%H:%M:%S").to_string();
        let mut out = Vec::new();
        for fraction in fractions(ts.nanosecond()) {
            for sep in [' ', 'T'] {
                for suffix in suffixes {
                    out.push(format!("{date}{sep}{time}{fraction}{suffix}"));
                }
            }
        }
        if ts.second() == 0 && ts.nanosecond() == 0 && suffixes == [""] {
            out.push(ts.format("%Y-%m-%d %H:%M").to_string());
        }
        out
    };
    let mut forms = match value {
        SqlValue::Date(d) => vec![
            d.format("%Y-%m-%d").to_string(),
            format!("{:04}-{}-{}", d.year(), d.month(), d.day()),
            format!("{:04}-{:02}-{}", d.year(), d.month(), d.day()),
            format!("{:04}-{}-{:02}", d.year(), d.month(), d.day()),
        ],
        SqlValue::Timestamp(ts) => wall(ts, &[""]),
        SqlValue::TimestampTz(ts) => wall(&ts.naive_utc(), &["Z", "+00:00", "-00:00", "z"]),
        SqlValue::Json(j) => {
            let mut out = vec![j.to_string(), spaced_json(j)];
            out.extend(serde_json::to_string_pretty(j).ok());
            out
        }
        _ => Vec::new(),
    };
    let first = forms.first().cloned();
    forms.sort();
    forms.dedup();
    // Keep SQLite's own rendering first, for the fallback.
    if let Some(first) = first {
        forms.retain(|f| f != &first);
        forms.insert(0, first);
    }
    forms
}
