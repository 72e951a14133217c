//! One value of a SOPS file: an `ENC[AES256_GCM,...]` decrypted with the file's data key,
//! and the bytes any value adds to the file's MAC, as sops (Go, YAML through yaml.v3)
//! computes them.

use aes_gcm::aead::consts::U32;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::aes::Aes256;
use aes_gcm::{AesGcm, Nonce};
use base64::Engine as _;
use zeroize::Zeroizing;

use super::walk::Scalar;

/// AES-256-GCM with sops's 32-byte IVs.
type Cipher = AesGcm<Aes256, U32>;

/// A decrypted value: what the YAML reader gets in its place, and what the MAC hashes.
pub(super) struct Plain {
    /// A YAML scalar, on one line (a double-quoted string, or a number or boolean).
    pub yaml: Zeroizing<String>,
    /// The value as text, to keep out of messages; empty for none.
    pub text: Zeroizing<String>,
    pub mac: Zeroizing<Vec<u8>>,
}

/// Why an encrypted value cannot be used. Never holds any part of the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ValueError {
    Malformed(&'static str),
    /// AES-GCM refused it: changed since sops wrote it, moved to another path, or
    /// encrypted with another data key.
    Tampered,
    BadType(&'static str),
}

impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueError::Malformed(why) => write!(
                f,
                "malformed SOPS value ({why}); expected ENC[AES256_GCM,data:…,iv:…,tag:…,type:…] as sops writes it"
            ),
            ValueError::Tampered => f.write_str(
                "SOPS value does not decrypt: it was changed after sops encrypted it, or moved from another key or file",
            ),
            ValueError::BadType(why) => write!(f, "SOPS value decrypts to {why}"),
        }
    }
}

/// The parts of `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]`.
struct Enc {
    data: Vec<u8>,
    iv: Vec<u8>,
    tag: Vec<u8>,
    kind: String,
}

/// Whether a string is sops's encrypted form (maybe malformed).
pub(super) fn is_encrypted(s: &str) -> bool {
    s.starts_with("ENC[")
}

fn parse(s: &str) -> Result<Enc, ValueError> {
    let body = s
        .strip_prefix("ENC[AES256_GCM,")
        .ok_or(ValueError::Malformed("not AES256_GCM"))?
        .strip_suffix(']')
        .ok_or(ValueError::Malformed("no closing `]`"))?;
    fn field<'a>(part: Option<&'a str>, name: &'static str) -> Result<&'a str, ValueError> {
        part.and_then(|p| p.strip_prefix(name))
            .and_then(|p| p.strip_prefix(':'))
            .ok_or(ValueError::Malformed(name))
    }
    let mut parts = body.split(',');
    let b64 = |text: &str, what: &'static str| {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|_| ValueError::Malformed(what))
    };
    let data = b64(field(parts.next(), "data")?, "data is not base64")?;
    let iv = b64(field(parts.next(), "iv")?, "iv is not base64")?;
    let tag = b64(field(parts.next(), "tag")?, "tag is not base64")?;
    let kind = field(parts.next(), "type")?.to_string();
    if parts.next().is_some() {
        return Err(ValueError::Malformed("unknown fields"));
    }
    if iv.len() != 32 {
        return Err(ValueError::Malformed("the iv is not 32 bytes"));
    }
    if tag.len() != 16 {
        return Err(ValueError::Malformed("the tag is not 16 bytes"));
    }
    Ok(Enc {
        data,
        iv,
        tag,
        kind,
    })
}

/// Decrypts `value` at `path` (sops authenticates each value with the map keys leading to
/// it, each followed by `:`), or, for the MAC, with `lastmodified`.
fn open(
    value: &str,
    key: &[u8; 32],
    aad: &str,
) -> Result<(Zeroizing<Vec<u8>>, String), ValueError> {
    let enc = parse(value)?;
    let cipher = Cipher::new(aes_gcm::Key::<Cipher>::from_slice(key));
    let mut sealed = enc.data;
    sealed.extend_from_slice(&enc.tag);
    let plain = cipher
        .decrypt(
            Nonce::<U32>::from_slice(&enc.iv),
            Payload {
                msg: &sealed,
                aad: aad.as_bytes(),
            },
        )
        .map_err(|_| ValueError::Tampered)?;
    Ok((Zeroizing::new(plain), enc.kind))
}

/// The MAC sops stored: itself encrypted, with `lastmodified` as its authenticated data.
pub(super) fn open_mac(
    value: &str,
    key: &[u8; 32],
    lastmodified: &str,
) -> Result<String, ValueError> {
    let (plain, _) = open(value, key, lastmodified)?;
    String::from_utf8(plain.to_vec()).map_err(|_| ValueError::BadType("a MAC that is not text"))
}

