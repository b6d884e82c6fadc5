//! Human-readable sizes and rates exactly as GNU dd prints them
//! ("1.0 MB", "1.0 MiB", "153 kB/s").
//!
//! dd uses gnulib's `human_readable` with autoscaling, round-to-nearest and
//! one decimal below 10; its integer path rounds half to even with carried
//! remainders, so this is a careful re-implementation of that algorithm (no
//! crate formats sizes this way, and tests compare the text).

const POWER_LETTERS: [u8; 9] = [0, b'K', b'M', b'G', b'T', b'P', b'E', b'Z', b'Y'];
const EXPONENT_MAX: u32 = 8;

/// Base of the units: SI (kB, MB) or IEC (KiB, MiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    Si,
    Iec,
}

impl Base {
    fn value(self) -> u64 {
        match self {
            Base::Si => 1000,
            Base::Iec => 1024,
        }
    }
}

/// `n` units of `from_block_size`, expressed in units of `to_block_size`
/// and autoscaled, e.g. `human(1536, Base::Iec, 1, 1)` is "1.5 KiB".
pub fn human(n: u64, base: Base, from_block_size: u64, to_block_size: u64) -> String {
    let b = base.value();
    let integer = if to_block_size <= from_block_size {
        if from_block_size % to_block_size == 0 {
            let multiplier = from_block_size / to_block_size;
            n.checked_mul(multiplier).map(|amt| (amt, 0u32, 0u32))
        } else {
            None
        }
    } else if from_block_size != 0 && to_block_size % from_block_size == 0 {
        let divisor = to_block_size / from_block_size;
        let r10 = (n % divisor).wrapping_mul(10);
        let r2 = (r10 % divisor).wrapping_mul(2);
        let rounding = if r2 < divisor {
            u32::from(0 < r2)
        } else {
            2 + u32::from(divisor < r2)
        };
        Some((n / divisor, (r10 / divisor) as u32, rounding))
    } else {
        None
    };

    let (number, exponent) = match integer {
        Some((amt, tenths, rounding)) => integer_scaled(amt, tenths, rounding, b),
        None => float_scaled(
            n as f64 * (from_block_size as f64 / to_block_size as f64),
            base,
        ),
    };

    let mut out = number;
    out.push(' ');
    if exponent > 0 {
        let letter = if base == Base::Si && exponent == 1 {
            b'k'
        } else {
            POWER_LETTERS[exponent as usize]
        };
        out.push(letter as char);
        if base == Base::Iec {
            out.push('i');
        }
    }
    out.push('B');
    out
}

/// The exact path: `amt` plus `tenths`/10 plus a rounding hint (0: exact,
/// 1: below half a tenth, 2: exactly half, 3: above half).
fn integer_scaled(mut amt: u64, mut tenths: u32, mut rounding: u32, base: u64) -> (String, u32) {
    let mut exponent = 0;
    let mut fraction = String::new();
    if base <= amt {
        loop {
            let r10 = (amt % base) as u32 * 10 + tenths;
            let r2 = (r10 % base as u32) * 2 + (rounding >> 1);
            amt /= base;
            tenths = r10 / base as u32;
            rounding = if r2 < base as u32 {
                u32::from(r2 + rounding != 0)
            } else {
                2 + u32::from((base as u32) < r2 + rounding)
            };
            exponent += 1;
            if !(base <= amt && exponent < EXPONENT_MAX) {
                break;
            }
        }
        if amt < 10 {
            if 2 < rounding + (tenths & 1) {
                tenths += 1;
                rounding = 0;
                if tenths == 10 {
                    amt += 1;
                    tenths = 0;
                }
            }
            if amt < 10 {
                fraction = format!(".{tenths}");
                tenths = 0;
                rounding = 0;
            }
        }
    }
    if 5 < tenths + u32::from(0 < rounding + (amt & 1) as u32) {
        amt += 1;
        if amt == base && exponent < EXPONENT_MAX {
            exponent += 1;
            fraction = ".0".to_owned();
            amt = 1;
        }
    }
    (format!("{amt}{fraction}"), exponent)
}

/// The floating-point path, used when the units do not divide evenly
/// (rates). GNU uses long double here; f64 differs only in the last bits.
fn float_scaled(value: f64, base: Base) -> (String, u32) {
    let b = base.value() as f64;
    let mut e = 1.0;
    let mut exponent = 0;
    loop {
        e *= b;
        exponent += 1;
        if !(e * b <= value && exponent < EXPONENT_MAX) {
            break;
        }
    }
    let scaled = value / e;
    let mut text = format!("{scaled:.1}");
    let too_long = match base {
        Base::Iec => 3 < text.len(),
        Base::Si => 4 < text.len(),
    };
    if too_long {
        text = format!("{scaled:.0}");
    }
    (text, exponent)
}

