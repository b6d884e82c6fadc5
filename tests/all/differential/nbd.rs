//! The differential cases over NBD exports: ddx with `if=`/`of=` naming an
//! nbdkit `memory` export must print GNU dd's records, statistics and
//! messages, exit as it does and leave the same bytes, where GNU dd reads
//! a regular file of the export's size and writes a block device of it.
//!
//! The oracle for an output export is a loop device, not a file: an export
//! has a fixed size, is never truncated and refuses writes past its end
//! with ENOSPC, which is what a block device does under GNU dd (a regular
//! file would grow or be truncated instead). GNU dd's `out` is a symlink
//! to the loop device, so its messages name `out` as ddx's name the URI,
//! which is rewritten to `out` before comparing.
//!
//! The cases are the generator's (same seed, its own stretch), kept where
//! they read `if=in` and write `of=out` with nothing but those files
//! involved (no shell, no stdin) and no flag whose meaning is the local
//! file's (direct, append, nofollow...). A case puts an export on the
//! input, the output or both sides, by its index, so remote-to-file,
//! file-to-remote and remote-to-remote each get their share. Export
//! contents are loaded and read back by nbdcopy, libnbd's own copier.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use super::case::{Case, Entry};
use super::compare::{compare, describe_bytes, Finding};
use super::driver::{env_number, find_in_path};
use super::generate;
use super::prng::Rng;
use super::run::{run, Place, Program};
use crate::rigs::nbd::{nbdcopy_read, run as run_tool, tempdir, Server};
use crate::rigs::{self, LoopDevice, LoopOptions};

/// Cases kept per run: a representative slice, each starting two servers
/// and a loop device.
const NBD_CASES: usize = 150;

/// Symbols whose meaning does not depend on the end being a local file.
const PORTABLE_FLAGS: &[&str] = &["fullblock", "count_bytes", "skip_bytes", "seek_bytes"];
const LOCAL_CONVERSIONS: &[&str] = &["excl", "nocreat"];

/// Which sides of a case are exports.
#[derive(Clone, Copy, Debug)]
enum Sides {
    Input,
    Output,
    Both,
}

impl Sides {
    fn of(key: usize) -> Sides {
        match key % 3 {
            0 => Sides::Both,
            1 => Sides::Input,
            _ => Sides::Output,
        }
    }
    fn input(self) -> bool {
        matches!(self, Sides::Input | Sides::Both)
    }
    fn output(self) -> bool {
        matches!(self, Sides::Output | Sides::Both)
    }
}

#[test]
fn generated_cases_over_nbd_exports_match_gnu_dd_over_files_and_devices() {
    if let Some(why) = LoopDevice::unavailable() {
        return rigs::skip(&format!("the output oracle is a loop device: {why}"));
    }
    for tool in ["nbdkit", "nbdcopy"] {
        if !rigs::have(tool) {
            return rigs::skip(&format!(
                "{tool} is not installed (packages nbdkit, libnbd-bin)"
            ));
        }
    }
    let seed = super::seed() ^ 0x0b_d0_e4;
    let wanted = env_number("DDX_DIFF_NBD_CASES").unwrap_or(NBD_CASES);
    let cases: Vec<(usize, Case)> = (0..)
        .map(|index| (index, generate::case(seed, index as u64)))
        .filter(|(_, case)| portable(case))
        .take(wanted)
        .collect();

    let base = tempdir().expect("a temporary directory");
    let place = Place {
        base: base.path().to_path_buf(),
        path_var: std::env::var_os("PATH").unwrap_or_default(),
    };
    let gnu = Program {
        name: "dd",
        path: find_in_path("dd").expect("GNU dd on PATH"),
        leading_args: Vec::new(),
    };
    let ours = Program {
        name: "ddx",
        path: PathBuf::from(env!("CARGO_BIN_EXE_ddx")),
        leading_args: Vec::new(),
    };
    let failures = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("differential-nbd");
    let _ = fs::remove_dir_all(&failures);
    let mut reports = Vec::new();
    let mut sides_run = [0; 3];
    for (key, case) in &cases {
        let sides = Sides::of(*key);
        sides_run[*key % 3] += 1;
        let findings = check(*key, case, sides, &gnu, &ours, &place);
        if !findings.is_empty() {
            // The starting files, to replay the case by hand.
            let saved = failures.join(key.to_string());
            fs::create_dir_all(&saved).unwrap();
            super::run::populate(&saved, &case.entries);
            let mut report = format!(
                "\n--- MISMATCH #{key} [{}] exports: {sides:?} (starting files in {})\n  operands: {}\n",
                case.label,
                saved.display(),
                case.operands.join(" ")
            );
            for finding in findings {
                report += &format!("  {}: {}\n", finding.aspect, finding.detail);
            }
            reports.push(report);
        }
    }
    for report in &reports {
        println!("{report}");
    }
    let summary = format!(
        "NBD cases (seed {seed:#x}): {} run ({} both sides, {} input, {} output), {} mismatches",
        cases.len(),
        sides_run[0],
        sides_run[1],
        sides_run[2],
        reports.len()
    );
    assert!(reports.is_empty(), "{summary}");
    println!("{summary}");
}

