//! Kubernetes quantities (`500m`, `2`, `4Gi`, `1e3`), checked the way the apiserver
//! parses them (apimachinery `resource.ParseQuantity`), plus a bound the apiserver does
//! not state but every consumer of a quantity assumes: the value fits in 64 bits, in
//! millicores for CPU and in bytes for memory and storage. A quantity beyond that would
//! be clamped or wrap somewhere between the apiserver, the scheduler and the kubelet.
//!
//! ```text
//! <quantity>        ::= <signedNumber><suffix>
//! <signedNumber>    ::= <number> | <plusminus><number>
//! <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
//! <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
//! <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
//! <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
//! <decimalExponent> ::= "e" <signedInteger> | "E" <signedInteger>
//! ```

/// What a quantity counts, for its 64-bit bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// CPU: the apiserver keeps millicores.
    Cpu,
    /// Memory and storage.
    Bytes,
}

pub(crate) const SYNTAX: &str =
    "(expected a Kubernetes quantity such as \"500m\", \"2\" or \"4Gi\")";
pub(crate) const NEGATIVE: &str = "(must not be negative)";

/// `Ok` for a valid, non-negative quantity that fits in 64 bits of `unit`; otherwise why
/// not, in parentheses (it follows the quoted value in messages).
pub fn check(s: &str, unit: Unit) -> Result<(), String> {
    let syntax = || SYNTAX.to_string();
    let (negative, rest) = sign(s);
    let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (int_digits, rest) = rest.split_at(int_len);
    let (frac_digits, suffix) = match rest.strip_prefix('.') {
        Some(after) => {
            let n = after.bytes().take_while(u8::is_ascii_digit).count();
            after.split_at(n)
        }
        None => ("", rest),
    };
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(syntax());
    }
    let (exp10, exp2) = match scale(suffix) {
        Some(scale) => scale,
        None => match suffix.strip_prefix(['e', 'E']) {
            Some(exp) => (exponent(exp).ok_or_else(syntax)?, 0),
            None => return Err(syntax()),
        },
    };
    // value = digits × 10^k × 2^exp2, in the unit's base (millicores or bytes).
    let digits = format!("{int_digits}{frac_digits}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Ok(()); // zero, whatever its sign or exponent
    }
    if negative {
        return Err(NEGATIVE.to_string());
    }
    let milli = if unit == Unit::Cpu { 3 } else { 0 };
    let k = exp10 + milli - frac_digits.len() as i128;
    let too_large = || match unit {
        Unit::Cpu => format!("(too large: at most {}m)", i64::MAX),
        Unit::Bytes => format!("(too large: at most {} bytes, just under 8Ei)", i64::MAX),
    };
    // The integer part decides: 2^63 is a multiple of 2^exp2, so the fraction × 2^exp2
    // never carries a value that fits past the bound.
    let int_len = digits.len() as i128 + k;
    if int_len <= 0 {
        return Ok(());
    }
    if int_len > 19 {
        return Err(too_large());
    }
    let int_part: u128 = if k >= 0 {
        let n: u128 = digits.parse().map_err(|_| syntax())?;
        // int_len <= 19, so 10^k <= 10^19 and the product fits in u128.
        n * 10u128.pow(k as u32)
    } else {
        digits[..int_len as usize].parse().map_err(|_| syntax())?
    };
    match int_part.checked_mul(1u128 << exp2) {
        Some(v) if v <= i64::MAX as u128 => Ok(()),
        _ => Err(too_large()),
    }
}

/// An optional leading sign, as a number and its exponent both have: whether it is a
/// minus, and the text after it.
fn sign(s: &str) -> (bool, &str) {
    match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    }
}

/// A `<binarySI>` or `<decimalSI>` suffix as a power of ten and a power of two. Each SI
/// prefix is 10^3 times the one before it (from nano, 10^-9), each binary one 2^10 times
/// (from Ki, 2^10).
fn scale(suffix: &str) -> Option<(i128, u32)> {
    const DECIMAL: [&str; 10] = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];
    const BINARY: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if let Some(i) = DECIMAL.iter().position(|&s| s == suffix) {
        return Some((3 * i as i128 - 9, 0));
    }
    let i = BINARY.iter().position(|&s| s == suffix)?;
    Some((0, 10 * (i as u32 + 1)))
}

