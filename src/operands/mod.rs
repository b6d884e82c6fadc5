//! The GNU dd operand grammar: `KEY=VALUE` words in, a checked [`CopyPlan`] out.
//!
//! Parsing is pure: it touches no file, so a bad operand can never truncate
//! or create an output (the plan is complete before anything is opened).
//! Counts stay in GNU's units (records of ibs/obs plus extra bytes) because
//! the statistics and the skip/seek semantics are defined in those units.

pub mod number;
pub mod symbols;

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

pub use symbols::{Conv, IoFlags, StatusLevel};

use crate::text::quote::quote;
use number::NumberError;

/// GNU's default block size for ibs and obs.
pub const DEFAULT_BLOCK_SIZE: usize = 512;

/// "No count": GNU uses INTMAX_MAX records.
pub const UNLIMITED_RECORDS: u64 = i64::MAX as u64;

/// The largest bs/ibs/obs GNU accepts: below SSIZE_MAX and OFF_T_MAX, with
/// room for conv=swab's extra byte.
const MAX_BLOCK_SIZE: u64 = i64::MAX as u64 - 1;

/// An amount of whole records of some block size plus extra bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordsAndBytes {
    pub records: u64,
    pub bytes: u64,
}

impl RecordsAndBytes {
    pub fn is_zero(&self) -> bool {
        self.records == 0 && self.bytes == 0
    }

    /// GNU's skip/seek by reading or writing: the size of the next request
    /// (a whole block while records remain, then the extra bytes).
    pub fn next_request(&self, block_size: usize) -> usize {
        if self.records != 0 {
            block_size
        } else {
            self.bytes as usize
        }
    }

    /// The request from `next_request` is done; true when nothing is left.
    pub fn complete_request(&mut self) -> bool {
        if self.records != 0 {
            self.records -= 1;
        } else {
            self.bytes = 0;
        }
        self.is_zero()
    }

    /// Total bytes for a block size, or None if it does not fit an off_t.
    pub fn total_bytes(&self, block_size: usize) -> Option<u64> {
        self.records
            .checked_mul(block_size as u64)
            .and_then(|v| v.checked_add(self.bytes))
            .filter(|v| *v <= i64::MAX as u64)
    }
}

/// Everything a copy needs to know, validated, before any file is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyPlan {
    /// `if=`; None reads standard input.
    pub input: Option<PathBuf>,
    /// `of=`; None writes standard output.
    pub output: Option<PathBuf>,
    pub input_block_size: usize,
    pub output_block_size: usize,
    /// `cbs=`; 0 when absent (block/unblock are then dropped, as in GNU).
    pub conversion_block_size: usize,
    /// Records are re-blocked through a separate output buffer (GNU's
    /// C_TWOBUFS): set by data conversions and whenever `bs=` is absent.
    pub two_buffers: bool,
    pub conv: Conv,
    /// iflag= symbols less the private ones consumed here.
    pub input_flags: IoFlags,
    pub output_flags: IoFlags,
    pub status: StatusLevel,
    /// Input records (ibs) and bytes to skip.
    pub skip: RecordsAndBytes,
    /// Output records (obs) and bytes to seek over.
    pub seek: RecordsAndBytes,
    /// Input records and bytes to copy; records == UNLIMITED_RECORDS for all.
    pub count: RecordsAndBytes,
    /// Warn once about a short read (bs= without fullblock, with count/skip/direct).
    pub warn_partial_read: bool,
    /// iflag=nocache / oflag=nocache.
    pub input_nocache: bool,
    pub output_nocache: bool,
    /// `bs=auto`: the block size is ddx's to choose (see
    /// `engine::auto_block`); until [`CopyPlan::with_block_size`], ibs and
    /// obs hold GNU's default.
    pub auto_block_size: bool,
    /// The input's record size was given (`bs=N` or `ibs=N`), not GNU's
    /// default: what ddx may size its own requests by otherwise (a
    /// rescue reads ddrescue's clusters).
    pub input_block_size_given: bool,
}

