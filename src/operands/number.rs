//! GNU dd's number grammar, reproduced exactly as coreutils 9.1 reads it.
//!
//! dd reads numbers with gnulib's `xstrtoumax` and the suffix set
//! `bcEGkKMPTwYZ0`, then adds two dd-specific rules: a trailing `B` makes a
//! count/skip/seek a byte count, and one `AxB` product. The quirks matter
//! for scripts (`K` alone means 1024, leading blanks and `+` are accepted,
//! `2x3x4` is rejected, `0x5` is zero with a warning), so the grammar is
//! written out here by hand: no crate parses this dialect.

/// Why a value was rejected, mirroring gnulib's `strtol_error` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberError {
    /// Not a number of this grammar.
    Invalid,
    /// A number of this grammar, but too large for dd (`Value too large ...`).
    Overflow,
}

/// A successfully parsed value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Number {
    pub value: u64,
    /// The text contained a `B`: for count/skip/seek this means bytes.
    pub has_b: bool,
}

/// The outcome of parsing one value: the number (or why not) and whether
/// GNU's "'0x' is a zero multiplier" warning applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    pub result: Result<Number, NumberError>,
    pub zero_multiplier_warning: bool,
}

const INTMAX_MAX: u64 = i64::MAX as u64;

/// gnulib's status bits; kept as bits because dd combines and masks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ParseStatus {
    overflow: bool,
    kind: StrtolError,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StrtolError {
    Ok,
    Invalid,
    InvalidSuffixChar,
}

impl ParseStatus {
    fn ok() -> Self {
        ParseStatus {
            overflow: false,
            kind: StrtolError::Ok,
        }
    }
}

/// `xstrtoumax (s, &end, 10, &val, "bcEGkKMPTwYZ0")`: returns the value,
/// the status and the index where parsing stopped.
fn xstrtoumax(s: &[u8]) -> (u64, ParseStatus, usize) {
    const VALID_SUFFIXES: &[u8] = b"bcEGkKMPTwYZ0";
    let mut status = ParseStatus::ok();

    // Negative numbers are rejected before strtoumax would wrap them.
    let first_non_blank = s.iter().position(|c| !is_c_space(*c)).unwrap_or(s.len());
    if s.get(first_non_blank) == Some(&b'-') {
        return (
            0,
            ParseStatus {
                overflow: false,
                kind: StrtolError::Invalid,
            },
            0,
        );
    }

    // strtoumax: blanks, an optional '+', decimal digits.
    let mut i = first_non_blank;
    if s.get(i) == Some(&b'+') {
        i += 1;
    }
    let digits_start = i;
    let mut value: u64 = 0;
    while let Some(d) = s.get(i).filter(|c| c.is_ascii_digit()) {
        match value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d - b'0')))
        {
            Some(v) => value = v,
            None => {
                value = u64::MAX;
                status.overflow = true;
            }
        }
        i += 1;
    }
    let mut end = if i == digits_start { 0 } else { i };

    if end == 0 {
        // No digits: a lone valid suffix stands for 1 ("K" is 1024).
        match s.first() {
            Some(c) if VALID_SUFFIXES.contains(c) => value = 1,
            _ => {
                return (
                    0,
                    ParseStatus {
                        overflow: false,
                        kind: StrtolError::Invalid,
                    },
                    0,
                )
            }
        }
    }

    let Some(&suffix) = s.get(end) else {
        return (value, status, end);
    };
    if !VALID_SUFFIXES.contains(&suffix) {
        status.kind = StrtolError::InvalidSuffixChar;
        return (value, status, end);
    }

    let mut base: u64 = 1024;
    let mut suffix_len = 1;
    if b"EGkKMPTYZ".contains(&suffix) {
        match s.get(end + 1) {
            Some(b'i') if s.get(end + 2) == Some(&b'B') => suffix_len += 2,
            Some(b'B') | Some(b'D') => {
                base = 1000;
                suffix_len += 1;
            }
            _ => {}
        }
    }
    let scaled = match suffix {
        b'b' => scale(value, 512, 1),
        b'c' => Some(value),
        b'w' => scale(value, 2, 1),
        b'k' | b'K' => scale(value, base, 1),
        b'M' => scale(value, base, 2),
        b'G' => scale(value, base, 3),
        b'T' => scale(value, base, 4),
        b'P' => scale(value, base, 5),
        b'E' => scale(value, base, 6),
        b'Z' => scale(value, base, 7),
        b'Y' => scale(value, base, 8),
        _ => {
            // '0' only flags the optional second suffix; it is no unit.
            status.kind = StrtolError::InvalidSuffixChar;
            return (value, status, end);
        }
    };
    match scaled {
        Some(v) => value = v,
        None => {
            value = u64::MAX;
            status.overflow = true;
        }
    }
    end += suffix_len;
    if end < s.len() {
        status.kind = StrtolError::InvalidSuffixChar;
    }
    (value, status, end)
}

