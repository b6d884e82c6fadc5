//! The image ends (ddx::image) against the real tools: what
//! ddx compresses, zstd, xz and gzip decompress; what the tools compress,
//! ddx decompresses; bmaptool's maps are read and checked, and the maps
//! ddx records are accepted by `bmaptool copy`; --tee's outputs and the
//! safe order on real files and a loop device.
//!
//! The ends are driven here directly, over the project's file end and
//! through a copy loop that skips holes as the engine does, until the
//! planner wires them to the command line.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use ddx::ends::file::FileEnd;
use ddx::ends::{Kind, Whence};
use ddx::engine::stream::{stream_of, Stream};
use ddx::image::bmap::{Bmap, BmapFilter, BmapRecorder};
use ddx::image::{
    self, Compressed, Compression, Decompressed, FrameChecksums, Mode, Opened, SafeOrder, Tee,
};
use ddx::sys::file::Handle;
use ddx::sys::Errno;

use crate::rigs;

/// The project's file end over `file`.
fn end_of(file: File) -> Box<dyn Stream> {
    stream_of(Box::new(FileEnd::new(Handle::Owned(OwnedFd::from(file)))))
}

fn open(path: &Path) -> Box<dyn Stream> {
    end_of(File::open(path).unwrap())
}

fn create(path: &Path) -> Box<dyn Stream> {
    end_of(File::create(path).unwrap())
}

fn read_write(path: &Path) -> Box<dyn Stream> {
    end_of(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap(),
    )
}

const BS: usize = 1 << 20;

/// Copy `input` to `output` in `BS` requests, leaving out the holes the
/// input reports (as the engine does with --bmap), then close both.
fn copy(
    mut input: Box<dyn Stream>,
    mut output: Box<dyn Stream>,
    skip_holes: bool,
) -> Result<u64, (Errno, Option<String>)> {
    let mut buf = vec![0u8; BS];
    let mut at = 0u64;
    let fail = |end: &mut Box<dyn Stream>, e: Errno| (e, end.take_detail());
    loop {
        let mut upto = u64::MAX;
        if skip_holes {
            match input.next_data(at) {
                Ok(Some(data)) => {
                    upto = input.next_hole(data).map_err(|e| fail(&mut input, e))?;
                    // The queries leave the input's position unspecified.
                    input
                        .seek(Whence::Start(data))
                        .map_err(|e| fail(&mut input, e))?;
                    if data > at {
                        output
                            .seek(Whence::Start(data))
                            .map_err(|e| fail(&mut output, e))?;
                        at = data;
                    }
                }
                Ok(None) => break,
                Err(Errno::NOTSUP) => {}
                Err(e) => return Err(fail(&mut input, e)),
            }
        }
        let want = (upto - at).min(BS as u64) as usize;
        let n = input
            .read(&mut buf[..want])
            .map_err(|e| fail(&mut input, e))?;
        if n == 0 {
            break;
        }
        let mut done = 0;
        while done < n {
            done += output
                .write(&buf[done..n])
                .map_err(|e| fail(&mut output, e))?;
        }
        at += n as u64;
    }
    if let Ok(Some(size)) = input.size() {
        if output.kind() == Kind::RegularFile {
            output.truncate(size).map_err(|e| fail(&mut output, e))?;
        }
    }
    input.close().map_err(|e| (e, None))?;
    if output.kind() != Kind::CharDevice {
        output.sync(true).map_err(|e| fail(&mut output, e))?;
    }
    output.close().map_err(|e| (e, None))?;
    Ok(at)
}

