//! Durations as people write them on a command line (`90s`, `10m`,
//! `1h30m`) and as sql2ddb prints them back.

use std::time::Duration;

/// Reads `90s`, `10m`, `2h`, `1h30m`, `500ms` or a bare number of seconds
/// (`600`). The error says what was expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let expected = || {
        format!("`{text}` is not a duration: write it as 90s, 10m, 1h30m or a number of seconds")
    };
    let t = text.trim();
    if t.is_empty() {
        return Err(expected());
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse().map(Duration::from_secs).map_err(|_| expected());
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(expected());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| expected())?;
        rest = &rest[digits..];
        let unit = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let part = match &rest[..unit] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            _ => return Err(expected()),
        };
        rest = &rest[unit..];
        total = total.saturating_add(part);
    }
    Ok(total)
}

/// `d` the way [`parse_duration`] reads it back, in its largest whole units:
/// `10m`, `90s`, `1h30m`, `1500ms`.
pub fn duration_text(d: Duration) -> String {
    if d.subsec_millis() != 0 || d.is_zero() {
        return format!("{}ms", d.as_millis());
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_written_and_print_back_the_same() {
        for (text, secs) in [
            ("90s", 90),
            ("10m", 600),
            ("2h", 7200),
            ("1h30m", 5400),
            ("600", 600),
        ] {
            let d = parse_duration(text).unwrap();
            assert_eq!(d, Duration::from_secs(secs), "{text}");
            assert_eq!(parse_duration(&duration_text(d)).unwrap(), d, "{text}");
        }
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(duration_text(Duration::from_secs(600)), "10m");
        assert_eq!(duration_text(Duration::from_secs(90)), "1m30s");
        assert_eq!(duration_text(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn anything_else_is_refused_with_what_to_write() {
        for bad in ["", "m", "10x", "1.5m", "-3s", "10 m", "s10"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains("90s, 10m"), "{bad}: {err}");
        }
    }
}
