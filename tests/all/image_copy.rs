//! The image options through the real binary: `--decompress`
//! held to GNU dd on the decompressed file (bytes and statistics), what
//! `--compress` writes read back by the zstd, xz and gzip tools, `--bmap`
//! against `bmaptool copy` on loop devices the test attaches, the maps
//! `--bmap-create` writes accepted by `bmaptool copy`, `--tee` with one
//! output that fills up, and every refusal: one line, exit 1, nothing
//! created.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::rigs;
use crate::rigs::cmd::gnu_dd;
use crate::rigs::fixture::{statistics, Ddx};

fn arg(key: &str, path: &Path) -> String {
    rigs::cmd::operand(key, path)
}

/// Bytes that compress somewhat and have runs of zeros, as a disk has.
fn data(len: usize) -> Vec<u8> {
    let mut out = rigs::bytes::pattern(7, len);
    for (n, chunk) in out.chunks_mut(100_000).enumerate() {
        if n % 3 == 1 {
            chunk.fill(0);
        }
    }
    out
}

/// `dir/raw`: `len` bytes of [`data`].
fn raw_file(dir: &Path, len: usize) -> PathBuf {
    let raw = dir.join("raw");
    std::fs::write(&raw, data(len)).unwrap();
    raw
}

/// `len` bytes of [`data`] in a fresh directory, compressed by zstd:
/// (the directory, the zstd file); None after skipping without zstd.
fn zstd_packed(len: usize) -> Option<(tempfile::TempDir, PathBuf)> {
    if !rigs::tools_or_skip(&["zstd"]) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let raw = raw_file(dir.path(), len);
    let packed = rigs::images::packed(&raw, "zstd", "zst");
    Some((dir, packed))
}

