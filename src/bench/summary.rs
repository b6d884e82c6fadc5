//! The first screen of a report, as CrystalDiskMark and KDiskMark show a
//! disk: four rows of sequential and random requests, read and write, each
//! named for its block size, queue depth and threads (SEQ1M Q8T1:
//! sequential 1 MiB requests, 8 in flight, one thread). The summary
//! measures nothing of its own: each cell is a figure a detail test
//! measured (seq-read, seq-write, qd-sweep), shown again with the same
//! value, so the first screen and the details cannot disagree. Each cell
//! also carries the fio options that measure the same quantity, so a
//! reader can check it with the tool they already trust. A row whose
//! write outran its read by [`GAP`] or more says why beside it, in the
//! terms of what backs the target (`bench::backing`): a loop device's
//! backing file in the host's page cache, a device's write cache.

use serde::Serialize;

use super::results::{Machine, Measure, Parameters, Skip, TargetReport, TestResult};
use super::scenario::COPIED;
use crate::stats::Latency;
use crate::sys::passthrough::Interface;

/// One row as CrystalDiskMark names it, and where its figures come from.
#[derive(Debug, Clone, Copy)]
struct Spec {
    /// "SEQ" or "RND".
    kind: &'static str,
    pattern: &'static str,
    /// The block size the tests use unless the target forbids it (a
    /// working set smaller than 1 MiB, an O_DIRECT alignment above 4 KiB).
    nominal_block_size: u64,
    queue_depth: u32,
    read_test: &'static str,
    write_test: &'static str,
}

/// CrystalDiskMark's default rows, in its order.
const ROWS: [Spec; 4] = [
    Spec {
        kind: "SEQ",
        pattern: "sequential",
        nominal_block_size: 1 << 20,
        queue_depth: 8,
        read_test: "seq-read",
        write_test: "seq-write",
    },
    Spec {
        kind: "SEQ",
        pattern: "sequential",
        nominal_block_size: 1 << 20,
        queue_depth: 1,
        read_test: "seq-read",
        write_test: "seq-write",
    },
    Spec {
        kind: "RND",
        pattern: "random",
        nominal_block_size: 4096,
        queue_depth: 32,
        read_test: "qd-sweep",
        write_test: "qd-sweep",
    },
    Spec {
        kind: "RND",
        pattern: "random",
        nominal_block_size: 4096,
        queue_depth: 1,
        read_test: "qd-sweep",
        write_test: "qd-sweep",
    },
];

/// The queue depth the sequential tests measure beside one in flight:
/// CrystalDiskMark's SEQ1M Q8T1.
pub const SEQ_DEPTH: u32 = ROWS[0].queue_depth;

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// How every cell was measured, in one paragraph.
    pub method: String,
    pub rows: Vec<Row>,
    /// Why no cell's figure is the device's own and fio's options give
    /// others, where the machine says so (an emulated CPU).
    pub not_the_device: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// "SEQ1M Q8T1": the pattern, block size, queue depth and threads.
    pub name: String,
    pub pattern: &'static str,
    pub block_size: u64,
    pub queue_depth: u32,
    pub threads: u32,
    pub read: Cell,
    pub write: Cell,
    /// Where the write cell is [`GAP`] times the read cell or more: by
    /// how much, and why writes outrun reads on this target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes_faster: Option<Gap>,
}

/// A write figure this many times its row's read figure is explained
/// beside it: well past one run's noise, and past what a reader would
/// take for a disk that writes as fast as it reads.
pub const GAP: f64 = 1.25;

/// How far a row's write outran its read, and what acknowledges the
/// writes before the medium holds them.
#[derive(Debug, Clone, Serialize)]
pub struct Gap {
    /// The write's throughput over the read's.
    pub ratio: f64,
    pub why: String,
}