/// C's `printf("%g", x)`: six significant digits, trailing zeros removed,
/// exponent form below 1e-4 or from 1e6 on.
pub fn format_g(x: f64) -> String {
    const PRECISION: i32 = 6;
    if x == 0.0 {
        return "0".to_owned();
    }
    let sci = format!("{:.*e}", (PRECISION - 1) as usize, x);
    let (mantissa, exp) = sci.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("exponent digits");
    if !(-4..PRECISION).contains(&exp) {
        let mantissa = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (PRECISION - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{x:.decimals$}")).to_owned()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Block sizes as people write them: "512 B", "4 KiB", "16 MiB".
pub fn size_text(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024 && value % 1024 == 0 && unit + 1 < UNITS.len() {
        value /= 1024;
        unit += 1;
    }
    if value >= 1024 {
        return human(bytes, Base::Iec, 1, 1);
    }
    format!("{value} {}", UNITS[unit])
}

/// A measured rate in SI units with three significant figures ("1.23
/// GB/s", "805 MB/s", "38.2 MB/s"): for ddx's own measurements (`ddx
/// bench`, `bs=auto --verbose`), where a reader compares figures a few
/// percent apart, which GNU's two figures ("1.2 GB/s") cannot show.
pub fn rate_text(bytes_per_sec: f64) -> String {
    const UNITS: [&str; 6] = ["B/s", "kB/s", "MB/s", "GB/s", "TB/s", "PB/s"];
    let mut value = if bytes_per_sec.is_finite() {
        bytes_per_sec.max(0.0)
    } else {
        0.0
    };
    let mut unit = 0;
    loop {
        let decimals = match value {
            v if v >= 100.0 || unit == 0 => 0,
            v if v >= 10.0 => 1,
            _ => 2,
        };
        let text = format!("{value:.decimals$}");
        // Rounding can carry into the next unit ("999.7" is "1000").
        if text.parse::<f64>().unwrap_or(0.0) >= 1000.0 && unit + 1 < UNITS.len() {
            value /= 1000.0;
            unit += 1;
            continue;
        }
        return format!("{text} {}", UNITS[unit]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each size in bytes shows as its text in `base`.
    fn sizes_in(base: Base, cases: &[(u64, &str)]) {
        for &(bytes, expected) in cases {
            assert_eq!(human(bytes, base, 1, 1), expected, "{bytes} {base:?}");
        }
    }

    #[test]
    fn sizes_like_gnu() {
        sizes_in(
            Base::Si,
            &[
                (0, "0 B"),
                (512, "512 B"),
                (1000, "1.0 kB"),
                (1048576, "1.0 MB"),
                (1_073_741_824, "1.1 GB"),
                (999_999, "1.0 MB"),
                (123_456_789, "123 MB"),
            ],
        );
        sizes_in(
            Base::Iec,
            &[
                (1000, "1000 B"),
                (1024, "1.0 KiB"),
                (1048576, "1.0 MiB"),
                (5_000_000_000, "4.7 GiB"),
                (123_456_789, "118 MiB"),
            ],
        );
    }

    #[test]
    fn rates_like_gnu() {
        // (bytes, nanoseconds): the rate is bytes × 1e9 / nanoseconds, as GNU reckons it.
        let cases = [
            (0, 31_539, "0.0 kB"),
            (6, 39_243, "153 kB"),
            (1024, 811_093, "1.3 MB"),
            (1000, 1_000_000_000, "1.0 kB"),
        ];
        for (bytes, nanos, expected) in cases {
            assert_eq!(
                human(bytes, Base::Si, 1_000_000_000, nanos),
                expected,
                "{bytes} B in {nanos} ns"
            );
        }
    }

    #[test]
    fn measured_rates_keep_three_figures() {
        assert_eq!(rate_text(1.234e9), "1.23 GB/s");
        assert_eq!(rate_text(805.4e6), "805 MB/s");
        assert_eq!(rate_text(38.24e6), "38.2 MB/s");
        assert_eq!(rate_text(999.7e6), "1.00 GB/s");
        assert_eq!(rate_text(950.0), "950 B/s");
        assert_eq!(rate_text(1500.0), "1.50 kB/s");
        assert_eq!(rate_text(0.0), "0 B/s");
        assert_eq!(rate_text(f64::NAN), "0 B/s");
    }

    #[test]
    fn percent_g() {
        assert_eq!(format_g(3.9243e-05), "3.9243e-05");
        assert_eq!(format_g(0.000811093), "0.000811093");
        assert_eq!(format_g(1.5), "1.5");
        assert_eq!(format_g(12.3456789), "12.3457");
        assert_eq!(format_g(1234567.0), "1.23457e+06");
        assert_eq!(format_g(100.0), "100");
    }
}