/// Compressible bytes with a shape like a disk's: runs of zeros, text,
/// counters and noise.
fn disk_like(len: usize, seed: u64) -> Vec<u8> {
    let noise = rigs::bytes::pattern(seed | 1, 1 << 16);
    let mut out = Vec::with_capacity(len);
    let mut i = 0usize;
    while out.len() < len {
        i += 1;
        match (seed as usize + i) % 5 {
            0 => out.resize(out.len() + (i * 7919) % 20000, 0),
            1 => out.extend_from_slice(b"ddx writes images: zstd, xz, gzip; bmap; tee. "),
            2 => out.extend((0..3000u32).flat_map(|k| (k + i as u32).to_le_bytes())),
            _ => out.extend_from_slice(&noise[(i * 4099) % 60000..][..(i * 31) % 5000]),
        }
    }
    out.truncate(len);
    out
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Compress `data` into `path` with ddx's end.
fn ddx_compress(data: &[u8], path: &Path, spec: &str) {
    let mut end: Box<dyn Stream> = Box::new(Compressed::start(
        create(path),
        Compression::parse(spec).unwrap(),
        2,
    ));
    for chunk in data.chunks(BS + 7) {
        assert_eq!(end.write(chunk).unwrap(), chunk.len());
    }
    end.sync(true).unwrap();
    end.close().unwrap();
}

fn ddx_decompress(path: &Path) -> Decompressed {
    ddx_decompress_checking(path, FrameChecksums::Verify)
}

fn ddx_decompress_checking(path: &Path, checksums: FrameChecksums) -> Decompressed {
    let name = path.display().to_string();
    match image::open(open(path), &name, Mode::Required, 2, checksums).unwrap() {
        Opened::Decompressing(d) => d,
        Opened::Plain(_) => panic!("{path:?} is compressed"),
    }
}

/// Read everything in `bs` requests, each full but the last.
fn read_all(end: &mut dyn Stream, bs: usize) -> Result<Vec<u8>, Errno> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; bs];
    loop {
        let n = end.read(&mut buf)?;
        out.extend_from_slice(&buf[..n]);
        if n < bs {
            return Ok(out);
        }
    }
}

#[test]
fn what_ddx_compresses_the_tools_decompress_and_in_parallel_pieces() {
    if !rigs::tools_or_skip(&["zstd", "xz", "gzip"]) {
        return;
    }
    let dir = tempdir();
    let data = disk_like(40 << 20, 1);
    for (spec, tool, ext) in [
        ("zstd", "zstd", "zst"),
        ("xz:1", "xz", "xz"),
        ("gzip:1", "gzip", "gz"),
    ] {
        let packed = dir.path().join(format!("data.{ext}"));
        ddx_compress(&data, &packed, spec);
        let back = rigs::must_run(Command::new(tool).arg("-dc").arg(&packed));
        assert!(back == data, "{tool} -d gives back the bytes");
        // And through ddx's own end.
        let mut end = ddx_decompress(&packed);
        assert!(read_all(&mut end, 65537).unwrap() == data, "{spec}");
        Box::new(end).close().unwrap();
    }
    let frames = String::from_utf8(rigs::must_run(
        Command::new("zstd")
            .arg("-l")
            .arg(dir.path().join("data.zst")),
    ))
    .unwrap();
    let count: u32 = frames
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(count >= 3, "several zstd frames: {frames}");
    let blocks = String::from_utf8(rigs::must_run(
        Command::new("xz")
            .args(["-l", "--robot"])
            .arg(dir.path().join("data.xz")),
    ))
    .unwrap();
    let file = blocks.lines().find(|l| l.starts_with("file\t")).unwrap();
    let count: u32 = file.split('\t').nth(2).unwrap().parse().unwrap();
    assert!(count >= 3, "several xz blocks: {file}");
}

