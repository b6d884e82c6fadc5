//! The one description of ddx's command line: GNU's operands and symbols
//! with their help, beside ddx's own `--options` (`options::OPTIONS`).
//! `--help`, the man page (`doc/ddx.1`) and the shell completions
//! (`completions/`) are all generated from here (see `docs`), so they
//! cannot drift apart; tests hold the symbol lists to the parser's.

use crate::cli::options::{options_help, VALUE_RULE};
use crate::text::wrap::wrap;

/// One GNU `key=value` operand.
#[derive(Debug, Clone, Copy)]
pub struct OperandSpec {
    pub name: &'static str,
    pub value: &'static str,
    pub help: &'static str,
    /// What completes its value.
    pub completes: Completes,
}

/// What a shell should offer after `key=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completes {
    Nothing,
    Files,
    Conversions,
    Flags,
    StatusLevels,
    /// The words of its own that a size operand also takes (bs=auto).
    Words(&'static [&'static str]),
}

pub const OPERANDS: &[OperandSpec] = &[
    OperandSpec {
        name: "bs",
        value: "BYTES",
        help: "read and write up to BYTES bytes at a time (default: 512); overrides ibs \
               and obs. bs=auto (ddx's own): measure reading the input at 4 KiB to 4 MiB \
               and take the smallest size within 95% of the best (128 KiB where it \
               cannot be measured: a pipe, a character device); count=, skip= and \
               seek= must then be given in bytes (a 'B' suffix, or the *_bytes flags)",
        completes: Completes::Words(&["auto"]),
    },
    OperandSpec {
        name: "cbs",
        value: "BYTES",
        help: "convert BYTES bytes at a time",
        completes: Completes::Nothing,
    },
    OperandSpec {
        name: "conv",
        value: "CONVS",
        help: "convert the file as per the comma separated symbol list",
        completes: Completes::Conversions,
    },
    OperandSpec {
        name: "count",
        value: "N",
        help: "copy only N input blocks",
        completes: Completes::Nothing,
    },
    OperandSpec {
        name: "ibs",
        value: "BYTES",
        help: "read up to BYTES bytes at a time (default: 512)",
        completes: Completes::Nothing,
    },
    OperandSpec {
        name: "if",
        value: "FILE",
        help: "read from FILE instead of standard input",
        completes: Completes::Files,
    },
    OperandSpec {
        name: "iflag",
        value: "FLAGS",
        help: "read as per the comma separated symbol list",
        completes: Completes::Flags,
    },
    OperandSpec {
        name: "obs",
        value: "BYTES",
        help: "write BYTES bytes at a time (default: 512)",
        completes: Completes::Nothing,
    },
    OperandSpec {
        name: "of",
        value: "FILE",
        help: "write to FILE instead of standard output",
        completes: Completes::Files,
    },
    OperandSpec {
        name: "oflag",
        value: "FLAGS",
        help: "write as per the comma separated symbol list",
        completes: Completes::Flags,
    },
    OperandSpec {
        name: "seek",
        value: "N",
        help: "(or oseek=N) skip N obs-sized output blocks",
        completes: Completes::Nothing,
    },
    OperandSpec {
        name: "skip",
        value: "N",
        help: "(or iseek=N) skip N ibs-sized input blocks",
        completes: Completes::Nothing,
    },
    OperandSpec {
        name: "status",
        value: "LEVEL",
        help: "what to print on standard error: 'none' only errors, 'noxfer' no transfer \
               statistics, 'progress' a line every second (on a terminal, a live line \
               with the recent rate and, when the size is known, a bar and ETA)",
        completes: Completes::StatusLevels,
    },
];

/// Aliases the parser accepts that `--help` mentions inside another's help.
pub const OPERAND_ALIASES: &[&str] = &["iseek", "oseek"];

