//! The reporter thread: wakes when a signal arrives and prints from the
//! shared counters, and once a second ticks: under status=progress without
//! a terminal it raises the flag that makes the copy loop ask for GNU's
//! progress line (GNU prints it between records); the live terminal line
//! and the JSON records it has the reporter draw itself. The copy loop
//! never reads the clock or looks for signals.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::pipe::{pipe_with, PipeFlags};

use crate::progress::reporter::Reporter;
use crate::sys::signals::{drain, SignalPipes};

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
        let thread = std::thread::Builder::new()
            .name("ddx-reporter".into())
            .stack_size(128 * 1024)
            .spawn(move || run(&reporter, &signals, &stop_read, ticking, gnu_progress))
            .ok();
        if thread.is_some() {
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
    crate::sys::threads::detach_fd_table();
    let tick = Duration::from_secs(1);
    let mut next_tick = Instant::now() + tick;
    loop {
        let timeout = progress.then(|| {
            let wait = next_tick.saturating_duration_since(Instant::now());
            Timespec {
                tv_sec: wait.as_secs() as _,
                tv_nsec: wait.subsec_nanos() as _,
            }
        });
        let (interrupted, infos, stopped) = wait(stop, signals, timeout.as_ref());
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

/// Wait for the stop pipe, a signal or the timeout; returns (SIGINT or
/// SIGTERM seen, number of SIGUSR1s, stop requested).
fn wait(
    stop: &OwnedFd,
    signals: &SignalPipes,
    timeout: Option<&Timespec>,
) -> (Option<i32>, usize, bool) {
    let mut fds = vec![PollFd::new(stop, PollFlags::IN)];
    let interrupt_index = signals.interrupt.as_ref().map(|p| {
        fds.push(PollFd::new(p, PollFlags::IN));
        fds.len() - 1
    });
    let info_index = signals.info.as_ref().map(|p| {
        fds.push(PollFd::new(p, PollFlags::IN));
        fds.len() - 1
    });
    let terminate_index = signals.terminate.as_ref().map(|p| {
        fds.push(PollFd::new(p, PollFlags::IN));
        fds.len() - 1
    });
    if poll(&mut fds, timeout).is_err() {
        return (None, 0, false);
    }
    let ready = |i: usize| !fds[i].revents().is_empty();
    let stopped = ready(0);
    let interrupt_ready = interrupt_index.is_some_and(ready);
    let info_ready = info_index.is_some_and(ready);
    let terminate_ready = terminate_index.is_some_and(ready);
    drop(fds);
    let interrupted = if interrupt_ready && signals.interrupt.as_ref().is_some_and(|p| drain(p) > 0)
    {
        Some(libc::SIGINT)
    } else if terminate_ready && signals.terminate.as_ref().is_some_and(|p| drain(p) > 0) {
        Some(libc::SIGTERM)
    } else {
        None
    };
    let infos = if info_ready {
        signals.info.as_ref().map_or(0, drain)
    } else {
        0
    };
    (interrupted, infos, stopped)
}
