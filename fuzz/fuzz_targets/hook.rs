//! Arbitrary bytes as a `POST /hooks/git` request, through the judgement the route makes
//! (`report::http::judge_hook`): the first byte picks whether a secret is configured and
//! whether a correct signature is added; the rest is header lines (`name: value`, what
//! hyper would refuse left out, as it never reaches the handler), a blank line, and the
//! body. Nothing may panic, and:
//! - a declared Content-Length over the limit is 413, whatever else;
//! - without a secret, everything else is accepted;
//! - with one, a correct signature is accepted, and anything accepted carries exactly the
//!   HMAC-SHA256 of the body (computed here independently).
#![no_main]

use driftless::report::http::{HOOK_BODY_LIMIT, HookVerdict, SIGNATURE_HEADER, judge_hook};
use hmac::{Hmac, KeyInit, Mac};
use http::header::CONTENT_LENGTH;
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use sha2::Sha256;

const SECRET: &[u8] = b"fuzz-hook-secret";

fn mac_hex(body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(SECRET).expect("any key length");
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn headers(head: &[u8]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for line in head.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let value = line[colon + 1..].trim_ascii();
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    headers
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (head, body) = match rest.windows(2).position(|w| w == b"\n\n") {
        Some(i) => (&rest[..i], &rest[i + 2..]),
        None => (rest, &[][..]),
    };
    let mut headers = headers(head);
    let secret = (flags & 1 != 0).then_some(SECRET);
    let signed = flags & 2 != 0;
    if signed {
        let value = format!("sha256={}", mac_hex(body));
        headers.insert(
            SIGNATURE_HEADER,
            HeaderValue::from_str(&value).expect("ASCII"),
        );
    }
    let verdict = judge_hook(secret, &headers, body);

    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > HOOK_BODY_LIMIT as u64) {
        assert_eq!(verdict, HookVerdict::TooLarge);
        return;
    }
    assert_ne!(
        verdict,
        HookVerdict::TooLarge,
        "{declared:?}, {} bytes",
        body.len()
    );
    if secret.is_none() || signed {
        assert_eq!(verdict, HookVerdict::Fetch);
        return;
    }
    if verdict == HookVerdict::Fetch {
        let given = headers
            .get(SIGNATURE_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().strip_prefix("sha256="))
            .map(str::to_ascii_lowercase);
        assert_eq!(given, Some(mac_hex(body)), "accepted a forged signature");
    }
});
