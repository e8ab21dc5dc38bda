//! DynamoDB's number rules: at most 38 significant digits, magnitude within
//! 1E-130 ..= 9.99…E+125 (or zero). Values outside are errors, never rounded.

use thiserror::Error;

/// Most significant digits a DynamoDB number may carry.
pub const MAX_SIGNIFICANT_DIGITS: usize = 38;
/// Smallest decimal exponent of a non-zero DynamoDB number (1E-130).
pub const MIN_EXPONENT: i64 = -130;
/// Largest decimal exponent of a DynamoDB number (9.99…E+125).
pub const MAX_EXPONENT: i64 = 125;

/// Why a value cannot be a DynamoDB number.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NumberError {
    /// Not a decimal number at all (also NaN and infinities).
    #[error("{0:?} is not a finite decimal number (DynamoDB has no NaN or Infinity)")]
    NotANumber(String),
    /// More than 38 significant digits.
    #[error("{digits} significant digits exceed DynamoDB's limit of 38 (value {value}); use numeric_as = \"string\" to keep it as text")]
    TooManyDigits {
        /// The offending value.
        value: String,
        /// Its significant digits.
        digits: usize,
    },
    /// Magnitude outside 1E-130 ..= 9.99…E+125.
    #[error("{value} is outside DynamoDB's number range 1E-130 .. 9.99E+125; use numeric_as = \"string\" to keep it as text")]
    OutOfRange {
        /// The offending value.
        value: String,
    },
}

/// Checks `text` against DynamoDB's number rules and returns it in plain,
/// normalised decimal notation (no exponent, no leading or trailing zeros).
pub fn normalize_number(text: &str) -> Result<String, NumberError> {
    if is_normal(text) {
        return Ok(text.to_string());
    }
    normalize_parsed(text)
}

/// Whether `text` is already what [`normalize_number`] makes of it: an
/// optional `-`, an integer part without leading zeros, a fraction (if
/// any) without trailing zeros, and at most 38 digits in all, so within
/// DynamoDB's digits and range; not `-0`. Most numbers a database gives
/// are, and are taken as they are.
fn is_normal(text: &str) -> bool {
    let (negative, b) = match text.as_bytes().split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text.as_bytes()),
    };
    let int_len = b
        .iter()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(b.len());
    let (int, rest) = b.split_at(int_len);
    if int.is_empty() || (int.len() > 1 && int[0] == b'0') {
        return false;
    }
    let frac: &[u8] = match rest.split_first() {
        None => &[],
        // Digits after the point, the last not a zero.
        Some((b'.', frac))
            if frac.iter().all(u8::is_ascii_digit) && !matches!(frac.last(), None | Some(b'0')) =>
        {
            frac
        }
        Some(_) => return false,
    };
    int.len() + frac.len() <= MAX_SIGNIFICANT_DIGITS
        && !(negative && int == b"0" && frac.is_empty())
}

/// [`normalize_number`] by parsing `text` whatever its form.
fn normalize_parsed(text: &str) -> Result<String, NumberError> {
    let not_a_number = || NumberError::NotANumber(text.to_string());
    let t = text.trim();
    let (negative, rest) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(i) => {
            let e: i64 = rest[i + 1..].parse().map_err(|_| not_a_number())?;
            (&rest[..i], e)
        }
        None => (rest, 0),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    if (int_part.is_empty() && frac_part.is_empty())
        || !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(not_a_number());
    }
    // value = 0.<all digits> × 10^(point), with `point` the position of the decimal point.
    let all: String = format!("{int_part}{frac_part}");
    let lead = all.bytes().take_while(|&b| b == b'0').count();
    let digits = all[lead..].trim_end_matches('0');
    if digits.is_empty() {
        return Ok("0".to_string());
    }
    let point = int_part.len() as i64 - lead as i64 + exp;
    if digits.len() > MAX_SIGNIFICANT_DIGITS {
        return Err(NumberError::TooManyDigits {
            value: text.to_string(),
            digits: digits.len(),
        });
    }
    // Scientific exponent of the first significant digit.
    let sci = point - 1;
    if !(MIN_EXPONENT..=MAX_EXPONENT).contains(&sci) {
        return Err(NumberError::OutOfRange {
            value: text.to_string(),
        });
    }
    let mut out = String::with_capacity(digits.len() + 8);
    if negative {
        out.push('-');
    }
    if point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.push_str(digits);
    } else if point as usize >= digits.len() {
        out.push_str(digits);
        out.extend(std::iter::repeat_n('0', point as usize - digits.len()));
    } else {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    }
    Ok(out)
}

