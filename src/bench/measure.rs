//! Running one figure: a warm-up pass that is thrown away, then R measured
//! runs, each after the target's cached pages were dropped, each timed
//! with its CPU cost. The scenarios say what one pass does; this module
//! makes every scenario repeat, clean up and time the same way, and stop
//! the same way when the bench is interrupted: the runs completed so far
//! are returned, and no further pass starts.
//!
//! What the runner does to the target between passes goes through
//! [`Device`], which the real target implements ([`TargetDevice`]: its
//! page cache written back and dropped). The unit tests below put a fake
//! device in its place, whose passes take the times they are given, to
//! test the warm-up, the runs kept, the cache drops and what the report
//! makes of the samples (medians, outliers) deterministically, as
//! hyperfine tests its statistics through a mock executor. What a real
//! device's speed is stays measured on the device.

use std::fmt;
use std::time::{Duration, Instant};

use super::progress::Status;
use super::scenario::Op;
use super::target::Target;
use super::{interrupt, BenchError};
use crate::operands::IoFlags;
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

/// What the runner does to the measured device between passes.
pub trait Device: fmt::Debug {
    /// How its cached pages are dropped before a pass, for the report.
    fn cache_method(&self) -> &'static str;

    /// Write back and drop its cached pages; Err: why they could not be.
    fn drop_cache(&mut self) -> Result<(), String>;
}

/// The bench's TARGET as the device measured.
#[derive(Debug)]
pub struct TargetDevice<'a>(pub &'a Target);

impl Device for TargetDevice<'_> {
    fn cache_method(&self) -> &'static str {
        let can = self.0.can;
        if can.served {
            "none: an NBD export is read from its server, where ddx keeps no cache (the \
             server's own caches are its own)"
        } else if !can.local_storage {
            "none: a generic node's commands go to the disk past the page cache"
        } else if let Some(words) = self.0.backing.cache_words() {
            words
        } else {
            "fdatasync + posix_fadvise(DONTNEED) on the target before every run \
             (no root needed; O_DIRECT tests bypass the cache anyway)"
        }
    }

    fn drop_cache(&mut self) -> Result<(), String> {
        let target = self.0;
        // Only a descriptor's storage has pages of ddx's in the cache.
        if !target.can.local_storage {
            return Ok(());
        }
        let mut end = match target.end(Op::Read, IoFlags::empty(), 1) {
            Ok(Some(end)) => end,
            Ok(None) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        };
        // Dirty pages survive DONTNEED: write them back first (only
        // where the bench writes: a read-only device gets no flush
        // either).
        if target.writable() {
            let _ = end.sync(true);
        }
        let dropped = match end.fd() {
            Some(fd) => file::drop_cache(fd, 0, 0)
                .map_err(|e| format!("posix_fadvise: {}", crate::sys::errno_text(e))),
            None => Ok(()),
        };
        let _ = end.close();
        dropped
    }
}

