//! `ddx bench` through the real binary: the JSON carries what the issue
//! promises, a directory is left as it was (also after SIGINT/SIGTERM), a
//! block device is never written without --destructive, a mounted one is
//! refused with it, and the HTML page holds its three charts.
//!
//! Loop-device tests need root and util-linux; they skip (`rigs::skip`)
//! where the machine cannot give them a loop device. Nothing here touches
//! a real disk: every device is a loop device over a file in a temp dir.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::rigs;
use crate::rigs::bytes::sha256;
use crate::rigs::cmd::ddx;
use crate::rigs::fixture::Ddx;

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

fn bench(args: &[&str]) -> Output {
    ddx().arg("bench").args(args).output().unwrap()
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

fn results<'a>(report: &'a Value, test: &str) -> Vec<&'a Value> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["test"] == test)
        .collect()
}

#[test]
fn json_carries_every_required_field() {
    let dir = scratch();
    std::fs::write(dir.path().join("keep"), b"mine").unwrap();
    let before = listing(dir.path());
    let target = dir.path().to_str().unwrap();
    let out = bench(&[&[target, "--json"][..], &QUICK].concat());
    let report = json_of(&out);
    assert_eq!(listing(dir.path()), before, "the directory changed");

    assert_eq!(report["schema_version"], 1);
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

    for test in [
        "seq-read",
        "seq-write",
        "bs-sweep",
        "latency",
        "qd-sweep",
        "zones",
    ] {
        let found = results(&report, test);
        assert!(!found.is_empty(), "no {test} results");
        for r in found {
            for key in ["mode", "block_size", "queue_depth", "min", "max"] {
                assert!(!r[key].is_null(), "{test}.{key} missing: {r}");
            }
            let median = r["throughput_bytes_per_sec"].as_f64().unwrap();
            let (min, max) = (r["min"].as_f64().unwrap(), r["max"].as_f64().unwrap());
            assert!(median > 0.0 && min <= median && median <= max, "{r}");
            let runs = r["runs"].as_array().unwrap();
            // bs-sweep measures twice as many rounds, for the recommendation.
            let expected = if test == "bs-sweep" { 4 } else { 2 };
            assert_eq!(runs.len(), expected, "every measured run is kept: {r}");
            assert!(runs.iter().all(|run| run["bytes"].as_u64().unwrap() > 0));
        }
    }
    let modes: Vec<&str> = results(&report, "seq-write")
        .iter()
        .map(|r| r["mode"].as_str().unwrap())
        .collect();
    assert_eq!(
        modes,
        ["buffered", "fdatasync", "fsync", "dsync", "sync", "direct"]
    );
    let read_modes: Vec<&str> = results(&report, "seq-read")
        .iter()
        .map(|r| r["mode"].as_str().unwrap())
        .collect();
    assert_eq!(read_modes, ["direct", "cached"]);

    for r in results(&report, "latency") {
        let l = &r["latency_ns"];
        for key in ["min", "mean", "p50", "p90", "p99", "p999", "max"] {
            assert!(l[key].as_f64().unwrap() > 0.0, "latency_ns.{key}: {r}");
        }
        assert!(l["p50"].as_u64() <= l["p99"].as_u64());
        assert!(l["p99"].as_u64() <= l["max"].as_u64());
        // 40 requests in each of 2 runs, every one kept.
        assert_eq!(r["latency_samples_ns"].as_array().unwrap().len(), 80);
    }
    let depths: Vec<u64> = results(&report, "qd-sweep")
        .iter()
        .map(|r| r["queue_depth"].as_u64().unwrap())
        .collect();
    assert!(depths == [1, 4, 16, 32, 64] || depths == [1], "{depths:?}");
    assert_eq!(results(&report, "zones").len(), 4);
    let sweep = results(&report, "bs-sweep");
    assert!(sweep
        .iter()
        .any(|r| r["block_size"] == 512 || r["block_size"] == 4096));
    assert!(sweep.iter().any(|r| r["block_size"] == 8 << 20));
    let rec = report["recommendation"]["read_block_size"]
        .as_u64()
        .unwrap();
    assert!(sweep.iter().any(|r| r["block_size"] == rec));
    // The recommendation can be redone from the JSON alone: each run's
    // median request time is kept.
    for op in ["read", "write"] {
        let points: Vec<(u64, Vec<f64>)> = sweep
            .iter()
            .filter(|r| r["op"] == op)
            .map(|r| {
                let bs = r["block_size"].as_u64().unwrap();
                let rounds = r["runs"].as_array().unwrap().iter().map(|run| {
                    let ns = run["request_median_ns"].as_u64().unwrap();
                    assert!(ns > 0, "{run}");
                    bs as f64 * 1e9 / ns as f64
                });
                (bs, rounds.collect())
            })
            .collect();
        let near = ddx::bench::recommend::NEAR_BEST;
        assert_eq!(
            ddx::bench::recommend::smallest_near_best(&points, near),
            report["recommendation"][format!("{op}_block_size")].as_u64(),
            "{op}"
        );
        // And so can how firmly it was decided (to the last bits, which
        // depend on the order the samples were computed in).
        let judgement = ddx::bench::recommend::judge(&points, near).unwrap();
        let reported = &report["recommendation"][op];
        let close = |a: f64, b: &Value| (a - b.as_f64().unwrap()).abs() <= 1e-9 * a.abs();
        assert_eq!(reported["block_size"], judgement.block_size, "{op}");
        assert_eq!(reported["steady"], judgement.steady, "{op}");
        assert!(close(judgement.of_best, &reported["of_best"]), "{op}");
        assert!(
            close(judgement.plateau_low, &reported["plateau_low"]),
            "{op}"
        );
        assert!(
            close(judgement.plateau_high, &reported["plateau_high"]),
            "{op}"
        );
        let calls = reported["close_calls"].as_array().unwrap();
        assert_eq!(calls.len(), judgement.close_calls.len(), "{op}");
        for (call, expected) in calls.iter().zip(&judgement.close_calls) {
            assert_eq!(call["block_size"], expected.block_size, "{op}");
            assert!(close(expected.of_best, &call["of_best"]), "{op}");
        }
    }
}

