//! Everything ddx writes to stderr goes through one [`Reporter`]: errors,
//! warnings, statistics and the progress line share one lock, so lines from
//! the copy and from the ticker thread never interleave, and a message
//! after a progress line first ends that line (as GNU's `nl_error` does).

use std::fmt::Display;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::diagnostic::{Diagnostic, Events};
use crate::engine::Counters;
use crate::operands::StatusLevel;
use crate::progress::json::{JsonStream, Record};
use crate::progress::live::{Frame, Live};
use crate::progress::rate::{rate, RateWindow};
use crate::progress::stats::{transfer_line, write_records, TimeStyle};
use crate::progress::{InputPosition, RescueStanding};

struct State {
    /// Characters in the current, unfinished progress line (0: none).
    progress_len: usize,
    /// Bytes shown by the last progress line, if any was printed.
    reported_bytes: Option<u64>,
    start: Instant,
    /// The clock has started (the copy is under way): ticks before that
    /// would report a time that later goes back.
    started: bool,
    /// A question is waiting for a person's answer (see `hold_clock`).
    asking: bool,
    /// status=progress on a terminal: the live line, from the first tick.
    live_wanted: bool,
    live: Option<Live>,
    /// --progress-fd: the stream and its number (for messages).
    json: Option<(JsonStream, i32)>,
    /// Bytes the copy is expected to write, when known.
    total: Option<u64>,
    /// Under `--resume`: the bytes of the copy earlier runs dealt with,
    /// counted in the live line and the JSON records (not in GNU's lines,
    /// which say what this run copied).
    resumed: Option<u64>,
    /// With `--decompress` or `--used-only`: the input's position.
    input: Option<Arc<dyn InputPosition>>,
    /// With `--rescue`: its phase and what is bad.
    rescue: Option<Arc<dyn RescueStanding>>,
    window: RateWindow,
    /// SIGINT or SIGTERM that came after the output was committed.
    late_signal: Option<i32>,
    /// The details of the diagnostics said so far (what an end said of
    /// a failure), so that the same failure met again at close is not
    /// said twice.
    details: Vec<String>,
}

