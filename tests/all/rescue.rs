//! Failing devices: read errors against GNU dd (conv=noerror on every
//! backend) and GNU ddrescue (--rescue, --map), resume after SIGKILL, write
//! errors (ENOSPC, EIO). The devices are rigs over temp files (see
//! `rigs`); a test whose rig cannot be built here skips (`rigs::skip`).

use std::path::Path;
use std::process::Command;

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cmd::{ddx_as_dd, operand};
use crate::rigs::fixture::{Compare, Ddx, BACKENDS};

/// The bytes of every input here: different in every 512-byte sector.
const SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// ddx (named "dd") copying `input` to `output`: add its options, run.
fn copy(input: &Path, output: &Path) -> Ddx {
    Ddx::as_dd()
        .arg(operand("if", input))
        .arg(operand("of", output))
}

#[test]
fn read_errors_match_gnu_dd_on_every_backend() {
    let size = 1 << 20;
    let contents = pattern(SEED, size);
    // A two-sector range inside the 25th 4 KiB block, one lone sector, and
    // a range across a 64 KiB boundary.
    let bad = [(0x19000, 0x400), (0x4A000, 0x200), (0x8FE00, 0x600)];
    let Some(device) = rigs::or_skip(rigs::NbdDevice::with_bad_ranges(&contents, &bad)) else {
        return;
    };
    for operands in [
        &["bs=4096", "conv=noerror,sync"][..],
        &["bs=4096", "conv=noerror"],
        &["bs=4096"],
        &["bs=64k", "conv=noerror,sync"],
        &["bs=1M", "conv=noerror,sync"],
        &["bs=512", "conv=noerror,sync", "iflag=direct"],
        &["bs=512", "conv=noerror", "iflag=direct"],
        // Reads in flight (the queue depths BACKENDS asks for): the
        // record that fails is GNU's, and nothing read past it counts.
        &["bs=4096", "conv=noerror,sync", "iflag=direct"],
        &["bs=64k", "conv=noerror", "iflag=direct"],
        &["bs=4096", "iflag=direct"],
        &["ibs=4096", "obs=10000", "conv=noerror,sync"],
        &["bs=4096", "conv=noerror,sync", "skip=20", "count=100"],
        &["bs=4096", "conv=noerror,sync", "status=none"],
        &["bs=3000", "conv=noerror,sync"],
        &["bs=3000", "conv=noerror"],
        &["bs=4096", "conv=noerror,sync", "iflag=fullblock"],
        &["bs=64k", "conv=noerror,sync", "count=7"],
        &["ibs=512", "obs=4096", "conv=noerror"],
        &["bs=128k", "conv=noerror,sync,fdatasync", "status=noxfer"],
    ] {
        Compare::new()
            .input_path(&device.path)
            .args(operands)
            .output_file()
            .backends(BACKENDS)
            .run();
    }
}

/// The '-' blocks of a mapfile, as (pos, size).
pub(crate) fn bad_blocks(map: &str) -> Vec<(u64, u64)> {
    let mut lines = map
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    lines.next(); // the status line
    lines
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"-")).then(|| {
                let n = |t: &str| u64::from_str_radix(t.trim_start_matches("0x"), 16).unwrap();
                (n(f[0]), n(f[1]))
            })
        })
        .collect()
}

