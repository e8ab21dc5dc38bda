//! SigV4 for the writer's one request shape.
//!
//! `aws-sigv4`'s general `sign` takes any request: on every call it copies
//! and normalises each header into a map, sorts the names, writes the
//! canonical request and the string to sign through `fmt`, and derives the
//! signing key again with four HMACs (the key changes once a day). For a
//! writer every `BatchWriteItem` differs from the last only in its body, its
//! length, the time and, when credentials are fetched again, the keys, so
//! [`Signing`] writes the canonical request from parts settled when it is
//! made and keeps the signing key for the day and the credentials it was
//! derived for. The cryptography is `aws-sigv4`'s own
//! ([`v4::generate_signing_key`], [`v4::calculate_signature`]) and the
//! SHA-256 the same `sha2` it hashes with.
//!
//! Before it signs anything this way, [`Signing::new`] signs a probe
//! request both ways (with and without a session token) and compares every
//! header they add; if they differ in anything (a release of `aws-sigv4`
//! that signs another header, an endpoint URL with a path, or a host it
//! writes otherwise), every call is signed by `aws-sigv4`'s `sign` instead.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use sha2::{Digest, Sha256};

/// The algorithm, as the `Authorization` header names it.
const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// The headers a signature adds to a request: `x-amz-date`,
/// `authorization` and, with a session token, `x-amz-security-token`.
pub(crate) type SignatureHeaders = Vec<(&'static str, String)>;

/// Signs requests to one URL, in one region, for one service, carrying the
/// same headers on every call beside `content-length`: see the module's
/// documentation.
pub(crate) struct Signing {
    url: String,
    region: String,
    service: &'static str,
    /// The request's headers other than `content-length`, as sent.
    headers: Vec<(&'static str, String)>,
    /// The parts of the canonical request, when they sign as `aws-sigv4`
    /// does; else `None`, and `aws-sigv4` signs every call.
    direct: Option<Direct>,
}

/// The canonical request's fixed parts.
struct Direct {
    /// The canonical headers after `content-length` and before
    /// `x-amz-date` (`content-type`, `host`, …), each `name:value\n`.
    before_date: String,
    /// The canonical headers after `x-amz-security-token`.
    after_token: String,
    /// The signed header names, without and with a session token.
    signed: String,
    signed_with_token: String,
    /// The last signing key, if any.
    key: Mutex<Option<KeptKey>>,
}

/// A signing key kept for the calls that follow.
#[derive(Clone, Copy)]
struct KeptKey {
    /// The credentials' fetch number that the key was derived from.
    fetch: u64,
    /// The day it signs for (`YYYYMMDD`).
    day: [u8; 8],
    /// The key.
    key: [u8; 32],
}

impl Signing {
    /// Signing for requests `POST` to `url` with `headers` (names in lower
    /// case; `content-length` is added per call), in `region`, for
    /// `service`.
    pub(crate) fn new(
        url: &str,
        region: &str,
        service: &'static str,
        headers: Vec<(&'static str, String)>,
    ) -> Signing {
        let mut signing = Signing {
            url: url.to_string(),
            region: region.to_string(),
            service,
            headers,
            direct: None,
        };
        signing.direct = signing.direct_parts().filter(|d| signing.agrees(d));
        signing
    }

    /// The headers every request carries (beside `content-length`), as
    /// they are sent.
    pub(crate) fn headers(&self) -> &[(&'static str, String)] {
        &self.headers
    }

    /// Whether calls are signed from the settled parts (else by
    /// `aws-sigv4`'s general `sign`).
    pub(crate) fn is_direct(&self) -> bool {
        self.direct.is_some()
    }

    /// The headers that sign `body` at `time` with `identity` (which came
    /// from the credentials' fetch number `fetch`).
    pub(crate) fn sign(
        &self,
        identity: &Identity,
        fetch: u64,
        time: SystemTime,
        body: &[u8],
        content_length: &str,
    ) -> Result<SignatureHeaders, String> {
        match &self.direct {
            Some(direct) if time >= UNIX_EPOCH => {
                let credentials = identity
                    .data::<Credentials>()
                    .ok_or("the identity is not AWS credentials")?;
                Ok(self.sign_direct(direct, credentials, fetch, time, body, content_length))
            }
            _ => self.sign_general(identity, time, body, content_length),
        }
    }

    /// Signed by `aws-sigv4`'s `sign`, with its default settings.
    fn sign_general(
        &self,
        identity: &Identity,
        time: SystemTime,
        body: &[u8],
        content_length: &str,
    ) -> Result<SignatureHeaders, String> {
        let params: aws_sigv4::http_request::SigningParams<'_> = v4::SigningParams::builder()
            .identity(identity)
            .region(&self.region)
            .name(self.service)
            .time(time)
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| e.to_string())?
            .into();
        let headers = self
            .headers
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .chain(std::iter::once(("content-length", content_length)));
        let signed = SignableRequest::new("POST", &self.url, headers, SignableBody::Bytes(body))
            .and_then(|r| sign(r, &params))
            .map_err(|e| e.to_string())?;
        let (instructions, _signature) = signed.into_parts();
        let (headers, _) = instructions.into_parts();
        Ok(headers
            .into_iter()
            .map(|h| (h.name(), h.value().to_string()))
            .collect())
    }

    /// Signed from the settled parts.
    fn sign_direct(
        &self,
        direct: &Direct,
        credentials: &Credentials,
        fetch: u64,
        time: SystemTime,
        body: &[u8],
        content_length: &str,
    ) -> SignatureHeaders {
        let stamp = utc_stamp(time);
        let stamp = std::str::from_utf8(&stamp).expect("digits, T and Z");
        let day: [u8; 8] = stamp.as_bytes()[..8].try_into().expect("8 bytes");
        let day_text = &stamp[..8];
        let token = credentials.session_token();

        let mut creq = String::with_capacity(
            160 + direct.before_date.len()
                + direct.after_token.len()
                + token.map_or(0, str::len)
                + direct.signed_with_token.len(),
        );
        creq.push_str("POST\n/\n\ncontent-length:");
        creq.push_str(content_length);
        creq.push('\n');
        creq.push_str(&direct.before_date);
        creq.push_str("x-amz-date:");
        creq.push_str(stamp);
        creq.push('\n');
        if let Some(token) = token {
            creq.push_str("x-amz-security-token:");
            creq.push_str(token);
            creq.push('\n');
        }
        creq.push_str(&direct.after_token);
        creq.push('\n');
        let signed = if token.is_some() {
            &direct.signed_with_token
        } else {
            &direct.signed
        };
        creq.push_str(signed);
        creq.push('\n');
        push_hex(&mut creq, &Sha256::digest(body));

        let mut sts = String::with_capacity(160);
        sts.push_str(ALGORITHM);
        sts.push('\n');
        sts.push_str(stamp);
        sts.push('\n');
        let scope_at = sts.len();
        let _ = write!(
            sts,
            "{day_text}/{}/{}/aws4_request",
            self.region, self.service
        );
        let scope_end = sts.len();
        sts.push('\n');
        push_hex(&mut sts, &Sha256::digest(creq.as_bytes()));

        let key = self.signing_key(direct, credentials, fetch, time, day);
        let signature = v4::calculate_signature(key, sts.as_bytes());
        let authorization = format!(
            "{ALGORITHM} Credential={}/{}, SignedHeaders={signed}, Signature={signature}",
            credentials.access_key_id(),
            &sts[scope_at..scope_end],
        );
        let mut headers = Vec::with_capacity(3);
        headers.push(("x-amz-date", stamp.to_string()));
        headers.push(("authorization", authorization));
        if let Some(token) = token {
            headers.push(("x-amz-security-token", token.to_string()));
        }
        headers
    }

    /// The signing key for the day of `time` and these credentials: the one
    /// kept, or derived and kept.
    fn signing_key(
        &self,
        direct: &Direct,
        credentials: &Credentials,
        fetch: u64,
        time: SystemTime,
        day: [u8; 8],
    ) -> [u8; 32] {
        let mut kept = direct.key.lock().expect("signing key");
        match *kept {
            Some(k) if k.fetch == fetch && k.day == day => k.key,
            _ => {
                let derived = v4::generate_signing_key(
                    credentials.secret_access_key(),
                    time,
                    &self.region,
                    self.service,
                );
                let key: [u8; 32] = derived.as_ref().try_into().expect("an HMAC-SHA256 tag");
                *kept = Some(KeptKey { fetch, day, key });
                key
            }
        }
    }

    /// The canonical request's fixed parts for this URL and these headers,
    /// if the URL is one this way can sign (a path of `/`, no user info).
    fn direct_parts(&self) -> Option<Direct> {
        let (scheme, rest) = self.url.split_once("://")?;
        let authority = rest.strip_suffix('/')?;
        if authority.is_empty() || authority.contains(['/', '?', '#', '@']) {
            return None;
        }
        let host = match authority.rsplit_once(':') {
            Some((host, "80")) if scheme == "http" => host,
            Some((host, "443")) if scheme == "https" => host,
            _ => authority,
        };
        let mut canonical: Vec<(&str, String)> = self
            .headers
            .iter()
            .filter(|(name, _)| !EXCLUDED.contains(name))
            .map(|(name, value)| (*name, trim_all(value)))
            .collect();
        canonical.push(("host", host.to_string()));
        canonical.sort_by(|a, b| a.0.cmp(b.0));
        // content-length first, then these, then x-amz-date, the token, and
        // the rest; anything else is left to the general signer.
        if canonical.iter().any(|(name, _)| {
            *name <= "content-length"
                || ("x-amz-date"..="x-amz-security-token").contains(name)
                || name.bytes().any(|b| b.is_ascii_uppercase())
        }) {
            return None;
        }
        let (before, after): (Vec<_>, Vec<_>) =
            canonical.iter().partition(|(name, _)| *name < "x-amz-date");
        let lines = |part: &[&(&str, String)]| {
            part.iter()
                .map(|(name, value)| format!("{name}:{value}\n"))
                .collect::<String>()
        };
        let names = |token: bool| {
            let mut names = vec!["content-length"];
            names.extend(before.iter().map(|(name, _)| *name));
            names.push("x-amz-date");
            if token {
                names.push("x-amz-security-token");
            }
            names.extend(after.iter().map(|(name, _)| *name));
            names.join(";")
        };
        Some(Direct {
            before_date: lines(&before),
            after_token: lines(&after),
            signed: names(false),
            signed_with_token: names(true),
            key: Mutex::new(None),
        })
    }

    /// Whether `direct` signs two probe requests (with a session token and
    /// without, on two days) exactly as `aws-sigv4` does.
    fn agrees(&self, direct: &Direct) -> bool {
        let probes = [
            (
                Credentials::new("AKIDPROBE", "probe/secret+key", None, None, "probe"),
                UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            ),
            (
                Credentials::new(
                    "ASIAPROBE",
                    "another/secret",
                    Some("probe-session-token".into()),
                    None,
                    "probe",
                ),
                UNIX_EPOCH + Duration::from_secs(1_767_225_599),
            ),
        ];
        probes
            .into_iter()
            .enumerate()
            .all(|(fetch, (credentials, time))| {
                let body = br#"{"RequestItems":{"probe":[]}}"#;
                let length = body.len().to_string();
                let identity = Identity::from(credentials.clone());
                let general = self.sign_general(&identity, time, body, &length);
                let ours =
                    self.sign_direct(direct, &credentials, fetch as u64, time, body, &length);
                // The kept key is the probe's: forget it.
                *direct.key.lock().expect("signing key") = None;
                general.is_ok_and(|g| sorted(g) == sorted(ours))
            })
    }
}

/// The headers `aws-sigv4` leaves unsigned by default.
const EXCLUDED: &[&str] = &[
    "authorization",
    "user-agent",
    "x-amzn-trace-id",
    "transfer-encoding",
];

fn sorted(mut headers: SignatureHeaders) -> SignatureHeaders {
    headers.sort();
    headers
}

/// A header value as SigV4 signs it: spaces trimmed at both ends, runs of
/// spaces made one.
fn trim_all(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.trim_matches(' ').chars() {
        if !(c == ' ' && out.ends_with(' ')) {
            out.push(c);
        }
    }
    out
}

/// `bytes` in lower-case hex, after `out`.
fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
}

/// `time` (not before 1970) as SigV4 writes it: `YYYYMMDDTHHMMSSZ`, UTC.
fn utc_stamp(time: SystemTime) -> [u8; 16] {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let (days, of_day) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    let mut out = *b"00000000T000000Z";
    let mut put = |at: usize, width: usize, mut n: u64| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (n % 10) as u8;
            n /= 10;
        }
    };
    put(0, 4, year as u64);
    put(4, 2, month);
    put(6, 2, day);
    put(9, 2, of_day / 3600);
    put(11, 2, of_day / 60 % 60);
    put(13, 2, of_day % 60);
    out
}