/// One direction of a row: the detail figure it shows, or why there is
/// none.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// The test whose figure this is.
    pub test: &'static str,
    pub mode: Option<&'static str>,
    pub io: Option<&'static str>,
    pub engine: Option<&'static str>,
    /// Bytes over wall time, the median of the runs (the figure's own).
    pub throughput_bytes_per_sec: Option<f64>,
    pub iops: Option<f64>,
    pub latency_ns: Option<Latency>,
    /// Why nothing was measured, when nothing was.
    pub missing: Option<String>,
    /// fio's options for the same requests on the same file.
    pub fio: String,
    /// Where ddx makes the cell's requests in a way fio's engine cannot
    /// (an sg node's reserve buffers, mapped into ddx): the same requests
    /// made fio's way, measured by ddx, which is the figure the `fio`
    /// options reproduce; None where they reproduce the cell's own.
    pub fio_way: Option<FioWay>,
}

/// The figure of a cell's requests made fio's way, and how that way
/// differs from ddx's.
#[derive(Debug, Clone, Serialize)]
pub struct FioWay {
    /// The detail figure's mode ("passthrough+copied").
    pub mode: &'static str,
    pub throughput_bytes_per_sec: f64,
    pub iops: f64,
    /// What differs between the two ways, in a reader's words.
    pub differs: String,
}

impl Cell {
    pub fn measured(&self) -> bool {
        self.throughput_bytes_per_sec.is_some()
    }
}

/// What the reader needs besides the figures, from the report.
pub struct Context<'a> {
    pub results: &'a [TestResult],
    pub skipped: &'a [Skip],
    pub settings: &'a Parameters,
    pub target: &'a TargetReport,
    pub machine: &'a Machine,
    pub interrupted: Option<&'static str>,
}

impl Summary {
    pub fn of(context: &Context<'_>) -> Summary {
        let rows: Vec<Row> = ROWS
            .iter()
            .map(|spec| {
                let read = cell(context, spec, "read");
                let write = cell(context, spec, "write");
                let block_size = [&read, &write]
                    .iter()
                    .find_map(|c| c.1)
                    .unwrap_or(spec.nominal_block_size);
                let writes_faster = gap(context, &read.0, &write.0);
                Row {
                    name: format!(
                        "{}{} Q{}T1",
                        spec.kind,
                        size_label(block_size),
                        spec.queue_depth
                    ),
                    pattern: spec.pattern,
                    block_size,
                    queue_depth: spec.queue_depth,
                    threads: 1,
                    read: read.0,
                    write: write.0,
                    writes_faster,
                }
            })
            .collect();
        let mut method = method(context);
        let cells = || rows.iter().flat_map(|r: &Row| [&r.read, &r.write]);
        if cells().any(|c| c.fio_way.is_some()) {
            method.push_str(
                " Where fio cannot make them as ddx does, the figure of fio's way is given \
                 below.",
            );
        }
        let not_the_device = context.machine.emulated.as_ref().map(|cpu| {
            format!(
                "{cpu}: each figure is mostly the CPU the tool spends per request, and the \
                 emulated device runs on the same CPUs, so none is the device's own; fio's \
                 options give other figures by fio's own cost per request, which its own \
                 options move (--gtod_reduce=1 leaves out its clock reads for latency \
                 statistics; --fixedbufs=1 its pinning of each buffer)"
            )
        });
        Summary {
            method,
            rows,
            not_the_device,
        }
    }
}

/// The write's lead over the read, where it is [`GAP`] or more.
fn gap(context: &Context<'_>, read: &Cell, write: &Cell) -> Option<Gap> {
    let (read, write) = (
        read.throughput_bytes_per_sec?,
        write.throughput_bytes_per_sec?,
    );
    let ratio = write / read;
    (read > 0.0 && ratio >= GAP).then(|| Gap {
        ratio,
        why: context
            .target
            .backing
            .writes_outrun_reads(context.target.served, context.target.passthrough.is_some()),
    })
}

/// The detail figure a cell shows: the uncached mode, one offset-free
/// run measure, the row's pattern and depth.
fn source<'a>(context: &Context<'a>, spec: &Spec, op: &str) -> Option<&'a TestResult> {
    of_mode(context, spec, op, |mode| {
        matches!(mode, "direct" | "nbd" | "passthrough")
    })
}

