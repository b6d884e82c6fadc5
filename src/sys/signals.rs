//! The signals dd reacts to: SIGUSR1 (print statistics and go on) and
//! SIGINT (print statistics and die of the signal); ddx treats SIGTERM as
//! SIGINT (GNU dd just dies of it, without its statistics).
//!
//! Handlers only write a byte to a pipe (async-signal-safe); a reporter
//! thread waits on the pipes ([`wait`], the one place they are polled) and
//! does the printing, so the copy loop never checks anything. They must be
//! installed first thing in main: SIGUSR1's default action kills the
//! process, and scripts send it right after start.
//!
//! Dying of a signal skips every close: an end whose unfinished work
//! would outlive ddx on another machine (an upload, which a store keeps
//! until it is aborted) registers what must be done first with
//! [`before_dying`], and [`die_of`] runs it.
//!
//! An output whose last step makes it final on another machine (an
//! upload's completing request) cannot be taken back once that step is
//! sent, so a signal must not say the copy was interrupted while the
//! server goes on to complete it. The rule: an end starts that step with
//! [`begin_commit`]; a signal that comes before it ends the copy as
//! interrupted (no commit starts after the signal), and one that comes
//! after waits for the step's outcome ([`dying`]): committed, the copy
//! counts as completed and ddx goes on to its statistics and exit status
//! 0; failed, ddx dies of the signal.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::pipe::{pipe_with, PipeFlags};

/// Read ends of the self-pipes, one per caught signal. A pipe must live
/// as long as the process: a handler writing into a pipe whose read end
/// is closed raises SIGPIPE, which kills ddx.
#[derive(Debug, Default)]
pub struct SignalPipes {
    /// Readable after SIGUSR1 (absent under POSIXLY_CORRECT, as in GNU).
    pub info: Option<OwnedFd>,
    /// Readable after SIGINT (absent if SIGINT was ignored at startup).
    pub interrupt: Option<OwnedFd>,
    /// Readable after SIGTERM (absent if SIGTERM was ignored at startup).
    pub terminate: Option<OwnedFd>,
}

/// Install dd's handlers and restore SIGPIPE's default action (Rust ignores
/// it; dd dies of it when its reader goes away, like any filter).
pub fn install() -> SignalPipes {
    restore_default_sigpipe();
    let mut pipes = SignalPipes::default();
    if std::env::var_os("POSIXLY_CORRECT").is_none() {
        pipes.info = watch(libc::SIGUSR1);
    }
    if !is_ignored(libc::SIGINT) {
        pipes.interrupt = watch(libc::SIGINT);
    }
    if !is_ignored(libc::SIGTERM) {
        pipes.terminate = watch(libc::SIGTERM);
    }
    pipes
}

fn watch(signal: libc::c_int) -> Option<OwnedFd> {
    let (read_end, write_end) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK).ok()?;
    signal_hook::low_level::pipe::register(signal, write_end).ok()?;
    Some(read_end)
}

/// Whether `signal` is ignored (a background job's SIGINT is; GNU leaves
/// it ignored).
fn is_ignored(signal: libc::c_int) -> bool {
    // SAFETY: sigaction with a null new action only reads the current
    // disposition into `old`, a properly sized, zero-initialised struct.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    }
}

fn restore_default_sigpipe() {
    // SAFETY: setting SIGPIPE to SIG_DFL installs no handler code; it only
    // changes the disposition back to the one a C program starts with.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Work to do before dying of a signal, by registration.
type LastWork = Box<dyn FnOnce() + Send>;
static BEFORE_DYING: Mutex<Vec<(u64, LastWork)>> = Mutex::new(Vec::new());
static NEXT_REGISTRATION: AtomicU64 = AtomicU64::new(0);

/// Work registered with [`before_dying`]; dropping it (the end finished
/// or gave up by itself) unregisters the work unrun.
#[derive(Debug)]
pub struct BeforeDying(u64);

/// Have `work` run if ddx dies of a signal while the returned
/// registration lives: on the thread that caught the signal, after the
/// statistics, before the process ends.
pub fn before_dying(work: impl FnOnce() + Send + 'static) -> BeforeDying {
    let id = NEXT_REGISTRATION.fetch_add(1, Ordering::Relaxed);
    BEFORE_DYING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((id, Box::new(work)));
    BeforeDying(id)
}

impl Drop for BeforeDying {
    fn drop(&mut self) {
        BEFORE_DYING
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(id, _)| *id != self.0);
    }
}

