//! The bench's results as data, and the ways to show them: a terminal
//! table, JSON for machines, Markdown for issues, HTML with charts for
//! people. Everything the renderers print comes from [`Report`], so the
//! four outputs can never tell different stories.

pub mod html;
pub mod markdown;
pub mod table;

use serde::Serialize;

use super::measure::{CacheDrop, Sample};
use super::recommend::Judgement;
use super::stats::{self, Latency};
use crate::sys::device::DeviceInfo;

/// Bumped whenever a field changes meaning or disappears.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub ddx_version: &'static str,
    /// Seconds since the Unix epoch when the bench started.
    pub started_unix: u64,
    pub machine: Machine,
    pub target: TargetReport,
    pub settings: Settings,
    pub cache: CacheDrop,
    pub results: Vec<TestResult>,
    pub recommendation: Recommendation,
    /// Tests or modes not run, and why.
    pub skipped: Vec<Skip>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    pub cpus: usize,
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
}

#[derive(Debug, Clone, Serialize)]
pub struct Settings {
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
    /// How firmly each answer was decided: what a next run may answer
    /// instead, and whether the target held still.
    pub read: Option<Judgement>,
    pub write: Option<Judgement>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Skip {
    pub test: &'static str,
    pub mode: Option<&'static str>,
    pub reason: String,
}

/// One figure: a test in one mode, block size and queue depth (and for
/// zones, one offset), from R measured runs.
#[derive(Debug, Clone, Serialize)]
pub struct TestResult {
    pub test: &'static str,
    pub mode: &'static str,
    /// "read" or "write".
    pub op: &'static str,
    /// "sequential" or "random".
    pub pattern: &'static str,
    pub block_size: u64,
    pub queue_depth: u32,
    /// Where the zones test read.
    pub offset: Option<u64>,
    /// Median over the runs.
    pub throughput_bytes_per_sec: f64,
    pub min: f64,
    pub max: f64,
    pub iops: f64,
    /// (user + system CPU) / wall time, median over the runs; 100 = a core.
    pub cpu_percent: f64,
    /// From every request of every measured run, where measured.
    pub latency_ns: Option<Latency>,
    pub runs: Vec<RunRecord>,
    /// Every request's latency, in order, where measured.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub latency_samples_ns: Vec<u64>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub bytes: u64,
    pub ios: u64,
    pub seconds: f64,
    pub throughput_bytes_per_sec: f64,
    pub iops: f64,
    pub cpu_percent: f64,
    /// Flagged by the median-absolute-deviation rule.
    pub outlier: bool,
    /// The median of this run's request latencies, where they were
    /// timed one by one (bs-sweep: the block-size rule's input).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_median_ns: Option<u64>,
}

/// What identifies a figure, before it is measured.
#[derive(Debug, Clone, Copy)]
pub struct Figure {
    pub test: &'static str,
    pub mode: &'static str,
    pub op: &'static str,
    pub pattern: &'static str,
    pub block_size: u64,
    pub queue_depth: u32,
    pub offset: Option<u64>,
}

impl TestResult {
    pub fn from_samples(figure: Figure, samples: &[Sample]) -> TestResult {
        let seconds = |s: &Sample| s.elapsed.as_secs_f64().max(1e-9);
        let throughputs: Vec<f64> = samples
            .iter()
            .map(|s| s.bytes as f64 / seconds(s))
            .collect();
        let iops: Vec<f64> = samples.iter().map(|s| s.ios as f64 / seconds(s)).collect();
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
                request_median_ns: request_median_ns(&s.latencies_ns),
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
            test: figure.test,
            mode: figure.mode,
            op: figure.op,
            pattern: figure.pattern,
            block_size: figure.block_size,
            queue_depth: figure.queue_depth,
            offset: figure.offset,
            throughput_bytes_per_sec: spread.median,
            min: spread.min,
            max: spread.max,
            iops: stats::median(&iops).unwrap_or(0.0),
            cpu_percent: stats::median(&cpu).unwrap_or(0.0),
            latency_ns: Latency::of(&latency_samples_ns),
            runs,
            latency_samples_ns,
            note: None,
        }
    }

    /// Throughput per run as the block-size rule sees it: the request
    /// size over the median request's time where requests were timed
    /// (a stall behind another process's I/O then slows a few requests,
    /// not the figure), else the run's throughput.
    pub fn rule_samples(&self) -> Vec<f64> {
        self.runs
            .iter()
            .map(|run| match run.request_median_ns {
                Some(ns) if ns > 0 => self.block_size as f64 * 1e9 / ns as f64,
                _ => run.throughput_bytes_per_sec,
            })
            .collect()
    }

