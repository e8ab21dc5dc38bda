//! `${VAR}` and `${VAR:-default}` in the mapping's connection and target settings.

/// Why a value could not be expanded; offsets are bytes into the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExpandError {
    /// `${VAR}` with `VAR` unset and no default.
    Missing { offset: usize, var: String },
    /// `${` without `}` or with a bad variable name.
    Syntax { offset: usize, message: String },
}

/// Expands `${VAR}` (error when unset) and `${VAR:-default}` (default when unset
/// or empty, as in the shell). `$${` is a literal `${`; any other `$` is literal.
pub(crate) fn expand(
    value: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(value.len());
    let mut i = 0;
    while let Some(rel) = value[i..].find('$') {
        let at = i + rel;
        out.push_str(&value[i..at]);
        let rest = &value[at..];
        if rest.starts_with("$${") {
            out.push_str("${");
            i = at + 3;
            continue;
        }
        if !rest.starts_with("${") {
            out.push('$');
            i = at + 1;
            continue;
        }
        let Some(close) = rest.find('}') else {
            return Err(ExpandError::Syntax {
                offset: at,
                message: "unclosed `${` (write `${VAR}` or `${VAR:-default}`)".into(),
            });
        };
        let inner = &rest[2..close];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(ExpandError::Syntax {
                offset: at,
                message: format!("bad environment variable name {name:?} in `${{{inner}}}`"),
            });
        }
        match (env(name), default) {
            (Some(v), Some(d)) if v.is_empty() => out.push_str(d),
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(ExpandError::Missing {
                    offset: at,
                    var: name.to_string(),
                })
            }
        }
        i = at + close + 1;
    }
    out.push_str(&value[i..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOST" => Some("db".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands() {
        assert_eq!(expand("pg://${HOST}/x", &env).unwrap(), "pg://db/x");
        assert_eq!(expand("${NOPE:-local}", &env).unwrap(), "local");
        assert_eq!(expand("${EMPTY:-d}", &env).unwrap(), "d");
        assert_eq!(expand("${EMPTY}", &env).unwrap(), "");
        assert_eq!(expand("a$b$${c}", &env).unwrap(), "a$b${c}");
        assert_eq!(
            expand("x${NOPE}", &env),
            Err(ExpandError::Missing {
                offset: 1,
                var: "NOPE".into()
            })
        );
        assert!(matches!(
            expand("${HOST", &env),
            Err(ExpandError::Syntax { offset: 0, .. })
        ));
        assert!(matches!(
            expand("${1A}", &env),
            Err(ExpandError::Syntax { .. })
        ));
    }
}
