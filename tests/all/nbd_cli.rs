//! NBD exports from the command line, where things go wrong: read errors
//! at known offsets (held to GNU dd reading the same server through
//! nbdfuse), EIO from nbdkit's error filter, a read-only export, a server
//! killed mid-copy, a slow server (delay filter), qemu-nbd as a second
//! server (held to GNU dd on a copy of its image), TLS with a PSK made
//! here; and `--rescue`/`--map`/`--resume`, `--verify` and `--hash` over
//! an export, held to GNU ddrescue and the checksum tools. Every server is
//! started by the test on a Unix socket and killed when dropped.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::rescue::{bad_blocks, ddrescue};
use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cmd::{ddx, operand};
use crate::rigs::fixture::{statistics, Compare, Ddx};
use crate::rigs::nbd::{nbdcopy_read, nbdkit, nbdkit_in, run, tempdir, Server};
use crate::rigs::{LoopDevice, LoopOptions, NbdDevice};

const SEED: u64 = 0x6e62_6463_6c69;
const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// The URI of the nbdkit behind an nbdfuse rig.
fn rig_uri(device: &NbdDevice) -> String {
    format!(
        "nbd+unix:///?socket={}",
        device.dir.path().join("sock").display()
    )
}

/// The three statistics lines (time and rate cut) GNU prints for `records_in`
/// and `records_out` whole records of `bs` bytes.
fn whole_records(records_in: u64, records_out: u64, bs: u64) -> Vec<String> {
    let bytes = records_out * bs;
    let total = statistics(&format!(
        "{}",
        String::from_utf8_lossy(
            &Command::new("dd")
                .args(["if=/dev/zero", "of=/dev/null", &format!("bs={bs}")])
                .arg(format!("count={records_out}"))
                .output()
                .unwrap()
                .stderr
        )
    ))
    .pop()
    .unwrap();
    assert!(total.starts_with(&format!("{bytes} bytes")), "{total}");
    vec![
        format!("{records_in}+0 records in"),
        format!("{records_out}+0 records out"),
        total,
    ]
}

#[test]
fn read_errors_from_an_export_match_gnu_dd_reading_the_same_server_through_nbdfuse() {
    let size = 2 * MIB;
    let contents = pattern(SEED, size);
    let bad = [(0x12_3400, 0x200), (0x18_F000, 0x1800)];
    let Some(device) = rigs::or_skip(NbdDevice::with_bad_ranges(&contents, &bad)) else {
        return;
    };
    let uri = rig_uri(&device);
    // Reads of one page: nbdfuse's page cache fails whole pages, and a
    // larger read returns the pages before the failing one (a short
    // read), where an export, with no cache, fails exactly the request
    // that covers a bad sector, as a device read with O_DIRECT does.
    for operands in [
        &["bs=4096"][..],
        &["bs=4096", "conv=noerror,sync"],
        &["bs=4096", "conv=noerror"],
        &["ibs=4096", "obs=64k", "conv=noerror"],
        &["ibs=4096", "obs=1000", "conv=noerror,sync"],
        &["bs=4096", "conv=noerror,sync", "skip=300", "count=100"],
        &["bs=4096", "conv=noerror,sync,fdatasync", "status=noxfer"],
    ] {
        Compare::new()
            .inputs(&device.path, &uri)
            .args(operands)
            .output_file()
            .ddx_extra_lines("nbd_aio_command_completed")
            .context("an export with bad ranges")
            .run();
    }
}

