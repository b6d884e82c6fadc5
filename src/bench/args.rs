//! The bench subcommand's options, in one table ([`OPTIONS`]) that keeps
//! each option's name, help and parsing together, as the copy's options
//! are kept (`cli::options`, whose [`OptionSpec`], help layout and getopt
//! rules this reuses): `ddx bench --help`, the man page's bench section
//! and the bench completions are generated from it (`cli::docs`), and its
//! errors read as GNU getopt's, in the voice of the rest of ddx. A value is
//! given as `--option=VALUE` only, so an option can never take the TARGET
//! for its value. Sizes use dd's number grammar (`256M`, `4K`, `1GB`).

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::cli::getopt;
use crate::cli::options::{OptionSpec, Values};
use crate::text::quote::quote;
use crate::text::wrap::wrap;

/// The tests `--tests` can choose, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TestName {
    SeqRead,
    SeqWrite,
    BsSweep,
    Latency,
    QdSweep,
    Zones,
}

impl TestName {
    pub const ALL: [TestName; 6] = [
        TestName::SeqRead,
        TestName::SeqWrite,
        TestName::BsSweep,
        TestName::Latency,
        TestName::QdSweep,
        TestName::Zones,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TestName::SeqRead => "seq-read",
            TestName::SeqWrite => "seq-write",
            TestName::BsSweep => "bs-sweep",
            TestName::Latency => "latency",
            TestName::QdSweep => "qd-sweep",
            TestName::Zones => "zones",
        }
    }

    pub fn help(self) -> &'static str {
        match self {
            TestName::SeqRead => {
                "sequential read: O_DIRECT one request at a time (hdparm -t) and 8 in \
                 flight (io_uring), and from the page cache (hdparm -T)"
            }
            TestName::SeqWrite => {
                "sequential write: buffered, +fdatasync, +fsync, O_DSYNC, O_SYNC, O_DIRECT \
                 one at a time and 8 in flight (needs --destructive on a block device or an \
                 existing file)"
            }
            TestName::BsSweep => {
                "read and write throughput from the logical sector to 16 MiB, and the \
                 recommended block size"
            }
            TestName::Latency => {
                "small O_DIRECT+O_DSYNC writes (mode direct+dsync) and O_DIRECT random \
                 reads, every latency kept"
            }
            TestName::QdSweep => {
                "random 4 KiB O_DIRECT reads, then writes, at queue depth 1 (pread, \
                 pwrite), 4, 16, 32, 64 (io_uring; on an NBD export, reads only, through \
                 libnbd's asynchronous reads)"
            }
            TestName::Zones => "read throughput at evenly spaced offsets across the target",
        }
    }

    /// Whether the test only writes (nothing of it runs on a target that
    /// may only be read).
    pub fn only_writes(self) -> bool {
        self == TestName::SeqWrite
    }

    fn parse(name: &str) -> Option<TestName> {
        TestName::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// The names `--tests` takes, for completions.
const TEST_NAMES: &[&str] = &[
    "seq-read",
    "seq-write",
    "bs-sweep",
    "latency",
    "qd-sweep",
    "zones",
];

/// How the report is printed on standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Table,
    Json,
    Markdown,
}

/// The smallest working set worth measuring (and the smallest file).
pub const MIN_SIZE: u64 = 1 << 20;

/// What the user allowed to be done to the target, beyond reading it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Allowed {
    /// `--destructive`: write a block device or an existing file.
    pub destructive: bool,
    /// `--force`: measure where the copy's guard would refuse.
    pub force: bool,
    /// `--allow-memory`: measure a target with no disk under it.
    pub memory: bool,
}