    pub fn has_outlier(&self) -> bool {
        self.runs.iter().any(|r| r.outlier)
    }
}

/// The median of one run's request latencies (the upper middle one for
/// an even count: a latency that was observed); None when none were kept.
fn request_median_ns(latencies_ns: &[u64]) -> Option<u64> {
    let mut sorted = latencies_ns.to_vec();
    sorted.sort_unstable();
    stats::percentile(&sorted, 50.0)
}

pub use crate::text::human::size_text;

/// A throughput as dd prints rates ("1.2 GB/s").
pub fn rate_text(bytes_per_sec: f64) -> String {
    let whole = bytes_per_sec.max(0.0).round() as u64;
    format!(
        "{}/s",
        crate::text::human::human(whole, crate::text::human::Base::Si, 1, 1)
    )
}

/// A latency with three significant figures ("85.3 µs", "1.20 ms").
pub fn latency_text(ns: f64) -> String {
    let (value, unit) = if ns >= 1e9 {
        (ns / 1e9, "s")
    } else if ns >= 1e6 {
        (ns / 1e6, "ms")
    } else if ns >= 1e3 {
        (ns / 1e3, "µs")
    } else {
        (ns, "ns")
    };
    let decimals = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.decimals$} {unit}")
}

/// IOPS without false precision ("12.3k").
pub fn iops_text(iops: f64) -> String {
    if iops >= 1e6 {
        format!("{:.2}M", iops / 1e6)
    } else if iops >= 1e4 {
        format!("{:.1}k", iops / 1e3)
    } else {
        format!("{iops:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_close_call_and_a_moving_target_are_said() {
        use crate::stats::recommend::Neighbour;
        let firm = Judgement {
            block_size: 1 << 20,
            of_best: 0.98,
            close_calls: vec![],
            plateau_low: 1.0e9,
            plateau_high: 1.1e9,
            steady: true,
        };
        assert!(judgement_lines("read", &firm).is_empty());
        let shaky = Judgement {
            close_calls: vec![Neighbour {
                block_size: 512 << 10,
                of_best: 0.93,
            }],
            plateau_low: 0.6e9,
            steady: false,
            ..firm
        };
        let lines = judgement_lines("write", &shaky);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(
            lines[0],
            "note: write: 1 MiB measured 98% of the best, 512 KiB 93%: too close to the 95% \
             line for this run's noise to tell apart; another run may recommend 512 KiB"
        );
        let both_ways = Judgement {
            close_calls: vec![
                Neighbour {
                    block_size: 512 << 10,
                    of_best: 0.82,
                },
                Neighbour {
                    block_size: 2 << 20,
                    of_best: 1.0,
                },
            ],
            steady: true,
            ..shaky
        };
        assert_eq!(
            judgement_lines("read", &both_ways),
            [
                "note: read: 1 MiB measured 98% of the best, 512 KiB 82%, 2 MiB 100%: too close \
              to the 95% line for this run's noise to tell apart; another run may recommend \
              512 KiB or 2 MiB"
            ]
        );
        assert!(lines[1].contains("from 600 MB/s to 1.1 GB/s"), "{lines:?}");
    }

    #[test]
    fn texts() {
        assert_eq!(size_text(512), "512 B");
        assert_eq!(size_text(4096), "4 KiB");
        assert_eq!(size_text(16 << 20), "16 MiB");
        assert_eq!(size_text(1536), "1.5 KiB");
        assert_eq!(latency_text(85_300.0), "85.3 µs");
        assert_eq!(latency_text(1_204_000.0), "1.20 ms");
        assert_eq!(latency_text(950.0), "950 ns");
        assert_eq!(iops_text(12_345.0), "12.3k");
        assert_eq!(rate_text(1.5e9), "1.5 GB/s");
    }

    #[test]
    fn a_figure_is_the_median_of_its_runs() {
        let sample = |mb: u64, ms: u64| Sample {
            bytes: mb << 20,
            ios: mb,
            elapsed: Duration::from_millis(ms),
            cpu: Duration::from_millis(ms / 10),
            latencies_ns: vec![ms * 1000],
        };
        let figure = Figure {
            test: "seq-read",
            mode: "direct",
            op: "read",
            pattern: "sequential",
            block_size: 1 << 20,
            queue_depth: 1,
            offset: None,
        };
        let r = TestResult::from_samples(
            figure,
            &[sample(100, 1000), sample(100, 500), sample(100, 2000)],
        );
        assert_eq!(r.throughput_bytes_per_sec, (100u64 << 20) as f64 / 1.0);
        assert_eq!(r.max, (100u64 << 20) as f64 / 0.5);
        assert_eq!(r.iops, 100.0);
        assert!((r.cpu_percent - 10.0).abs() < 1e-9);
        assert_eq!(r.latency_samples_ns, vec![1_000_000, 500_000, 2_000_000]);
        assert_eq!(r.latency_ns.unwrap().p50, 1_000_000);
        assert_eq!(r.runs.len(), 3);
    }

    /// The device's fields sit inline in "target", named and ordered as
    /// schema_version 1 has them, and its device number stays out.
    #[test]
    fn the_target_keeps_schema_1_names_and_order() {
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
        };
        let json = serde_json::to_string(&target).unwrap();
        assert_eq!(
            json,
            r#"{"path":"/dev/sdz","kind":"block device","bench_file":null,"#.to_owned()
                + r#""working_set_bytes":1048576,"target_bytes":1073741824,"#
                + r#""model":null,"disk":"sdz","size_bytes":null,"logical_sector":null,"#
                + r#""physical_sector":null,"rotational":false,"scheduler":null,"#
                + r#""nr_requests":null,"filesystem":null,"dio_mem_align":null,"#
                + r#""dio_offset_align":null,"writable":false}"#
        );
    }
}