#[test]
fn eio_from_the_error_filter_reads_and_writes_as_gnu_reports_a_failing_device() {
    if !crate::rigs::nbd::nbdkit_has_plugin("pattern") {
        return rigs::skip("nbdkit has no pattern plugin");
    }
    // The pattern plugin, not memory: a memory export's extents say
    // zeros, which are never read.
    let Some(reading) = nbdkit(&[
        "--filter=error",
        "pattern",
        "size=1M",
        "error=EIO",
        "error-pread-rate=100%",
    ]) else {
        return;
    };
    let dir = tempdir().unwrap();
    let ran = Ddx::new()
        .arg(format!("if={}", reading.uri()))
        .arg(operand("of", &dir.path().join("out")))
        .arg("bs=64k")
        .fails();
    // GNU's line, and on it the offset and libnbd's words.
    let lines: Vec<&str> = ran.stderr.lines().collect();
    let gnu = format!(
        "ddx: error reading '{}': Input/output error; ",
        reading.uri()
    );
    assert!(lines[0].starts_with(&gnu), "{}", ran.stderr);
    assert!(
        lines[0][gnu.len()..].starts_with("at offset 0: ")
            && lines[0][gnu.len()..].contains("Input/output error"),
        "libnbd's detail: {}",
        lines[0]
    );
    assert_eq!(
        lines.len(),
        4,
        "one line, then the statistics: {}",
        ran.stderr
    );
    assert_eq!(statistics(&ran.stderr), whole_records(0, 0, 64 * 1024));

    let Some(writing) = nbdkit(&[
        "--filter=error",
        "memory",
        "size=1M",
        "error=EIO",
        "error-pwrite-rate=100%",
    ]) else {
        return;
    };
    // Records from a file (bulk) and from /dev/zero (one write per read):
    // the error is said once, for the first write.
    std::fs::write(dir.path().join("in"), pattern(SEED, MIB)).unwrap();
    for input in [dir.path().join("in"), "/dev/zero".into()] {
        let ran = Ddx::new()
            .arg(operand("if", &input))
            .arg(format!("of={}", writing.uri()))
            .args(["bs=64k", "count=4"])
            .fails();
        let said = format!("ddx: error writing '{}': Input/output error", writing.uri());
        assert_eq!(ran.stderr.matches(&said).count(), 1, "{}", ran.stderr);
        assert_eq!(statistics(&ran.stderr), whole_records(1, 0, 64 * 1024));
    }
}

#[test]
fn a_read_only_export_refuses_of_before_anything_is_read_and_serves_if() {
    let Some(server) = nbdkit(&["-r", "memory", "size=1M"]) else {
        return;
    };
    let dir = tempdir().unwrap();
    let ran = Ddx::new()
        .arg("if=/dev/zero")
        .arg(format!("of={}", server.uri()))
        .arg("count=1")
        .fails();
    let lines: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(
        lines,
        [format!(
            "ddx: failed to open '{}': Read-only file system; the server exports it \
                 read-only",
            server.uri()
        ),],
        "GNU's open failure and why, on one line; no statistics (GNU has none here)"
    );
    let out = dir.path().join("out");
    Ddx::new()
        .arg(format!("if={}", server.uri()))
        .arg(operand("of", &out))
        .arg("bs=256k")
        .succeeds();
    assert!(std::fs::read(&out).unwrap() == vec![0; MIB]);
}

#[test]
fn a_server_killed_mid_copy_ends_the_copy_with_gnu_statistics_of_what_arrived() {
    if !crate::rigs::nbd::nbdkit_has_plugin("pattern") {
        return rigs::skip("nbdkit has no pattern plugin");
    }
    // 1 GiB at 20 ms a request: minutes to copy; killed after a moment.
    let Some(mut server) = nbdkit(&["--filter=delay", "pattern", "size=1G", "delay-read=20ms"])
    else {
        return;
    };
    let dir = tempdir().unwrap();
    let out = dir.path().join("out");
    let child = ddx()
        .arg(format!("if={}", server.uri()))
        .arg(operand("of", &out))
        .arg("bs=64k")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    rigs::wait_up_to(
        Duration::from_secs(10),
        || std::fs::metadata(&out).is_ok_and(|m| m.len() >= MIB as u64),
        "the first MiB copied",
    )
    .unwrap();
    server.kill();
    let ran = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(1), "{stderr}");
    let first = stderr.lines().next().unwrap();
    let gnu = format!(
        "ddx: error reading '{}': Transport endpoint is not connected; at offset ",
        server.uri()
    );
    assert!(first.starts_with(&gnu), "{stderr}");
    assert!(
        first.contains("the connection to the server was lost"),
        "{stderr}"
    );
    // Everything counted arrived, in order, and is in the output.
    let got = std::fs::read(&out).unwrap();
    let blocks = got.len() as u64 / (64 * 1024);
    assert_eq!(got.len() as u64 % (64 * 1024), 0);
    assert_eq!(
        statistics(&stderr),
        whole_records(blocks, blocks, 64 * 1024)
    );
    let expected: Vec<u8> = (0..got.len() as u64 / 8)
        .flat_map(|at| (at * 8).to_be_bytes())
        .collect();
    assert!(got == expected, "the pattern plugin's bytes");
}