/// conv= symbols, in the parser's order.
pub const CONV_HELP: &[(&str, &str)] = &[
    ("ascii", "from EBCDIC to ASCII"),
    ("ebcdic", "from ASCII to EBCDIC"),
    ("ibm", "from ASCII to alternate EBCDIC"),
    (
        "block",
        "pad newline-terminated records with spaces to cbs-size",
    ),
    (
        "unblock",
        "replace trailing spaces in cbs-size records with newline",
    ),
    ("lcase", "change upper case to lower case"),
    ("ucase", "change lower case to upper case"),
    (
        "sparse",
        "try to seek rather than write all-NUL output blocks",
    ),
    ("swab", "swap every pair of input bytes"),
    ("noerror", "continue after read errors"),
    ("nocreat", "do not create the output file"),
    ("excl", "fail if the output file already exists"),
    ("notrunc", "do not truncate the output file"),
    (
        "sync",
        "pad every input block with NULs to ibs-size; with block or unblock, pad with spaces",
    ),
    (
        "fdatasync",
        "physically write output file data before finishing",
    ),
    ("fsync", "likewise, but also write metadata"),
];

/// iflag=/oflag= symbols, in the parser's order.
pub const FLAG_HELP: &[(&str, &str)] = &[
    (
        "append",
        "append mode (makes sense only for output; conv=notrunc suggested)",
    ),
    ("direct", "use direct I/O for data"),
    ("directory", "fail unless a directory"),
    ("dsync", "use synchronized I/O for data"),
    ("noatime", "do not update access time"),
    ("nocache", "request to drop cache"),
    ("noctty", "do not assign controlling terminal from file"),
    ("nofollow", "do not follow symlinks"),
    ("nonblock", "use non-blocking I/O"),
    ("sync", "likewise, but also for metadata"),
    ("fullblock", "accumulate full blocks of input (iflag only)"),
    (
        "count_bytes",
        "treat 'count=N' as a byte count (iflag only)",
    ),
    ("skip_bytes", "treat 'skip=N' as a byte count (iflag only)"),
    ("seek_bytes", "treat 'seek=N' as a byte count (oflag only)"),
];

/// The `ddx bench` line of the usage (its options are its own help's).
pub fn bench_usage(program: &str) -> String {
    format!("bench TARGET [OPTION]...   measure a disk (see '{program} bench --help')")
}

pub const SUMMARY: &str = "Copy a file, converting and formatting according to the operands \
(a drop-in replacement for GNU dd).";

pub const MULTIPLIERS: &str = "N and BYTES may be followed by a multiplier: c=1, w=2, b=512, \
kB=1000, K=1024, MB=1000*1000, M=1024*1024, xM=M, GB, G, and so on for T, P, E, Z, Y; \
KiB=K, MiB=M, and so on. AxB multiplies. If N ends in 'B', it counts bytes, not blocks.";

pub const SIGNALS: &str = "Sending SIGUSR1 prints I/O statistics to standard error and the \
copy goes on. SIGINT and SIGTERM print them and stop; the output then holds the input's \
bytes up to the count reported. An upload to s3:// is aborted (kept for --resume with \
--map); but once its completing request is sent it cannot be taken back, so a signal \
that comes after it waits for the server's answer: if the object is complete, the copy \
ends as completed (exit status 0, its last --progress-fd record done without a \
signal) with a line saying the signal came once the object was committed.";

pub const GUARD: &str = "Before opening the output, ddx refuses a block device that is \
mounted, holds a mounted partition, is active swap or is held by RAID, LVM or \
device-mapper, a copy of a file or disk onto itself that would overwrite input \
before reading it, and an output that does not exist in /dev (a mistyped device name, \
which GNU dd would create as a regular file); --force overrides. Writing a whole disk from a terminal, ddx first \
says what it is about to overwrite and asks.";

pub const PAGE_CACHE: &str = "A copy's pages go through the page cache, as with cp and dd, \
where the copy fits comfortably in the memory ddx may use: what it adds to the cache (the \
input's data it reads, unless cached already, and what it writes) is at most half of the \
least of MemAvailable and, for each memory cgroup with a limit from ddx's own up, the limit \
less the usage. A larger copy, or any copy while memory is under pressure (PSI: some task \
waited for memory in 5% of the last ten seconds), drops what it brings into the cache behind \
it and writes uncached where the kernel can (RWF_DONTCACHE). A copy of unknown size (from a \
pipe) goes through the cache until it has filled half of that budget, then drops. Pages \
cached before the copy stay. --keep-cache and --drop-cache force either way; --verbose says \
which figures decided.";