/// Decrypts one value of the tree at `path`.
pub(super) fn decrypt(value: &str, key: &[u8; 32], path: &[String]) -> Result<Plain, ValueError> {
    let aad = path.iter().map(|k| format!("{k}:")).collect::<String>();
    let (bytes, kind) = open(value, key, &aad)?;
    let text = || {
        std::str::from_utf8(&bytes)
            .map(|s| Zeroizing::new(s.to_string()))
            .map_err(|_| ValueError::BadType("bytes that are not UTF-8 text"))
    };
    let quoted = |s: &str| Zeroizing::new(double_quoted(s));
    match kind.as_str() {
        "str" | "bytes" | "time" => {
            let text = text()?;
            Ok(Plain {
                yaml: quoted(&text),
                mac: Zeroizing::new(bytes.to_vec()),
                text,
            })
        }
        "int" => {
            let n: i64 = text()?
                .parse()
                .map_err(|_| ValueError::BadType("an invalid int"))?;
            let shown = Zeroizing::new(n.to_string());
            Ok(Plain {
                yaml: shown.clone(),
                mac: Zeroizing::new(shown.as_bytes().to_vec()),
                text: shown,
            })
        }
        "float" => {
            let x: f64 = text()?
                .parse()
                .map_err(|_| ValueError::BadType("an invalid float"))?;
            if !x.is_finite() {
                return Err(ValueError::BadType("a float that is not finite"));
            }
            let shown = Zeroizing::new(go_float(x));
            Ok(Plain {
                yaml: shown.clone(),
                mac: Zeroizing::new(shown.as_bytes().to_vec()),
                text: shown,
            })
        }
        "bool" => {
            let b = match text()?.as_str() {
                "1" | "t" | "T" | "TRUE" | "true" | "True" => true,
                "0" | "f" | "F" | "FALSE" | "false" | "False" => false,
                _ => return Err(ValueError::BadType("an invalid bool")),
            };
            Ok(Plain {
                yaml: Zeroizing::new(b.to_string()),
                text: Zeroizing::new(b.to_string()),
                mac: Zeroizing::new(go_bool(b).as_bytes().to_vec()),
            })
        }
        "comment" => Err(ValueError::BadType("a comment, in place of a value")),
        _ => Err(ValueError::Malformed("unknown type")),
    }
}

/// `s` as a YAML double-quoted scalar on one line: JSON's escapes (YAML's are a superset),
/// plus the three characters YAML 1.1 takes as line breaks and JSON leaves as they are.
fn double_quoted(s: &str) -> String {
    let json = serde_json::Value::from(s).to_string();
    if !json.contains(['\u{85}', '\u{2028}', '\u{2029}']) {
        return json;
    }
    json.replace('\u{85}', "\\u0085")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// Go's `strconv.FormatFloat(x, 'f', -1, 64)`: the shortest text that reads back as `x`,
/// never in exponent form; Rust's `Display` is the same for finite numbers.
fn go_float(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        x.to_string()
    }
}

/// How sops hashes a boolean (as its Python ancestor printed them).
fn go_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// A scalar as yaml.v3 decodes it into Go's `interface{}`, which is what sops hashes.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Typed {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str,
}

