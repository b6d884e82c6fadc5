//! `ddx bench TARGET`: the honest disk measurement the seeds do by hand
//! with dd, in one command. Caches are bypassed or named, every figure is
//! the median of several runs with a warm-up thrown away, block devices are
//! only read unless `--destructive`, and the result is a table, JSON,
//! Markdown or an HTML page with charts.
//!
//! Layout: `args` (options), `target` (what may be touched; the copy's
//! wrong-device guard decides for `--destructive`), `measure` (repetition,
//! timing, cache dropping), `scenario` (the tests), `stats` and `recommend`
//! (pure figures), `report` (the outputs).

pub mod args;
pub mod measure;
pub mod progress;
/// The block-size rule lives with the engine (`bs=auto` uses it too); it is
/// re-exported here, where the report applies it.
pub use crate::stats::recommend;
pub mod report;
pub mod scenario;
pub mod stats;
pub mod target;

use std::ffi::OsString;
use std::io::Write;
use std::time::Duration;

use rustix::io::Errno;

use crate::sys::signals::SignalPipes;
use args::{BenchArgs, TestName};
use report::Report;

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

/// Run `ddx bench` with the words after "bench"; returns the exit status.
pub fn run(program: &str, words: &[OsString], signals: SignalPipes) -> i32 {
    let args = match BenchArgs::parse_from_words(program, words) {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_FAILURE } else { 0 };
        }
    };
    watch_signals(signals);
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
    match outcome.and_then(|report| output(&args, html, &report)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{program} bench: {e}");
            EXIT_FAILURE
        }
    }
}

/// On SIGINT or SIGTERM: remove ddx's temporary file, then die of the
/// signal as if it had not been caught.
fn watch_signals(mut signals: SignalPipes) {
    let pipes: Vec<(std::os::fd::OwnedFd, i32)> = [
        signals.interrupt.take().map(|fd| (fd, libc::SIGINT)),
        signals.terminate.take().map(|fd| (fd, libc::SIGTERM)),
    ]
    .into_iter()
    .flatten()
    .collect();
    if pipes.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("ddx-bench-signals".to_owned())
        .spawn(move || loop {
            // Held, not read: a handler writing into a pipe whose reader
            // is gone would raise SIGPIPE (SIGUSR1 during a bench is
            // ignored).
            let _held = &signals;
            use rustix::event::{poll, PollFd, PollFlags};
            let mut fds: Vec<PollFd<'_>> = pipes
                .iter()
                .map(|(fd, _)| PollFd::new(fd, PollFlags::IN))
                .collect();
            if poll(&mut fds, None).is_err() {
                continue;
            }
            let ready: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
            for ((fd, signal), ready) in pipes.iter().zip(ready) {
                if ready && crate::sys::signals::drain(fd) > 0 {
                    progress::Status::for_stderr().clear();
                    target::remove_temp_then(|| crate::sys::signals::die_of(*signal));
                }
            }
        });
    if spawned.is_err() {
        eprintln!("ddx bench: warning: no signal watcher; an interrupted run may leave its file");
    }
}

fn bench(args: &BenchArgs, status: progress::Status) -> Result<Report, BenchError> {
    if !(args.time_per_run > 0.0 && args.time_per_run.is_finite()) {
        return Err(BenchError::msg(
            "--time-per-run must be a positive number of seconds",
        ));
    }
    let started = std::time::SystemTime::now();
    let target = target::Target::open(&args.target, args.size, args.destructive)?;
    if target.created {
        scenario::fill(&target, &status)?;
    }
    let mut runner = measure::Runner::new(&target, args.runs, status);
    let mut out = scenario::Outcome::default();
    let time_per_run = Duration::from_secs_f64(args.time_per_run);
    for &test in &args.tests {
        match test {
            TestName::SeqRead => scenario::seq::read(&mut runner, &mut out)?,
            TestName::SeqWrite => scenario::seq::write(&mut runner, &mut out)?,
            TestName::BsSweep => scenario::sweep::run(&mut runner, time_per_run, &mut out)?,
            TestName::Latency => {
                let bs = args.latency_bs.unwrap_or_else(|| target.direct_align());
                scenario::latency::run(&mut runner, args.latency_count, bs, &mut out)?
            }
            TestName::QdSweep => scenario::qd::run(&mut runner, time_per_run, &mut out)?,
            TestName::Zones => scenario::zones::run(&mut runner, args.zones, &mut out)?,
        }
    }
    if target.device.disk.is_none() && target.kind != target::Kind::BlockDevice {
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
    let cache = runner.cache.clone();
    Ok(report::build(args, &target, started, cache, out))
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
        html.write(&report::html::render(report))?;
    }
    let text = if args.json {
        let mut json = serde_json::to_string_pretty(report)
            .map_err(|e| BenchError::msg(format!("encoding JSON: {e}")))?;
        json.push('\n');
        json
    } else if args.markdown {
        report::markdown::render(report)
    } else {
        report::table::render(report)
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| BenchError::io("write error", e))
}