/// The cell's figure made fio's way, where ddx measured one beside it.
fn fio_way<'a>(context: &Context<'a>, spec: &Spec, op: &str) -> Option<&'a TestResult> {
    of_mode(context, spec, op, |mode| mode == COPIED)
}

fn of_mode<'a>(
    context: &Context<'a>,
    spec: &Spec,
    op: &str,
    mode: impl Fn(&str) -> bool,
) -> Option<&'a TestResult> {
    let test = match op {
        "read" => spec.read_test,
        _ => spec.write_test,
    };
    context.results.iter().find(|r| {
        let f = &r.figure;
        f.test == test
            && f.op == op
            && f.pattern == spec.pattern
            && f.queue_depth == spec.queue_depth
            && f.offset.is_none()
            && f.measure == Measure::Run
            && mode(f.mode)
    })
}

/// Why fio's `sg` engine cannot make a cell's requests as ddx makes
/// them, and what its options measure instead.
const SG_COPIES: &str = "ddx moves the data in the sg driver's reserve buffers, mapped into \
     it, one descriptor per command in flight, as its copies do; fio's sg engine cannot map \
     them: it passes buffers of its own, which the driver copies through pages it allocates \
     and zeroes for each command. fio's options measure that way, whose figure ddx gives \
     beside the cell";

/// The cell, and the block size its figure was measured at.
fn cell(context: &Context<'_>, spec: &Spec, op: &'static str) -> (Cell, Option<u64>) {
    let test = match op {
        "read" => spec.read_test,
        _ => spec.write_test,
    };
    let found = source(context, spec, op);
    let block_size = found.map_or(spec.nominal_block_size, |r| r.figure.block_size);
    let fio = fio_options(context, spec, op, block_size);
    let fio_way = found
        .and_then(|_| fio_way(context, spec, op))
        .map(|r| FioWay {
            mode: r.figure.mode,
            throughput_bytes_per_sec: r.throughput_bytes_per_sec,
            iops: r.iops,
            differs: SG_COPIES.to_owned(),
        });
    let cell = match found {
        Some(r) => Cell {
            test,
            mode: Some(r.figure.mode),
            io: Some(r.figure.io),
            engine: Some(r.figure.engine),
            throughput_bytes_per_sec: Some(r.throughput_bytes_per_sec),
            iops: Some(r.iops),
            latency_ns: r.latency_ns,
            missing: None,
            fio,
            fio_way,
        },
        None => Cell {
            test,
            mode: None,
            io: None,
            engine: None,
            throughput_bytes_per_sec: None,
            iops: None,
            latency_ns: None,
            missing: Some(missing(context, test, op, spec.queue_depth)),
            fio,
            fio_way: None,
        },
    };
    (cell, found.map(|r| r.figure.block_size))
}

/// Why a cell is empty, in a few words.
fn missing(context: &Context<'_>, test: &str, op: &str, depth: u32) -> String {
    if !context.settings.tests.contains(&test) {
        return format!("not run: --tests did not name {test}");
    }
    if let Some(skip) = context.skipped.iter().find(|s| s.explains(test, op, depth)) {
        return skip.reason.clone();
    }
    match context.interrupted {
        Some(signal) => format!("interrupted by {signal} before it was measured"),
        None => "not measured".to_owned(),
    }
}

/// "1M", "4K", "512B": CrystalDiskMark's way of naming a block size.
pub fn size_label(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{}M", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes % (1 << 10) == 0 {
        format!("{}K", bytes >> 10)
    } else {
        format!("{bytes}B")
    }
}

fn export(context: &Context<'_>) -> bool {
    context.target.served
}