/// Where the copy's commit stands (see [`begin_commit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommitState {
    /// Nothing committed: a signal ends the copy.
    Open,
    /// The completing request was sent; its outcome is not known yet.
    Committing,
    /// The output is final: a signal no longer interrupts the copy.
    Committed,
    /// A signal is ending the copy: no commit may start.
    Dying,
}

static COMMIT: Mutex<CommitState> = Mutex::new(CommitState::Open);
static COMMIT_DONE: std::sync::Condvar = std::sync::Condvar::new();

/// A commit under way, from [`begin_commit`]: [`Commit::done`] says how
/// it ended; dropped without it, the commit failed.
#[derive(Debug)]
pub struct Commit(());

/// The output's commit is about to be sent. None: a signal is already
/// ending the copy, and the commit must not start.
pub fn begin_commit() -> Option<Commit> {
    let mut state = COMMIT.lock().unwrap_or_else(PoisonError::into_inner);
    match *state {
        CommitState::Dying => None,
        _ => {
            *state = CommitState::Committing;
            Some(Commit(()))
        }
    }
}

impl Commit {
    /// The commit ended: `committed` if the output is now final.
    pub fn done(self, committed: bool) {
        Self::end(committed);
        std::mem::forget(self);
    }

    fn end(committed: bool) {
        let mut state = COMMIT.lock().unwrap_or_else(PoisonError::into_inner);
        *state = if committed {
            CommitState::Committed
        } else {
            CommitState::Open
        };
        COMMIT_DONE.notify_all();
    }
}

impl Drop for Commit {
    fn drop(&mut self) {
        Self::end(false);
    }
}

/// A signal came: whether it ends the copy. False when the output was
/// committed (or its commit, already sent, succeeds: this waits for its
/// outcome); true otherwise, and then no commit starts from now on.
pub fn dying() -> bool {
    let mut state = COMMIT.lock().unwrap_or_else(PoisonError::into_inner);
    while *state == CommitState::Committing {
        state = COMMIT_DONE
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner);
    }
    if *state == CommitState::Committed {
        return false;
    }
    *state = CommitState::Dying;
    true
}

/// Die of `signal` as if its default action had run (after printing),
/// once the work registered with [`before_dying`] is done.
pub fn die_of(signal: libc::c_int) -> ! {
    let work = std::mem::take(&mut *BEFORE_DYING.lock().unwrap_or_else(PoisonError::into_inner));
    for (_, work) in work {
        work();
    }
    let _ = signal_hook::low_level::emulate_default_handler(signal);
    // Unreachable for SIGINT and SIGTERM (their default terminates), but
    // be sure.
    std::process::exit(128 + signal);
}

/// Drain a signal pipe; returns how many signals arrived (one byte each).
pub fn drain(pipe: &OwnedFd) -> usize {
    let mut buf = [0u8; 64];
    let mut count = 0;
    while let Ok(n) = rustix::io::read(pipe, &mut buf) {
        if n == 0 {
            break;
        }
        count += n;
    }
    count
}

/// Whether a [`wait`] counts SIGUSR1s or leaves them in their pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Info {
    /// Drain the SIGUSR1 pipe and count (the copy's reporter prints the
    /// statistics once per signal).
    Count,
    /// Leave SIGUSR1s alone (nothing to report yet, or nothing to report
    /// at all): a later waiter that counts them still sees them.
    Leave,
}

/// What woke a [`wait`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Woken {
    /// SIGINT or SIGTERM arrived (SIGINT when both did).
    pub interrupted: Option<i32>,
    /// How many SIGUSR1s arrived (always 0 with [`Info::Leave`]).
    pub infos: usize,
    /// `also` is readable, or hung up.
    pub ready: bool,
}

