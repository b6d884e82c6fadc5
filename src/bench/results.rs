//! The bench's results as data: what the scenarios produce ([`Outcome`])
//! and the one value every report consumes ([`Report`]), on the model of
//! hyperfine's results → exporters. Scenarios push figures here and know
//! nothing of how they are shown; the reports (`report/`) read a
//! [`Report`] and know nothing of how it was measured. The block-size rule
//! is applied here, once, so the table, the notes, the JSON and the HTML
//! print the same figures the rule was applied to.
//!
//! The JSON report is this module's types serialized as they are: the
//! field names and their order are its schema ([`SCHEMA_VERSION`]).

use serde::Serialize;

use super::backing::Backing;
use super::measure::{CacheDrop, Sample};
use super::summary::{Context, Summary};
use crate::stats::recommend::{self, Judgement, NEAR_BEST};
use crate::stats::{self, Latency};
use crate::sys::device::DeviceInfo;

/// Bumped whenever a field changes meaning or disappears. 2: a bs-sweep
/// figure's throughput (and min, max, IOPS, each run's) is the block size
/// over a run's median request time, the measure the block-size rule is
/// applied to (`throughput_measure` says which measure a figure uses);
/// the recommendation carries the best throughput and the bar; the
/// bs-sweep figures carry their share of the best (`of_best`); `interrupted`.
/// 3: `summary` first (CrystalDiskMark's four rows, read and write, each
/// cell a detail figure shown again, with fio's options for it); every
/// figure says its `io` (open flags and syncs) and `engine`; seq-read and
/// seq-write add O_DIRECT at queue depth 8 (io_uring), the qd-sweep adds
/// writes and makes queue depth 1 with pread/pwrite; the latency test's
/// write mode is `direct+dsync` (it was `dsync`, seq-write's O_DSYNC
/// without O_DIRECT); a figure an earlier test measured is shown again
/// with `same_as` naming that test instead of being measured twice; the
/// recommendation's `best_bytes_per_sec` is the highest figure (it was
/// the median of the three highest, now `reference_bytes_per_sec`), so
/// `of_best` is never above 1, and `bar` is a share of that best (the
/// rule's own share is `bar_of_reference`); a skip may name its `op` and
/// `queue_depth`.
pub const SCHEMA_VERSION: u32 = 3;

/// What every report shows, in the order the reports show it: the
/// summary and the recommendation first, then the details and the facts.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub summary: Summary,
    pub recommendation: Recommendation,
    pub ddx_version: &'static str,
    /// Seconds since the Unix epoch when the bench started.
    pub started_unix: u64,
    pub machine: Machine,
    pub target: TargetReport,
    pub settings: Parameters,
    pub cache: CacheDrop,
    pub results: Vec<TestResult>,
    /// Tests or modes not run, and why.
    pub skipped: Vec<Skip>,
    pub notes: Vec<String>,
    /// The signal that stopped the bench ("SIGINT", "SIGTERM"): the
    /// results are the runs completed before it.
    pub interrupted: Option<&'static str>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    pub cpus: usize,
    /// Where the CPU itself is emulated (QEMU's TCG), what shows it:
    /// every figure is then mostly the CPU a tool spends per request.
    pub emulated: Option<String>,
}

impl Machine {
    /// This machine, from procfs.
    pub fn this() -> Machine {
        Machine {
            hostname: read_trimmed("/proc/sys/kernel/hostname"),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            emulated: emulated_cpu(
                &std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default(),
                &std::fs::read_to_string(
                    "/sys/devices/system/clocksource/clocksource0/available_clocksource",
                )
                .unwrap_or_default(),
            ),
        }
    }
}

