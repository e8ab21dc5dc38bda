//! Secrets never print: passwords in connection URLs are masked everywhere.
//!
//! A password may hold any character, percent-encoded or not (`/`, `?`, `#`,
//! `:`, `@`, spaces, non-ASCII), so the end of a URL's userinfo cannot be
//! found by looking for the first delimiter. It is the *last* `@` on the same
//! line that is followed by a plausible `host[:port]` and then the end of the
//! authority. When text is ambiguous, more is masked rather than less.

/// Replaces the password of a URL (`scheme://user:pass@host`) with `***`.
/// Text that is not a URL with a password is returned unchanged.
pub fn redact_url(url: &str) -> String {
    redact_secrets(url)
}

/// Masks every `scheme://user:password@` occurrence inside free text, such as
/// an error message that quotes a connection string, and `password=` query
/// parameters.
///
/// The password is everything between the user's `:` and the last `@` of the
/// line that is followed by a host (`name`, `1.2.3.4` or `[v6]`), an optional
/// `:port`, and then the end of the authority (`/`, `?`, `#`, whitespace, a
/// quote, `,`, `;`, `:`, `)`, `>`, `]` or the end of the text). Two URLs with
/// passwords on one line are therefore masked as one span, from the first
/// user's `:` to the last host: less readable, but no password survives.
pub fn redact_secrets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let consumed = match password_span(tail) {
            Some((colon, at)) => {
                out.push_str(&tail[..colon]);
                out.push_str(":***");
                at
            }
            None => 0,
        };
        rest = &tail[consumed..];
    }
    out.push_str(rest);
    redact_query_password(&out)
}

/// For the text right after `://`, the byte offsets of the user's `:` and of
/// the `@` that ends the password, if the authority has a password.
fn password_span(tail: &str) -> Option<(usize, usize)> {
    // A user name holds no delimiter (it would be percent-encoded).
    let colon = tail.find(|c: char| {
        matches!(c, ':' | '/' | '?' | '#' | '@' | '"' | '\'') || c.is_whitespace()
    })?;
    if !tail[colon..].starts_with(':') {
        return None;
    }
    let start = colon + 1;
    // Passwords do not span lines; a newline ends the search.
    let line_end = tail[start..]
        .find(['\n', '\r'])
        .map_or(tail.len(), |i| start + i);
    let at = tail[start..line_end]
        .rmatch_indices('@')
        .map(|(i, _)| start + i)
        .find(|&at| host_follows(&tail[at + 1..line_end]))?;
    Some((colon, at))
}

