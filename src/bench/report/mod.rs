//! The ways to show a [`Report`]: a terminal table, JSON for machines,
//! Markdown for issues, HTML with charts for people. Each is an
//! [`Exporter`]; they only read the report (`bench::results`), so the four
//! can never tell different stories, and the tables and lines they share
//! are built here once. Every format shows the same parts in the same
//! order: the summary (CrystalDiskMark's rows) and how it was measured,
//! the recommended block size, the bs-sweep in the rule's own measure,
//! every other figure once with the way it was measured, then the facts.
//! Where two tests make the same requests and measure them otherwise
//! (the bs-sweep's median request against seq-read's wall time, a zone's
//! span against the whole working set), both figures are given side by
//! side with what differs, so no access pattern shows two figures
//! unexplained.

pub mod html;
pub mod json;
pub mod markdown;
pub mod table;

use super::results::{self, Figure, Report, TestResult};
use super::summary::{Cell, Summary};
use super::BenchError;
use crate::stats::recommend::{self, Judgement};

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

/// A table as text, which each format lays out its own way: a title
/// line saying what its figures are, the column names, which columns
/// hold numbers (right-aligned), and the cells.
#[derive(Debug, Clone)]
pub struct Table {
    pub title: String,
    pub header: Vec<&'static str>,
    pub numeric: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

/// The summary's cell text: the throughput, or "-" where nothing was
/// measured (the lines under the table say why).
fn cell_rate(cell: &Cell) -> String {
    cell.throughput_bytes_per_sec
        .map_or("-".to_owned(), rate_text)
}

fn cell_iops(cell: &Cell) -> String {
    cell.iops.map(iops_text).unwrap_or_default()
}

/// The first screen: CrystalDiskMark's rows, read and write.
pub fn summary_table(report: &Report) -> Table {
    Table {
        title: format!(
            "ddx bench: {} ({}), working set {}",
            report.target.path,
            report.target.kind,
            size_text(report.target.working_set_bytes)
        ),
        header: vec!["", "read", "read IOPS", "write", "write IOPS"],
        numeric: vec![false, true, true, true, true],
        rows: report
            .summary
            .rows
            .iter()
            .map(|row| {
                vec![
                    row.name.clone(),
                    cell_rate(&row.read),
                    cell_iops(&row.read),
                    cell_rate(&row.write),
                    cell_iops(&row.write),
                ]
            })
            .collect(),
    }
}

/// Under the summary: how its cells were measured, and why any is empty
/// (cells that share a reason share a line).
pub fn summary_notes(summary: &Summary) -> Vec<String> {
    let mut lines = vec![summary.method.clone()];
    let mut reasons: Vec<(String, Vec<String>)> = Vec::new();
    for row in &summary.rows {
        for (op, cell) in [("read", &row.read), ("write", &row.write)] {
            let Some(why) = &cell.missing else { continue };
            let name = format!("{} {op}", row.name);
            match reasons.iter_mut().find(|(r, _)| r == why) {
                Some((_, names)) => names.push(name),
                None => reasons.push((why.clone(), vec![name])),
            }
        }
    }
    for (why, names) in reasons {
        lines.push(format!("- {}: {why}", names.join(", ")));
    }
    lines.extend(gap_lines(summary));
    lines.extend(fio_way_lines(summary));
    if let Some(why) = &summary.not_the_device {
        lines.push(format!("- every cell: {why}"));
    }
    lines
}

/// Beside the rows whose write outran the read: by how much, and why
/// (rows with one reason share a line).
fn gap_lines(summary: &Summary) -> Vec<String> {
    let mut whys: Vec<(&str, Vec<String>)> = Vec::new();
    for row in &summary.rows {
        let Some(gap) = &row.writes_faster else {
            continue;
        };
        let text = format!("{} write {:.2}x its read", row.name, gap.ratio);
        match whys.iter_mut().find(|(why, _)| *why == gap.why) {
            Some((_, rows)) => rows.push(text),
            None => whys.push((&gap.why, vec![text])),
        }
    }
    whys.into_iter()
        .map(|(why, rows)| format!("- {}: {why}", rows.join(", ")))
        .collect()
}

/// Beside the cells fio's options cannot reproduce (ddx makes their
/// requests another way): each one's figure made fio's way, and what
/// differs (cells that differ alike share a line).
fn fio_way_lines(summary: &Summary) -> Vec<String> {
    let mut ways: Vec<(&str, Vec<String>)> = Vec::new();
    for row in &summary.rows {
        for (op, cell) in [("read", &row.read), ("write", &row.write)] {
            let Some(way) = &cell.fio_way else { continue };
            let figure = match row.pattern {
                "sequential" => rate_text(way.throughput_bytes_per_sec),
                _ => format!("{} IOPS", iops_text(way.iops)),
            };
            let mine = match row.pattern {
                "sequential" => cell
                    .throughput_bytes_per_sec
                    .map(|t| (t, way.throughput_bytes_per_sec)),
                _ => cell.iops.map(|n| (n, way.iops)),
            };
            let ratio = mine
                .filter(|(_, theirs)| *theirs > 0.0)
                .map(|(mine, theirs)| format!(", the cell {:.2}x that", mine / theirs))
                .unwrap_or_default();
            let text = format!("{} {op} {figure}{ratio}", row.name);
            match ways.iter_mut().find(|(d, _)| *d == way.differs) {
                Some((_, cells)) => cells.push(text),
                None => ways.push((&way.differs, vec![text])),
            }
        }
    }
    ways.into_iter()
        .map(|(differs, cells)| {
            format!(
                "- made fio's way, which its options reproduce: {}. {differs}.",
                cells.join("; ")
            )
        })
        .collect()
}

/// The recommendation, the rule and how firmly each answer was decided:
/// what the reports put right after the summary.
pub fn recommendation_lines(report: &Report) -> Vec<String> {
    let rec = &report.recommendation;
    let bs = |b: Option<u64>| b.map_or("not measured".to_owned(), size_text);
    let mut lines = vec![format!(
        "recommended block size: read {}, write {}",
        bs(rec.read_block_size),
        bs(rec.write_block_size),
    )];
    for op in ["read", "write"] {
        if let Some(judgement) = rec.judgement(op) {
            lines.push(verdict_line(op, judgement));
            lines.extend(judgement_lines(op, judgement));
        }
    }
    if rec.read.is_some() || rec.write.is_some() {
        lines.push(format!("rule: {}", rec.rule));
    }
    lines
}

/// The bs-sweep as its own table: one row per block size, both
/// directions side by side, in the rule's measure, which the title says.
pub fn sweep_table(report: &Report) -> Option<Table> {
    let sweep: Vec<&TestResult> = report
        .results
        .iter()
        .filter(|r| r.figure.test == "bs-sweep")
        .collect();
    let first = sweep.first()?;
    let mut sizes: Vec<u64> = sweep.iter().map(|r| r.figure.block_size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let find = |bs: u64, op: &str| {
        sweep
            .iter()
            .find(|r| r.figure.block_size == bs && r.figure.op == op)
    };
    let rate = |r: Option<&&TestResult>| {
        r.map(|r| {
            let flag = if r.has_outlier() { " !" } else { "" };
            format!("{}{flag}", rate_text(r.throughput_bytes_per_sec))
        })
        .unwrap_or_default()
    };
    let share = |r: Option<&&TestResult>| {
        r.and_then(|r| r.of_best)
            .map(percent_text)
            .unwrap_or_default()
    };
    let rec = &report.recommendation;
    let rows = sizes
        .iter()
        .map(|&bs| {
            let (read, write) = (find(bs, "read"), find(bs, "write"));
            let chosen: Vec<&str> = [
                ("read", rec.read_block_size),
                ("write", rec.write_block_size),
            ]
            .iter()
            .filter(|(_, b)| *b == Some(bs))
            .map(|(op, _)| *op)
            .collect();
            vec![
                size_text(bs),
                rate(read),
                share(read),
                rate(write),
                share(write),
                chosen.join(", "),
            ]
        })
        .collect();
    let rounds = report.settings.sweep_rounds;
    let mut engines: Vec<&str> = sweep.iter().map(|r| r.figure.engine).collect();
    engines.dedup();
    Some(Table {
        title: format!(
            "bs-sweep: {} sequential requests, one at a time ({}); each figure is the block \
             size over a round's median request time (a stall slows a few requests, not the \
             figure), the median of {rounds} rounds: the block-size rule's measure, not \
             bytes over wall time as every other figure",
            first.figure.io,
            engines.join(", ")
        ),
        header: vec!["bs", "read", "of best", "write", "of best", "recommended"],
        numeric: vec![true, true, true, true, true, false],
        rows,
    })
}

/// The figure of the same requests as `f` (mode, direction, pattern,
/// size, depth) that another test measured as bytes over a whole run's
/// wall time from offset 0: what `f`'s test measures otherwise.
fn same_requests<'a>(report: &'a Report, f: &Figure) -> Option<&'a TestResult> {
    report.results.iter().find(|r| {
        let g = &r.figure;
        g.test != f.test
            && r.same_as.is_none()
            && g.measure == results::Measure::Run
            && g.offset.is_none()
            && (g.mode, g.op, g.pattern, g.block_size, g.queue_depth)
                == (f.mode, f.op, f.pattern, f.block_size, f.queue_depth)
    })
}