/// The latency test's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyArgs {
    /// Requests per run.
    pub count: u32,
    /// Bytes per request; None: the target's O_DIRECT alignment.
    pub block_size: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BenchArgs {
    /// The file, directory, block device, generic node or export to
    /// measure.
    pub target: PathBuf,
    pub allowed: Allowed,
    /// The tests to run, in their order, each once.
    pub tests: Vec<TestName>,
    /// The working set, in bytes.
    pub size: u64,
    pub runs: u32,
    pub time_per_run: f64,
    pub latency: LatencyArgs,
    pub zones: u32,
    /// Where the HTML report goes, if anywhere.
    pub html: Option<PathBuf>,
    pub format: Format,
}

impl Default for BenchArgs {
    /// Every value as `--help` states its default.
    fn default() -> BenchArgs {
        BenchArgs {
            target: PathBuf::new(),
            allowed: Allowed::default(),
            tests: Vec::new(),
            size: 256 << 20,
            runs: 3,
            time_per_run: 0.25,
            latency: LatencyArgs {
                count: 1000,
                block_size: None,
            },
            zones: 16,
            html: None,
            format: Format::Table,
        }
    }
}

impl BenchArgs {
    pub fn runs(&self, test: TestName) -> bool {
        self.tests.contains(&test)
    }
}

/// One `ddx bench` option: what `--help`, the man page and the
/// completions say of it, and how its value is taken (a switch's is "").
pub struct BenchOption {
    pub spec: OptionSpec,
    apply: fn(&mut BenchArgs, &str) -> Result<(), String>,
}

const fn option(
    spec: OptionSpec,
    apply: fn(&mut BenchArgs, &str) -> Result<(), String>,
) -> BenchOption {
    BenchOption { spec, apply }
}

