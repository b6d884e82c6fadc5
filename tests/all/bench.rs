//! `ddx bench` through the real binary: the JSON carries what the issue
//! promises, the recommendation's rule holds on the figures every report
//! prints, the HTML labels each line where it is drawn, a directory is
//! left as it was (also after SIGINT/SIGTERM, which keep the report), the
//! bench refuses what the copy's guard refuses in the copy's words and a
//! target in memory unless asked, a block device is never written without
//! --destructive, and its options and errors read as the rest of ddx.
//!
//! Device tests need root and util-linux; where the machine cannot give
//! them a loop device or a mount they skip through `rigs::skip`. Nothing
//! here touches a real disk: every device is a loop device over a file in
//! a temp dir, every memory filesystem is mounted by the test in one.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::rigs;
use crate::rigs::bytes::sha256;
use crate::rigs::nbd::{nbdkit, nbdkit_in};

/// One quick run of the sequential reads, as JSON.
const ONE_READ: [&str; 3] = ["--tests=seq-read", "--runs=1", "--json"];

/// Quick settings: seconds, not minutes, per bench.
const QUICK: [&str; 5] = [
    "--size=8M",
    "--runs=2",
    "--time-per-run=0.02",
    "--latency-count=40",
    "--zones=4",
];

/// A temp dir on the build's filesystem (O_DIRECT needs a real one;
/// /tmp may be tmpfs).
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// `ddx bench`, named "ddx", in the C locale.
fn ddx_bench() -> Command {
    let mut cmd = rigs::cmd::ddx();
    cmd.arg("bench");
    cmd
}

fn bench(args: &[&str]) -> Output {
    ddx_bench().args(args).output().unwrap()
}

fn quick(args: &[&str]) -> Output {
    bench(&[args, &QUICK].concat())
}

fn listing(dir: &Path) -> Vec<(String, u64)> {
    let mut entries: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    entries.sort();
    entries
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// The report's `list` ("results" or "skipped") entries for `test`.
fn entries<'a>(report: &'a Value, list: &str, test: &str) -> Vec<&'a Value> {
    report[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} list in {report}"))
        .iter()
        .filter(|r| r["test"] == test)
        .collect()
}

fn results<'a>(report: &'a Value, test: &str) -> Vec<&'a Value> {
    entries(report, "results", test)
}