#[test]
fn what_the_tools_compress_ddx_decompresses() {
    let dir = tempdir();
    let data = disk_like(24 << 20, 2);
    let raw = dir.path().join("data");
    std::fs::write(&raw, &data).unwrap();
    let cases: [(&str, &[&str]); 9] = [
        ("zstd", &["-q", "-T0", "-c"]),
        ("pzstd", &["-q", "-p", "2", "-c"]),
        ("xz", &["-T2", "-1", "-c"]),
        ("xz", &["-0", "-c"]),
        ("gzip", &["-c"]),
        ("pigz", &["-c"]),
        ("bzip2", &["-1", "-c"]),
        ("lz4", &["-q", "-c"]),
        ("lz4", &["-q", "-l", "-c"]),
    ];
    for (tool, args) in cases {
        if !rigs::tools_or_skip(&[tool]) {
            continue;
        }
        let packed = dir.path().join("packed");
        let bytes = rigs::must_run(Command::new(tool).args(args).arg(&raw));
        std::fs::write(&packed, &bytes).unwrap();
        let mut end = ddx_decompress(&packed);
        let progress = end.progress();
        assert!(
            read_all(&mut end, 4 << 20).unwrap() == data,
            "{tool} {args:?}"
        );
        assert_eq!(progress.consumed(), bytes.len() as u64);
        assert_eq!(progress.total, Some(bytes.len() as u64));
        Box::new(end).close().unwrap();
    }
}

/// `len` bytes in 1 MiB steps, each 768 KiB of fresh bytes (noise, or
/// `disk_like`'s compressible ones) and 256 KiB repeated from 1.5 MiB
/// before: matches that reach back across the block decoder's pieces.
fn with_far_repeats(len: usize, noisy: bool) -> Vec<u8> {
    let mut out = if noisy {
        rigs::bytes::pattern(7, len)
    } else {
        disk_like(len, 5)
    };
    let mut at = 2 << 20;
    while at + (1 << 20) <= len {
        let to = at + (768 << 10);
        out.copy_within(to - (3 << 19)..to - (3 << 19) + (256 << 10), to);
        at += 1 << 20;
    }
    out
}

#[test]
fn a_zstd_frame_without_its_size_decodes_as_zstd_decodes_it_held_or_streamed() {
    if !rigs::tools_or_skip(&["zstd"]) {
        return;
    }
    let dir = tempdir();
    let raw = dir.path().join("data");
    let packed = dir.path().join("data.zst");
    // One frame that does not say its size (as the zstd tool writes from
    // a pipe), so it is decoded block by block: 12 MiB by a worker, which
    // holds the frame; 48 MiB, mostly noise, by the dispatcher as it reads,
    // since the frame's end is not within what it may hold.
    for (len, noisy) in [(12 << 20, false), (48 << 20, true)] {
        let data = with_far_repeats(len, noisy);
        std::fs::write(&raw, &data).unwrap();
        let bytes = rigs::must_run(
            Command::new("zstd")
                .args(["-q", "-c", "--no-content-size"])
                .arg(&raw),
        );
        assert_eq!(
            bytes.len() > image::decompress::MAX_FRAME_IN_MEMORY,
            noisy,
            "{len}: {} compressed bytes",
            bytes.len()
        );
        std::fs::write(&packed, &bytes).unwrap();
        let oracle = rigs::must_run(Command::new("zstd").args(["-d", "-q", "-c"]).arg(&packed));
        assert!(oracle == data, "zstd -d gives the data back");
        let mut end = ddx_decompress(&packed);
        assert!(read_all(&mut end, 1 << 20).unwrap() == oracle, "{len}");
        Box::new(end).close().unwrap();

        // Damaged in the middle, then cut short: refused, naming where.
        let mut damaged = bytes.clone();
        let middle = damaged.len() / 2;
        for b in &mut damaged[middle..middle + 64] {
            *b ^= 0x5A;
        }
        for (what, broken) in [
            ("damaged", damaged),
            ("cut", bytes[..bytes.len() * 2 / 3].to_vec()),
        ] {
            std::fs::write(&packed, &broken).unwrap();
            let tested = Command::new("zstd")
                .arg("-t")
                .arg(&packed)
                .output()
                .unwrap();
            assert!(
                !tested.status.success(),
                "zstd -t refuses the {what} file too"
            );
            let mut end = ddx_decompress(&packed);
            assert_eq!(
                read_all(&mut end, 1 << 20),
                Err(Errno::BADMSG),
                "{len} {what}"
            );
            let detail = end.take_detail().unwrap();
            assert!(
                detail.starts_with("corrupt zstd data at compressed offset "),
                "{len} {what}: {detail}"
            );
        }
    }
}

