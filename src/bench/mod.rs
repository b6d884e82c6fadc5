//! `ddx bench TARGET`: the honest disk measurement people do by hand
//! with dd, in one command. Caches are bypassed or named, every figure is
//! the median of several runs with a warm-up thrown away, block devices are
//! only read unless `--destructive`, and the result is a table, JSON,
//! Markdown or an HTML page with charts.
//!
//! Layout, in the order of the dependencies: `args` (the option table,
//! parsed as GNU getopt would), `backing` (what answers the requests
//! where it is not the target's own disk: a loop device's backing file,
//! memory), `target` (what may be touched: the copy's
//! wrong-device guard decides, memory is refused; every target is opened
//! as the copy opens an operand, and what may be done with it is asked of
//! its end's capabilities), `measure` (repetition,
//! timing, cache dropping), `interrupt` (Ctrl-C stops the measuring, not
//! the report), `scenario` (the tests, which produce results), `results`
//! (the figures as data, and the block-size rule applied to them, from the
//! `stats` leaf), `summary` (the first screen, CrystalDiskMark's rows,
//! picked from the results), `report` (exporters that only read results),
//! `testing` (reports of chosen figures, for the reports' own tests).
//! Scenarios and reports never import each other.

pub mod args;
pub mod backing;
pub mod interrupt;
pub mod measure;
pub mod progress;
/// The block-size rule lives in the statistics leaf (`bs=auto` uses it
/// too); re-exported here, where the bench applies it.
pub use crate::stats::recommend;
pub mod report;
pub mod results;
pub mod scenario;
pub mod summary;
pub mod target;
#[doc(hidden)]
pub mod testing;

use std::ffi::OsString;
use std::io::Write;
use std::time::Duration;

use rustix::io::Errno;

use crate::sys::signals::SignalPipes;
use args::{BenchArgs, Format, Parsed, TestName};
use report::Exporter;
use results::Report;

/// Exit status of every bench failure.
const EXIT_FAILURE: i32 = 1;

/// Why the bench stopped; printed as one line after "ddx bench: ".
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Msg(String),
    #[error("{context}: {}", crate::sys::errno_text(*errno))]
    Sys { context: String, errno: Errno },
    #[error("{context}: {}", io_text(source))]
    Io {
        context: String,
        source: std::io::Error,
    },
    /// The copy's wrong-device guard refused the target, in its words.
    #[error("{0}")]
    Refused(crate::guard::Hazard),
    /// SIGINT or SIGTERM arrived; the measuring stops, the report is made.
    #[error("interrupted")]
    Interrupted,
}

impl BenchError {
    pub fn msg(text: impl Into<String>) -> BenchError {
        BenchError::Msg(text.into())
    }

    pub fn sys(context: impl Into<String>, errno: Errno) -> BenchError {
        BenchError::Sys {
            context: context.into(),
            errno,
        }
    }

    pub fn io(context: impl Into<String>, source: std::io::Error) -> BenchError {
        BenchError::Io {
            context: context.into(),
            source,
        }
    }
}

/// An I/O error as strerror says it, without Rust's " (os error N)".
fn io_text(error: &std::io::Error) -> String {
    match error.raw_os_error() {
        Some(raw) => crate::sys::errno_text(Errno::from_raw_os_error(raw)),
        None => error.to_string(),
    }
}

/// Run `ddx bench` with the words after "bench"; returns the exit status,
/// or dies of the signal that interrupted it once the report is out.
pub fn run(program: &str, words: &[OsString], signals: SignalPipes) -> i32 {
    let args = match args::parse(words) {
        Parsed::Run(args) => args,
        Parsed::Help => return print(program, &args::help_text(program)),
        Parsed::Version => return print(program, &crate::cli::version_text()),
        Parsed::Error(message) => {
            eprintln!(
                "{program} bench: {message}\nTry '{program} bench --help' for more information."
            );
            return EXIT_FAILURE;
        }
    };
    interrupt::watch(signals, |signal| {
        progress::Status::for_stderr().clear();
        target::remove_temp_then(|| crate::sys::signals::die_of(signal))
    });
    // Open the HTML file first: a bad path should fail in a second, not
    // after a minute of measuring.
    let html = match args.html.as_deref().map(HtmlFile::create).transpose() {
        Ok(html) => html,
        Err(e) => {
            eprintln!("{program} bench: {e}");
            return EXIT_FAILURE;
        }
    };
    let status = progress::Status::for_stderr();
    let outcome = bench(&args, status);
    status.clear();
    let status = match outcome.and_then(|report| output(&args, html, &report)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{program} bench: {e}");
            EXIT_FAILURE
        }
    };
    if let Some(signal) = interrupt::signal() {
        // The report is out and the temporary file gone (with the target):
        // end as an interrupted copy ends.
        crate::sys::signals::die_of(signal);
    }
    status
}

fn print(program: &str, text: &str) -> i32 {
    crate::cli::print_stdout(&format!("{program} bench"), text)
}

