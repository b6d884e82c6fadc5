//! casync indexes and chunk stores (`--store`, `--seed`, `--chunk-size`,
//! `ddx gc`), held to Debian's casync: its index of the same input and
//! sizes is ddx's, byte for byte; each extracts what the other made;
//! and the store's files, the devices' own write counters and the
//! indexes themselves (read with ddx's library) are the oracles for what
//! was stored, fetched and written.
//!
//! The disks are images (1 GiB for the round trips) with a GPT, a FAT32
//! and an ext4 holding files, made by sfdisk, mkfs.vfat, mtools and
//! mkfs.ext4 -d into sparse files (only their used blocks take room, and
//! runs of zeros are cheap to chunk). Stores are directories, a web
//! server's directory (rclone serve http) and S3 on the SeaweedFS cluster
//! (`rigs::cluster`), listed by rclone and read back by casync through
//! the cluster's own HTTP view of the bucket (its filer).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use ddx::casync::{chunk, ChunkId, Digest, Entry, Index};

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cluster::{self, Bucket};
use crate::rigs::cmd::operand;
use crate::rigs::fixture::{Ddx, Ran};
use crate::rigs::object::{free_port, HttpServer};
use crate::rigs::{must_run, LoopDevice, LoopOptions};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// casync, and what a disk image is made with.
const DISK_TOOLS: &[&str] = &["casync", "sfdisk", "mkfs.vfat", "mcopy", "mkfs.ext4"];

/// A disk image of `size` bytes at `dir/name`: GPT, p1 FAT32 of 64 MiB
/// and p2 ext4 filling the rest, each holding files seeded by `seed` (`variant`
/// changes one file's bytes and adds one, as a similar machine's disk
/// differs). Sparse: only the file systems' used blocks are written.
fn gpt_disk(dir: &Path, name: &str, size: u64, seed: u64, variant: u64) -> PathBuf {
    // The ext4's sectors: up to the backup GPT's 33 at the end, in MiB.
    let ext4_sectors = (size / 512 - 133_120 - 2048) / 2048 * 2048;
    let image = dir.join(name);
    let content = dir.join(format!("{name}.content"));
    std::fs::create_dir_all(content.join("etc")).unwrap();
    std::fs::write(content.join("base.bin"), pattern(seed, 6 << 20)).unwrap();
    std::fs::write(
        content.join("etc/numbers.txt"),
        (1..120_000u64)
            .map(|n| format!("{n}\n"))
            .collect::<String>(),
    )
    .unwrap();
    std::fs::write(
        content.join("etc/host.bin"),
        pattern(seed + 100 + variant, 700_000),
    )
    .unwrap();
    if variant > 0 {
        std::fs::write(
            content.join("extra.bin"),
            pattern(seed + 200 + variant, 900_000),
        )
        .unwrap();
    }
    let file = std::fs::File::create(&image).unwrap();
    file.set_len(size).unwrap();
    drop(file);
    let mut sfdisk = Command::new("sfdisk");
    sfdisk
        .args(["-q", "--no-reread", "--no-tell-kernel"])
        .arg(&image)
        .stdin(std::process::Stdio::piped());
    let mut child = sfdisk.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            format!(
                "label: gpt\n\
                 start=2048, size=131072, type=EBD0A0A2-B9E5-4433-87C0-68B6B72699C7\n\
                 start=133120, size={ext4_sectors}, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4\n"
            )
            .as_bytes(),
        )
        .unwrap();
    assert!(child.wait().unwrap().success(), "sfdisk");
    must_run(
        Command::new("mkfs.vfat")
            .args([
                "--offset=2048",
                "-F",
                "32",
                "-s",
                "1",
                "-S",
                "512",
                "-n",
                "BOOT",
            ])
            .arg(&image)
            .arg("65536"),
    );
    must_run(
        Command::new("mcopy")
            .arg("-i")
            .arg(format!("{}@@{}", image.display(), 2048 * 512))
            .arg(content.join("base.bin"))
            .arg(content.join("etc/host.bin"))
            .arg("::/"),
    );
    must_run(
        Command::new("mkfs.ext4")
            .args(["-q", "-F", "-E", &format!("offset={}", 133120 * 512), "-d"])
            .arg(&content)
            .arg(&image)
            .arg(format!("{}k", ext4_sectors / 2)),
    );
    image
}

fn read_index(path: &Path) -> Index {
    Index::parse(&std::fs::read(path).unwrap()).unwrap()
}

fn ids(index: &Index) -> HashSet<ChunkId> {
    index.chunks.iter().map(|c| c.id).collect()
}

/// The chunk files under a store directory, by name.
fn store_files(store: &Path) -> Vec<(String, u64)> {
    let mut files = Vec::new();
    let Ok(dirs) = std::fs::read_dir(store) else {
        return files;
    };
    for dir in dirs {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&dir).unwrap() {
            let file = file.unwrap();
            files.push((
                file.file_name().to_string_lossy().into_owned(),
                file.metadata().unwrap().len(),
            ));
        }
    }
    files.sort();
    files
}

fn casync(args: &[&str], paths: &[&Path]) {
    let out = Command::new("casync")
        .args(args)
        .args(paths)
        .output()
        .expect("casync");
    assert!(
        out.status.success(),
        "casync {args:?} {paths:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[track_caller]
fn same_file(a: &Path, b: &Path) {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert_eq!(
        x.len(),
        y.len(),
        "{} and {} differ in size",
        a.display(),
        b.display()
    );
    if let Some(at) = x.iter().zip(&y).position(|(p, q)| p != q) {
        panic!("{} and {} differ at byte {at}", a.display(), b.display());
    }
}

/// The line of `ran`'s stderr that starts with `prefix` (after "ddx: ").
#[track_caller]
fn said<'a>(ran: &'a Ran, prefix: &str) -> &'a str {
    ran.stderr
        .lines()
        .find_map(|l| l.strip_prefix("ddx: ").filter(|l| l.starts_with(prefix)))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in: {}", ran.stderr))
}