#[test]
fn a_wrong_frame_checksum_is_refused_unless_a_map_makes_it_redundant() {
    if !rigs::tools_or_skip(&["zstd"]) {
        return;
    }
    let dir = tempdir();
    let data = disk_like(12 << 20, 4);
    let raw = dir.path().join("data");
    std::fs::write(&raw, &data).unwrap();
    let packed = dir.path().join("data.zst");
    // A frame that says its size (decoded in one call by a worker) and one
    // that does not (block by block).
    for args in [&["-q", "-c"][..], &["-q", "-c", "--no-content-size"][..]] {
        let mut bytes = rigs::must_run(Command::new("zstd").args(args).arg(&raw));
        let len = bytes.len();
        bytes[len - 1] ^= 0x5A;
        std::fs::write(&packed, &bytes).unwrap();
        let mut end = ddx_decompress(&packed);
        assert_eq!(read_all(&mut end, 1 << 20), Err(Errno::BADMSG), "{args:?}");
        let detail = end.take_detail().unwrap();
        assert!(detail.contains("checksum"), "{args:?}: {detail}");
        let mut end = ddx_decompress_checking(&packed, FrameChecksums::Redundant);
        assert!(read_all(&mut end, 1 << 20).unwrap() == data, "{args:?}");
    }
}

#[test]
fn a_damaged_file_is_an_error_naming_its_compressed_offset_as_the_tool_finds_it_damaged() {
    if !rigs::tools_or_skip(&["zstd", "xz"]) {
        return;
    }
    let dir = tempdir();
    let data = disk_like(8 << 20, 3);
    let raw = dir.path().join("data");
    std::fs::write(&raw, &data).unwrap();
    for (tool, args) in [("zstd", &["-q", "-c"][..]), ("xz", &["-c"][..])] {
        let mut bytes = rigs::must_run(Command::new(tool).args(args).arg(&raw));
        let middle = bytes.len() / 2;
        for b in &mut bytes[middle..middle + 32] {
            *b ^= 0x5A;
        }
        let packed = dir.path().join("damaged");
        std::fs::write(&packed, &bytes).unwrap();
        let tested = Command::new(tool).arg("-t").arg(&packed).output().unwrap();
        assert!(!tested.status.success(), "{tool} -t finds it damaged too");
        let mut end = ddx_decompress(&packed);
        assert_eq!(read_all(&mut end, 1 << 20), Err(Errno::BADMSG), "{tool}");
        let detail = end.take_detail().unwrap();
        assert!(
            detail.starts_with(&format!("corrupt {tool} data at compressed offset ")),
            "{detail}"
        );
    }
}

/// A real ext4 image of `size` bytes, about half full, made without
/// mounting (mkfs.ext4 -d), as a sparse file; None if mkfs.ext4 is
/// missing.
fn ext4_image(dir: &Path, size: u64) -> Option<PathBuf> {
    if !rigs::tools_or_skip(&["mkfs.ext4"]) {
        return None;
    }
    let mut files: Vec<(String, Vec<u8>)> = (0..6u64)
        .map(|n| (format!("file{n}"), disk_like((size / 16) as usize, n + 10)))
        .collect();
    files.push(("sub/small".to_owned(), b"hello".to_vec()));
    Some(rigs::images::ext4_image(dir, size, &files))
}

