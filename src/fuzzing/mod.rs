//! The fuzzing entry points: one function per parser or decoder of bytes
//! ddx did not write, called by the libFuzzer targets in `fuzz/` and by
//! the test that replays every stored input (`tests/all/corpora.rs`).
//!
//! Each entry takes arbitrary bytes, drives one reader of untrusted input
//! the way ddx drives it, and checks what must hold whatever the bytes
//! are, with `assert!` (not `debug_assert!`, so that the replay in a
//! release build checks them too): a parsed value keeps its invariants
//! and reads back the same after being written out, a decoder gives what
//! a reference decoder gives, a message is one line, and a secret never
//! reaches a text. A panic, a hang or an allocation beyond the fuzzer's
//! limit is a finding; the input that showed it goes into
//! `fuzz/regressions/<target>/`, which the replay reads as well.
//!
//! Adding a target: write its function here (or in one of the submodules,
//! by theme), add a row to [`TARGETS`], a `fuzz/fuzz_targets/<name>.rs`
//! of one line and its `[[bin]]` in `fuzz/Cargo.toml`, and seed
//! `fuzz/corpus/<name>/` with a few real inputs; the replay test fails
//! until all four exist.

mod casync;
mod command_line;
mod decoders;
mod disks;
mod files;
mod input;
mod remote;
mod system;

pub use casync::{casync_chunk, casync_index};
pub use command_line::{bench_args, number, operands};
pub use decoders::{bzip2, decompress, gzip, lz4, xz, zstd, zstd_blocks};
pub use disks::{ext, fat, ntfs, partition_table, swap, used_blocks, xfs};
pub use files::{bmap, hash_file, mapfile};
#[cfg(feature = "nbd")]
pub use remote::extents;
#[cfg(feature = "object")]
pub use remote::{aws_config, checksums, list_parts, redact};
pub use remote::{upload_record, uri};
pub use system::{device_probe, kernel_texts, scsi_sense};

/// One fuzz target: its name (the file under `fuzz/fuzz_targets/`, the
/// directory under `fuzz/corpus/`) and its entry point.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub name: &'static str,
    /// What it reads, for `--help`-style listings and the replay's
    /// messages.
    pub reads: &'static str,
    pub run: fn(&[u8]),
}

/// Every target, in the order the fuzzing script lists them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "operands",
        reads: "the command line: ddx's --options and GNU dd's operands",
        run: operands,
    },
    Target {
        name: "number",
        reads: "GNU dd's number grammar (bs=, count=, skip=, --request-size=)",
        run: number,
    },
    Target {
        name: "bench_args",
        reads: "the command line of ddx bench",
        run: bench_args,
    },
    Target {
        name: "bmap",
        reads: "bmaptool's XML block maps (--bmap), and the input seen through one",
        run: bmap,
    },
    Target {
        name: "mapfile",
        reads: "GNU ddrescue's mapfiles (--resume, --map)",
        run: mapfile,
    },
    Target {
        name: "hash_file",
        reads: "--hash-file's check lines, as the checkers read them back",
        run: hash_file,
    },
    Target {
        name: "casync_index",
        reads: "casync blob indexes (.caibx), made by casync, desync or anyone",
        run: casync_index,
    },
    Target {
        name: "casync_chunk",
        reads: "a chunk store's files (.cacnk: zstd, xz or gzip), and the chunker",
        run: casync_chunk,
    },
    Target {
        name: "uri",
        reads: "NBD, S3 and HTTP(S) URIs in if= and of=",
        run: uri,
    },
    #[cfg(feature = "object")]
    Target {
        name: "aws_config",
        reads: "the AWS environment and its shared config and credentials files",
        run: aws_config,
    },
    #[cfg(feature = "object")]
    Target {
        name: "redact",
        reads: "texts from an object store, cleaned of the secrets they may quote",
        run: redact,
    },
    #[cfg(feature = "object")]
    Target {
        name: "list_parts",
        reads: "an S3 server's ListParts answers (XML), read when --resume checks an upload",
        run: list_parts,
    },
    #[cfg(feature = "object")]
    Target {
        name: "checksums",
        reads: "an S3 server's part ids and checksums (x-amz-checksum-sha256) of an upload",
        run: checksums,
    },
    Target {
        name: "upload_record",
        reads: "the record of a resumable upload in a map's comments (--map onto an object)",
        run: upload_record,
    },
    #[cfg(feature = "nbd")]
    Target {
        name: "extents",
        reads: "an NBD server's block status replies",
        run: extents,
    },
    Target {
        name: "decompress",
        reads: "--decompress: the format's magic, then that format's decoder",
        run: decompress,
    },
    Target {
        name: "zstd",
        reads: "zstd streams through ddx's frame dispatcher and workers",
        run: zstd,
    },
    Target {
        name: "zstd_blocks",
        reads: "one zstd frame through the buffer-less block decoder (FFI)",
        run: zstd_blocks,
    },
    Target {
        name: "xz",
        reads: "xz streams through liblzma's threaded decoder",
        run: xz,
    },
    Target {
        name: "gzip",
        reads: "gzip members",
        run: gzip,
    },
    Target {
        name: "bzip2",
        reads: "bzip2 streams",
        run: bzip2,
    },
    Target {
        name: "lz4",
        reads: "lz4 frames, legacy frames and skippable frames",
        run: lz4,
    },
    Target {
        name: "kernel_texts",
        reads: "/proc and sysfs texts: mountinfo, swaps, meminfo, cgroups, PSI",
        run: kernel_texts,
    },
    Target {
        name: "partition_table",
        reads: "MBR (with its extended partition's chain) and GPT (with its backup)",
        run: partition_table,
    },
    Target {
        name: "ext",
        reads: "ext2/3/4 superblocks, group descriptors and block bitmaps (--used-only)",
        run: ext,
    },
    Target {
        name: "fat",
        reads: "FAT12/16/32 boot sectors and FATs (--used-only)",
        run: fat,
    },
    Target {
        name: "swap",
        reads: "Linux swap headers (--used-only)",
        run: swap,
    },
    Target {
        name: "xfs",
        reads: "XFS superblocks, logs and free-space trees (--used-only)",
        run: xfs,
    },
    Target {
        name: "ntfs",
        reads: "NTFS boot sectors, MFT records, $LogFile restart pages and $Bitmap (--used-only)",
        run: ntfs,
    },
    Target {
        name: "used_blocks",
        reads: "a whole disk as --used-only reads it: tables, file systems, the used set",
        run: used_blocks,
    },
    Target {
        name: "device_probe",
        reads: "what blkid, partx and dumpe2fs say a device holds (the guard)",
        run: device_probe,
    },
    Target {
        name: "scsi_sense",
        reads: "SCSI sense data (fixed and descriptor format) and a command's statuses",
        run: scsi_sense,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|target| target.name == name)
}

/// `data` cut at NUL bytes: the words of a command line (argv cannot
/// hold a NUL, so no word is lost).
fn words(data: &[u8]) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    if data.is_empty() {
        return Vec::new();
    }
    data.split(|&b| b == 0)
        .map(|word| std::ffi::OsStr::from_bytes(word).to_owned())
        .collect()
}

/// A message is one line: no newline or carriage return inside.
fn assert_one_line(what: &str, text: &str) {
    assert!(
        !text.contains(['\n', '\r']),
        "{what} is not one line: {text:?}"
    );
}
