//! `--trim` through the real binary: an input with a run of zeros stored
//! as data and holes (one at its end) copied onto outputs that already
//! hold other bytes (an NBD export served by nbdkit's file plugin, a file,
//! a loop block device, each backed by a file on a tmpfs made here), with
//! and without conv=sparse. What the output reads back must be what GNU dd
//! writes for the same operands onto a new file (zeros where the input
//! has them, whatever was there before), with GNU's statistics; and the
//! backing file must have given up the blocks the zeros were discarded
//! from (st_blocks), which writing the zeros would not do.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cmd::{ddx, gnu_dd, operand};
use crate::rigs::fixture::statistics;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;
/// The input's size, and every output's.
const SIZE: usize = 4 * MIB;
/// Bytes of the input that read as zeros: discarded under --trim.
const ZEROS: u64 = 2 * MIB as u64;
const BS: &str = "bs=64K";

/// The input: data, 512 KiB of zeros written as data, data, a 1 MiB hole,
/// data, and a 512 KiB hole at the end (the file extended over it).
fn make_input(path: &Path) {
    let mut bytes = pattern(0x7472_696d, SIZE);
    bytes[256 * KIB..768 * KIB].fill(0);
    std::fs::write(path, &bytes[..2 * MIB]).expect("input");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("input");
    use std::os::unix::fs::FileExt;
    file.write_all_at(&bytes[3 * MIB..3 * MIB + MIB / 2], 3 * MIB as u64)
        .expect("input");
    file.set_len(SIZE as u64).expect("input");
}

/// Bytes a file has allocated.
fn allocated(path: &Path) -> u64 {
    std::fs::metadata(path).expect("stat").blocks() * 512
}

/// What an output holds before each copy: no zeros anywhere.
fn old_bytes() -> Vec<u8> {
    let mut bytes = pattern(0x6f6c_6421, SIZE);
    for b in &mut bytes {
        *b |= 1;
    }
    bytes
}

/// GNU dd's copy of `input` with `extra` operands onto a new file:
/// (its bytes, its statistics).
fn gnu(dir: &Path, input: &Path, extra: &[&str]) -> (Vec<u8>, Vec<String>) {
    let out = dir.join("gnu");
    let _ = std::fs::remove_file(&out);
    let run = gnu_dd()
        .arg(operand("if", input))
        .arg(operand("of", &out))
        .arg(BS)
        .args(extra)
        .output()
        .expect("dd");
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "GNU dd: {stderr}");
    (std::fs::read(&out).expect("gnu"), statistics(&stderr))
}

/// ddx --trim --verbose with `args`: (statistics, the trim line).
fn ddx_trim(args: &[String]) -> (Vec<String>, String) {
    let run = ddx()
        .args(["--trim", "--verbose", BS])
        .args(args)
        .output()
        .expect("ddx");
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(0), "{args:?}: {stderr}");
    let trim = stderr
        .lines()
        .find_map(|line| line.strip_prefix("ddx: trim: "))
        .unwrap_or_else(|| panic!("no trim line: {stderr}"))
        .to_owned();
    (statistics(&stderr), trim)
}

struct Case {
    dir: tempfile::TempDir,
    input: PathBuf,
    /// The backing file, on a tmpfs that frees punched pages.
    tmpfs: rigs::SmallTmpfs,
}

fn case() -> Option<Case> {
    let tmpfs = rigs::or_skip(rigs::SmallTmpfs::new(4 * SIZE as u64))?;
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in");
    make_input(&input);
    Some(Case { dir, input, tmpfs })
}

impl Case {
    /// The backing file, filled with old bytes.
    fn backing(&self) -> PathBuf {
        let path = self.tmpfs.path().join("backing");
        std::fs::write(&path, old_bytes()).expect("backing");
        path
    }

    /// One copy of the input with `extra` operands onto `output`, held to
    /// GNU dd's with `gnu_extra` onto a new file: the same statistics, the
    /// same bytes read back, the trim line saying how the zeros were
    /// `discarded`, and the backing file freed of them.
    fn check(&self, extra: &[&str], gnu_extra: &[&str], output: &Output, discarded: &str) {
        let (gnu_bytes, gnu_stats) = gnu(self.dir.path(), &self.input, gnu_extra);
        let before = allocated(output.backing);
        assert_eq!(before, SIZE as u64, "the backing file starts whole");
        let mut args = vec![operand("if", &self.input)];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push(output.of.clone());
        let (stats, trim) = ddx_trim(&args);
        assert_eq!(stats, gnu_stats, "{extra:?}");
        assert_eq!(trim, format!("{ZEROS} bytes discarded as {discarded}"));
        let after = allocated(output.backing);
        assert!(
            after + ZEROS <= before,
            "{extra:?}: {before} bytes allocated before, {after} after: the zeros were \
             not discarded"
        );
        assert!(
            std::fs::read(output.reads_back).expect("output") == gnu_bytes,
            "{extra:?}: {:?} differs from GNU dd's output",
            output.reads_back
        );
    }
}

