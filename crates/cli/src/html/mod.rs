//! `report.html`: the report of a run, an update, a plan or a deep verify
//! as one self-contained page to look at, written by the command beside the
//! JSON report its job saved — inline CSS and inline SVG, no
//! script, no font, nothing fetched (its Content-Security-Policy forbids
//! it). Every string from the data is escaped. Figures carry `data-field`
//! and `data-value` attributes with the same names and values as the
//! report's JSON, so that a reader (or a test) can match the two.

mod chart;
mod deep;
mod plan;
mod run;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use deep::deep_page;
use plan::plan_page;
use run::{run_page, update_page};
use sql2ddb_engine::deep::DeepReport;
use sql2ddb_engine::plan::PlanReport;
use sql2ddb_engine::update::UpdateReport;
use sql2ddb_engine::RunReport;

use sql2ddb_engine::EngineError;

/// The file name of the page of a run, an update or a plan, beside
/// `report.json`.
pub(crate) const REPORT_HTML: &str = "report.html";

/// The file name of the page of `verify --deep`, beside
/// `verify-report.json`.
pub(crate) const DEEP_REPORT_HTML: &str = "verify-report.html";

/// Writes `html` to `dir/name` and returns the path; a page that cannot
/// be written fails the command as a file would (an I/O error).
fn write_page(dir: &Path, name: &str, html: &str) -> Result<PathBuf, EngineError> {
    let path = dir.join(name);
    std::fs::write(&path, html).map_err(|e| EngineError::io(&path, e))?;
    Ok(path)
}

/// Writes a run's page into its run directory.
pub(crate) fn save_run(r: &RunReport) -> Result<PathBuf, EngineError> {
    write_page(Path::new(&r.run_dir), REPORT_HTML, &run_page(r))
}

/// Writes an update job's page into its run directory.
pub(crate) fn save_update(r: &UpdateReport) -> Result<PathBuf, EngineError> {
    write_page(Path::new(&r.run_dir), REPORT_HTML, &update_page(r))
}

/// Writes a plan's page into `dir`, beside its `report.json`.
pub(crate) fn save_plan(r: &PlanReport, dir: &Path) -> Result<PathBuf, EngineError> {
    write_page(dir, REPORT_HTML, &plan_page(r))
}

/// Writes the page of `verify --deep` into the run directory.
pub(crate) fn save_deep(r: &DeepReport) -> Result<PathBuf, EngineError> {
    write_page(Path::new(&r.run_dir), DEEP_REPORT_HTML, &deep_page(r))
}

/// `text` safe in HTML text and in double-quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An integer with thousands separators, as every command shows one.
pub(crate) use sql2ddb_core::shown::thousands as int;

/// No request may leave the page: styles inline, images only as data.
const POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