/// Every `ddx bench` option, in the order `--help` lists them.
pub const OPTIONS: &[BenchOption] = &[
    option(
        OptionSpec::valued(
            "tests",
            "LIST",
            Values::ListOf(TEST_NAMES),
            "the tests to run, comma-separated; all of them by default",
        ),
        |a, v| {
            let mut tests = Vec::new();
            for name in v.split(',') {
                let test = TestName::parse(name).ok_or_else(|| {
                    let valid: Vec<String> = TEST_NAMES.iter().map(|t| format!("'{t}'")).collect();
                    format!(
                        "invalid argument {} for '--tests'; valid arguments are {}",
                        quote(name.as_bytes()),
                        valid.join(", ")
                    )
                })?;
                tests.push(test);
            }
            tests.sort();
            tests.dedup();
            a.tests = tests;
            Ok(())
        },
    ),
    option(
        OptionSpec::valued(
            "size",
            "N",
            Values::Free,
            "the working set, at least 1M (default 256M; dd's number grammar: 256M, \
             1G, 64MB); a file or device smaller than N is measured whole",
        ),
        |a, v| {
            a.size = size(v, "size", MIN_SIZE, "1M (1048576 bytes)")?;
            Ok(())
        },
    ),
    option(
        OptionSpec::valued(
            "runs",
            "R",
            Values::Free,
            "measured runs per figure, 1 to 100, after one warm-up (default 3; the \
             bs-sweep measures twice as many rounds, for a steady recommendation)",
        ),
        |a, v| {
            a.runs = number(v, "runs", 1, 100)? as u32;
            Ok(())
        },
    ),
    option(
        OptionSpec::valued(
            "time-per-run",
            "SECONDS",
            Values::Free,
            "the time limit of one run of a bs-sweep size or a queue depth (default 0.25)",
        ),
        |a, v| match v.parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => {
                a.time_per_run = s;
                Ok(())
            }
            _ => Err(format!(
                "invalid argument {} for '--time-per-run': a number of seconds, more \
                 than 0 and at most 3600",
                quote(v.as_bytes())
            )),
        },
    ),
    option(
        OptionSpec::valued(
            "latency-count",
            "N",
            Values::Free,
            "synchronous writes and reads per run of the latency test, 1 to 1000000 \
             (default 1000)",
        ),
        |a, v| {
            a.latency.count = number(v, "latency-count", 1, 1_000_000)? as u32;
            Ok(())
        },
    ),
    option(
        OptionSpec::valued(
            "latency-bs",
            "BYTES",
            Values::Free,
            "the request size of the latency test, a multiple of the target's O_DIRECT \
             alignment (default: that alignment, the logical sector)",
        ),
        |a, v| {
            a.latency.block_size = Some(size(v, "latency-bs", 1, "1 byte")?);
            Ok(())
        },
    ),
    option(
        OptionSpec::valued(
            "zones",
            "N",
            Values::Free,
            "offsets measured by the zones test, 2 to 1024 (default 16)",
        ),
        |a, v| {
            a.zones = number(v, "zones", 2, 1024)? as u32;
            Ok(())
        },
    ),
    option(
        OptionSpec::switch(
            "destructive",
            "allow the write tests on a block device, a disk's generic node or an \
             existing file, destroying its contents; a device the copy's wrong-device guard refuses (mounted, \
             swap, held by RAID, LVM or device-mapper) is refused",
        ),
        |a, _| {
            a.allowed.destructive = true;
            Ok(())
        },
    ),
    option(
        OptionSpec::switch(
            "force",
            "measure even where the copy's guard refuses, as the copy's --force does \
             (the kernel still refuses to open a device in use for writing)",
        ),
        |a, _| {
            a.allowed.force = true;
            Ok(())
        },
    ),
    option(
        OptionSpec::switch(
            "allow-memory",
            "measure a target with no disk under it (tmpfs, ramfs, devtmpfs, a RAM \
             disk), which is refused otherwise: its figures are the memory's",
        ),
        |a, _| {
            a.allowed.memory = true;
            Ok(())
        },
    ),
    option(
        OptionSpec::switch(
            "json",
            "print the report as JSON (schema_version 3, the summary first, every run \
             kept) instead of a table",
        ),
        |a, _| set_format(a, Format::Json, "json"),
    ),
    option(
        OptionSpec::switch(
            "markdown",
            "print the report as Markdown tables, for pasting into an issue",
        ),
        |a, _| set_format(a, Format::Markdown, "markdown"),
    ),
    option(
        OptionSpec::valued(
            "html",
            "FILE",
            Values::File,
            "also write a self-contained HTML report with charts to FILE",
        ),
        |a, v| {
            if v.is_empty() {
                return Err("invalid argument '' for '--html': a file name".to_owned());
            }
            a.html = Some(PathBuf::from(v));
            Ok(())
        },
    ),
    option(
        OptionSpec::switch("help", "display this help and exit"),
        |_, _| Ok(()),
    ),
    option(
        OptionSpec::switch("version", "output version information and exit"),
        |_, _| Ok(()),
    ),
];

fn set_format(a: &mut BenchArgs, format: Format, name: &str) -> Result<(), String> {
    if a.format != Format::Table && a.format != format {
        return Err(format!(
            "option '--{name}' conflicts with the other report format chosen \
             (--json or --markdown: give one)"
        ));
    }
    a.format = format;
    Ok(())
}

/// A size by dd's number grammar, at least `min`.
fn size(value: &str, option: &str, min: u64, min_text: &str) -> Result<u64, String> {
    let shown = quote(value.as_bytes());
    match crate::operands::number::parse(value.as_bytes()).result {
        Ok(n) if n.value >= min => Ok(n.value),
        Ok(_) => Err(format!(
            "invalid argument {shown} for '--{option}': at least {min_text}"
        )),
        Err(_) => Err(format!(
            "invalid argument {shown} for '--{option}': a size such as 4096, 4K, 256M or 1G"
        )),
    }
}

/// A whole number from `min` to `max`.
fn number(value: &str, option: &str, min: u64, max: u64) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "invalid argument {} for '--{option}': a number from {min} to {max}",
            quote(value.as_bytes())
        )),
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    Run(BenchArgs),
    Help,
    Version,
    /// getopt's message, or why the operands do not make a bench.
    Error(String),
}