impl CopyPlan {
    /// The plan with bs=`block_size` (the choice for bs=auto): counts,
    /// which bs=auto requires in bytes, are re-split into its records.
    pub fn with_block_size(mut self, block_size: usize) -> CopyPlan {
        let rebase = |amount: RecordsAndBytes, old: usize| {
            let bytes = amount.records * old as u64 + amount.bytes;
            split_amount(bytes, true, block_size)
        };
        self.skip = rebase(self.skip, self.input_block_size);
        self.seek = rebase(self.seek, self.output_block_size);
        if self.has_count() {
            self.count = rebase(self.count, self.input_block_size);
        }
        self.input_block_size = block_size;
        self.output_block_size = block_size;
        self.warn_partial_read = warns_partial_read(
            self.two_buffers,
            self.input_flags,
            self.output_flags,
            self.skip,
            self.count,
        );
        self
    }

    /// The rest of this copy once its first `done` bytes are copied
    /// (an upload resumed where its stored parts end): `done` more bytes
    /// of the input skipped, `done` fewer counted. The output's place is
    /// the caller's: a resumed upload goes on with the same object.
    pub fn continued_after(mut self, done: u64) -> CopyPlan {
        let skip = self.skip.total_bytes(self.input_block_size).unwrap_or(0);
        self.skip = split_amount(skip.saturating_add(done), true, self.input_block_size);
        if self.has_count() {
            let count = self.count.total_bytes(self.input_block_size).unwrap_or(0);
            self.count = RecordsAndBytes {
                records: 0,
                bytes: count.saturating_sub(done),
            };
            self.count = split_amount(self.count.bytes, true, self.input_block_size);
        }
        self
    }

    /// True when count= asked for nothing at all (count=0).
    pub fn copies_nothing(&self) -> bool {
        self.count.is_zero()
    }

    /// True when count= limits the copy.
    pub fn has_count(&self) -> bool {
        self.count.records != UNLIMITED_RECORDS
    }

    /// Whether output is opened with O_TRUNC (GNU: not with notrunc or a
    /// whole-record seek; a seek of bytes only still truncates).
    pub fn truncates_output_on_open(&self) -> bool {
        self.seek.records == 0 && !self.conv.contains(Conv::NOTRUNC)
    }
}

/// A bad operand. Display gives GNU's message, without the program name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OperandError {
    #[error("unrecognized operand {}", quote(.0))]
    Unrecognized(Vec<u8>),
    #[error("invalid number: {}{}", quote(.value), if *.overflow { ": Value too large for defined data type" } else { "" })]
    InvalidNumber { value: Vec<u8>, overflow: bool },
    #[error("{kind}: {}", quote(.symbol))]
    InvalidSymbol { kind: SymbolKind, symbol: Vec<u8> },
    #[error("cannot combine {0}")]
    Conflict(&'static str),
    /// bs=auto (ddx's own value): a size in blocks would mean nothing
    /// until the block size is known.
    #[error("bs=auto needs {operand}= in bytes (a 'B' suffix, or {flag})")]
    AutoNeedsBytes {
        operand: &'static str,
        flag: &'static str,
    },
    #[error("offset too large: cannot truncate to a length of seek={records} ({block_size}-byte) blocks")]
    SeekTooLarge { records: u64, block_size: usize },
}

impl OperandError {
    /// GNU follows these errors with "Try 'dd --help' for more information."
    pub fn suggests_help(&self) -> bool {
        matches!(
            self,
            OperandError::Unrecognized(_) | OperandError::InvalidSymbol { .. }
        )
    }
}

/// Which symbol list an unknown symbol was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolKind {
    Conversion,
    InputFlag,
    OutputFlag,
    StatusLevel,
}

impl fmt::Display for SymbolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SymbolKind::Conversion => "invalid conversion",
            SymbolKind::InputFlag => "invalid input flag",
            SymbolKind::OutputFlag => "invalid output flag",
            SymbolKind::StatusLevel => "invalid status level",
        })
    }
}