/// Measure, then put the report together (also after an interruption,
/// from the runs completed).
fn bench(args: &BenchArgs, status: progress::Status) -> Result<Report, BenchError> {
    let started = std::time::SystemTime::now();
    let target = target::Target::open(args)?;
    if let Some(why) = &target.read_only {
        if args.tests.iter().all(|t| t.only_writes()) {
            let names: Vec<&str> = args.tests.iter().map(|t| t.name()).collect();
            return Err(BenchError::msg(format!(
                "nothing to measure: --tests={} only writes, and {why}",
                names.join(",")
            )));
        }
    }
    if let (true, Some(bs)) = (args.runs(TestName::Latency), args.latency.block_size) {
        scenario::latency::check_block_size(&target, bs)?;
    }
    let mut out = scenario::Outcome::default();
    let time_per_run = Duration::from_secs_f64(args.time_per_run);
    let mut runner = measure::Runner::new(&target, args.runs, time_per_run, status);
    match target.created.then(|| scenario::fill(&target, &status)) {
        Some(Err(BenchError::Interrupted)) | None => {}
        Some(other) => other?,
    }
    for &test in &args.tests {
        if interrupt::pending() {
            break;
        }
        match test {
            TestName::SeqRead => scenario::seq::read(&mut runner, &mut out),
            TestName::SeqWrite => scenario::seq::write(&mut runner, &mut out),
            TestName::BsSweep => scenario::sweep::run(&mut runner, &mut out),
            TestName::Latency => {
                let bs = args
                    .latency
                    .block_size
                    .unwrap_or_else(|| target.direct_align());
                scenario::latency::run(&mut runner, args.latency.count, bs, &mut out)
            }
            TestName::QdSweep => scenario::qd::run(&mut runner, &mut out),
            TestName::Zones => scenario::zones::run(&mut runner, args.zones, &mut out),
        }
        .or_else(|e| match e {
            // What was measured before it is kept.
            BenchError::Interrupted => Ok(()),
            e => Err(e),
        })?;
    }
    if target.can.served {
        out.notes.push(
            "an NBD export: the figures are the server's and the connection's (network, \
             socket, the server's storage and caches), measured through libnbd as a copy \
             reaches it"
                .to_owned(),
        );
    } else if target.can.device && !target.can.local_storage {
        let disk = match &target.device.disk_name {
            Some(name) => format!("the disk of /dev/{name}"),
            None => "a disk".to_owned(),
        };
        let command = u64::try_from(target.can.requests.max_len).unwrap_or(u64::MAX);
        out.notes.push(format!(
            "{disk} through its {} node: the disk's own commands, past the block layer and \
             its page cache, each request one command of at most {}",
            target.interface.map_or("generic", |i| i.name()),
            report::size_text(command)
        ));
    } else if let Some(note) = target.backing.note() {
        out.notes.push(note);
    } else if target.device.disk.is_none() && !target.can.device {
        out.notes.push(format!(
            "no disk under the target (filesystem {}): the figures measure memory or a \
             network, not a disk",
            target.device.filesystem.as_deref().unwrap_or("unknown")
        ));
    }
    if target.len < args.size {
        out.notes.push(format!(
            "working set limited to the target's {} (asked for {})",
            report::size_text(target.len),
            report::size_text(args.size)
        ));
    }
    let interrupted = interrupt::signal().map(interrupt::name);
    if out.results.is_empty() && interrupted.is_none() {
        return Err(nothing_measured(&out));
    }
    let cache = runner.cache.clone();
    let settings = results::Parameters {
        tests: args.tests.iter().map(|t| t.name()).collect(),
        runs: args.runs,
        sweep_rounds: args.runs * scenario::sweep::ROUNDS_PER_RUN,
        warmup_runs: 1,
        size: args.size,
        time_per_run_sec: args.time_per_run,
    };
    let described = results::TargetReport {
        path: target.given.display().to_string(),
        kind: target.name,
        bench_file: target.created.then(|| target.path.display().to_string()),
        working_set_bytes: target.len,
        target_bytes: target.full_len,
        device: target.device.clone(),
        writable: target.writable(),
        served: target.can.served,
        passthrough: target.interface,
        backing: target.backing.clone(),
    };
    Ok(Report::assemble(
        started,
        described,
        settings,
        cache,
        out,
        interrupted,
    ))
}

/// Every test ran and none gave a figure: say why, as one line.
fn nothing_measured(out: &scenario::Outcome) -> BenchError {
    let reasons: Vec<String> = out
        .skipped
        .iter()
        .map(|s| {
            let mode = s.mode.map(|m| format!(" {m}")).unwrap_or_default();
            format!("{}{mode}: {}", s.test, s.reason)
        })
        .collect();
    BenchError::msg(format!("nothing was measured ({})", reasons.join("; ")))
}

/// The `--html` file, opened before the bench; removed again if the
/// bench fails and the file did not exist before.
struct HtmlFile {
    path: std::path::PathBuf,
    file: Option<std::fs::File>,
    existed: bool,
}

impl HtmlFile {
    fn create(path: &std::path::Path) -> Result<HtmlFile, BenchError> {
        let existed = path.exists();
        let file = std::fs::File::create(path)
            .map_err(|e| BenchError::io(format!("creating {}", path.display()), e))?;
        Ok(HtmlFile {
            path: path.to_owned(),
            file: Some(file),
            existed,
        })
    }

    fn write(mut self, page: &str) -> Result<(), BenchError> {
        let mut file = self.file.take().expect("written once");
        file.write_all(page.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| BenchError::io(format!("writing {}", self.path.display()), e))
    }
}

impl Drop for HtmlFile {
    fn drop(&mut self) {
        // Still holding the file means the page was never written.
        if self.file.is_some() && !self.existed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn output(args: &BenchArgs, html: Option<HtmlFile>, report: &Report) -> Result<(), BenchError> {
    if let Some(html) = html {
        html.write(&report::html::Html.export(report)?)?;
    }
    let exporter: &dyn Exporter = match args.format {
        Format::Table => &report::table::Table,
        Format::Json => &report::json::Json,
        Format::Markdown => &report::markdown::Markdown,
    };
    let text = exporter.export(report)?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| BenchError::io("write error", e))
}