#[test]
fn table_and_markdown_name_the_recommendation() {
    let dir = scratch();
    let target = dir.path().to_str().unwrap();
    let quick = [&[target, "--tests=bs-sweep"][..], &QUICK].concat();
    let table = bench(&quick);
    assert!(table.status.success());
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.contains("recommended block size: read "), "{text}");
    assert!(text.lines().next().unwrap().starts_with("test "), "{text}");
    let md = bench(&[&quick[..], &["--markdown"]].concat());
    let md = String::from_utf8(md.stdout).unwrap();
    assert!(
        md.contains("| test | mode |") && md.contains("|---|"),
        "{md}"
    );
    assert!(listing(dir.path()).is_empty());
}

#[test]
fn html_has_three_charts_with_their_points() {
    let dir = scratch();
    let out_dir = scratch();
    let page = out_dir.path().join("report.html");
    let target = dir.path().to_str().unwrap();
    let out = bench(
        &[
            &[target, "--json", "--html", page.to_str().unwrap()][..],
            &QUICK,
        ]
        .concat(),
    );
    let report = json_of(&out);
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
        let points = doc
            .descendants()
            .filter(|n| n.has_tag_name("circle"))
            .count();
        let lines: Vec<usize> = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .map(|n| n.attribute("points").unwrap().split(' ').count())
            .collect();
        match name.as_str() {
            "bs-sweep" => {
                assert_eq!(points, results(&report, "bs-sweep").len());
                assert_eq!(lines.len(), 2, "read and write lines");
            }
            "zones" => assert_eq!(points, 4),
            "latency" => assert_eq!(lines, [40, 40], "write and read histograms"),
            _ => unreachable!(),
        }
        // Every point lies inside the drawing.
        for c in doc.descendants().filter(|n| n.has_tag_name("circle")) {
            let (x, y): (f64, f64) = (
                c.attribute("cx").unwrap().parse().unwrap(),
                c.attribute("cy").unwrap().parse().unwrap(),
            );
            assert!((0.0..=760.0).contains(&x) && (0.0..=300.0).contains(&y));
        }
    }
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