/// Non-fatal remarks made while parsing (GNU prints them as it goes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperandWarning {
    ZeroMultiplier,
    /// oflag=append without conv=notrunc truncates first.
    AppendWithoutNotrunc,
}

impl fmt::Display for OperandWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OperandWarning::ZeroMultiplier => {
                f.write_str("warning: '0x' is a zero multiplier; use '00x' if that is intended")
            }
            OperandWarning::AppendWithoutNotrunc => {
                f.write_str("you probably want conv=notrunc with oflag=append")
            }
        }
    }
}

/// The result of parsing: warnings are kept even when parsing fails,
/// because GNU prints them before the error.
#[derive(Debug)]
pub struct Parsed {
    pub warnings: Vec<OperandWarning>,
    pub plan: Result<CopyPlan, OperandError>,
}

/// Parse dd operands (the words that are not `--options`).
pub fn parse<S: AsRef<OsStr>>(operands: &[S]) -> Parsed {
    let mut warnings = Vec::new();
    let plan = parse_into(operands, &mut warnings);
    Parsed { warnings, plan }
}

/// A numeric operand value in the units its key gives it.
#[derive(Debug, Clone, Copy, Default)]
struct Amount {
    value: u64,
    has_b: bool,
}

/// `bs=`: a size, or `auto`.
#[derive(Debug, Clone, Copy)]
enum BlockSize {
    Bytes(u64),
    Auto,
}

/// The operands as written, the last of each key winning, before they
/// are checked together: the first of the two stages (read each word,
/// then validate the whole), as uutils' dd has it.
#[derive(Debug, Default)]
struct Written {
    input: Option<PathBuf>,
    output: Option<PathBuf>,
    conv: Conv,
    input_flags: IoFlags,
    output_flags: IoFlags,
    status: Option<StatusLevel>,
    block_size: Option<BlockSize>,
    input_block_size: Option<u64>,
    output_block_size: Option<u64>,
    conversion_block_size: Option<u64>,
    skip: Amount,
    seek: Amount,
    count: Option<Amount>,
}

fn parse_into<S: AsRef<OsStr>>(
    operands: &[S],
    warnings: &mut Vec<OperandWarning>,
) -> Result<CopyPlan, OperandError> {
    let mut written = Written::default();
    for operand in operands {
        read_word(&mut written, operand.as_ref().as_bytes(), warnings)?;
    }
    validate(written, warnings)
}

/// One `KEY=VALUE` word.
fn read_word(
    written: &mut Written,
    word: &[u8],
    warnings: &mut Vec<OperandWarning>,
) -> Result<(), OperandError> {
    let Some(eq) = word.iter().position(|&c| c == b'=') else {
        return Err(OperandError::Unrecognized(word.to_vec()));
    };
    let (key, value) = (&word[..eq], &word[eq + 1..]);
    match key {
        b"if" => written.input = Some(PathBuf::from(OsStr::from_bytes(value))),
        b"of" => written.output = Some(PathBuf::from(OsStr::from_bytes(value))),
        b"conv" => written.conv |= symbols_of(SymbolKind::Conversion, value, symbols::parse_conv)?,
        b"iflag" => {
            written.input_flags |= symbols_of(SymbolKind::InputFlag, value, symbols::parse_flags)?
        }
        b"oflag" => {
            written.output_flags |= symbols_of(SymbolKind::OutputFlag, value, symbols::parse_flags)?
        }
        b"status" => {
            written.status = Some(symbols_of(
                SymbolKind::StatusLevel,
                value,
                symbols::parse_status,
            )?)
        }
        // GNU recognises the key before judging the number.
        b"bs" if value == b"auto" => written.block_size = Some(BlockSize::Auto),
        b"bs" | b"ibs" | b"obs" => {
            let size = number_of(value, 1, MAX_BLOCK_SIZE, warnings)?.value;
            match key {
                b"bs" => written.block_size = Some(BlockSize::Bytes(size)),
                b"ibs" => written.input_block_size = Some(size),
                _ => written.output_block_size = Some(size),
            }
        }
        b"cbs" => {
            written.conversion_block_size =
                Some(number_of(value, 1, i64::MAX as u64, warnings)?.value)
        }
        b"skip" | b"iseek" => written.skip = number_of(value, 0, i64::MAX as u64, warnings)?,
        b"seek" | b"oseek" => written.seek = number_of(value, 0, i64::MAX as u64, warnings)?,
        b"count" => written.count = Some(number_of(value, 0, i64::MAX as u64, warnings)?),
        _ => return Err(OperandError::Unrecognized(word.to_vec())),
    }
    Ok(())
}

