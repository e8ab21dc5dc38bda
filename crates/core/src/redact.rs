//! Secrets never print: passwords in connection URLs are masked everywhere.

/// Replaces the password of a URL (`scheme://user:pass@host`) with `***`.
/// Text that is not a URL with a password is returned unchanged.
pub fn redact_url(url: &str) -> String {
    redact_secrets(url)
}

/// Masks every `scheme://user:password@` occurrence inside free text, such as
/// an error message that quotes a connection string, and `password=` query
/// parameters.
pub fn redact_secrets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the first '/', whitespace or quote; a password at the last '@' before it.
        let end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'' || c == '?')
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match (authority.rfind('@'), authority.find(':')) {
            (Some(at), Some(colon)) if colon < at => {
                out.push_str(&authority[..colon]);
                out.push_str(":***");
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    redact_query_password(&out)
}

fn redact_query_password(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.to_ascii_lowercase().find("password=") {
        let (head, tail) = rest.split_at(i + "password=".len());
        out.push_str(head);
        out.push_str("***");
        let end = tail
            .find(|c: char| c == '&' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(tail.len());
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_passwords() {
        assert_eq!(
            redact_url("postgres://app:s3cret@db.example:5432/shop"),
            "postgres://app:***@db.example:5432/shop"
        );
        assert_eq!(
            redact_secrets("error connecting to mysql://root:p@ss@h/db: refused"),
            "error connecting to mysql://root:***@h/db: refused"
        );
        assert_eq!(redact_url("sqlite://shop.db"), "sqlite://shop.db");
        assert_eq!(redact_url("postgres://app@h/db"), "postgres://app@h/db");
        assert_eq!(
            redact_secrets("postgres://h/db?user=a&password=x1&sslmode=require"),
            "postgres://h/db?user=a&password=***&sslmode=require"
        );
    }
}