fn f64_of(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

/// The one stderr line of a failed bench, without "ddx bench: ", after
/// checking the exit status and getopt's hint where it belongs.
fn failure(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    let first = err.lines().next().unwrap_or_default();
    first
        .strip_prefix("ddx bench: ")
        .unwrap_or_else(|| panic!("not a bench error: {err}"))
        .to_owned()
}

#[test]
fn json_carries_every_required_field() {
    let dir = scratch();
    std::fs::write(dir.path().join("keep"), b"mine").unwrap();
    let before = listing(dir.path());
    let target = dir.path().to_str().unwrap();
    let out = quick(&[target, "--json"]);
    let report = json_of(&out);
    assert_eq!(listing(dir.path()), before, "the directory changed");
    leads_with_the_summary(&String::from_utf8_lossy(&out.stdout));

    assert_eq!(report["schema_version"], 3);
    assert_eq!(report["interrupted"], Value::Null);
    for key in [
        "model",
        "size_bytes",
        "logical_sector",
        "physical_sector",
        "rotational",
        "scheduler",
        "filesystem",
    ] {
        assert!(report["target"].get(key).is_some(), "target.{key} missing");
    }
    assert!(report["target"]["filesystem"].is_string());
    assert_eq!(report["settings"]["runs"], 2);

    // Every test ran (all are the default) and gave figures.
    let tests = report["settings"]["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 6, "{tests:?}");
    for test in tests.iter().map(|t| t.as_str().unwrap()) {
        let found = results(&report, test);
        assert!(!found.is_empty(), "no {test} results");
        for r in found {
            for key in [
                "mode",
                "io",
                "engine",
                "block_size",
                "queue_depth",
                "min",
                "max",
            ] {
                assert!(!r[key].is_null(), "{test}.{key} missing: {r}");
            }
            let measure = if test == "bs-sweep" {
                "median_request"
            } else {
                "run"
            };
            assert_eq!(r["throughput_measure"], measure, "{r}");
            let median = f64_of(&r["throughput_bytes_per_sec"]);
            let (min, max) = (f64_of(&r["min"]), f64_of(&r["max"]));
            assert!(median > 0.0 && min <= median && median <= max, "{r}");
            let runs = r["runs"].as_array().unwrap();
            // bs-sweep measures twice as many rounds, for the recommendation.
            let expected = if test == "bs-sweep" { 4 } else { 2 };
            assert_eq!(runs.len(), expected, "every measured run is kept: {r}");
            assert!(runs.iter().all(|run| run["bytes"].as_u64().unwrap() > 0));
            // The figure is the median of the runs it keeps, in its measure.
            let throughputs: Vec<f64> = runs
                .iter()
                .map(|run| f64_of(&run["throughput_bytes_per_sec"]))
                .collect();
            // (To the last bits: serde_json's parser may round the last.)
            let recomputed = ddx::stats::median(&throughputs).unwrap();
            assert!((recomputed - median).abs() <= 1e-12 * median, "{r}");
            if test == "bs-sweep" {
                for (run, t) in runs.iter().zip(&throughputs) {
                    let ns = run["request_median_ns"].as_u64().unwrap();
                    let bs = r["block_size"].as_u64().unwrap();
                    let expected = bs as f64 * 1e9 / ns as f64;
                    assert!((t - expected).abs() <= 1e-12 * expected, "{run}");
                }
            }
            // One at a time by pread or pwrite, several through io_uring.
            let engine = r["engine"].as_str().unwrap();
            match r["queue_depth"].as_u64().unwrap() {
                1 if r["op"] == "read" => assert_eq!(engine, "pread", "{r}"),
                1 => assert_eq!(engine, "pwrite", "{r}"),
                _ => assert_eq!(engine, "io_uring", "{r}"),
            }
        }
    }
    let modes = |test: &str| -> Vec<(String, u64)> {
        results(&report, test)
            .iter()
            .map(|r| {
                let mode = r["mode"].as_str().unwrap().to_owned();
                (mode, r["queue_depth"].as_u64().unwrap())
            })
            .collect()
    };
    let expected: Vec<(String, u64)> = [
        ("buffered", 1),
        ("fdatasync", 1),
        ("fsync", 1),
        ("dsync", 1),
        ("sync", 1),
        ("direct", 1),
        ("direct", 8),
    ]
    .iter()
    .map(|&(m, q)| (m.to_owned(), q))
    .collect();
    assert_eq!(modes("seq-write"), expected);
    let expected: Vec<(String, u64)> = [("direct", 1), ("direct", 8), ("cached", 1)]
        .iter()
        .map(|&(m, q)| (m.to_owned(), q))
        .collect();
    assert_eq!(modes("seq-read"), expected);

    for r in results(&report, "latency") {
        let l = &r["latency_ns"];
        for key in ["min", "mean", "p50", "p90", "p99", "p999", "max"] {
            assert!(f64_of(&l[key]) > 0.0, "latency_ns.{key}: {r}");
        }
        assert!(l["p50"].as_u64() <= l["p99"].as_u64());
        assert!(l["p99"].as_u64() <= l["max"].as_u64());
        // 40 requests in each of 2 runs, every one kept.
        assert_eq!(r["latency_samples_ns"].as_array().unwrap().len(), 80);
        let mode = if r["op"] == "write" {
            "direct+dsync"
        } else {
            "direct"
        };
        assert_eq!(r["mode"], mode, "{r}");
    }
    for op in ["read", "write"] {
        let depths: Vec<u64> = results(&report, "qd-sweep")
            .iter()
            .filter(|r| r["op"] == op)
            .map(|r| r["queue_depth"].as_u64().unwrap())
            .collect();
        assert!(
            depths == [1, 4, 16, 32, 64] || depths == [1],
            "{op}: {depths:?}"
        );
    }
    assert_eq!(results(&report, "zones").len(), 4);
    let sweep = results(&report, "bs-sweep");
    assert!(sweep
        .iter()
        .any(|r| r["block_size"] == 512 || r["block_size"] == 4096));
    assert!(sweep.iter().any(|r| r["block_size"] == 8 << 20));
    the_rule_holds_on_the_json(&report);
    the_summary_is_the_details_figures(&report);
    each_quantity_is_one_figure(&report);
}

/// The JSON's first keys are its version, the summary and the
/// recommendation, before the target and the details (read from the text:
/// `Value` sorts its keys).
fn leads_with_the_summary(json: &str) {
    let at = |key: &str| {
        json.find(&format!("\"{key}\":"))
            .unwrap_or_else(|| panic!("no {key} in {json}"))
    };
    let first = [at("schema_version"), at("summary"), at("recommendation")];
    assert!(first.windows(2).all(|w| w[0] < w[1]), "{first:?}: {json}");
    for later in ["target", "settings", "results"] {
        assert!(first[2] < at(later), "{later} before the recommendation");
    }
}

/// The summary leads the JSON: CrystalDiskMark's four rows, each cell the
/// figure of the detail test that measured that quantity (the same
/// number), with fio's options for the same requests.
fn the_summary_is_the_details_figures(report: &Value) {
    let rows = report["summary"]["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let sector = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["test"] == "qd-sweep")
        .map(|r| r["block_size"].as_u64().unwrap())
        .unwrap();
    let rnd = if sector == 4096 { "RND4K" } else { "RND" };
    assert_eq!(names[..2], ["SEQ1M Q8T1", "SEQ1M Q1T1"]);
    assert!(
        names[2].starts_with(rnd) && names[2].ends_with(" Q32T1"),
        "{names:?}"
    );
    assert!(
        names[3].starts_with(rnd) && names[3].ends_with(" Q1T1"),
        "{names:?}"
    );
    for row in rows {
        let depth = row["queue_depth"].as_u64().unwrap();
        for op in ["read", "write"] {
            let cell = &row[op];
            let test = cell["test"].as_str().unwrap();
            let figure = results(report, test)
                .into_iter()
                .find(|r| {
                    r["op"] == op
                        && r["queue_depth"] == depth
                        && r["mode"] == "direct"
                        && r["pattern"] == row["pattern"]
                })
                .unwrap_or_else(|| panic!("{}: no {test} {op} figure", row["name"]));
            assert_eq!(
                cell["throughput_bytes_per_sec"], figure["throughput_bytes_per_sec"],
                "{}",
                row["name"]
            );
            assert_eq!(cell["iops"], figure["iops"]);
            let fio = cell["fio"].as_str().unwrap();
            assert!(fio.contains(&format!("--iodepth={depth} ")), "{fio}");
            assert!(
                fio.contains(&format!("--bs={} ", row["block_size"])),
                "{fio}"
            );
        }
    }
}

/// One quantity, one figure: figures that say the same mode, direction,
/// pattern, block size, queue depth, offset and measure are one
/// measurement (the same numbers, the later ones naming the first test in
/// `same_as`); the bs-sweep's, in another measure, say so.
fn each_quantity_is_one_figure(report: &Value) {
    let all = report["results"].as_array().unwrap();
    let label = |r: &Value| {
        [
            "mode",
            "op",
            "pattern",
            "block_size",
            "queue_depth",
            "offset",
            "throughput_measure",
        ]
        .map(|k| r[k].to_string())
    };
    for (i, r) in all.iter().enumerate() {
        for other in &all[i + 1..] {
            if label(r) != label(other) {
                continue;
            }
            assert_eq!(
                r["throughput_bytes_per_sec"], other["throughput_bytes_per_sec"],
                "one quantity, two figures: {r} and {other}"
            );
            assert_eq!(other["same_as"], r["test"], "{other}");
        }
        if let Some(share) = r.get("of_best") {
            assert!(f64_of(share) <= 1.0, "{r}");
        }
    }
}

/// The recommendation, checked against the figures the JSON prints: the
/// best is the highest throughput, the bar is a share of it no larger
/// than 95% and no smaller than 85% (95% or less of the median of the
/// three highest, or of a real peak less the noise, unless 85% of the
/// best is more), the answer is the smallest size at or over
/// the bar, each size's `of_best` is its throughput over the best (never
/// above 1); and the whole judgement is what the rule makes of the runs
/// kept.
fn the_rule_holds_on_the_json(report: &Value) {
    let sweep = results(report, "bs-sweep");
    for op in ["read", "write"] {
        let rows: Vec<&&Value> = sweep.iter().filter(|r| r["op"] == op).collect();
        assert!(!rows.is_empty(), "no {op} sweep");
        let judgement = &report["recommendation"][op];
        let best = f64_of(&judgement["best_bytes_per_sec"]);
        let bar = f64_of(&judgement["bar"]);
        let line = f64_of(&judgement["bar_bytes_per_sec"]);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
        assert!(
            close(line, bar * best),
            "{op}: bar {bar} of {best} is not {line}"
        );
        assert!(bar <= 0.95, "{op}: bar {bar}");
        let figures: Vec<(u64, f64)> = rows
            .iter()
            .map(|r| {
                (
                    r["block_size"].as_u64().unwrap(),
                    f64_of(&r["throughput_bytes_per_sec"]),
                )
            })
            .collect();
        let mut highest: Vec<f64> = figures.iter().map(|f| f.1).collect();
        highest.sort_by(|a, b| b.total_cmp(a));
        assert!(
            close(best, highest[0]),
            "{op}: best {best}, highest {}",
            highest[0]
        );
        let plateau = ddx::stats::median(&highest[..3.min(highest.len())]).unwrap();
        let reference = f64_of(&judgement["reference_bytes_per_sec"]);
        match judgement["reference"].as_str().unwrap() {
            "plateau" => assert!(close(reference, plateau), "{op}"),
            "peak" => assert!(reference > plateau && reference <= best, "{op}"),
            other => panic!("{op}: reference {other}"),
        }
        // Never below the floor, 85% of the best; above 95% of the
        // reference only where that floor set the bar.
        let of_reference = f64_of(&judgement["bar_of_reference"]);
        assert!(bar >= 0.85 * (1.0 - 1e-9), "{op}: bar {bar}");
        match judgement["at_floor"].as_bool().unwrap() {
            true => assert!(close(bar, 0.85), "{op}: bar {bar} at the floor"),
            false => assert!(of_reference <= 0.95, "{op}: {of_reference}"),
        }
        assert!(close(line, of_reference * reference), "{op}");
        let chosen = figures.iter().find(|f| f.1 >= line * (1.0 - 1e-9)).unwrap();
        assert_eq!(judgement["block_size"], chosen.0, "{op}");
        assert_eq!(
            report["recommendation"][format!("{op}_block_size")],
            chosen.0
        );
        assert!(
            close(f64_of(&judgement["of_best"]), chosen.1 / best),
            "{op}"
        );
        for r in &rows {
            let share = f64_of(&r["throughput_bytes_per_sec"]) / best;
            assert!(close(f64_of(&r["of_best"]), share), "{op}: {r}");
            assert!(f64_of(&r["of_best"]) <= 1.0, "{op}: {r}");
        }
        // And the judgement is the rule's on the runs kept.
        let points: Vec<(u64, Vec<f64>)> = rows
            .iter()
            .map(|r| {
                let runs = r["runs"].as_array().unwrap();
                let rounds = runs
                    .iter()
                    .map(|run| f64_of(&run["throughput_bytes_per_sec"]));
                (r["block_size"].as_u64().unwrap(), rounds.collect())
            })
            .collect();
        let expected =
            ddx::stats::recommend::judge(&points, ddx::stats::recommend::NEAR_BEST).unwrap();
        assert_eq!(judgement["block_size"], expected.block_size, "{op}");
        assert_eq!(judgement["steady"], expected.steady, "{op}");
        for (key, value) in [
            ("best_bytes_per_sec", expected.best_bytes_per_sec),
            ("bar", expected.bar),
            ("reference_bytes_per_sec", expected.reference_bytes_per_sec),
            ("plateau_low", expected.plateau_low),
            ("plateau_high", expected.plateau_high),
        ] {
            assert!(close(value, f64_of(&judgement[key])), "{op}.{key}");
        }
        let calls = judgement["close_calls"].as_array().unwrap();
        assert_eq!(calls.len(), expected.close_calls.len(), "{op}");
        for (call, neighbour) in calls.iter().zip(&expected.close_calls) {
            assert_eq!(call["block_size"], neighbour.block_size, "{op}");
            assert!(close(neighbour.of_best, f64_of(&call["of_best"])), "{op}");
        }
    }
}

/// The table under the line that starts with `title`: its header and
/// its rows, each cell cut at the extent of its column's dashes.
fn table_rows(text: &str, title: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let lines: Vec<Vec<char>> = text
        .lines()
        .skip_while(|l| !l.starts_with(title))
        .skip(1)
        .map(|l| l.chars().collect())
        .collect();
    assert!(lines.len() > 2, "no table under {title:?} in {text}");
    let rule = &lines[1];
    let mut columns = Vec::new();
    let mut at = 0;
    while at < rule.len() {
        if rule[at] == '-' {
            let start = at;
            while at < rule.len() && rule[at] == '-' {
                at += 1;
            }
            columns.push((start, at));
        } else {
            at += 1;
        }
    }
    let cells = |line: &Vec<char>| -> Vec<String> {
        columns
            .iter()
            .map(|&(a, b)| {
                let (a, b) = (a.min(line.len()), b.min(line.len()));
                line[a..b].iter().collect::<String>().trim().to_owned()
            })
            .collect()
    };
    let header = cells(&lines[0]);
    let rows = lines[2..]
        .iter()
        .take_while(|l| !l.is_empty() && l.iter().collect::<String>().contains("  "))
        .map(cells)
        .collect();
    (header, rows)
}

fn percent(text: &str) -> f64 {
    text.trim()
        .trim_end_matches('%')
        .parse()
        .unwrap_or_else(|_| panic!("not a percentage: {text:?}"))
}

/// "1.23 GB/s" in bytes per second.
fn rate(text: &str) -> f64 {
    let text = text.trim().trim_end_matches(" !");
    let (number, unit) = text.split_once(' ').unwrap();
    let scale = match unit {
        "B/s" => 1.0,
        "kB/s" => 1e3,
        "MB/s" => 1e6,
        "GB/s" => 1e9,
        "TB/s" => 1e12,
        _ => panic!("unit of {text:?}"),
    };
    number.parse::<f64>().unwrap() * scale
}

/// "4 KiB" in bytes.
fn size(text: &str) -> u64 {
    let (number, unit) = text.trim().split_once(' ').unwrap();
    let scale = match unit {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => panic!("unit of {text:?}"),
    };
    number.parse::<u64>().unwrap() * scale
}

/// Read the printed report as a user would: the verdict line names the
/// answer, its share of the best and the bar; the bs-sweep table's "of
/// best" columns show the answer at or over the bar, every smaller size
/// under it, no share above 100%, and each share is the row's figure over
/// the best; the table's title says its figures are not bytes over wall
/// time, and the details (which are) hold no bs-sweep row.
#[test]
fn the_table_states_a_rule_its_figures_bear_out() {
    let dir = scratch();
    let out = quick(&[dir.path().to_str().unwrap(), "--tests=bs-sweep"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let (header, rows) = table_rows(&text, "bs-sweep: ");
    assert_eq!(
        header,
        ["bs", "read", "of best", "write", "of best", "recommended"]
    );
    let title = text.lines().find(|l| l.starts_with("bs-sweep: ")).unwrap();
    assert!(
        title.contains("median request time") && title.contains("not bytes over wall time"),
        "{title}"
    );
    assert!(
        !text.contains("\nbs-sweep  "),
        "a bs-sweep row in the details: {text}"
    );
    for (op, rate_at, share_at) in [("read", 1, 2), ("write", 3, 4)] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{op}: ")) && l.contains("smallest size"))
            .unwrap_or_else(|| panic!("no {op} verdict in {text}"));
        // "read: 512 KiB at 96.4% of the best (1.23 GB/s at 4 MiB) is the
        // smallest size at or over the bar of 91.1% (1.12 GB/s; ...)"
        let rest = line.strip_prefix(&format!("{op}: ")).unwrap();
        let (answer, rest) = rest.split_once(" at ").unwrap();
        let (answer_share, rest) = rest.split_once(" of the best (").unwrap();
        let (best, rest) = rest.split_once(" at ").unwrap();
        let bar = rest.split_once("the bar of ").unwrap().1;
        let bar = percent(bar.split_once(' ').unwrap().0);
        let (answer, answer_share, best) = (size(answer), percent(answer_share), rate(best));
        assert!(answer_share >= bar && answer_share <= 100.0, "{line}");
        for row in &rows {
            let (bs, share) = (size(&row[0]), percent(&row[share_at]));
            assert!(share <= 100.0, "{op} {bs}: {share}% of the best");
            // Printed to three figures and a tenth of a percent.
            let computed = 100.0 * rate(&row[rate_at]) / best;
            assert!(
                (computed - share).abs() <= 0.01 * computed + 0.1,
                "{op} {bs}: {computed} vs {share} in {text}"
            );
            if bs < answer {
                assert!(share < bar + 0.05, "{op}: {bs} reached the bar: {text}");
            }
            if bs == answer {
                assert_eq!(share, answer_share, "{text}");
                assert!(row[5].contains(op), "{op}: {row:?}");
            }
        }
        assert!(rows.iter().any(|r| size(&r[0]) == answer), "{text}");
        assert!(
            rows.iter().any(|r| percent(&r[share_at]) == 100.0),
            "{op}: no size is the best: {text}"
        );
    }
    assert!(
        text.contains("rule: the smallest bs-sweep block size"),
        "{text}"
    );
}

/// The HTML charts: each recommendation is a line in its series' colour
/// at the recommended size, labelled beside that line in that colour;
/// reads and writes have different colours; the bar is drawn; the
/// points are the figures the rule was applied to.
#[test]
fn html_labels_each_line_where_it_is_drawn() {
    let dir = scratch();
    let out_dir = scratch();
    let page = out_dir.path().join("report.html");
    let target = dir.path().to_str().unwrap();
    let html_option = format!("--html={}", page.display());
    let report = json_of(&quick(&[target, "--json", &html_option]));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    // Self-contained: no scripts, nothing fetched.
    assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href="));

    let charts = svg_charts(&html);
    let names: Vec<&str> = charts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["bs-sweep", "zones", "latency"]);
    for (name, svg) in &charts {
        let doc = roxmltree::Document::parse(svg)
            .unwrap_or_else(|e| panic!("{name} chart is not well-formed SVG: {e}"));
        let points: Vec<roxmltree::Node> = doc
            .descendants()
            .filter(|n| n.has_tag_name("circle"))
            .collect();
        let lines: Vec<usize> = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .map(|n| n.attribute("points").unwrap().split(' ').count())
            .collect();
        match name.as_str() {
            "bs-sweep" => {
                assert_eq!(points.len(), results(&report, "bs-sweep").len());
                assert_eq!(lines.len(), 2, "read and write lines");
                for r in results(&report, "bs-sweep") {
                    let drawn = points.iter().any(|p| {
                        p.attribute("data-series") == r["op"].as_str()
                            && p.attribute("data-x") == Some(&r["block_size"].to_string())
                            && p.attribute("data-y")
                                == Some(&format!("{:.0}", f64_of(&r["throughput_bytes_per_sec"])))
                    });
                    assert!(drawn, "{r} not drawn as printed");
                }
                markers_sit_on_their_lines(&doc, &report);
            }
            "zones" => assert_eq!(points.len(), 4),
            "latency" => assert_eq!(lines, [40, 40], "write and read histograms"),
            _ => unreachable!(),
        }
        // Every point lies inside the drawing.
        for c in &points {
            let (x, y): (f64, f64) = (
                c.attribute("cx").unwrap().parse().unwrap(),
                c.attribute("cy").unwrap().parse().unwrap(),
            );
            assert!((0.0..=760.0).contains(&x) && (0.0..=330.0).contains(&y));
        }
    }
    // The facts list states the verdicts the table states.
    for op in ["read", "write"] {
        let bs = report["recommendation"][format!("{op}_block_size")]
            .as_u64()
            .unwrap();
        assert!(html.contains(&format!("<li>{op}: ")), "{op} verdict");
        assert!(bs > 0);
    }
}

fn markers_sit_on_their_lines(doc: &roxmltree::Document, report: &Value) {
    let of_class = |class: &str| -> Vec<roxmltree::Node> {
        doc.descendants()
            .filter(|n| n.attribute("class") == Some(class))
            .collect()
    };
    let markers = of_class("marker");
    let labels = of_class("marker-label");
    assert_eq!(markers.len(), 2, "a line per direction");
    assert_eq!(labels.len(), 2, "a label per line");
    let num = |n: &roxmltree::Node, a: &str| -> f64 { n.attribute(a).unwrap().parse().unwrap() };
    let mut colors = Vec::new();
    for marker in &markers {
        let series = marker.attribute("data-series").unwrap();
        let stroke = marker.attribute("stroke").unwrap();
        let recommended = report["recommendation"][format!("{series}_block_size")]
            .as_u64()
            .unwrap();
        assert_eq!(marker.attribute("data-x"), Some(&*recommended.to_string()));
        let curve = doc
            .descendants()
            .find(|n| n.has_tag_name("polyline") && n.attribute("data-series") == Some(series))
            .unwrap();
        assert_eq!(curve.attribute("stroke"), Some(stroke), "{series}");
        // The line passes through its series' point at that size.
        let point = doc
            .descendants()
            .find(|n| {
                n.has_tag_name("circle")
                    && n.attribute("data-series") == Some(series)
                    && n.attribute("data-x") == Some(&*recommended.to_string())
            })
            .unwrap();
        assert!(
            (num(&point, "cx") - num(marker, "x1")).abs() < 0.11,
            "{series}"
        );
        let label = labels
            .iter()
            .find(|l| l.attribute("data-series") == Some(series))
            .unwrap();
        assert_eq!(
            label.attribute("fill"),
            Some(stroke),
            "{series} label colour"
        );
        let text = label.text().unwrap();
        assert!(text.contains(series), "{text}");
        let x = num(label, "x");
        let own = (x - num(marker, "x1")).abs();
        assert!(own <= 14.0, "{series} label {own} px from its line");
        for other in markers
            .iter()
            .filter(|m| m.attribute("data-series") != Some(series))
        {
            if (num(other, "x1") - num(marker, "x1")).abs() > 1.0 {
                assert!(
                    own < (x - num(other, "x1")).abs(),
                    "{series} label nearer another line"
                );
            }
        }
        let bar = of_class("bar")
            .into_iter()
            .find(|b| b.attribute("data-series") == Some(series))
            .unwrap();
        assert_eq!(bar.attribute("stroke"), Some(stroke));
        colors.push(stroke.to_owned());
    }
    assert_ne!(colors[0], colors[1], "read and write in one colour");
}

/// (data-chart, the svg element's text) for every chart in the page.
fn svg_charts(html: &str) -> Vec<(String, String)> {
    let mut charts = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").unwrap() + start + "</svg>".len();
        let svg = &rest[start..end];
        let name = svg.split("data-chart=\"").nth(1).unwrap();
        let name = name[..name.find('"').unwrap()].to_owned();
        charts.push((name, svg.to_owned()));
        rest = &rest[end..];
    }
    charts
}

#[test]
fn table_and_markdown_name_the_recommendation() {
    let dir = scratch();
    let target = dir.path().to_str().unwrap();
    let table = quick(&[target, "--tests=bs-sweep"]);
    assert!(table.status.success());
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.contains("\nrecommended block size: read "), "{text}");
    assert!(text.starts_with("ddx bench: "), "{text}");
    let md = quick(&[target, "--tests=bs-sweep", "--markdown"]);
    let md = String::from_utf8(md.stdout).unwrap();
    assert!(
        md.contains("\n**recommended block size: read ")
            && md.contains("| bs | read | of best | write | of best |")
            && md.contains("|---:|"),
        "{md}"
    );
    assert!(listing(dir.path()).is_empty());
}

/// Random O_DIRECT reads one at a time at the queue-depth sweep's 4 KiB
/// are what the latency test measures at --latency-bs=4K: measured once,
/// by the latency test, and shown by the sweep (and the summary) as that
/// same figure.
#[test]
fn a_quantity_two_tests_ask_for_is_measured_once() {
    let dir = scratch();
    let report = json_of(&quick(&[
        dir.path().to_str().unwrap(),
        "--tests=latency,qd-sweep",
        "--latency-bs=4K",
        "--json",
    ]));
    let first = results(&report, "latency")
        .into_iter()
        .find(|r| r["op"] == "read")
        .unwrap();
    let again = results(&report, "qd-sweep")
        .into_iter()
        .find(|r| r["op"] == "read" && r["queue_depth"] == 1)
        .unwrap();
    assert_eq!(again["same_as"], "latency", "{again}");
    assert_eq!(first.get("same_as"), None, "{first}");
    for key in ["throughput_bytes_per_sec", "iops", "runs", "latency_ns"] {
        assert_eq!(first[key], again[key], "{key}");
    }
    // 40 requests a run, as the latency test counts them.
    assert_eq!(first["runs"][0]["ios"], 40);
    let cell = &report["summary"]["rows"][3]["read"];
    assert_eq!(report["summary"]["rows"][3]["name"], "RND4K Q1T1");
    assert_eq!(
        cell["throughput_bytes_per_sec"],
        first["throughput_bytes_per_sec"]
    );
    // The other depths are the sweep's own.
    let deeper = results(&report, "qd-sweep")
        .into_iter()
        .filter(|r| r["queue_depth"] != 1)
        .count();
    assert!(deeper == 8 || deeper == 0, "{deeper}");
    let table = String::from_utf8(
        quick(&[
            dir.path().to_str().unwrap(),
            "--tests=latency,qd-sweep",
            "--latency-bs=4K",
        ])
        .stdout,
    )
    .unwrap();
    assert!(
        table.contains("note qd-sweep direct read 4 KiB qd 1: the latency test measured"),
        "{table}"
    );
}

/// Every format of one real bench leads with CrystalDiskMark's rows, the
/// summary's figures those of the details, then the recommendation.
#[test]
fn every_format_leads_with_the_summary() {
    let dir = scratch();
    let target = dir.path().to_str().unwrap();
    let out_dir = scratch();
    let page = out_dir.path().join("report.html");
    let html_option = format!("--html={}", page.display());
    let table = quick(&[target, &html_option]);
    assert!(table.status.success(), "{table:?}");
    let text = String::from_utf8(table.stdout).unwrap();
    let (header, rows) = table_rows(&text, "ddx bench: ");
    assert_eq!(header, ["", "read", "read IOPS", "write", "write IOPS"]);
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        names,
        ["SEQ1M Q8T1", "SEQ1M Q1T1", "RND4K Q32T1", "RND4K Q1T1"],
        "{text}"
    );
    let (details_header, details) = table_rows(&text, "details: ");
    let column = |name: &str| details_header.iter().position(|h| h == name).unwrap();
    let (test, mode, op, qd, throughput) = (
        column("test"),
        column("mode"),
        column("op"),
        column("qd"),
        column("throughput"),
    );
    for (row, (tests, depth)) in rows.iter().zip([
        (["seq-read", "seq-write"], "8"),
        (["seq-read", "seq-write"], "1"),
        (["qd-sweep", "qd-sweep"], "32"),
        (["qd-sweep", "qd-sweep"], "1"),
    ]) {
        for ((name, cell), direction) in tests.iter().zip([&row[1], &row[3]]).zip(["read", "write"])
        {
            let detail = details
                .iter()
                .find(|d| {
                    d[test] == *name && d[mode] == "direct" && d[op] == direction && d[qd] == depth
                })
                .unwrap_or_else(|| panic!("no {name} {direction} qd {depth} in {text}"));
            // (The details flag a figure with an outlier run.)
            assert_eq!(
                detail[throughput].trim_end_matches(" !"),
                cell,
                "{}",
                row[0]
            );
        }
    }
    let at = |mark: &str| text.find(mark).unwrap_or_else(|| panic!("{mark}: {text}"));
    assert!(at("SEQ1M Q8T1") < at("\nrecommended block size: "));
    assert!(at("\nrecommended block size: ") < at("\nbs-sweep: "));
    assert!(at("\nbs-sweep: ") < at("\ndetails: "));

    let md = String::from_utf8(quick(&[target, "--markdown"]).stdout).unwrap();
    assert!(md.starts_with("### ddx bench: "), "{md}");
    let first_table = md.lines().find(|l| l.starts_with("| ")).unwrap();
    assert_eq!(first_table, "|  | read | read IOPS | write | write IOPS |");
    assert!(md.find("| SEQ1M Q8T1 |").unwrap() < md.find("**recommended block size").unwrap());

    let html = std::fs::read_to_string(&page).unwrap();
    let summary = html.find("<table class=\"summary\">").unwrap();
    let answer = html
        .find("<p class=\"answer\">recommended block size")
        .unwrap();
    assert!(summary < answer && answer < html.find("<svg").unwrap());
    assert!(html.find("<svg").unwrap() < html.find("<ul class=\"facts\">").unwrap());
}