/// A comma-separated list of symbols (conv=, iflag=, oflag=, status=).
fn symbols_of<T>(
    kind: SymbolKind,
    value: &[u8],
    parse: impl FnOnce(&str) -> Result<T, symbols::UnknownSymbol>,
) -> Result<T, OperandError> {
    let text = std::str::from_utf8(value).map_err(|_| invalid_symbol_bytes(kind, value))?;
    parse(text).map_err(|e| OperandError::InvalidSymbol {
        kind,
        symbol: e.0.into_bytes(),
    })
}

/// A number in GNU's grammar, within `[min, max]`.
fn number_of(
    value: &[u8],
    min: u64,
    max: u64,
    warnings: &mut Vec<OperandWarning>,
) -> Result<Amount, OperandError> {
    let parsed = number::parse(value);
    if parsed.zero_multiplier_warning {
        warnings.push(OperandWarning::ZeroMultiplier);
    }
    let invalid = |overflow| OperandError::InvalidNumber {
        value: value.to_vec(),
        overflow,
    };
    match parsed.result {
        Ok(n) if n.value < min => Err(invalid(false)),
        Ok(n) if n.value > max => Err(invalid(true)),
        Ok(n) => Ok(Amount {
            value: n.value,
            has_b: n.has_b,
        }),
        Err(NumberError::Overflow) => Err(invalid(true)),
        Err(NumberError::Invalid) => Err(invalid(false)),
    }
}

/// The operands checked together, into the plan.
fn validate(
    written: Written,
    warnings: &mut Vec<OperandWarning>,
) -> Result<CopyPlan, OperandError> {
    let Written {
        input,
        output,
        mut conv,
        mut input_flags,
        mut output_flags,
        status,
        block_size,
        input_block_size,
        output_block_size,
        conversion_block_size,
        skip,
        seek,
        count,
    } = written;
    let auto_block_size = matches!(block_size, Some(BlockSize::Auto));
    let input_block_size_given =
        matches!(block_size, Some(BlockSize::Bytes(_))) || input_block_size.is_some();
    let mut two_buffers = conv.intersects(symbols::TWO_BUFFER_CONVERSIONS);
    let (input_block_size, output_block_size) = match block_size {
        Some(BlockSize::Bytes(size)) => (size, size),
        Some(BlockSize::Auto) => (DEFAULT_BLOCK_SIZE as u64, DEFAULT_BLOCK_SIZE as u64),
        None => {
            // POSIX: without bs=, partial reads are aggregated into obs blocks.
            two_buffers = true;
            (
                input_block_size.unwrap_or(DEFAULT_BLOCK_SIZE as u64),
                output_block_size.unwrap_or(DEFAULT_BLOCK_SIZE as u64),
            )
        }
    };
    let conversion_block_size = conversion_block_size.unwrap_or(0);
    if conversion_block_size == 0 {
        conv.remove(Conv::BLOCK | Conv::UNBLOCK);
    }
    let ibs = usize::try_from(input_block_size).unwrap_or(usize::MAX);
    let obs = usize::try_from(output_block_size).unwrap_or(usize::MAX);
    let cbs = usize::try_from(conversion_block_size).unwrap_or(usize::MAX);

    if output_flags.contains(IoFlags::FULLBLOCK) {
        return Err(OperandError::InvalidSymbol {
            kind: SymbolKind::OutputFlag,
            symbol: b"fullblock".to_vec(),
        });
    }

    // A count in bytes ('B' suffix) implies the _bytes flag of its side.
    if skip.has_b {
        input_flags |= IoFlags::SKIP_BYTES;
    }
    let skip = split_amount(skip.value, input_flags.contains(IoFlags::SKIP_BYTES), ibs);
    let count = match count {
        None => RecordsAndBytes {
            records: UNLIMITED_RECORDS,
            bytes: 0,
        },
        Some(count) => {
            if count.has_b {
                input_flags |= IoFlags::COUNT_BYTES;
            }
            split_amount(count.value, input_flags.contains(IoFlags::COUNT_BYTES), ibs)
        }
    };
    if seek.has_b {
        output_flags |= IoFlags::SEEK_BYTES;
    }
    let seek = split_amount(seek.value, output_flags.contains(IoFlags::SEEK_BYTES), obs);

    let warn_partial_read = warns_partial_read(two_buffers, input_flags, output_flags, skip, count);
    if auto_block_size {
        check_auto_amounts(skip, count, seek, input_flags, output_flags)?;
    }
    check_conflicts(conv, input_flags, output_flags)?;
    if output_flags.contains(IoFlags::APPEND) && !conv.contains(Conv::NOTRUNC) {
        warnings.push(OperandWarning::AppendWithoutNotrunc);
    }

    let input_nocache = input_flags.contains(IoFlags::NOCACHE);
    let output_nocache = output_flags.contains(IoFlags::NOCACHE);
    input_flags.remove(IoFlags::NOCACHE);
    output_flags.remove(IoFlags::NOCACHE);

    let plan = CopyPlan {
        input,
        output,
        input_block_size: ibs,
        output_block_size: obs,
        conversion_block_size: cbs,
        two_buffers,
        conv,
        input_flags,
        output_flags,
        status: status.unwrap_or(StatusLevel::Default),
        skip,
        seek,
        count,
        warn_partial_read,
        input_nocache,
        output_nocache,
        auto_block_size,
        input_block_size_given,
    };
    if plan.output.is_some()
        && !plan.conv.contains(Conv::NOTRUNC)
        && plan.seek.total_bytes(obs).is_none()
    {
        return Err(OperandError::SeekTooLarge {
            records: plan.seek.records,
            block_size: obs,
        });
    }
    Ok(plan)
}