/// Why statistics are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moment {
    /// SIGUSR1 or a read error under noerror: the copy goes on.
    Running,
    /// The copy is over.
    Final,
    /// The copy dies of this signal right after.
    Signal(i32),
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
                started: false,
                asking: false,
                live_wanted: false,
                live: None,
                json: None,
                total: None,
                resumed: None,
                input: None,
                rescue: None,
                window: RateWindow::default(),
                late_signal: None,
                details: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while printing leaves the state usable: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Time since the copy started.
    pub fn elapsed_ns(&self) -> u64 {
        elapsed_ns(self.lock().start)
    }

    /// The copy starts now: before the ends are opened (see `copy::run`:
    /// GNU starts its clock after opening them, ddx's covers every wait).
    pub fn start_clock(&self) {
        let mut state = self.lock();
        state.start = Instant::now();
        state.started = true;
        state.asking = false;
    }

    /// The copy waits for a person's answer: no progress is drawn or
    /// written until the clock starts again ([`Reporter::start_clock`]),
    /// and Ctrl-C meanwhile ends ddx without statistics, as a "no" would.
    pub fn hold_clock(&self) {
        let mut state = self.lock();
        state.started = false;
        state.asking = true;
    }

    /// status=progress with stderr on a terminal: draw the live line
    /// from the first tick on, instead of GNU's line.
    pub fn use_live_line(&self) {
        self.lock().live_wanted = true;
    }

    /// --progress-fd: JSON records to `stream` (descriptor `fd_number`).
    pub fn use_json(&self, stream: JsonStream, fd_number: i32) {
        self.lock().json = Some((stream, fd_number));
    }

    /// With `--decompress` or `--used-only`: where the input stands (see
    /// [`InputPosition`]), for the live line and the JSON records.
    pub fn set_input_position(&self, position: Arc<dyn InputPosition>) {
        self.lock().input = Some(position);
    }

    /// With `--rescue`: its phase and bad bytes, for the progress line and
    /// the JSON records.
    pub fn set_rescue(&self, rescue: Arc<dyn RescueStanding>) {
        self.lock().rescue = Some(rescue);
    }

    /// The bytes the copy should write, once the ends are open.
    pub fn set_total(&self, total: Option<u64>) {
        self.lock().total = total;
    }

    /// A resumed copy: `bytes` of its total were dealt with by earlier
    /// runs. The live line and the JSON records count them, so that the
    /// bar goes on from where the last run stopped and ends at 100%.
    pub fn set_resumed(&self, bytes: u64) {
        self.lock().resumed = Some(bytes);
    }

    /// "program: message" on its own line.
    pub fn message(&self, message: impl Display) {
        let mut state = self.lock();
        let line = format!("{}: {message}\n", self.program);
        Self::emit_line(&mut state, line.as_bytes());
    }

    /// Emit whole lines below any progress line: end GNU's line first,
    /// lift the live line out of the way.
    fn emit_line(state: &mut State, line: &[u8]) {
        if state.progress_len > 0 {
            state.progress_len = 0;
            let mut out = Vec::with_capacity(line.len() + 1);
            out.push(b'\n');
            out.extend_from_slice(line);
            emit(&out);
        } else if let Some(live) = &state.live {
            live.suspend(|| emit(line));
        } else {
            emit(line);
        }
    }

    /// SIGUSR1 (or noerror) statistics, per status=; the copy goes on.
    pub fn statistics(&self) {
        let mut state = self.lock();
        self.statistics_locked(&mut state, Moment::Running);
    }

    /// Whether a diagnostic said so far carried `detail`.
    pub fn said_detail(&self, detail: &str) -> bool {
        self.lock().details.iter().any(|d| d == detail)
    }

    /// The final statistics and, with --progress-fd, the last record.
    pub fn finish(&self) {
        let mut state = self.lock();
        self.statistics_locked(&mut state, Moment::Final);
    }

    fn statistics_locked(&self, state: &mut State, moment: Moment) {
        // One snapshot and one clock reading for both the text and the
        // JSON record, so that they agree.
        let snapshot = self.counters.snapshot();
        let elapsed = elapsed_ns(state.start);
        if moment != Moment::Running {
            if let Some(live) = state.live.take() {
                live.clear();
            }
        }
        if self.status != StatusLevel::None {
            let mut out = Vec::with_capacity(160);
            let _ = write_records(&mut out, &snapshot);
            if self.status != StatusLevel::Noxfer {
                out.extend_from_slice(
                    transfer_line(snapshot.bytes_out, elapsed, TimeStyle::Precise).as_bytes(),
                );
                out.push(b'\n');
            }
            Self::emit_line(state, &out);
        }
        if state.json.is_some() {
            let recent = state.window.sample(elapsed, snapshot.bytes_out);
            let input = state.input.as_ref().map(|c| c.position());
            let mut record = Record::new(
                &snapshot,
                elapsed,
                recent,
                state.total,
                input,
                state.resumed,
            );
            with_rescue(&mut record, state);
            record.done = moment != Moment::Running;
            if let Moment::Signal(signal) = moment {
                record.signal = Some(signal_name(signal));
            }
            self.write_json(state, &record);
        }
    }

    fn write_json(&self, state: &mut State, record: &Record) {
        let Some((stream, fd)) = &mut state.json else {
            return;
        };
        let fd = *fd;
        if let Some(errno) = stream.write(record) {
            let line = format!(
                "{}: --progress-fd={fd}: {}; the copy goes on\n",
                self.program,
                crate::sys::errno_text(errno)
            );
            Self::emit_line(state, line.as_bytes());
        }
    }

    /// A second has passed (ticker thread): sample the rate, draw the live
    /// line, write a JSON record.
    pub fn tick(&self) {
        let mut state = self.lock();
        if !state.started || (!state.live_wanted && state.json.is_none()) {
            return;
        }
        let snapshot = self.counters.snapshot();
        let elapsed = elapsed_ns(state.start);
        let recent = state.window.sample(elapsed, snapshot.bytes_out);
        let input = state.input.as_ref().map(|c| c.position());
        if state.live_wanted {
            let frame = Frame {
                bytes: snapshot
                    .bytes_out
                    .saturating_add(state.resumed.unwrap_or_default()),
                elapsed_ns: elapsed,
                recent_rate: recent,
                average_rate: rate(snapshot.bytes_out, elapsed),
                total: state.total,
                input,
            };
            let note = rescue_note(&state);
            let live = state.live.get_or_insert_with(|| Live::new(&frame));
            live.draw(&frame, note.as_deref());
        }
        if state.json.is_some() {
            let mut record = Record::new(
                &snapshot,
                elapsed,
                recent,
                state.total,
                input,
                state.resumed,
            );
            with_rescue(&mut record, &state);
            self.write_json(&mut state, &record);
        }
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
        let mut line = transfer_line(bytes, elapsed_ns(state.start), TimeStyle::WholeSeconds);
        // GNU's line, and after it where a rescue stands.
        if let Some(note) = rescue_note(&state) {
            line.push_str("; ");
            line.push_str(&note);
        }
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

    /// SIGINT or SIGTERM: print the statistics and die of the signal,
    /// holding the lock so that nothing else is printed after them;
    /// unless the output was committed already (an upload's completing
    /// request sent and answered), in which case the copy counts as
    /// completed: the signal is only remembered, for [`late_signal`].
    ///
    /// [`late_signal`]: Reporter::late_signal
    pub fn interrupted(&self, signal: i32) {
        if !crate::sys::signals::dying() {
            self.lock().late_signal.get_or_insert(signal);
            return;
        }
        let mut state = self.lock();
        if state.asking {
            // Off the line the question left open.
            emit(b"\n");
            crate::sys::signals::die_of(signal)
        }
        self.statistics_locked(&mut state, Moment::Signal(signal));
        crate::sys::signals::die_of(signal)
    }

    /// The name of a signal that came once the output was committed, and
    /// so did not interrupt the copy.
    pub fn late_signal(&self) -> Option<&'static str> {
        self.lock().late_signal.map(signal_name)
    }
}

impl Events for Reporter {
    fn diagnostic(&self, diagnostic: Diagnostic) {
        if let Diagnostic::Explained { detail, .. } = &diagnostic {
            self.lock().details.push(detail.clone());
        }
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

/// Where a rescue stands, after the progress line's figures, while a
/// phase runs.
fn rescue_note(state: &State) -> Option<String> {
    match state.rescue.as_ref()?.standing() {
        (Some(phase), bad) => Some(format!("{phase}, {bad} bytes bad")),
        (None, _) => None,
    }
}

/// A rescue's phase (while one runs) and bad bytes in a JSON record.
fn with_rescue(record: &mut Record, state: &State) {
    if let Some(rescue) = &state.rescue {
        let (phase, bad) = rescue.standing();
        record.phase = phase;
        record.bad_bytes = Some(bad);
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
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