/// Under the bs-sweep: where a size's requests are those another test
/// measured (seq-read's and seq-write's 1 MiB, one at a time), both
/// figures and how they differ, so two figures of one access pattern
/// never stand unexplained.
pub fn sweep_lines(report: &Report) -> Vec<String> {
    let seconds = report.settings.time_per_run_sec;
    let working_set = size_text(report.target.working_set_bytes);
    report
        .results
        .iter()
        .filter(|r| r.figure.test == "bs-sweep")
        .filter_map(|r| {
            let other = same_requests(report, &r.figure)?;
            Some(format!(
                "{} {}: the bs-sweep's {} and {} {}'s {} are the same requests ({}, one at a \
                 time) measured two ways: here the block size over the median request time, \
                 in passes of at most {seconds} s; there bytes over the wall time of whole \
                 passes over the {working_set} working set, the slower requests and the time \
                 between requests included",
                size_text(r.figure.block_size),
                r.figure.op,
                rate_text(r.throughput_bytes_per_sec),
                other.figure.test,
                other.figure.mode,
                rate_text(other.throughput_bytes_per_sec),
                r.figure.io,
            ))
        })
        .collect()
}

/// Under the details: what a zone reads, which the sequential test of
/// the same requests does not (a span at its offset, against the whole
/// working set), so the zones and that figure are not taken for one
/// quantity measured twice.
pub fn zones_lines(report: &Report) -> Vec<String> {
    let zones: Vec<&TestResult> = report
        .results
        .iter()
        .filter(|r| r.figure.test == "zones")
        .collect();
    let Some(first) = zones.first() else {
        return Vec::new();
    };
    let span = first.runs.first().map_or(0, |run| run.bytes);
    let rates: Vec<f64> = zones.iter().map(|r| r.throughput_bytes_per_sec).collect();
    let low = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let high = rates.iter().copied().fold(0.0, f64::max);
    let working_set = report.target.working_set_bytes;
    let mut line = format!(
        "zones: each of the {} figures ({}..{}) reads {} from its offset, again in every \
         run",
        zones.len(),
        rate_text(low),
        rate_text(high),
        size_text(span)
    );
    let from_start = Figure {
        offset: None,
        ..first.figure
    };
    if let Some(other) = same_requests(report, &from_start).filter(|_| span < working_set) {
        line.push_str(&format!(
            "; {} {} ({}) makes the same requests over the whole {} working set: other \
             spans, not one quantity measured twice, and a cache that holds {} but not {} \
             (a disk's, or the host's page cache under a loop device) answers the zones \
             faster",
            other.figure.test,
            other.figure.mode,
            rate_text(other.throughput_bytes_per_sec),
            size_text(working_set),
            size_text(span),
            size_text(working_set),
        ));
    }
    vec![line]
}

