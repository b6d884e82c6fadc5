//! Running one figure: a warm-up pass that is thrown away, then R measured
//! runs, each after the target's cached pages were dropped, each timed
//! with its CPU cost. The scenarios say what one pass does; this module
//! makes every scenario repeat, clean up and time the same way, and stop
//! the same way when the bench is interrupted: the runs completed so far
//! are returned, and no further pass starts.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustix::fs::OFlags;

use super::progress::Status;
use super::target::Target;
use super::{interrupt, BenchError};
use crate::sys::file;
use crate::sys::usage::cpu_time;

/// What one pass did and what it cost.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub bytes: u64,
    pub ios: u64,
    pub elapsed: Duration,
    pub cpu: Duration,
    /// Per-request latencies where the scenario measures them.
    pub latencies_ns: Vec<u64>,
}

/// Wall and CPU clocks started together.
#[derive(Debug, Clone, Copy)]
pub struct Stopwatch {
    wall: Instant,
    cpu: Duration,
}

impl Stopwatch {
    pub fn start() -> Stopwatch {
        Stopwatch {
            cpu: cpu_time(),
            wall: Instant::now(),
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.wall.elapsed()
    }

    pub fn stop(self, bytes: u64, ios: u64) -> Sample {
        let elapsed = self.wall.elapsed();
        Sample {
            bytes,
            ios,
            elapsed,
            cpu: cpu_time().saturating_sub(self.cpu),
            latencies_ns: Vec::new(),
        }
    }
}

/// Whether a pass is the warm-up (scenarios may make it shorter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    WarmUp,
    Measured(u32),
}

impl Pass {
    /// How long a pass bounded by time runs: a quarter of a run for the
    /// warm-up, which only wakes the device.
    pub fn time(self, per_run: Duration) -> Duration {
        match self {
            Pass::WarmUp => per_run / 4,
            Pass::Measured(_) => per_run,
        }
    }
}

/// How caches were dropped between runs, for the report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CacheDrop {
    pub method: String,
    /// Every drop succeeded.
    pub dropped: bool,
    pub note: Option<String>,
}

/// The warm-up, then `runs` measured passes.
fn passes(runs: u32) -> impl Iterator<Item = Pass> {
    std::iter::once(Pass::WarmUp).chain((1..=runs).map(Pass::Measured))
}

/// What to do with a pass's result.
enum Flow {
    Keep(Sample),
    /// The warm-up: thrown away.
    Next,
    /// Interrupted: no more passes.
    Stop,
}

fn measured(which: Pass, result: Result<Sample, BenchError>) -> Result<Flow, BenchError> {
    match result {
        // A pass cut short measured part of a run: not a figure.
        Err(BenchError::Interrupted) => Ok(Flow::Stop),
        Err(e) => Err(e),
        Ok(_) if which == Pass::WarmUp => Ok(Flow::Next),
        Ok(sample) => Ok(Flow::Keep(sample)),
    }
}

#[derive(Debug)]
pub struct Runner<'a> {
    pub target: &'a Target,
    pub runs: u32,
    /// The time limit of a run the scenario bounds by time (a bs-sweep
    /// size, a queue depth).
    pub time_per_run: Duration,
    pub status: Status,
    pub cache: CacheDrop,
}

impl<'a> Runner<'a> {
    pub fn new(
        target: &'a Target,
        runs: u32,
        time_per_run: Duration,
        status: Status,
    ) -> Runner<'a> {
        let method = if target.nbd.is_some() {
            "none: an NBD export is read from its server, where ddx keeps no cache (the \
             server's own caches are its own)"
        } else {
            "fdatasync + posix_fadvise(DONTNEED) on the target before every run \
             (no root needed; O_DIRECT tests bypass the cache anyway)"
        };
        Runner {
            target,
            runs,
            time_per_run,
            status,
            cache: CacheDrop {
                method: method.to_owned(),
                dropped: true,
                note: None,
            },
        }
    }

    /// The warm-up and the measured runs of one figure; `drop_cache`
    /// empties the target's page cache before each pass (not wanted when
    /// measuring the cache itself). Once the bench is interrupted, the
    /// runs measured so far (perhaps none).
    pub fn repeat(
        &mut self,
        label: &str,
        drop_cache: bool,
        mut pass: impl FnMut(Pass) -> Result<Sample, BenchError>,
    ) -> Result<Vec<Sample>, BenchError> {
        let mut samples = Vec::with_capacity(self.runs as usize);
        for which in passes(self.runs) {
            if interrupt::pending() {
                break;
            }
            self.show(label, which, self.runs);
            if drop_cache {
                self.drop_cache();
            }
            match measured(which, pass(which))? {
                Flow::Keep(sample) => samples.push(sample),
                Flow::Next => {}
                Flow::Stop => break,
            }
        }
        Ok(samples)
    }

    /// Like [`Runner::repeat`] for several figures measured in rounds:
    /// every round (the warm-up, then each run) passes over all `points`
    /// in turn, so a disturbance that lasts a second (a cron job, another
    /// process's flush) lands in one run of many figures, where the median
    /// discards it, instead of in every run of one figure, where it would
    /// bend the curve. `runs` measured rounds follow the warm-up. Returns
    /// the measured samples per point (after an interruption, the rounds
    /// completed, the last perhaps for some points only).
    pub fn rounds(
        &mut self,
        label: impl Fn(usize) -> String,
        points: usize,
        runs: u32,
        mut pass: impl FnMut(Pass, usize) -> Result<Sample, BenchError>,
    ) -> Result<Vec<Vec<Sample>>, BenchError> {
        let mut samples = vec![Vec::with_capacity(runs as usize); points];
        'rounds: for which in passes(runs) {
            for (point, samples) in samples.iter_mut().enumerate() {
                if interrupt::pending() {
                    break 'rounds;
                }
                self.show(&label(point), which, runs);
                match measured(which, pass(which, point))? {
                    Flow::Keep(sample) => samples.push(sample),
                    Flow::Next => {}
                    Flow::Stop => break 'rounds,
                }
            }
        }
        Ok(samples)
    }

    fn show(&self, label: &str, which: Pass, runs: u32) {
        self.status.show(&match which {
            Pass::WarmUp => format!("{label}: warm-up"),
            Pass::Measured(n) => format!("{label}: run {n}/{runs}"),
        });
    }

    /// Write back and drop the target's cached pages; a failure is noted
    /// in the report rather than ending the bench.
    pub fn drop_cache(&mut self) {
        if self.target.nbd.is_some() {
            return;
        }
        let result = self
            .target
            .open_read(OFlags::empty())
            .map_err(|e| e.to_string())
            .and_then(|fd| {
                // Dirty pages survive DONTNEED: write them back first
                // (only where the bench writes: a read-only device gets
                // no flush either).
                if self.target.writable() {
                    let _ = file::fdatasync(fd.as_fd());
                }
                file::drop_cache(fd.as_fd(), 0, 0)
                    .map_err(|e| format!("posix_fadvise: {}", crate::sys::errno_text(e)))
            });
        if let Err(why) = result {
            if self.cache.dropped {
                self.cache.dropped = false;
                self.cache.note = Some(format!(
                    "caches could not be dropped ({why}): buffered figures may include the page cache"
                ));
            }
        }
    }
}