/// The fio options that make the same requests as `spec`'s `op` cell on
/// the same target: what bench/bench-vs-fio.sh runs beside ddx.
fn fio_options(context: &Context<'_>, spec: &Spec, op: &str, block_size: u64) -> String {
    let rw = match (spec.pattern, op) {
        ("random", "read") => "randread",
        ("random", _) => "randwrite",
        (_, "read") => "read",
        _ => "write",
    };
    let mut options = vec![
        format!("--rw={rw}"),
        format!("--bs={block_size}"),
        format!("--iodepth={}", spec.queue_depth),
        "--numjobs=1".to_owned(),
    ];
    if export(context) {
        options.push("--ioengine=nbd".to_owned());
        options.push(format!("--uri={}", context.target.path));
    } else if let Some(interface) = context.target.passthrough {
        options.extend(fio_passthrough(context.target, interface));
    } else {
        options.push("--direct=1".to_owned());
        let engine = if spec.queue_depth == 1 {
            "psync"
        } else {
            "io_uring"
        };
        options.push(format!("--ioengine={engine}"));
    }
    options.push(format!("--size={}", context.target.working_set_bytes));
    if spec.pattern == "random" {
        // ddx draws each offset afresh (fio's norandommap) and runs for a
        // time, not a pass.
        let ms = (context.settings.time_per_run_sec * 1e3).round().max(1.0);
        options.push("--norandommap".to_owned());
        options.push("--randrepeat=0".to_owned());
        options.push("--time_based".to_owned());
        options.push(format!("--runtime={ms:.0}ms"));
    }
    options.join(" ")
}

/// fio's engine for the commands a generic node takes, on that node: its
/// `sg` engine keeps SCSI commands in flight through the sg driver's
/// queue as ddx does, its `io_uring_cmd` engine NVMe commands through
/// io_uring. A bsg node has no fio engine: fio's `sg` engine on the
/// block device of the same disk sends the same commands through SG_IO,
/// one at a time, as ddx does on bsg.
fn fio_passthrough(target: &TargetReport, interface: Interface) -> Vec<String> {
    let filename = match (interface, &target.device.disk_name) {
        (Interface::Bsg, Some(disk)) => format!("/dev/{disk}"),
        _ => target.path.clone(),
    };
    let engine: &[&str] = match interface {
        Interface::NvmeGeneric => &["--ioengine=io_uring_cmd", "--cmd_type=nvme"],
        Interface::ScsiGeneric | Interface::Bsg => &["--ioengine=sg"],
    };
    let mut options: Vec<String> = engine.iter().map(|s| s.to_string()).collect();
    options.push(format!("--filename={filename}"));
    options
}