#[test]
fn rescue_recovers_what_gnu_ddrescue_recovers() {
    if !rigs::have("ddrescue") {
        return rigs::skip("ddrescue is not installed (package gddrescue)");
    }
    let size = 1 << 20;
    let contents = pattern(SEED, size);
    let bad = [
        (0x19000, 0x400),
        (0x4A000, 0x200),
        (0x8FE00, 0x600),
        (0xFFE00, 0x200),
    ];
    let Some(device) = rigs::or_skip(rigs::NbdDevice::with_bad_ranges(&contents, &bad)) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let theirs = scratch.path().join("ddrescue.img");
    let their_map = scratch.path().join("ddrescue.map");
    assert!(ddrescue(512, &device.path, &theirs, &their_map));
    let mut expected = contents.clone();
    for &(pos, len) in &bad {
        expected[pos as usize..(pos + len) as usize].fill(0);
    }
    // ddrescue leaves a bad last sector unwritten: the image is shorter.
    let mut their_bytes = std::fs::read(&theirs).unwrap();
    their_bytes.resize(size, 0);
    assert!(
        their_bytes == expected,
        "ddrescue itself read the rig wrong"
    );
    assert_eq!(
        bad_blocks(&std::fs::read_to_string(&their_map).unwrap()),
        bad
    );

    for bs in ["bs=4096", "bs=64k", "bs=1M", "bs=512", "ibs=3000"] {
        let ours = scratch.path().join("ddx.img");
        let our_map = scratch.path().join("ddx.map");
        let _ = std::fs::remove_file(&our_map);
        // The rescue ran its course, bad sectors remain: exit 2.
        let out = copy(&device.path, &ours)
            .args(["--rescue", &operand("--map", &our_map), bs])
            .leaves_bad_areas();
        assert!(std::fs::read(&ours).unwrap() == expected, "{bs}: output");
        assert_eq!(
            bad_blocks(&std::fs::read_to_string(&our_map).unwrap()),
            bad,
            "{bs}: map"
        );
        let reported: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("bad range at offset"))
            .collect();
        let wanted: Vec<String> = bad
            .iter()
            .map(|(pos, len)| {
                format!(
                    "dd: '{}': bad range at offset {pos}, {len} bytes (zeros in the output)",
                    device.path.display()
                )
            })
            .collect();
        assert_eq!(reported, wanted, "{bs}: report");
        // ddrescue can continue from our map: nothing left but bad sectors.
        assert!(
            ddrescue(512, &device.path, &ours, &our_map),
            "{bs}: ddrescue reads our map"
        );
    }

    // With 4 KiB sectors, both lose whole 4 KiB sectors, the same ones.
    let theirs4k = scratch.path().join("ddrescue4k.img");
    let their_map4k = scratch.path().join("ddrescue4k.map");
    assert!(ddrescue(4096, &device.path, &theirs4k, &their_map4k));
    let ours4k = scratch.path().join("ddx4k.img");
    let our_map4k = scratch.path().join("ddx4k.map");
    copy(&device.path, &ours4k)
        .args(["--rescue", "--sector-size=4096", "bs=64k"])
        .arg(operand("--map", &our_map4k))
        .run();
    let mut their_bytes = std::fs::read(&theirs4k).unwrap();
    their_bytes.resize(size, 0);
    assert!(
        std::fs::read(&ours4k).unwrap() == their_bytes,
        "4 KiB sectors: output"
    );
    assert_eq!(
        bad_blocks(&std::fs::read_to_string(&our_map4k).unwrap()),
        bad_blocks(&std::fs::read_to_string(&their_map4k).unwrap()),
        "4 KiB sectors: map"
    );
}

/// A small xorshift, seeded from the clock (the seed is printed).
struct Random(u64);