/// Start a long bench on a directory, wait until its file exists, send
/// `signal`, and check the process died of it leaving the directory as it
/// was.
fn interrupted_mid_run(signal: i32) {
    let dir = scratch();
    std::fs::write(dir.path().join("keep"), b"mine").unwrap();
    let before = listing(dir.path());
    let mut child = ddx()
        .args(["bench", dir.path().to_str().unwrap()])
        .args(["--size=32M", "--runs=20", "--tests=bs-sweep,seq-write"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while listing(dir.path()).len() == before.len() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no bench file appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Well into the run: past the fill, inside the measured passes.
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the bench ended too soon"
    );
    // SAFETY: kill(2) on our own child's pid, which has not been reaped.
    let rc = unsafe { libc::kill(child.id() as i32, signal) };
    assert_eq!(rc, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(signal), "{status:?}");
    assert_eq!(
        listing(dir.path()),
        before,
        "the bench left something behind"
    );
}

#[test]
fn sigint_mid_run_leaves_the_directory_as_it_was() {
    interrupted_mid_run(libc::SIGINT);
}

#[test]
fn sigterm_mid_run_leaves_the_directory_as_it_was() {
    interrupted_mid_run(libc::SIGTERM);
}

#[test]
fn an_existing_file_is_only_read_without_destructive() {
    let dir = scratch();
    let path = dir.path().join("data");
    let data = rigs::bytes::pattern(4, 4 << 20);
    std::fs::write(&path, &data).unwrap();
    let out = bench(&[&[path.to_str().unwrap(), "--json"][..], &QUICK].concat());
    let report = json_of(&out);
    assert!(results(&report, "seq-write").is_empty());
    assert!(!results(&report, "seq-read").is_empty());
    assert!(report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["test"] == "seq-write"));
    assert_eq!(std::fs::read(&path).unwrap(), data, "the file was written");
    assert_eq!(report["target"]["working_set_bytes"], 4 << 20);
}

#[test]
fn errors_are_one_line_and_exit_1() {
    let out = bench(&["/nonexistent-dir/sub/file"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("ddx bench: ") || err.contains("bench: creating"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    // A bad --html path fails before any measuring; a failed bench leaves
    // no half-made page behind.
    let dir = scratch();
    let started = Instant::now();
    let out = bench(&[
        dir.path().to_str().unwrap(),
        "--html",
        "/nonexistent-dir/x.html",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("creating /nonexistent-dir/x.html"));
    let page = dir.path().join("page.html");
    let out = bench(&[
        "/nonexistent-dir/sub/file",
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!page.exists());
    assert!(listing(dir.path()).is_empty());

    let out = bench(&[]);
    assert_eq!(out.status.code(), Some(1), "a missing TARGET is an error");
    let out = bench(&[".", "--tests=nope"]);
    assert_eq!(out.status.code(), Some(1));

    let help = bench(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    let help = String::from_utf8(help.stdout).unwrap();
    for option in [
        "--tests",
        "--size",
        "--runs",
        "--destructive",
        "--json",
        "--markdown",
        "--html",
    ] {
        assert!(help.contains(option), "{option} not in bench --help");
    }
    let top = Ddx::new().arg("--help").succeeds();
    let top = String::from_utf8(top.stdout).unwrap();
    assert!(top.contains("ddx bench TARGET"), "{top}");
}

/// A loop device over 16 MiB of pseudo-random bytes in `dir`, and the
/// backing file's checksum before anything ran; None, after skipping,
/// where loop devices are not available.
fn loop_over_random_bytes(dir: &Path) -> Option<(rigs::LoopDevice, PathBuf, String)> {
    let backing = dir.join("disk.img");
    std::fs::write(
        &backing,
        rigs::bytes::pattern(0x2545_f491_4f6c_dd1d, 16 << 20),
    )
    .unwrap();
    let checksum = sha256(&backing);
    let device = rigs::or_skip(rigs::LoopDevice::attach(
        &backing,
        rigs::LoopOptions::default(),
    ))?;
    Some((device, backing, checksum))
}

#[test]
fn a_loop_device_is_never_written_without_destructive() {
    let dir = scratch();
    let Some((device, backing, checksum)) = loop_over_random_bytes(dir.path()) else {
        return;
    };
    let out = bench(&[&[device.path.to_str().unwrap(), "--json"][..], &QUICK].concat());
    let report = json_of(&out);
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
    let out = bench(
        &[
            &[
                device.path.to_str().unwrap(),
                "--destructive",
                "--json",
                "--tests=seq-write,latency",
            ][..],
            &QUICK,
        ]
        .concat(),
    );
    let report = json_of(&out);
    drop(device);
    assert_ne!(sha256(&backing), checksum, "nothing was written");
    assert_eq!(report["target"]["writable"], true);
    assert_eq!(results(&report, "seq-write").len(), 6);
    assert!(results(&report, "latency")
        .iter()
        .any(|r| r["op"] == "write"));
}

#[test]
fn destructive_refuses_a_mounted_loop_device() {
    let Some(fs) = rigs::or_skip(rigs::MountedFs::new("ext4", 16 << 20)) else {
        return;
    };
    let precious = fs.root.join("precious");
    std::fs::write(&precious, b"data").unwrap();
    let checksum_before = sha256(&precious);

    let device = fs.device().name();
    let out = bench(&[&device, "--destructive", "--size=4M"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("refusing to write") && err.contains("mounted on"),
        "{err}"
    );
    assert_eq!(sha256(&precious), checksum_before);
}