/// How every cell was measured.
fn method(context: &Context<'_>) -> String {
    let settings = context.settings;
    let runs = match settings.runs {
        1 => "one run".to_owned(),
        n => format!("the median of {n} runs"),
    };
    let size = crate::text::human::size_text(context.target.working_set_bytes);
    let (how, queue) = if export(context) {
        (
            "NBD requests to the export over one connection (no cache of ddx's in between)"
                .to_owned(),
            "Q1: one request at a time; Qn: n requests in flight through libnbd",
        )
    } else if let Some(interface) = context.target.passthrough {
        (
            match interface {
                Interface::NvmeGeneric => {
                    "NVMe Read and Write commands through the namespace's generic node (no page \
                     cache), each request one command"
                }
                _ => {
                    "SCSI READ and WRITE commands through the disk's generic node (no page \
                     cache), each request one command"
                }
            }
            .to_owned(),
            match interface {
                Interface::NvmeGeneric => {
                    "Q1: one command at a time, through the copy's passthrough end; Qn: n \
                     commands kept in flight through io_uring (URING_CMD)"
                }
                _ => {
                    "Q1: one command at a time, through the copy's passthrough end; Qn: n \
                     commands kept in flight through the sg driver's queue"
                }
            },
        )
    } else {
        (
            context.target.backing.direct_words(),
            "Q1: one request at a time (pread, pwrite); Qn: n requests kept in flight \
             through io_uring",
        )
    };
    format!(
        "{how}; SEQ: sequential requests, a whole pass over the {size} working set per run; \
         RND: requests at random aligned offsets, each drawn afresh, for {} s per run; \
         {queue}; T1: one thread. Each cell is bytes over wall time, {runs} after a \
         warm-up run, the same figure the details show; fio with each cell's options on \
         the same file measures the same requests.",
        settings.time_per_run_sec
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::measure::Sample;
    use crate::bench::results::{Figure, Outcome};
    use std::time::Duration;

    fn settings(tests: Vec<&'static str>) -> Parameters {
        Parameters {
            tests,
            runs: 3,
            sweep_rounds: 6,
            warmup_runs: 1,
            size: 64 << 20,
            time_per_run_sec: 0.25,
        }
    }

    fn machine() -> Machine {
        Machine {
            hostname: None,
            kernel: None,
            cpus: 2,
            emulated: None,
        }
    }

    fn target(kind: &'static str) -> TargetReport {
        TargetReport {
            path: "/var/tmp/x".into(),
            kind,
            bench_file: None,
            working_set_bytes: 64 << 20,
            target_bytes: 64 << 20,
            device: Default::default(),
            writable: true,
            served: kind == "NBD export",
            passthrough: None,
            backing: crate::bench::backing::Backing::Own,
        }
    }

    /// `mb` MiB in `ms` milliseconds, in `ios` requests.
    fn run(mb: u64, ms: u64, ios: u64) -> Sample {
        Sample {
            bytes: mb << 20,
            ios,
            elapsed: Duration::from_millis(ms),
            cpu: Duration::ZERO,
            latencies_ns: vec![],
        }
    }

    fn summary(out: &Outcome, tests: Vec<&'static str>, kind: &'static str) -> Summary {
        summary_on(out, tests, &target(kind))
    }

    fn summary_on(out: &Outcome, tests: Vec<&'static str>, target: &TargetReport) -> Summary {
        Summary::of(&Context {
            results: &out.results,
            skipped: &out.skipped,
            settings: &settings(tests),
            target,
            machine: &machine(),
            interrupted: None,
        })
    }

    /// Each cell is the detail figure of its row's pattern, direction and
    /// depth, with the figure's own value; a figure of another depth,
    /// mode or measure is never taken for it.
    #[test]
    fn each_cell_is_its_detail_figure() {
        let mut out = Outcome::default();
        let seq = |op, test| Figure::new(test, "direct", op, "sequential", 1 << 20);
        let rnd = |op| Figure::new("qd-sweep", "direct", op, "random", 4096);
        // Decoys first: the cached read, the buffered write, the sweep's
        // 1 MiB point, a zone at offset 0, another depth.
        out.push(
            Figure::new("seq-read", "cached", "read", "sequential", 1 << 20),
            &[run(900, 100, 900)],
        );
        out.push(
            Figure::new("seq-write", "buffered", "write", "sequential", 1 << 20),
            &[run(800, 100, 800)],
        );
        out.push(
            seq("read", "bs-sweep").measured_as(Measure::MedianRequest),
            &[run(700, 100, 700)],
        );
        out.push(seq("read", "zones").at(0), &[run(600, 100, 600)]);
        out.push(rnd("read").in_flight(4, "io_uring"), &[run(500, 100, 500)]);
        // The figures.
        out.push(seq("read", "seq-read"), &[run(100, 100, 100)]);
        out.push(
            seq("read", "seq-read").in_flight(8, "io_uring"),
            &[run(300, 100, 300)],
        );
        out.push(seq("write", "seq-write"), &[run(50, 100, 50)]);
        out.push(
            rnd("read").in_flight(32, "io_uring"),
            &[run(40, 100, 10240)],
        );
        out.push(rnd("read"), &[run(4, 100, 1024)]);
        out.push(rnd("write"), &[run(2, 100, 512)]);
        let all = vec!["seq-read", "seq-write", "qd-sweep"];
        let s = summary(&out, all, "directory");
        let names: Vec<&str> = s.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            ["SEQ1M Q8T1", "SEQ1M Q1T1", "RND4K Q32T1", "RND4K Q1T1"]
        );
        let rate = |c: &Cell| {
            c.throughput_bytes_per_sec
                .map(|t| t / (1 << 20) as f64 * 0.1)
        };
        let cells: Vec<(Option<f64>, Option<f64>)> = s
            .rows
            .iter()
            .map(|r| (rate(&r.read), rate(&r.write)))
            .collect();
        assert_eq!(
            cells,
            [
                (Some(300.0), None),
                (Some(100.0), Some(50.0)),
                (Some(40.0), None),
                (Some(4.0), Some(2.0)),
            ]
        );
        assert_eq!(s.rows[2].read.iops, Some(102_400.0));
        assert_eq!(s.rows[0].read.engine, Some("io_uring"));
        assert_eq!(s.rows[1].write.engine, Some("pwrite"));
        assert_eq!(s.rows[0].write.missing.as_deref(), Some("not measured"));
    }

    #[test]
    fn an_empty_cell_says_why() {
        let mut out = Outcome::default();
        out.skip("seq-write", None, "an existing file is only read");
        out.skip("qd-sweep", Some("direct"), "io_uring refused")
            .at_depth(32);
        out.skip("qd-sweep", Some("direct"), "only read")
            .of_op("write");
        let s = summary(&out, vec!["seq-write", "qd-sweep"], "file");
        let why = |row: usize, op: &str| {
            let r = &s.rows[row];
            let c = if op == "read" { &r.read } else { &r.write };
            c.missing.clone().unwrap()
        };
        assert_eq!(why(0, "read"), "not run: --tests did not name seq-read");
        assert_eq!(why(1, "write"), "an existing file is only read");
        assert_eq!(why(2, "read"), "io_uring refused");
        assert_eq!(why(2, "write"), "io_uring refused");
        assert_eq!(why(3, "read"), "not measured");
        assert_eq!(why(3, "write"), "only read");
    }

    /// The fio options of each cell make the same requests: pattern,
    /// size, depth, engine and the working set; a random cell runs for
    /// the bench's time per run with offsets drawn afresh.
    #[test]
    fn each_cell_names_fio_options_for_the_same_requests() {
        let s = summary(&Outcome::default(), vec![], "directory");
        assert_eq!(
            s.rows[0].read.fio,
            "--rw=read --bs=1048576 --iodepth=8 --numjobs=1 --direct=1 --ioengine=io_uring \
             --size=67108864"
        );
        assert_eq!(
            s.rows[3].write.fio,
            "--rw=randwrite --bs=4096 --iodepth=1 --numjobs=1 --direct=1 --ioengine=psync \
             --size=67108864 --norandommap --randrepeat=0 --time_based --runtime=250ms"
        );
        let s = summary(&Outcome::default(), vec![], "NBD export");
        assert!(
            s.rows[2]
                .read
                .fio
                .contains("--ioengine=nbd --uri=/var/tmp/x"),
            "{}",
            s.rows[2].read.fio
        );
        assert!(s.method.starts_with("NBD requests"), "{}", s.method);
    }

    /// On an sg node ddx moves the data in the driver's reserve buffers,
    /// mapped, which fio's sg engine cannot: a cell whose requests ddx
    /// also made fio's way (the driver copying each buffer) carries that
    /// figure beside its own, and the notes under the summary give it
    /// with what differs; a cell with no such figure carries none.
    #[test]
    fn a_cell_fio_cannot_make_the_same_way_carries_the_figure_made_its_way() {
        let mut out = Outcome::default();
        let seq = |test, mode, op| Figure::new(test, mode, op, "sequential", 512 << 10);
        out.push(
            seq("seq-read", "passthrough", "read").in_flight(8, "sg"),
            &[run(300, 100, 600)],
        );
        out.push(
            seq("seq-read", COPIED, "read").in_flight(8, "sg"),
            &[run(200, 100, 400)],
        );
        out.push(
            seq("seq-read", "passthrough", "read").by("sg"),
            &[run(100, 100, 200)],
        );
        // Another depth's copied figure is not this cell's.
        out.push(
            seq("seq-write", COPIED, "write").in_flight(8, "sg"),
            &[run(90, 100, 180)],
        );
        out.push(
            seq("seq-write", "passthrough", "write").by("sg"),
            &[run(120, 100, 240)],
        );
        let mut target = target("SCSI generic node");
        target.path = "/dev/sg0".into();
        target.passthrough = Some(Interface::ScsiGeneric);
        let s = summary_on(&out, vec!["seq-read", "seq-write"], &target);
        assert_eq!(s.rows[0].name, "SEQ512K Q8T1");
        let way = s.rows[0]
            .read
            .fio_way
            .as_ref()
            .expect("the Q8 read made fio's way");
        assert_eq!(way.mode, COPIED);
        assert_eq!(way.throughput_bytes_per_sec, (200u64 << 20) as f64 / 0.1);
        assert_eq!(way.iops, 4000.0);
        assert!(s.rows[0]
            .read
            .fio
            .contains("--ioengine=sg --filename=/dev/sg0"));
        assert!(
            s.rows[1].read.fio_way.is_none(),
            "no Q1 read made fio's way"
        );
        assert!(
            s.rows[1].write.fio_way.is_none(),
            "the Q8 copied write is not Q1's"
        );
        let notes = crate::bench::report::summary_notes(&s);
        assert!(
            notes[0].ends_with("the figure of fio's way is given below."),
            "{}",
            notes[0]
        );
        let lines: Vec<&String> = notes
            .iter()
            .filter(|l| l.starts_with("- ") && l.contains("fio's way"))
            .collect();
        assert_eq!(lines.len(), 1, "{notes:#?}");
        assert!(
            lines[0]
                .starts_with("- made fio's way, which its options reproduce: SEQ512K Q8T1 read ")
                && lines[0].contains(
                    ", the cell 1.50x that. ddx moves the data in the sg driver's \
                     reserve buffers, mapped into it"
                )
                && lines[0].ends_with("whose figure ddx gives beside the cell."),
            "{}",
            lines[0]
        );
    }

    /// A write well above its read says why beside the row, in the
    /// target's terms (a loop device's writes land in its backing file's
    /// pages); a write within [`GAP`] of its read, or one with no read
    /// beside it, says nothing.
    #[test]
    fn a_write_that_outruns_its_read_says_why() {
        let mut out = Outcome::default();
        let seq = |op| Figure::new(seq_test(op), "direct", op, "sequential", 1 << 20);
        fn seq_test(op: &str) -> &'static str {
            match op {
                "read" => "seq-read",
                _ => "seq-write",
            }
        }
        out.push(seq("read"), &[run(100, 1000, 100)]);
        out.push(seq("write"), &[run(300, 1000, 300)]);
        out.push(seq("read").in_flight(8, "io_uring"), &[run(100, 1000, 100)]);
        out.push(
            seq("write").in_flight(8, "io_uring"),
            &[run(110, 1000, 110)],
        );
        let mut target = target("block device");
        target.backing = crate::bench::backing::Backing::loop_file(
            crate::sys::device::LoopBacking {
                device: "loop7".into(),
                file: "/var/disk.img".into(),
                direct_io: false,
            },
            true,
            Some("ext4".into()),
            false,
        );
        let s = summary_on(&out, vec!["seq-read", "seq-write"], &target);
        assert!(s.rows[0].writes_faster.is_none(), "1.10x is no gap");
        let gap = s.rows[1].writes_faster.as_ref().expect("3x is a gap");
        assert!((gap.ratio - 3.0).abs() < 1e-9, "{gap:?}");
        assert!(gap.why.contains("backing file's pages"), "{gap:?}");
        assert!(s.rows[2].writes_faster.is_none() && s.rows[3].writes_faster.is_none());
        assert!(
            s.method
                .starts_with("O_DIRECT to the loop device loop7, which stops it there"),
            "{}",
            s.method
        );
        let notes = crate::bench::report::summary_notes(&s);
        let line = notes
            .iter()
            .find(|l| l.starts_with("- SEQ1M Q1T1 write 3.00x its read: "))
            .unwrap_or_else(|| panic!("{notes:#?}"));
        assert!(line.ends_with(&gap.why), "{line}");
    }

    #[test]
    fn sizes_are_named_as_crystaldiskmark_names_them() {
        assert_eq!(size_label(1 << 20), "1M");
        assert_eq!(size_label(4096), "4K");
        assert_eq!(size_label(8192), "8K");
        assert_eq!(size_label(512), "512B");
        assert_eq!(size_label(1536 << 10), "1536K");
    }
}