/// Wait until SIGINT or SIGTERM arrives, or a SIGUSR1 (with
/// [`Info::Count`]), or `also` (a stop pipe, a terminal) can be read, or
/// `timeout` passes; the pipes of the signals seen are drained. Returns at
/// once with nothing seen if poll fails (EINTR): callers wait in a loop.
pub fn wait(
    signals: &SignalPipes,
    info: Info,
    also: Option<BorrowedFd<'_>>,
    timeout: Option<Duration>,
) -> Woken {
    let watched: [(Option<&OwnedFd>, Option<i32>); 3] = [
        (signals.interrupt.as_ref(), Some(libc::SIGINT)),
        (signals.terminate.as_ref(), Some(libc::SIGTERM)),
        (signals.info.as_ref().filter(|_| info == Info::Count), None),
    ];
    let watched: Vec<(&OwnedFd, Option<i32>)> = watched
        .into_iter()
        .filter_map(|(pipe, signal)| pipe.map(|p| (p, signal)))
        .collect();
    let mut fds: Vec<PollFd<'_>> = also
        .iter()
        .map(|fd| PollFd::from_borrowed_fd(*fd, PollFlags::IN))
        .chain(watched.iter().map(|(p, _)| PollFd::new(*p, PollFlags::IN)))
        .collect();
    let timeout = timeout.map(|t| Timespec {
        tv_sec: t.as_secs() as _,
        tv_nsec: t.subsec_nanos() as _,
    });
    if poll(&mut fds, timeout.as_ref()).is_err() {
        return Woken::default();
    }
    let ready: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
    drop(fds);
    let (also_ready, pipes_ready) = ready.split_at(usize::from(also.is_some()));
    let mut woken = Woken {
        ready: also_ready.first().copied().unwrap_or(false),
        ..Woken::default()
    };
    for ((pipe, signal), ready) in watched.iter().zip(pipes_ready) {
        if !ready {
            continue;
        }
        let arrived = drain(pipe);
        match signal {
            Some(signal) if arrived > 0 => {
                woken.interrupted = woken.interrupted.or(Some(*signal));
            }
            Some(_) => {}
            None => woken.infos += arrived,
        }
    }
    woken
}

/// Keep SIGUSR1, SIGINT and SIGTERM away from the calling (copy) thread once the
/// reporter thread watches them: a signal landing on the copy thread cuts
/// a read short (a spurious partial record), one landing on the reporter
/// costs nothing.
pub fn block_in_this_thread() {
    let mut set = empty_sigset();
    // SAFETY: an initialised sigset, and pthread_sigmask only changes the
    // calling thread's mask.
    unsafe {
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// From here on SIGINT and SIGTERM end ddx by their default action, in
/// any thread. For the work after the statistics (reading the output back
/// for `--verify`, which can take as long as the copy did), when no
/// reporter is left to read the pipes: until now the copy thread blocks
/// them, and a Ctrl-C would wait for the verification to end by itself.
/// A signal that arrived in between is delivered at once. Signals that
/// were ignored at startup stay ignored.
pub fn default_from_now_on() {
    let mut set = empty_sigset();
    for signal in [libc::SIGINT, libc::SIGTERM] {
        if is_ignored(signal) {
            continue;
        }
        // SAFETY: SIG_DFL installs no handler code; the sigset was
        // initialised by sigemptyset, and pthread_sigmask only changes
        // the calling thread's mask.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::sigaddset(&mut set, signal);
        }
    }
    // SAFETY: as above: an initialised sigset, this thread's mask only.
    unsafe {
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// For a thread that talks to servers (an object end's runtime): dd's
/// signals are blocked as [`block_in_this_thread`] blocks them, and so is
/// SIGPIPE. ddx keeps SIGPIPE's default action for GNU's sake (dd dies of
/// it when the reader of its output goes away), but a peer that closes a
/// connection is a failure to report, not a reason to die: Rust's socket
/// `write` passes MSG_NOSIGNAL, while `writev`, which HTTP clients use for
/// a request's head and body, cannot, and a server that drops a
/// connection mid-upload (its disk full) killed ddx silently. A SIGPIPE
/// raised by a write is sent to the thread that wrote; blocked there, it
/// stays pending on that thread, which never unblocks it, and the write
/// fails with EPIPE instead.
pub fn block_in_network_thread() {
    block_in_this_thread();
    let mut set = empty_sigset();
    // SAFETY: an initialised sigset, and pthread_sigmask only changes the
    // calling thread's mask.
    unsafe {
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// An empty signal set.
fn empty_sigset() -> libc::sigset_t {
    // SAFETY: a zeroed sigset_t is valid storage, and sigemptyset
    // initialises it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        set
    }
}
