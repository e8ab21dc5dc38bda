//! A password with a raw `?`, `#`, `/` or `@` breaks a connection URL in ways
//! whose errors ("invalid port number", an unknown host) say nothing of the
//! password, and the redacted URL beside them looks valid. When connecting
//! fails, this names the character and how to encode it.

/// The first URL delimiter found in the user or password part of `url`,
/// if any: the text between `://` and the last `@` that has a `:` (user and
/// password) before a `/`, `?` or `#`, or holds a second `@`. A `host:port`
/// followed by an `@` in the path or query is not a password.
pub(crate) fn raw_delimiter_in_password(url: &str) -> Option<char> {
    let (_, rest) = url.split_once("://")?;
    let userinfo = &rest[..rest.rfind('@')?];
    let (user, password) = userinfo.split_once(':')?;
    if user.contains(['/', '?', '#']) {
        return None;
    }
    let at = password.find(['?', '#', '/', '@'])?;
    let before = &password[..at];
    let looks_like_port = !before.is_empty() && before.bytes().all(|b| b.is_ascii_digit());
    (!looks_like_port).then(|| password[at..].chars().next())?
}

/// What to tell the user about `c` in the password.
pub(crate) fn advice(c: char) -> String {
    format!(
        "the password in the source URL holds a raw `{c}`, which a URL reads as a delimiter: \
         percent-encode it (`?` → %3F, `#` → %23, `@` → %40, `/` → %2F, `:` → %3A, `%` → %25), \
         e.g. with python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=\"\"))' 'PASSWORD'"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_raw_delimiter_in_the_password_only() {
        let cases = [
            ("postgres://root:pa?ss@127.0.0.1:5432/test", Some('?')),
            ("postgres://root:pa#ss@127.0.0.1:5432/test", Some('#')),
            ("mysql://root:p@ss@127.0.0.1:3306/test", Some('@')),
            ("postgres://root:a/b@db/test", Some('/')),
            ("postgres://root:pa%3Fss@127.0.0.1:5432/test", None),
            ("postgres://root@127.0.0.1:5432/test", None),
            ("postgres://127.0.0.1:5432/test?user=me@corp", None),
            ("postgres://db/test?options=a:b@c", None),
            ("sqlite://examples/shop.db", None),
        ];
        for (url, found) in cases {
            assert_eq!(raw_delimiter_in_password(url), found, "{url}");
        }
    }
}