/// Read the words after "bench", as GNU getopt would: options anywhere
/// before "--", one TARGET operand.
pub fn parse(words: &[OsString]) -> Parsed {
    let mut args = BenchArgs::default();
    let mut targets: Vec<PathBuf> = Vec::new();
    let mut options_ended = false;
    for word in words {
        let bytes = word.as_bytes();
        if options_ended || bytes.len() < 2 || bytes[0] != b'-' {
            targets.push(PathBuf::from(word));
            continue;
        }
        if bytes == b"--" {
            options_ended = true;
            continue;
        }
        let Some(long) = bytes.strip_prefix(b"--") else {
            let letter = String::from_utf8_lossy(&bytes[1..2]).into_owned();
            return Parsed::Error(format!("invalid option -- '{letter}'"));
        };
        let text = String::from_utf8_lossy(long);
        let (option, value) = match getopt::find(OPTIONS, |o| &o.spec, &text) {
            Ok(found) => found,
            Err(message) => return Parsed::Error(message),
        };
        let name = option.spec.name;
        match (option.spec.value, value) {
            (None, Some(_)) => {
                return Parsed::Error(format!("option '--{name}' doesn't allow an argument"))
            }
            (Some(_), None) => return Parsed::Error(getopt::missing_argument(&option.spec)),
            _ => {}
        }
        match name {
            "help" => return Parsed::Help,
            "version" => return Parsed::Version,
            _ => {}
        }
        if let Err(message) = (option.apply)(&mut args, value.unwrap_or("")) {
            return Parsed::Error(message);
        }
    }
    match targets.as_slice() {
        [] => return Parsed::Error("missing TARGET operand".to_owned()),
        [target] => args.target = target.clone(),
        [_, extra, ..] => {
            return Parsed::Error(format!(
                "extra operand {}",
                quote(extra.as_os_str().as_bytes())
            ))
        }
    }
    if args.tests.is_empty() {
        args.tests = TestName::ALL.to_vec();
    }
    Parsed::Run(args)
}

pub const SUMMARY: &str = "Measure a disk honestly: caches bypassed or named, every figure \
the median of several runs after a warm-up that is thrown away, results as a table, JSON, \
Markdown or an HTML page with charts.";

pub const TARGET: &str = "TARGET is an existing file, directory (ddx creates a temporary \
file there and removes it, also when interrupted) or block device, which is only read \
unless --destructive is given; a name with nothing there is an error. A target the copy's wrong-device guard refuses (a device name \
that does not exist in /dev; with --destructive, a device in use) is refused with the \
copy's words, and so is a target with no disk under it (tmpfs, ramfs, devtmpfs, a RAM \
disk: the figures would be the memory's) unless --allow-memory is given. TARGET may \
also be an NBD export (nbd://HOST/NAME, nbd+unix:///NAME?socket=PATH, as for if=), \
measured through ddx's NBD end like a device: only read unless --destructive, one \
connection; O_DIRECT, the page cache and O_DSYNC/O_SYNC have no meaning there, so the \
tests run as plain NBD requests (mode 'nbd'; seq-write adds 'flush', an NBD flush) and \
the rest is reported as skipped, with the reason. TARGET may also be a disk's SCSI or NVMe \
generic node (/dev/sgN, /dev/bsg/H:C:T:L, /dev/ngXnY), measured through ddx's passthrough \
end and the node's command queue: only read unless --destructive, which also claims the \
block device of the same disk with O_EXCL, and refused as the copy refuses the disk behind \
the node. Every request is one of the disk's own commands (mode 'passthrough', at most \
one command's worth, a size the summary's rows are then named by), one at a time or kept \
in flight as fio's sg and io_uring_cmd engines keep them (the sg driver takes at most 16 \
per node, a bsg node one); seq-write adds 'passthrough+flush' (a cache flush at the end) \
and 'passthrough+fua' (each write with force unit access), and latency writes with FUA.";