#[test]
fn decompressed_input_copies_as_gnu_dd_copies_the_decompressed_file() {
    if !rigs::tools_or_skip(&["zstd", "xz", "gzip", "bzip2"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let raw = raw_file(dir.path(), 3_000_123);
    let packs = [
        rigs::images::packed(&raw, "zstd", "zst"),
        rigs::images::packed(&raw, "xz", "xz"),
        rigs::images::packed(&raw, "gzip", "gz"),
        rigs::images::packed(&raw, "bzip2", "bz2"),
    ];
    let cases: &[&[&str]] = &[
        &[],
        &["bs=4M"],
        &["bs=700", "skip=3", "count=2000"],
        &["ibs=1000", "obs=4096", "skip=5"],
        &["bs=1M", "count=1"],
        &["bs=512", "skip=100000"],
        &[
            "bs=64K",
            "iflag=count_bytes,skip_bytes",
            "skip=12345",
            "count=99999",
        ],
    ];
    let gnu_out = dir.path().join("gnu");
    let ddx_out = dir.path().join("ddx");
    for case in cases {
        let gnu = gnu_dd()
            .arg(arg("if", &raw))
            .arg(arg("of", &gnu_out))
            .args(*case)
            .output()
            .unwrap();
        let gnu_stats = statistics(&String::from_utf8_lossy(&gnu.stderr));
        for pack in &packs {
            let ran = Ddx::new()
                .arg(arg("if", pack))
                .arg(arg("of", &ddx_out))
                .arg("--decompress")
                .args(*case)
                .run();
            assert_eq!(ran.status.code(), gnu.status.code(), "{pack:?} {case:?}");
            assert_eq!(statistics(&ran.stderr), gnu_stats, "{pack:?} {case:?}");
            assert!(
                std::fs::read(&ddx_out).unwrap() == std::fs::read(&gnu_out).unwrap(),
                "{pack:?} {case:?}: the output differs from GNU dd's"
            );
            // A skip past the end warns as GNU warns.
            let warned = |s: &str| s.contains("cannot skip to specified offset");
            assert_eq!(
                warned(&ran.stderr),
                warned(&String::from_utf8_lossy(&gnu.stderr)),
                "{pack:?} {case:?}: {}",
                ran.stderr
            );
        }
    }
}

#[test]
fn an_input_that_is_not_compressed_is_refused_unless_auto() {
    let dir = tempfile::tempdir().unwrap();
    let raw = raw_file(dir.path(), 100_000);
    let out = dir.path().join("out");
    let ran = Ddx::new()
        .arg(arg("if", &raw))
        .arg(arg("of", &out))
        .arg("--decompress")
        .fails_with("is not compressed");
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    assert!(!out.exists(), "nothing is created");
    Ddx::new()
        .arg(arg("if", &raw))
        .arg(arg("of", &out))
        .arg("--decompress=auto")
        .succeeds();
    assert!(std::fs::read(&out).unwrap() == std::fs::read(&raw).unwrap());
    // From a pipe too: the bytes read to recognise it are given back.
    let piped = Ddx::new()
        .arg("--decompress=auto")
        .arg("status=none")
        .stdin(std::fs::read(&raw).unwrap())
        .succeeds();
    assert!(piped.stdout == std::fs::read(&raw).unwrap());
}

#[test]
fn a_corrupt_stream_fails_naming_where() {
    let Some((dir, pack)) = zstd_packed(2_000_000) else {
        return;
    };
    let mut bytes = std::fs::read(&pack).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle..middle + 8].copy_from_slice(b"CORRUPT!");
    std::fs::write(&pack, bytes).unwrap();
    let ran = Ddx::new()
        .arg(arg("if", &pack))
        .arg(arg("of", &dir.path().join("out")))
        .arg("--decompress")
        .fails_with("error reading");
    ran.says("corrupt zstd data");
    assert_eq!(statistics(&ran.stderr).len(), 3, "{}", ran.stderr);
}

#[test]
fn what_compress_writes_the_tools_and_decompress_read_back() {
    if !rigs::tools_or_skip(&["zstd", "xz", "gzip"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let bytes = data(20_000_000);
    std::fs::write(&raw, &bytes).unwrap();
    for (spec, tool) in [("zstd", "zstd"), ("xz:1", "xz"), ("gzip:1", "gzip")] {
        let out = dir.path().join(format!("out.{tool}"));
        let ran = Ddx::new()
            .arg(arg("if", &raw))
            .arg(arg("of", &out))
            .arg(format!("--compress={spec}"))
            .arg("bs=1M")
            .succeeds();
        // The statistics are those of the bytes read and handed on.
        assert_eq!(
            statistics(&ran.stderr)[2],
            "20000000 bytes (20 MB, 19 MiB)",
            "{spec}"
        );
        let back = rigs::must_run(Command::new(tool).arg("-dc").arg(&out));
        assert!(back == bytes, "{tool} -d gives the bytes back");
        let restored = dir.path().join("restored");
        Ddx::new()
            .arg(arg("if", &out))
            .arg(arg("of", &restored))
            .arg("--decompress")
            .arg("conv=sparse")
            .succeeds();
        assert!(std::fs::read(&restored).unwrap() == bytes, "{spec}");
    }
}

/// One refusal: exit 1, one line naming `names`, the output not created.
#[track_caller]
fn refused(dir: &Path, input: &Path, args: &[&str], names: &[&str]) {
    let out = dir.join("never");
    let ran = Ddx::new()
        .arg(arg("if", input))
        .arg(arg("of", &out))
        .args(args)
        .fails();
    assert_eq!(ran.stderr.lines().count(), 1, "{args:?}: {}", ran.stderr);
    for name in names {
        assert!(ran.stderr.contains(name), "{args:?}: {}", ran.stderr);
    }
    assert!(!out.exists(), "{args:?}: the output was created");
}

#[test]
fn options_that_cannot_go_together_are_refused_before_anything_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let raw = raw_file(dir.path(), 8192);
    let map = dir.path().join("raw.bmap");
    std::fs::write(&map, bmap_xml(8192, &[(0, 1)])).unwrap();
    let map_arg = arg("--bmap", &map);
    let d = dir.path();
    refused(
        d,
        &raw,
        &["--decompress", "--rescue"],
        &["--decompress", "--rescue"],
    );
    refused(
        d,
        &raw,
        &["--compress=zstd", "--resume"],
        &["--compress", "--resume"],
    );
    refused(
        d,
        &raw,
        &["--compress=zstd", "seek=1"],
        &["--compress", "seek="],
    );
    refused(
        d,
        &raw,
        &["--compress=zstd", "conv=notrunc"],
        &["--compress", "conv=notrunc"],
    );
    refused(
        d,
        &raw,
        &["--compress=xz", "--verify"],
        &["--compress", "--verify"],
    );
    refused(d, &raw, &[&map_arg, "skip=1"], &["--bmap", "skip="]);
    refused(d, &raw, &[&map_arg, "count=1"], &["--bmap", "count="]);
    refused(d, &raw, &[&map_arg, "seek=1"], &["--bmap", "seek="]);
    refused(
        d,
        &raw,
        &[&map_arg, "conv=ucase"],
        &["--bmap", "conv=ucase"],
    );
    refused(
        d,
        &raw,
        &[&map_arg, "conv=sparse"],
        &["--bmap", "conv=sparse"],
    );
    refused(
        d,
        &raw,
        &[&map_arg, "iflag=direct"],
        &["--bmap", "iflag=direct"],
    );
    refused(
        d,
        &raw,
        &["--bmap=/nonexistent.bmap"],
        &["--bmap", "nonexistent"],
    );
    refused(
        d,
        &raw,
        &["--bmap-create=/no/such/dir/x.bmap"],
        &["--bmap-create"],
    );
    let tee = arg("--tee", &raw);
    refused(d, &raw, &[&tee], &["--tee", "end of the copy"]);
    // A map made for another size of image.
    std::fs::write(&map, bmap_xml(4096, &[(0, 0)])).unwrap();
    refused(d, &raw, &[&map_arg], &["--bmap", "4096-byte image"]);
    // A further output in /dev that does not exist: the guard's refusal.
    let ran = Ddx::new()
        .arg(arg("if", &raw))
        .arg(arg("of", &d.join("first")))
        .arg("--tee=/dev/ddx-no-such-disk")
        .fails();
    ran.says("ddx-no-such-disk");
    assert!(!d.join("first").exists());
    assert!(!Path::new("/dev/ddx-no-such-disk").exists());
}

/// A bmap 2.0 file without digests, for `blocks` (first, last) ranges.
fn bmap_xml(image_size: u64, ranges: &[(u64, u64)]) -> String {
    let blocks = image_size.div_ceil(4096);
    let mapped: u64 = ranges.iter().map(|(a, b)| b - a + 1).sum();
    let ranges: String = ranges
        .iter()
        .map(|(a, b)| format!("<Range> {a}-{b} </Range>\n"))
        .collect();
    format!(
        "<?xml version=\"1.0\" ?>\n<bmap version=\"1.2\">\n<ImageSize> {image_size} </ImageSize>\n\
         <BlockSize> 4096 </BlockSize>\n<BlocksCount> {blocks} </BlocksCount>\n\
         <MappedBlocksCount> {mapped} </MappedBlocksCount>\n<BlockMap>\n{ranges}</BlockMap>\n</bmap>\n"
    )
}

/// A small ext4 image with files in it, and bmaptool's map of it.
fn ext4_image(dir: &Path, size: u64) -> (PathBuf, PathBuf) {
    let files: Vec<(String, Vec<u8>)> = (0..4u64)
        .map(|n| {
            let bytes = rigs::bytes::pattern(n + 1, (size / 12) as usize);
            (format!("file{n}"), bytes)
        })
        .collect();
    let image = rigs::images::ext4_image(dir, size, &files);
    let map = dir.join("ext4.bmap");
    rigs::images::bmaptool_create(&image, &map);
    (image, map)
}

/// A file of `len` bytes of noise (what a used card holds).
fn junk_file(path: &Path, len: usize) {
    std::fs::write(path, rigs::bytes::pattern(99, len)).unwrap();
}

#[test]
fn bmap_writes_what_bmaptool_writes_onto_a_device_and_checks_each_range() {
    if let Some(why) = rigs::LoopDevice::unavailable() {
        rigs::skip(&why);
        return;
    }
    if !rigs::tools_or_skip(&["bmaptool", "mkfs.ext4", "zstd", "xz"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let size: u64 = 24 << 20;
    let (image, map) = ext4_image(dir.path(), size);
    let zst = rigs::images::packed(&image, "zstd", "zst");
    let xz = rigs::images::packed(&image, "xz", "xz");
    let theirs_file = dir.path().join("theirs");
    let ours_file = dir.path().join("ours");
    junk_file(&theirs_file, size as usize);
    let theirs = rigs::LoopDevice::attach(&theirs_file, Default::default()).unwrap();
    rigs::images::bmaptool_copy(&map, &image, &theirs.path);
    let theirs_bytes = std::fs::read(&theirs.path).unwrap();
    let image_bytes = std::fs::read(&image).unwrap();
    const MIB: usize = 1 << 20;
    for (input, extra) in [
        (&zst, &["--decompress", "bs=4M"][..]),
        (&xz, &["--decompress"][..]),
        (&image, &["bs=64K"][..]),
        (&image, &[][..]),
    ] {
        junk_file(&ours_file, size as usize);
        let ours = rigs::LoopDevice::attach(&ours_file, Default::default()).unwrap();
        let ran = Ddx::new()
            .arg(arg("if", input))
            .arg(arg("of", &ours.path))
            .arg(arg("--bmap", &map))
            .arg("conv=fsync")
            .arg("--verbose")
            .args(extra)
            .succeeds();
        // The mapped ranges are whole 4 KiB blocks in page-aligned
        // buffers: every byte goes to the device with O_DIRECT.
        let line = ran
            .stderr
            .lines()
            .find(|l| l.contains("image writes: "))
            .unwrap_or_else(|| panic!("{extra:?}: no image writes line in {}", ran.stderr));
        assert!(
            line.ends_with("(O_DIRECT, aligned), 0 through the page cache")
                && !line.contains("image writes: 0 bytes"),
            "{extra:?}: {line}"
        );
        let stats = statistics(&ran.stderr);
        assert_eq!(
            stats[2], "25165824 bytes (25 MB, 24 MiB)",
            "{extra:?}: the whole image is accounted for"
        );
        let ours_bytes = std::fs::read(&ours.path).unwrap();
        drop(ours);
        // Past the first MiB, what bmaptool leaves: the image's mapped
        // blocks, and the old bytes in the others.
        assert!(
            ours_bytes[MIB..] == theirs_bytes[MIB..],
            "{input:?} {extra:?}: differs from bmaptool's copy"
        );
        // The first MiB is held to the safe order (written last, zeroed
        // first): where unmapped it reads as the image does (zeros).
        assert!(
            ours_bytes[..MIB] == image_bytes[..MIB],
            "{input:?} {extra:?}: the first MiB"
        );
    }

    // A regular file as output: the image itself, holes and all.
    let out = dir.path().join("out.img");
    Ddx::new()
        .arg(arg("if", &zst))
        .arg(arg("of", &out))
        .arg(arg("--bmap", &map))
        .arg("--decompress")
        .succeeds();
    assert!(std::fs::read(&out).unwrap() == image_bytes);

    // A corrupted mapped block: exit 1, naming the range and its offset.
    let mut bad = image_bytes.clone();
    let text = std::fs::read_to_string(&map).unwrap();
    let second: u64 = text
        .lines()
        .filter(|l| l.contains("<Range"))
        .nth(1)
        .and_then(|l| l.split('>').nth(1))
        .and_then(|r| r.trim().split(['-', '<']).next())
        .and_then(|n| n.trim().parse().ok())
        .expect("a second range");
    let at = (second * 4096 + 10) as usize;
    bad[at] ^= 0xff;
    let bad_file = dir.path().join("bad.img");
    std::fs::write(&bad_file, &bad).unwrap();
    let bad_zst = rigs::images::packed(&bad_file, "zstd", "zst");
    let ran = Ddx::new()
        .arg(arg("if", &bad_zst))
        .arg(arg("of", &dir.path().join("out2")))
        .arg(arg("--bmap", &map))
        .arg("--decompress")
        .fails();
    ran.says(&format!("blocks {second}-"));
    ran.says(&format!("image bytes {}", second * 4096));
}

#[test]
fn a_map_that_checks_every_range_stands_in_for_the_frames_checksum() {
    if !rigs::tools_or_skip(&["bmaptool", "mkfs.ext4", "zstd"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let size: u64 = 24 << 20;
    let (image, map) = ext4_image(dir.path(), size);
    let image_bytes = std::fs::read(&image).unwrap();
    // The zstd tool's one frame, its checksum (the last 4 bytes) wrong.
    let zst = rigs::images::packed(&image, "zstd", "zst");
    let mut bytes = std::fs::read(&zst).unwrap();
    let len = bytes.len();
    for b in &mut bytes[len - 4..] {
        *b ^= 0x5A;
    }
    std::fs::write(&zst, &bytes).unwrap();
    let tested = Command::new("zstd").arg("-t").arg(&zst).output().unwrap();
    assert!(!tested.status.success(), "zstd -t finds the checksum wrong");
    let out = dir.path().join("out.img");
    // bmaptool's map digests every range: the frame's checksum is not
    // what protects the device, and the image is written.
    Ddx::new()
        .arg(arg("if", &zst))
        .arg(arg("of", &out))
        .arg(arg("--bmap", &map))
        .arg("--decompress")
        .succeeds();
    assert!(std::fs::read(&out).unwrap() == image_bytes);
    // Without a map, or with one whose ranges carry no digest, the
    // checksum is the check.
    let undigested = dir.path().join("plain.bmap");
    let blocks = size / 4096;
    std::fs::write(&undigested, bmap_xml(size, &[(0, blocks - 1)])).unwrap();
    let undigested_arg = arg("--bmap", &undigested);
    for extra in [&[][..], &[undigested_arg.as_str()][..]] {
        let ran = Ddx::new()
            .arg(arg("if", &zst))
            .arg(arg("of", &out))
            .arg("--decompress")
            .args(extra)
            .fails();
        ran.says("corrupt zstd data");
        ran.says("checksum");
    }
}

#[test]
fn the_map_bmap_create_writes_is_one_bmaptool_copies_with() {
    if !rigs::tools_or_skip(&["bmaptool", "mkfs.ext4", "zstd"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (image, theirs) = ext4_image(dir.path(), 16 << 20);
    for (input, extra) in [
        (image.clone(), None),
        (
            rigs::images::packed(&image, "zstd", "zst"),
            Some("--decompress"),
        ),
    ] {
        let map = dir.path().join("ours.bmap");
        let _ = std::fs::remove_file(&map);
        Ddx::new()
            .arg(arg("if", &input))
            .arg(arg("of", &dir.path().join("copy.img")))
            .arg(arg("--bmap-create", &map))
            .args(extra)
            .succeeds();
        let out = dir.path().join("bmaptool.img");
        let _ = std::fs::remove_file(&out);
        rigs::images::bmaptool_copy(&map, &image, &out);
        assert!(std::fs::read(&out).unwrap() == std::fs::read(&image).unwrap());
        if extra.is_none() {
            // From a file's extents, bmaptool's own ranges.
            let ranges = |path: &Path| -> Vec<String> {
                std::fs::read_to_string(path)
                    .unwrap()
                    .lines()
                    .filter(|l| l.contains("<Range"))
                    .map(str::to_owned)
                    .collect()
            };
            assert_eq!(ranges(&map), ranges(&theirs));
        }
    }
}

#[test]
fn tee_writes_every_output_and_drops_one_that_fills_up() {
    let small = match rigs::SmallTmpfs::new(1 << 20) {
        Ok(small) => small,
        Err(why) => {
            rigs::skip(&why);
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let bytes = data(4 << 20);
    std::fs::write(&raw, &bytes).unwrap();
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    let full = small.path().join("full");
    let ran = Ddx::new()
        .arg(arg("if", &raw))
        .arg(arg("of", &first))
        .arg(arg("--tee", &second))
        .arg(arg("--tee", &full))
        .arg("bs=1M")
        .arg("conv=fsync")
        .fails();
    assert!(std::fs::read(&first).unwrap() == bytes);
    assert!(std::fs::read(&second).unwrap() == bytes);
    assert_eq!(
        statistics(&ran.stderr),
        [
            "4+0 records in",
            "4+0 records out",
            "4194304 bytes (4.2 MB, 4.0 MiB)"
        ]
    );
    ran.says("4194304 bytes (4.2 MB, 4.0 MiB) copied\n");
    ran.says("dropped after");
    ran.says("No space left on device");
    ran.says("full");

    // All well: exit 0, a line for the further output.
    let ran = Ddx::new()
        .arg(arg("if", &raw))
        .arg(arg("of", &first))
        .arg(arg("--tee", &second))
        .succeeds();
    assert!(std::fs::read(&second).unwrap() == bytes);
    ran.says("--tee: ");
}

#[test]
fn verify_reads_back_every_tee_output_and_names_the_one_that_differs() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw");
    let size = 3 << 20;
    let bytes = data(size);
    std::fs::write(&raw, &bytes).unwrap();
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    let third = dir.path().join("third");
    let identical = |path: &Path| {
        format!(
            "verify: {size} bytes of '{}' read back, identical to what was written",
            path.display()
        )
    };
    // ddx --verify from raw onto first and each of `tees`.
    let verified = |tees: &[&Path], extra: &[&str]| {
        Ddx::new()
            .arg(arg("if", &raw))
            .arg(arg("of", &first))
            .args(tees.iter().map(|tee| arg("--tee", tee)))
            .args(["bs=1M", "--verify"])
            .args(extra)
    };
    let ran = verified(&[&second, &third], &[]).succeeds();
    for output in [&first, &second, &third] {
        assert!(std::fs::read(output).unwrap() == bytes);
        ran.says(&identical(output));
    }

    // A further output that corrupts a byte on its way down: the copy
    // succeeds, and only its read-back shows it; of= still reads back
    // identical, and the exit status is 1.
    let flip_at = 2_345_678u64;
    let Some(device) = rigs::or_skip(rigs::NbdDevice::flipping_writes(&vec![0; size], flip_at))
    else {
        return;
    };
    let ran = verified(&[&device.path], &["conv=notrunc"]).fails_with(&format!(
        "verify: '{}' differs from what was written at offset {flip_at}\n",
        device.path.display()
    ));
    ran.says(&identical(&first));

    // An output dropped after a failure has failed already: it is not
    // read back, and the others are.
    let small = match rigs::SmallTmpfs::new(1 << 20) {
        Ok(small) => small,
        Err(why) => {
            rigs::skip(&why);
            return;
        }
    };
    let full = small.path().join("full");
    let ran = verified(&[&full, &second], &[]).fails();
    ran.says("dropped after");
    ran.says(&identical(&first));
    ran.says(&identical(&second));
    assert!(!ran.stderr.contains(&identical(&full)), "{}", ran.stderr);
    let full_line = format!("verify: '{}'", full.display());
    let cannot = format!("cannot read '{}'", full.display());
    assert!(
        !ran.stderr.contains(&full_line) && !ran.stderr.contains(&cannot),
        "{}",
        ran.stderr
    );
}

#[test]
fn progress_follows_the_compressed_input_when_decompressing() {
    let Some((dir, packed)) = zstd_packed(3_000_123) else {
        return;
    };
    let packed_size = std::fs::metadata(&packed).unwrap().len();
    let json = dir.path().join("progress.json");
    let last_record = |script: String| -> serde_json::Value {
        let out = rigs::cmd::shell(&script).output().unwrap();
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&json).unwrap();
        serde_json::from_str(text.lines().last().unwrap()).unwrap()
    };
    // From a file: its size is the compressed total, and the last record
    // has read all of it.
    let last = last_record(format!(
        "{} {} of=/dev/null --decompress --progress-fd=3 3>{}",
        rigs::cmd::DDX,
        arg("if", &packed),
        json.display()
    ));
    assert_eq!(last["done"], true);
    assert_eq!(last["bytes"], 3_000_123);
    assert_eq!(last["compressed_total"], packed_size, "{last}");
    assert_eq!(last["compressed_bytes"], packed_size, "{last}");
    // From a pipe: no size, so no total, but the position still counts.
    let last = last_record(format!(
        "cat {} | {} of=/dev/null --decompress --progress-fd=3 3>{}",
        packed.display(),
        rigs::cmd::DDX,
        json.display()
    ));
    assert_eq!(last["compressed_bytes"], packed_size, "{last}");
    assert!(last.get("compressed_total").is_none(), "{last}");
    // Without --decompress the records are as before.
    let last = last_record(format!(
        "{} {} of=/dev/null --progress-fd=3 3>{}",
        rigs::cmd::DDX,
        arg("if", &packed),
        json.display()
    ));
    assert!(last.get("compressed_bytes").is_none(), "{last}");
}

#[test]
fn an_interrupted_decompress_onto_a_device_leaves_its_first_mib_blank() {
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    if let Some(why) = rigs::LoopDevice::unavailable() {
        rigs::skip(&why);
        return;
    }
    if !rigs::tools_or_skip(&["zstd"]) {
        return;
    }
    const MIB: usize = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let size = 8 * MIB;
    let image = dir.path().join("image");
    let bytes = rigs::bytes::pattern(15, size);
    std::fs::write(&image, &bytes).unwrap();
    let packed = std::fs::read(rigs::images::packed(&image, "zstd", "zst")).unwrap();
    let backing = dir.path().join("card");
    junk_file(&backing, size);
    let card = rigs::LoopDevice::attach(&backing, Default::default()).unwrap();

    // The whole compressed image arrives through a pipe that then stays
    // open, as from a stalled download: everything decodable is written,
    // and the copy waits for the end of its input when it is interrupted.
    let mut child = rigs::cmd::ddx()
        .arg(arg("of", &card.path))
        .args(["--decompress", "bs=1M"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&packed).unwrap();
    // The decoder reads ahead in MiB steps and waits for a whole step: a
    // zstd skippable frame after the image (which decoders pass over)
    // brings the image's own frame into its reach while the pipe stays
    // open.
    let mut skippable = vec![0x50, 0x2a, 0x4d, 0x18];
    skippable.extend_from_slice(&(2u32 << 20).to_le_bytes());
    skippable.resize(8 + (2 << 20), 0);
    stdin.write_all(&skippable).unwrap();
    rigs::signal::wait_for_handler(child.id(), libc::SIGINT);
    std::thread::sleep(std::time::Duration::from_secs(2));
    rigs::signal::send(child.id(), libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGINT), "{stderr}");
    drop(card);
    let left = std::fs::read(&backing).unwrap();
    // The copy was well past its first MiB when it was cut short...
    let copied = statistics(&stderr)
        .get(2)
        .and_then(|line| line.split(' ').next()?.parse::<usize>().ok())
        .unwrap_or(0);
    assert!(copied > 2 * MIB, "{stderr}");
    assert!(
        left[2 * MIB..3 * MIB] == bytes[2 * MIB..3 * MIB],
        "{stderr}"
    );
    // ...and its first MiB, partition table and boot sector, is not the
    // image's: zeroed first, to be written last.
    assert!(left[..MIB].iter().all(|&b| b == 0), "{stderr}");

    // A copy that completes writes it.
    let card = rigs::LoopDevice::attach(&backing, Default::default()).unwrap();
    let zst = dir.path().join("image.zst");
    Ddx::new()
        .arg(arg("if", &zst))
        .arg(arg("of", &card.path))
        .args(["--decompress", "bs=1M"])
        .succeeds();
    drop(card);
    assert!(std::fs::read(&backing).unwrap() == bytes);
}

/// An image written onto a device goes with O_DIRECT where aligned and
/// through the page cache elsewhere: with bs=6000 (records that are not
/// whole pages) and an image that ends inside a 4 KiB block, both kinds
/// of write meet on the same device, which reads back as the image, the
/// statistics GNU dd's for the decompressed file.
#[test]
fn an_image_written_partly_direct_partly_through_the_cache_reads_back_whole() {
    if let Some(why) = rigs::LoopDevice::unavailable() {
        rigs::skip(&why);
        return;
    }
    if !rigs::tools_or_skip(&["zstd"]) {
        return;
    }
    const MIB: usize = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let size = 5 * MIB + 1000;
    let image = raw_file(dir.path(), size);
    let zst = rigs::images::packed(&image, "zstd", "zst");
    let backing = dir.path().join("card");
    junk_file(&backing, 6 * MIB);
    let bytes = std::fs::read(&image).unwrap();
    for bs in ["bs=1M", "bs=6000"] {
        let card = rigs::LoopDevice::attach(&backing, Default::default()).unwrap();
        let ran = Ddx::new()
            .arg(arg("if", &zst))
            .arg(arg("of", &card.path))
            .args(["--decompress", "conv=fsync", "--verbose", bs])
            .succeeds();
        let gnu = gnu_dd()
            .arg(arg("if", &image))
            .args(["of=/dev/null", bs])
            .output()
            .unwrap();
        let gnu_stats = statistics(&String::from_utf8_lossy(&gnu.stderr));
        assert_eq!(statistics(&ran.stderr), gnu_stats, "{bs}");
        let line = ran
            .stderr
            .lines()
            .find(|l| l.contains("image writes: "))
            .unwrap_or_else(|| panic!("{bs}: no image writes line in {}", ran.stderr));
        // "image writes: D bytes written straight to the device
        // (O_DIRECT, aligned), C through the page cache"
        let words: Vec<&str> = line.split_whitespace().collect();
        let after = |word: &str, by: isize| -> u64 {
            let at = words.iter().position(|w| *w == word).expect(line);
            words[(at as isize + by) as usize].parse().expect(line)
        };
        let direct = after("writes:", 1);
        let cached = after("through", -1);
        // The image, and the safe order's zeros over the first MiB
        // before anything else.
        assert_eq!(direct + cached, (size + MIB) as u64, "{bs}: {line}");
        assert!(
            direct > 0 && cached > 0,
            "{bs}: both kinds of write: {line}"
        );
        drop(card);
        let left = std::fs::read(&backing).unwrap();
        assert!(
            left[..size] == bytes[..],
            "{bs}: the device reads back as the image"
        );
    }
}

/// `--tee` onto block devices opened O_DIRECT: the large writes are lent
/// to every output from the engine's aligned buffer, and small ones are
/// copied into aligned buffers (an unaligned copy once made the extra
/// output fail with EINVAL). The statistics are GNU dd's onto one device.
#[test]
fn tee_onto_block_devices_with_o_direct_gives_every_device_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let size = 3 << 20;
    let raw = dir.path().join("raw");
    let bytes = data(size);
    std::fs::write(&raw, &bytes).unwrap();
    let mut devices = Vec::new();
    for name in ["gnu", "first", "second"] {
        let backing = dir.path().join(name);
        std::fs::write(&backing, vec![0xa5; size]).unwrap();
        let Some(device) = rigs::or_skip(rigs::LoopDevice::attach(
            &backing,
            rigs::LoopOptions::default(),
        )) else {
            return;
        };
        devices.push(device);
    }
    for bs in ["bs=1M", "bs=4K"] {
        let gnu = gnu_dd()
            .arg(arg("if", &raw))
            .arg(arg("of", &devices[0].path))
            .args([bs, "oflag=direct", "conv=fsync"])
            .output()
            .unwrap();
        assert!(gnu.status.success());
        let ran = Ddx::new()
            .arg(arg("if", &raw))
            .arg(arg("of", &devices[1].path))
            .arg(arg("--tee", &devices[2].path))
            .args([bs, "oflag=direct", "conv=fsync"])
            .succeeds();
        assert_eq!(
            statistics(&ran.stderr),
            statistics(&String::from_utf8_lossy(&gnu.stderr)),
            "{bs}"
        );
        for device in &devices {
            assert!(std::fs::read(&device.path).unwrap() == bytes, "{bs}");
        }
        assert!(
            ran.stderr
                .contains(&format!("{size} bytes (3.1 MB, 3.0 MiB) copied\n")),
            "{bs}: {}",
            ran.stderr
        );
    }
}

/// `--tee` onto block devices without oflag=direct: every output's
/// aligned writes go straight to its device (`image::direct`; `--verbose`
/// says so per output), a partial last block through the page cache;
/// every device gets the bytes, the statistics are GNU dd's onto one
/// device, and a device too small for the input is dropped with its
/// ENOSPC named while the other output still gets every byte (exit 1).
#[test]
fn tee_onto_block_devices_writes_each_directly_where_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let size = (3 << 20) + 1000;
    let raw = dir.path().join("raw");
    let bytes = data(size);
    std::fs::write(&raw, &bytes).unwrap();
    let mut devices = Vec::new();
    for (name, len) in [
        ("gnu", 4 << 20),
        ("first", 4 << 20),
        ("second", 4 << 20),
        ("small", 1 << 20),
    ] {
        let backing = dir.path().join(name);
        std::fs::write(&backing, vec![0xa5; len]).unwrap();
        let Some(device) = rigs::or_skip(rigs::LoopDevice::attach(
            &backing,
            rigs::LoopOptions::default(),
        )) else {
            return;
        };
        devices.push(device);
    }
    let gnu = gnu_dd()
        .arg(arg("if", &raw))
        .arg(arg("of", &devices[0].path))
        .args(["bs=1M", "conv=fsync"])
        .output()
        .unwrap();
    assert!(gnu.status.success());
    let ran = Ddx::new()
        .arg(arg("if", &raw))
        .arg(arg("of", &devices[1].path))
        .arg(arg("--tee", &devices[2].path))
        .args(["bs=1M", "conv=fsync", "--verbose"])
        .succeeds();
    assert_eq!(
        statistics(&ran.stderr),
        statistics(&String::from_utf8_lossy(&gnu.stderr))
    );
    for device in &devices[..3] {
        let written = std::fs::read(&device.path).unwrap();
        assert!(written[..size] == bytes[..], "{}", device.path.display());
    }
    let direct_lines: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.contains("image writes: ") && !l.contains("image writes: 0 bytes"))
        .collect();
    assert_eq!(direct_lines.len(), 2, "one line per output: {}", ran.stderr);
    for line in direct_lines {
        assert!(line.contains("1000 through the page cache"), "{line}");
    }

    let ran = Ddx::new()
        .arg(arg("if", &raw))
        .arg(arg("of", &devices[1].path))
        .arg(arg("--tee", &devices[3].path))
        .args(["bs=1M", "conv=fsync"])
        .fails();
    let written = std::fs::read(&devices[1].path).unwrap();
    assert!(written[..size] == bytes[..]);
    ran.says("dropped after");
    ran.says("No space left on device");
}

/// The mapped byte ranges `[start, end)` of a bmaptool map of an image
/// whose size is a whole number of its 4 KiB blocks.
fn mapped_ranges(map: &Path) -> Vec<(u64, u64)> {
    std::fs::read_to_string(map)
        .unwrap()
        .lines()
        .filter(|l| l.contains("<Range"))
        .map(|l| {
            let blocks = l.split('>').nth(1).unwrap().split('<').next().unwrap();
            let (first, last) = match blocks.trim().split_once('-') {
                Some((a, b)) => (a.trim().parse::<u64>().unwrap(), b.trim().parse().unwrap()),
                None => {
                    let block = blocks.trim().parse::<u64>().unwrap();
                    (block, block)
                }
            };
            (first * 4096, (last + 1) * 4096)
        })
        .collect()
}

/// The read requests nbdkit's log filter saw: (offset, count).
fn reads_logged(log: &Path) -> Vec<(u64, u64)> {
    let field = |line: &str, name: &str| {
        let hex = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} in {line}"));
        u64::from_str_radix(hex, 16).unwrap()
    };
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|l| l.contains(" Read id="))
        .map(|l| (field(l, "offset=0x"), field(l, "count=0x")))
        .collect()
}

/// `--verify` under `--bmap` reads back the mapped ranges only, all of
/// them, each once, and checks them: onto an nbdkit export that logs
/// every request, from the image and from it compressed.
#[cfg(feature = "nbd")]
#[test]
fn verify_under_bmap_reads_back_only_the_mapped_ranges() {
    if !rigs::tools_or_skip(&["bmaptool", "mkfs.ext4", "zstd"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let size: u64 = 24 << 20;
    let (image, map) = ext4_image(dir.path(), size);
    let zst = rigs::images::packed(&image, "zstd", "zst");
    let ranges = mapped_ranges(&map);
    let mapped: u64 = ranges.iter().map(|(a, b)| b - a).sum();
    assert!(
        ranges.len() > 2 && mapped < size * 3 / 4,
        "holes to leave: {ranges:?}"
    );
    for (input, extra) in [(&image, None), (&zst, Some("--decompress"))] {
        let Some(server) = rigs::or_skip(rigs::nbd::Server::nbdkit_logged(&[
            "memory",
            &format!("size={size}"),
        ])) else {
            return;
        };
        let ran = Ddx::new()
            .arg(arg("if", input))
            .arg(format!("of={}", server.uri()))
            .arg(arg("--bmap", &map))
            .arg("--verify")
            .args(extra)
            .succeeds();
        ran.says(&format!(
            "verify: {mapped} bytes of '{}' in {} mapped ranges read back, each as the map's \
             SHA-256\n",
            server.uri(),
            ranges.len()
        ));
        let reads = reads_logged(&server.log_file());
        let mut read = 0;
        for &(offset, count) in &reads {
            assert!(
                ranges
                    .iter()
                    .any(|&(start, end)| start <= offset && offset + count <= end),
                "a read outside the mapped ranges: {offset:#x}+{count:#x}; {ranges:?}"
            );
            read += count;
        }
        assert_eq!(read, mapped, "each mapped byte read back once: {reads:?}");
        let back = rigs::nbd::nbdcopy_read(&server.uri(), dir.path()).unwrap();
        assert!(back == std::fs::read(&image).unwrap());
    }
}

/// A byte the device corrupts in a mapped range is caught, naming its
/// blocks; one in an unmapped block is never written nor read. A map
/// without digests is checked against digests taken as the image passed.
#[test]
fn verify_under_bmap_catches_a_flipped_byte_in_a_mapped_range() {
    if !rigs::tools_or_skip(&["bmaptool", "mkfs.ext4"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let size: u64 = 16 << 20;
    let (image, map) = ext4_image(dir.path(), size);
    let ranges = mapped_ranges(&map);
    // A map of the same ranges without digests (bmap 1.2).
    let plain = dir.path().join("plain.bmap");
    let blocks: Vec<(u64, u64)> = ranges
        .iter()
        .map(|&(a, b)| (a / 4096, b / 4096 - 1))
        .collect();
    std::fs::write(&plain, bmap_xml(size, &blocks)).unwrap();
    let (start, end) = ranges[ranges.len() / 2];
    let inside = start + (end - start) / 2;
    let outside = ranges
        .windows(2)
        .find(|w| w[1].0 > w[0].1)
        .map(|w| w[0].1)
        .expect("a hole between two ranges");
    for (used, flip_at) in [(&map, inside), (&map, outside), (&plain, inside)] {
        {
            // Every request to this device runs a shell: few and large.
            let Some(device) = rigs::or_skip(rigs::NbdDevice::flipping_writes(
                &vec![0; size as usize],
                flip_at,
            )) else {
                return;
            };
            let ran = Ddx::new()
                .arg(arg("if", &image))
                .arg(arg("of", &device.path))
                .arg(arg("--bmap", used))
                .args(["--verify", "bs=4M", "conv=notrunc"])
                .run();
            // The copy itself went through: its statistics are whole.
            assert_eq!(
                statistics(&ran.stderr)[2],
                "16777216 bytes (17 MB, 16 MiB)",
                "{}",
                ran.stderr
            );
            if flip_at == outside {
                assert_eq!(ran.status.code(), Some(0), "{}", ran.stderr);
                ran.says("mapped ranges read back, each as");
                continue;
            }
            assert_eq!(ran.status.code(), Some(1), "{}", ran.stderr);
            let (first, last) = blocks[ranges.len() / 2];
            ran.says(&format!(
                "verify: '{}' differs from what was written in blocks {first}-{last} (image \
                 bytes {start} to {end})\n",
                device.path.display()
            ));
        }
    }
}

/// Under `--bmap`, GNU's statistics count the image's bytes (holes
/// included, as GNU dd copying the image would); a line after them and
/// each `--tee` line say, labelled, how many of them were mapped and
/// written, counted apart (the tee's own writes).
#[test]
fn bmap_says_both_byte_counts_labelled() {
    if !rigs::tools_or_skip(&["bmaptool", "mkfs.ext4"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let size: u64 = 16 << 20;
    let (image, map) = ext4_image(dir.path(), size);
    let mapped: u64 = mapped_ranges(&map).iter().map(|(a, b)| b - a).sum();
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    let ran = Ddx::new()
        .arg(arg("if", &image))
        .arg(arg("of", &first))
        .arg(arg("--tee", &second))
        .arg(arg("--bmap", &map))
        .succeeds();
    assert_eq!(statistics(&ran.stderr)[2], "16777216 bytes (17 MB, 16 MiB)");
    let human = |bytes: u64| {
        let out = gnu_dd()
            .args(["if=/dev/zero", "of=/dev/null", "iflag=count_bytes"])
            .arg(format!("count={bytes}"))
            .output()
            .unwrap();
        let stats = statistics(&String::from_utf8_lossy(&out.stderr));
        stats[2].clone()
    };
    ran.says(&format!(
        "ddx: --bmap: 16777216 bytes of image copied: {} of mapped blocks written, {} bytes \
         of unmapped blocks left as they were\n",
        human(mapped),
        size - mapped
    ));
    ran.says(&format!(
        "ddx: --tee: '{}': 16777216 bytes (17 MB, 16 MiB) of image copied: {} of mapped \
         blocks written, the others left as they were\n",
        second.display(),
        human(mapped)
    ));
    for output in [&first, &second] {
        assert!(std::fs::read(output).unwrap() == std::fs::read(&image).unwrap());
    }
    // status=none: not a word.
    let ran = Ddx::new()
        .arg(arg("if", &image))
        .arg(arg("of", &first))
        .arg(arg("--bmap", &map))
        .arg("status=none")
        .succeeds();
    assert_eq!(ran.stderr, "");
}

/// A map made for another size of image is refused before the output
/// is opened: by the input file's size, by the size an xz, zstd or lz4
/// input records it decompresses to, and by the size of the device it
/// would be written onto. gzip and bzip2 record no size: there it fails
/// where the decoded stream shows it (a range's digest, or its end).
#[test]
fn a_map_for_another_size_is_refused_before_anything_is_written() {
    if !rigs::tools_or_skip(&["bmaptool", "mkfs.ext4", "zstd", "xz", "lz4", "gzip"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let size: u64 = 16 << 20;
    let (image, _) = ext4_image(dir.path(), size);
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let (_, other_map) = ext4_image(&other_dir, size + (4 << 20));
    let lz4 = dir.path().join("ext4.img.lz4");
    rigs::must_run(
        Command::new("lz4")
            .args(["-q", "--content-size"])
            .arg(&image)
            .arg(&lz4),
    );
    let out = dir.path().join("never");
    for (input, format) in [
        (rigs::images::packed(&image, "xz", "xz"), "xz"),
        (rigs::images::packed(&image, "zstd", "zst"), "zstd"),
        (lz4, "lz4"),
    ] {
        let ran = Ddx::new()
            .arg(arg("if", &input))
            .arg(arg("of", &out))
            .arg(arg("--bmap", &other_map))
            .arg("--decompress")
            .fails();
        assert_eq!(
            ran.stderr,
            format!(
                "ddx: --bmap='{}': the map is for a {}-byte image, but '{}' decompresses to \
                 {size} bytes, as its {format} headers record\n",
                other_map.display(),
                size + (4 << 20),
                input.display()
            )
        );
        assert!(!out.exists(), "{format}: the output was created");
    }
    // No size recorded: the stream shows it.
    let gz = rigs::images::packed(&image, "gzip", "gz");
    Ddx::new()
        .arg(arg("if", &gz))
        .arg(arg("of", &out))
        .arg(arg("--bmap", &other_map))
        .arg("--decompress")
        .fails();
    // Onto a device too small for the map's image.
    let backing = dir.path().join("small");
    let before = rigs::bytes::pattern(4, size as usize);
    std::fs::write(&backing, &before).unwrap();
    let Some(device) = rigs::or_skip(rigs::LoopDevice::attach(&backing, Default::default())) else {
        return;
    };
    let big = other_dir.join("ext4.img");
    let ran = Ddx::new()
        .arg(arg("if", &big))
        .arg(arg("of", &device.path))
        .arg(arg("--bmap", &other_map))
        .fails();
    assert_eq!(
        ran.stderr,
        format!(
            "ddx: --bmap writes the whole image: of='{}' is a block device of {size} bytes, \
             and the image is {} bytes\n",
            device.name(),
            size + (4 << 20)
        )
    );
    assert!(std::fs::read(&device.path).unwrap() == before, "written");
}

/// A map given with a compressed image and no `--decompress`: the map is
/// of the image the input holds, and the one line says that
/// `--decompress` is what is missing, for each format, before anything is
/// written; `--no-decompress` still writes the file as it is.
#[test]
fn a_map_with_a_compressed_image_says_that_decompress_is_missing() {
    if !rigs::tools_or_skip(&["bmaptool", "mkfs.ext4", "zstd", "xz", "gzip"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let size: u64 = 8 << 20;
    let (image, map) = ext4_image(dir.path(), size);
    let out = dir.path().join("never");
    for (tool, ext) in [("xz", "xz"), ("zstd", "zst"), ("gzip", "gz")] {
        let input = rigs::images::packed(&image, tool, ext);
        let ran = Ddx::new()
            .arg(arg("if", &input))
            .arg(arg("of", &out))
            .arg(arg("--bmap", &map))
            .fails();
        let lines: Vec<&str> = ran.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{}", ran.stderr);
        assert!(
            lines[0].contains(&format!("the map is for a {size}-byte image"))
                && lines[0].contains("add --decompress"),
            "{tool}: {}",
            ran.stderr
        );
        assert!(!out.exists(), "{tool}: the output was created");
    }
}

/// A compressed image whose format records its decoded size (zstd's frame
/// header, xz's index) is refused before the first write onto an output
/// of fixed size that cannot hold it: a loop device (as of= and as a
/// `--tee` output) and an NBD export; what fits is written.
#[test]
fn a_decoded_image_larger_than_its_device_is_refused_before_writing() {
    if !rigs::tools_or_skip(&["zstd", "xz"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("image");
    std::fs::write(&image, data(4 << 20)).unwrap();
    let small = dir.path().join("small");
    let before = rigs::bytes::pattern(5, 2 << 20);
    std::fs::write(&small, &before).unwrap();
    let Some(device) = rigs::or_skip(rigs::LoopDevice::attach(&small, Default::default())) else {
        return;
    };
    let roomy = dir.path().join("roomy");
    std::fs::write(&roomy, vec![0u8; 4 << 20]).unwrap();
    let Some(large) = rigs::or_skip(rigs::LoopDevice::attach(&roomy, Default::default())) else {
        return;
    };
    for (tool, ext) in [("zstd", "zst"), ("xz", "xz")] {
        let input = rigs::images::packed(&image, tool, ext);
        let ran = Ddx::new()
            .arg(arg("if", &input))
            .arg(arg("of", &device.path))
            .args(["--decompress", "bs=1M"])
            .fails();
        assert_eq!(
            ran.stderr,
            format!(
                "ddx: --decompress writes the whole image: of='{}' is a block device of {} \
                 bytes, and the image is {} bytes\n",
                device.name(),
                2 << 20,
                4 << 20
            ),
            "{tool}"
        );
        assert!(
            std::fs::read(&device.path).unwrap() == before,
            "{tool}: written"
        );
        // As a further output, beside one that holds it.
        let ran = Ddx::new()
            .arg(arg("if", &input))
            .arg(arg("of", &large.path))
            .arg(arg("--tee", &device.path))
            .args(["--decompress", "bs=1M"])
            .fails();
        assert!(
            ran.stderr
                .contains(&format!("--tee='{}' is a block device", device.name())),
            "{tool}: {}",
            ran.stderr
        );
        assert!(
            std::fs::read(&device.path).unwrap() == before,
            "{tool}: tee written"
        );
        // What fits goes.
        Ddx::new()
            .arg(arg("if", &input))
            .arg(arg("of", &large.path))
            .args(["--decompress", "bs=1M"])
            .succeeds();
    }
    // An export's size is known once it is opened, before a write.
    if !cfg!(feature = "nbd") {
        return;
    }
    let Some(server) = rigs::nbd::nbdkit(&["memory", "size=2M"]) else {
        return;
    };
    let input = rigs::images::packed(&image, "zstd", "zst");
    let ran = Ddx::new()
        .arg(arg("if", &input))
        .arg(format!("of={}", server.uri()))
        .args(["--decompress", "bs=1M"])
        .fails();
    assert!(
        ran.stderr
            .contains("is an NBD export of 2097152 bytes, and the image is 4194304 bytes")
            && !ran.stderr.contains("records out"),
        "{}",
        ran.stderr
    );
}
