//! A rescue in GNU ddrescue's phases (copying with skips, trimming,
//! scraping, retry passes), held to GNU ddrescue itself on the same disks:
//! nbdkit's ddrescue filter for sectors that always fail, and
//! `rigs/weak_disk.py` for sectors that heal after so many reads and for
//! reads that fail at a seeded rate, each exposed as a file by nbdfuse.
//! Every disk is fresh for each tool, so both meet the same failures.
//! Also what a rescue says: its statistics, its exit status, its phase
//! on the progress line and under `--verbose`, and its map, which
//! ddrescue and ddrescuelog read.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::rescue::bad_blocks;
use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cmd::{ddx_as_dd, gnu_dd, operand, DDX};
use crate::rigs::fixture::{statistics, Ddx, Ran};
use crate::rigs::{NbdDevice, Weakness};

const SEED: u64 = 0x7265_7363_7565;
const SIZE: usize = 1 << 20;

/// ddx (named "dd") rescuing `input` to `output` with `--rescue`.
fn rescue(input: &Path, output: &Path) -> Ddx {
    Ddx::as_dd()
        .arg(operand("if", input))
        .arg(operand("of", output))
        .arg("--rescue")
}

/// Every block of a mapfile, as (pos, size, status).
fn blocks(map: &Path) -> Vec<(u64, u64, char)> {
    let text = std::fs::read_to_string(map).unwrap();
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    lines.next(); // the status line
    lines
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let n = |t: &str| u64::from_str_radix(t.trim_start_matches("0x"), 16).unwrap();
            (n(f[0]), n(f[1]), f[2].chars().next().unwrap())
        })
        .collect()
}

/// Bytes a map says are finished.
fn rescued(map: &Path) -> u64 {
    blocks(map).iter().filter(|b| b.2 == '+').map(|b| b.1).sum()
}