/// A decimal exponent: an optional sign and digits; saturates (the caller only compares).
fn exponent(s: &str) -> Option<i128> {
    let (negative, digits) = sign(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = digits.trim_start_matches('0');
    // Anything past 30 digits is as good as infinite here.
    let n: i128 = if digits.len() > 30 {
        10i128.pow(30)
    } else if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    Some(if negative { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_quantities() {
        for q in [
            "0",
            "1",
            "500m",
            "2",
            "4Gi",
            "1.5",
            ".5",
            "5.",
            "+1",
            "-0",
            "1e3",
            "1E3",
            "1e-3",
            "1E",
            "100n",
            "10u",
            "7Ei",
            "9E",
            "0.0001",
            "1k",
            "1M",
            "1G",
            "1T",
            "1P",
            "0e999999999",
        ] {
            assert_eq!(check(q, Unit::Bytes), Ok(()), "{q}");
        }
        assert_eq!(check("9223372036854775807", Unit::Bytes), Ok(()));
        assert_eq!(check("9223372036854775807m", Unit::Cpu), Ok(()));
        assert_eq!(check("7.99Ei", Unit::Bytes), Ok(()));
        assert_eq!(check("9223372036854775.807k", Unit::Bytes), Ok(()));
        assert_eq!(
            check(&format!("0.{}1", "0".repeat(5000)), Unit::Cpu),
            Ok(())
        );
    }

    /// The largest count of each suffix that fits in 64 bits, and one more: each
    /// suffix's scale, pinned.
    #[test]
    fn each_decimal_suffix_is_its_power_of_ten() {
        for (most, suffix, unit) in [
            (9_223_372_036_854_775_807_999_999_u128, "n", Unit::Cpu),
            (9_223_372_036_854_775_807_999, "u", Unit::Cpu),
            (9_223_372_036_854_775_807, "m", Unit::Cpu),
            (9_223_372_036_854_775_807, "", Unit::Bytes),
            (9_223_372_036_854_775, "k", Unit::Bytes),
            (9_223_372_036_854, "M", Unit::Bytes),
            (9_223_372_036, "G", Unit::Bytes),
            (9_223_372, "T", Unit::Bytes),
            (9_223, "P", Unit::Bytes),
            (9, "E", Unit::Bytes),
        ] {
            assert_eq!(check(&format!("{most}{suffix}"), unit), Ok(()), "{suffix}");
            let over = check(&format!("{}{suffix}", most + 1), unit);
            assert!(over.is_err_and(|e| e.starts_with("(too large")), "{suffix}");
        }
    }

    #[test]
    fn each_binary_suffix_is_its_power_of_two() {
        // 2^53 - 1 Ki, 2^43 - 1 Mi, ... 2^3 - 1 Ei.
        for (most, suffix) in [
            (9_007_199_254_740_991_u64, "Ki"),
            (8_796_093_022_207, "Mi"),
            (8_589_934_591, "Gi"),
            (8_388_607, "Ti"),
            (8_191, "Pi"),
            (7, "Ei"),
        ] {
            assert_eq!(
                check(&format!("{most}{suffix}"), Unit::Bytes),
                Ok(()),
                "{suffix}"
            );
            let over = check(&format!("{}{suffix}", most + 1), Unit::Bytes);
            assert!(over.is_err_and(|e| e.starts_with("(too large")), "{suffix}");
        }
    }

    #[test]
    fn invalid_quantities() {
        for q in [
            "", "Gi", "+", "-", ".", "1.2.3", "2 cores", "1e", "1e+", "1e3Gi", "1Gib", "1gi",
            "inf", "nan", "0x10", "1_000", " 1", "1 ", "1ee3", "e3", "1e3.5",
        ] {
            assert_eq!(check(q, Unit::Bytes), Err(SYNTAX.to_string()), "{q:?}");
        }
        assert_eq!(check("-1Gi", Unit::Bytes), Err(NEGATIVE.to_string()));
        assert_eq!(check("-.1", Unit::Cpu), Err(NEGATIVE.to_string()));
    }

    #[test]
    fn values_beyond_64_bits_are_too_large() {
        let bytes = Err(format!(
            "(too large: at most {} bytes, just under 8Ei)",
            i64::MAX
        ));
        let cpu = Err(format!("(too large: at most {}m)", i64::MAX));
        for q in [
            "9223372036854775808",
            "99999999999999999999999",
            "1e400",
            "1e99999999999999999999999999999999999999",
            "8Ei", // 2^63
            "10000000Pi",
        ] {
            assert_eq!(check(q, Unit::Bytes), bytes, "{q}");
        }
        assert_eq!(check("9223372036854776", Unit::Cpu), cpu);
        assert_eq!(check("9223372036854775.808", Unit::Cpu), cpu);
        assert_eq!(check("9223372036854775.807", Unit::Cpu), Ok(()));
        assert_eq!(check("9E", Unit::Cpu), cpu);
    }
}
