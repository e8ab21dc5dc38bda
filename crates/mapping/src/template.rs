//! Key and attribute templates: `"ORDER#{order_id:08}"`, parsed once at load,
//! bound to column indices once per entity, rendered per row without lookups.

use sql2ddb_core::SqlValue;

use crate::error::Location;

/// Widest zero padding a template may ask for.
pub const MAX_PAD_WIDTH: usize = 64;

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    /// The template as written.
    pub text: String,
    /// Literal text and placeholders, in order.
    pub parts: Vec<Part>,
    /// Where the template's value starts in the mapping file.
    pub at: Location,
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    /// Literal text (`{{`/`}}` already unescaped).
    Lit(String),
    /// `{column}` or `{column:0N}`.
    Col(Placeholder),
}

/// A `{column}` placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placeholder {
    /// Column name.
    pub column: String,
    /// Zero-pad to this width.
    pub width: Option<usize>,
    /// Where the placeholder is in the mapping file.
    pub at: Location,
}

/// A template syntax error: byte offset in the template and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TemplateError {
    pub offset: usize,
    pub message: String,
}

impl Template {
    /// Parses `text`; `locate` maps a byte offset of the template to a place in the file.
    pub(crate) fn parse(
        text: &str,
        locate: &dyn Fn(usize) -> Location,
    ) -> Result<Template, TemplateError> {
        let err = |offset: usize, message: String| TemplateError { offset, message };
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut rest = text.char_indices().peekable();
        while let Some((i, c)) = rest.next() {
            match c {
                '{' if rest.peek().map(|p| p.1) == Some('{') => {
                    rest.next();
                    lit.push('{');
                }
                '{' => {
                    let (placeholder, end) = placeholder(text, i, locate)?;
                    if !lit.is_empty() {
                        parts.push(Part::Lit(std::mem::take(&mut lit)));
                    }
                    parts.push(Part::Col(placeholder));
                    // Skip the placeholder's characters.
                    while rest.next_if(|&(j, _)| j <= end).is_some() {}
                }
                '}' if rest.peek().map(|p| p.1) == Some('}') => {
                    rest.next();
                    lit.push('}');
                }
                '}' => {
                    return Err(err(
                        i,
                        "unmatched `}` (write `}}` for a literal brace)".into(),
                    ))
                }
                c => lit.push(c),
            }
        }
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        Ok(Template {
            text: text.to_string(),
            parts,
            at: locate(0),
        })
    }

    /// The placeholders, in order.
    pub(crate) fn placeholders(&self) -> impl Iterator<Item = &Placeholder> {
        self.parts.iter().filter_map(|p| match p {
            Part::Col(c) => Some(c),
            Part::Lit(_) => None,
        })
    }

    /// The literal text when the template has no placeholder.
    pub(crate) fn literal(&self) -> Option<String> {
        self.placeholders().next().is_none().then(|| {
            self.parts
                .iter()
                .map(|p| match p {
                    Part::Lit(s) => s.as_str(),
                    Part::Col(_) => "",
                })
                .collect()
        })
    }

    /// The column when the template is exactly one `{column}`, without padding or text.
    pub(crate) fn single_column(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [Part::Col(Placeholder {
                column,
                width: None,
                ..
            })] => Some(column),
            _ => None,
        }
    }
}

/// The placeholder opening at byte `i` of `text` (a `{` not doubled), and the
/// byte offset of its closing `}`.
fn placeholder(
    text: &str,
    i: usize,
    locate: &dyn Fn(usize) -> Location,
) -> Result<(Placeholder, usize), TemplateError> {
    let err = |offset: usize, message: String| TemplateError { offset, message };
    let inner_start = i + 1;
    let close = text[inner_start..].find(['{', '}']);
    let Some(len) = close.filter(|&n| text.as_bytes()[inner_start + n] == b'}') else {
        return Err(err(
            i,
            "unclosed `{` (write `{{` for a literal brace)".into(),
        ));
    };
    let inner = &text[inner_start..inner_start + len];
    let (column, spec) = match inner.split_once(':') {
        Some((c, s)) => (c, Some(s)),
        None => (inner, None),
    };
    if inner.is_empty() {
        return Err(err(
            i,
            "empty placeholder `{}`: name a column, e.g. `{customer_id}`".into(),
        ));
    }
    if column.is_empty() {
        return Err(err(i, format!("placeholder `{{{inner}}}` names no column")));
    }
    let width = match spec {
        None => None,
        Some(s) => Some(parse_width(s).ok_or_else(|| {
            err(
                inner_start + column.len() + 1,
                format!(
                    "bad format spec `{s}` in `{{{inner}}}`: only zero padding is supported, e.g. `{{{column}:08}}` (width 1..={MAX_PAD_WIDTH})"
                ),
            )
        })?),
    };
    let placeholder = Placeholder {
        column: column.to_string(),
        width,
        at: locate(i),
    };
    Ok((placeholder, inner_start + len))
}

fn parse_width(spec: &str) -> Option<usize> {
    let digits = spec.strip_prefix('0')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits
        .parse()
        .ok()
        .filter(|w| (1..=MAX_PAD_WIDTH).contains(w))
}