/// For the bmaptool tests: a 64 MiB [`ext4_image`] in a fresh directory
/// and bmaptool's map of it: (the directory, the image, the map); None
/// after skipping when bmaptool, zstd or mkfs.ext4 is missing.
fn mapped_ext4_image() -> Option<(tempfile::TempDir, PathBuf, PathBuf)> {
    if !rigs::tools_or_skip(&["bmaptool", "zstd"]) {
        return None;
    }
    let dir = tempdir();
    let image = ext4_image(dir.path(), 64 << 20)?;
    let map = dir.path().join("bmaptool.bmap");
    rigs::images::bmaptool_create(&image, &map);
    Some((dir, image, map))
}

fn sha(path: &Path) -> String {
    rigs::bytes::sha256(path)
}

#[test]
fn bmaptools_map_of_a_real_image_is_read_checked_and_leaves_out_the_holes() {
    let Some((dir, image, map_path)) = mapped_ext4_image() else {
        return;
    };
    let map = Arc::new(Bmap::read(&map_path).unwrap());
    assert!(map.ranges.len() >= 3);
    assert!(map.mapped_bytes() < map.image_size / 2 + (4 << 20));
    let file = map_path.display().to_string();

    // The raw image: every range checked, only mapped bytes read.
    let out = dir.path().join("out.img");
    let filter = BmapFilter::new(open(&image), Arc::clone(&map), "ext4.img", &file).unwrap();
    copy(Box::new(filter), create(&out), true).unwrap();
    assert_eq!(sha(&out), sha(&image));

    // Compressed by zstd: the same, through the decompressed stream.
    let packed = rigs::images::packed(&image, "zstd", "zst");
    let filter = BmapFilter::new(
        Box::new(ddx_decompress(&packed)),
        Arc::clone(&map),
        "ext4.img.zst",
        &file,
    )
    .unwrap();
    let out = dir.path().join("out2.img");
    copy(Box::new(filter), create(&out), true).unwrap();
    assert_eq!(sha(&out), sha(&image));

    // A flipped byte in a mapped block: refused, naming the range.
    let (first, last) = (map.ranges[1].first, map.ranges[1].last);
    let flip_at = first * 4096 + 100;
    let mut bytes = std::fs::read(&image).unwrap();
    bytes[flip_at as usize] ^= 0xFF;
    let damaged = dir.path().join("damaged.img");
    std::fs::write(&damaged, &bytes).unwrap();
    let filter = BmapFilter::new(open(&damaged), Arc::clone(&map), "damaged.img", &file).unwrap();
    let (errno, detail) = copy(Box::new(filter), create(&dir.path().join("x")), true).unwrap_err();
    assert_eq!(errno, Errno::BADMSG);
    let detail = detail.unwrap();
    assert!(
        detail.starts_with(&format!(
            "blocks {first}-{last} (image bytes {} to ",
            first * 4096
        )),
        "{detail}"
    );
    // bmaptool refuses it too.
    let refused = Command::new("bmaptool")
        .args(["-q", "copy", "--bmap"])
        .arg(&map_path)
        .arg(&damaged)
        .arg(dir.path().join("y"))
        .output()
        .unwrap();
    assert!(!refused.status.success());

    // A map for another image size is refused at once.
    let short = dir.path().join("short.img");
    std::fs::write(&short, &bytes[..1 << 20]).unwrap();
    let err = BmapFilter::new(open(&short), map, "short.img", &file).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "--bmap={file}: the map is for a 67108864-byte image, but short.img is 1048576 bytes"
        )
    );
}

/// Record a map of `input` through the copy loop and write it to `path`.
fn record(input: Box<dyn Stream>, path: &Path, size: u64, skip_holes: bool) -> Bmap {
    let (recorder, slot) = BmapRecorder::new(input, 4096, 0);
    let sink = create(Path::new("/dev/null"));
    copy(Box::new(recorder), sink, skip_holes).unwrap();
    let map = slot.lock().unwrap().take().unwrap().finish(size).unwrap();
    std::fs::write(path, map.to_xml()).unwrap();
    map
}