/// Whether `text` starts with `host[:port]` followed by the end of an authority.
fn host_follows(text: &str) -> bool {
    let rest = if let Some(v6) = text.strip_prefix('[') {
        match v6.find(']') {
            Some(end)
                if end > 0
                    && v6[..end].chars().all(|c| {
                        c.is_ascii_hexdigit() || ":.%".contains(c) || c.is_ascii_alphanumeric()
                    }) =>
            {
                &v6[end + 1..]
            }
            _ => return false,
        }
    } else {
        let len = text
            .find(|c: char| !(c.is_ascii_alphanumeric() || "-._~%".contains(c)))
            .unwrap_or(text.len());
        if len == 0 {
            return false;
        }
        &text[len..]
    };
    let rest = match rest.strip_prefix(':') {
        Some(port) if port.starts_with(|c: char| c.is_ascii_digit()) => {
            port.trim_start_matches(|c: char| c.is_ascii_digit())
        }
        _ => rest,
    };
    match rest.chars().next() {
        None => true,
        Some(c) => c.is_whitespace() || "/?#\"',;:)>]".contains(c),
    }
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
    use proptest::prelude::*;

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

    #[test]
    fn nothing_lost_05_passwords_with_delimiters_are_masked() {
        for (url, masked) in [
            (
                "postgres://root:S3cr3t PW@127.0.0.1:5432/test",
                "postgres://root:***@127.0.0.1:5432/test",
            ),
            (
                "postgres://root:S3cr3t/PW@127.0.0.1/test",
                "postgres://root:***@127.0.0.1/test",
            ),
            (
                "mysql://root:S3cr?etPW@127.0.0.1:3306/test",
                "mysql://root:***@127.0.0.1:3306/test",
            ),
            (
                "mysql://root:a#b:c@d@db.example/test",
                "mysql://root:***@db.example/test",
            ),
            (
                "mysql://root:S3cr%2FPW%40x@db/test?ssl-mode=disabled",
                "mysql://root:***@db/test?ssl-mode=disabled",
            ),
            (
                "postgres://root:p@h w@[::1]:5432/test",
                "postgres://root:***@[::1]:5432/test",
            ),
            (
                "postgres://root:pässwörd€@localhost",
                "postgres://root:***@localhost",
            ),
            ("postgres://:only@h/db", "postgres://:***@h/db"),
        ] {
            assert_eq!(redact_url(url), masked, "{url}");
            // Masking is stable: a masked text does not change again.
            assert_eq!(redact_url(masked), masked);
        }
    }

    #[test]
    fn masks_inside_free_text_and_keeps_the_rest() {
        assert_eq!(
            redact_secrets("source \"mysql://root:S3 c/r@t@127.0.0.1:3306/test\": Access denied for user 'root'@'127.0.0.1'"),
            "source \"mysql://root:***@127.0.0.1:3306/test\": Access denied for user 'root'@'127.0.0.1'"
        );
        // A later line is not part of the password.
        assert_eq!(
            redact_secrets("postgres://u:p w@h/db failed\nwrite to admin@example.com"),
            "postgres://u:***@h/db failed\nwrite to admin@example.com"
        );
        // A URL without a password keeps its port.
        assert_eq!(
            redact_secrets("postgres://h:5432/db is down; http://localhost:8000"),
            "postgres://h:5432/db is down; http://localhost:8000"
        );
    }

    #[test]
    fn two_urls_on_one_line_lose_no_password() {
        let out = redact_secrets("from postgres://a:pw1@h1/db to mysql://b:pw2@h2/db");
        assert!(!out.contains("pw1") && !out.contains("pw2"), "{out}");
        assert!(out.starts_with("from postgres://a:***@"), "{out}");
    }

    /// Percent-encodes what RFC 3986 does not allow raw in a userinfo.
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

    fn password() -> impl Strategy<Value = String> {
        let printable = (0x20u8..0x7f).prop_map(char::from);
        let other = prop::sample::select(vec!['é', 'ß', '€', '密', '😀']);
        prop::collection::vec(prop_oneof![8 => printable, 1 => other], 4..24)
            .prop_map(|chars| chars.into_iter().collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever the password, the text comes out exactly as it went in
        /// with `***` in the password's place: so the password cannot remain,
        /// and the user, the host and the text around the URL survive.
        #[test]
        fn nothing_lost_05_any_password_is_masked(
            password in password(),
            encoded in any::<bool>(),
            scheme in prop::sample::select(vec!["postgres", "postgresql", "mysql", "mariadb"]),
            user in "[a-z][a-z0-9_]{0,7}",
            host in prop::sample::select(vec!["127.0.0.1", "db.example.com", "[::1]", "h", "localhost"]),
            port in prop::option::of(1u16..),
            path in prop::sample::select(vec!["", "/test", "/test?sslmode=disable", "?ssl-mode=disabled", "/"]),
            prefix in prop::sample::select(vec!["", "error: connecting to ", "source: \"", "(", "url="]),
            suffix in prop::sample::select(vec!["", ": connection refused", "\"", ") timed out", " failed\nmail admin@example.com"]),
        ) {
            let secret = if encoded { encode(&password) } else { password.clone() };
            let port = port.map(|p| format!(":{p}")).unwrap_or_default();
            let text = format!("{prefix}{scheme}://{user}:{secret}@{host}{port}{path}{suffix}");
            let expected = format!("{prefix}{scheme}://{user}:***@{host}{port}{path}{suffix}");
            let out = redact_secrets(&text);
            prop_assert_eq!(&out, &expected);
        }
    }
}