/// A CPU that QEMU emulates instruction by instruction (TCG), from
/// /proc/cpuinfo and the clock sources: QEMU's own CPU model, with no
/// KVM clock (a KVM guest has one whatever CPU model it is shown).
/// There a request costs the tool that makes it many times what it
/// would on hardware, and the emulated device runs on the same CPUs.
fn emulated_cpu(cpuinfo: &str, clocksources: &str) -> Option<String> {
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
        .map(|(_, m)| m.trim())?;
    if !model.starts_with("QEMU") || clocksources.contains("kvm-clock") {
        return None;
    }
    Some(format!(
        "the CPU is QEMU's emulation (TCG: model name '{model}', no kvm-clock)"
    ))
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    pub path: String,
    /// "file", "directory" or "block device".
    pub kind: &'static str,
    /// The file ddx created and removed (directory TARGETs).
    pub bench_file: Option<String>,
    pub working_set_bytes: u64,
    pub target_bytes: u64,
    /// What the system knows about the disk, its fields inline ("model",
    /// "disk", "size_bytes" (for a file: its disk's) ... "dio_offset_align").
    #[serde(flatten)]
    pub device: DeviceInfo,
    pub writable: bool,
    /// Requests go to a server (an NBD export), which has no open flags
    /// and a request path of its own: the target's capability, carried
    /// for the summary's fio options.
    #[serde(skip)]
    pub served: bool,
    /// The interface of a disk's generic node, whose commands fio's `sg`
    /// and `io_uring_cmd` engines send too: for the summary's fio options.
    #[serde(skip)]
    pub passthrough: Option<crate::sys::passthrough::Interface>,
    /// What answers the requests where it is not the target's own disk
    /// (a loop device's backing file, memory).
    pub backing: Backing,
}

/// How the bench was run: its tests, rounds and working set (the
/// report's `settings`).
#[derive(Debug, Clone, Serialize)]
pub struct Parameters {
    pub tests: Vec<&'static str>,
    pub runs: u32,
    /// Measured rounds of every bs-sweep size.
    pub sweep_rounds: u32,
    pub warmup_runs: u32,
    pub size: u64,
    pub time_per_run_sec: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Recommendation {
    pub rule: String,
    pub read_block_size: Option<u64>,
    pub write_block_size: Option<u64>,
    /// How each answer was decided: the best throughput and the bar it is
    /// a share of, what a next run may answer instead, and whether the
    /// target held still.
    pub read: Option<Judgement>,
    pub write: Option<Judgement>,
}

impl Recommendation {
    /// The judgement for `op` ("read" or "write").
    pub fn judgement(&self, op: &str) -> Option<&Judgement> {
        match op {
            "read" => self.read.as_ref(),
            "write" => self.write.as_ref(),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Skip {
    pub test: &'static str,
    pub mode: Option<&'static str>,
    /// The direction left out, where only one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<&'static str>,
    /// The queue depth left out, where only one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_depth: Option<u32>,
    pub reason: String,
}

impl Skip {
    /// Only `op` was left out.
    pub fn of_op(&mut self, op: &'static str) -> &mut Skip {
        self.op = Some(op);
        self
    }

    /// Only `depth` was left out.
    pub fn at_depth(&mut self, depth: u32) -> &mut Skip {
        self.queue_depth = Some(depth);
        self
    }

    /// Whether this says why `test` did not measure `op` at queue depth
    /// `depth`.
    pub fn explains(&self, test: &str, op: &str, depth: u32) -> bool {
        self.test == test
            && self.op.is_none_or(|o| o == op)
            && self.queue_depth.is_none_or(|d| d == depth)
    }
}

/// What a figure's throughput is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// The bytes a run moved over its wall time (and its requests over
    /// its wall time for IOPS).
    Run,
    /// The block size over the run's median request time (see
    /// [`recommend::request_rate`]): the block-size rule's measure.
    MedianRequest,
}

impl Measure {
    /// What the figure is, in a report's words.
    pub fn text(self) -> &'static str {
        match self {
            Measure::Run => "bytes / wall time",
            Measure::MedianRequest => "block size / median request time",
        }
    }
}

/// What identifies a figure, before it is measured, and says how it is
/// measured: the report prints these with every figure.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Figure {
    pub test: &'static str,
    pub mode: &'static str,
    /// The mode in the system's words: the open flags and the syncs
    /// ("O_DIRECT", "buffered, fdatasync at the end"); see [`io_text`].
    pub io: &'static str,
    /// "read" or "write".
    pub op: &'static str,
    /// "sequential" or "random".
    pub pattern: &'static str,
    pub block_size: u64,
    pub queue_depth: u32,
    /// How the requests were made: "pread"/"pwrite" (one at a time),
    /// "io_uring" (several in flight), "libnbd" (an NBD export), "sg",
    /// "bsg" or "io_uring_cmd" (a generic node's commands, in fio's
    /// names for the same engines).
    pub engine: &'static str,
    /// Where the zones test read.
    pub offset: Option<u64>,
    #[serde(rename = "throughput_measure")]
    pub measure: Measure,
}

impl Figure {
    /// `op` ("read" or "write") of `pattern` in `block_size` requests,
    /// one at a time, each run's throughput; the builders below change
    /// the rest.
    pub fn new(
        test: &'static str,
        mode: &'static str,
        op: &'static str,
        pattern: &'static str,
        block_size: u64,
    ) -> Figure {
        Figure {
            test,
            mode,
            io: io_text(mode),
            op,
            pattern,
            block_size,
            queue_depth: 1,
            engine: one_at_a_time(mode, op),
            offset: None,
            measure: Measure::Run,
        }
    }