/// bs=auto counts records in a size not known yet: skip=, count= and
/// seek= must be in bytes.
fn check_auto_amounts(
    skip: RecordsAndBytes,
    count: RecordsAndBytes,
    seek: RecordsAndBytes,
    input_flags: IoFlags,
    output_flags: IoFlags,
) -> Result<(), OperandError> {
    let in_blocks = |amount: RecordsAndBytes, bytes_flag: bool| {
        amount.records != 0 && amount.records != UNLIMITED_RECORDS && !bytes_flag
    };
    let checks = [
        (
            skip,
            input_flags.contains(IoFlags::SKIP_BYTES),
            "skip",
            "iflag=skip_bytes",
        ),
        (
            count,
            input_flags.contains(IoFlags::COUNT_BYTES),
            "count",
            "iflag=count_bytes",
        ),
        (
            seek,
            output_flags.contains(IoFlags::SEEK_BYTES),
            "seek",
            "oflag=seek_bytes",
        ),
    ];
    for (amount, bytes_flag, operand, flag) in checks {
        if in_blocks(amount, bytes_flag) {
            return Err(OperandError::AutoNeedsBytes { operand, flag });
        }
    }
    Ok(())
}

/// Symbols GNU refuses together.
fn check_conflicts(
    conv: Conv,
    input_flags: IoFlags,
    output_flags: IoFlags,
) -> Result<(), OperandError> {
    let conflicts: [(Conv, &str); 4] = [
        (
            Conv::ASCII | Conv::EBCDIC | Conv::IBM,
            "any two of {ascii,ebcdic,ibm}",
        ),
        (Conv::BLOCK | Conv::UNBLOCK, "block and unblock"),
        (Conv::LCASE | Conv::UCASE, "lcase and ucase"),
        (Conv::EXCL | Conv::NOCREAT, "excl and nocreat"),
    ];
    for (set, what) in conflicts {
        if (conv & set).bits().count_ones() > 1 {
            return Err(OperandError::Conflict(what));
        }
    }
    let direct_and_nocache = IoFlags::DIRECT | IoFlags::NOCACHE;
    if input_flags.contains(direct_and_nocache) || output_flags.contains(direct_and_nocache) {
        return Err(OperandError::Conflict("direct and nocache"));
    }
    Ok(())
}