/// Where a copy goes: the `of=` operand, the file on the tmpfs behind
/// it, and what reads its bytes back (the device, or the backing file).
struct Output<'a> {
    of: String,
    backing: &'a Path,
    reads_back: &'a Path,
}

/// The trim line's ending for a file or a block device (whose loop
/// driver punches holes in its backing file).
const PUNCHED: &str = "holes punched (fallocate PUNCH_HOLE)";

#[cfg(feature = "nbd")]
#[test]
fn trim_onto_an_nbd_export_reads_back_as_gnu_dd_writes_and_frees_the_servers_blocks() {
    use crate::rigs::nbd::{tempdir, Server};
    let Some(case) = case() else {
        return;
    };
    let backing = case.backing();
    let Some(server) = rigs::or_skip(Server::nbdkit_in(
        tempdir().expect("tempdir"),
        &["file", &backing.display().to_string()],
    )) else {
        return;
    };
    for extra in [&[][..], &["conv=sparse"]] {
        let backing = case.backing();
        let export = Output {
            of: format!("of={}", server.uri()),
            backing: &backing,
            reads_back: &backing,
        };
        let discarded = "NBD zero requests, which let the server deallocate";
        case.check(extra, extra, &export, discarded);
    }
}

#[test]
fn trim_onto_a_file_punches_holes_where_gnu_dd_writes_zeros() {
    let Some(case) = case() else {
        return;
    };
    // GNU writes onto a new file: conv=notrunc,sparse onto old bytes
    // would leave them, which is what --trim is for.
    for (extra, gnu_extra) in [
        (&["conv=notrunc"][..], &[][..]),
        (&["conv=notrunc,sparse"], &["conv=sparse"]),
    ] {
        let backing = case.backing();
        let file = Output {
            of: operand("of", &backing),
            backing: &backing,
            reads_back: &backing,
        };
        case.check(extra, gnu_extra, &file, PUNCHED);
    }
    // A new output that ends in a discarded hole is as long as GNU's.
    for extra in [&[][..], &["conv=sparse"], &["ibs=4K", "obs=16K"]] {
        let out = case.tmpfs.path().join("new");
        let _ = std::fs::remove_file(&out);
        let (gnu_bytes, gnu_stats) = gnu(case.dir.path(), &case.input, extra);
        let mut args = vec![operand("if", &case.input), operand("of", &out)];
        args.extend(extra.iter().map(|s| s.to_string()));
        let (stats, _) = ddx_trim(&args);
        assert_eq!(stats, gnu_stats, "{extra:?}");
        assert!(
            std::fs::read(&out).expect("output") == gnu_bytes,
            "{extra:?}: a new output differs from GNU dd's"
        );
        assert!(allocated(&out) + ZEROS <= SIZE as u64, "{extra:?}");
    }
}

#[test]
fn trim_onto_a_block_device_zeroes_what_gnu_dd_writes_and_frees_the_backing_blocks() {
    let Some(case) = case() else {
        return;
    };
    if let Some(why) = rigs::LoopDevice::unavailable() {
        rigs::skip(&why);
        return;
    }
    for extra in [&[][..], &["conv=sparse"], &["--backend=sync"]] {
        let backing = case.backing();
        let Some(device) = rigs::or_skip(rigs::LoopDevice::attach(
            &backing,
            rigs::LoopOptions::default(),
        )) else {
            return;
        };
        let gnu_extra: Vec<&str> = extra
            .iter()
            .copied()
            .filter(|s| !s.starts_with("--"))
            .collect();
        let onto_device = Output {
            of: operand("of", &device.path),
            backing: &backing,
            reads_back: &device.path,
        };
        case.check(extra, &gnu_extra, &onto_device, PUNCHED);
        drop(device);
    }
}

/// A compressed output is a stream, whatever file holds it: refused before
/// the file is created.
#[test]
fn trim_onto_a_compressed_output_is_refused_before_it_is_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in");
    make_input(&input);
    let out = dir.path().join("out.zst");
    let run = ddx()
        .args(["--trim", "--compress=zstd"])
        .arg(operand("if", &input))
        .arg(operand("of", &out))
        .output()
        .expect("ddx");
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&run.stderr),
        format!(
            "ddx: --trim discards zeros on the output: of='{}' is a stream, where nothing \
             can be discarded\n",
            out.display()
        )
    );
    assert!(!out.exists(), "refused, yet created");
}
