//! Everything ddx writes to stderr goes through one [`Reporter`]: errors,
//! warnings, statistics and the progress line share one lock, so lines from
//! the copy and from the ticker thread never interleave, and a message
//! after a progress line first ends that line (as GNU's `nl_error` does).

use std::fmt::Display;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::engine::{Counters, Diagnostic, Events};
use crate::operands::StatusLevel;
use crate::progress::stats::{transfer_line, write_records, TimeStyle};

struct State {
    /// Characters in the current, unfinished progress line (0: none).
    progress_len: usize,
    /// Bytes shown by the last progress line, if any was printed.
    reported_bytes: Option<u64>,
    start: Instant,
}

pub struct Reporter {
    program: String,
    status: StatusLevel,
    counters: Arc<Counters>,
    state: Mutex<State>,
}

impl Reporter {
    pub fn new(program: &str, status: StatusLevel, counters: Arc<Counters>) -> Self {
        Reporter {
            program: program.to_owned(),
            status,
            counters,
            state: Mutex::new(State {
                progress_len: 0,
                reported_bytes: None,
                start: Instant::now(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while printing leaves the state usable: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The copy starts now (GNU starts the clock after opening the files).
    pub fn start_clock(&self) {
        self.lock().start = Instant::now();
    }

    /// "program: message" on its own line.
    pub fn message(&self, message: impl Display) {
        let mut state = self.lock();
        let mut line = String::new();
        if state.progress_len > 0 {
            line.push('\n');
            state.progress_len = 0;
        }
        line.push_str(&format!("{}: {message}\n", self.program));
        emit(line.as_bytes());
    }

    /// The final (or SIGUSR1, or noerror) statistics, per status=.
    pub fn statistics(&self) {
        let mut state = self.lock();
        self.statistics_locked(&mut state);
    }

    fn statistics_locked(&self, state: &mut State) {
        if self.status == StatusLevel::None {
            return;
        }
        let mut out = Vec::with_capacity(160);
        if state.progress_len > 0 {
            out.push(b'\n');
            state.progress_len = 0;
        }
        let snapshot = self.counters.snapshot();
        let _ = write_records(&mut out, &snapshot);
        if self.status != StatusLevel::Noxfer {
            let elapsed = elapsed_ns(state.start);
            out.extend_from_slice(
                transfer_line(snapshot.bytes_out, elapsed, TimeStyle::Precise).as_bytes(),
            );
            out.push(b'\n');
        }
        emit(&out);
    }

    /// A second has passed: let the copy loop print the next progress line.
    pub fn request_progress(&self) {
        self.counters
            .progress_due
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// status=progress: rewrite the progress line in place.
    pub fn progress(&self) {
        let mut state = self.lock();
        let bytes = self.counters.snapshot().bytes_out;
        let line = transfer_line(bytes, elapsed_ns(state.start), TimeStyle::WholeSeconds);
        let mut out = String::with_capacity(line.len() + 16);
        out.push('\r');
        out.push_str(&line);
        // Erase what is left of a longer previous line.
        for _ in line.len()..state.progress_len {
            out.push(' ');
        }
        state.progress_len = line.len();
        state.reported_bytes = Some(bytes);
        emit(out.as_bytes());
    }

    /// SIGINT: print the statistics and die of the signal, holding the lock
    /// so that nothing else is printed after them.
    pub fn interrupted(&self, signal: i32) -> ! {
        let mut state = self.lock();
        self.statistics_locked(&mut state);
        crate::sys::signals::die_of(signal)
    }
}

impl Events for Reporter {
    fn diagnostic(&self, diagnostic: Diagnostic) {
        self.message(diagnostic);
    }

    fn statistics(&self) {
        Reporter::statistics(self);
    }

    fn progress(&self) {
        Reporter::progress(self);
    }

    fn before_sync(&self) {
        let state = self.lock();
        let bytes = self.counters.snapshot().bytes_out;
        if self.status == StatusLevel::Progress && state.reported_bytes.is_some_and(|r| r < bytes) {
            let line = transfer_line(bytes, elapsed_ns(state.start), TimeStyle::Precise);
            emit(format!("{line}\n").as_bytes());
        }
    }
}

fn elapsed_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Set when a write to stderr failed: like GNU dd, ddx then exits 1 even
/// if the copy succeeded (its statistics were lost).
static STDERR_FAILED: AtomicBool = AtomicBool::new(false);

/// One write per line or group of lines, so lines never interleave.
///
/// Straight to fd 2: std's stderr handle reports success on EBADF, which
/// would hide a closed stderr.
pub fn emit(mut bytes: &[u8]) {
    let stderr = std::io::stderr();
    let fd = stderr.as_fd();
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => {
                STDERR_FAILED.store(true, Ordering::Relaxed);
                return;
            }
        }
    }
}

/// Whether any message or statistics could not be written.
pub fn stderr_failed() -> bool {
    STDERR_FAILED.load(Ordering::Relaxed)
}
