//! The command line: ddx's `--options`, GNU dd's operands and their
//! number grammar, and `ddx bench`'s arguments. Words come from whoever
//! runs ddx, often a script that pastes in names it was given.

use super::{assert_one_line, words};
use crate::bench::args as bench;
use crate::cli::options::{self, Scan};
use crate::operands::number::{self, NumberError};
use crate::operands::{self, CopyPlan, RecordsAndBytes};

/// GNU's largest count, offset and size: an off_t.
const OFF_T_MAX: u64 = i64::MAX as u64;

/// `data` is one value of the number grammar.
pub fn number(data: &[u8]) {
    let parsed = number::parse(data);
    if let Ok(n) = parsed.result {
        assert!(n.value <= OFF_T_MAX, "{data:?} gave {}", n.value);
        assert_eq!(n.has_b, data.contains(&b'B'), "{data:?}");
    }
    if parsed.zero_multiplier_warning {
        assert!(
            data.starts_with(b"0x"),
            "{data:?} warned of a zero multiplier"
        );
        assert_eq!(parsed.result.map(|n| n.value), Ok(0), "{data:?}");
    }
    // Plain decimals, and one product of two, are what they say.
    let decimal = |text: &[u8]| -> Option<Result<u64, NumberError>> {
        if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let value = std::str::from_utf8(text).ok()?.parse::<u64>();
        Some(match value {
            Ok(v) if v <= OFF_T_MAX => Ok(v),
            _ => Err(NumberError::Overflow),
        })
    };
    if let Some(expected) = decimal(data) {
        assert_eq!(parsed.result.map(|n| n.value), expected, "{data:?}");
    }
    if let Some(at) = data.iter().position(|&b| b == b'x') {
        if let (Some(a), Some(b)) = (decimal(&data[..at]), decimal(&data[at + 1..])) {
            let product = match (a, b) {
                (Ok(a), Ok(b)) => a
                    .checked_mul(b)
                    .filter(|&p| p <= OFF_T_MAX)
                    .ok_or(NumberError::Overflow),
                // GNU: an overflowing factor still makes 0 when the
                // other is 0.
                (Ok(0), Err(_)) | (Err(_), Ok(0)) => Ok(0),
                _ => Err(NumberError::Overflow),
            };
            assert_eq!(parsed.result.map(|n| n.value), product, "{data:?}");
        }
    }
}

/// `data` is a command line after the program's name, its words cut at
/// NUL bytes: options first, then the operands, as `cli` reads them.
pub fn operands(data: &[u8]) {
    let words = words(data);
    let (operand_words, settings) = match options::scan(&words) {
        Scan::Operands(words, settings) => (words, settings),
        Scan::Help | Scan::Version => return,
        Scan::Error(message) => {
            // getopt's own messages quote the option as given, as GNU's
            // do; a value ddx judges is quoted, so its message is one
            // line.
            if message.starts_with("invalid argument") {
                assert_one_line("an option's error", &message);
            }
            return;
        }
    };
    if let Some(size) = settings.request_size {
        assert!((1..=1 << 30).contains(&size), "--request-size={size}");
    }
    let parsed = operands::parse(&operand_words);
    for warning in &parsed.warnings {
        assert_one_line("a warning", &warning.to_string());
    }
    match parsed.plan {
        Ok(plan) => check_plan(plan),
        Err(error) => {
            assert_one_line("an operand's error", &error.to_string());
            let _ = error.suggests_help();
        }
    }
}

/// What a checked plan promises the engine.
fn check_plan(plan: CopyPlan) {
    assert!(plan.input_block_size >= 1 && plan.output_block_size >= 1);
    if plan.conversion_block_size == 0 {
        assert!(!plan
            .conv
            .intersects(operands::Conv::BLOCK | operands::Conv::UNBLOCK));
    }
    let _ = (plan.copies_nothing(), plan.truncates_output_on_open());
    // An offset past an off_t is GNU's to refuse when it is used (cannot
    // skip, cannot truncate), not the grammar's: None here.
    let skip = plan.skip.total_bytes(plan.input_block_size);
    let seek = plan.seek.total_bytes(plan.output_block_size);
    let count = plan.count.total_bytes(plan.input_block_size);
    // The engine's walk over skip= by reading: each request is at most a
    // block, and the walk ends.
    walk(plan.skip, plan.input_block_size);
    if plan.auto_block_size {
        // bs=auto re-splits the counts, given in bytes, into the chosen
        // size's records: the same bytes.
        for block_size in [512, 4096, 1 << 20, 64 << 20] {
            let rebased = plan.clone().with_block_size(block_size);
            assert_eq!(rebased.input_block_size, block_size);
            assert_eq!(rebased.skip.total_bytes(block_size), skip, "{plan:?}");
            assert_eq!(rebased.seek.total_bytes(block_size), seek, "{plan:?}");
            if plan.has_count() {
                assert_eq!(rebased.count.total_bytes(block_size), count, "{plan:?}");
            }
        }
    }
}

/// GNU's skip by reading, request by request, for a short amount.
fn walk(amount: RecordsAndBytes, block_size: usize) {
    if amount.records > 64 || amount.total_bytes(block_size).is_none() {
        return;
    }
    let mut left = amount;
    let mut total = 0u64;
    while !left.is_zero() {
        let request = left.next_request(block_size);
        assert!(request <= block_size.max(amount.bytes as usize));
        total += request as u64;
        if left.complete_request() {
            break;
        }
    }
    assert_eq!(Some(total), amount.total_bytes(block_size));
}

/// `data` is `ddx bench`'s arguments, cut at NUL bytes.
pub fn bench_args(data: &[u8]) {
    match bench::parse(&words(data)) {
        bench::Parsed::Run(args) => {
            // Every test runs unless --tests chose some.
            assert!(!args.tests.is_empty());
            assert!(args.runs >= 1, "{args:?}");
        }
        bench::Parsed::Error(message) => {
            if message.starts_with("invalid argument") {
                assert_one_line("a bench option's error", &message);
            }
        }
        bench::Parsed::Help | bench::Parsed::Version => {}
    }
}