/// Every figure but the bs-sweep's, each once, as measured.
pub fn details_table(report: &Report) -> Table {
    let runs = match report.settings.runs {
        1 => "one run".to_owned(),
        n => format!("the median of {n} runs"),
    };
    let rows = report
        .results
        .iter()
        .filter(|r| r.figure.test != "bs-sweep")
        .map(|r| {
            let f = &r.figure;
            let (p50, p99) = r.latency_ns.map_or((String::new(), String::new()), |l| {
                (latency_text(l.p50 as f64), latency_text(l.p99 as f64))
            });
            let flag = if r.has_outlier() { " !" } else { "" };
            vec![
                f.test.to_owned(),
                f.mode.to_owned(),
                f.op.to_owned(),
                f.pattern.to_owned(),
                size_text(f.block_size),
                f.queue_depth.to_string(),
                f.engine.to_owned(),
                f.offset.map(size_text).unwrap_or_default(),
                format!("{}{flag}", rate_text(r.throughput_bytes_per_sec)),
                format!("{}..{}", short_rate(r.min), short_rate(r.max)),
                iops_text(r.iops),
                p50,
                p99,
                format!("{:.0}%", r.cpu_percent),
            ]
        })
        .collect();
    Table {
        title: format!(
            "details: each figure is bytes over a run's wall time, {runs} after a warm-up \
             run; qd: requests in flight; '!' marks a figure with an outlier run"
        ),
        header: vec![
            "test",
            "mode",
            "op",
            "pattern",
            "bs",
            "qd",
            "engine",
            "offset",
            "throughput",
            "min..max",
            "IOPS",
            "p50",
            "p99",
            "CPU",
        ],
        numeric: vec![
            false, false, false, false, true, true, false, true, true, true, true, true, true, true,
        ],
        rows,
    }
}

