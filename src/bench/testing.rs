//! Reports made of figures measured by no device, for testing what the
//! reports make of them: every test's figures with chosen values, so a
//! test can say which number must appear where. Claims about a device's
//! speed are measured on real files and devices (tests/all/bench.rs);
//! these only test the report logic.

use std::time::Duration;

use super::measure::{CacheDrop, Sample};
use super::results::{Figure, Measure, Outcome, Parameters, Report, TargetReport};

pub const MIB: u64 = 1 << 20;

/// `runs` runs of `bytes` in `seconds` each, in `ios` requests, each
/// request taking `request_ns` where given.
pub fn runs(
    runs: usize,
    bytes: u64,
    seconds: f64,
    ios: u64,
    request_ns: Option<u64>,
) -> Vec<Sample> {
    let run = Sample {
        bytes,
        ios,
        elapsed: Duration::from_secs_f64(seconds),
        cpu: Duration::from_secs_f64(seconds / 10.0),
        latencies_ns: request_ns.map_or(vec![], |ns| vec![ns; ios as usize]),
    };
    vec![run; runs]
}

/// A bs-sweep of `op` from 4 KiB to 16 MiB whose figure (block size over
/// the median request time) is about `rate(bs)` bytes per second: six
/// rounds, each size's requests a few percent slower or faster in each
/// (the same spread for every size, in another order), and each run
/// `stall` times as long as its requests.
pub fn sweep(out: &mut Outcome, op: &'static str, rate: impl Fn(u64) -> f64, stall: f64) {
    const NOISE: [f64; 6] = [1.0, 1.06, 0.95, 1.03, 0.97, 1.05];
    for k in 12..=24usize {
        let bs = 1u64 << k;
        let figure = Figure::new("bs-sweep", "direct", op, "sequential", bs)
            .measured_as(Measure::MedianRequest);
        let rounds: Vec<Sample> = (0..6)
            .map(|round| {
                let ns = (bs as f64 * 1e9 / rate(bs) * NOISE[(round + k) % 6]).round() as u64;
                let seconds = ns as f64 * 4.0 * stall / 1e9;
                runs(1, bs * 4, seconds, 4, Some(ns)).remove(0)
            })
            .collect();
        out.push(figure, &rounds);
    }
}

/// Every test's figures on a writable directory, with round values: seq
/// 1 MiB reads at 800 MB/s one at a time and 1.6 GB/s 8 in flight,
/// writes at 600 MB/s and 1.2 GB/s; random 4 KiB reads of 40 MB/s at
/// depth 1 and 400 MB/s at 32, writes half of that; a bs-sweep whose
/// rates rise to 1.2 GB/s reading (and 2 GB/s writing) from 1 MiB, with
/// 16 MiB 3% above 4 MiB, so the highest figure is above the plateau.
pub fn outcome() -> Outcome {
    let mut out = Outcome::default();
    let seq = |test, mode, op| Figure::new(test, mode, op, "sequential", MIB);
    let pass = 256 * MIB;
    out.push(
        seq("seq-read", "direct", "read"),
        &runs(3, pass, 0.33554432, 256, None),
    );
    out.push(
        seq("seq-read", "direct", "read").in_flight(8, "io_uring"),
        &runs(3, pass, 0.16777216, 256, None),
    );
    out.push_noted(
        seq("seq-read", "cached", "read"),
        &runs(3, pass, 0.05, 256, None),
        Some("from the page cache"),
    );
    for (mode, rate) in [
        ("buffered", 3e9),
        ("fdatasync", 700e6),
        ("fsync", 690e6),
        ("dsync", 100e6),
        ("sync", 90e6),
        ("direct", 600e6),
    ] {
        out.push(
            seq("seq-write", mode, "write"),
            &runs(3, pass, pass as f64 / rate, 256, None),
        );
    }
    out.push(
        seq("seq-write", "direct", "write").in_flight(8, "io_uring"),
        &runs(3, pass, pass as f64 / 1.2e9, 256, None),
    );
    sweep(
        &mut out,
        "read",
        |bs| match bs {
            b if b >= 16 * MIB => 1.236e9,
            b if b >= MIB => 1.2e9,
            b => 1.2e9 * b as f64 / MIB as f64,
        },
        1.4,
    );
    sweep(
        &mut out,
        "write",
        |bs| match bs {
            b if b >= 16 * MIB => 2.06e9,
            b if b >= MIB => 2e9,
            b => 2e9 * b as f64 / MIB as f64,
        },
        1.7,
    );
    for (op, mode, pattern) in [
        ("write", "direct+dsync", "sequential"),
        ("read", "direct", "random"),
    ] {
        let figure = Figure::new("latency", mode, op, pattern, 512);
        out.push(figure, &runs(3, 512 * 1000, 0.1, 1000, Some(100_000)));
    }
    for op in ["read", "write"] {
        let scale = if op == "read" { 1.0 } else { 0.5 };
        for (qd, rate) in [(1, 40e6), (4, 150e6), (16, 300e6), (32, 400e6), (64, 420e6)] {
            let figure = Figure::new("qd-sweep", "direct", op, "random", 4096);
            let figure = if qd == 1 {
                figure
            } else {
                figure.in_flight(qd, "io_uring")
            };
            let ios = (rate * scale / 4096.0 * 0.25) as u64;
            let ns = (4096.0 * 1e9 * f64::from(qd) / (rate * scale)) as u64;
            out.push(figure, &runs(3, ios * 4096, 0.25, ios, Some(ns)));
        }
    }
    for i in 0..4u64 {
        let figure = Figure::new("zones", "direct", "read", "sequential", MIB).at(i * 64 * MIB);
        let rate = 800e6 - 50e6 * i as f64;
        out.push(
            figure,
            &runs(3, 16 * MIB, 16.0 * MIB as f64 / rate, 16, None),
        );
    }
    out
}

/// The report of [`outcome`] (or another) on a directory.
pub fn report(out: Outcome, tests: Vec<&'static str>) -> Report {
    let target = TargetReport {
        path: "/var/tmp/bench".into(),
        kind: "directory",
        bench_file: Some("/var/tmp/bench/ddx-bench.tmp".into()),
        working_set_bytes: 256 * MIB,
        target_bytes: 256 * MIB,
        device: Default::default(),
        writable: true,
        served: false,
        passthrough: None,
        backing: crate::bench::backing::Backing::Own,
    };
    let settings = Parameters {
        tests,
        runs: 3,
        sweep_rounds: 6,
        warmup_runs: 1,
        size: 256 * MIB,
        time_per_run_sec: 0.25,
    };
    let cache = CacheDrop {
        method: "fdatasync + posix_fadvise(DONTNEED)".into(),
        dropped: true,
        note: None,
    };
    Report::assemble(std::time::UNIX_EPOCH, target, settings, cache, out, None)
}

/// Every test, in the order they run.
pub fn all_tests() -> Vec<&'static str> {
    vec![
        "seq-read",
        "seq-write",
        "bs-sweep",
        "latency",
        "qd-sweep",
        "zones",
    ]
}