/// A template whose columns are resolved to row indices.
#[derive(Debug, Clone)]
pub(crate) struct BoundTemplate {
    pub text: String,
    pub parts: Vec<BoundPart>,
    /// The only column the template reads, when it reads exactly one.
    pub source_column: Option<String>,
}

/// A piece of a bound template.
#[derive(Debug, Clone)]
pub(crate) enum BoundPart {
    Lit(String),
    Col {
        idx: usize,
        name: String,
        width: Option<usize>,
    },
}

/// Why a template could not be rendered for a row: the column and the reason.
pub(crate) type RenderError = (String, String);

impl BoundTemplate {
    /// Renders the template for one row.
    pub(crate) fn render(&self, row: &[SqlValue], role: &str) -> Result<String, RenderError> {
        let mut out = String::with_capacity(self.text.len() + 16);
        for part in &self.parts {
            match part {
                BoundPart::Lit(s) => out.push_str(s),
                BoundPart::Col { idx, name, width } => {
                    let value = &row[*idx];
                    let text = value.to_text().ok_or_else(|| {
                        let why = match value {
                            SqlValue::Null => format!("column {name} is NULL"),
                            SqlValue::Invalid(reason) => {
                                format!("column {name} is invalid ({reason})")
                            }
                            _ => format!(
                                "column {name} has no text form (it holds {})",
                                kind_name(value)
                            ),
                        };
                        (
                            name.clone(),
                            format!("{why}, used in template {:?} ({role})", self.text),
                        )
                    })?;
                    match width {
                        Some(w) => push_padded(&mut out, &text, *w),
                        None => out.push_str(&text),
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Zero-pads `text` to `width` characters, the sign first (`-5` at width 4 → `-005`),
/// as Rust's `{:0w}` does.
pub(crate) fn push_padded(out: &mut String, text: &str, width: usize) {
    let (sign, digits) = match text.strip_prefix('-') {
        Some(d) => ("-", d),
        None => ("", text),
    };
    out.push_str(sign);
    let len = sign.len() + digits.chars().count();
    out.extend(std::iter::repeat_n('0', width.saturating_sub(len)));
    out.push_str(digits);
}

/// A short name of a value's kind, for messages.
pub(crate) fn kind_name(v: &SqlValue) -> &'static str {
    match v {
        SqlValue::Null => "NULL",
        SqlValue::Bool(_) => "a boolean",
        SqlValue::Int(_) | SqlValue::UInt(_) => "an integer",
        SqlValue::Float(_) => "a float",
        SqlValue::Decimal(_) => "a decimal",
        SqlValue::Text(_) => "text",
        SqlValue::Bytes(_) => "bytes",
        SqlValue::Date(_) => "a date",
        SqlValue::Time(_) => "a time",
        SqlValue::Timestamp(_) | SqlValue::TimestampTz(_) => "a timestamp",
        SqlValue::Json(_) => "JSON",
        SqlValue::Array(_) => "an array",
        SqlValue::TextSet(_) => "a set",
        SqlValue::Invalid(_) => "an invalid value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(offset: usize) -> Location {
        Location {
            file: "m.toml".into(),
            line: 1,
            col: offset + 1,
        }
    }

    fn parse(t: &str) -> Result<Template, TemplateError> {
        Template::parse(t, &loc)
    }

    #[test]
    fn parses_parts() {
        let t = parse("ORDER#{order_id:08}#{{x}}").unwrap();
        assert_eq!(
            t.parts,
            vec![
                Part::Lit("ORDER#".into()),
                Part::Col(Placeholder {
                    column: "order_id".into(),
                    width: Some(8),
                    at: loc(6)
                }),
                Part::Lit("#{x}".into()),
            ]
        );
        assert_eq!(
            parse("{{literal}}").unwrap().literal().as_deref(),
            Some("{literal}")
        );
        assert_eq!(parse("{id}").unwrap().single_column(), Some("id"));
        assert_eq!(parse("{id:03}").unwrap().single_column(), None);
        assert_eq!(
            parse("PROFILE").unwrap().literal().as_deref(),
            Some("PROFILE")
        );
    }

    #[test]
    fn reports_offsets() {
        let e = parse("ORDER#{order_id").unwrap_err();
        assert_eq!(e.offset, 6);
        assert!(e.message.contains("unclosed"), "{}", e.message);
        assert_eq!(parse("a{}").unwrap_err().offset, 1);
        let e = parse("x{id:abc}").unwrap_err();
        assert_eq!(e.offset, 5);
        assert!(e.message.contains("`abc`"), "{}", e.message);
        assert_eq!(parse("a}b").unwrap_err().offset, 1);
        assert_eq!(parse("{a{b}").unwrap_err().offset, 0);
        assert!(parse("{id:8}").is_err());
        assert!(parse("{id:0}").is_err());
    }

    #[test]
    fn pads_with_sign_first() {
        let mut s = String::new();
        push_padded(&mut s, "-5", 4);
        assert_eq!(s, "-005");
        assert_eq!(format!("{:04}", -5), s);
        s.clear();
        push_padded(&mut s, "123456", 3);
        assert_eq!(s, "123456");
    }
}