impl Random {
    fn new() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        eprintln!("random seed {seed}");
        Random(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn resume_after_sigkill_gives_the_uninterrupted_copy() {
    let size = 2 << 20;
    let contents = pattern(SEED, size);
    // About 21 ms per 16 KiB request: a whole copy takes ~2.7 s.
    let Some(device) = rigs::or_skip(rigs::NbdDevice::slow(&contents, 20)) else {
        return;
    };
    // The output and its checkpoint on a tmpfs: the map is synced twice a
    // second, which need not reach this machine's disk.
    let Some(scratch) = rigs::or_skip(rigs::SmallTmpfs::new(16 << 20)) else {
        return;
    };
    let output = scratch.path().join("copy.img");
    let checkpoint = scratch.path().join("copy.img.ddx-map");
    let run = || {
        ddx_as_dd()
            .arg("--resume")
            .arg(format!("if={}", device.path.display()))
            .arg(format!("of={}", output.display()))
            .args(["bs=16k", "iflag=direct", "status=none"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut random = Random::new();
    let (mut kills, mut resumed_from_partial_map, mut completed) = (0, 0, 0);
    while kills < 20 {
        // A checkpoint with finished ranges: this run really resumes.
        let had_map = std::fs::read_to_string(&checkpoint)
            .is_ok_and(|map| map.lines().skip(5).any(|l| l.trim_end().ends_with('+')));
        let mut child = run();
        std::thread::sleep(std::time::Duration::from_millis(20 + random.below(1500)));
        if child.try_wait().unwrap().is_some() {
            // Finished before the kill: the checkpoint is gone; go again
            // (a fresh copy over the finished one).
            completed += 1;
            assert!(
                !checkpoint.exists(),
                "a complete copy removes its checkpoint"
            );
            assert!(std::fs::read(&output).unwrap() == contents);
            continue;
        }
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
        child.wait().unwrap();
        kills += 1;
        if had_map {
            resumed_from_partial_map += 1;
        }
    }
    let status = run().wait().unwrap();
    assert!(status.success(), "the last resume completes");
    assert!(
        std::fs::read(&output).unwrap() == contents,
        "resumed output equals the input"
    );
    assert!(!checkpoint.exists());
    eprintln!(
        "{kills} kills, {resumed_from_partial_map} runs resumed a checkpoint, \
         {completed} completed before their kill"
    );
    assert!(
        resumed_from_partial_map >= 5,
        "too few kills landed after a checkpoint was saved"
    );
}

/// The digest printed by a checksum tool for `path` (its first hex word).
fn tool_digest(tool: &str, args: &[&str], path: &Path) -> Option<String> {
    if !rigs::have(tool) {
        return None;
    }
    let out = Command::new(tool).args(args).arg(path).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // "HEX  file" (sha256sum, b3sum) or "XXH3 (file) = HEX" (xxhsum -H3).
    let word = if text.contains(" = ") {
        text.rsplit(" = ").next()?.trim().to_owned()
    } else {
        text.split_whitespace().next()?.to_owned()
    };
    Some(word)
}

fn printed_digest(stderr: &str, algorithm: &str) -> String {
    let prefix = format!("{algorithm}: ");
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {algorithm} line in {stderr}"));
    line[prefix.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn hashes_equal_the_checksum_tools() {
    let scratch = tempfile::tempdir().unwrap();
    // Data, a 3 MiB hole, data, and an odd tail: bulk reads, hole events
    // and a partial last record all pass through the tap.
    let input = scratch.path().join("input");
    let mut contents = pattern(SEED, 1 << 20);
    contents.resize(4 << 20, 0);
    contents.extend_from_slice(&pattern(SEED, 123_457));
    {
        use std::io::{Seek, Write};
        let mut file = std::fs::File::create(&input).unwrap();
        file.write_all(&contents[..1 << 20]).unwrap();
        file.seek(std::io::SeekFrom::Start(4 << 20)).unwrap();
        file.write_all(&contents[4 << 20..]).unwrap();
    }
    let tools: [(&str, &str, &[&str]); 3] = [
        ("sha256", "sha256sum", &[]),
        ("blake3", "b3sum", &[]),
        ("xxh3", "xxhsum", &["-H3"]),
    ];
    let mut expected = Vec::new();
    for (algorithm, tool, args) in tools {
        match tool_digest(tool, args, &input) {
            Some(digest) => expected.push((algorithm, digest)),
            None => rigs::skip(&format!("{tool} is not installed: {algorithm} unchecked")),
        }
    }
    let output = scratch.path().join("output");
    let mut cases: Vec<Vec<&str>> = Vec::new();
    for backend in BACKENDS {
        for bs in ["bs=64k", "bs=4096", "ibs=1000 obs=3000", "bs=1M"] {
            let mut case: Vec<&str> = backend.to_vec();
            case.extend(bs.split(' '));
            cases.push(case);
        }
    }
    cases.push(vec!["--rescue", "bs=64k"]);
    cases.push(vec!["--map=/dev/null/x", "bs=64k"]);
    for case in &cases {
        let _ = std::fs::remove_file(&output);
        let copy = copy(&input, &output)
            .arg("--hash=sha256,blake3,xxh3")
            .args(case);
        let out = if case[0].starts_with("--map") {
            // An unsavable map is reported, and the digests are still right.
            let out = copy.run();
            out.says("cannot save the map");
            out
        } else {
            copy.succeeds()
        };
        assert!(std::fs::read(&output).unwrap() == contents, "{case:?}");
        for (algorithm, digest) in &expected {
            assert_eq!(
                &printed_digest(&out.stderr, algorithm),
                digest,
                "{algorithm} {case:?}"
            );
        }
    }
    // From a pipe, with skip= and count=: the digest of what was copied.
    let out = ddx_as_dd()
        .args([
            "--hash=sha256",
            "bs=1000",
            "skip=3",
            "count=700",
            "status=none",
        ])
        .arg(format!("of={}", output.display()))
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let digest = rigs::bytes::sha256(&output);
    assert_eq!(printed_digest(&stderr, "sha256"), digest);
    assert!(stderr.ends_with(&format!("{digest}  -\n")), "{stderr}");
}

/// `--hash-file` in each checker's own format: `sha256sum -c`, `b3sum -c`
/// and `xxhsum -c` accept what ddx wrote, for a file (names with a space,
/// a backslash and a final carriage return, which `sha256sum -c` would
/// take for a DOS line ending unless escaped; given relative to where the
/// check runs) and for standard input ('-').
#[test]
fn hash_files_pass_their_checkers() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let contents = pattern(SEED, (1 << 20) + 12_345);
    let checkers: [(&str, &str); 3] = [
        ("sha256", "sha256sum"),
        ("blake3", "b3sum"),
        ("xxh3", "xxhsum"),
    ];
    for (algorithm, checker) in checkers {
        if !rigs::have(checker) {
            rigs::skip(&format!("{checker} is not installed (CI installs it)"));
            continue;
        }
        let names: &[&str] = if algorithm == "xxh3" {
            &["in put", "return\r"]
        } else {
            &["in put", "back\\slash", "return\r"]
        };
        for name in names {
            std::fs::write(dir.join(name), &contents).unwrap();
            let sums = format!("{algorithm}.sums");
            rigs::must_run(ddx_as_dd().current_dir(dir).args([
                format!("if={name}"),
                "of=output".into(),
                "bs=64k".into(),
                format!("--hash={algorithm}"),
                format!("--hash-file={sums}"),
            ]));
            let check = Command::new(checker)
                .current_dir(dir)
                .args(["-c", &sums])
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&check.stdout);
            assert!(
                check.status.success(),
                "{checker} -c on {:?}: {said}{}",
                std::fs::read_to_string(dir.join(&sums)).unwrap(),
                String::from_utf8_lossy(&check.stderr)
            );
            assert!(said.contains(": OK"), "{said}");
            // A changed input fails the same check: the file names it.
            std::fs::write(dir.join(name), b"changed").unwrap();
            let check = Command::new(checker)
                .current_dir(dir)
                .args(["-c", &sums])
                .output()
                .unwrap();
            assert!(!check.status.success(), "{checker} passed a changed input");
        }

        // Standard input, through a pipe: the line names '-', which the
        // checker reads from its own standard input. xxhsum 0.8.1 (this
        // Debian's) opens '-' as a file name instead, so for it the same
        // bytes are there too; later versions read standard input.
        let (check_dir, data) = rigs::bytes::file_with("data", &contents);
        if algorithm == "xxh3" {
            std::fs::write(check_dir.path().join("-"), &contents).unwrap();
        }
        let sums = check_dir.path().join("stdin.sums");
        rigs::must_run(&mut rigs::cmd::shell(&format!(
            "cat '{}' | {} of=/dev/null --hash={algorithm} --hash-file='{}'",
            data.display(),
            rigs::cmd::DDX,
            sums.display()
        )));
        let written = std::fs::read_to_string(&sums).unwrap();
        assert!(
            written.contains(" -\n") || written.contains("(-)"),
            "{written}"
        );
        let check = Command::new(checker)
            .current_dir(check_dir.path())
            .arg("-c")
            .arg(&sums)
            .stdin(std::fs::File::open(&data).unwrap())
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{checker} -c {written:?}: {}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
    }
}

/// `--hash-file` is refused before anything is opened where its line
/// could not be true or checked, and a failed copy writes none.
#[test]
fn hash_file_refusals_and_failed_copies() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::write(dir.join("input"), pattern(SEED, 100_000)).unwrap();
    let refused: &[&[&str]] = &[
        &["--hash-file=sums"],
        &["--hash=sha256,blake3", "--hash-file=sums"],
        &["--hash=sha256", "--hash-file=sums", "skip=1"],
        &["--hash=sha256", "--hash-file=sums", "count=1"],
        &["--hash=sha256", "--hash-file=sums", "conv=sync"],
        &["--hash=sha256", "--hash-file=output"],
        &["--hash=sha256", "--hash-file=input"],
        &["--hash=sha256", "--hash-file=no/such/dir/sums"],
    ];
    for extra in refused {
        let out = ddx_as_dd()
            .current_dir(dir)
            .args(["if=input", "of=output"])
            .args(*extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{extra:?}: {stderr}");
        assert!(stderr.contains("--hash-file"), "{extra:?}: {stderr}");
        assert!(!dir.join("output").exists(), "{extra:?}");
        assert!(!dir.join("sums").exists(), "{extra:?}");
        assert_eq!(std::fs::read(dir.join("input")).unwrap().len(), 100_000);
    }
    // A copy that fails (the output fills up) leaves no digest behind.
    let out = ddx_as_dd()
        .current_dir(dir)
        .args([
            "if=input",
            "of=/dev/full",
            "--hash=sha256",
            "--hash-file=sums",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("'sums' not written"), "{stderr}");
    assert!(!dir.join("sums").exists());
}

#[test]
fn verify_passes_a_good_copy_and_catches_a_flipped_byte() {
    let scratch = tempfile::tempdir().unwrap();
    let size = 3 << 20;
    let mut contents = pattern(SEED, size);
    let flip_at = 1_234_567u64;
    contents[flip_at as usize] = 0x80;
    let input = scratch.path().join("input");
    std::fs::write(&input, &contents).unwrap();
    let output = scratch.path().join("output");
    for extra in [
        &["bs=64k"][..],
        &["bs=512", "--backend=sync"],
        &["--rescue"],
    ] {
        let out = copy(&input, &output).arg("--verify").args(extra).succeeds();
        let identical = format!(
            "verify: {size} bytes of '{}' read back, identical",
            output.display()
        );
        out.says(&identical);
    }

    // A device that corrupts one byte on its way down: the copy itself
    // succeeds, and only reading back from the device shows it.
    // (Every request to this device runs a shell: keep them few and large.)
    let Some(device) = rigs::or_skip(rigs::NbdDevice::flipping_writes(&vec![0; size], flip_at))
    else {
        return;
    };
    for extra in [
        &["bs=1M"][..],
        &["bs=256k", "--backend=sync"],
        &["--rescue", "bs=1M"],
    ] {
        copy(&input, &device.path)
            .args(["--verify", "conv=notrunc"])
            .args(extra)
            .fails_with(&format!(
                "verify: '{}' differs from what was written at offset {flip_at}\n",
                device.path.display()
            ));
    }
}

#[test]
fn a_signal_during_verify_ends_it_at_once() {
    // The read-back comes after the statistics, when no reporter watches
    // the signals any more; it must still stop for Ctrl-C (and SIGTERM),
    // dying of the signal, not run on to "identical" and exit 0.
    let size = 4 << 20;
    let (_scratch, input) = rigs::bytes::file_with("input", pattern(SEED, size));
    // Reads of 100 ms each: reading 4 MiB back takes seconds.
    let Some(device) = rigs::or_skip(rigs::NbdDevice::slow(&vec![0; size], 100)) else {
        return;
    };
    for signal in [libc::SIGINT, libc::SIGTERM] {
        use std::io::Read;
        use std::os::unix::process::ExitStatusExt;
        let mut child = ddx_as_dd()
            .args(["--verify", "bs=1M", "conv=notrunc"])
            .args([operand("if", &input), operand("of", &device.path)])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = child.stderr.take().unwrap();
        // The statistics come before the read-back begins.
        let mut text = Vec::new();
        let mut byte = [0u8; 1];
        while !String::from_utf8_lossy(&text).contains(" copied, ") {
            assert_eq!(stderr.read(&mut byte).unwrap(), 1, "{text:?}");
            text.push(byte[0]);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        rigs::signal::send(child.id(), signal);
        let status = child.wait().unwrap();
        stderr.read_to_end(&mut text).unwrap();
        let text = String::from_utf8_lossy(&text);
        assert_eq!(status.signal(), Some(signal), "{status:?}: {text}");
        assert!(!text.contains("verify:"), "{text}");
    }
}

#[test]
fn enospc_matches_gnu_dd_on_every_backend() {
    let Some(fs) = rigs::or_skip(rigs::SmallTmpfs::new(1 << 20)) else {
        return;
    };
    let (_scratch, input) = rigs::bytes::file_with("input", pattern(SEED, 3 << 20));
    let output = fs.path().join("out");
    for operands in [
        &["bs=64k"][..],
        &["bs=4096"],
        &["bs=1M"],
        &["bs=3000"],
        &["ibs=4k", "obs=64k"],
        &["bs=64k", "conv=fdatasync"],
        &["bs=64k", "seek=3", "conv=sparse"],
    ] {
        Compare::new()
            .input_path(&input)
            .args(operands)
            .output_at(&output)
            .backends(BACKENDS)
            .run();
    }
    // A positional copy says where it stopped; what it wrote stays.
    let _ = std::fs::remove_file(&output);
    let resume = || copy(&input, &output).args(["--resume", "bs=64k"]);
    let out = resume().fails();
    let written = std::fs::metadata(&output).unwrap().len();
    out.says(&format!(
        "dd: error writing '{}': No space left on device; stopped at output offset \
             {written}, everything before it is written; continue with --resume\n",
        output.display(),
    ));
    let total = format!("\n{written} bytes (");
    out.says(&total);
    // Room made, the same command continues where it stopped.
    assert!(fs.resize(8 << 20), "remount the tmpfs larger");
    let out = resume().succeeds();
    let copied = std::fs::read(&input).unwrap();
    assert!(std::fs::read(&output).unwrap() == copied);
    assert!(
        out.stderr.contains(&format!(
            "\n{} bytes (",
            copied.len() as u64 - written / 65536 * 65536
        )),
        "only the rest is copied: {}",
        out.stderr
    );
}

#[test]
fn write_eio_matches_gnu_dd_on_every_backend() {
    let size = 1u64 << 20;
    // blkdebug's sector 512 is byte 262144.
    let Some(rig) = rigs::or_skip(rigs::FailingWrites::new(size, 512)) else {
        return;
    };
    let (_scratch, input) = rigs::bytes::file_with("input", pattern(SEED, size as usize));
    let reset = || std::fs::write(&rig.image, vec![0; size as usize]).unwrap();
    for operands in [
        &["bs=64k", "conv=notrunc"][..],
        &["bs=4096", "conv=notrunc"],
        &["bs=1M", "conv=notrunc"],
        &["ibs=4k", "obs=64k", "conv=notrunc"],
        &["bs=3000", "conv=notrunc"],
    ] {
        // Every backend, io_uring too: it keeps one write in flight, so
        // nothing lands past a write that fails (found by this test).
        Compare::new()
            .input_path(&input)
            .args(operands)
            .output_onto(&rig.path)
            .read_output_from(&rig.image)
            .before_each(reset)
            .backends(BACKENDS)
            .run();
    }
    reset();
    let out = copy(&input, &rig.path)
        .args(["--rescue", "bs=4096", "conv=notrunc"])
        .fails_with(&format!("error writing '{}': ", rig.path.display()));
    out.says("; stopped at output offset 262144, everything before it is written");
    out.says("\n262144 bytes (");
    assert!(
        std::fs::read(&rig.image).unwrap()[..262144] == std::fs::read(&input).unwrap()[..262144]
    );
}

#[test]
fn refused_combinations_touch_nothing() {
    let (scratch, input) = rigs::bytes::file_with("input", b"data");
    let output = scratch.path().join("output");
    for (args, message) in [
        (
            &["--rescue", "conv=ucase"][..],
            "--rescue cannot be combined with conv=ucase",
        ),
        (
            &["--resume", "conv=noerror"],
            "--resume needs conv=noerror and conv=sync together",
        ),
        (
            &["--map=m", "oflag=append"],
            "--map cannot be combined with oflag=append",
        ),
        (
            &["--verify", "conv=swab"],
            "--verify cannot be combined with conv=swab",
        ),
        (
            &["--sector-size=4096"],
            "--sector-size is the retry unit of --rescue",
        ),
        (&["--hash=md5"], "invalid argument 'md5' for '--hash'"),
    ] {
        copy(&input, &output)
            .current_dir(scratch.path())
            .args(args)
            .fails_with(message);
        assert!(!output.exists(), "{args:?} created the output");
        assert!(!scratch.path().join("m").exists());
    }
    // Without of=, positional copies and --verify are refused.
    Ddx::as_dd()
        .args(["--verify", &operand("if", &input)])
        .fails_with("--verify needs of=FILE");
    // A checkpoint whose output is gone is not resumed.
    std::fs::write(scratch.path().join("output.ddx-map"), "0 ? 1\n").unwrap();
    copy(&input, &output)
        .arg("--resume")
        .fails_with("which is not there: put it back");
    assert!(!output.exists());
}

#[test]
fn resume_continues_after_a_read_error() {
    let size = 1 << 20;
    let contents = pattern(SEED, size);
    let Some(device) = rigs::or_skip(rigs::NbdDevice::with_bad_ranges(
        &contents,
        &[(0x40000, 0x200)],
    )) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let output = scratch.path().join("out");
    let map = scratch.path().join("out.map");
    let run = || {
        copy(&device.path, &output)
            .arg(operand("--map", &map))
            .arg("bs=64k")
    };
    // Stopped by the error; the map says what is done.
    run()
        .fails_with("Input/output error; stopped at input offset 262144; continue with --resume\n");
    // The same command again refuses to start over the map.
    let again = run().run();
    again.says("add --resume");
    // With --rescue, only the bad sector is retried and lost.
    run().args(["--resume", "--rescue"]).leaves_bad_areas();
    let mut expected = contents.clone();
    expected[0x40000..0x40200].fill(0);
    assert!(std::fs::read(&output).unwrap() == expected);
    assert_eq!(
        bad_blocks(&std::fs::read_to_string(&map).unwrap()),
        [(0x40000, 0x200)]
    );
}

/// A resumed copy says once, before anything else, what its map holds:
/// bytes done, left and bad.
#[test]
fn resume_says_where_it_stands_first() {
    let scratch = tempfile::tempdir().unwrap();
    let input = scratch.path().join("input");
    let output = scratch.path().join("output");
    let map = scratch.path().join("output.map");
    let contents = pattern(SEED, 1 << 20);
    std::fs::write(&input, &contents).unwrap();
    std::fs::write(&output, &contents[..1 << 18]).unwrap();
    // ddrescue's format: 256 KiB finished, one bad sector, the rest not tried.
    std::fs::write(
        &map,
        "# Mapfile\n0x00040200     ?               1\n\
         0x00000000  0x00040000  +\n\
         0x00040000  0x00000200  -\n\
         0x00040200  0x000BFE00  ?\n",
    )
    .unwrap();
    let out = copy(&input, &output)
        .args([format!("--map={}", map.display()), "--resume".into()])
        .arg("bs=64k")
        .run();
    let stderr = &out.stderr;
    let first = stderr.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!(
            "dd: resuming from '{}': 262144 bytes done, 785920 left, 512 bad (25% done)",
            map.display()
        ),
        "{stderr}"
    );
    assert_eq!(stderr.matches("resuming from").count(), 1, "{stderr}");
    // Only what was left is copied; the bad sector stays bad (no --rescue).
    assert!(stderr.contains("\n785920 bytes ("), "{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let written = std::fs::read(&output).unwrap();
    assert!(written[0x40200..] == contents[0x40200..]);
    // status=none: errors only, so not this line.
    let out = copy(&input, &output)
        .args([format!("--map={}", map.display()), "--resume".into()])
        .args(["bs=64k", "status=none"])
        .run();
    assert!(!out.stderr.contains("resuming"));
}

/// GNU ddrescue, direct, with `sector`-byte sectors: whether it succeeded.
pub(crate) fn ddrescue(sector: u32, input: &Path, output: &Path, map: &Path) -> bool {
    Command::new("ddrescue")
        .args(["-q", "-d", &format!("-b{sector}")])
        .arg(input)
        .arg(output)
        .arg(map)
        .status()
        .unwrap()
        .success()
}

/// The map ddx saves as it goes holds ddrescue's lines and nothing else
/// (it once carried dozens of '#' lines of padding): its header, status
/// line and blocks, which GNU ddrescuelog reads and lists as ddx found
/// them, mid-copy (a resumable copy killed) and at the end.
#[test]
fn the_map_holds_ddrescues_lines_only_and_ddrescuelog_reads_it() {
    if !rigs::tools_or_skip(&["ddrescuelog"]) {
        return;
    }
    let size = 1 << 20;
    let contents = pattern(SEED, size);
    let bad = [(0x19000u64, 0x400u64), (0x8FE00, 0x600)];
    let Some(device) = rigs::or_skip(rigs::NbdDevice::with_bad_ranges(&contents, &bad)) else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let output = scratch.path().join("out");
    let map = scratch.path().join("out.map");
    copy(&device.path, &output)
        .arg("--rescue")
        .arg(operand("--map", &map))
        .args(["bs=64k", "iflag=direct"])
        .leaves_bad_areas();
    let text = std::fs::read_to_string(&map).unwrap();
    let checked = |text: &str| {
        // ddrescue's own header (its version, command line, start and
        // current time, phase, and the two column lines): as many as
        // ddx's (its version, command line, input and output, finished,
        // and the column lines).
        let comments: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
        assert!(
            comments.len() <= 7,
            "{} comment lines: {text}",
            comments.len()
        );
        assert!(
            comments
                .iter()
                .all(|l| l.trim_start_matches('#').trim().len() > 2),
            "a padding line: {text}"
        );
        assert!(text.lines().all(|l| !l.trim().is_empty()), "{text}");
    };
    checked(&text);
    let status = Command::new("ddrescuelog")
        .arg("-t")
        .arg(&map)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "ddrescuelog -t: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    // Its list of bad sectors is the rig's.
    let listed = Command::new("ddrescuelog")
        .args(["-b512", "-l-"])
        .arg(&map)
        .output()
        .unwrap();
    let sectors: Vec<u64> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    let expected: Vec<u64> = bad
        .iter()
        .flat_map(|&(at, len)| at / 512..(at + len) / 512)
        .collect();
    assert_eq!(sectors, expected);
    // A checkpoint saved mid-copy, as --resume leaves it when killed.
    let slow = rigs::NbdDevice::slow(&contents, 20).unwrap();
    let resumed = scratch.path().join("resumed");
    let checkpoint = scratch.path().join("resumed.ddx-map");
    let mut child = ddx_as_dd()
        .arg("--resume")
        .arg(operand("if", &slow.path))
        .arg(operand("of", &resumed))
        .args(["bs=16k", "iflag=direct", "status=none"])
        .spawn()
        .unwrap();
    rigs::wait_up_to(
        std::time::Duration::from_secs(10),
        || {
            std::fs::read_to_string(&checkpoint)
                .is_ok_and(|m| m.lines().any(|l| l.trim_end().ends_with('+')))
        },
        "a checkpoint with a finished range",
    )
    .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&checkpoint).unwrap();
    checked(&text);
    let status = Command::new("ddrescuelog")
        .arg("-t")
        .arg(&checkpoint)
        .status()
        .unwrap();
    assert!(status.success(), "{text}");
}