/// Bytes DynamoDB counts for a number value: one per two significant digits, plus one.
pub fn number_size(normalized: &str) -> usize {
    let significant = normalized
        .bytes()
        .filter(u8::is_ascii_digit)
        .skip_while(|&b| b == b'0')
        .count();
    // Trailing zeros of an integer are not significant either.
    let trailing = if normalized.contains('.') {
        0
    } else {
        normalized.bytes().rev().take_while(|&b| b == b'0').count()
    };
    let sig = significant.saturating_sub(trailing).max(1);
    sig.div_ceil(2) + 1
}

#[cfg(test)]
mod tests {

    /// Text taken as it is is exactly what parsing makes of it, and what
    /// parsing gives (within 38 digits) is taken as it is: on every string
    /// of up to five characters of digits, signs, points and exponents,
    /// and on long and edge numbers.
    #[test]
    fn numbers_already_normal_are_taken_as_they_are_and_only_they() {
        let alphabet = ['0', '1', '9', '-', '+', '.', 'e', ' '];
        let mut texts: Vec<String> = vec![String::new()];
        let mut level = texts.clone();
        for _ in 0..5 {
            level = level
                .iter()
                .flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}")))
                .collect();
            texts.extend(level.iter().cloned());
        }
        let nines = "9".repeat(38);
        texts.extend([
            nines.clone(),
            format!("{nines}9"),
            format!("-{nines}"),
            format!("0.{}", "9".repeat(37)),
            format!("0.{}", "9".repeat(38)),
            format!("0.{}1", "0".repeat(36)),
            format!("0.{}1", "0".repeat(129)),
            format!("1{}", "0".repeat(125)),
            format!("1{}", "0".repeat(126)),
            "252.22".into(),
            "-0.5".into(),
            "-0".into(),
            "0.0".into(),
            "1.50".into(),
        ]);
        let mut taken = 0;
        for text in &texts {
            let parsed = normalize_parsed(text);
            if is_normal(text) {
                taken += 1;
                assert_eq!(parsed.as_deref(), Ok(text.as_str()), "{text:?}");
            }
            if let Ok(normal) = &parsed {
                let digits = normal.bytes().filter(u8::is_ascii_digit).count();
                if digits <= MAX_SIGNIFICANT_DIGITS {
                    assert!(is_normal(normal), "{text:?} gives {normal:?}");
                }
            }
            assert_eq!(normalize_number(text), parsed, "{text:?}");
        }
        assert!(taken > 500, "{taken} taken as they are");
    }
    use super::*;

    #[test]
    fn normalises() {
        assert_eq!(normalize_number("42").unwrap(), "42");
        assert_eq!(normalize_number("-0042.5000").unwrap(), "-42.5");
        assert_eq!(normalize_number("0.000").unwrap(), "0");
        assert_eq!(normalize_number("1.5e3").unwrap(), "1500");
        assert_eq!(normalize_number("1.5E-3").unwrap(), "0.0015");
        assert_eq!(normalize_number("+.5").unwrap(), "0.5");
        assert_eq!(
            normalize_number("18446744073709551615").unwrap(),
            "18446744073709551615"
        );
    }

    #[test]
    fn rejects_what_dynamodb_cannot_store() {
        assert!(matches!(
            normalize_number("NaN"),
            Err(NumberError::NotANumber(_))
        ));
        assert!(matches!(
            normalize_number("inf"),
            Err(NumberError::NotANumber(_))
        ));
        assert!(matches!(
            normalize_number("1.2.3"),
            Err(NumberError::NotANumber(_))
        ));
        assert!(matches!(
            normalize_number(""),
            Err(NumberError::NotANumber(_))
        ));
        let forty_one = "1".repeat(41);
        assert_eq!(
            normalize_number(&forty_one),
            Err(NumberError::TooManyDigits {
                value: forty_one.clone(),
                digits: 41
            })
        );
        // 38 digits are fine, 39 are not.
        assert!(normalize_number(&"9".repeat(38)).is_ok());
        assert!(normalize_number(&"9".repeat(39)).is_err());
        // Trailing zeros of an integer do not count as significant.
        assert!(normalize_number(&format!("1{}", "0".repeat(100))).is_ok());
    }

    #[test]
    fn range_edges() {
        assert!(normalize_number("1E-130").is_ok());
        assert!(matches!(
            normalize_number("1E-131"),
            Err(NumberError::OutOfRange { .. })
        ));
        assert!(normalize_number("9.9E125").is_ok());
        assert!(matches!(
            normalize_number("1E126"),
            Err(NumberError::OutOfRange { .. })
        ));
        assert!(normalize_number("-9.9E125").is_ok());
    }

    #[test]
    fn sizes() {
        assert_eq!(number_size("0"), 2);
        assert_eq!(number_size("12"), 2);
        assert_eq!(number_size("123"), 3);
        assert_eq!(number_size("1000"), 2);
        assert_eq!(number_size("-0.0015"), 2);
    }
}