#[test]
fn the_map_ddx_records_is_bmaptools_own_and_bmaptool_copies_with_it() {
    let Some((dir, image, theirs)) = mapped_ext4_image() else {
        return;
    };
    let size = 64 << 20;
    let theirs = Bmap::read(&theirs).unwrap();

    // From the file's extents: the same ranges and digests as bmaptool's.
    let ours_path = dir.path().join("ours.bmap");
    let ours = record(open(&image), &ours_path, size, true);
    assert_eq!(ours.ranges, theirs.ranges);
    let out = dir.path().join("copied.img");
    rigs::images::bmaptool_copy(&ours_path, &image, &out);
    assert_eq!(sha(&out), sha(&image));

    // From a stream (no extents): zero blocks are holes; still a map
    // bmaptool copies with, checking every range.
    let packed = rigs::images::packed(&image, "zstd", "zst");
    let stream_path = dir.path().join("stream.bmap");
    let from_stream = record(Box::new(ddx_decompress(&packed)), &stream_path, size, false);
    assert!(from_stream.mapped_blocks() <= theirs.mapped_blocks());
    assert!(from_stream.mapped_blocks() > theirs.mapped_blocks() / 2);
    let out = dir.path().join("copied2.img");
    rigs::images::bmaptool_copy(&stream_path, &image, &out);
    assert_eq!(sha(&out), sha(&image));
}

#[test]
fn a_version_1_3_map_is_read_as_bmaptool_reads_it() {
    if !rigs::tools_or_skip(&["bmaptool", "sha1sum"]) {
        return;
    }
    let dir = tempdir();
    let image = dir.path().join("small.img");
    let mut bytes = vec![0u8; 40960];
    bytes[4096..12288].copy_from_slice(&disk_like(8192, 5));
    bytes[36864..].fill(0x33);
    std::fs::write(&image, &bytes).unwrap();
    let sha1 = |data: &[u8]| {
        let piece = dir.path().join("piece");
        std::fs::write(&piece, data).unwrap();
        String::from_utf8(rigs::must_run(Command::new("sha1sum").arg(&piece))).unwrap()[..40]
            .to_owned()
    };
    let text = format!(
        "<?xml version=\"1.0\" ?>\n<bmap version=\"1.3\">\n    <ImageSize> 40960 </ImageSize>\n    \
         <BlockSize> 4096 </BlockSize>\n    <BlocksCount> 10 </BlocksCount>\n    \
         <MappedBlocksCount> 3 </MappedBlocksCount>\n    <BmapFileSHA1> {} </BmapFileSHA1>\n    \
         <BlockMap>\n        <Range sha1=\"{}\"> 1-2 </Range>\n        <Range sha1=\"{}\"> 9 </Range>\n    \
         </BlockMap>\n</bmap>\n",
        "0".repeat(40),
        sha1(&bytes[4096..12288]),
        sha1(&bytes[36864..])
    );
    let own = sha1(text.as_bytes());
    let map_path = dir.path().join("old.bmap");
    std::fs::write(&map_path, text.replace(&"0".repeat(40), &own)).unwrap();
    // bmaptool takes it (it checks the file's SHA-1 and each range's)...
    let out = dir.path().join("out.img");
    rigs::images::bmaptool_copy(&map_path, &image, &out);
    // ...and so does ddx, checking both ranges.
    let map = Arc::new(Bmap::read(&map_path).unwrap());
    assert_eq!(map.version, (1, 3));
    let mut filter = BmapFilter::new(open(&image), map, "small.img", "old.bmap").unwrap();
    assert!(read_all(&mut filter, 4096).unwrap() == bytes);
    assert_eq!((filter.verified, filter.unverified), (2, 0));
}