/// Start a long bench on a directory, wait until it is measuring, send
/// `signal`, and check that it printed the report of the runs completed
/// (and wrote the HTML), then died of the signal leaving the directory as
/// it was.
fn interrupted_mid_run(signal: i32, format: &[&str]) -> (String, String) {
    let dir = scratch();
    let out_dir = scratch();
    let page = out_dir.path().join("report.html");
    std::fs::write(dir.path().join("keep"), b"mine").unwrap();
    let before = listing(dir.path());
    let mut child = ddx_bench()
        .arg(dir.path())
        .args(["--size=32M", "--runs=50", "--time-per-run=0.02"])
        .args(["--tests=seq-read,bs-sweep,seq-write"])
        .arg(format!("--html={}", page.display()))
        .args(format)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the bench file to be filled (32 MiB), then give the
    // measuring a second and a half: runs of seq-read at least.
    let started = Instant::now();
    while !listing(dir.path()).iter().any(|(_, len)| *len == 32 << 20) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no bench file was filled"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the bench ended too soon"
    );
    rigs::signal::send(child.id(), signal);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), Some(signal), "{out:?}");
    assert_eq!(
        listing(dir.path()),
        before,
        "the bench left something behind"
    );
    let html = std::fs::read_to_string(&page).expect("the HTML report was written");
    (String::from_utf8(out.stdout).unwrap(), html)
}