pub const REPORT: &str = "The report leads with a summary as CrystalDiskMark and KDiskMark \
show a disk: SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1 and RND4K Q1T1 (sequential 1 MiB and \
random 4 KiB requests, 8, 1, 32 and 1 in flight, one thread), read and write, O_DIRECT, \
bytes over wall time; each cell is the seq-read, seq-write or qd-sweep figure of the same \
requests, and the JSON gives fio's options for them. Then the recommended block size, the \
bs-sweep, every other figure once with the way it was measured (mode, engine, block size, \
queue depth), and the facts. A quantity two tests ask for is measured once and shown by \
both; the same requests measured another way (the bs-sweep's median request, a zone's \
region) are shown with what differs. Where a figure cannot be the device's own (a loop \
device over a file, a file in memory, writes a cache absorbs) the report says so beside \
it, and names the loop device's backing file.";

pub const RECOMMENDATION: &str = "The bs-sweep recommends, per direction, the smallest block \
size whose figure reaches the bar: 95% of the median of the three highest figures, less \
what the noise between rounds cannot resolve, never below 85% of the best (the highest \
figure). Its figures are the block size over each round's median request time (not bytes \
over wall time), the median of the rounds; the report prints them, the best, and the bar \
and each size's share as shares of the best, the floor's denominator.";

pub const SIGNALS: &str = "SIGINT or SIGTERM stop the bench at the next request: the \
report (table, JSON, Markdown, HTML, as asked) holds the runs completed before it, the \
temporary file is removed, and ddx dies of the signal. A second signal does not wait.";

pub const EXIT: &str = "Exit status: 0 when something was measured; 1 on an error or when \
nothing could be measured (the report says why); after SIGINT or SIGTERM, death by that \
signal.";

