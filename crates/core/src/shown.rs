//! How figures are shown to people, the same way by every command and
//! report: counts with thousands separators (`1,234,567`), a noun in the
//! singular for one (`1 delete`, `2 deletes`), sizes in decimal units
//! (`16.8 MB`, as the run report has always shown them), and times in RFC
//! 3339, UTC, to the second (`2026-01-02T03:04:05Z`), or to the
//! millisecond where a lag is read from them. JSON reports keep raw
//! numbers and their own timestamps; this is for text.

use chrono::{DateTime, SecondsFormat, Utc};

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `n` with thousands separators and the noun that fits it: `one` for
/// exactly one, `many` otherwise (`0 items`, `1 item`, `1,200 items`).
pub fn count(n: u64, one: &str, many: &str) -> String {
    match n {
        1 => format!("1 {one}"),
        n => format!("{} {many}", thousands(n)),
    }
}

/// A byte count in decimal units: `512 B`, `1.5 kB`, `16.8 MB`, `2.0 GB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1000.0 && u < UNITS.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    match u {
        0 => format!("{n} B"),
        _ => format!("{v:.1} {}", UNITS[u]),
    }
}

/// A time in RFC 3339, UTC, to the second: `2026-01-02T03:04:05Z`.
pub fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A time in RFC 3339, UTC, to the millisecond: `2026-01-02T03:04:05.678Z`
/// (where a lag or an order of events is read from it).
pub fn time_ms(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A time a record or a server gave as RFC 3339 text, shown as [`time`]
/// shows it; text that is not RFC 3339 is shown as it is.
pub fn time_text(text: &str) -> String {
    match DateTime::parse_from_rfc3339(text) {
        Ok(t) => time(t.with_timezone(&Utc)),
        Err(_) => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn one_is_singular_every_other_count_plural() {
        assert_eq!(count(0, "delete", "deletes"), "0 deletes");
        assert_eq!(count(1, "delete", "deletes"), "1 delete");
        assert_eq!(count(2, "batch", "batches"), "2 batches");
        assert_eq!(count(12_000, "row", "rows"), "12,000 rows");
    }

    #[test]
    fn sizes_in_decimal_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1500), "1.5 kB");
        assert_eq!(bytes(16_800_000), "16.8 MB");
    }

    #[test]
    fn times_to_the_second_in_utc() {
        let t = DateTime::parse_from_rfc3339("2026-01-02T04:04:05.123456789+01:00")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(time(t), "2026-01-02T03:04:05Z");
        assert_eq!(time_ms(t), "2026-01-02T03:04:05.123Z");
        assert_eq!(
            time_text("2026-12-07T02:40:29.232544Z"),
            "2026-12-07T02:40:29Z"
        );
        assert_eq!(time_text("an unknown time"), "an unknown time");
    }
}
