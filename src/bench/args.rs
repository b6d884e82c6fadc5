//! The bench subcommand's options. Unlike the copy, `ddx bench` has no dd
//! operands to keep in order, so clap parses it; sizes still use dd's
//! number grammar (`256M`, `4K`, `1GB`) so one dialect serves both.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// The tests `--tests` can choose, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum TestName {
    /// sequential read, O_DIRECT (hdparm -t) and from the page cache (hdparm -T)
    SeqRead,
    /// sequential write: buffered, +fdatasync, +fsync, O_DSYNC, O_SYNC, O_DIRECT
    SeqWrite,
    /// read and write throughput from 512 B to 16 MiB, and the recommended bs
    BsSweep,
    /// small O_DIRECT+O_DSYNC writes and O_DIRECT reads, every latency kept
    Latency,
    /// random 4 KiB reads at queue depth 1, 4, 16, 32, 64 (io_uring)
    QdSweep,
    /// read throughput at evenly spaced offsets across the target
    Zones,
}

impl TestName {
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
}

/// Measure a disk honestly: caches bypassed or named, every figure the
/// median of several runs, results as a table, JSON, Markdown or HTML.
///
/// TARGET is a file, a directory (ddx creates a temporary file there and
/// removes it, also when interrupted) or a block device (only read, unless
/// --destructive).
#[derive(Debug, Parser)]
#[command(name = "ddx bench", version, max_term_width = 100)]
pub struct BenchArgs {
    /// file, directory or block device to measure
    pub target: PathBuf,

    /// tests to run, comma-separated [default: all]
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub tests: Vec<TestName>,

    /// working-set size (dd's number grammar: 256M, 1G, 64MB)
    #[arg(long, value_name = "N", default_value = "256M", value_parser = parse_size)]
    pub size: u64,

    /// measured runs per figure, plus one warm-up (bs-sweep: twice as
    /// many rounds, for a steady recommendation)
    #[arg(long, value_name = "R", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,

    /// allow write tests on a block device or an existing file (destroys
    /// its contents); a mounted or otherwise busy device is refused
    #[arg(long)]
    pub destructive: bool,

    /// print the report as JSON (schema_version 1) instead of a table
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,

    /// print the report as Markdown tables, for pasting into an issue
    #[arg(long)]
    pub markdown: bool,

    /// also write a self-contained HTML report with charts to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// synchronous writes and reads in the latency test
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub latency_count: u32,

    /// request size of the latency test [default: the logical sector]
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub latency_bs: Option<u64>,

    /// offsets measured by the zones test
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(2..=1024))]
    pub zones: u32,

    /// time limit of one run of a bs-sweep point or a queue depth, seconds
    #[arg(long, value_name = "SECONDS", default_value_t = 0.25)]
    pub time_per_run: f64,
}

impl BenchArgs {
    pub fn parse_from_words(program: &str, words: &[OsString]) -> Result<BenchArgs, clap::Error> {
        let argv = std::iter::once(OsString::from(format!("{program} bench")))
            .chain(words.iter().cloned());
        let mut args = BenchArgs::try_parse_from(argv)?;
        if args.tests.is_empty() {
            args.tests = TestName::value_variants().to_vec();
        }
        args.tests.sort();
        args.tests.dedup();
        Ok(args)
    }

    pub fn runs(&self, test: TestName) -> bool {
        self.tests.contains(&test)
    }
}

fn parse_size(text: &str) -> Result<u64, String> {
    match crate::operands::number::parse(text.as_bytes()).result {
        Ok(n) if n.value > 0 => Ok(n.value),
        Ok(_) => Err("must be more than zero".to_owned()),
        Err(_) => Err(format!(
            "invalid size '{text}' (examples: 4096, 4K, 256M, 1G)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> Result<BenchArgs, clap::Error> {
        let words: Vec<OsString> = words.iter().map(OsString::from).collect();
        BenchArgs::parse_from_words("ddx", &words)
    }

    #[test]
    fn defaults_run_every_test() {
        let a = parse(&["/tmp"]).unwrap();
        assert_eq!(a.tests.len(), 6);
        assert_eq!((a.size, a.runs), (256 << 20, 3));
    }

    #[test]
    fn tests_and_sizes_use_their_grammars() {
        let a = parse(&[
            "x",
            "--tests=zones,seq-read",
            "--size=64M",
            "--latency-bs=4K",
        ])
        .unwrap();
        assert_eq!(a.tests, vec![TestName::SeqRead, TestName::Zones]);
        assert_eq!(a.size, 64 << 20);
        assert_eq!(a.latency_bs, Some(4096));
        assert!(parse(&["x", "--tests=nope"]).is_err());
        assert!(parse(&["x", "--size=0"]).is_err());
        assert!(parse(&["x", "--runs=0"]).is_err());
        assert!(parse(&["x", "--json", "--markdown"]).is_err());
        assert!(parse(&[]).is_err());
    }
}