/// `ddx bench --help`, laid out as `ddx --help` is.
pub fn help_text(program: &str) -> String {
    let mut out = format!("Usage: {program} bench TARGET [OPTION]...\n");
    out.push_str(&wrap("", SUMMARY, 0, 78));
    out.push('\n');
    out.push_str(&wrap("", TARGET, 0, 78));
    out.push_str("\nTests (--tests=LIST, in this order):\n");
    for test in TestName::ALL {
        out.push_str(&wrap(&format!("  {}", test.name()), test.help(), 14, 78));
    }
    out.push_str("\nOptions (a value is given as --option=VALUE):\n");
    out.push_str(&crate::cli::options::layout(
        OPTIONS.iter().map(|o| &o.spec),
    ));
    out.push('\n');
    out.push_str(&wrap("", REPORT, 0, 78));
    out.push('\n');
    out.push_str(&wrap("", RECOMMENDATION, 0, 78));
    out.push('\n');
    out.push_str(&wrap("", SIGNALS, 0, 78));
    out.push('\n');
    out.push_str(&wrap("", EXIT, 0, 78));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(words: &[&str]) -> Parsed {
        let words: Vec<OsString> = words.iter().map(OsString::from).collect();
        parse(&words)
    }

    fn args(words: &[&str]) -> BenchArgs {
        match parse_words(words) {
            Parsed::Run(args) => args,
            other => panic!("{words:?}: {other:?}"),
        }
    }

    fn error(words: &[&str]) -> String {
        match parse_words(words) {
            Parsed::Error(message) => message,
            other => panic!("{words:?}: {other:?}"),
        }
    }

    #[test]
    fn defaults_run_every_test() {
        let a = args(&["/tmp"]);
        assert_eq!(a.tests, TestName::ALL);
        assert_eq!((a.size, a.runs), (256 << 20, 3));
        assert_eq!(a.target, PathBuf::from("/tmp"));
    }

    #[test]
    fn tests_and_sizes_use_their_grammars() {
        let a = args(&[
            "x",
            "--tests=zones,seq-read,zones",
            "--size=64M",
            "--latency-bs=4K",
        ]);
        assert_eq!(a.tests, vec![TestName::SeqRead, TestName::Zones]);
        assert_eq!(a.size, 64 << 20);
        assert_eq!(a.latency.block_size, Some(4096));
        let a = args(&["--json", "--destr", "x", "--allow-memory", "--html=r.html"]);
        assert!(a.allowed.destructive && a.allowed.memory && !a.allowed.force);
        assert_eq!(a.format, Format::Json);
        assert_eq!(a.html, Some(PathBuf::from("r.html")));
    }

    #[test]
    fn errors_read_as_getopt_and_name_the_option() {
        assert_eq!(error(&["x", "--x"]), "unrecognized option '--x'");
        assert_eq!(error(&["x", "-q"]), "invalid option -- 'q'");
        assert_eq!(
            error(&["x", "--json=1"]),
            "option '--json' doesn't allow an argument"
        );
        assert_eq!(
            error(&["--size", "8M", "x"]),
            "option '--size' requires an argument: give it in the same word, as --size=N"
        );
        assert_eq!(
            error(&["x", "--size=1"]),
            "invalid argument '1' for '--size': at least 1M (1048576 bytes)"
        );
        assert_eq!(
            error(&["x", "--size=0"]),
            "invalid argument '0' for '--size': at least 1M (1048576 bytes)"
        );
        assert!(error(&["x", "--size=lots"]).starts_with("invalid argument 'lots' for '--size'"));
        assert!(error(&["x", "--tests=nope"]).starts_with("invalid argument 'nope' for '--tests'"));
        assert!(error(&["x", "--runs=0"]).contains("'--runs': a number from 1 to 100"));
        assert!(error(&["x", "--zones=1"]).contains("'--zones'"));
        assert!(error(&["x", "--time-per-run=0"]).contains("'--time-per-run'"));
        assert!(error(&["x", "--time-per-run=nan"]).contains("'--time-per-run'"));
        assert!(error(&["x", "--json", "--markdown"]).contains("--markdown"));
        assert_eq!(error(&[]), "missing TARGET operand");
        assert_eq!(error(&["a", "b"]), "extra operand 'b'");
        assert_eq!(parse_words(&["x", "--he"]), Parsed::Help);
        assert_eq!(parse_words(&["--v"]), Parsed::Version);
        // After "--", a word that looks like an option is the TARGET.
        assert_eq!(args(&["--", "--json"]).target, PathBuf::from("--json"));
    }

    #[test]
    fn every_option_is_in_the_help_within_78_columns() {
        let help = help_text("ddx");
        for option in OPTIONS {
            assert!(
                help.contains(&format!("--{}", option.spec.name)),
                "{}",
                option.spec.name
            );
        }
        for test in TestName::ALL {
            assert!(help.contains(test.name()));
        }
        for line in help.lines() {
            assert!(line.chars().count() <= 78, "too wide: {line:?}");
        }
        assert!(help.starts_with("Usage: ddx bench TARGET [OPTION]...\n"));
    }

    #[test]
    fn every_option_parses_its_own_example() {
        for option in OPTIONS {
            let name = option.spec.name;
            let word = match (option.spec.value, name) {
                (None, _) => format!("--{name}"),
                (Some(_), "tests") => "--tests=zones".to_owned(),
                (Some(_), "size" | "latency-bs") => format!("--{name}=4M"),
                (Some(_), "html") => "--html=r.html".to_owned(),
                (Some(_), "time-per-run") => "--time-per-run=0.5".to_owned(),
                (Some(_), _) => format!("--{name}=4"),
            };
            assert!(
                !matches!(parse_words(&["x", &word]), Parsed::Error(_)),
                "{word}"
            );
        }
        assert_eq!(
            OPTIONS[0].spec.choices(),
            TestName::ALL.map(TestName::name).as_slice()
        );
    }
}
