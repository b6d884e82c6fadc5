//! The signals dd reacts to: SIGUSR1 (print statistics and go on) and
//! SIGINT (print statistics and die of the signal); ddx treats SIGTERM as
//! SIGINT (GNU dd just dies of it, without its statistics).
//!
//! Handlers only write a byte to a pipe (async-signal-safe); a reporter
//! thread polls the pipes and does the printing, so the copy loop never
//! checks anything. They must be installed first thing in main: SIGUSR1's
//! default action kills the process, and scripts send it right after start.

use std::os::fd::OwnedFd;

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

/// Die of `signal` as if its default action had run (after printing).
pub fn die_of(signal: libc::c_int) -> ! {
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