/// The number just before `word` in `line` ("412 were new" → 412).
#[track_caller]
fn count_before(line: &str, word: &str) -> u64 {
    let at = line
        .find(word)
        .unwrap_or_else(|| panic!("{word:?} not in {line:?}"));
    line[..at]
        .split_whitespace()
        .last()
        .and_then(|n| n.trim_start_matches('(').parse().ok())
        .unwrap_or_else(|| panic!("no number before {word:?} in {line:?}"))
}

#[test]
fn ddx_makes_the_index_casync_makes_byte_for_byte() {
    if !rigs::tools_or_skip(DISK_TOOLS) || !rigs::tools_or_skip(&["zstd"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let mut mixed = pattern(3, 3 << 20);
    mixed.extend(vec![0u8; 5 << 20]);
    mixed.extend(pattern(4, 700_001));
    mixed.extend((0..2_000_000u32).map(|i| (i / 4096 % 7) as u8));
    let inputs = [
        ("zeros", vec![0u8; 9 << 20]),
        ("random", pattern(5, (8 << 20) + 17)),
        ("mixed", mixed),
        ("tiny", b"shorter than any window".to_vec()),
        ("empty", Vec::new()),
    ];
    // ddx's --chunk-size, and casync's for the same sizes.
    let sizes: &[(&str, &str)] = &[
        ("", ""),
        ("16K", "16384"),
        ("4K:8K:40000", "4096:8192:40000"),
        ("64K:64K:64K", "65536:65536:65536"),
    ];
    for (name, data) in &inputs {
        let input = dir.join(name);
        std::fs::write(&input, data).unwrap();
        for (n, (ours, theirs)) in sizes.iter().enumerate() {
            let (ddx_store, casync_store) = (dir.join(format!("d{n}")), dir.join(format!("c{n}")));
            let ddx_index = dir.join(format!("{name}-{n}-ddx.caibx"));
            let casync_index = dir.join(format!("{name}-{n}-casync.caibx"));
            let mut ddx = Ddx::new()
                .arg(operand("if", &input))
                .arg(operand("of", &ddx_index))
                .arg(format!("--store={}", ddx_store.display()));
            if !ours.is_empty() {
                ddx = ddx.arg(format!("--chunk-size={ours}"));
            }
            ddx.succeeds();
            let mut args = vec![format!("--store={}", casync_store.display())];
            if !theirs.is_empty() {
                args.push(format!("--chunk-size={theirs}"));
            }
            let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
            args.insert(0, "make");
            casync(&args, &[&casync_index, &input]);
            assert_eq!(
                std::fs::read(&ddx_index).unwrap(),
                std::fs::read(&casync_index).unwrap(),
                "{name} with --chunk-size={ours}: the indexes differ"
            );
        }
    }
    // Every chunk of every index is in both stores, under the same name.
    for (n, size) in sizes.iter().enumerate() {
        let names = |store: &str| -> Vec<String> {
            store_files(&dir.join(format!("{store}{n}")))
                .into_iter()
                .map(|(name, _)| name)
                .collect()
        };
        assert_eq!(names("d"), names("c"), "the stores of sizes {size:?}");
    }

    // A disk image, raw and compressed (--decompress): the same index.
    let disk = gpt_disk(dir, "disk.img", GIB, 9, 0);
    let store = dir.join("disk-store");
    for (index, input, extra) in [
        ("disk-ddx.caibx", disk.clone(), None),
        (
            "disk-zst.caibx",
            rigs::images::packed(&disk, "zstd", "zst"),
            Some("--decompress"),
        ),
    ] {
        let mut ddx = Ddx::new()
            .arg(operand("if", &input))
            .arg(operand("of", &dir.join(index)))
            .arg(format!("--store={}", store.display()))
            .arg("bs=1M");
        if let Some(extra) = extra {
            ddx = ddx.arg(extra);
        }
        ddx.succeeds();
    }
    casync(
        &[
            "make",
            &format!("--store={}", dir.join("disk-casync").display()),
        ],
        &[&dir.join("disk-casync.caibx"), &disk],
    );
    let casync_index = std::fs::read(dir.join("disk-casync.caibx")).unwrap();
    assert_eq!(
        std::fs::read(dir.join("disk-ddx.caibx")).unwrap(),
        casync_index
    );
    assert_eq!(
        std::fs::read(dir.join("disk-zst.caibx")).unwrap(),
        casync_index
    );
}

#[test]
fn each_extracts_what_the_other_made_onto_files_a_tee_and_nbd() {
    if !rigs::tools_or_skip(DISK_TOOLS) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let disk = gpt_disk(dir, "disk.img", GIB, 11, 0);
    // ddx makes (its store the default beside the index); casync extracts.
    let made = Ddx::new()
        .arg(operand("if", &disk))
        .arg(operand("of", &dir.join("ddx.caibx")))
        .args(["--store", "bs=1M"])
        .succeeds();
    assert!(
        said(&made, "--store: the index names").contains("'"),
        "{}",
        made.stderr
    );
    let default_store = dir.join("default.castr");
    assert!(!store_files(&default_store).is_empty());
    casync(
        &["extract", &format!("--store={}", default_store.display())],
        &[&dir.join("ddx.caibx"), &dir.join("by-casync.img")],
    );
    same_file(&dir.join("by-casync.img"), &disk);

    // casync makes; ddx extracts onto two files at once, reading them back.
    let casync_store = dir.join("casync.castr");
    casync(
        &["make", &format!("--store={}", casync_store.display())],
        &[&dir.join("casync.caibx"), &disk],
    );
    let ran = Ddx::new()
        .arg(operand("if", &dir.join("casync.caibx")))
        .arg(operand("of", &dir.join("one.img")))
        .arg(format!("--tee={}", dir.join("two.img").display()))
        .arg(format!("--store={}", casync_store.display()))
        .args(["bs=4M", "--verify"])
        .succeeds();
    same_file(&dir.join("one.img"), &disk);
    same_file(&dir.join("two.img"), &disk);
    let chunks = read_index(&dir.join("casync.caibx")).chunks.len();
    assert_eq!(
        ran.stderr
            .matches(&format!("each of the index's {chunks} chunks as its id"))
            .count(),
        2,
        "{}",
        ran.stderr
    );

    // Onto an NBD export.
    if !rigs::tools_or_skip(&["nbdkit"]) {
        return;
    }
    let Some(server) = rigs::nbd::nbdkit(&["memory", "1G"]) else {
        return;
    };
    Ddx::new()
        .arg(operand("if", &dir.join("casync.caibx")))
        .arg(format!("of={}", server.uri()))
        .arg(format!("--store={}", casync_store.display()))
        .args(["bs=1M", "--verify"])
        .succeeds();
    Ddx::new()
        .arg(format!("if={}", server.uri()))
        .arg(operand("of", &dir.join("from-nbd.img")))
        .args(["bs=1M", "status=none"])
        .succeeds();
    same_file(&dir.join("from-nbd.img"), &disk);
}

/// Bytes written to a block device since it was attached, as the kernel
/// counts them (the seventh field of its stat: sectors written).
fn written_to(device: &LoopDevice) -> u64 {
    let name = device
        .path
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
    let sectors: u64 = stat.split_whitespace().nth(6).unwrap().parse().unwrap();
    sectors * 512
}

#[test]
fn an_update_in_place_fetches_the_new_chunks_and_writes_the_changed_blocks() {
    if !rigs::tools_or_skip(&["casync"]) {
        return;
    }
    if let Some(why) = LoopDevice::unavailable() {
        return rigs::skip(&why);
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // Release N: 64 MiB of data, some of it zeros; release N+1: 5% of
    // its 4 KiB blocks changed, here and there.
    let size = 64 * MIB as usize;
    let mut release = pattern(17, size / 2);
    release.extend(vec![0u8; size / 4]);
    release.extend(pattern(18, size / 4));
    let mut next = release.clone();
    let blocks = size / 4096;
    let changes = pattern(19, blocks / 20 * 8);
    let mut changed = HashSet::new();
    for pick in changes.chunks(8) {
        let block = (u64::from_le_bytes(pick.try_into().unwrap()) as usize) % blocks;
        if changed.insert(block) {
            let fresh = pattern(block as u64 + 1000, 4096);
            next[block * 4096..(block + 1) * 4096].copy_from_slice(&fresh);
        }
    }
    let differ = (0..blocks)
        .filter(|b| next[b * 4096..(b + 1) * 4096] != release[b * 4096..(b + 1) * 4096])
        .count() as u64
        * 4096;
    let (old_image, new_image) = (dir.join("release-1.img"), dir.join("release-2.img"));
    std::fs::write(&old_image, &release).unwrap();
    std::fs::write(&new_image, &next).unwrap();
    let served = dir.join("www");
    std::fs::create_dir(&served).unwrap();
    for (image, index) in [
        (&old_image, "release-1.caibx"),
        (&new_image, "release-2.caibx"),
    ] {
        Ddx::new()
            .arg(operand("if", image))
            .arg(operand("of", &served.join(index)))
            .arg(format!("--store={}", served.join("store").display()))
            .arg("bs=1M")
            .succeeds();
    }
    let Some(http) = rigs::or_skip(HttpServer::start(&served, None)) else {
        return;
    };
    // The card holds release N.
    let card_file = dir.join("card");
    std::fs::write(&card_file, &release).unwrap();
    let Some(card) = rigs::or_skip(LoopDevice::attach(&card_file, LoopOptions::default())) else {
        return;
    };
    let before = written_to(&card);
    let ran = Ddx::new()
        .arg(format!("if={}", http.url("release-2.caibx")))
        .arg(format!("of={}", card.name()))
        .arg(format!("--seed={}", card.name()))
        .arg(format!("--store={}", http.url("store")))
        .args(["bs=4M", "--verify", "--force"])
        .env("HOME", "/nonexistent")
        .succeeds();
    let written = written_to(&card) - before;
    assert_eq!(std::fs::read(&card.path).unwrap(), next);

    // Fetched: the chunks release N lacks, each once, and no others (a run
    // of zeros is made, not fetched; a few the card holds in place though
    // release N was cut elsewhere near a change).
    let (old, new) = (
        read_index(&served.join("release-1.caibx")),
        read_index(&served.join("release-2.caibx")),
    );
    let zeros = Digest::Sha512_256.id(&vec![0u8; new.sizes.max as usize]);
    let lacked: HashSet<ChunkId> = ids(&new)
        .difference(&ids(&old))
        .copied()
        .filter(|id| *id != zeros)
        .collect();
    let line = said(&ran, "--store: ");
    let fetched = count_before(line, "fetched");
    let lacking = lacked.len() as u64;
    assert!(
        fetched <= lacking && fetched >= lacking * 9 / 10,
        "{lacking} lacked: {line}"
    );
    assert!(count_before(line, "in place") > 0, "{line}");
    // Written: the blocks that differ, and the first MiB twice (wiped
    // first, written last: the safe order), as the device counts.
    assert!(
        written <= differ * 6 / 5 + 2 * MIB,
        "{written} bytes written for {differ} that differ: {}",
        ran.stderr
    );
    assert!(written >= differ, "{written} < {differ}");
    assert!(
        ran.stderr.contains("read back, each of the index's"),
        "{}",
        ran.stderr
    );
}

#[test]
fn bad_indexes_chunks_and_stores_are_one_line_naming_them() {
    if !rigs::tools_or_skip(&["casync"]) {
        return;
    }
    if let Some(why) = LoopDevice::unavailable() {
        return rigs::skip(&why);
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let blob = pattern(23, 24 * MIB as usize);
    let image = dir.join("blob.img");
    std::fs::write(&image, &blob).unwrap();
    let store = dir.join("store");
    let index = dir.join("blob.caibx");
    Ddx::new()
        .arg(operand("if", &image))
        .arg(operand("of", &index))
        .arg(format!("--store={}", store.display()))
        .succeeds();
    let parsed = read_index(&index);
    let bytes = std::fs::read(&index).unwrap();
    // The device, filled with something else; checked untouched after each
    // refusal.
    let held = pattern(29, 24 * MIB as usize);
    let device_file = dir.join("device");
    std::fs::write(&device_file, &held).unwrap();
    let Some(device) = rigs::or_skip(LoopDevice::attach(&device_file, LoopOptions::default()))
    else {
        return;
    };
    let small_file = dir.join("small");
    std::fs::write(&small_file, vec![7u8; 16 * MIB as usize]).unwrap();
    let Some(small) = rigs::or_skip(LoopDevice::attach(&small_file, LoopOptions::default())) else {
        return;
    };
    let extract = |index: &Path, store: &str, output: &LoopDevice| {
        Ddx::new()
            .arg(operand("if", index))
            .arg(format!("of={}", output.name()))
            .arg(format!("--store={store}"))
            .args(["bs=1M", "--force"])
            .env("HOME", "/nonexistent")
            .env("AWS_MAX_ATTEMPTS", "1")
            .fails()
    };
    let error_line = |ran: &Ran| -> String {
        let lines: Vec<&str> = ran
            .stderr
            .lines()
            .filter(|l| {
                !l.contains("records in") && !l.contains("records out") && !l.contains("copied")
            })
            .collect();
        assert_eq!(lines.len(), 1, "one line: {}", ran.stderr);
        lines[0].to_owned()
    };
    let store_arg = store.display().to_string();

    // Before anything is written: a truncated index, a corrupt one, a store
    // that does not answer, an index of another size than the device.
    let cut = dir.join("cut.caibx");
    std::fs::write(&cut, &bytes[..bytes.len() - 50]).unwrap();
    let line = error_line(&extract(&cut, &store_arg, &device));
    assert!(
        line.contains("cut short") && line.contains("byte"),
        "{line}"
    );
    let mut damaged = bytes.clone();
    let at = 64 + 40 * 3;
    damaged[at..at + 8].copy_from_slice(&1u64.to_le_bytes());
    let corrupt = dir.join("corrupt.caibx");
    std::fs::write(&corrupt, &damaged).unwrap();
    let line = error_line(&extract(&corrupt, &store_arg, &device));
    assert!(line.contains(&format!("chunk 3 (at byte {at})")), "{line}");
    let dead = format!("http://127.0.0.1:{}/store", free_port());
    let line = error_line(&extract(&index, &dead, &device));
    assert!(
        line.contains("does not answer") && line.contains("127.0.0.1"),
        "{line}"
    );
    let line = error_line(&extract(&index, &store_arg, &small));
    assert!(
        line.contains(&format!("the image is {} bytes", blob.len())),
        "{line}"
    );
    assert_eq!(
        std::fs::read(&device.path).unwrap(),
        held,
        "the device was written"
    );
    assert_eq!(
        std::fs::read(&small.path).unwrap(),
        vec![7u8; 16 * MIB as usize]
    );

    // During the copy: a chunk missing, a chunk that is another's, a
    // chunk that is not a chunk. Each named with its blob offset; the
    // device is left looking blank (its first MiB wiped, written last).
    let late = parsed.chunks.len() - 3;
    let (start, _) = parsed.span(late);
    let id = parsed.chunks[late].id;
    let file = store.join(id.store_path());
    let kept = std::fs::read(&file).unwrap();
    // Another chunk of the same size: a file that decodes, to the wrong
    // bytes.
    let (_, end) = parsed.span(late);
    let other = chunk::encode(&pattern(99, (end - start) as usize), 3);
    for (damage, words) in [
        (None, "is not in the store"),
        (Some(other), "is not that chunk: its bytes' sha512-256 is"),
        (Some(b"not a chunk".to_vec()), "cannot be read"),
    ] {
        let _ = std::fs::remove_file(&file);
        if let Some(bytes) = damage {
            std::fs::write(&file, bytes).unwrap();
        }
        let line = error_line(&extract(&index, &store_arg, &device));
        assert!(
            line.contains(&format!("chunk {late} at blob offset {start} ({id})"))
                && line.contains(words)
                && line.contains(&store_arg),
            "{line}"
        );
        let written = std::fs::read(&device.path).unwrap();
        assert!(
            written[..MIB as usize].iter().all(|&b| b == 0),
            "the first MiB"
        );
    }
    std::fs::remove_file(&file).unwrap();
    std::fs::write(&file, kept).unwrap();
}

/// Where a test's chunks go: a directory, or a prefix of a bucket on the
/// cluster.
enum TestStore<'a> {
    Directory(PathBuf),
    Bucket(&'a Bucket<'static>, String),
}

impl TestStore<'_> {
    fn url(&self) -> String {
        match self {
            TestStore::Directory(root) => root.display().to_string(),
            TestStore::Bucket(bucket, prefix) => bucket.url(prefix),
        }
    }

    /// The same store as casync reads it: the directory, or the cluster's
    /// HTTP view of the prefix.
    fn for_casync(&self) -> String {
        match self {
            TestStore::Directory(root) => root.display().to_string(),
            TestStore::Bucket(bucket, prefix) => bucket.http_url(prefix),
        }
    }

    /// A command with the settings that reach the store.
    fn command(&self) -> Command {
        let mut cmd = crate::rigs::cmd::ddx();
        cmd.env("HOME", "/nonexistent");
        if let TestStore::Bucket(bucket, _) = self {
            cmd.envs(bucket.env());
        }
        cmd
    }

    /// Every file of the store (its path in the store and its bytes); for
    /// a bucket, copied out by rclone.
    fn contents(&self, scratch: &Path) -> Vec<(String, Vec<u8>)> {
        let root = match self {
            TestStore::Directory(root) => root.clone(),
            TestStore::Bucket(bucket, prefix) => {
                let copy = scratch.join(format!("copy-of-{}", prefix.replace('/', "-")));
                let _ = std::fs::remove_dir_all(&copy);
                let out = rclone(bucket)
                    .arg("copy")
                    .arg(format!(":s3:{}/{prefix}", bucket.name))
                    .arg(&copy)
                    .output()
                    .expect("rclone");
                assert!(
                    out.status.success(),
                    "rclone copy: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                copy
            }
        };
        let mut files = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if let Ok(bytes) = std::fs::read(&path) {
                    let name = path.strip_prefix(&root).unwrap().display().to_string();
                    files.push((name, bytes));
                }
            }
        }
        files.sort();
        files
    }

    /// How many chunk files the store holds so far.
    fn count(&self) -> usize {
        match self {
            TestStore::Directory(root) => store_files(root)
                .iter()
                .filter(|(n, _)| n.ends_with(".cacnk"))
                .count(),
            TestStore::Bucket(bucket, prefix) => listed(bucket, prefix).len(),
        }
    }
}

/// Every chunk file in `files` is whole and holds the chunk it is named
/// after: `xxxx/<id>.cacnk`, one zstd frame (decoded by the zstd crate)
/// whose bytes' SHA-512/256 is the id. Files of other names are returned.
#[track_caller]
fn chunks_are_whole(files: &[(String, Vec<u8>)]) -> (HashSet<String>, Vec<String>) {
    let mut chunks = HashSet::new();
    let mut others = Vec::new();
    for (name, bytes) in files {
        let Some(id) = name.strip_suffix(".cacnk") else {
            others.push(name.clone());
            continue;
        };
        let (prefix, id) = id.split_once('/').expect("a chunk is in its directory");
        assert_eq!(prefix, &id[..4], "{name}");
        let data = zstd::stream::decode_all(&bytes[..])
            .unwrap_or_else(|e| panic!("{name} is not a whole chunk: {e}"));
        assert_eq!(
            Digest::Sha512_256.id(&data).to_string(),
            id,
            "{name} holds another chunk"
        );
        chunks.insert(name.clone());
    }
    (chunks, others)
}

/// The names an index's chunks are stored under.
fn stored_names(index: &Index) -> HashSet<String> {
    ids(index)
        .into_iter()
        .map(|id| format!("{}/{id}.cacnk", &id.to_string()[..4]))
        .collect()
}

/// Several writers adding to one store at once, a directory and a bucket
/// of the cluster: the store holds each chunk any of them named, whole
/// under its name, and casync extracts every index from it.
#[test]
fn several_writers_add_to_one_store_at_once() {
    if !rigs::tools_or_skip(&["casync", "rclone"]) {
        return;
    }
    let Some(bucket) = cluster::bucket_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let base = pattern(31, 12 * MIB as usize);
    let mut images = Vec::new();
    for n in 0..4u64 {
        let mut data = base.clone();
        let at = (n as usize + 1) * 2 * MIB as usize;
        data[at..at + 300_000].copy_from_slice(&pattern(40 + n, 300_000));
        let image = dir.join(format!("{n}.img"));
        std::fs::write(&image, &data).unwrap();
        images.push(image);
    }
    for store in [
        TestStore::Directory(dir.join("store")),
        TestStore::Bucket(&bucket, "writers/store".into()),
    ] {
        let index = |n: usize| dir.join(format!("{n}.caibx"));
        let children: Vec<_> = images
            .iter()
            .enumerate()
            .map(|(n, image)| {
                store
                    .command()
                    .arg(operand("if", image))
                    .arg(operand("of", &index(n)))
                    .arg(format!("--store={}", store.url()))
                    .arg("status=none")
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut child in children {
            assert!(child.wait().unwrap().success(), "{}", store.url());
        }
        let (chunks, others) = chunks_are_whole(&store.contents(dir));
        assert_eq!(others, Vec::<String>::new(), "{}", store.url());
        let named: HashSet<String> = (0..images.len())
            .flat_map(|n| stored_names(&read_index(&index(n))))
            .collect();
        assert_eq!(chunks, named, "{}", store.url());
        for (n, image) in images.iter().enumerate() {
            let out = dir.join(format!("{n}.out"));
            let _ = std::fs::remove_file(&out);
            casync(
                &["extract", &format!("--store={}", store.for_casync())],
                &[&index(n), &out],
            );
            same_file(&out, image);
        }
    }
}

/// A writer killed while it stores chunks leaves nothing under a chunk's
/// name but that chunk, whole, and no index; the next writer completes
/// the store, and casync extracts from it.
#[test]
fn a_writer_killed_midway_leaves_only_whole_chunks() {
    if !rigs::tools_or_skip(&["casync", "rclone"]) {
        return;
    }
    let Some(bucket) = cluster::bucket_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let image = dir.join("big.img");
    std::fs::write(&image, pattern(71, 192 * MIB as usize)).unwrap();
    for store in [
        TestStore::Directory(dir.join("store")),
        TestStore::Bucket(&bucket, "killed/store".into()),
    ] {
        let index = dir.join("big.caibx");
        let make = || {
            let mut cmd = store.command();
            cmd.arg(operand("if", &image))
                .arg(operand("of", &index))
                .arg(format!("--store={}", store.url()))
                .arg("status=none");
            cmd
        };
        let mut child = make().spawn().unwrap();
        let started = std::time::Instant::now();
        while store.count() < 40 {
            assert!(
                child.try_wait().unwrap().is_none(),
                "{}: the writer finished before it was killed",
                store.url()
            );
            assert!(started.elapsed().as_secs() < 120, "{}", store.url());
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        child.kill().unwrap();
        assert!(!child.wait().unwrap().success());
        assert!(!index.exists(), "an index of a store not complete");
        let (chunks, others) = chunks_are_whole(&store.contents(dir));
        assert!(!chunks.is_empty());
        // A directory may keep a killed writer's own temporary files, never
        // under a chunk's name; S3 keeps nothing but whole objects.
        match store {
            TestStore::Directory(_) => {
                assert!(others.iter().all(|n| n.ends_with(".tmp")), "{others:?}")
            }
            TestStore::Bucket(..) => assert_eq!(others, Vec::<String>::new()),
        }
        let status = make().status().unwrap();
        assert!(status.success(), "{}", store.url());
        let (chunks, _) = chunks_are_whole(&store.contents(dir));
        assert_eq!(chunks, stored_names(&read_index(&index)));
        let out = dir.join("big.out");
        let _ = std::fs::remove_file(&out);
        casync(
            &["extract", &format!("--store={}", store.for_casync())],
            &[&index, &out],
        );
        same_file(&out, &image);
        std::fs::remove_file(&out).unwrap();
        std::fs::remove_file(&index).unwrap();
    }
}

/// ddx pointed at the cluster of `bucket`, with no shared AWS files.
fn ddx_s3(bucket: &Bucket) -> Ddx {
    Ddx::new()
        .env("HOME", "/nonexistent")
        .env("AWS_MAX_ATTEMPTS", "2")
        .envs(bucket.env())
}

/// rclone pointed at the cluster of `bucket`, with no configuration of
/// its own (nor the machine's CA bundle: the gateway is plain HTTP).
fn rclone(bucket: &Bucket) -> Command {
    let mut cmd = Command::new("rclone");
    cmd.args(["--s3-provider", "Other", "--s3-region", "us-east-1"])
        .arg(format!("--s3-endpoint={}", bucket.endpoint()))
        .arg(format!("--s3-access-key-id={}", rigs::object::ACCESS_KEY))
        .arg(format!(
            "--s3-secret-access-key={}",
            rigs::object::SECRET_KEY
        ))
        .env("RCLONE_CONFIG", "/nonexistent")
        .env_remove("AWS_CA_BUNDLE")
        .stdin(std::process::Stdio::null());
    cmd
}

/// The objects under `prefix` of `bucket` with their sizes, relative to
/// it, as rclone (an S3 client of its own) lists them through the
/// cluster's gateway.
fn listed(bucket: &Bucket, prefix: &str) -> Vec<(String, u64)> {
    let out = rclone(bucket)
        .args(["lsf", "-R", "--files-only", "--fast-list", "--format", "ps"])
        .args(["--separator", "\t"])
        .arg(format!(":s3:{}/{prefix}", bucket.name))
        .output()
        .expect("rclone");
    assert!(
        out.status.success(),
        "rclone lsf: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut files: Vec<(String, u64)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let (path, size) = line.split_once('\t').expect("path and size");
            (path.to_owned(), size.parse().expect("a size"))
        })
        .collect();
    files.sort();
    files
}

/// An object of `bucket` deleted by rclone through the gateway.
fn delete_object(bucket: &Bucket, key: &str) {
    let out = rclone(bucket)
        .arg("deletefile")
        .arg(format!(":s3:{}/{key}", bucket.name))
        .output()
        .expect("rclone");
    assert!(
        out.status.success(),
        "rclone deletefile: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!bucket.has(key), "{key} is still there");
}

/// The fleet's bar: three used-only backups of similar disks into one S3
/// store on the SeaweedFS cluster. casync reads no S3: it restores each
/// backup from the same store through the cluster's own HTTP view of it
/// (the filer serves every object of a bucket over plain HTTP), so that
/// both read the very objects ddx stored.
#[test]
fn a_fleet_backs_up_into_one_s3_store_and_gc_keeps_what_the_indexes_name() {
    if !rigs::tools_or_skip(DISK_TOOLS) || !rigs::tools_or_skip(&["rclone"]) {
        return;
    }
    let Some(bucket) = cluster::bucket_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let store_url = bucket.url("fleet/store");
    let index_url = |host: u64| bucket.url(&format!("fleet/host{host}.caibx"));
    let mut references = Vec::new();
    let mut added = Vec::new();
    for host in 1..=3u64 {
        let disk = gpt_disk(dir, &format!("host{host}.img"), 256 * MIB, 50, host);
        let ran = ddx_s3(&bucket)
            .arg(operand("if", &disk))
            .arg(format!("of={}", index_url(host)))
            .arg(format!("--store={store_url}"))
            .args(["--used-only", "bs=1M"])
            .succeeds();
        added.push(count_before(
            said(&ran, "--store: the index names"),
            "were new",
        ));
        said(&ran, &format!("--store: '{store_url}' holds"));
        // What a used-only copy of the disk holds: the oracle of its restore.
        let reference = dir.join(format!("host{host}.used"));
        Ddx::new()
            .arg(operand("if", &disk))
            .arg(operand("of", &reference))
            .args(["--used-only", "bs=1M", "status=none"])
            .succeeds();
        std::fs::remove_file(&disk).unwrap();
        references.push(reference);
    }
    // The later backups added far less than the first.
    assert!(
        added[1] * 3 < added[0] && added[2] * 3 < added[0],
        "{added:?}"
    );
    // The indexes as the cluster holds them.
    let index_file = |host: u64| -> PathBuf {
        let file = dir.join(format!("host{host}.caibx"));
        let bytes = bucket
            .object(&format!("fleet/host{host}.caibx"))
            .unwrap_or_else(|| panic!("the cluster has no index of host{host}"));
        std::fs::write(&file, bytes).unwrap();
        file
    };
    let named = |hosts: &[u64]| -> HashSet<String> {
        hosts
            .iter()
            .flat_map(|&h| ids(&read_index(&index_file(h))))
            .map(|id| format!("{}/{id}.cacnk", &id.to_string()[..4]))
            .collect()
    };
    // The store holds each chunk some index names, once, and nothing else;
    // its bytes are at most 1.1 times those of one store of the unique
    // chunks, as casync makes it from the same three disks' used blocks.
    let held = listed(&bucket, "fleet/store");
    let names: HashSet<String> = held.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(names, named(&[1, 2, 3]));
    let casync_store = dir.join("casync.castr");
    for (n, reference) in references.iter().enumerate() {
        casync(
            &["make", &format!("--store={}", casync_store.display())],
            &[&dir.join(format!("casync-{n}.caibx")), reference],
        );
        assert_eq!(
            std::fs::read(dir.join(format!("casync-{n}.caibx"))).unwrap(),
            std::fs::read(index_file(n as u64 + 1)).unwrap(),
            "casync's index of host{} is not ddx's",
            n + 1
        );
    }
    let unique: u64 = store_files(&casync_store).iter().map(|(_, s)| s).sum();
    let stored: u64 = held.iter().map(|(_, s)| s).sum();
    assert!(
        stored * 10 <= unique * 11,
        "the store holds {stored} bytes for {unique} of unique chunks"
    );
    let filer_store = bucket.http_url("fleet/store");
    let restore = |host: u64, reference: &Path| {
        let out = dir.join(format!("restored-{host}"));
        let _ = std::fs::remove_file(&out);
        ddx_s3(&bucket)
            .arg(format!("if={}", index_url(host)))
            .arg(operand("of", &out))
            .arg(format!("--store={store_url}"))
            .args(["bs=1M", "status=none"])
            .succeeds();
        same_file(&out, reference);
        let by_casync = dir.join(format!("casync-{host}"));
        let _ = std::fs::remove_file(&by_casync);
        casync(
            &["extract", &format!("--store={filer_store}")],
            &[&index_file(host), &by_casync],
        );
        same_file(&by_casync, reference);
        std::fs::remove_file(&out).unwrap();
        std::fs::remove_file(&by_casync).unwrap();
    };
    for host in 1..=3 {
        restore(host, &references[host as usize - 1]);
    }
    // host2 is retired: its index goes, and gc removes what only it named.
    let only_host2 = named(&[2]).difference(&named(&[1, 3])).count();
    assert!(only_host2 > 0);
    delete_object(&bucket, "fleet/host2.caibx");
    let gc = ddx_s3(&bucket)
        .args(["gc", &format!("--store={store_url}"), "--min-age=0"])
        .args([index_url(1), index_url(3)])
        .succeeds();
    assert!(
        gc.stderr.contains(&format!("removed {only_host2} chunks")),
        "{only_host2}: {}",
        gc.stderr
    );
    let held: HashSet<String> = listed(&bucket, "fleet/store")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(held, named(&[1, 3]));
    restore(1, &references[0]);
    restore(3, &references[2]);
}

#[test]
fn what_cannot_make_or_extract_an_index_is_refused_before_anything_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let input = dir.join("in.img");
    std::fs::write(&input, pattern(61, 100_000)).unwrap();
    let index = dir.join("in.caibx");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                operand("if", &input),
                operand("of", &dir.join("out.img")),
                "--store".into(),
            ],
            "needs an end named as a casync blob index",
        ),
        (
            vec![
                operand("if", &index),
                operand("of", &dir.join("b.caibx")),
                "--store".into(),
            ],
            "both named as casync indexes",
        ),
        (
            vec![
                operand("if", &input),
                operand("of", &index),
                format!("--seed={}", input.display()),
            ],
            "--seed is for extracting an index",
        ),
        (
            vec![
                operand("if", &index),
                operand("of", &input),
                "--chunk-size=16K".into(),
            ],
            "--chunk-size is for making an index",
        ),
        (
            vec![
                operand("if", &index),
                operand("of", &input),
                "--store".into(),
                "seek=1".into(),
            ],
            "cannot be combined with seek=",
        ),
        (
            vec![
                operand("if", &input),
                operand("of", &index),
                "--store".into(),
                "--verify".into(),
            ],
            "cannot be combined with --verify",
        ),
        (
            vec![
                operand("if", &input),
                operand("of", &index),
                "--chunk-size=8:4:2".into(),
            ],
            "invalid argument '8:4:2' for '--chunk-size'",
        ),
        (
            vec![
                operand("if", &input),
                operand("of", &index),
                "--store=http://127.0.0.1:9/s".into(),
            ],
            "can be read, not written",
        ),
    ];
    for (args, words) in cases {
        let ran = Ddx::new().args(&args).fails();
        assert!(ran.stderr.contains(words), "{args:?}: {}", ran.stderr);
        assert_eq!(
            ran.stderr.lines().count(),
            if words.starts_with("invalid") { 2 } else { 1 }
        );
        assert!(!dir.join("out.img").exists() && !index.exists(), "{args:?}");
        assert!(!dir.join("default.castr").exists(), "{args:?}");
    }
    // An index made beside itself with no store there names the store.
    let one = Entry {
        end: 10,
        id: Digest::Sha512_256.id(&[1; 10]),
    };
    std::fs::write(
        &index,
        Index::new(Digest::Sha512_256, Default::default(), vec![one]).to_bytes(),
    )
    .unwrap();
    let ran = Ddx::new()
        .arg(operand("if", &index))
        .arg(operand("of", &dir.join("out.img")))
        .arg("--store")
        .fails();
    assert!(ran.stderr.contains("default.castr"), "{}", ran.stderr);
    assert!(!dir.join("out.img").exists());
}