/// Put the measured results and the facts about the target together.
pub fn build(
    args: &super::args::BenchArgs,
    target: &super::target::Target,
    started: std::time::SystemTime,
    cache: CacheDrop,
    out: super::scenario::Outcome,
) -> Report {
    let sweep = |op: &str| -> Vec<(u64, Vec<f64>)> {
        out.results
            .iter()
            .filter(|r| r.test == "bs-sweep" && r.op == op)
            .map(|r| (r.block_size, r.rule_samples()))
            .collect()
    };
    let near = super::recommend::NEAR_BEST;
    let read = super::recommend::judge(&sweep("read"), near);
    let write = super::recommend::judge(&sweep("write"), near);
    let recommendation = Recommendation {
        rule: format!(
            "smallest block size reaching >= {:.0}% of the best bs-sweep throughput, \
             per median request, within the noise of the runs",
            near * 100.0
        ),
        read_block_size: read.as_ref().map(|j| j.block_size),
        write_block_size: write.as_ref().map(|j| j.block_size),
        read,
        write,
    };
    Report {
        schema_version: SCHEMA_VERSION,
        ddx_version: env!("CARGO_PKG_VERSION"),
        started_unix: started
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| t.as_secs()),
        machine: Machine {
            hostname: read_trimmed("/proc/sys/kernel/hostname"),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        },
        target: TargetReport {
            path: target.given.display().to_string(),
            kind: target.kind.name(),
            bench_file: target.created.then(|| target.path.display().to_string()),
            working_set_bytes: target.len,
            target_bytes: target.full_len,
            device: target.device.clone(),
            writable: target.writable(),
        },
        settings: Settings {
            tests: args.tests.iter().map(|t| t.name()).collect(),
            runs: args.runs,
            sweep_rounds: args.runs * super::scenario::sweep::ROUNDS_PER_RUN,
            warmup_runs: 1,
            size: args.size,
            time_per_run_sec: args.time_per_run,
        },
        cache,
        results: out.results,
        recommendation,
        skipped: out.skipped,
        notes: out.notes,
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// One line of the result table, as text, shared by the terminal and
/// Markdown renderers.
#[derive(Debug, Clone)]
pub struct Row {
    pub cells: Vec<String>,
}

pub const COLUMNS: [&str; 12] = [
    "test",
    "mode",
    "op",
    "bs",
    "qd",
    "offset",
    "throughput",
    "min..max",
    "IOPS",
    "p50",
    "p99",
    "CPU",
];

/// Which columns are right-aligned (numbers).
pub const NUMERIC: [bool; 12] = [
    false, false, false, true, true, true, true, true, true, true, true, true,
];

pub fn rows(report: &Report) -> Vec<Row> {
    report
        .results
        .iter()
        .map(|r| {
            let (p50, p99) = r.latency_ns.map_or((String::new(), String::new()), |l| {
                (latency_text(l.p50 as f64), latency_text(l.p99 as f64))
            });
            let flag = if r.has_outlier() { " !" } else { "" };
            Row {
                cells: vec![
                    r.test.to_owned(),
                    r.mode.to_owned(),
                    r.op.to_owned(),
                    size_text(r.block_size),
                    r.queue_depth.to_string(),
                    r.offset.map(size_text).unwrap_or_default(),
                    format!("{}{flag}", rate_text(r.throughput_bytes_per_sec)),
                    format!("{}..{}", short_rate(r.min), short_rate(r.max)),
                    iops_text(r.iops),
                    p50,
                    p99,
                    format!("{:.0}%", r.cpu_percent),
                ],
            }
        })
        .collect()
}

/// A rate without the "/s", for the min..max column.
fn short_rate(bytes_per_sec: f64) -> String {
    let text = rate_text(bytes_per_sec);
    text.trim_end_matches("/s").to_owned()
}

/// What a user should know before trusting one run's recommendation: a
/// neighbour within the noise, a target whose speed moved.
fn judgement_lines(op: &str, judgement: &Judgement) -> Vec<String> {
    let percent = |f: f64| format!("{:.0}%", f * 100.0);
    let mut lines = Vec::new();
    if !judgement.close_calls.is_empty() {
        let measured: Vec<String> = judgement
            .close_calls
            .iter()
            .map(|c| format!("{} {}", size_text(c.block_size), percent(c.of_best)))
            .collect();
        let others: Vec<String> = judgement
            .close_calls
            .iter()
            .map(|c| size_text(c.block_size))
            .collect();
        lines.push(format!(
            "note: {op}: {} measured {} of the best, {}: too close to the {:.0}% line \
             for this run's noise to tell apart; another run may recommend {}",
            size_text(judgement.block_size),
            percent(judgement.of_best),
            measured.join(", "),
            super::recommend::NEAR_BEST * 100.0,
            others.join(" or "),
        ));
    }
    if !judgement.steady {
        lines.push(format!(
            "note: {op}: the best throughput moved between rounds, from {} to {}: \
             the target's speed changed while it was measured (shared or throttled \
             storage?), and the recommended size can move with it",
            rate_text(judgement.plateau_low),
            rate_text(judgement.plateau_high),
        ));
    }
    lines
}

/// The lines under the table: device, recommendation, what was skipped.
pub fn summary_lines(report: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    let t = &report.target;
    let d = &t.device;
    let mut device = Vec::new();
    if let Some(model) = &d.model {
        device.push(model.clone());
    }
    if let Some(disk) = &d.disk_name {
        device.push(format!("disk {disk}"));
    }
    if let Some(size) = d.size_bytes {
        device.push(crate::text::human::human(
            size,
            crate::text::human::Base::Si,
            1,
            1,
        ));
    }
    if let (Some(l), Some(p)) = (d.logical_sector, d.physical_sector) {
        device.push(format!("sectors {l}/{p}"));
    }
    if let Some(r) = d.rotational {
        device.push(if r { "rotational" } else { "non-rotational" }.to_owned());
    }
    if let Some(s) = &d.scheduler {
        device.push(format!("scheduler {s}"));
    }
    if let Some(fs) = &d.filesystem {
        device.push(fs.clone());
    }
    lines.push(format!(
        "target: {} ({}), working set {}",
        t.path,
        t.kind,
        size_text(t.working_set_bytes)
    ));
    if !device.is_empty() {
        lines.push(format!("device: {}", device.join(", ")));
    }
    let runs = match report.settings.runs {
        1 => "one run".to_owned(),
        n => format!("median of {n} runs"),
    };
    let sweep = match report.settings.tests.contains(&"bs-sweep") {
        true => format!(" (bs-sweep: {} rounds)", report.settings.sweep_rounds),
        false => String::new(),
    };
    lines.push(format!(
        "each figure: {runs}{sweep} after {} warm-up; '!' marks a figure with an outlier run",
        report.settings.warmup_runs
    ));
    lines.push(format!("caches: {}", report.cache.method));
    if let Some(note) = &report.cache.note {
        lines.push(format!("caches: {note}"));
    }
    let rec = &report.recommendation;
    let bs = |b: Option<u64>| b.map_or("not measured".to_owned(), size_text);
    lines.push(format!(
        "recommended block size: read {}, write {} ({})",
        bs(rec.read_block_size),
        bs(rec.write_block_size),
        rec.rule
    ));
    for (op, judgement) in [("read", &rec.read), ("write", &rec.write)] {
        lines.extend(judgement.iter().flat_map(|j| judgement_lines(op, j)));
    }
    for skip in &report.skipped {
        let mode = skip.mode.map(|m| format!(" {m}")).unwrap_or_default();
        lines.push(format!("skipped {}{mode}: {}", skip.test, skip.reason));
    }
    for r in report.results.iter().filter(|r| r.note.is_some()) {
        lines.push(format!(
            "note {} {}: {}",
            r.test,
            r.mode,
            r.note.as_deref().unwrap_or_default()
        ));
    }
    lines.extend(report.notes.iter().map(|n| format!("note: {n}")));
    lines
}
