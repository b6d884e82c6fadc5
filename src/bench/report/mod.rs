//! The ways to show a [`Report`]: a terminal table, JSON for machines,
//! Markdown for issues, HTML with charts for people. Each is an
//! [`Exporter`]; they only read the report (`bench::results`), so the four
//! can never tell different stories, and the rows and lines the text
//! formats share are built here once.

pub mod html;
pub mod json;
pub mod markdown;
pub mod table;

use super::results::Report;
use super::BenchError;
use crate::stats::recommend::Judgement;

pub use crate::text::human::{rate_text, size_text};

/// One way to show a report.
pub trait Exporter {
    /// The report as this format's text.
    fn export(&self, report: &Report) -> Result<String, BenchError>;
}

/// A rate rounded as GNU rounds it ("1.2 GB/s"): for chart axes, where
/// the values are round anyway.
pub fn round_rate_text(bytes_per_sec: f64) -> String {
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

/// A share as the reports print it, to a tenth of a percent: enough to
/// check a figure against a bar of 95%.
pub fn percent_text(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// One line of the result table, as text, shared by the terminal,
/// Markdown and HTML tables.
#[derive(Debug, Clone)]
pub struct Row {
    pub cells: Vec<String>,
}

pub const COLUMNS: [&str; 13] = [
    "test",
    "mode",
    "op",
    "bs",
    "qd",
    "offset",
    "throughput",
    "of best",
    "min..max",
    "IOPS",
    "p50",
    "p99",
    "CPU",
];

/// Which columns are right-aligned (numbers).
pub const NUMERIC: [bool; 13] = [
    false, false, false, true, true, true, true, true, true, true, true, true, true,
];

pub fn rows(report: &Report) -> Vec<Row> {
    report
        .results
        .iter()
        .map(|r| {
            let f = &r.figure;
            let (p50, p99) = r.latency_ns.map_or((String::new(), String::new()), |l| {
                (latency_text(l.p50 as f64), latency_text(l.p99 as f64))
            });
            let flag = if r.has_outlier() { " !" } else { "" };
            Row {
                cells: vec![
                    f.test.to_owned(),
                    f.mode.to_owned(),
                    f.op.to_owned(),
                    size_text(f.block_size),
                    f.queue_depth.to_string(),
                    f.offset.map(size_text).unwrap_or_default(),
                    format!("{}{flag}", rate_text(r.throughput_bytes_per_sec)),
                    r.of_best.map(percent_text).unwrap_or_default(),
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
    let text = round_rate_text(bytes_per_sec);
    text.trim_end_matches("/s").to_owned()
}

/// How one direction's answer was reached, in the figures the table
/// prints: the best, the bar, and the answer's share.
fn verdict_line(op: &str, judgement: &Judgement) -> String {
    format!(
        "{op}: {} at {} of the best ({}) is the smallest size at or over the bar of {}",
        size_text(judgement.block_size),
        percent_text(judgement.of_best),
        rate_text(judgement.best_bytes_per_sec),
        percent_text(judgement.bar),
    )
}

/// What a user should know before trusting one run's recommendation: a
/// neighbour within the noise, a target whose speed moved.
fn judgement_lines(op: &str, judgement: &Judgement) -> Vec<String> {
    let mut lines = Vec::new();
    if !judgement.close_calls.is_empty() {
        let measured: Vec<String> = judgement
            .close_calls
            .iter()
            .map(|c| format!("{} {}", size_text(c.block_size), percent_text(c.of_best)))
            .collect();
        let others: Vec<String> = judgement
            .close_calls
            .iter()
            .map(|c| size_text(c.block_size))
            .collect();
        lines.push(format!(
            "note: {op}: {} measured {} of the best, {}: too close to the bar of {} \
             for this run's noise to tell apart; another run may recommend {}",
            size_text(judgement.block_size),
            percent_text(judgement.of_best),
            measured.join(", "),
            percent_text(judgement.bar),
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
    if let Some(signal) = report.interrupted {
        lines.push(format!(
            "interrupted by {signal}: the figures are from the runs completed before it"
        ));
    }
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
        "recommended block size: read {}, write {}",
        bs(rec.read_block_size),
        bs(rec.write_block_size),
    ));
    if rec.read.is_some() || rec.write.is_some() {
        lines.push(format!("rule: {}", rec.rule));
    }
    for op in ["read", "write"] {
        if let Some(judgement) = rec.judgement(op) {
            lines.push(verdict_line(op, judgement));
            lines.extend(judgement_lines(op, judgement));
        }
    }
    for skip in &report.skipped {
        let mode = skip.mode.map(|m| format!(" {m}")).unwrap_or_default();
        lines.push(format!("skipped {}{mode}: {}", skip.test, skip.reason));
    }
    for r in report.results.iter().filter(|r| r.note.is_some()) {
        lines.push(format!(
            "note {} {}: {}",
            r.figure.test,
            r.figure.mode,
            r.note.as_deref().unwrap_or_default()
        ));
    }
    lines.extend(report.notes.iter().map(|n| format!("note: {n}")));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn firm() -> Judgement {
        Judgement {
            block_size: 1 << 20,
            of_best: 0.98,
            best_bytes_per_sec: 1.05e9,
            bar: 0.93,
            close_calls: vec![],
            plateau_low: 1.0e9,
            plateau_high: 1.1e9,
            steady: true,
            figures: vec![],
        }
    }

    #[test]
    fn a_verdict_names_its_figures() {
        assert_eq!(
            verdict_line("read", &firm()),
            "read: 1 MiB at 98.0% of the best (1.05 GB/s) is the smallest size at or over \
             the bar of 93.0%"
        );
    }

    #[test]
    fn a_close_call_and_a_moving_target_are_said() {
        use crate::stats::recommend::Neighbour;
        let firm = firm();
        assert!(judgement_lines("read", &firm).is_empty());
        let shaky = Judgement {
            close_calls: vec![Neighbour {
                block_size: 512 << 10,
                of_best: 0.925,
            }],
            plateau_low: 0.6e9,
            steady: false,
            ..firm.clone()
        };
        let lines = judgement_lines("write", &shaky);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(
            lines[0],
            "note: write: 1 MiB measured 98.0% of the best, 512 KiB 92.5%: too close to the \
             bar of 93.0% for this run's noise to tell apart; another run may recommend 512 KiB"
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
                "note: read: 1 MiB measured 98.0% of the best, 512 KiB 82.0%, 2 MiB 100.0%: \
                 too close to the bar of 93.0% for this run's noise to tell apart; another \
                 run may recommend 512 KiB or 2 MiB"
            ]
        );
        assert!(lines[1].contains("from 600 MB/s to 1.10 GB/s"), "{lines:?}");
    }

    /// Each formatter against the texts it must print.
    #[test]
    fn texts() {
        type Format = fn(f64) -> String;
        let cases: [(Format, f64, &str); 7] = [
            (latency_text, 85_300.0, "85.3 µs"),
            (latency_text, 1_204_000.0, "1.20 ms"),
            (latency_text, 950.0, "950 ns"),
            (iops_text, 12_345.0, "12.3k"),
            (iops_text, 2.5e6, "2.50M"),
            (round_rate_text, 1.5e9, "1.5 GB/s"),
            (percent_text, 0.9549, "95.5%"),
        ];
        for (format, value, text) in cases {
            assert_eq!(format(value), text, "{value}");
        }
    }
}