fn scale(value: u64, base: u64, power: u32) -> Option<u64> {
    (0..power).try_fold(value, |v, _| v.checked_mul(base))
}

fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Parse a dd operand value as coreutils 9.1's `parse_integer` does.
pub fn parse(text: &[u8]) -> Parsed {
    let s = text;
    let has_b = s.contains(&b'B');
    let (n, mut e, mut suffix) = xstrtoumax(s);
    let mut zero_multiplier_warning = false;

    // A 'B' after a number (not after "KiB" or "kB") means "bytes".
    if e.kind == StrtolError::InvalidSuffixChar
        && suffix > 0
        && s[suffix - 1] != b'B'
        && s.get(suffix) == Some(&b'B')
    {
        suffix += 1;
        if suffix == s.len() {
            e.kind = StrtolError::Ok;
        }
    }

    let result: Result<u64, NumberError>;
    let after_b_rule_is_x =
        e.kind == StrtolError::InvalidSuffixChar && s.get(suffix) == Some(&b'x');
    let b_on_both_sides = || suffix > 0 && s[suffix - 1] == b'B' && s[suffix + 1..].contains(&b'B');
    if after_b_rule_is_x && !b_on_both_sides() {
        let (o, f, _) = xstrtoumax(&s[suffix + 1..]);
        if f.kind != StrtolError::Ok {
            result = Err(NumberError::Invalid);
        } else {
            let product = u128::from(n) * u128::from(o);
            let any_overflow = e.overflow || f.overflow;
            if product > u128::from(INTMAX_MAX) || (product != 0 && any_overflow) {
                result = Err(NumberError::Overflow);
            } else {
                if product == 0 && text.starts_with(b"0x") {
                    zero_multiplier_warning = true;
                }
                result = Ok(product as u64);
            }
        }
    } else {
        result = match (e.kind, e.overflow) {
            (StrtolError::Ok, false) if n <= INTMAX_MAX => Ok(n),
            (StrtolError::Ok, _) => Err(NumberError::Overflow),
            _ => Err(NumberError::Invalid),
        };
    }

    Parsed {
        result: result.map(|value| Number { value, has_b }),
        zero_multiplier_warning,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value(s: &str) -> Result<u64, NumberError> {
        parse(s.as_bytes()).result.map(|n| n.value)
    }

    /// Each text parses to its value; `{text:?}` shows blanks and empty texts.
    fn accepted(cases: &[(&str, u64)]) {
        for &(text, expected) in cases {
            assert_eq!(value(text), Ok(expected), "{text:?}");
        }
    }

    /// Each text is refused with `error`.
    fn refused(error: NumberError, texts: &[&str]) {
        for text in texts {
            assert_eq!(value(text), Err(error), "{text:?}");
        }
    }

    #[test]
    fn plain_and_suffixed_numbers() {
        accepted(&[
            ("0", 0),
            ("17", 17),
            ("1c", 1),
            ("3w", 6),
            ("2b", 1024),
            ("1k", 1024),
            ("1K", 1024),
            ("1kB", 1000),
            ("1KB", 1000),
            ("1kD", 1000),
            ("1KiB", 1024),
            ("1MB", 1_000_000),
            ("1M", 1 << 20),
            ("1MiB", 1 << 20),
            ("1G", 1 << 30),
            ("1T", 1 << 40),
            ("1P", 1 << 50),
            ("1E", 1 << 60),
            ("7E", 7 << 60),
        ]);
    }

    #[test]
    fn gnu_quirks() {
        // A lone suffix counts as 1; blanks and a plus sign are strtoumax's.
        accepted(&[("K", 1024), (" 5", 5), ("+5", 5)]);
        // Lowercase m is not in dd's set, and 9.1 knows no Q.
        refused(
            NumberError::Invalid,
            &[
                "-5",
                " -0",
                "",
                "1e",
                "1Ki",
                "1KiBB",
                "1m",
                "1Q",
                "99999999999999999999e",
            ],
        );
        refused(NumberError::Overflow, &["1Y", "8E", "99999999999999999999"]);
    }

    #[test]
    fn bytes_suffix() {
        assert_eq!(
            parse(b"100B").result,
            Ok(Number {
                value: 100,
                has_b: true
            })
        );
        assert_eq!(
            parse(b"1kB").result,
            Ok(Number {
                value: 1000,
                has_b: true
            })
        );
        assert_eq!(
            parse(b"5").result,
            Ok(Number {
                value: 5,
                has_b: false
            })
        );
        assert_eq!(value("B"), Err(NumberError::Invalid));
    }

    #[test]
    fn products() {
        accepted(&[
            ("2x3", 6),
            ("2Kx3", 6144),
            ("1xM", 1 << 20),
            ("2Bx3", 6),
            ("1kBx2", 2000),
            ("99999999999999999999x0", 0),
        ]);
        // 9.1 takes one product, and a B only before the x.
        refused(NumberError::Invalid, &["2x3B", "2x3x4", "1x", "xM"]);
        refused(NumberError::Overflow, &["4Ex4"]);
    }

    #[test]
    fn zero_multiplier_warning() {
        let p = parse(b"0x5");
        assert_eq!(p.result.map(|n| n.value), Ok(0));
        assert!(p.zero_multiplier_warning);
        assert!(!parse(b"00x5").zero_multiplier_warning);
        assert!(!parse(b"5x0").zero_multiplier_warning);
    }

    proptest! {
        #[test]
        fn decimal_round_trips(n in 0u64..=INTMAX_MAX) {
            prop_assert_eq!(value(&n.to_string()), Ok(n));
        }

        #[test]
        fn products_multiply(a in 0u64..1_000_000, b in 0u64..1_000_000) {
            prop_assert_eq!(value(&format!("{a}x{b}")), Ok(a * b));
        }

        #[test]
        fn binary_and_decimal_prefixes(n in 0u64..1000, p in 0usize..6) {
            let letters = ["K", "M", "G", "T", "P", "E"];
            let power = p as u32 + 1;
            let bin = n.checked_mul(1024u64.pow(power)).filter(|v| *v <= INTMAX_MAX);
            let dec = n.checked_mul(1000u64.pow(power)).filter(|v| *v <= INTMAX_MAX);
            let l = letters[p];
            prop_assert_eq!(value(&format!("{n}{l}")).ok(), bin);
            prop_assert_eq!(value(&format!("{n}{l}iB")).ok(), bin);
            prop_assert_eq!(value(&format!("{n}{l}B")).ok(), dec);
        }

        #[test]
        fn never_panics(s in "\\PC{0,12}") {
            let _ = parse(s.as_bytes());
        }

        #[test]
        fn trailing_garbage_is_rejected(n in 0u64..1_000_000, junk in "[a-jl-zA-Z&&[^bcwxBEGKMPTYZ]]") {
            prop_assert_eq!(value(&format!("{n}{junk}")), Err(NumberError::Invalid));
        }
    }
}
