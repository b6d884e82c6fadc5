//! Ctrl-C (SIGINT) and SIGTERM during `ddx bench`: the first one stops the
//! measuring at the next request, and the bench then reports the runs it
//! completed (table, JSON, Markdown, HTML, whichever were asked for),
//! removes its temporary file and dies of the signal, as an interrupted
//! copy prints its statistics and dies of it (the shell sees 130 for
//! SIGINT). A second one does not wait: the file is removed and ddx dies
//! at once, for a run stuck in a long sync.
//!
//! A watcher thread waits on the signal pipes (`sys::signals::wait`) and
//! raises a flag; the measuring loops look at the flag once per request
//! ([`check`]), a relaxed atomic load beside a disk request.

use std::sync::atomic::{AtomicI32, Ordering};

use super::BenchError;
use crate::sys::signals::{self, Info, SignalPipes};

/// The signal that interrupted the bench, 0 while none did.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Start the watcher. `on_second` runs for a second signal before ddx
/// dies of it (clearing the status line, removing the temporary file).
pub fn watch(signals: SignalPipes, on_second: fn(i32) -> !) {
    if signals.interrupt.is_none() && signals.terminate.is_none() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("ddx-bench-signals".to_owned())
        .spawn(move || loop {
            // SIGUSR1 is left in its pipe: the bench has no statistics to
            // print for it, and the pipe must stay open (a handler writing
            // into a closed pipe would raise SIGPIPE).
            let woken = signals::wait(&signals, Info::Leave, None, None);
            if let Some(signal) = woken.interrupted {
                if SIGNAL
                    .compare_exchange(0, signal, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    on_second(signal);
                }
            }
        });
    if spawned.is_err() {
        eprintln!("ddx bench: warning: no signal watcher; an interrupted run may leave its file");
    }
}

/// The signal that interrupted the bench, if one did.
pub fn signal() -> Option<i32> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        signal => Some(signal),
    }
}

/// Whether the bench was interrupted.
pub fn pending() -> bool {
    signal().is_some()
}

/// [`BenchError::Interrupted`] once the bench was interrupted.
pub fn check() -> Result<(), BenchError> {
    match pending() {
        true => Err(BenchError::Interrupted),
        false => Ok(()),
    }
}

/// The signal's name for the report ("SIGINT").
pub fn name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}