fn invalid_symbol_bytes(kind: SymbolKind, value: &[u8]) -> OperandError {
    let first = value
        .split(|&c| c == b',')
        .find(|item| std::str::from_utf8(item).is_err());
    OperandError::InvalidSymbol {
        kind,
        symbol: first.unwrap_or(value).to_vec(),
    }
}

/// GNU warns once about a short read when bs= is given without fullblock
/// and count, skip or direct make the record size matter.
fn warns_partial_read(
    two_buffers: bool,
    input_flags: IoFlags,
    output_flags: IoFlags,
    skip: RecordsAndBytes,
    count: RecordsAndBytes,
) -> bool {
    !two_buffers
        && !input_flags.contains(IoFlags::FULLBLOCK)
        && (skip.records != 0
            || (count.records > 0 && count.records < UNLIMITED_RECORDS)
            || (input_flags | output_flags).contains(IoFlags::DIRECT))
}

fn split_amount(value: u64, in_bytes: bool, block_size: usize) -> RecordsAndBytes {
    if in_bytes && value != 0 {
        RecordsAndBytes {
            records: value / block_size as u64,
            bytes: value % block_size as u64,
        }
    } else {
        RecordsAndBytes {
            records: value,
            bytes: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_block_size_rebases_byte_counts() {
        let words: Vec<&str> = vec!["bs=auto", "skip=1000B", "count=5000B", "seek=3B"];
        let plan = parse(&words).plan.unwrap();
        assert!(plan.auto_block_size);
        let plan = plan.with_block_size(4096);
        assert_eq!(
            (plan.input_block_size, plan.output_block_size),
            (4096, 4096)
        );
        assert_eq!(
            plan.skip,
            RecordsAndBytes {
                records: 0,
                bytes: 1000
            }
        );
        assert_eq!(
            plan.count,
            RecordsAndBytes {
                records: 1,
                bytes: 904
            }
        );
        assert_eq!(
            plan.seek,
            RecordsAndBytes {
                records: 0,
                bytes: 3
            }
        );
        // A later bs= wins, as any repeated operand does.
        let plan = parse(&["bs=auto", "bs=64"]).plan.unwrap();
        assert!(!plan.auto_block_size);
        assert_eq!(plan.input_block_size, 64);
    }

    fn plan(words: &[&str]) -> CopyPlan {
        parse(words).plan.expect("valid operands")
    }

    fn error(words: &[&str]) -> String {
        parse(words).plan.expect_err("invalid operands").to_string()
    }

    #[test]
    fn defaults_match_gnu() {
        let p = plan(&[]);
        assert_eq!(p.input_block_size, 512);
        assert_eq!(p.output_block_size, 512);
        assert!(p.two_buffers, "without bs= records are re-blocked");
        assert!(!p.has_count());
        assert_eq!(p.status, StatusLevel::Default);
    }

    #[test]
    fn bs_overrides_ibs_and_obs_in_any_order() {
        let p = plan(&["bs=4k", "ibs=1", "obs=2"]);
        assert_eq!((p.input_block_size, p.output_block_size), (4096, 4096));
        assert!(!p.two_buffers);
        let p = plan(&["ibs=1", "bs=8"]);
        assert_eq!((p.input_block_size, p.output_block_size), (8, 8));
    }

    #[test]
    fn later_operands_override_earlier() {
        let p = plan(&["if=a", "if=b", "count=1", "count=3"]);
        assert_eq!(p.input, Some(PathBuf::from("b")));
        assert_eq!(p.count.records, 3);
    }

    #[test]
    fn byte_counts_split_into_records_and_bytes() {
        let p = plan(&[
            "bs=10",
            "count=25B",
            "skip=7",
            "iflag=skip_bytes",
            "seek=3B",
        ]);
        assert_eq!(
            p.count,
            RecordsAndBytes {
                records: 2,
                bytes: 5
            }
        );
        assert_eq!(
            p.skip,
            RecordsAndBytes {
                records: 0,
                bytes: 7
            }
        );
        assert_eq!(
            p.seek,
            RecordsAndBytes {
                records: 0,
                bytes: 3
            }
        );
        assert!(p.input_flags.contains(IoFlags::COUNT_BYTES));
        assert!(p.output_flags.contains(IoFlags::SEEK_BYTES));
    }

    #[test]
    fn countdown_takes_blocks_then_bytes() {
        let mut left = RecordsAndBytes {
            records: 2,
            bytes: 5,
        };
        let mut sizes = Vec::new();
        loop {
            sizes.push(left.next_request(10));
            if left.complete_request() {
                break;
            }
        }
        assert_eq!(sizes, vec![10, 10, 5]);
    }

    #[test]
    fn iseek_and_oseek_are_aliases() {
        let p = plan(&["iseek=2", "oseek=3"]);
        assert_eq!((p.skip.records, p.seek.records), (2, 3));
    }

    #[test]
    fn conversions_without_cbs_drop_block() {
        let p = plan(&["conv=ebcdic"]);
        assert!(p.conv.contains(Conv::EBCDIC));
        assert!(!p.conv.contains(Conv::BLOCK));
        let p = plan(&["conv=ebcdic", "cbs=8"]);
        assert!(p.conv.contains(Conv::BLOCK));
    }

    #[test]
    fn errors_name_the_operand() {
        assert_eq!(error(&["foo=1"]), "unrecognized operand 'foo=1'");
        assert_eq!(error(&["bar"]), "unrecognized operand 'bar'");
        assert_eq!(error(&["bs=0"]), "invalid number: '0'");
        assert_eq!(
            error(&["bs=1Y"]),
            "invalid number: '1Y': Value too large for defined data type"
        );
        assert_eq!(error(&["conv=sync,nope"]), "invalid conversion: 'nope'");
        assert_eq!(error(&["iflag=x"]), "invalid input flag: 'x'");
        assert_eq!(
            error(&["oflag=fullblock"]),
            "invalid output flag: 'fullblock'"
        );
        assert_eq!(error(&["status=loud"]), "invalid status level: 'loud'");
        assert_eq!(
            error(&["conv=ascii,ibm"]),
            "cannot combine any two of {ascii,ebcdic,ibm}"
        );
        assert_eq!(
            error(&["conv=excl,nocreat"]),
            "cannot combine excl and nocreat"
        );
        assert_eq!(
            error(&["iflag=direct,nocache"]),
            "cannot combine direct and nocache"
        );
    }

    #[test]
    fn first_bad_operand_wins() {
        assert_eq!(error(&["conv=ascii,ebcdic", "bs=0"]), "invalid number: '0'");
    }

    #[test]
    fn zero_multiplier_warns_even_when_the_number_is_rejected() {
        let parsed = parse(&["bs=0x5"]);
        assert_eq!(parsed.warnings, vec![OperandWarning::ZeroMultiplier]);
        assert!(parsed.plan.is_err());
    }

    #[test]
    fn partial_read_warning_conditions() {
        assert!(plan(&["bs=4", "count=2"]).warn_partial_read);
        assert!(!plan(&["bs=4", "count=2", "iflag=fullblock"]).warn_partial_read);
        assert!(!plan(&["ibs=4", "count=2"]).warn_partial_read);
        assert!(plan(&["bs=4", "oflag=direct"]).warn_partial_read);
        assert!(!plan(&["bs=4"]).warn_partial_read);
    }

    #[test]
    fn huge_seek_without_notrunc_is_rejected() {
        assert!(parse(&["of=x", "bs=1M", "seek=4E"]).plan.is_err());
        assert!(parse(&["of=x", "bs=1M", "seek=4E", "conv=notrunc"])
            .plan
            .is_ok());
    }
}