/// A server that goes away mid-rescue is not a disk gone bad: the rescue
/// stops where it stood (exit status 1, GNU's message and where to go on
/// from), its map marking nothing bad past what it read; the same command
/// with --resume finishes it from a server that is back.
#[test]
fn a_server_killed_mid_rescue_stops_it_and_resume_finishes_it() {
    if !crate::rigs::nbd::nbdkit_has_plugin("pattern") {
        return rigs::skip("nbdkit has no pattern plugin");
    }
    let Some(mut server) = nbdkit(&["--filter=delay", "pattern", "size=8M", "delay-read=20ms"])
    else {
        return;
    };
    let dir = tempdir().unwrap();
    let (out, map) = (dir.path().join("out"), dir.path().join("out.map"));
    let child = ddx()
        .arg(format!("if={}", server.uri()))
        .arg(operand("of", &out))
        .arg(operand("--map", &map))
        .args(["--rescue", "bs=64k"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    rigs::wait_up_to(
        Duration::from_secs(10),
        || std::fs::metadata(&out).is_ok_and(|m| m.len() >= MIB as u64),
        "the first MiB rescued",
    )
    .unwrap();
    server.kill();
    let ran = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(1), "{stderr}");
    // After the line saying that the map is new.
    let (new_map, stderr) = stderr.split_once('\n').unwrap();
    assert!(new_map.contains("--map: no map"), "{new_map}");
    assert!(
        stderr.starts_with(&format!(
            "ddx: error reading '{}': Transport endpoint is not connected; at offset ",
            server.uri()
        )) && stderr
            .lines()
            .next()
            .unwrap()
            .contains("; stopped at input offset "),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&map).unwrap();
    assert!(bad_blocks(&text).is_empty(), "{text}");
    assert!(
        text.lines().any(|l| l.trim_end().ends_with('?')),
        "the rest is left to try: {text}"
    );
    // Back at the same URI: the map's input.
    server.restart_nbdkit(&["pattern", "size=8M"]).unwrap();
    Ddx::new()
        .arg(format!("if={}", server.uri()))
        .arg(operand("of", &out))
        .arg(operand("--map", &map))
        .args(["--resume", "--rescue", "bs=64k"])
        .succeeds();
    let expected: Vec<u8> = (0..8 * MIB as u64 / 8)
        .flat_map(|at| (at * 8).to_be_bytes())
        .collect();
    assert!(std::fs::read(&out).unwrap() == expected);
}

#[test]
fn a_slow_server_copies_to_another_with_gnu_records() {
    let size = 8 * MIB;
    let data = pattern(SEED, size);
    let dir = tempdir().unwrap();
    let image = dir.path().join("image");
    std::fs::write(&image, &data).unwrap();
    let Some(source) = nbdkit_in(
        dir,
        &[
            "--filter=delay",
            "file",
            &format!("file={}", image.display()),
            "delay-read=10ms",
        ],
    ) else {
        return;
    };
    let Some(target) = nbdkit(&[
        "--filter=delay",
        "memory",
        &format!("size={size}"),
        "delay-write=10ms",
    ]) else {
        return;
    };
    for bs in ["bs=1M", "bs=100000"] {
        let ran = Ddx::new()
            .arg(format!("if={}", source.uri()))
            .arg(format!("of={}", target.uri()))
            .arg(bs)
            .succeeds();
        let gnu = Command::new("dd")
            .arg(operand("if", &source.path("image")))
            .args(["of=/dev/null", bs])
            .output()
            .unwrap();
        assert_eq!(
            statistics(&ran.stderr),
            statistics(&String::from_utf8_lossy(&gnu.stderr)),
            "{bs}"
        );
        let copied = nbdcopy_read(&target.uri(), target.dir.path()).unwrap();
        assert!(copied == data, "{bs}: the bytes");
    }
}

#[test]
fn qemu_nbd_serves_what_gnu_dd_does_to_a_copy_of_its_image() {
    if !rigs::have("qemu-nbd") {
        return rigs::skip("qemu-nbd is not installed (package qemu-utils)");
    }
    let size = 3 * MIB;
    let original = pattern(SEED ^ 1, size);
    let input = pattern(SEED ^ 2, 2 * MIB + 777);
    let dir = tempdir().unwrap();
    let image = dir.path().join("image.raw");
    let theirs = dir.path().join("gnu.raw");
    let source = dir.path().join("in");
    std::fs::write(&source, &input).unwrap();
    std::fs::write(&image, &original).unwrap();
    let server = match Server::qemu_nbd_in(dir, &["-f", "raw", &image.display().to_string()]) {
        Ok(server) => server,
        Err(why) => return rigs::skip(&why),
    };
    for operands in [
        &["bs=64k", "seek=3", "conv=notrunc"][..],
        &["bs=4096", "skip=5", "seek=100", "count=300", "conv=notrunc"],
        &["ibs=1000", "obs=3000", "seek=7", "conv=notrunc,fsync"],
        &["bs=1M", "conv=sparse,notrunc"],
    ] {
        // Over the old bytes, never truncated: qemu-nbd has the file open,
        // and a server that looked at its size while it was truncated
        // would export fewer bytes. Once, under the whole suite's load, a
        // copy here was refused "cannot seek" at 192 KiB of a 3 MiB
        // export; this is the likeliest cause found, not a proven one.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&image)
            .and_then(|mut file| std::io::Write::write_all(&mut file, &original))
            .unwrap();
        std::fs::write(&theirs, &original).unwrap();
        let ours = Ddx::new()
            .arg(operand("if", &source))
            .arg(format!("of={}", server.uri()))
            .args(operands)
            .succeeds();
        let gnu = Command::new("dd")
            .arg(operand("if", &source))
            .arg(operand("of", &theirs))
            .args(operands)
            .output()
            .unwrap();
        assert!(gnu.status.success());
        assert_eq!(
            statistics(&ours.stderr),
            statistics(&String::from_utf8_lossy(&gnu.stderr)),
            "{operands:?}"
        );
        assert!(
            std::fs::read(&image).unwrap() == std::fs::read(&theirs).unwrap(),
            "{operands:?}: the image"
        );
        // And back: the export read as GNU reads the file.
        let back = server.path("back");
        let ours = Ddx::new()
            .arg(format!("if={}", server.uri()))
            .arg(operand("of", &back))
            .args(["bs=5000", "skip=11"])
            .succeeds();
        let gnu = Command::new("dd")
            .arg(operand("if", &theirs))
            .args(["of=/dev/null", "bs=5000", "skip=11"])
            .output()
            .unwrap();
        assert_eq!(
            statistics(&ours.stderr),
            statistics(&String::from_utf8_lossy(&gnu.stderr))
        );
        assert!(std::fs::read(&back).unwrap() == std::fs::read(&theirs).unwrap()[55_000..]);
    }
}

#[test]
fn nbds_with_a_psk_made_here_copies_both_ways_and_refuses_without_it() {
    let Some((server, psk)) = rigs::or_skip(Server::nbdkit_psk(&["memory", "size=3M"])) else {
        return;
    };
    let tls = psk.uri(&server);
    let data = pattern(SEED ^ 3, 3 * MIB);
    let source = server.path("in");
    let back = server.path("back");
    std::fs::write(&source, &data).unwrap();
    Ddx::new()
        .arg(operand("if", &source))
        .arg(format!("of={tls}"))
        .args(["bs=256k", "conv=fsync"])
        .succeeds();
    let ran = Ddx::new()
        .arg(format!("if={tls}"))
        .arg(operand("of", &back))
        .arg("bs=1M")
        .succeeds();
    assert!(std::fs::read(&back).unwrap() == data);
    assert_eq!(statistics(&ran.stderr), whole_records(3, 3, MIB as u64));
    Ddx::new()
        .arg(format!("if={}", server.uri()))
        .arg(operand("of", &back))
        .fails_with(&format!("ddx: failed to open '{}'", server.uri()));
}

#[test]
fn rescue_of_an_export_recovers_what_gnu_ddrescue_recovers_and_resumes() {
    if !rigs::have("ddrescue") {
        return rigs::skip("ddrescue is not installed (package gddrescue)");
    }
    let size = MIB;
    let contents = pattern(SEED, size);
    let bad = [(0x19000, 0x400), (0x4A000, 0x200), (0x8FE00, 0x600)];
    let Some(device) = rigs::or_skip(NbdDevice::with_bad_ranges(&contents, &bad)) else {
        return;
    };
    let uri = rig_uri(&device);
    let scratch = tempfile::tempdir().unwrap();
    let theirs = scratch.path().join("ddrescue.img");
    let their_map = scratch.path().join("ddrescue.map");
    assert!(ddrescue(512, &device.path, &theirs, &their_map));
    let their_bad = bad_blocks(&std::fs::read_to_string(&their_map).unwrap());
    assert_eq!(their_bad, bad, "ddrescue's own reading of the rig");

    for bs in ["bs=4096", "bs=64k", "bs=1M", "ibs=3000"] {
        let ours = scratch.path().join("ddx.img");
        let our_map = scratch.path().join("ddx.map");
        let _ = std::fs::remove_file(&our_map);
        let _ = std::fs::remove_file(&ours);
        let ran = Ddx::new()
            .arg(format!("if={uri}"))
            .arg(operand("of", &ours))
            .args(["--rescue", &operand("--map", &our_map), bs])
            .leaves_bad_areas();
        let mut their_bytes = std::fs::read(&theirs).unwrap();
        their_bytes.resize(size, 0);
        assert!(std::fs::read(&ours).unwrap() == their_bytes, "{bs}: output");
        assert_eq!(
            bad_blocks(&std::fs::read_to_string(&our_map).unwrap()),
            their_bad,
            "{bs}: map"
        );
        let reported = ran
            .stderr
            .lines()
            .filter(|l| l.contains("bad range at offset"))
            .count();
        assert_eq!(reported, bad.len(), "{bs}: {}", ran.stderr);
        // Resumed from its map: nothing left to do but the bad ranges,
        // which are tried again and stay bad.
        let resumed = Ddx::new()
            .arg(format!("if={uri}"))
            .arg(operand("of", &ours))
            .args(["--resume", &operand("--map", &our_map), bs])
            .fails();
        resumed.says("0 left");
        assert!(
            std::fs::read(&ours).unwrap() == their_bytes,
            "{bs}: resumed"
        );
        // GNU ddrescue continues from ddx's map over its own view.
        assert!(ddrescue(512, &device.path, &ours, &our_map), "{bs}");
    }
}

#[test]
fn verify_and_hash_over_an_export_agree_with_sha256sum() {
    let size = 5 * MIB + 1234;
    let Some(server) = nbdkit(&["memory", &format!("size={size}")]) else {
        return;
    };
    let data = pattern(SEED ^ 4, size);
    let source = server.path("in");
    std::fs::write(&source, &data).unwrap();
    let sum = run(Command::new("sha256sum").arg(&source)).unwrap();
    let sum = String::from_utf8_lossy(&sum)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let written = Ddx::new()
        .arg(operand("if", &source))
        .arg(format!("of={}", server.uri()))
        .args(["bs=1M", "--verify", "--hash=sha256"])
        .succeeds();
    written.says(&format!("sha256: {sum}"));
    assert!(
        written
            .stderr
            .contains("read back, identical to what was written"),
        "{}",
        written.stderr
    );
    let read = Ddx::new()
        .arg(format!("if={}", server.uri()))
        .arg("of=/dev/null")
        .args(["bs=64k", "--hash=sha256"])
        .succeeds();
    read.says(&format!("sha256: {sum}"));
}

#[test]
fn a_sparse_run_crossing_the_end_of_a_device_seeks_what_fits_as_gnu_dd() {
    if let Some(why) = LoopDevice::unavailable() {
        return rigs::skip(&why);
    }
    // All zeros in, seek= near the end: GNU seeks block by block until a
    // seek would pass the end, then writes (and meets ENOSPC).
    let dir = tempdir().unwrap();
    let old: Vec<u8> = (0..3072).map(|i| b'A' + (i % 26) as u8).collect();
    let (gnu_backing, ddx_backing) = (dir.path().join("gnu"), dir.path().join("ddx"));
    std::fs::write(&gnu_backing, &old).unwrap();
    std::fs::write(&ddx_backing, &old).unwrap();
    let attach = |path: &Path| rigs::or_skip(LoopDevice::attach(path, LoopOptions::default()));
    let (Some(gnu), Some(ours)) = (attach(&gnu_backing), attach(&ddx_backing)) else {
        return;
    };
    let reset = || {
        for device in [&gnu, &ours] {
            std::fs::write(&device.path, &old).unwrap();
        }
    };
    for operands in [
        &["seek=522B", "ibs=5B", "conv=sparse"][..],
        &["seek=3", "bs=512", "conv=sparse,notrunc"],
        &["seek=1000B", "bs=700", "conv=sparse"],
    ] {
        Compare::new()
            .file("in", vec![0; 2560])
            .args(["if=in"])
            .args(operands)
            .outputs(&gnu.path, &ours.path)
            .before_each(reset)
            .run();
    }
}