    /// With `depth` requests kept in flight by `engine`.
    pub fn in_flight(self, depth: u32, engine: &'static str) -> Figure {
        Figure {
            queue_depth: depth,
            engine,
            ..self
        }
    }

    /// Made by `engine`, at the same depth.
    pub fn by(self, engine: &'static str) -> Figure {
        Figure { engine, ..self }
    }

    pub fn at(self, offset: u64) -> Figure {
        Figure {
            offset: Some(offset),
            ..self
        }
    }

    pub fn measured_as(self, measure: Measure) -> Figure {
        Figure { measure, ..self }
    }

    /// Whether `other` measures the same quantity, whichever test asks
    /// for it: the same requests the same way, in the same measure (the
    /// engine that made them is how, not what).
    pub fn same_quantity(&self, other: &Figure) -> bool {
        (self.mode, self.op, self.pattern, self.block_size)
            == (other.mode, other.op, other.pattern, other.block_size)
            && (self.queue_depth, self.offset, self.measure)
                == (other.queue_depth, other.offset, other.measure)
    }
}

/// The engine of requests made one at a time.
fn one_at_a_time(mode: &str, op: &str) -> &'static str {
    match (mode, op) {
        ("nbd" | "flush", _) => "libnbd",
        (_, "write") => "pwrite",
        _ => "pread",
    }
}

/// Each mode in the system's words: what a reader who knows dd's and
/// fio's flags needs to reproduce it.
pub fn io_text(mode: &str) -> &'static str {
    match mode {
        "direct" => "O_DIRECT",
        "cached" => "page cache, warm",
        "buffered" => "buffered, no sync",
        "fdatasync" => "buffered, fdatasync at the end",
        "fsync" => "buffered, fsync at the end",
        "dsync" => "O_DSYNC",
        "sync" => "O_SYNC",
        "direct+dsync" => "O_DIRECT|O_DSYNC",
        "nbd" => "NBD requests",
        "flush" => "NBD requests, flush at the end",
        "passthrough" => "the disk's own commands, no page cache",
        "passthrough+flush" => "the disk's own commands, a cache flush at the end",
        "passthrough+fua" => "the disk's own commands, each write with FUA",
        "passthrough+copied" => "the disk's own commands, each buffer copied by the driver",
        _ => "",
    }
}

/// One figure: a test in one mode, block size and queue depth (and for
/// zones, one offset), from R measured runs.
#[derive(Debug, Clone, Serialize)]
pub struct TestResult {
    #[serde(flatten)]
    pub figure: Figure,
    /// Median over the runs, in the figure's measure.
    pub throughput_bytes_per_sec: f64,
    pub min: f64,
    pub max: f64,
    pub iops: f64,
    /// (user + system CPU) / wall time, median over the runs; 100 = a core.
    pub cpu_percent: f64,
    /// From every request of every measured run, where measured.
    pub latency_ns: Option<Latency>,
    pub runs: Vec<RunRecord>,
    /// Every request's latency, in order, where kept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub latency_samples_ns: Vec<u64>,
    pub note: Option<String>,
    /// bs-sweep: the throughput as a fraction of the best (the highest
    /// figure) of its direction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of_best: Option<f64>,
    /// The test that measured this quantity first, when this test shows
    /// the same measurement again instead of measuring it twice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_as: Option<&'static str>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub bytes: u64,
    pub ios: u64,
    pub seconds: f64,
    /// In the figure's measure.
    pub throughput_bytes_per_sec: f64,
    pub iops: f64,
    pub cpu_percent: f64,
    /// Flagged by the median-absolute-deviation rule.
    pub outlier: bool,
    /// The median of this run's request latencies, where they were
    /// timed one by one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_median_ns: Option<u64>,
}