#[test]
fn sigint_mid_run_keeps_the_runs_completed_and_dies_of_it() {
    let (stdout, html) = interrupted_mid_run(libc::SIGINT, &["--json"]);
    let report: Value = serde_json::from_str(&stdout).expect("complete JSON");
    assert_eq!(report["interrupted"], "SIGINT");
    let all = report["results"].as_array().unwrap();
    assert!(!all.is_empty(), "nothing kept: {report}");
    for r in all {
        let runs = r["runs"].as_array().unwrap();
        assert!(!runs.is_empty() && runs.len() <= 100, "{r}");
    }
    assert!(!results(&report, "seq-read").is_empty());
    assert!(html.contains("interrupted by SIGINT"));
}

#[test]
fn sigterm_mid_run_prints_the_table_so_far_and_dies_of_it() {
    let (stdout, html) = interrupted_mid_run(libc::SIGTERM, &[]);
    assert!(stdout.starts_with("interrupted by SIGTERM"), "{stdout}");
    assert!(stdout.contains("\nseq-read "), "{stdout}");
    assert!(
        stdout.contains("interrupted by SIGTERM: the figures are from the runs completed"),
        "{stdout}"
    );
    assert!(html.contains("interrupted by SIGTERM"));
}

#[test]
fn an_existing_file_is_only_read_without_destructive() {
    let dir = scratch();
    let path = dir.path().join("data");
    let data: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let report = json_of(&quick(&[path.to_str().unwrap(), "--json"]));
    assert!(results(&report, "seq-write").is_empty());
    assert!(!results(&report, "seq-read").is_empty());
    assert!(report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["test"] == "seq-write"));
    assert_eq!(std::fs::read(&path).unwrap(), data, "the file was written");
    assert_eq!(report["target"]["working_set_bytes"], 4 << 20);
    // The summary's write cells say why they are empty; its reads are
    // measured.
    for row in report["summary"]["rows"].as_array().unwrap() {
        assert!(
            f64_of(&row["read"]["throughput_bytes_per_sec"]) > 0.0,
            "{row}"
        );
        assert_eq!(
            row["write"]["throughput_bytes_per_sec"],
            Value::Null,
            "{row}"
        );
        let why = row["write"]["missing"].as_str().unwrap();
        assert!(why.contains("--destructive"), "{row}");
    }

    // Asked for nothing but writing: nothing runs, and it says why.
    let out = quick(&[path.to_str().unwrap(), "--tests=seq-write"]);
    let why = failure(&out);
    assert!(
        why.contains("--destructive") && why.contains("seq-write"),
        "{why}"
    );
    assert!(out.stdout.is_empty(), "an empty table was printed");
    assert_eq!(std::fs::read(&path).unwrap(), data);
}

