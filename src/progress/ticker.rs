//! The reporter thread: wakes when a signal arrives and prints from the
//! shared counters, and once a second ticks: under status=progress without
//! a terminal it raises the flag that makes the copy loop ask for GNU's
//! progress line (GNU prints it between records); the live terminal line
//! and the JSON records it has the reporter draw itself. The copy loop
//! never reads the clock or looks for signals.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::pipe::{pipe_with, PipeFlags};

use crate::progress::reporter::Reporter;
use crate::sys::signals::{wait, Info, SignalPipes};

pub struct Ticker {
    stop: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Start watching signals, and ticking once a second if `ticking`;
    /// `gnu_progress` makes each tick ask the copy loop for GNU's line.
    /// From then on the calling thread no longer receives those signals.
    pub fn start(
        reporter: Arc<Reporter>,
        signals: SignalPipes,
        ticking: bool,
        gnu_progress: bool,
    ) -> Ticker {
        let Ok((stop_read, stop_write)) = pipe_with(PipeFlags::CLOEXEC) else {
            return Ticker {
                stop: None,
                thread: None,
            };
        };
        // The thread takes its private copy of the descriptor table (see
        // `sys::threads`) before this returns: a descriptor the caller
        // opens later must not be copied into it, where it would stay open
        // after the caller closed it (a child's output pipe that never
        // ends, a file never released).
        let (detached_tx, detached_rx) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("ddx-reporter".into())
            .stack_size(128 * 1024)
            .spawn(move || {
                crate::sys::threads::detach_fd_table();
                let _ = detached_tx.send(());
                run(&reporter, &signals, &stop_read, ticking, gnu_progress)
            })
            .ok();
        if thread.is_some() {
            let _ = detached_rx.recv();
            crate::sys::signals::block_in_this_thread();
        }
        Ticker {
            stop: Some(stop_write),
            thread,
        }
    }

    /// Stop the thread before the final statistics are printed.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = rustix::io::write(&stop, b"x");
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run(
    reporter: &Reporter,
    signals: &SignalPipes,
    stop: &OwnedFd,
    progress: bool,
    gnu_progress: bool,
) {
    let tick = Duration::from_secs(1);
    let mut next_tick = Instant::now() + tick;
    loop {
        let timeout = progress.then(|| next_tick.saturating_duration_since(Instant::now()));
        let woken = wait(signals, Info::Count, Some(stop.as_fd()), timeout);
        let (interrupted, infos, stopped) = (woken.interrupted, woken.infos, woken.ready);
        if let Some(signal) = interrupted {
            reporter.interrupted(signal);
        }
        for _ in 0..infos {
            reporter.statistics();
        }
        if stopped {
            return;
        }
        if progress && Instant::now() >= next_tick {
            if gnu_progress {
                reporter.request_progress();
            }
            reporter.tick();
            next_tick += tick;
        }
    }
}