impl TestResult {
    pub fn from_samples(figure: Figure, samples: &[Sample]) -> TestResult {
        let seconds = |s: &Sample| s.elapsed.as_secs_f64().max(1e-9);
        let throughputs: Vec<f64> = samples
            .iter()
            .map(|s| match figure.measure {
                Measure::Run => s.bytes as f64 / seconds(s),
                Measure::MedianRequest => {
                    recommend::request_rate(figure.block_size, &s.latencies_ns).unwrap_or(0.0)
                }
            })
            .collect();
        let iops: Vec<f64> = samples
            .iter()
            .zip(&throughputs)
            .map(|(s, t)| match figure.measure {
                Measure::Run => s.ios as f64 / seconds(s),
                Measure::MedianRequest => t / figure.block_size.max(1) as f64,
            })
            .collect();
        let cpu: Vec<f64> = samples
            .iter()
            .map(|s| 100.0 * s.cpu.as_secs_f64() / seconds(s))
            .collect();
        let flagged = stats::outliers(&throughputs);
        let runs = samples
            .iter()
            .enumerate()
            .map(|(i, s)| RunRecord {
                bytes: s.bytes,
                ios: s.ios,
                seconds: seconds(s),
                throughput_bytes_per_sec: throughputs[i],
                iops: iops[i],
                cpu_percent: cpu[i],
                outlier: flagged.contains(&i),
                request_median_ns: stats::observed_median(&s.latencies_ns),
            })
            .collect();
        let spread = stats::Spread::of(&throughputs).unwrap_or(stats::Spread {
            median: 0.0,
            min: 0.0,
            max: 0.0,
        });
        let latency_samples_ns: Vec<u64> = samples
            .iter()
            .flat_map(|s| s.latencies_ns.iter().copied())
            .collect();
        TestResult {
            figure,
            throughput_bytes_per_sec: spread.median,
            min: spread.min,
            max: spread.max,
            iops: stats::median(&iops).unwrap_or(0.0),
            cpu_percent: stats::median(&cpu).unwrap_or(0.0),
            latency_ns: Latency::of(&latency_samples_ns),
            runs,
            latency_samples_ns,
            note: None,
            of_best: None,
            same_as: None,
        }
    }

    /// Each run's throughput, in round order: what the block-size rule
    /// is given for this size.
    pub fn run_throughputs(&self) -> Vec<f64> {
        self.runs
            .iter()
            .map(|run| run.throughput_bytes_per_sec)
            .collect()
    }

    pub fn has_outlier(&self) -> bool {
        self.runs.iter().any(|r| r.outlier)
    }
}

/// What the tests produced, in the order they ran.
#[derive(Debug, Default)]
pub struct Outcome {
    pub results: Vec<TestResult>,
    pub skipped: Vec<Skip>,
    pub notes: Vec<String>,
}

impl Outcome {
    /// Say why `test` (in `mode`, if only there) was not measured; the
    /// skip returned can narrow it to one direction or queue depth.
    pub fn skip(
        &mut self,
        test: &'static str,
        mode: Option<&'static str>,
        reason: impl Into<String>,
    ) -> &mut Skip {
        self.skipped.push(Skip {
            test,
            mode,
            op: None,
            queue_depth: None,
            reason: reason.into(),
        });
        self.skipped.last_mut().expect("just pushed")
    }

    /// The figure from `samples`, for the caller to add to; nothing when
    /// no run was completed (the bench was interrupted before the first).
    pub fn push(&mut self, figure: Figure, samples: &[Sample]) -> Option<&mut TestResult> {
        if samples.is_empty() {
            return None;
        }
        self.results.push(TestResult::from_samples(figure, samples));
        self.results.last_mut()
    }

    /// [`Outcome::push`] with a note for the figure.
    pub fn push_noted(
        &mut self,
        figure: Figure,
        samples: &[Sample],
        note: Option<impl Into<String>>,
    ) {
        if let Some(result) = self.push(figure, samples) {
            result.note = note.map(Into::into);
        }
    }