#[test]
fn a_working_set_too_small_is_refused_naming_size_and_its_minimum() {
    let dir = scratch();
    for size in ["--size=1", "--size=4K", "--size=1048575"] {
        let out = bench(&[dir.path().to_str().unwrap(), size]);
        let err = String::from_utf8(out.stderr.clone()).unwrap();
        assert_eq!(
            failure(&out),
            format!(
                "invalid argument '{}' for '--size': at least 1M (1048576 bytes)",
                &size[7..]
            )
        );
        assert_eq!(
            err.lines().nth(1),
            Some("Try 'ddx bench --help' for more information.")
        );
        assert!(listing(dir.path()).is_empty());
    }
    // A size that is no whole number of sectors is measured in whole ones.
    let target = dir.path().to_str().unwrap();
    let report = json_of(&bench(
        &[&[target, "--size=1500001"][..], &ONE_READ].concat(),
    ));
    let len = report["target"]["working_set_bytes"].as_u64().unwrap();
    assert!(
        len <= 1_500_001 && len % 512 == 0 && len > 1_490_000,
        "{len}"
    );
    assert!(!results(&report, "seq-read").is_empty());
}

#[test]
fn options_and_errors_read_as_the_rest_of_ddx() {
    for (args, message) in [
        (&["--x"][..], "unrecognized option '--x'"),
        (&[".", "--nosuch=1"], "unrecognized option '--nosuch=1'"),
        (&[".", "-z"], "invalid option -- 'z'"),
        (
            &[".", "--json=yes"],
            "option '--json' doesn't allow an argument",
        ),
        (
            &["--size", "8M", "."],
            "option '--size' requires an argument: give it in the same word, as --size=N",
        ),
        (
            &[".", "--runs=0"],
            "invalid argument '0' for '--runs': a number from 1 to 100",
        ),
        (&[], "missing TARGET operand"),
        (&[".", ".."], "extra operand '..'"),
    ] {
        let out = bench(args);
        assert_eq!(failure(&out), message, "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 2, "{err}");
        assert!(err.ends_with("\nTry 'ddx bench --help' for more information.\n"));
    }
    let out = bench(&[".", "--tests=nope"]);
    assert!(failure(&out).starts_with("invalid argument 'nope' for '--tests'; valid arguments"));

    // Help laid out as ddx's own: the usage line, the options in the same
    // gutter, nothing wider than 78 columns.
    let help = bench(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(
        help.starts_with("Usage: ddx bench TARGET [OPTION]...\n"),
        "{help}"
    );
    let top = rigs::cmd::ddx().arg("--help").output().unwrap();
    let top = String::from_utf8(top.stdout).unwrap();
    assert!(top.contains("ddx bench TARGET"));
    let gutter = |text: &str, option: &str| -> usize {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(option))
            .unwrap_or_else(|| panic!("{option} not in {text}"));
        line.len() - line[option.len() + 6..].trim_start().len()
    };
    assert_eq!(gutter(&help, "--json"), gutter(&top, "--verify"));
    for option in [
        "--tests=LIST",
        "--size=N",
        "--runs=R",
        "--destructive",
        "--force",
        "--allow-memory",
        "--json",
        "--markdown",
        "--html=FILE",
    ] {
        assert!(
            help.contains(&format!("      {option}")),
            "{option} not in bench --help"
        );
    }
    assert!(help.lines().all(|l| l.chars().count() <= 78), "{help}");
    let version = bench(&["--version"]);
    let top_version = rigs::cmd::ddx().arg("--version").output().unwrap();
    assert_eq!(version.stdout, top_version.stdout);
}

#[test]
fn errors_are_one_line_and_exit_1() {
    let out = bench(&["/nonexistent-dir/sub/file"]);
    let why = failure(&out);
    assert!(why.contains("/nonexistent-dir/sub/file"), "{why}");
    assert_eq!(String::from_utf8(out.stderr).unwrap().lines().count(), 1);

    // A bad --html path fails before any measuring; a failed bench leaves
    // no half-made page behind.
    let dir = scratch();
    let started = Instant::now();
    let out = bench(&[
        dir.path().to_str().unwrap(),
        "--html=/nonexistent-dir/x.html",
    ]);
    assert!(failure(&out).contains("creating /nonexistent-dir/x.html"));
    assert!(started.elapsed() < Duration::from_secs(5));
    let page = dir.path().join("page.html");
    let out = bench(&[
        "/nonexistent-dir/sub/file",
        &format!("--html={}", page.display()),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!page.exists());
    assert!(listing(dir.path()).is_empty());

    // A --latency-bs the target cannot take fails before anything runs.
    let started = Instant::now();
    let out = bench(&[
        dir.path().to_str().unwrap(),
        "--latency-bs=100",
        "--size=64M",
    ]);
    assert!(
        failure(&out).starts_with("invalid argument '100' for '--latency-bs'"),
        "{out:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(listing(dir.path()).is_empty());
}

/// What the copy says when refused writing `output`, without "ddx: ".
fn copy_refusal(output: &Path) -> String {
    let out = rigs::cmd::ddx()
        .args(["if=/dev/zero", "count=1"])
        .arg(format!("of={}", output.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    err.lines()
        .next()
        .and_then(|l| l.strip_prefix("ddx: "))
        .unwrap_or_else(|| panic!("{err}"))
        .to_owned()
}

/// A mistyped device name: the copy refuses to create it in /dev, and so
/// does the bench, in the same words, before creating anything.
#[test]
fn a_missing_device_is_refused_as_the_copy_refuses_it() {
    let name = format!("/dev/ddx-bench-no-such-disk-{}", std::process::id());
    let path = Path::new(&name);
    let expected = copy_refusal(path);
    assert!(expected.starts_with("refusing to create"), "{expected}");
    for extra in [&[][..], &["--destructive"], &["--tests=seq-read"]] {
        let out = bench(&[&[name.as_str()][..], extra].concat());
        assert_eq!(failure(&out), expected, "{extra:?}");
        assert!(!path.exists(), "created {name}");
    }
}

/// A character device is measured only where it is a disk's generic
/// node: any other (a terminal, /dev/null, /dev/zero) is refused before
/// it is read, since its reads would measure nothing of a disk.
#[test]
fn a_character_device_that_is_no_generic_node_is_refused() {
    for name in ["/dev/null", "/dev/zero"] {
        for extra in [&[][..], &["--destructive"]] {
            let out = bench(&[&[name][..], extra].concat());
            assert_eq!(
                failure(&out),
                format!(
                    "{name}: a character device that is not a SCSI or NVMe generic node (ddx \
                     bench measures files, directories, block devices, generic nodes and NBD \
                     exports)"
                ),
                "{extra:?}"
            );
        }
    }
}

/// A target with nothing there is an error, with or without a trailing
/// slash (a directory mistyped or not made yet, not a file to make), in
/// a directory that exists or not; nothing is created.
#[test]
fn a_target_that_does_not_exist_is_an_error() {
    let dir = scratch();
    let before = listing(dir.path());
    let missing = dir.path().join("missing");
    for (target, what) in [
        (format!("{}/", missing.display()), "directory"),
        (missing.display().to_string(), "file or directory"),
        (format!("{}/deeper", missing.display()), "file or directory"),
    ] {
        for extra in [&[][..], &["--destructive"], &["--tests=seq-write"]] {
            let out = bench(&[&[target.as_str()][..], extra].concat());
            assert_eq!(
                failure(&out),
                format!(
                    "'{target}': no such {what}: TARGET is an existing file, directory (ddx \
                     makes its own file there), block device or SCSI or NVMe generic node, or \
                     an NBD export"
                ),
                "{extra:?}"
            );
            assert_eq!(
                listing(dir.path()),
                before,
                "{target}: something was created"
            );
        }
    }
}

/// A mount point made by the test in a temp dir, unmounted when dropped.
struct Mount {
    point: tempfile::TempDir,
}

impl Mount {
    /// `mount -t KIND` (tmpfs, ramfs) in a new temp dir, or None after
    /// `rigs::skip`.
    fn memory(kind: &str) -> Option<Mount> {
        let point = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", kind, "-o", "size=64m", kind])
            .arg(point.path())
            .output();
        let mounted = match mounted {
            Ok(out) if out.status.success() => Ok(Mount { point }),
            other => Err(format!("mounting a {kind} needs root: {other:?}")),
        };
        rigs::or_skip(mounted)
    }

    fn path(&self) -> &Path {
        self.point.path()
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.point.path()).status();
    }
}

/// A directory or an existing file on tmpfs or ramfs has no disk under
/// it: refused, nothing created, unless --allow-memory, and then the
/// report says its figures are memory's.
#[test]
fn a_target_in_memory_is_refused_unless_asked_for() {
    for kind in ["tmpfs", "ramfs"] {
        let Some(mount) = Mount::memory(kind) else {
            return;
        };
        let existing = mount.path().join("existing");
        std::fs::write(&existing, vec![7u8; 2 << 20]).unwrap();
        let before = listing(mount.path());
        for target in [mount.path(), &existing] {
            let out = bench(&[target.to_str().unwrap(), "--tests=seq-read"]);
            let why = failure(&out);
            assert_eq!(
                why,
                format!(
                    "refusing to measure '{}': it is on {kind}, which keeps files in memory, \
                     so the figures would be the memory's, not a disk's; --allow-memory \
                     overrides",
                    target.display()
                )
            );
            assert_eq!(
                listing(mount.path()),
                before,
                "{kind}: something was created"
            );
        }
        let target = mount.path().to_str().unwrap();
        let allowed = [target, "--allow-memory", "--size=4M"];
        let report = json_of(&bench(&[&allowed[..], &ONE_READ].concat()));
        assert!(!results(&report, "seq-read").is_empty(), "{kind}: {report}");
        assert_eq!(report["target"]["filesystem"], kind);
        // Measured anyway, its figures are said to be memory's.
        assert_eq!(report["target"]["backing"]["kind"], "memory", "{report}");
        let said = format!("{kind} keeps its data in memory: the figures are memory's");
        assert!(
            report["notes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n.as_str().unwrap().starts_with(&said)),
            "{}",
            report["notes"]
        );
        assert_eq!(
            listing(mount.path()),
            before,
            "{kind}: the bench file stayed"
        );
    }
}

/// A loop device over `backing`, or None after `rigs::skip`.
fn attach_loop(backing: &Path) -> Option<rigs::LoopDevice> {
    rigs::or_skip(rigs::LoopDevice::attach(
        backing,
        rigs::LoopOptions::default(),
    ))
}

/// A loop device over 16 MiB of pseudo-random bytes in `dir`, and the
/// backing file's checksum before anything ran; None after `rigs::skip`
/// where loop devices are not available.
fn loop_over_random_bytes(dir: &Path) -> Option<(rigs::LoopDevice, PathBuf, String)> {
    let backing = dir.join("disk.img");
    std::fs::write(
        &backing,
        rigs::bytes::pattern(0x2545_f491_4f6c_dd1d, 16 << 20),
    )
    .unwrap();
    let checksum = sha256(&backing);
    let device = attach_loop(&backing)?;
    Some((device, backing, checksum))
}

#[test]
fn a_loop_device_is_never_written_without_destructive() {
    let dir = scratch();
    let Some((device, backing, checksum)) = loop_over_random_bytes(dir.path()) else {
        return;
    };
    let report = json_of(&quick(&[device.path.to_str().unwrap(), "--json"]));
    drop(device);
    assert_eq!(sha256(&backing), checksum, "the loop device was written");

    assert_eq!(report["target"]["kind"], "block device");
    assert_eq!(report["target"]["writable"], false);
    // The read tests ran...
    let reads = results(&report, "seq-read");
    assert!(reads.iter().any(|r| r["mode"] == "direct"), "{report}");
    assert!(!results(&report, "zones").is_empty());
    assert!(results(&report, "latency")
        .iter()
        .all(|r| r["op"] == "read"));
    // ...and no write test did.
    assert!(report["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["op"] == "read"));
    assert!(results(&report, "seq-write").is_empty());
}

#[test]
fn destructive_writes_an_unused_loop_device() {
    // The other side of the test above: the checksum does change when
    // writing is allowed, so an unchanged one means something.
    let dir = scratch();
    let Some((device, backing, checksum)) = loop_over_random_bytes(dir.path()) else {
        return;
    };
    let report = json_of(&quick(&[
        device.path.to_str().unwrap(),
        "--destructive",
        "--json",
        "--tests=seq-write,latency",
    ]));
    drop(device);
    assert_ne!(sha256(&backing), checksum, "nothing was written");
    assert_eq!(report["target"]["writable"], true);
    assert_eq!(results(&report, "seq-write").len(), 7);
    assert!(results(&report, "latency")
        .iter()
        .any(|r| r["op"] == "write"));
}

/// Runs a set-up tool; None after `rigs::skip` when it is missing or fails.
fn set_up(program: &str, args: &[&str]) -> Option<()> {
    rigs::or_skip(rigs::run_tool(Command::new(program).args(args), program)).map(drop)
}

/// Undoes a set-up step when dropped (umount, swapoff).
struct Undo(&'static str, PathBuf);

impl Drop for Undo {
    fn drop(&mut self) {
        let _ = Command::new(self.0).arg(&self.1).status();
    }
}

/// With --destructive, a device or file in use is refused as the copy
/// refuses writing it, word for word, and left as it was; read-only
/// benches of it are allowed.
#[test]
fn destructive_refuses_what_the_copy_refuses_in_its_words() {
    let dir = scratch();
    // A mounted loop device.
    let backing = dir.path().join("fs.img");
    std::fs::write(&backing, vec![0u8; 16 << 20]).unwrap();
    let Some(device) = attach_loop(&backing) else {
        return;
    };
    let Some(()) = set_up("mkfs.ext4", &["-q", "-F", device.path.to_str().unwrap()]) else {
        return;
    };
    let point = dir.path().join("mnt");
    std::fs::create_dir(&point).unwrap();
    let Some(()) = set_up(
        "mount",
        &[device.path.to_str().unwrap(), point.to_str().unwrap()],
    ) else {
        return;
    };
    let mounted = Undo("umount", point.clone());
    std::fs::write(point.join("precious"), b"data").unwrap();
    let checksum_before = sha256(point.join("precious"));
    // A loop device that is active swap.
    let swap_backing = dir.path().join("swap.img");
    std::fs::write(&swap_backing, vec![0u8; 16 << 20]).unwrap();
    let Some(swap_device) = attach_loop(&swap_backing) else {
        return;
    };
    let swap = swap_device.path.to_str().unwrap();
    let Some(()) = set_up("mkswap", &[swap]).and_then(|()| set_up("swapon", &[swap])) else {
        return;
    };
    let swapped = Undo("swapoff", swap_device.path.clone());
    // A swap file.
    let swap_file = dir.path().join("swapfile");
    std::fs::write(&swap_file, vec![0u8; 16 << 20]).unwrap();
    std::fs::set_permissions(
        &swap_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let file = swap_file.to_str().unwrap();
    let Some(()) = set_up("mkswap", &[file]).and_then(|()| set_up("swapon", &[file])) else {
        return;
    };
    let swapped_file = Undo("swapoff", swap_file.clone());

    for (target, mark) in [
        (&device.path, "mounted on"),
        (&swap_device.path, "active swap"),
        (&swap_file, "active swap file"),
    ] {
        let expected = copy_refusal(target);
        assert!(expected.contains(mark), "{expected}");
        let out = bench(&[target.to_str().unwrap(), "--destructive", "--size=4M"]);
        assert_eq!(failure(&out), expected, "{}", target.display());
        // Reading it is no danger: allowed.
        let read = bench(&[
            target.to_str().unwrap(),
            "--tests=seq-read",
            "--size=4M",
            "--runs=1",
        ]);
        assert!(read.status.success(), "{read:?}");
    }
    assert_eq!(sha256(point.join("precious")), checksum_before);
    drop((swapped_file, swapped, mounted));
}

fn skipped<'a>(report: &'a Value, test: &str) -> Vec<&'a Value> {
    entries(report, "skipped", test)
}

#[test]
fn an_nbd_export_is_measured_through_libnbd_and_only_read_without_destructive() {
    let dir = rigs::nbd::tempdir().unwrap();
    let image = dir.path().join("disk.img");
    std::fs::write(&image, rigs::bytes::pattern(16, 8 << 20)).unwrap();
    let before = sha256(&image);
    let image_arg = format!("file={}", image.display());
    let Some(server) = nbdkit_in(dir, &["file", &image_arg]) else {
        return;
    };
    let uri = server.uri();
    let report = json_of(&quick(&[&uri, "--json"]));
    assert_eq!(report["target"]["kind"], "NBD export");
    assert_eq!(report["target"]["target_bytes"], 8 << 20);
    assert_eq!(report["target"]["writable"], false);
    for test in ["seq-read", "bs-sweep", "latency", "zones"] {
        let figures = results(&report, test);
        assert!(!figures.is_empty(), "no {test} figure: {report}");
        for figure in figures {
            assert_eq!(figure["mode"], "nbd", "{figure}");
            assert_eq!(figure["op"], "read", "{figure}");
            assert!(f64_of(&figure["throughput_bytes_per_sec"]) > 0.0);
        }
    }
    let depths: Vec<u64> = results(&report, "qd-sweep")
        .iter()
        .map(|r| r["queue_depth"].as_u64().unwrap())
        .collect();
    assert_eq!(depths, [1, 4, 16, 32, 64]);
    // Not printed as figures that would not mean what they say.
    let modes: Vec<&str> = skipped(&report, "seq-read")
        .iter()
        .map(|s| s["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["direct", "cached"]);
    assert!(results(&report, "seq-write").is_empty());
    assert!(skipped(&report, "seq-write")[0]["reason"]
        .as_str()
        .unwrap()
        .contains("--destructive"));
    assert!(report["recommendation"]["read_block_size"]
        .as_u64()
        .is_some());
    assert_eq!(sha256(&image), before, "the export was written");

    // The table says the same, and why the rest is missing.
    let out = quick(&[&uri, "--tests=seq-read", "--runs=1"]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("(NBD export)"), "{table}");
    assert!(table.contains("skipped seq-read direct: O_DIRECT has no meaning over NBD"));

    // Asked for nothing but writing: nothing runs, and it says why.
    let out = quick(&[&uri, "--tests=seq-write"]);
    let why = failure(&out);
    assert!(why.contains("--destructive"), "{why}");
    assert_eq!(sha256(&image), before, "the export was written");
}

#[test]
fn destructive_writes_an_export_and_times_its_flush_but_not_a_read_only_one() {
    let Some(server) = nbdkit(&["memory", "size=8M"]) else {
        return;
    };
    let report = json_of(&quick(&[
        &server.uri(),
        "--destructive",
        "--tests=seq-write,bs-sweep",
        "--json",
    ]));
    let modes: Vec<&str> = results(&report, "seq-write")
        .iter()
        .map(|r| r["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["nbd", "flush"]);
    assert!(results(&report, "bs-sweep")
        .iter()
        .any(|r| r["op"] == "write"));
    assert!(report["recommendation"]["write_block_size"]
        .as_u64()
        .is_some());
    // What the bench wrote is there: stamped blocks, not the zeros the
    // memory plugin starts with.
    let copy = rigs::nbd::tempdir().unwrap();
    let out = rigs::cmd::ddx()
        .args([
            format!("if={}", server.uri()),
            format!("of={}", copy.path().join("back").display()),
            "bs=1M".to_owned(),
            "status=none".to_owned(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let back = std::fs::read(copy.path().join("back")).unwrap();
    assert!(back.iter().any(|&b| b != 0), "nothing was written");

    let Some(read_only) = nbdkit(&["-r", "memory", "size=8M"]) else {
        return;
    };
    let out = quick(&[&read_only.uri(), "--destructive", "--tests=seq-write"]);
    let why = failure(&out);
    assert!(why.contains("the server exports it read-only"), "{why}");
}

/// The seq-read rate of `uri`, bytes per second (one run).
fn seq_read_rate(uri: &str) -> f64 {
    let report = json_of(&bench(&[
        uri,
        "--tests=seq-read",
        "--runs=1",
        "--size=8M",
        "--json",
    ]));
    f64_of(&results(&report, "seq-read")[0]["throughput_bytes_per_sec"])
}

#[test]
fn a_delayed_export_reads_no_faster_than_its_delay_allows() {
    let Some(fast) = nbdkit(&["memory", "size=8M"]) else {
        return;
    };
    let Some(slow) = nbdkit(&["--filter=delay", "memory", "size=8M", "delay-read=4ms"]) else {
        return;
    };
    let (fast, slow) = (seq_read_rate(&fast.uri()), seq_read_rate(&slow.uri()));
    // One 1 MiB request in flight, each held 4 ms by the server: at most
    // 1 MiB per 4 ms, whatever the machine.
    let ceiling = (1u64 << 20) as f64 / 0.004;
    assert!(slow <= ceiling * 1.02, "{slow} B/s through a 4 ms delay");
    assert!(
        slow > ceiling / 10.0,
        "{slow} B/s: far below what the delay allows"
    );
    assert!(
        fast > slow * 1.5,
        "without the delay {fast} B/s, with it {slow} B/s"
    );
}

/// 16 MiB of pseudo-random bytes at `dir/name` (a sparse file would read
/// its holes from no disk at all).
fn random_file(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, rigs::bytes::pattern(0x05ee_df11_e5ee_d5ed, 16 << 20)).unwrap();
    path
}

/// One quick bench of `target` that may write it, as the table and as
/// JSON (two runs: each report is checked on its own figures).
fn table_and_json(target: &Path) -> (String, Value) {
    let target = target.to_str().unwrap();
    let table = quick(&[target, "--destructive"]);
    assert!(table.status.success(), "{table:?}");
    let json = json_of(&quick(&[target, "--destructive", "--json"]));
    (String::from_utf8(table.stdout).unwrap(), json)
}

/// Run every check, then fail naming each one that failed: a report
/// that breaks several promises says so at once.
fn all_hold(checks: &[(&str, &dyn Fn())]) {
    let failed: Vec<String> = checks
        .iter()
        .filter_map(|(name, check)| {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(check));
            outcome.err().map(|panic| {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                format!("{name}: {why}")
            })
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// A printed figure without the details' outlier mark.
fn unmarked(cell: &str) -> &str {
    cell.trim_end_matches(" !")
}

/// Each access pattern has one figure, or the lines that say how its
/// figures differ: a quantity two tests ask for is one measurement (the
/// JSON's same_as, one throughput in the details), the bs-sweep's size
/// of seq-read's and seq-write's requests is given beside their figures
/// with how the two are measured, and the zones say what span they read
/// against seq-read's whole working set.
fn each_pattern_has_one_figure(text: &str, report: &Value) {
    each_quantity_is_one_figure(report);
    let (header, rows) = table_rows(text, "details: ");
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (test, mode, op, pattern, bs, qd, offset, throughput) = (
        column("test"),
        column("mode"),
        column("op"),
        column("pattern"),
        column("bs"),
        column("qd"),
        column("offset"),
        column("throughput"),
    );
    let mut seen = std::collections::HashMap::new();
    for row in &rows {
        let key = [mode, op, pattern, bs, qd, offset].map(|c| row[c].clone());
        if let Some(first) = seen.insert(key, unmarked(&row[throughput]).to_owned()) {
            assert_eq!(first, unmarked(&row[throughput]), "two figures: {row:?}");
        }
    }
    let (_, sweep) = table_rows(text, "bs-sweep: ");
    let mut crossed = 0;
    for (direction, at) in [("read", 1), ("write", 3)] {
        let seq = format!("seq-{direction}");
        let Some(seq_row) = rows
            .iter()
            .find(|r| r[test] == seq && r[mode] == "direct" && r[qd] == "1")
        else {
            continue;
        };
        let sweep_row = sweep
            .iter()
            .find(|r| r[0] == seq_row[bs])
            .unwrap_or_else(|| panic!("no bs-sweep row of {}: {text}", seq_row[bs]));
        let said = format!(
            "{} {direction}: the bs-sweep's {} and {seq} direct's {} are the same requests",
            seq_row[bs],
            unmarked(&sweep_row[at]),
            unmarked(&seq_row[throughput]),
        );
        assert!(
            text.lines().any(|l| l.starts_with(&said)),
            "no line says how {seq}'s and the bs-sweep's {} figures differ ({said:?}):\n{text}",
            seq_row[bs]
        );
        crossed += 1;
    }
    assert!(crossed > 0, "no seq figure beside the bs-sweep: {text}");
    let seq_read = rows
        .iter()
        .find(|r| r[test] == "seq-read" && r[mode] == "direct" && r[qd] == "1")
        .unwrap_or_else(|| panic!("no seq-read direct: {text}"));
    assert!(rows.iter().any(|r| r[test] == "zones"), "{text}");
    let zones = text
        .lines()
        .find(|l| l.starts_with("zones: each of the "))
        .unwrap_or_else(|| panic!("nothing says what the zones read: {text}"));
    assert!(
        zones.contains(&format!(
            "seq-read direct ({}) makes the same requests over the whole",
            unmarked(&seq_read[throughput])
        )),
        "{zones}"
    );
}

/// Every rule the report states holds on the figures it prints: the
/// rule's floor and each verdict's bar are shares of the best, the bar at
/// or over the floor and at most the rule's share of the reference where
/// the noise set it; the answer's share reaches the bar in the bs-sweep
/// table and no smaller size's does; each summary cell is its detail
/// figure, as the summary says.
fn every_stated_rule_holds(text: &str) {
    let rule = text
        .lines()
        .find(|l| l.starts_with("rule: "))
        .unwrap_or_else(|| panic!("no rule: {text}"));
    let floor = rule
        .split_once("never below ")
        .and_then(|(_, rest)| rest.split_once("% of the best"))
        .map(|(n, _)| percent(n))
        .unwrap_or_else(|| panic!("the rule's floor is no share of the best: {rule}"));
    let top = percent(
        rule.split_once("the bar: ")
            .and_then(|(_, rest)| rest.split_once("% of the median"))
            .unwrap()
            .0,
    );
    let (_, sweep) = table_rows(text, "bs-sweep: ");
    for (direction, share_at) in [("read", 2), ("write", 4)] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{direction}: ")) && l.contains("smallest size"))
            .unwrap_or_else(|| panic!("no {direction} verdict: {text}"));
        // "read: 1 MiB at 98.0% of the best (1.05 GB/s at 4 MiB) is the
        // smallest size at or over the bar of 93.0% of the best (977 MB/s;
        // 94.9% of 1.03 GB/s, the median of the three highest: 95% less
        // the noise)"
        let rest = line.split_once(": ").unwrap().1;
        let (answer, rest) = rest.split_once(" at ").unwrap();
        let (answer_share, rest) = rest.split_once(" of the best (").unwrap();
        let best = rate(rest.split_once(" at ").unwrap().0);
        let (bar, rest) = rest
            .split_once("the bar of ")
            .and_then(|(_, rest)| rest.split_once("% of the best ("))
            .unwrap_or_else(|| panic!("the bar is no share of the best: {line}"));
        let (bar, answer, answer_share) = (percent(bar), size(answer), percent(answer_share));
        let (bar_rate, set_by) = rest.split_once("; ").unwrap();
        assert!(
            bar >= floor - 0.05,
            "bar {bar}% under the floor {floor}%: {line}\n{rule}"
        );
        // Three figures each, the bar to a tenth of a percent.
        let computed = bar / 100.0 * best;
        assert!(
            (rate(bar_rate) - computed).abs() <= 0.015 * computed,
            "{line}"
        );
        if set_by.starts_with("the floor") {
            assert!((bar - floor).abs() <= 0.05, "{line}");
        } else {
            let of_reference = percent(set_by.split_once("% of ").unwrap().0);
            assert!(of_reference <= top + 0.05, "{line}\n{rule}");
        }
        assert!(answer_share >= bar && answer_share <= 100.0, "{line}");
        for row in &sweep {
            let (bs, share) = (size(&row[0]), percent(&row[share_at]));
            if bs < answer {
                assert!(
                    share < bar + 0.05,
                    "{direction}: {bs} reached the bar: {text}"
                );
            }
            if bs == answer {
                assert_eq!(share, answer_share, "{text}");
            }
        }
    }
    let (_, summary) = table_rows(text, "ddx bench: ");
    let (header, details) = table_rows(text, "details: ");
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let figure = |test: &str, direction: &str, depth: &str| {
        details
            .iter()
            .find(|d| {
                d[column("test")] == test
                    && d[column("mode")] == "direct"
                    && d[column("op")] == direction
                    && d[column("qd")] == depth
            })
            .map(|d| unmarked(&d[column("throughput")]).to_owned())
    };
    for (row, depth) in summary.iter().take(2).zip(["8", "1"]) {
        assert_eq!(
            Some(row[1].clone()),
            figure("seq-read", "read", depth),
            "{text}"
        );
        assert_eq!(
            Some(row[3].clone()),
            figure("seq-write", "write", depth),
            "{text}"
        );
    }
}

/// A write the summary shows well above its read (1.3 times or more)
/// says why beside it, with the ratio of the figures printed; one close
/// to its read is not said to outrun it.
fn a_write_over_its_read_says_why(text: &str) {
    let (_, rows) = table_rows(text, "ddx bench: ");
    for row in &rows {
        if row[1] == "-" || row[3] == "-" {
            continue;
        }
        let ratio = rate(&row[3]) / rate(&row[1]);
        let named = format!("{} write ", row[0]);
        let said = text.lines().find_map(|l| {
            let rest = l.strip_prefix("- ")?;
            let at = rest.find(&named)?;
            let (said, _) = rest[at + named.len()..].split_once("x its read")?;
            Some((said.parse::<f64>().unwrap(), l))
        });
        if ratio >= 1.3 {
            let (said, line) = said.unwrap_or_else(|| {
                panic!(
                    "{}: the write is {ratio:.2}x the read, and nothing says why: {text}",
                    row[0]
                )
            });
            assert!((said - ratio).abs() <= 0.02 * ratio, "{ratio} vs {line}");
        }
        if ratio < 1.2 {
            assert!(said.is_none(), "{}: {ratio:.2}x is no gap: {text}", row[0]);
        }
    }
}

/// The loop device's report names its backing file, says its figures
/// are no disk's own and why its writes outrun nothing of a disk's; the
/// summary does not call its O_DIRECT "no page cache", nor the caches
/// line say O_DIRECT bypasses the cache.
fn names_the_backing_file(text: &str, report: &Value, device: &Path, backing: &Path) {
    let backing = std::fs::canonicalize(backing).unwrap();
    let backing = backing.to_str().unwrap();
    let name = device.file_name().unwrap().to_str().unwrap();
    let said = &report["target"]["backing"];
    assert_eq!(said["kind"], "loop_file", "{said}");
    assert_eq!(said["file"], backing, "{said}");
    assert_eq!(said["direct_io"], false, "{said}");
    let note = text
        .lines()
        .find(|l| {
            l.starts_with(&format!(
                "note: {name} is a loop device over the file {backing}"
            ))
        })
        .unwrap_or_else(|| panic!("no note names {backing}: {text}"));
    for words in [
        "through the host's page cache",
        "its writes land in them",
        "no figure is a disk's own",
    ] {
        assert!(note.contains(words), "{words:?} not in {note}");
    }
    let method = text
        .lines()
        .find(|l| l.contains("SEQ: sequential requests"))
        .unwrap();
    assert!(!method.contains("no page cache"), "{method}");
    assert!(method.contains(backing), "{method}");
    let caches = text.lines().find(|l| l.starts_with("caches: ")).unwrap();
    assert!(!caches.contains("bypass the cache anyway"), "{caches}");
}

/// A loop device over a file: each quantity once, every rule true to
/// its figures, the backing file named and the figures said not to be
/// a disk's, and a write that outruns its read explained.
#[test]
fn a_loop_device_report_agrees_with_itself_and_names_its_file() {
    let dir = scratch();
    let backing = random_file(dir.path(), "disk.img");
    let Some(device) = attach_loop(&backing) else {
        return;
    };
    let (text, report) = table_and_json(&device.path);
    let device_path = device.path.clone();
    drop(device);
    all_hold(&[
        ("one figure per access pattern", &|| {
            each_pattern_has_one_figure(&text, &report)
        }),
        ("every stated rule holds", &|| {
            every_stated_rule_holds(&text)
        }),
        ("the backing file is named", &|| {
            names_the_backing_file(&text, &report, &device_path, &backing)
        }),
        ("a write over its read says why", &|| {
            a_write_over_its_read_says_why(&text)
        }),
    ]);
}

/// A plain file: the same promises; what backs it is its own disk (or,
/// where the file's filesystem is itself on a loop device, that
/// device's file, named).
#[test]
fn a_file_report_agrees_with_itself() {
    let dir = scratch();
    let file = random_file(dir.path(), "data");
    let (text, report) = table_and_json(&file);
    all_hold(&[
        ("one figure per access pattern", &|| {
            each_pattern_has_one_figure(&text, &report)
        }),
        ("every stated rule holds", &|| {
            every_stated_rule_holds(&text)
        }),
        ("what backs it is said", &|| {
            let backing = &report["target"]["backing"];
            let method = text
                .lines()
                .find(|l| l.contains("SEQ: sequential requests"))
                .unwrap();
            match backing["kind"].as_str() {
                Some("own") => {
                    assert!(method.starts_with("O_DIRECT (no page cache);"), "{method}");
                    assert!(!text.contains("no figure is a disk's own"), "{text}");
                }
                Some("loop_file") => {
                    let file = backing["file"].as_str().unwrap();
                    assert!(text.contains(&format!("a loop device over the file {file}")));
                }
                _ => panic!("backing {backing}"),
            }
        }),
        ("a write over its read says why", &|| {
            a_write_over_its_read_says_why(&text)
        }),
    ]);
}