/// The proleptic Gregorian date of a count of days since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u64, u64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u64;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u64;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers() -> Vec<(&'static str, String)> {
        vec![
            ("content-type", "application/x-amz-json-1.0".into()),
            ("x-amz-target", "DynamoDB_20120810.BatchWriteItem".into()),
            ("x-amz-user-agent", "aws-sdk-rust/1.0  api/dynamodb ".into()),
            ("x-amzn-trace-id", "Root=1-abc".into()),
        ]
    }

    fn both(signing: &Signing, credentials: &Credentials, fetch: u64, time: SystemTime) {
        let body = br#"{"RequestItems":{"t":[{"PutRequest":{"Item":{"pk":{"S":"x"}}}}]}}"#;
        let length = body.len().to_string();
        let identity = Identity::from(credentials.clone());
        let general = signing
            .sign_general(&identity, time, body, &length)
            .unwrap();
        let ours = signing.sign(&identity, fetch, time, body, &length).unwrap();
        assert_eq!(sorted(ours), sorted(general), "at {time:?}");
    }

    #[test]
    fn signs_as_aws_sigv4_does_over_days_keys_and_hosts() {
        for url in [
            "https://dynamodb.eu-west-1.amazonaws.com/",
            "http://127.0.0.1:8000/",
            "http://localhost:80/",
            "https://example.com:443/",
            "https://example.com:8443/",
        ] {
            let signing = Signing::new(url, "eu-west-1", "dynamodb", headers());
            assert!(signing.is_direct(), "{url}");
            let plain = Credentials::new("AKID", "secret", None, None, "test");
            let session = Credentials::new("ASIA", "other", Some("tok".into()), None, "test");
            // Days across month, year and leap-day edges, the credentials
            // taking turns (a key kept for the others is not reused) and
            // the same credentials twice a day (the kept key is).
            for secs in [
                0u64,
                951_782_400,   // 2000-02-29
                1_709_164_799, // 2024-02-28T23:59:59
                1_709_164_800,
                1_767_225_599, // 2025-12-31T23:59:59
                1_767_225_600,
                4_107_542_400, // 2100-03-01
            ] {
                let time = UNIX_EPOCH + Duration::from_secs(secs);
                both(&signing, &plain, 1, time);
                both(&signing, &session, 2, time);
                both(&signing, &session, 2, time + Duration::from_secs(59));
            }
        }
    }

    #[test]
    fn urls_and_headers_it_cannot_settle_are_signed_by_aws_sigv4() {
        let plain = Credentials::new("AKID", "secret", None, None, "test");
        let time = UNIX_EPOCH + Duration::from_secs(1_767_225_599);
        for url in ["http://127.0.0.1:8000/base/", "http://user@127.0.0.1:8000/"] {
            let signing = Signing::new(url, "us-east-1", "dynamodb", headers());
            assert!(!signing.is_direct(), "{url}");
            both(&signing, &plain, 1, time);
        }
        let mut odd = headers();
        odd.push(("x-amz-extra", "between the date and the token".into()));
        let signing = Signing::new("http://127.0.0.1:8000/", "us-east-1", "dynamodb", odd);
        assert!(!signing.is_direct());
        both(&signing, &plain, 1, time);
    }

    #[test]
    fn stamps_are_utc() {
        let at = |secs| {
            String::from_utf8(utc_stamp(UNIX_EPOCH + Duration::from_secs(secs)).to_vec()).unwrap()
        };
        assert_eq!(at(0), "19700101T000000Z");
        assert_eq!(at(951_868_799), "20000229T235959Z");
        assert_eq!(at(1_767_225_600), "20260101T000000Z");
    }

    #[test]
    fn values_are_trimmed_as_sigv4_does() {
        assert_eq!(trim_all("  a  b   c "), "a b c");
        assert_eq!(trim_all("a\tb"), "a\tb");
    }
}