    /// Whether an earlier test measured the quantity `figure` stands for;
    /// if so, that measurement is shown again under `figure.test` (the
    /// same figures, said to be the other test's) and the caller does not
    /// measure it a second time: one quantity, one figure.
    pub fn reuse(&mut self, figure: Figure) -> bool {
        let Some(first) = self
            .results
            .iter()
            .find(|r| r.same_as.is_none() && r.figure.same_quantity(&figure))
        else {
            return false;
        };
        let mut again = first.clone();
        again.same_as = Some(first.figure.test);
        again.figure.test = figure.test;
        self.results.push(again);
        true
    }
}

/// The rule as the report states it; `bar` and `best` are each
/// direction's, in its own line.
pub fn rule_text() -> String {
    format!(
        "the smallest bs-sweep block size whose figure reaches the bar: {:.0}% of the \
         median of the three highest figures (or of a peak above them by more than the \
         noise, less the noise), less what the noise between rounds cannot resolve, never \
         below {:.0}% of the best; the best is the highest figure, and the bar and every \
         share printed are of it; a bs-sweep figure is the block size over a round's median \
         request time, the median of the rounds",
        NEAR_BEST * 100.0,
        recommend::FLOOR * 100.0
    )
}

impl Report {
    /// Put the measured results and the facts about the target together,
    /// and apply the block-size rule to the bs-sweep's figures.
    pub fn assemble(
        started: std::time::SystemTime,
        target: TargetReport,
        settings: Parameters,
        cache: CacheDrop,
        mut out: Outcome,
        interrupted: Option<&'static str>,
    ) -> Report {
        let judge = |results: &[TestResult], op: &str| {
            let points: Vec<(u64, Vec<f64>)> = results
                .iter()
                .filter(|r| r.figure.test == "bs-sweep" && r.figure.op == op)
                .map(|r| (r.figure.block_size, r.run_throughputs()))
                .collect();
            recommend::judge(&points, NEAR_BEST)
        };
        let read = judge(&out.results, "read");
        let write = judge(&out.results, "write");
        let recommendation = Recommendation {
            rule: rule_text(),
            read_block_size: read.as_ref().map(|j| j.block_size),
            write_block_size: write.as_ref().map(|j| j.block_size),
            read,
            write,
        };
        for result in out
            .results
            .iter_mut()
            .filter(|r| r.figure.test == "bs-sweep")
        {
            result.of_best = recommendation
                .judgement(result.figure.op)
                .map(|j| j.share(result.throughput_bytes_per_sec));
        }
        let machine = Machine::this();
        let summary = Summary::of(&Context {
            results: &out.results,
            skipped: &out.skipped,
            settings: &settings,
            target: &target,
            machine: &machine,
            interrupted,
        });
        Report {
            schema_version: SCHEMA_VERSION,
            summary,
            recommendation,
            ddx_version: env!("CARGO_PKG_VERSION"),
            started_unix: started
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.as_secs()),
            machine,
            target,
            settings,
            cache,
            results: out.results,
            skipped: out.skipped,
            notes: out.notes,
            interrupted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_emulated_cpu_is_told_from_a_kvm_guest_and_hardware() {
        let qemu = "processor\t: 0\nmodel name\t: QEMU Virtual CPU version 2.5+\n";
        let said = emulated_cpu(qemu, "tsc acpi_pm \n").expect("TCG is emulated");
        assert!(said.contains("'QEMU Virtual CPU version 2.5+'"), "{said}");
        assert_eq!(emulated_cpu(qemu, "kvm-clock tsc acpi_pm \n"), None);
        let hardware = "model name\t: AMD EPYC 7B13\n";
        assert_eq!(emulated_cpu(hardware, "tsc hpet\n"), None);
        assert_eq!(emulated_cpu("", ""), None);
    }

    fn figure(measure: Measure) -> Figure {
        Figure::new("seq-read", "direct", "read", "sequential", 1 << 20).measured_as(measure)
    }

    fn sample(mb: u64, ms: u64, latencies_ns: Vec<u64>) -> Sample {
        Sample {
            bytes: mb << 20,
            ios: mb,
            elapsed: Duration::from_millis(ms),
            cpu: Duration::from_millis(ms / 10),
            latencies_ns,
        }
    }

    #[test]
    fn a_figure_is_the_median_of_its_runs() {
        let r = TestResult::from_samples(
            figure(Measure::Run),
            &[
                sample(100, 1000, vec![1_000_000]),
                sample(100, 500, vec![500_000]),
                sample(100, 2000, vec![2_000_000]),
            ],
        );
        assert_eq!(r.throughput_bytes_per_sec, (100u64 << 20) as f64 / 1.0);
        assert_eq!(r.max, (100u64 << 20) as f64 / 0.5);
        assert_eq!(r.iops, 100.0);
        assert!((r.cpu_percent - 10.0).abs() < 1e-9);
        assert_eq!(r.latency_samples_ns, vec![1_000_000, 500_000, 2_000_000]);
        assert_eq!(r.latency_ns.unwrap().p50, 1_000_000);
        assert_eq!(r.runs.len(), 3);
    }

    /// A median-request figure ignores a run's stalls: a run whose wall
    /// time doubled behind one slow request measures what its typical
    /// request did, and its throughput, IOPS and the rule's input agree.
    #[test]
    fn a_median_request_figure_is_the_size_over_the_typical_request() {
        let stalled = sample(4, 8, vec![1_000_000, 1_000_000, 1_000_000, 5_000_000]);
        let r = TestResult::from_samples(figure(Measure::MedianRequest), &[stalled]);
        let mib_per_ms = (1u64 << 20) as f64 * 1e3;
        assert_eq!(r.throughput_bytes_per_sec, mib_per_ms);
        assert_eq!(r.iops, 1000.0);
        assert_eq!(r.runs[0].request_median_ns, Some(1_000_000));
        assert_eq!(r.run_throughputs(), vec![mib_per_ms]);
        // The same run by bytes over wall time: half of it.
        let by_run =
            TestResult::from_samples(figure(Measure::Run), &[sample(4, 8, vec![1_000_000; 4])]);
        assert_eq!(by_run.throughput_bytes_per_sec, mib_per_ms / 2.0);
    }

    #[test]
    fn an_interrupted_figure_with_no_run_is_left_out() {
        let mut out = Outcome::default();
        assert!(out.push(figure(Measure::Run), &[]).is_none());
        assert!(out.results.is_empty());
        out.push_noted(
            figure(Measure::Run),
            &[sample(1, 10, vec![])],
            Some("one run"),
        );
        assert_eq!(out.results[0].note.as_deref(), Some("one run"));
    }

    /// The device's fields sit inline in "target", named and ordered as
    /// schema_version 1 had them, and its device number stays out.
    #[test]
    fn the_target_keeps_its_names_and_order() {
        let target = TargetReport {
            path: "/dev/sdz".into(),
            kind: "block device",
            bench_file: None,
            working_set_bytes: 1 << 20,
            target_bytes: 1 << 30,
            device: DeviceInfo {
                disk_name: Some("sdz".into()),
                disk: Some(crate::sys::device::Disk {
                    major: 8,
                    minor: 16,
                }),
                rotational: Some(false),
                ..DeviceInfo::default()
            },
            writable: false,
            served: false,
            passthrough: None,
            backing: Backing::Own,
        };
        let json = serde_json::to_string(&target).unwrap();
        assert_eq!(
            json,
            r#"{"path":"/dev/sdz","kind":"block device","bench_file":null,"#.to_owned()
                + r#""working_set_bytes":1048576,"target_bytes":1073741824,"#
                + r#""model":null,"disk":"sdz","size_bytes":null,"logical_sector":null,"#
                + r#""physical_sector":null,"rotational":false,"scheduler":null,"#
                + r#""nr_requests":null,"filesystem":null,"dio_mem_align":null,"#
                + r#""dio_offset_align":null,"writable":false,"backing":{"kind":"own"}}"#
        );
    }

    /// A figure's identity comes first, in schema 1's order, then what it
    /// measured.
    #[test]
    fn a_result_keeps_its_names_and_order() {
        let r = TestResult::from_samples(figure(Measure::Run), &[sample(1, 10, vec![])]);
        let json = serde_json::to_string(&r).unwrap();
        let at = |key: &str| json.find(&format!("\"{key}\":")).unwrap_or(usize::MAX);
        let keys = [
            "test",
            "mode",
            "op",
            "pattern",
            "block_size",
            "queue_depth",
            "offset",
            "throughput_measure",
            "throughput_bytes_per_sec",
        ];
        assert!(keys.windows(2).all(|w| at(w[0]) < at(w[1])), "{json}");
        assert!(json.contains(r#""throughput_measure":"run""#), "{json}");
        assert!(!json.contains("of_best"), "{json}");
    }
}
