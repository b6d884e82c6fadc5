//! Running one figure: a warm-up pass that is thrown away, then R measured
//! runs, each after the target's cached pages were dropped, each timed
//! with its CPU cost. The scenarios say what one pass does; this module
//! makes every scenario repeat, clean up and time the same way.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustix::fs::OFlags;

use super::progress::Status;
use super::target::Target;
use super::BenchError;
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

/// How caches were dropped between runs, for the report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CacheDrop {
    pub method: String,
    /// Every drop succeeded.
    pub dropped: bool,
    pub note: Option<String>,
}

#[derive(Debug)]
pub struct Runner<'a> {
    pub target: &'a Target,
    pub runs: u32,
    pub status: Status,
    pub cache: CacheDrop,
}

impl<'a> Runner<'a> {
    pub fn new(target: &'a Target, runs: u32, status: Status) -> Runner<'a> {
        Runner {
            target,
            runs,
            status,
            cache: CacheDrop {
                method: "fdatasync + posix_fadvise(DONTNEED) on the target before every run \
                         (no root needed; O_DIRECT tests bypass the cache anyway)"
                    .to_owned(),
                dropped: true,
                note: None,
            },
        }
    }

    /// The warm-up and the measured runs of one figure; `drop_cache`
    /// empties the target's page cache before each pass (not wanted when
    /// measuring the cache itself).
    pub fn repeat(
        &mut self,
        label: &str,
        drop_cache: bool,
        mut pass: impl FnMut(Pass) -> Result<Sample, BenchError>,
    ) -> Result<Vec<Sample>, BenchError> {
        let mut samples = Vec::with_capacity(self.runs as usize);
        for n in 0..=self.runs {
            let which = if n == 0 {
                Pass::WarmUp
            } else {
                Pass::Measured(n)
            };
            self.status.show(&match which {
                Pass::WarmUp => format!("{label}: warm-up"),
                Pass::Measured(n) => format!("{label}: run {n}/{}", self.runs),
            });
            if drop_cache {
                self.drop_cache();
            }
            let sample = pass(which)?;
            if n > 0 {
                samples.push(sample);
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
    /// the measured samples per point.
    pub fn rounds(
        &mut self,
        label: impl Fn(usize) -> String,
        points: usize,
        runs: u32,
        mut pass: impl FnMut(Pass, usize) -> Result<Sample, BenchError>,
    ) -> Result<Vec<Vec<Sample>>, BenchError> {
        let mut samples = vec![Vec::with_capacity(runs as usize); points];
        for n in 0..=runs {
            for (point, samples) in samples.iter_mut().enumerate() {
                let which = if n == 0 {
                    Pass::WarmUp
                } else {
                    Pass::Measured(n)
                };
                self.status.show(&match which {
                    Pass::WarmUp => format!("{}: warm-up", label(point)),
                    Pass::Measured(n) => format!("{}: run {n}/{runs}", label(point)),
                });
                let sample = pass(which, point)?;
                if n > 0 {
                    samples.push(sample);
                }
            }
        }
        Ok(samples)
    }

    /// Write back and drop the target's cached pages; a failure is noted
    /// in the report rather than ending the bench.
    pub fn drop_cache(&mut self) {
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