/// The man page's EXAMPLES: what each does, then the command line (a
/// newline in it is a shell line continuation).
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "Copy a whole disk to an image file, with a live progress line; a read \
         error stops the copy, as with dd:",
        "ddx if=/dev/sda of=sda.img bs=4M status=progress",
    ),
    (
        "Flash an image onto a USB stick, wait until it is on the stick, read it \
         back to check it, and keep its SHA-256 in sha256sum's format (from a \
         terminal, ddx first says what the stick holds and asks):",
        "ddx if=debian.iso of=/dev/sdb bs=4M conv=fsync status=progress\n\
         --verify --hash=sha256 --hash-file=debian.iso.sha256",
    ),
    (
        "Check the image against that digest later:",
        "sha256sum -c debian.iso.sha256",
    ),
    (
        "Rescue a failing disk: retry read errors sector by sector, keep a GNU \
         ddrescue map, and, after an interruption, run the same command again to \
         continue where it stopped (bad ranges are listed at the end):",
        "ddx if=/dev/sdc of=rescued.img --rescue --map=rescued.map --resume",
    ),
    (
        "Benchmark a disk without writing to it (sequential reads, block sizes, \
         latency), or a file system through a scratch file in a directory:",
        "ddx bench /dev/nvme0n1 --tests=seq-read,bs-sweep,latency",
    ),
    ("", "ddx bench /var/tmp --html=report.html"),
];

pub fn help_text(program: &str) -> String {
    let mut out = format!(
        "Usage: {program} [OPERAND]...\n  or:  {program} OPTION\n  or:  {program} {BENCH_USAGE}\n",
        BENCH_USAGE = bench_usage(program)
    );
    out.push_str(&wrap("", SUMMARY, 0, 78));
    out.push('\n');
    for operand in OPERANDS {
        let head = format!("  {}={}", operand.name, operand.value);
        out.push_str(&wrap(&head, operand.help, 18, 78));
    }
    out.push('\n');
    out.push_str(&wrap("", MULTIPLIERS, 0, 78));
    out.push_str("\nCONV symbols:\n");
    for (name, help) in CONV_HELP {
        out.push_str(&wrap(&format!("  {name}"), help, 14, 78));
    }
    out.push_str("\nFLAG symbols:\n");
    for (name, help) in FLAG_HELP {
        out.push_str(&wrap(&format!("  {name}"), help, 14, 78));
    }
    out.push('\n');
    out.push_str(&wrap("", SIGNALS, 0, 78));
    out.push('\n');
    out.push_str(&wrap("", GUARD, 0, 78));
    out.push_str("\nddx options (GNU operands stay key=value; these never collide with them):\n");
    out.push_str(&options_help());
    out.push('\n');
    out.push_str(&wrap("", VALUE_RULE, 0, 78));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operands::symbols;

    #[test]
    fn symbol_help_covers_exactly_the_parsers_symbols() {
        let conv: Vec<&str> = CONV_HELP.iter().map(|(n, _)| *n).collect();
        assert_eq!(conv, symbols::conv_names().collect::<Vec<_>>());
        let flags: Vec<&str> = FLAG_HELP.iter().map(|(n, _)| *n).collect();
        assert_eq!(flags, symbols::flag_names().collect::<Vec<_>>());
    }

    #[test]
    fn every_operand_is_one_the_parser_knows() {
        for operand in OPERANDS {
            let word = format!("{}=x", operand.name);
            let parsed = crate::operands::parse(&[word.as_str()]);
            let message = parsed.plan.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                !message.starts_with("unrecognized operand"),
                "{}: {message}",
                operand.name
            );
        }
    }
}