/// `ddrescuelog ARGS MAP`: its exit status and standard output.
fn ddrescuelog(args: &[&str], map: &Path) -> (i32, String) {
    let out = Command::new("ddrescuelog")
        .args(args)
        .arg(map)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The map is one ddrescuelog reads, and it agrees on what is done:
/// `-t` accepts it and counts the same finished bytes, `-D` says done
/// exactly when no block is left bad.
fn ddrescuelog_accepts(map: &Path) {
    let (status, summary) = ddrescuelog(&["-t"], map);
    assert_eq!(status, 0, "ddrescuelog -t: {summary}");
    assert!(summary.contains("rescued:"), "{summary}");
    let all_done = blocks(map).iter().all(|b| b.2 == '+');
    let (done, _) = ddrescuelog(&["-D"], map);
    assert_eq!(done == 0, all_done, "ddrescuelog -D on {map:?}");
    // -A rewrites it with comments: it parsed every block.
    let (annotated, text) = ddrescuelog(&["-A"], map);
    assert_eq!(annotated, 0);
    assert_eq!(
        text.matches("\n0x").count(),
        blocks(map).len() + 1,
        "{text}"
    );
}

/// GNU ddrescue with direct reads and 512-byte sectors, `args` added.
fn ddrescue(args: &[&str], input: &Path, output: &Path, map: &Path) {
    let status = Command::new("ddrescue")
        .args(["-q", "-d", "-b512"])
        .args(args)
        .arg(input)
        .arg(output)
        .arg(map)
        .status()
        .unwrap();
    assert!(status.success(), "ddrescue {args:?}");
}

/// The output holds the input where the map says finished, and zeros
/// where it says bad (ddx writes them; ddrescue leaves a new file's).
fn holds_what_the_map_says(output: &Path, contents: &[u8], map: &Path) {
    let mut written = std::fs::read(output).unwrap();
    written.resize(contents.len(), 0);
    for (pos, size, status) in blocks(map) {
        let range = pos as usize..(pos + size) as usize;
        match status {
            '+' => assert!(written[range.clone()] == contents[range], "{pos:#x}: data"),
            _ => assert!(written[range].iter().all(|&b| b == 0), "{pos:#x}: zeros"),
        }
    }
}

fn have_ddrescue() -> bool {
    rigs::tools_or_skip(&["ddrescue", "ddrescuelog"])
}

/// GNU's three statistics lines for the requests of `bs` over `size`
/// bytes by the rule of a copy by position: a request read whole is a
/// full record, one cut short (here by a bad range in it) a partial one;
/// every request is written whole, its failed part as zeros.
fn rule(size: u64, bs: u64, bad: &[(u64, u64)]) -> Vec<String> {
    let requests = size / bs;
    let cut = (0..requests)
        .filter(|k| {
            let (start, end) = (k * bs, (k + 1) * bs);
            bad.iter().any(|&(pos, len)| pos < end && pos + len > start)
        })
        .count() as u64;
    vec![
        format!("{}+{cut} records in", requests - cut),
        format!("{requests}+0 records out"),
        format!("{size} bytes"),
    ]
}

/// The statistics of a rescue count its requests cut short, by the rule
/// of copies by position, and equal GNU dd's reading the same device with
/// O_DIRECT and conv=noerror,sync (where a read fails for its whole
/// request, as a rescue's first reads do): however often a sector is read
/// again, the bytes are the input's, once each.
#[test]
fn rescue_statistics_count_every_request_cut_short() {
    let contents = pattern(SEED, SIZE);
    // Inside the 25th 4 KiB request, a lone sector, across a 64 KiB
    // boundary (two requests), and the last sector.
    let bad = [
        (0x19000, 0x400),
        (0x4A000, 0x200),
        (0x8FE00, 0x600),
        (0xFFE00, 0x200),
    ];
    let Some(device) = rigs::or_skip(NbdDevice::with_bad_ranges(&contents, &bad)) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let output = scratch.path().join("out");
    for (bs, direct) in [
        (4096, false),
        (4096, true),
        (65536, false),
        (65536, true),
        (SIZE, true),
        (512, true),
    ] {
        let mut operands = vec![format!("bs={bs}")];
        if direct {
            operands.push("iflag=direct".into());
        }
        let _ = std::fs::remove_file(&output);
        // The digest is the output's, though the rescue wrote it out of
        // order (and some of it twice).
        let ran = rescue(&device.path, &output)
            .args(&operands)
            .args(["--hash=sha256", "--verify"])
            .leaves_bad_areas();
        ran.says(&format!(
            "sha256: {}  {}\n",
            rigs::bytes::sha256(&output),
            device.path.display()
        ));
        ran.says(&format!(
            "verify: {SIZE} bytes of '{}' read back, identical",
            output.display()
        ));
        let ours = statistics(&ran.stderr);
        let total = ours[2].split(" (").next().unwrap().to_owned();
        assert_eq!(
            [&ours[..2], &[total]].concat(),
            rule(SIZE as u64, bs as u64, &bad),
            "{operands:?}: {}",
            ran.stderr
        );
        if direct {
            let gnu = gnu_dd()
                .arg(operand("if", &device.path))
                .arg("of=/dev/null")
                .args(&operands)
                .arg("conv=noerror,sync")
                .output()
                .unwrap();
            let gnu = statistics(&String::from_utf8_lossy(&gnu.stderr));
            assert_eq!(ours, gnu[gnu.len() - 3..], "{operands:?}: GNU dd");
        }
    }
}

/// The weaknesses `rescue_recovers_at_least_what_ddrescue_recovers...`
/// holds both tools to.
fn weaknesses() -> [(&'static str, Weakness); 2] {
    [
        (
            "1% of reads fail",
            Weakness {
                rate: 0.01,
                seed: 0x5eed,
                ..Weakness::default()
            },
        ),
        (
            "sectors that heal after some reads, and some that never do",
            Weakness {
                sectors: vec![
                    (200, 2, 2),
                    (593, 1, 4),
                    (1000, 8, 3),
                    (1151, 3, -1),
                    (1500, 1, 6),
                    (1790, 40, 1),
                    (2047, 1, 1),
                ],
                ..Weakness::default()
            },
        ),
    ]
}

/// With the same retry passes, a rescue recovers at least what GNU
/// ddrescue recovers from the same disk, and leaves a map ddrescuelog
/// reads; it exits 0 when everything was recovered, 2 when bad areas
/// remain.
#[test]
fn rescue_recovers_at_least_what_ddrescue_recovers_with_the_same_retries() {
    if !have_ddrescue() {
        return;
    }
    let contents = pattern(SEED, SIZE);
    let scratch = tempfile::tempdir().unwrap();
    for (what, weakness) in weaknesses() {
        let device = || rigs::or_skip(NbdDevice::weak(&contents, &weakness));
        let Some(theirs) = device() else {
            return;
        };
        let (their_out, their_map) = (scratch.path().join("t.img"), scratch.path().join("t.map"));
        let _ = std::fs::remove_file(&their_map);
        ddrescue(&["-r3"], &theirs.path, &their_out, &their_map);
        drop(theirs);
        let their_rescued = rescued(&their_map);
        // Direct reads, as ddrescue's; then through the page cache, as
        // ddx reads by default.
        for iflag in ["iflag=direct", "iflag=fullblock"] {
            let Some(ours) = device() else {
                return;
            };
            let (our_out, our_map) = (scratch.path().join("o.img"), scratch.path().join("o.map"));
            let _ = std::fs::remove_file(&our_map);
            let _ = std::fs::remove_file(&our_out);
            let ran = rescue(&ours.path, &our_out)
                .args(["--retry-passes=3", "bs=64k", iflag])
                .arg(operand("--map", &our_map))
                .run();
            let our_rescued = rescued(&our_map);
            assert!(
                our_rescued >= their_rescued,
                "{what}, {iflag}: ddx recovered {our_rescued} bytes, ddrescue \
                 {their_rescued}\n{}",
                ran.stderr
            );
            let all = our_rescued == SIZE as u64;
            assert_eq!(
                ran.status.code(),
                Some(if all { 0 } else { 2 }),
                "{what}: {}",
                ran.stderr
            );
            holds_what_the_map_says(&our_out, &contents, &our_map);
            ddrescuelog_accepts(&our_map);
        }
        if what.starts_with("1%") {
            assert_eq!(their_rescued, SIZE as u64, "ddrescue -r3 recovers it all");
        } else {
            // The sector that needs seven reads stays bad for both.
            assert!(their_rescued < SIZE as u64);
        }
    }
}

/// `--resume` with `--retry-passes` reads again the bad sectors of a map
/// (ddx's own or ddrescue's), and ddrescue retries those of ddx's map:
/// sectors that need four reads are recovered on the second retry pass.
#[test]
fn resume_with_retry_passes_reads_the_bad_sectors_of_a_map_again() {
    if !have_ddrescue() {
        return;
    }
    let contents = pattern(SEED, SIZE);
    // Read twice by a first rescue (in a request, then alone): still bad.
    let weakness = Weakness {
        sectors: vec![(200, 2, 3), (593, 1, 3), (1151, 3, 3)],
        ..Weakness::default()
    };
    let weak_bytes = 6 * 512;
    let scratch = tempfile::tempdir().unwrap();
    let (output, map) = (scratch.path().join("out"), scratch.path().join("out.map"));
    let Some(device) = rigs::or_skip(NbdDevice::weak(&contents, &weakness)) else {
        return;
    };
    let again = |passes: &str| {
        ddx_resume(&device.path, &output, &map)
            .arg(format!("--retry-passes={passes}"))
            .run()
    };
    let first = rescue(&device.path, &output)
        .args(["bs=64k", "iflag=direct"])
        .arg(operand("--map", &map))
        .leaves_bad_areas();
    first.says(&format!(
        "3 bad areas, {weak_bytes} bytes unreadable with no retry pass; they are '-' in \
         the map '{}': the same command with --resume --retry-passes=N reads them again",
        map.display()
    ));
    assert_eq!(bad_blocks(&std::fs::read_to_string(&map).unwrap()).len(), 3);
    // The third read fails too: still bad, exit 2, nothing copied.
    let one = again("1");
    assert_eq!(one.status.code(), Some(2), "{}", one.stderr);
    one.says("after 1 retry pass;");
    assert_eq!(
        statistics(&one.stderr)[..2],
        ["0+0 records in", "0+0 records out"]
    );
    // The fourth succeeds: all recovered, exit 0; only those bytes copied.
    let two = again("2");
    assert!(two.status.success(), "{}", two.stderr);
    assert!(
        statistics(&two.stderr)[2].starts_with(&format!("{weak_bytes} bytes")),
        "{}",
        two.stderr
    );
    assert!(std::fs::read(&output).unwrap() == contents);
    ddrescuelog_accepts(&map);
    drop(device);

    // ddx continues from ddrescue's map, and ddrescue from ddx's.
    for (first_tool, second_tool) in [("ddrescue", "ddx"), ("ddx", "ddrescue")] {
        let Some(device) = rigs::or_skip(NbdDevice::weak(&contents, &weakness)) else {
            return;
        };
        let _ = std::fs::remove_file(&map);
        let _ = std::fs::remove_file(&output);
        if first_tool == "ddrescue" {
            ddrescue(&[], &device.path, &output, &map);
        } else {
            rescue(&device.path, &output)
                .args(["bs=64k", "iflag=direct"])
                .arg(operand("--map", &map))
                .leaves_bad_areas();
        }
        assert_eq!(
            bad_blocks(&std::fs::read_to_string(&map).unwrap()).len(),
            3,
            "{first_tool}'s map"
        );
        if second_tool == "ddx" {
            ddx_resume(&device.path, &output, &map)
                .arg("--retry-passes=2")
                .succeeds();
        } else {
            ddrescue(&["-r2"], &device.path, &output, &map);
        }
        assert!(
            std::fs::read(&output).unwrap() == contents,
            "{second_tool} after {first_tool}"
        );
        ddrescuelog_accepts(&map);
    }
}

fn ddx_resume(input: &Path, output: &Path, map: &Path) -> Ddx {
    Ddx::as_dd()
        .arg(operand("if", input))
        .arg(operand("of", output))
        .arg(operand("--map", map))
        .args(["--resume", "bs=64k", "iflag=direct"])
}

/// A slow disk with three areas that never read: a rescue of it takes
/// a few seconds, most of them trimming, scraping and retrying.
fn slow_disk() -> Weakness {
    Weakness {
        sectors: vec![(200, 2, -1), (592, 1, -1), (1151, 3, -1)],
        delay_ms: 6,
        ..Weakness::default()
    }
}

const BAD: [(u64, u64); 3] = [(0x19000, 0x400), (0x4A000, 0x200), (0x8FE00, 0x600)];

/// Under status=progress, a rescue's progress line says its phase and the
/// bytes bad so far after GNU's figures, as do its JSON records
/// (`--progress-fd`); `--verbose` says each phase as it starts and, after
/// the statistics, how the phases went.
#[test]
fn a_rescue_says_its_phase_and_what_is_bad_as_it_goes() {
    let contents = pattern(SEED, SIZE);
    let Some(device) = rigs::or_skip(NbdDevice::weak(&contents, &slow_disk())) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let output = scratch.path().join("out");
    let json = scratch.path().join("progress.json");
    let out = rigs::cmd::shell(&format!(
        "exec {DDX} if='{}' of='{}' --rescue --retry-passes=1 --verbose bs=64k \
         status=progress --progress-fd=3 3>'{}'",
        device.path.display(),
        output.display(),
        json.display()
    ))
    .output()
    .unwrap();
    let ran = Ran {
        status: out.status,
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_eq!(ran.status.code(), Some(2), "{}", ran.stderr);
    let phases: Vec<&str> = ran
        .stderr
        .lines()
        .filter_map(|l| l.split_once(": --rescue: ").map(|(_, rest)| rest))
        .map(|l| l.split(" (").next().unwrap())
        .collect();
    assert_eq!(
        phases,
        [
            "copying, pass 1",
            "copying, pass 2",
            "trimming",
            "scraping",
            "retrying, pass 1 of 1"
        ],
        "{}",
        ran.stderr
    );
    ran.says(": --rescue: trimming (the edges of each failed area, sector by sector): ");
    ran.says(": rescue: copying (passes 1, 2), trimming, scraping, retrying (1 of 1 passes); ");
    ran.says("; 3072 bytes bad at the end, 0 before this run\n");
    // GNU's progress line, then the phase: at least one during the
    // sector-by-sector phases, which take most of the time.
    let progress: Vec<&str> = ran
        .stderr
        .split(['\r', '\n'])
        .filter(|l| l.contains(" copied, ") && l.contains("; "))
        .collect();
    assert!(
        progress.iter().any(|l| {
            let note = l.split("; ").nth(1).unwrap_or_default();
            ["trimming, ", "scraping, ", "retrying, pass 1 of 1, "]
                .iter()
                .any(|phase| note.starts_with(phase))
                && note.ends_with(" bytes bad")
        }),
        "{progress:?}"
    );
    let records = std::fs::read_to_string(&json).unwrap();
    let with_phase: Vec<serde_json::Value> = records
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r.get("phase").is_some())
        .collect();
    assert!(!with_phase.is_empty(), "{records}");
    assert!(with_phase.iter().all(|r| r["bad_bytes"].is_u64()));
    let last: serde_json::Value = serde_json::from_str(records.lines().last().unwrap()).unwrap();
    assert_eq!(last["done"], true);
    assert!(last.get("phase").is_none(), "the rescue is over: {last}");
    assert_eq!(last["bad_bytes"], 3072, "{last}");
}

/// SIGINT in the middle of a rescue ends it as GNU dd ends (dying of the
/// signal, after the statistics), with the map saved as it went; the
/// same command with `--resume` finishes it, with the bad sectors an
/// uninterrupted rescue finds.
#[test]
fn an_interrupted_rescue_dies_of_the_signal_and_resumes_from_its_map() {
    use std::os::unix::process::ExitStatusExt;
    let contents = pattern(SEED, SIZE);
    let Some(device) = rigs::or_skip(NbdDevice::weak(&contents, &slow_disk())) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let (output, map) = (scratch.path().join("out"), scratch.path().join("out.map"));
    let mut child = ddx_as_dd()
        .arg(operand("if", &device.path))
        .arg(operand("of", &output))
        .arg(operand("--map", &map))
        .args(["--rescue", "--verbose", "bs=64k"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    // Interrupted once trimming has begun, mid-phase: trimming and
    // scraping this disk take about 0.6 s, so the signal goes early.
    let mut said = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&said).contains("--rescue: trimming") {
        assert_eq!(stderr.read(&mut byte).unwrap(), 1, "{said:?}");
        said.push(byte[0]);
    }
    std::thread::sleep(std::time::Duration::from_millis(120));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the rescue ended before it could be interrupted"
    );
    rigs::signal::send(child.id(), libc::SIGINT);
    let status = child.wait().unwrap();
    stderr.read_to_end(&mut said).unwrap();
    let said = String::from_utf8_lossy(&said);
    assert_eq!(status.signal(), Some(libc::SIGINT), "{said}");
    assert!(said.contains(" records in\n"), "the statistics: {said}");
    let saved = blocks(&map);
    assert!(
        saved.iter().any(|b| matches!(b.2, '*' | '/')),
        "saved while trimming: {saved:?}"
    );
    let resumed = ddx_resume(&device.path, &output, &map)
        .arg("--rescue")
        .leaves_bad_areas();
    resumed.says("resuming from");
    assert_eq!(bad_blocks(&std::fs::read_to_string(&map).unwrap()), BAD);
    holds_what_the_map_says(&output, &contents, &map);
}

/// The read requests an nbdkit log (`Server::nbdkit_logged`) records, as
/// their byte counts.
fn logged_reads(log: &str) -> Vec<u64> {
    log.lines()
        .filter(|l| l.contains(" Read id="))
        .map(|l| {
            let count = l
                .split_whitespace()
                .find_map(|w| w.strip_prefix("count=0x"))
                .expect(l);
            u64::from_str_radix(count, 16).unwrap()
        })
        .collect()
}

/// `--rescue` with no record size reads ddrescue's 64 KiB clusters, not
/// GNU's 512-byte records, while its statistics still count GNU's
/// records: a healthy 16 MiB export is 256 requests.
#[cfg(feature = "nbd")]
#[test]
fn a_rescue_without_bs_reads_in_ddrescues_clusters() {
    let size = 16 << 20;
    let Some(server) = rigs::or_skip(rigs::nbd::Server::nbdkit_logged(&[
        "pattern",
        &format!("size={size}"),
    ])) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let output = scratch.path().join("out");
    let ran = Ddx::as_dd()
        .arg(format!("if={}", server.uri()))
        .arg(operand("of", &output))
        .arg("--rescue")
        .succeeds();
    let log = std::fs::read_to_string(server.log_file()).unwrap();
    let reads = logged_reads(&log);
    let copied: u64 = reads.iter().sum();
    assert!(copied >= size, "{copied} bytes read");
    assert!(
        reads.iter().filter(|&&n| n == 65536).count() >= (size / 65536) as usize
            && reads.len() <= (size / 65536) as usize + 4,
        "{} reads: {:?}",
        reads.len(),
        &reads[..reads.len().min(8)]
    );
    let records = statistics(&ran.stderr);
    assert_eq!(records[0], format!("{}+0 records in", size / 512));
    assert_eq!(records[1], format!("{}+0 records out", size / 512));
    // A record size given is the request size, as before.
    let _ = std::fs::remove_file(&output);
    std::fs::write(server.log_file(), b"").unwrap();
    Ddx::as_dd()
        .arg(format!("if={}", server.uri()))
        .arg(operand("of", &output))
        .args(["--rescue", "bs=4k"])
        .succeeds();
    let reads = logged_reads(&std::fs::read_to_string(server.log_file()).unwrap());
    assert!(reads.iter().all(|&n| n <= 4096), "{:?}", &reads[..8]);
}

/// Bad sectors (bytes) a rescue's map leaves bad, not tried, or not yet
/// trimmed or scraped.
fn left_bad(map: &Path) -> u64 {
    blocks(map).iter().filter(|b| b.2 != '+').map(|b| b.1).sum()
}

/// On a disk whose reads fail at random (2% of requests, seeded), ddx's
/// default rescue leaves no more bad bytes than GNU ddrescue's on the same
/// disk: read through the page cache (each tool's default on a file),
/// read directly (`iflag=direct` and `-d`: the same phases, so the same
/// requests meet the same failures), and read as an NBD export (ddx's
/// own client, against ddrescue through nbdfuse).
#[test]
fn a_rescue_of_a_disk_failing_at_random_leaves_no_more_than_ddrescue() {
    if !have_ddrescue() {
        return;
    }
    let contents = pattern(SEED, 8 << 20);
    let scratch = tempfile::tempdir().unwrap();
    let (out, map) = (scratch.path().join("out"), scratch.path().join("map"));
    for seed in [1, 2, 3] {
        let weakness = Weakness {
            rate: 0.02,
            seed,
            ..Weakness::default()
        };
        let fresh = || {
            let _ = std::fs::remove_file(&out);
            let _ = std::fs::remove_file(&map);
            rigs::or_skip(NbdDevice::weak(&contents, &weakness))
        };
        let theirs = |args: &[&str]| {
            let device = fresh()?;
            Command::new("ddrescue")
                .arg("-q")
                .args(args)
                .arg(&device.path)
                .arg(&out)
                .arg(&map)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            Some(left_bad(&map))
        };
        let (Some(cached), Some(direct)) = (theirs(&[]), theirs(&["-d"])) else {
            return;
        };
        let ours = |input: &dyn Fn(&NbdDevice) -> String, args: &[&str]| {
            let device = fresh()?;
            let ran = Ddx::as_dd()
                .arg(format!("if={}", input(&device)))
                .arg(operand("of", &out))
                .arg(operand("--map", &map))
                .arg("--rescue")
                .args(args)
                .run();
            assert!(
                matches!(ran.status.code(), Some(0 | 2)),
                "seed {seed}: {}",
                ran.stderr
            );
            holds_what_the_map_says(&out, &contents, &map);
            Some(left_bad(&map))
        };
        let file = |device: &NbdDevice| device.path.display().to_string();
        let export = |device: &NbdDevice| {
            format!(
                "nbd+unix:///?socket={}",
                device.dir.path().join("sock").display()
            )
        };
        let Some(ours_cached) = ours(&file, &[]) else {
            return;
        };
        assert!(
            ours_cached <= cached,
            "seed {seed}: through the page cache, ddx left {ours_cached} bytes, ddrescue {cached}"
        );
        let Some(ours_direct) = ours(&file, &["iflag=direct"]) else {
            return;
        };
        assert!(
            ours_direct <= direct,
            "seed {seed}: direct, ddx left {ours_direct} bytes, ddrescue -d {direct}"
        );
        if !cfg!(feature = "nbd") {
            continue;
        }
        let Some(ours_export) = ours(&export, &[]) else {
            return;
        };
        assert!(
            ours_export <= cached,
            "seed {seed}: from the export, ddx left {ours_export} bytes, ddrescue {cached}"
        );
    }
}

/// A retry pass's statistics count what it recovered, as GNU's records
/// read and written (512 bytes each, GNU's default), and its bytes.
#[test]
fn a_retry_pass_counts_what_it_recovered() {
    if !have_ddrescue() {
        return;
    }
    let contents = pattern(SEED, SIZE);
    // Each sector of these heals after its third read.
    let weakness = Weakness {
        sectors: vec![(100, 4, 3), (1500, 2, 3)],
        ..Weakness::default()
    };
    let Some(device) = rigs::or_skip(NbdDevice::weak(&contents, &weakness)) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let (output, map) = (scratch.path().join("out"), scratch.path().join("map"));
    let rescue = || {
        Ddx::as_dd()
            .arg(operand("if", &device.path))
            .arg(operand("of", &output))
            .arg(operand("--map", &map))
            .args(["--rescue", "iflag=direct"])
    };
    rescue().leaves_bad_areas();
    let bad: u64 = blocks(&map)
        .iter()
        .filter(|b| b.2 == '-')
        .map(|b| b.1)
        .sum();
    assert!(bad > 0, "nothing left bad to retry");
    let ran = rescue().args(["--resume", "--retry-passes=3"]).succeeds();
    let records = statistics(&ran.stderr);
    let sectors = bad / 512;
    assert_eq!(
        &records[..2],
        [
            format!("{sectors}+0 records in"),
            format!("{sectors}+0 records out")
        ],
        "{}",
        ran.stderr
    );
    assert!(
        records[2].starts_with(&format!("{bad} bytes")),
        "{}",
        ran.stderr
    );
    assert!(std::fs::read(&output).unwrap() == contents);
}

/// A rescue that leaves many bad ranges names a few, then sums up the
/// rest in one line that says where the map lists them all.
#[test]
fn past_a_few_bad_ranges_the_rest_are_summed_up() {
    let contents = pattern(SEED, SIZE);
    let bad: Vec<(u64, u64)> = (0..12).map(|n| (0x10000 * (n + 1), 0x200)).collect();
    let Some(device) = rigs::or_skip(NbdDevice::with_bad_ranges(&contents, &bad)) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let (output, map) = (scratch.path().join("out"), scratch.path().join("out.map"));
    let ran = rescue(&device.path, &output)
        .arg(operand("--map", &map))
        .args(["bs=64k", "iflag=direct"])
        .leaves_bad_areas();
    let named = ran
        .stderr
        .lines()
        .filter(|l| l.contains(": bad range at offset "))
        .count();
    assert_eq!(named, 5, "{}", ran.stderr);
    ran.says(&format!(
        ": and 7 more bad ranges, 3584 bytes, from offset {}; the map '{}' lists them all\n",
        0x60000,
        map.display()
    ));
    ran.says(": 12 bad areas, 6144 bytes unreadable");
    assert_eq!(
        bad_blocks(&std::fs::read_to_string(&map).unwrap()).len(),
        12
    );
}