#[test]
fn tee_gives_every_output_the_bytes_and_drops_one_that_fills_up() {
    let dir = tempdir();
    let data = disk_like(8 << 20, 6);
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    let small = match rigs::SmallTmpfs::new(1 << 20) {
        Ok(small) => Some(small),
        Err(why) => {
            rigs::skip(&why);
            None
        }
    };
    let mut extras = vec![
        ("second".to_owned(), create(&second)),
        ("/dev/full".to_owned(), read_write(Path::new("/dev/full"))),
    ];
    if let Some(small) = &small {
        extras.push(("small".to_owned(), create(&small.path().join("third"))));
    }
    let mut tee = Tee::new(create(&first), extras);
    let report = tee.report();
    for chunk in data.chunks(256 << 10) {
        assert_eq!(tee.write(chunk).unwrap(), chunk.len());
    }
    tee.sync(true).unwrap();
    Box::new(tee).close().unwrap();
    assert!(std::fs::read(&first).unwrap() == data);
    assert!(std::fs::read(&second).unwrap() == data);
    let lines = report.lines(None);
    assert_eq!(lines[0], "second: 8388608 bytes (8.4 MB, 8.0 MiB) copied");
    assert_eq!(
        lines[1],
        "/dev/full: dropped after 0 bytes: write failed: No space left on device"
    );
    if small.is_some() {
        assert!(
            lines[2].starts_with("small: dropped after "),
            "{}",
            lines[2]
        );
        assert!(
            lines[2].ends_with("write failed: No space left on device"),
            "{}",
            lines[2]
        );
        assert!(report.outputs[2].bytes() <= 1 << 20);
    }
    assert!(report.any_failed());
}

#[test]
fn the_first_mib_of_a_device_is_written_last_and_an_interrupted_write_looks_blank() {
    if let Some(why) = rigs::LoopDevice::unavailable() {
        rigs::skip(&why);
        return;
    }
    if !rigs::tools_or_skip(&["blkid", "sfdisk"]) {
        return;
    }
    let dir = tempdir();
    // A card with an old image on it (a DOS partition table), and a new
    // image with a table of its own.
    let with_table = |path: &Path, fill: Vec<u8>, table: &str| {
        std::fs::write(path, fill).unwrap();
        let mut sfdisk = Command::new("sfdisk")
            .arg("-q")
            .arg(path)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        sfdisk
            .stdin
            .take()
            .unwrap()
            .write_all(table.as_bytes())
            .unwrap();
        assert!(sfdisk.wait().unwrap().success());
        std::fs::read(path).unwrap()
    };
    let backing = dir.path().join("disk");
    let old = with_table(&backing, vec![0x11u8; 8 << 20], "label: dos\n,4M,83\n");
    let new = with_table(
        &dir.path().join("new.img"),
        disk_like(6 << 20, 7),
        "label: dos\n,2M,c\n",
    );
    let device = rigs::LoopDevice::attach(&backing, Default::default()).unwrap();
    let probe = || {
        let out = Command::new("blkid")
            .args(["-p", "-o", "value", "-s", "PTTYPE"])
            .arg(&device.path)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(probe(), "dos", "the old table is seen");

    // Interrupted after 3 MiB: nothing looks like a partitioned disk.
    let mut safe = SafeOrder::new(read_write(&device.path)).unwrap();
    for chunk in new[..3 << 20].chunks(BS) {
        safe.write(chunk).unwrap();
    }
    Box::new(safe).abandon();
    assert_eq!(probe(), "", "no partition table after an interrupted write");
    let now = std::fs::read(&device.path).unwrap();
    assert!(now[..1 << 20].iter().all(|&b| b == 0));
    assert!(now[1 << 20..3 << 20] == new[1 << 20..3 << 20]);

    // Completed: the whole image, the table last.
    let safe = SafeOrder::new(read_write(&device.path)).unwrap();
    let input = dir.path().join("new.img");
    copy(open(&input), Box::new(safe), false).unwrap();
    let now = std::fs::read(&device.path).unwrap();
    assert!(now[..new.len()] == new[..]);
    assert!(now[new.len()..] == old[new.len()..]);
    assert_eq!(probe(), "dos");
}