/// yaml.v3's reading of a scalar (YAML 1.2's core schema, plus `0644` as octal; v3.0.4's
/// `resolve.go`): quoted and block scalars are strings; a tag decides; else a plain
/// scalar's text does. Timestamps hash as their text, which is what sops wrote (Go's
/// RFC 3339 form of the time it read).
pub(super) fn typed(s: &Scalar) -> Typed {
    let text = s.value.as_str();
    match s.tag.as_deref() {
        Some("null") => return Typed::Null,
        Some("bool") | Some("int") | Some("float") => {}
        Some(_) => return Typed::Str,
        None if !s.plain => return Typed::Str,
        None => {}
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Typed::Null,
        "true" | "True" | "TRUE" => return Typed::Bool(true),
        "false" | "False" | "FALSE" => return Typed::Bool(false),
        ".nan" | ".NaN" | ".NAN" => return Typed::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Typed::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Typed::Float(f64::NEG_INFINITY),
        _ => {}
    }
    match text.as_bytes().first() {
        Some(b'.') => text.parse().map_or(Typed::Str, Typed::Float),
        Some(c) if c.is_ascii_digit() || *c == b'+' || *c == b'-' => {
            let plain = text.replace('_', "");
            if let Some(n) = go_int(&plain) {
                Typed::Int(n)
            } else if yaml_style_float(&plain) {
                plain.parse().map_or(Typed::Str, Typed::Float)
            } else {
                Typed::Str
            }
        }
        _ => Typed::Str,
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)`, then `ParseUint(s, 0, 64)`: a sign (for the
/// signed reading), then `0x`/`0o`/`0b` or a leading `0` (octal), then digits.
fn go_int(s: &str) -> Option<i128> {
    let (negative, signed, rest) = match s.as_bytes().first()? {
        b'-' => (true, true, &s[1..]),
        b'+' => (false, true, &s[1..]),
        _ => (false, false, s),
    };
    let lower = rest.to_ascii_lowercase();
    let (radix, digits) = if rest.len() >= 3 && lower.starts_with("0b") {
        (2, &rest[2..])
    } else if rest.len() >= 3 && lower.starts_with("0o") {
        (8, &rest[2..])
    } else if rest.len() >= 3 && lower.starts_with("0x") {
        (16, &rest[2..])
    } else if let Some(octal) = rest.strip_prefix('0') {
        (8, octal)
    } else if rest.is_empty() {
        return None;
    } else {
        (10, rest)
    };
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = if digits.is_empty() {
        0
    } else {
        u64::from_str_radix(digits, radix).ok()?
    };
    let n = if negative {
        -i128::from(magnitude)
    } else {
        i128::from(magnitude)
    };
    let fits = if signed {
        i64::try_from(n).is_ok()
    } else {
        true
    };
    fits.then_some(n)
}

/// yaml.v3's `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_style_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => !frac.is_empty() && digits(frac),
        Some((int, frac)) => digits(int) && digits(frac),
        None => !mantissa.is_empty() && digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

/// What an unencrypted value adds to the MAC (`None`: nothing, as for a null).
pub(super) fn mac_of_plain(s: &Scalar) -> Option<Vec<u8>> {
    Some(match typed(s) {
        Typed::Null => return None,
        Typed::Bool(b) => go_bool(b).as_bytes().to_vec(),
        Typed::Int(n) => n.to_string().into_bytes(),
        Typed::Float(x) => go_float(x).into_bytes(),
        Typed::Str => s.value.as_bytes().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str) -> Scalar {
        Scalar {
            value: text.into(),
            plain: true,
            tag: None,
            range: 0..0,
        }
    }

    #[test]
    fn plain_scalars_hash_as_yaml_v3_decodes_them() {
        let mac = |t: &str| mac_of_plain(&plain(t)).map(|b| String::from_utf8(b).unwrap());
        for (text, want) in [
            ("", None),
            ("~", None),
            ("null", None),
            ("true", Some("True")),
            ("FALSE", Some("False")),
            ("yes", Some("yes")),
            ("12", Some("12")),
            ("0644", Some("420")),
            ("0x1F", Some("31")),
            ("-0b101", Some("-5")),
            ("1_000", Some("1000")),
            ("08", Some("8")),
            ("1.50", Some("1.5")),
            ("1e3", Some("1000")),
            (".5", Some("0.5")),
            ("-0", Some("0")),
            ("-0.0", Some("-0")),
            (".inf", Some("+Inf")),
            ("18446744073709551615", Some("18446744073709551615")),
            ("2001-12-14", Some("2001-12-14")),
            ("1.2.3", Some("1.2.3")),
            ("+", Some("+")),
            ("v1", Some("v1")),
        ] {
            assert_eq!(mac(text).as_deref(), want, "{text:?}");
        }
        let quoted = Scalar {
            plain: false,
            ..plain("true")
        };
        assert_eq!(mac_of_plain(&quoted).unwrap(), b"true");
        let tagged = Scalar {
            tag: Some("str".into()),
            ..plain("12")
        };
        assert_eq!(typed(&tagged), Typed::Str);
    }

    #[test]
    fn a_string_stays_one_double_quoted_line() {
        let shown = double_quoted("a\"b\\c\nd\u{85}e\u{2028}");
        assert_eq!(shown, r#""a\"b\\c\nd\u0085e\u2028""#);
        let docs = crate::spec::yaml::documents(&format!("k: {shown}\n")).unwrap();
        let json = crate::spec::yaml::document_json(&docs[0]).unwrap();
        assert_eq!(json["k"], "a\"b\\c\nd\u{85}e\u{2028}");
    }

    #[test]
    fn malformed_values_say_why_without_quoting() {
        let key = [7u8; 32];
        let path = ["a".to_string()];
        for bad in [
            "ENC[AES256_GCM,data:abc",
            "ENC[AES256_GCM,data:!!,iv:AA==,tag:AA==,type:str]",
            "ENC[AES256_GCM,data:AA==,iv:AA==,tag:AA==,type:str]",
            "ENC[OTHER,data:AA==]",
        ] {
            let e = decrypt(bad, &key, &path).err().unwrap();
            assert!(matches!(e, ValueError::Malformed(_)), "{bad}: {e:?}");
        }
    }
}