const STYLE: &str = "\
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:72em;padding:0 1em;color:#1d2433;background:#fff}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #d8dde6;padding-bottom:.2em}
.sub{color:#5a6478;margin-top:0}
table{border-collapse:collapse;margin:.5em 0}th,td{padding:.25em .7em;border-bottom:1px solid #e6e9ef;text-align:right;vertical-align:top}
th{background:#f3f5f9;font-weight:600}th:first-child,td:first-child,td.text{text-align:left}
tfoot td{font-weight:600;border-top:2px solid #c5ccd8}
dl{display:grid;grid-template-columns:max-content auto;gap:.15em 1.2em}dt{color:#5a6478}dd{margin:0}
.status-ok{color:#17803d}.status-rejected,.status-time_up,.status-interrupted{color:#a15c00}.status-failed{color:#b3261e}
.warn{background:#fff6e0;border-left:4px solid #e0a100;padding:.4em .8em;margin:.3em 0}
.error{background:#fdecea;border-left:4px solid #b3261e;padding:.4em .8em}
.none{color:#5a6478;font-style:italic}
svg text{font:11px system-ui,sans-serif;fill:#5a6478}
.bar{fill:#3b6fd4}.hot{fill:#d4533b}.line{fill:none;stroke:#3b6fd4;stroke-width:1.5}.line2{fill:none;stroke:#d4533b;stroke-width:1.5}
.axis{stroke:#9aa3b5;stroke-width:1}
";

/// A page being built: a title, then sections.
pub(crate) struct Page {
    body: String,
    title: String,
}

impl Page {
    /// A page whose heading is `title` with `subtitle` under it.
    pub fn new(title: &str, subtitle: &str) -> Page {
        let mut body = String::new();
        let _ = write!(
            body,
            "<h1>{}</h1>\n<p class=\"sub\">{}</p>\n",
            escape(title),
            escape(subtitle)
        );
        Page {
            body,
            title: title.to_string(),
        }
    }

    /// A section with its heading and an `id` (its HTML is trusted: built
    /// by the helpers here, which escape).
    pub fn section(&mut self, id: &str, heading: &str, html: &str) {
        let _ = write!(
            self.body,
            "<section id=\"{}\">\n<h2>{}</h2>\n{html}</section>\n",
            escape(id),
            escape(heading)
        );
    }

    /// The whole document.
    pub fn finish(self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n{}</body>\n</html>\n",
            escape(&self.title),
            self.body
        )
    }
}

/// One figure of a summary list: its label, its JSON field, its value as
/// JSON prints it (`data-value`) and as shown.
pub(crate) struct Figure {
    pub label: &'static str,
    pub field: &'static str,
    pub value: String,
    pub shown: String,
}

impl Figure {
    /// A count.
    pub fn count(label: &'static str, field: &'static str, n: u64) -> Figure {
        Figure {
            label,
            field,
            value: n.to_string(),
            shown: int(n),
        }
    }

    /// Text, shown as is.
    pub fn text(label: &'static str, field: &'static str, text: &str) -> Figure {
        Figure {
            label,
            field,
            value: text.to_string(),
            shown: text.to_string(),
        }
    }

    /// A number with `decimals` shown.
    pub fn real(label: &'static str, field: &'static str, v: f64, decimals: usize) -> Figure {
        Figure {
            label,
            field,
            value: v.to_string(),
            shown: format!("{v:.decimals$}"),
        }
    }
}

/// A definition list of figures.
pub(crate) fn figures(list: &[Figure]) -> String {
    let mut out = String::from("<dl>\n");
    for f in list {
        let _ = writeln!(
            out,
            "<dt>{}</dt><dd data-field=\"{}\" data-value=\"{}\">{}</dd>",
            escape(f.label),
            escape(f.field),
            escape(&f.value),
            escape(&f.shown)
        );
    }
    out.push_str("</dl>\n");
    out
}

/// A table cell: a figure (with its JSON field and value) or text.
pub(crate) enum Cell {
    /// A count, right-aligned, `data-field` and `data-value` set.
    Count(&'static str, u64),
    /// A number with decimals.
    Real(&'static str, f64, usize),
    /// Text, left-aligned.
    Text(String),
    /// Trusted HTML built here (a bar).
    Html(String),
}

impl Cell {
    fn html(&self) -> String {
        match self {
            Cell::Count(field, n) => format!(
                "<td data-field=\"{field}\" data-value=\"{n}\">{}</td>",
                int(*n)
            ),
            Cell::Real(field, v, d) => {
                format!("<td data-field=\"{field}\" data-value=\"{v}\">{v:.d$}</td>")
            }
            Cell::Text(t) => format!("<td class=\"text\">{}</td>", escape(t)),
            Cell::Html(h) => format!("<td>{h}</td>"),
        }
    }
}

/// One table row, with the attributes that name it (`data-row`, and
/// `data-name` when it has one).
pub(crate) struct Row {
    pub kind: &'static str,
    pub name: Option<String>,
    pub cells: Vec<Cell>,
}

/// A table: a header, body rows, and an optional footer row.
pub(crate) fn table(id: &str, header: &[&str], rows: &[Row], footer: Option<&Row>) -> String {
    let tr = |r: &Row| {
        let name = r
            .name
            .as_deref()
            .map(|n| format!(" data-name=\"{}\"", escape(n)))
            .unwrap_or_default();
        let cells: String = r.cells.iter().map(Cell::html).collect();
        format!("<tr data-row=\"{}\"{name}>{cells}</tr>\n", r.kind)
    };
    let mut out = format!("<table id=\"{}\">\n<thead><tr>", escape(id));
    for h in header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for r in rows {
        out.push_str(&tr(r));
    }
    out.push_str("</tbody>\n");
    if let Some(f) = footer {
        let _ = write!(out, "<tfoot>\n{}</tfoot>\n", tr(f));
    }
    out.push_str("</table>\n");
    out
}

/// A paragraph saying there is nothing to show.
pub(crate) fn none(text: &str) -> String {
    format!("<p class=\"none\">{}</p>\n", escape(text))
}

/// Warnings, one box each.
pub(crate) fn warnings(list: &[String]) -> String {
    list.iter()
        .map(|w| format!("<p class=\"warn\">{}</p>\n", escape(w)))
        .collect()
}

/// The error box.
pub(crate) fn error(text: &str) -> String {
    format!("<p class=\"error\" id=\"error\">{}</p>\n", escape(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_data_is_shown_as_text() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn a_page_allows_no_request_and_no_script() {
        let mut page = Page::new("t <1>", "s");
        page.section("a\"b", "<h>", &none("n"));
        let html = page.finish();
        assert!(html.contains("default-src 'none'"));
        assert!(!html.contains("<script"));
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(html.contains("<title>t &lt;1&gt;</title>"));
        assert!(html.contains("id=\"a&quot;b\""));
    }
}