/// Whether the case involves only `in` and `out` and operands whose
/// meaning an export can have.
fn portable(case: &Case) -> bool {
    let names_in = case.operands.iter().any(|op| op == "if=in");
    let names_out = case.operands.iter().any(|op| op == "of=out");
    let plain_files = case.entries.iter().all(|entry| match entry {
        Entry::File { name, .. } => name == "in" || name == "out",
        _ => false,
    });
    let has_in = case
        .entries
        .iter()
        .any(|e| matches!(e, Entry::File { name, .. } if name == "in"));
    let symbols_ok = case.operands.iter().all(|op| {
        let (key, value) = op.split_once('=').unwrap_or((op, ""));
        match key {
            "iflag" | "oflag" => value.split(',').all(|s| PORTABLE_FLAGS.contains(&s)),
            "conv" => value.split(',').all(|s| !LOCAL_CONVERSIONS.contains(&s)),
            _ => true,
        }
    });
    names_in
        && names_out
        && has_in
        && plain_files
        && symbols_ok
        && case.shell.is_none()
        && matches!(case.stdin, super::case::Stdin::Null)
}

fn file_bytes<'a>(case: &'a Case, wanted: &str) -> Option<&'a [u8]> {
    case.entries.iter().find_map(|entry| match entry {
        Entry::File { name, bytes } if name == wanted => Some(bytes.as_slice()),
        _ => None,
    })
}

/// A memory export of `bytes.len()` bytes holding `bytes`, loaded by
/// nbdcopy.
fn export_of(bytes: &[u8]) -> Server {
    let server = Server::nbdkit(&["memory", &format!("size={}", bytes.len())])
        .unwrap_or_else(|why| panic!("nbdkit memory: {why}"));
    if !bytes.is_empty() {
        let image = server.path("image");
        fs::write(&image, bytes).unwrap();
        run_tool(Command::new("nbdcopy").arg(&image).arg(server.uri()))
            .unwrap_or_else(|why| panic!("loading the export: {why}"));
    }
    server
}

/// The output export's size: what `out` held, or a size around the
/// input's, in whole sectors (a loop device's size is) and never empty.
fn output_size(key: usize, case: &Case) -> usize {
    let input = file_bytes(case, "in").map_or(0, <[u8]>::len);
    let chosen = match file_bytes(case, "out") {
        Some(old) => old.len(),
        None => {
            let mut rng = Rng::for_case(0x5122e, key as u64);
            match rng.range(0, 3) {
                0 => input / 2,
                1 => input,
                _ => input + rng.range(1, 4096),
            }
        }
    };
    chosen.max(1).div_ceil(512) * 512
}

