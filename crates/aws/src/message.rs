//! The readable text of a failed SDK call (the SDK's own Display is terse).

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

/// The longest excerpt of a raw response body put into an error message.
pub const BODY_EXCERPT_CHARS: usize = 200;

/// Renders an SDK error as `Code: message`. When the service sends no
/// message it can parse (a proxy's HTML error page, say), the HTTP status
/// and an excerpt of the body stand in for it; other failures (timeouts,
/// dropped connections) show their chain of causes.
pub fn sdk_message<E>(err: &SdkError<E, HttpResponse>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match err {
        SdkError::ServiceError(e) => {
            let raw = e.raw();
            let e = e.err();
            match (e.code(), e.message()) {
                (code, Some(message)) => format!("{}: {message}", code.unwrap_or("error")),
                (Some(code), None) => format!("{code}: {}", http_summary(raw)),
                (None, None) => http_summary(raw),
            }
        }
        other => {
            let mut msg = other.to_string();
            let mut source = std::error::Error::source(other);
            while let Some(s) = source {
                msg.push_str(": ");
                msg.push_str(&s.to_string());
                source = s.source();
            }
            if let Some(raw) = other.raw_response() {
                msg.push_str(": ");
                msg.push_str(&http_summary(raw));
            }
            msg
        }
    }
}

/// `HTTP 500: <excerpt of the body>`, on one line.
fn http_summary(raw: &HttpResponse) -> String {
    http_summary_of(
        raw.status().as_u16(),
        raw.body().bytes().unwrap_or_default(),
    )
}

/// `HTTP <status>: <excerpt of the body>`, on one line (the body's markup
/// dropped, at most [`BODY_EXCERPT_CHARS`] characters), or `HTTP <status>
/// with an empty body`.
pub fn http_summary_of(status: u16, body: &[u8]) -> String {
    let mut out = format!("HTTP {status}");
    let excerpt = body_excerpt(body);
    if excerpt.is_empty() {
        out.push_str(" with an empty body");
    } else {
        out.push_str(": ");
        out.push_str(&excerpt);
    }
    out
}

/// The first [`BODY_EXCERPT_CHARS`] characters of a body's text, markup
/// tags dropped and white space collapsed, so an HTML page reads as one line.
fn body_excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut plain = String::new();
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => {
                in_tag = true;
                plain.push(' ');
            }
            '>' if in_tag => in_tag = false,
            _ if in_tag => {}
            c if c.is_control() => plain.push(' '),
            c => plain.push(c),
        }
    }
    let words: Vec<&str> = plain.split_whitespace().collect();
    let line = words.join(" ");
    match line.char_indices().nth(BODY_EXCERPT_CHARS) {
        Some((cut, _)) => {
            let mut short = line[..cut].to_string();
            short.push('…');
            short
        }
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_body_becomes_one_short_line() {
        let page = format!(
            "<html>\r\n<head><title>500 Internal Server Error</title></head>\n<body>{}</body></html>",
            "x".repeat(1000)
        );
        let excerpt = body_excerpt(page.as_bytes());
        assert!(
            excerpt.starts_with("500 Internal Server Error x"),
            "{excerpt}"
        );
        assert!(
            !excerpt.contains('\n') && !excerpt.contains('<'),
            "{excerpt}"
        );
        assert_eq!(excerpt.chars().count(), BODY_EXCERPT_CHARS + 1);
        assert_eq!(body_excerpt(b"  \n "), "");
    }
}