#[derive(Debug)]
pub struct Runner<'a> {
    pub target: &'a Target,
    /// What is done to the target between passes.
    device: Box<dyn Device + 'a>,
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
        Runner::with_device(
            target,
            Box::new(TargetDevice(target)),
            runs,
            time_per_run,
            status,
        )
    }

    /// A runner whose passes run against `device` between them.
    pub fn with_device(
        target: &'a Target,
        device: Box<dyn Device + 'a>,
        runs: u32,
        time_per_run: Duration,
        status: Status,
    ) -> Runner<'a> {
        let method = device.cache_method();
        Runner {
            target,
            device,
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
        if let Err(why) = self.device.drop_cache() {
            if self.cache.dropped {
                self.cache.dropped = false;
                self.cache.note = Some(format!(
                    "caches could not be dropped ({why}): buffered figures may include the page cache"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::rc::Rc;

    use super::*;
    use crate::bench::results::{Figure, TestResult};

    /// What the fake device was asked to do, in order.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Step {
        DropCache,
        Pass(Pass),
    }

    /// A device whose passes take the times in its script (the pass's
    /// outcome, bytes moved in that time), and which records every cache
    /// drop and pass it was asked for.
    #[derive(Debug, Default)]
    struct Fake {
        script: VecDeque<Result<Duration, BenchError>>,
        steps: Vec<Step>,
        /// Cache drops fail with this.
        refuse: Option<String>,
    }

    /// The fake, shared between the runner (cache drops) and the passes.
    #[derive(Debug, Clone, Default)]
    struct FakeDevice(Rc<RefCell<Fake>>);

    /// Every pass moves this much.
    const BYTES: u64 = 64 << 20;

    impl FakeDevice {
        fn scripted(times_ms: &[u64]) -> FakeDevice {
            let fake = FakeDevice::default();
            fake.0.borrow_mut().script = times_ms
                .iter()
                .map(|&ms| Ok(Duration::from_millis(ms)))
                .collect();
            fake
        }

        fn pass(&self, which: Pass) -> Result<Sample, BenchError> {
            let mut fake = self.0.borrow_mut();
            fake.steps.push(Step::Pass(which));
            let elapsed = fake.script.pop_front().expect("a pass the script has")?;
            Ok(Sample {
                bytes: BYTES,
                ios: 64,
                elapsed,
                cpu: elapsed / 10,
                latencies_ns: Vec::new(),
            })
        }

        fn steps(&self) -> Vec<Step> {
            self.0.borrow().steps.clone()
        }
    }

    impl Device for FakeDevice {
        fn cache_method(&self) -> &'static str {
            "a fake device's"
        }

        fn drop_cache(&mut self) -> Result<(), String> {
            let mut fake = self.0.borrow_mut();
            fake.steps.push(Step::DropCache);
            fake.refuse.clone().map_or(Ok(()), Err)
        }
    }

    fn runner<'a>(target: &'a Target, device: &FakeDevice, runs: u32) -> Runner<'a> {
        Runner::with_device(
            target,
            Box::new(device.clone()),
            runs,
            Duration::from_secs(1),
            Status::for_stderr(),
        )
    }

    fn throughput(ms: u64) -> f64 {
        BYTES as f64 / (ms as f64 / 1000.0)
    }

    #[test]
    fn the_warm_up_runs_first_and_is_thrown_away_each_pass_after_a_cache_drop() {
        let target = Target::unopened(1 << 30);
        let device = FakeDevice::scripted(&[5, 100, 200, 400]);
        let samples = runner(&target, &device, 3)
            .repeat("seq-read", true, |which| device.pass(which))
            .unwrap();
        let kept: Vec<Duration> = samples.iter().map(|s| s.elapsed).collect();
        assert_eq!(
            kept,
            [100, 200, 400].map(Duration::from_millis).to_vec(),
            "the warm-up's 5 ms is not a run"
        );
        assert_eq!(
            device.steps(),
            vec![
                Step::DropCache,
                Step::Pass(Pass::WarmUp),
                Step::DropCache,
                Step::Pass(Pass::Measured(1)),
                Step::DropCache,
                Step::Pass(Pass::Measured(2)),
                Step::DropCache,
                Step::Pass(Pass::Measured(3)),
            ]
        );
        // Measuring the cache itself: nothing is dropped.
        let device = FakeDevice::scripted(&[5, 100]);
        runner(&target, &device, 1)
            .repeat("cached", false, |which| device.pass(which))
            .unwrap();
        assert!(!device.steps().contains(&Step::DropCache));
    }

    #[test]
    fn the_figure_is_the_median_run_and_a_disturbed_run_is_flagged() {
        let target = Target::unopened(1 << 30);
        // Five runs near 100 ms, one a cron job slowed to 1 s.
        let device = FakeDevice::scripted(&[3, 100, 98, 1000, 102, 101, 99]);
        let samples = runner(&target, &device, 6)
            .repeat("seq-read", true, |which| device.pass(which))
            .unwrap();
        let figure = Figure::new("seq-read", "direct", "read", "sequential", 1 << 20);
        let result = TestResult::from_samples(figure, &samples);
        assert_eq!(result.runs.len(), 6);
        // The median of six: halfway between the runs of 100 and 101 ms.
        let median = (throughput(100) + throughput(101)) / 2.0;
        assert!((result.throughput_bytes_per_sec - median).abs() < 1e-6);
        assert_eq!(result.min, throughput(1000));
        assert_eq!(result.max, throughput(98));
        let flagged: Vec<usize> = (0..6).filter(|&i| result.runs[i].outlier).collect();
        assert_eq!(flagged, vec![2], "only the 1 s run is an outlier");
    }

    #[test]
    fn an_interrupted_pass_ends_the_figure_with_the_runs_before_it() {
        let target = Target::unopened(1 << 30);
        let device = FakeDevice::scripted(&[5, 100]);
        device
            .0
            .borrow_mut()
            .script
            .push_back(Err(BenchError::Interrupted));
        let samples = runner(&target, &device, 5)
            .repeat("seq-read", false, |which| device.pass(which))
            .unwrap();
        assert_eq!(samples.len(), 1);
        assert_eq!(
            device.steps().last(),
            Some(&Step::Pass(Pass::Measured(2))),
            "no pass starts after the interrupted one"
        );
    }

    #[test]
    fn a_cache_that_cannot_be_dropped_is_noted_once_and_the_runs_go_on() {
        let target = Target::unopened(1 << 30);
        let device = FakeDevice::scripted(&[5, 100, 100]);
        device.0.borrow_mut().refuse = Some("EPERM".into());
        let mut runner = runner(&target, &device, 2);
        let samples = runner
            .repeat("seq-read", true, |which| device.pass(which))
            .unwrap();
        assert_eq!(samples.len(), 2);
        assert!(!runner.cache.dropped);
        assert_eq!(
            runner.cache.note.as_deref(),
            Some(
                "caches could not be dropped (EPERM): buffered figures may include the page \
                 cache"
            )
        );
        assert_eq!(runner.cache.method, "a fake device's");
    }

    #[test]
    fn rounds_pass_over_every_point_before_the_next_run() {
        let target = Target::unopened(1 << 30);
        let device = FakeDevice::scripted(&[1, 2, 10, 20, 11, 21]);
        let samples = runner(&target, &device, 2)
            .rounds(
                |point| format!("point {point}"),
                2,
                2,
                |which, _| device.pass(which),
            )
            .unwrap();
        let ms = |point: usize| -> Vec<u128> {
            samples[point]
                .iter()
                .map(|s| s.elapsed.as_millis())
                .collect()
        };
        assert_eq!(ms(0), vec![10, 11]);
        assert_eq!(ms(1), vec![20, 21]);
        use Step::Pass as P;
        assert_eq!(
            device.steps(),
            vec![
                P(Pass::WarmUp),
                P(Pass::WarmUp),
                P(Pass::Measured(1)),
                P(Pass::Measured(1)),
                P(Pass::Measured(2)),
                P(Pass::Measured(2)),
            ]
        );
    }
}