/// A blob of `len` bytes, its index and its store, made by casync (so that
/// what ddx extracts is none of its own making).
fn casync_made(dir: &Path, name: &str, blob: &[u8]) -> (PathBuf, PathBuf) {
    let image = dir.join(format!("{name}.img"));
    std::fs::write(&image, blob).unwrap();
    // The index beside its blob, named as it with .caibx added: how
    // --seed=INDEX finds the blob.
    let (index, store) = (
        dir.join(format!("{name}.img.caibx")),
        dir.join(format!("{name}.castr")),
    );
    casync(
        &["make", &format!("--store={}", store.display())],
        &[&index, &image],
    );
    (index, store)
}

/// Extracting onto devices is a copy like every other: the guard refuses
/// a mounted one before anything is read or written, --tee writes several
/// devices at once, --verify reads each back against the index, and the
/// progress records count the blob's bytes against its size.
#[test]
fn extracting_onto_devices_keeps_the_guard_the_tee_verify_and_progress() {
    if !rigs::tools_or_skip(&["casync", "mkfs.ext4"]) {
        return;
    }
    if let Some(why) = LoopDevice::unavailable() {
        return rigs::skip(&why);
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let size = 20 * MIB as usize;
    let mut blob = pattern(81, size / 2);
    blob.extend(vec![0u8; size / 4]);
    blob.extend(pattern(82, size / 4));
    let (index, store) = casync_made(dir, "blob", &blob);
    let extract = |of: &str| {
        Ddx::new()
            .arg(operand("if", &index))
            .arg(format!("of={of}"))
            .arg(format!("--store={}", store.display()))
            .arg("bs=1M")
    };

    // A mounted file system: refused in one line, the device untouched.
    let Some(mounted) = rigs::or_skip(rigs::MountedFs::new("ext4", 32 * MIB)) else {
        return;
    };
    std::fs::write(mounted.root.join("precious.txt"), b"do not destroy\n").unwrap();
    must_run(&mut Command::new("sync"));
    let device = mounted.device().name();
    let refused = extract(&device).fails();
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
    assert!(
        refused.stderr.starts_with("ddx: refusing to ")
            && refused.stderr.contains(&format!("'{device}'"))
            && refused.stderr.contains("mounted on"),
        "{}",
        refused.stderr
    );
    let refused = extract(&format!("{}/x", dir.display()))
        .arg(format!("--tee={device}"))
        .fails();
    assert!(refused.stderr.contains("mounted on"), "{}", refused.stderr);
    assert!(!dir.join("x").exists());
    // The file system's own background writes go on; the blob went nowhere.
    assert_eq!(
        std::fs::read(mounted.root.join("precious.txt")).unwrap(),
        b"do not destroy\n"
    );
    let held = std::fs::read(&mounted.device().path).unwrap();
    assert!(
        !held.windows(4096).step_by(4096).any(|b| b == &blob[..4096]),
        "the blob's first block is on the mounted device"
    );
    drop(mounted);

    // Two free devices at once, read back, with progress records.
    let mut devices = Vec::new();
    for n in 0..2 {
        let file = dir.join(format!("device{n}"));
        std::fs::write(&file, pattern(90 + n, size)).unwrap();
        let Some(device) = rigs::or_skip(LoopDevice::attach(&file, LoopOptions::default())) else {
            return;
        };
        devices.push(device);
    }
    let ran = extract(&devices[0].name())
        .arg(format!("--tee={}", devices[1].name()))
        .args(["--verify", "--progress-fd=2"])
        .succeeds();
    for device in &devices {
        assert!(
            std::fs::read(&device.path).unwrap() == blob,
            "{} does not hold the blob",
            device.name()
        );
    }
    let chunks = read_index(&index).chunks.len();
    assert_eq!(
        ran.stderr
            .matches(&format!("each of the index's {chunks} chunks as its id"))
            .count(),
        2,
        "{}",
        ran.stderr
    );
    let last: serde_json::Value = ran
        .stderr
        .lines()
        .rfind(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap_or_else(|| panic!("no progress record: {}", ran.stderr));
    assert_eq!(last["done"], true, "{last}");
    assert_eq!(last["bytes"], size as u64, "{last}");
    assert_eq!(last["total"], size as u64, "{last}");
}

/// Seeds other than the output: an earlier image (a chunk at its own
/// offset) and another index with its blob beside it (a chunk wherever
/// that index puts it). What a seed holds is not fetched: the store here
/// lacks every chunk the seeds hold, and the extract succeeds only with
/// them.
#[test]
fn an_earlier_image_and_another_index_are_seeds() {
    if !rigs::tools_or_skip(&["casync"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    // Release N; release N+1 has 1 MiB new at the front, shifting the rest
    // (an image seed no longer holds it at its offsets; an indexed one does).
    let old = pattern(101, 12 * MIB as usize);
    let mut new = pattern(102, MIB as usize);
    new.extend(&old[..11 * MIB as usize]);
    let (old_index, _) = casync_made(dir, "old", &old);
    let (new_index, store) = casync_made(dir, "new", &new);
    let (old_parsed, new_parsed) = (read_index(&old_index), read_index(&new_index));
    let shared: HashSet<ChunkId> = ids(&new_parsed)
        .intersection(&ids(&old_parsed))
        .copied()
        .collect();
    assert!(
        shared.len() * 2 > ids(&new_parsed).len(),
        "{}",
        shared.len()
    );
    for id in &shared {
        std::fs::remove_file(store.join(id.store_path())).unwrap();
    }
    let extract = |seed: &Path| {
        let out = dir.join("out.img");
        let _ = std::fs::remove_file(&out);
        let mut ddx = Ddx::new()
            .arg(operand("if", &new_index))
            .arg(operand("of", &out))
            .arg(format!("--store={}", store.display()))
            .arg("bs=1M");
        if seed != Path::new("") {
            ddx = ddx.arg(format!("--seed={}", seed.display()));
        }
        (ddx, out)
    };
    // No seed: the store lacks chunks.
    let (ddx, out) = extract(Path::new(""));
    let failed = ddx.fails();
    assert!(
        failed.stderr.contains("is not in the store"),
        "{}",
        failed.stderr
    );
    // The index of release N, its blob (old.img) beside it.
    let (ddx, out_path) = extract(&old_index);
    let ran = ddx.succeeds();
    same_file(&out_path, &dir.join("new.img"));
    let line = said(&ran, "--store: ");
    assert_eq!(
        count_before(line, "from seeds") as usize,
        new_parsed
            .chunks
            .iter()
            .filter(|c| shared.contains(&c.id))
            .count(),
        "{line}"
    );
    // An image at the same offsets: release N+1 with its first MiB changed
    // again holds every chunk after the first cut past it where they are.
    let mut next = new.clone();
    next[..4096].copy_from_slice(&pattern(103, 4096));
    let (next_index, next_store) = casync_made(dir, "next", &next);
    let next_parsed = read_index(&next_index);
    let in_new: HashSet<ChunkId> = ids(&next_parsed)
        .intersection(&ids(&new_parsed))
        .copied()
        .collect();
    assert!(!in_new.is_empty());
    for id in &in_new {
        std::fs::remove_file(next_store.join(id.store_path())).unwrap();
    }
    let ran = Ddx::new()
        .arg(operand("if", &next_index))
        .arg(operand("of", &out))
        .arg(format!("--store={}", next_store.display()))
        .arg(format!("--seed={}", dir.join("new.img").display()))
        .arg("bs=1M")
        .succeeds();
    same_file(&out, &dir.join("next.img"));
    let line = said(&ran, "--store: ");
    assert!(count_before(line, "from seeds") > 0, "{line}");
}