fn check(
    key: usize,
    case: &Case,
    sides: Sides,
    gnu: &Program,
    ours: &Program,
    place: &Place,
) -> Vec<Finding> {
    let mut gnu_case = case.clone();
    let mut our_case = case.clone();
    let mut renames = Vec::new();

    let input_export = sides
        .input()
        .then(|| export_of(file_bytes(case, "in").unwrap()));
    if let Some(server) = &input_export {
        replace_operand(&mut our_case, "if=in", &format!("if={}", server.uri()));
        renames.push((server.uri(), "in"));
    }

    // The output: a loop device for GNU dd, an export for ddx, both
    // starting with `out`'s bytes (zeros where it had none).
    let mut device = None;
    let mut output_export = None;
    let backing_dir = tempdir().unwrap();
    let backing = backing_dir.path().join("device");
    if sides.output() {
        let mut start = file_bytes(case, "out").unwrap_or_default().to_vec();
        start.resize(output_size(key, case), 0);
        fs::write(&backing, &start).unwrap();
        let loop_device = LoopDevice::attach(&backing, LoopOptions::default())
            .unwrap_or_else(|why| panic!("attaching a loop device: {why}"));
        gnu_case.entries.retain(|e| !is_named(e, "out"));
        gnu_case.entries.push(Entry::Symlink {
            name: "out".into(),
            target: loop_device.name(),
        });
        device = Some(loop_device);
        let server = export_of(&start);
        replace_operand(&mut our_case, "of=out", &format!("of={}", server.uri()));
        renames.push((server.uri(), "out"));
        output_export = Some(server);
    }

    let gnu_outcome = run(&gnu_case, gnu, place);
    let mut our_outcome = run(&our_case, ours, place);
    let mut stderr = String::from_utf8_lossy(&our_outcome.stderr).into_owned();
    // GNU dd quotes a name in some messages and not in others, where it
    // needs no quotes (`in`, `out`); a URI always does. Quoting is left
    // out of the comparison: GNU's quotes are dropped, ddx's URI becomes
    // the bare name.
    for (uri, name) in &renames {
        stderr = stderr.replace(&format!("'{uri}'"), name);
        stderr = stderr.replace(uri.as_str(), name);
    }
    our_outcome.stderr = stderr.into_bytes();
    let mut gnu_outcome = gnu_outcome;
    let mut gnu_stderr = String::from_utf8_lossy(&gnu_outcome.stderr).into_owned();
    for (_, name) in &renames {
        gnu_stderr = gnu_stderr.replace(&format!("'{name}'"), name);
    }
    gnu_outcome.stderr = gnu_stderr.into_bytes();

    if sides.output() {
        gnu_outcome.files.remove("out");
        our_outcome.files.remove("out");
    }
    let mut findings = compare(&gnu_outcome, &our_outcome, gnu.name, ours.name);

    if let (Some(device), Some(server)) = (device, &output_export) {
        // GNU's last writes may still be dirty in the device's page cache:
        // the kernel flushes at the last close, which a probe (udev's
        // watch opens a block device after a write) can make someone
        // else's, and detaching does not write them; read back, the
        // backing file then lacked GNU dd's bytes. Flush them first.
        fs::File::open(&device.path)
            .and_then(|d| d.sync_all())
            .unwrap_or_else(|why| panic!("flushing {}: {why}", device.path.display()));
        drop(device);
        let by_gnu = fs::read(&backing).unwrap();
        let by_ours = nbdcopy_read(&server.uri(), server.dir.path())
            .unwrap_or_else(|why| panic!("reading the output export back: {why}"));
        if by_gnu != by_ours {
            findings.push(Finding {
                aspect: "output export".into(),
                detail: describe_bytes(&by_gnu, &by_ours),
            });
        }
    }
    if let Some(server) = &input_export {
        let after = nbdcopy_read(&server.uri(), server.dir.path()).unwrap();
        if after != file_bytes(case, "in").unwrap() {
            findings.push(Finding {
                aspect: "input export".into(),
                detail: "changed by the copy".into(),
            });
        }
    }
    findings
}

fn is_named(entry: &Entry, wanted: &str) -> bool {
    matches!(entry, Entry::File { name, .. } | Entry::Symlink { name, .. } if name == wanted)
}

fn replace_operand(case: &mut Case, from: &str, to: &str) {
    for op in &mut case.operands {
        if op == from {
            *op = to.to_string();
        }
    }
}