/// A rate without the "/s", for the min..max column.
fn short_rate(bytes_per_sec: f64) -> String {
    let text = round_rate_text(bytes_per_sec);
    text.trim_end_matches("/s").to_owned()
}

/// How one direction's answer was reached, in the figures the table
/// prints: the best, the bar as a share of the best (the denominator of
/// the rule's floor and of every share printed), what set the bar, and
/// the answer's share.
fn verdict_line(op: &str, judgement: &Judgement) -> String {
    let set_by = if judgement.at_floor {
        format!(
            "the floor, {:.0}% of the best: {:.0}% of {} ({}) less the noise is lower",
            recommend::FLOOR * 100.0,
            recommend::NEAR_BEST * 100.0,
            rate_text(judgement.reference_bytes_per_sec),
            judgement.reference.text(),
        )
    } else {
        format!(
            "{:.1}% of {}, {}: {:.0}% less the noise",
            judgement.bar_of_reference * 100.0,
            rate_text(judgement.reference_bytes_per_sec),
            judgement.reference.text(),
            recommend::NEAR_BEST * 100.0,
        )
    };
    format!(
        "{op}: {} at {} of the best ({} at {}) is the smallest size at or over the bar of {} \
         of the best ({}; {set_by})",
        size_text(judgement.block_size),
        percent_text(judgement.of_best),
        rate_text(judgement.best_bytes_per_sec),
        size_text(judgement.best_block_size),
        percent_text(judgement.bar),
        rate_text(judgement.bar_bytes_per_sec),
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

/// The line that comes before everything when the bench was cut short.
pub fn interrupted_line(report: &Report) -> Option<String> {
    report.interrupted.map(|signal| {
        format!("interrupted by {signal}: the figures are from the runs completed before it")
    })
}

/// The facts under the details: the target, the device, the runs, the
/// caches, what each mode means, what was skipped and the notes.
pub fn fact_lines(report: &Report) -> Vec<String> {
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
    lines.push(format!("caches: {}", report.cache.method));
    if let Some(note) = &report.cache.note {
        lines.push(format!("caches: {note}"));
    }
    let mut modes: Vec<&str> = Vec::new();
    for r in &report.results {
        if !modes.contains(&r.figure.mode) {
            modes.push(r.figure.mode);
        }
    }
    let meanings: Vec<String> = modes
        .iter()
        .map(|m| format!("{m} = {}", results::io_text(m)))
        .collect();
    if !meanings.is_empty() {
        lines.push(format!("modes: {}", meanings.join("; ")));
    }
    for skip in &report.skipped {
        let mode = skip.mode.map(|m| format!(" {m}")).unwrap_or_default();
        let op = skip.op.map(|o| format!(" {o}")).unwrap_or_default();
        let depth = skip
            .queue_depth
            .map(|d| format!(" qd {d}"))
            .unwrap_or_default();
        lines.push(format!(
            "skipped {}{mode}{op}{depth}: {}",
            skip.test, skip.reason
        ));
    }
    for r in &report.results {
        if let Some(note) = &r.note {
            lines.push(format!("note {} {}: {note}", r.figure.test, r.figure.mode));
        }
        if let Some(first) = r.same_as {
            let f = &r.figure;
            lines.push(format!(
                "note {} {} {} {} qd {}: the {first} test measured this quantity; shown \
                 again, not measured twice",
                f.test,
                f.mode,
                f.op,
                size_text(f.block_size),
                f.queue_depth
            ));
        }
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
            best_block_size: 4 << 20,
            bar: 0.93,
            bar_bytes_per_sec: 0.977e9,
            reference: crate::stats::recommend::Reference::Plateau,
            reference_bytes_per_sec: 1.03e9,
            bar_of_reference: 0.9486,
            at_floor: false,
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
            "read: 1 MiB at 98.0% of the best (1.05 GB/s at 4 MiB) is the smallest size at \
             or over the bar of 93.0% of the best (977 MB/s; 94.9% of 1.03 GB/s, the median \
             of the three highest: 95% less the noise)"
        );
        let floored = Judgement {
            best_bytes_per_sec: 1.1e9,
            bar: 0.85,
            bar_bytes_per_sec: 0.935e9,
            bar_of_reference: 0.935 / 1.03,
            at_floor: true,
            ..firm()
        };
        assert_eq!(
            verdict_line("read", &floored),
            "read: 1 MiB at 98.0% of the best (1.10 GB/s at 4 MiB) is the smallest size at \
             or over the bar of 85.0% of the best (935 MB/s; the floor, 85% of the best: 95% \
             of 1.03 GB/s (the median of the three highest) less the noise is lower)"
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

    use crate::bench::testing::{self, MIB};

    fn full() -> Report {
        testing::report(testing::outcome(), testing::all_tests())
    }

    /// The highest bs-sweep figure (16 MiB) is above the median of the
    /// three highest, which the bar is a share of; every share printed is
    /// of the highest, so none is above 100%, in the JSON or the tables.
    #[test]
    fn no_share_of_the_best_is_above_100_percent() {
        let report = full();
        for op in ["read", "write"] {
            let j = report.recommendation.judgement(op).unwrap();
            assert_eq!(j.best_block_size, 16 << 20, "{op}");
            assert!(j.reference_bytes_per_sec < j.best_bytes_per_sec, "{op}");
            assert!(j.of_best <= 1.0 && j.of_best >= j.bar, "{op}: {j:?}");
        }
        let shares: Vec<f64> = report.results.iter().filter_map(|r| r.of_best).collect();
        assert_eq!(shares.len(), 26);
        assert!(shares.iter().all(|&s| s <= 1.0), "{shares:?}");
        assert!(shares.contains(&1.0));
        let sweep = sweep_table(&report).unwrap();
        for row in &sweep.rows {
            for cell in [&row[2], &row[4]] {
                let percent: f64 = cell.trim_end_matches('%').parse().unwrap();
                assert!(percent <= 100.0, "{row:?}");
            }
        }
        // Read at 1 MiB: 1.2 GB/s of the best, 1.236 GB/s.
        let mib = sweep.rows.iter().find(|r| r[0] == "1 MiB").unwrap();
        assert_eq!(mib[2], "97.1%");
        assert_eq!(mib[5], "read, write");
    }

    /// The summary's cells are the details' figures: the same text for
    /// the same quantity, in CrystalDiskMark's rows.
    #[test]
    fn the_summary_shows_the_figures_the_details_show() {
        let report = full();
        let summary = summary_table(&report);
        let names: Vec<&str> = summary.rows.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(
            names,
            ["SEQ1M Q8T1", "SEQ1M Q1T1", "RND4K Q32T1", "RND4K Q1T1"]
        );
        let cells: Vec<[&str; 4]> = summary
            .rows
            .iter()
            .map(|r| [&*r[1], &*r[2], &*r[3], &*r[4]])
            .collect();
        assert_eq!(
            cells,
            [
                ["1.60 GB/s", "1526", "1.20 GB/s", "1144"],
                ["800 MB/s", "763", "600 MB/s", "572"],
                ["400 MB/s", "97.7k", "200 MB/s", "48.8k"],
                ["40.0 MB/s", "9764", "20.0 MB/s", "4880"],
            ]
        );
        let details = details_table(&report);
        let detail = |test: &str, op: &str, qd: &str| -> String {
            let row = details
                .rows
                .iter()
                .find(|r| r[0] == test && r[1] == "direct" && r[2] == op && r[5] == qd)
                .unwrap_or_else(|| panic!("no {test} {op} qd {qd}"));
            row[8].clone()
        };
        for (row, (test, qd)) in summary.rows.iter().zip([
            ("seq", "8"),
            ("seq", "1"),
            ("qd-sweep", "32"),
            ("qd-sweep", "1"),
        ]) {
            let (read, write) = match test {
                "seq" => ("seq-read", "seq-write"),
                _ => ("qd-sweep", "qd-sweep"),
            };
            assert_eq!(row[1], detail(read, "read", qd), "{row:?}");
            assert_eq!(row[3], detail(write, "write", qd), "{row:?}");
        }
    }

    /// Each quantity once: no two rows of the details say the same mode,
    /// direction, pattern, size, depth and offset; the bs-sweep, in
    /// another measure, is a table of its own whose title says so.
    #[test]
    fn each_quantity_is_printed_once() {
        let report = full();
        let details = details_table(&report);
        let mut seen = std::collections::HashSet::new();
        for row in &details.rows {
            let label = (&row[1], &row[2], &row[3], &row[4], &row[5], &row[7]);
            assert!(seen.insert(label), "twice: {row:?}");
        }
        assert!(details.rows.iter().all(|r| r[0] != "bs-sweep"));
        assert!(details.title.contains("bytes over a run's wall time"));
        let sweep = sweep_table(&report).unwrap();
        assert!(sweep
            .title
            .contains("block size over a round's median request time"));
        assert!(sweep.title.contains("not bytes over wall time"));
        // The latency test's O_DIRECT|O_DSYNC write is not seq-write's
        // O_DSYNC one, and the modes say so.
        let modes = fact_lines(&report)
            .into_iter()
            .find(|l| l.starts_with("modes: "))
            .unwrap();
        assert!(modes.contains("dsync = O_DSYNC;"), "{modes}");
        assert!(modes.contains("direct+dsync = O_DIRECT|O_DSYNC"), "{modes}");
    }

    /// Two figures of one access pattern never stand unexplained: the
    /// bs-sweep's 1 MiB figures and seq-read's and seq-write's O_DIRECT
    /// ones are given side by side with how they differ, and the zones
    /// say what span they read against seq-read's working set; every
    /// format prints those lines.
    #[test]
    fn figures_of_the_same_requests_say_how_they_differ() {
        let report = full();
        let figure = |test: &str, op: &str| {
            let r = report
                .results
                .iter()
                .find(|r| {
                    let f = &r.figure;
                    (f.test, f.mode, f.op) == (test, "direct", op)
                        && (f.block_size, f.queue_depth) == (MIB, 1)
                })
                .unwrap();
            rate_text(r.throughput_bytes_per_sec)
        };
        let lines = sweep_lines(&report);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        for (line, op) in lines.iter().zip(["read", "write"]) {
            let seq = format!("seq-{op}");
            let expected = format!(
                "1 MiB {op}: the bs-sweep's {} and {seq} direct's {} are the same requests \
                 (O_DIRECT, one at a time) measured two ways: here the block size over the \
                 median request time, in passes of at most 0.25 s; there bytes over the wall \
                 time of whole passes over the 256 MiB working set",
                figure("bs-sweep", op),
                figure(&seq, op),
            );
            assert!(line.starts_with(&expected), "{line}\n{expected}");
        }
        let zones = zones_lines(&report);
        assert_eq!(
            zones,
            [
                "zones: each of the 4 figures (650 MB/s..800 MB/s) reads 16 MiB from its offset, \
              again in every run; seq-read direct (800 MB/s) makes the same requests over the \
              whole 256 MiB working set: other spans, not one quantity measured twice, and a \
              cache that holds 16 MiB but not 256 MiB (a disk's, or the host's page cache \
              under a loop device) answers the zones faster"
            ]
        );
        let exported = [
            table::Table.export(&report).unwrap(),
            markdown::Markdown.export(&report).unwrap(),
        ];
        for text in exported {
            for line in lines.iter().chain(&zones) {
                assert!(text.contains(line.as_str()), "{line}: {text}");
            }
        }
    }

    /// The rule's floor and the bar a verdict prints are shares of one
    /// thing, the best: on curves noisy enough that the floor sets the
    /// bar, the printed bar is the stated floor, never below it, and the
    /// verdict says the floor set it.
    #[test]
    fn the_stated_floor_holds_on_the_printed_bar() {
        let rule = results::rule_text();
        let floor: f64 = rule
            .split_once("never below ")
            .and_then(|(_, rest)| rest.split_once("% of the best"))
            .map(|(n, _)| n.parse().unwrap())
            .unwrap_or_else(|| panic!("no floor of the best in {rule}"));
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut noise = move || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let unit =
                (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64;
            0.6 + 0.8 * unit
        };
        let mut floored = 0;
        for _ in 0..40 {
            let points: Vec<(u64, Vec<f64>)> = (0..6)
                .map(|k| (MIB << k, (0..3).map(|_| 1e9 * noise()).collect()))
                .collect();
            let j = recommend::judge(&points, recommend::NEAR_BEST).unwrap();
            let line = verdict_line("read", &j);
            let bar: f64 = line
                .split_once("the bar of ")
                .and_then(|(_, rest)| rest.split_once("% of the best"))
                .map(|(n, _)| n.parse().unwrap())
                .unwrap_or_else(|| panic!("no bar of the best in {line}"));
            assert!(bar >= floor, "{line} under the rule's floor: {rule}");
            if j.at_floor {
                floored += 1;
                assert!(line.contains("the floor, 85% of the best"), "{line}");
            }
        }
        assert!(floored > 0, "no curve was noisy enough to reach the floor");
    }

    /// Every format puts the summary first and the recommendation right
    /// after it, before the details and the facts.
    #[test]
    fn every_format_leads_with_the_summary_then_the_recommendation() {
        let report = full();
        let in_order = |text: &str, marks: &[&str]| {
            let at: Vec<usize> = marks
                .iter()
                .map(|m| text.find(m).unwrap_or_else(|| panic!("no {m:?} in {text}")))
                .collect();
            assert!(at.windows(2).all(|w| w[0] < w[1]), "{marks:?} at {at:?}");
        };
        let table = table::Table.export(&report).unwrap();
        let first: Vec<&str> = table.lines().take(7).collect();
        assert!(first[0].starts_with("ddx bench: /var/tmp/bench"), "{table}");
        assert!(first[3].starts_with("SEQ1M Q8T1"), "{table}");
        assert!(first[6].starts_with("RND4K Q1T1"), "{table}");
        in_order(
            &table,
            &[
                "SEQ1M Q8T1",
                "recommended block size: read 1 MiB, write 1 MiB",
                "bs-sweep: O_DIRECT",
                "details:",
                "\nseq-read ",
                "target: ",
            ],
        );
        let markdown = markdown::Markdown.export(&report).unwrap();
        assert!(
            markdown.starts_with("### ddx bench: /var/tmp/bench"),
            "{markdown}"
        );
        in_order(
            &markdown,
            &[
                "| SEQ1M Q8T1 | 1.60 GB/s |",
                "**recommended block size: read 1 MiB, write 1 MiB**",
                "#### bs-sweep",
                "#### Details",
                "#### About this run",
            ],
        );
        let page = html::Html.export(&report).unwrap();
        in_order(
            &page,
            &[
                "<table class=\"summary\">",
                "<tr data-row=\"SEQ1M Q8T1\">",
                "<p class=\"answer\">recommended block size",
                "<svg",
                "<table id=\"details\">",
                "<ul class=\"facts\">",
            ],
        );
        let json = json::Json.export(&report).unwrap();
        in_order(
            &json,
            &[
                "\"schema_version\": 3",
                "\"summary\": {",
                "\"name\": \"SEQ1M Q8T1\"",
                "\"recommendation\": {",
                "\"results\": [",
            ],
        );
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
