//! A compressed input written as it is onto what takes it as a disk
//! image (the naive flash: `dd if=img.raw.xz of=/dev/sdb`): every format
//! ddx decodes, made by its own tool and told by its magic bytes, onto a
//! block device, an NBD export and a file named as the input without its
//! suffix, refused in one line naming the format and the options when no
//! one can be asked, nothing written; `--no-decompress` copying the bytes
//! as GNU dd does; and GNU's operands onto anything else as GNU's. The
//! question on a terminal is in `progress.rs`, beside the whole-disk one.

use std::path::{Path, PathBuf};

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cmd::operand;
use crate::rigs::fixture::{Compare, Ddx};

/// Every format ddx decodes: the tool that makes it, its suffix, and the
/// name ddx gives it.
const FORMATS: [(&str, &str, &str); 5] = [
    ("zstd", "zst", "zstd"),
    ("xz", "xz", "xz"),
    ("gzip", "gz", "gzip"),
    ("bzip2", "bz2", "bzip2"),
    ("lz4", "lz4", "lz4"),
];

/// `dir/img.raw` (bytes that compress, as a disk image does) and each
/// format's `dir/img.raw.SUFFIX`, made by its tool; None after skipping
/// for a missing tool.
fn packs(dir: &Path) -> Option<(PathBuf, Vec<(&'static str, PathBuf)>)> {
    let tools: Vec<&str> = FORMATS.iter().map(|(tool, _, _)| *tool).collect();
    if !rigs::tools_or_skip(&tools) {
        return None;
    }
    let raw = dir.join("img.raw");
    let mut bytes = pattern(3, 600_000);
    bytes[100_000..400_000].fill(0);
    std::fs::write(&raw, bytes).unwrap();
    let packed = FORMATS
        .iter()
        .map(|(tool, suffix, name)| (*name, rigs::images::packed(&raw, tool, suffix)))
        .collect();
    Some((raw, packed))
}

/// The one line of a refusal: exit 1, nothing else said.
#[track_caller]
fn refused(ran: &rigs::fixture::Ran, format: &str, output: &str) {
    assert_eq!(ran.status.code(), Some(1), "{}", ran.stderr);
    assert_eq!(ran.stderr.lines().count(), 1, "one line: {}", ran.stderr);
    for part in [
        format!("is {format}-compressed"),
        output.to_owned(),
        "--decompress".to_owned(),
        "--no-decompress".to_owned(),
    ] {
        assert!(ran.stderr.contains(&part), "{part:?} in {}", ran.stderr);
    }
}

#[test]
fn a_compressed_input_onto_a_block_device_is_refused_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let Some((raw, packed)) = packs(dir.path()) else {
        return;
    };
    let backing = dir.path().join("disk");
    let before = pattern(9, 1 << 20);
    std::fs::write(&backing, &before).unwrap();
    let Some(device) = rigs::or_skip(rigs::LoopDevice::attach(&backing, Default::default())) else {
        return;
    };
    let of = operand("of", &device.path);
    for (format, pack) in &packed {
        for extra in [&[][..], &["bs=4M", "status=progress"], &["conv=fsync"]] {
            let ran = Ddx::new()
                .arg(operand("if", pack))
                .arg(&of)
                .args(extra)
                .run();
            refused(
                &ran,
                format,
                &format!("of='{}' is a block device", device.name()),
            );
        }
        // Told by its bytes, not its name.
        let renamed = dir.path().join(format!("data-{format}.bin"));
        std::fs::copy(pack, &renamed).unwrap();
        let ran = Ddx::new().arg(operand("if", &renamed)).arg(&of).run();
        refused(&ran, format, "is a block device");
        // From a pipe, whose bytes are looked at and left for the copy.
        let ran = Ddx::new()
            .arg(&of)
            .stdin(std::fs::read(pack).unwrap())
            .run();
        refused(&ran, format, "standard input is");
    }
    assert!(
        std::fs::read(&device.path).unwrap() == before,
        "nothing was written"
    );
    // Not compressed, whatever its name: copied as GNU dd copies it.
    let plain = dir.path().join("plain.img.xz");
    std::fs::copy(&raw, &plain).unwrap();
    let reset = || std::fs::write(&device.path, &before).unwrap();
    Compare::new()
        .input_path(&plain)
        .args(["bs=64k"])
        .output_onto(&device.path)
        .before_each(reset)
        .succeeds();
    // And from a pipe, every byte of it, the first ones looked at.
    reset();
    let ran = Ddx::new()
        .arg(&of)
        .arg("bs=64k")
        .stdin(std::fs::read(&raw).unwrap())
        .succeeds();
    ran.says("600000 bytes (600 kB, 586 KiB) copied");
    let written = std::fs::read(&device.path).unwrap();
    assert!(written[..600_000] == std::fs::read(&raw).unwrap()[..]);
}

#[test]
fn no_decompress_copies_the_compressed_bytes_as_gnu_dd_does() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_raw, packed)) = packs(dir.path()) else {
        return;
    };
    let backing = dir.path().join("disk");
    let before = pattern(9, 1 << 20);
    std::fs::write(&backing, &before).unwrap();
    let Some(device) = rigs::or_skip(rigs::LoopDevice::attach(&backing, Default::default())) else {
        return;
    };
    let reset = || std::fs::write(&device.path, &before).unwrap();
    for (format, pack) in &packed {
        for operands in [&["bs=4M"][..], &["bs=512", "conv=fsync"]] {
            Compare::new()
                .input_path(pack)
                .args(operands)
                .ddx_args(["--no-decompress"])
                .output_onto(&device.path)
                .before_each(reset)
                .context(format!("{format} onto the device"))
                .succeeds();
        }
        // Onto the name without its suffix; the last option given wins.
        let named = dir.path().join("named").join("img.raw");
        std::fs::create_dir_all(named.parent().unwrap()).unwrap();
        Compare::new()
            .input_path(pack)
            .ddx_args(["--decompress", "--no-decompress"])
            .output_at(&named)
            .context(format!("{format} onto img.raw"))
            .succeeds();
        // From a pipe: the statistics' total (its records depend on timing).
        Compare::new()
            .stdin(std::fs::read(pack).unwrap())
            .ddx_args(["--no-decompress"])
            .args(["bs=64k"])
            .output_onto(&device.path)
            .before_each(reset)
            .total_only()
            .succeeds();
    }
}

#[test]
fn a_file_named_without_the_suffix_is_taken_for_the_image_and_refused() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_raw, packed)) = packs(dir.path()) else {
        return;
    };
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for (format, pack) in &packed {
        let name = pack.file_name().unwrap().to_string_lossy().into_owned();
        let unpacked = name.rsplit_once('.').unwrap().0.to_owned();
        // Created or existing, here or in another directory.
        let existing = out.join(&unpacked);
        std::fs::write(&existing, b"keep me").unwrap();
        for output in [out.join("new").join(&unpacked), existing.clone()] {
            std::fs::create_dir_all(out.join("new")).unwrap();
            let ran = Ddx::new()
                .arg(operand("if", pack))
                .arg(operand("of", &output))
                .run();
            let suffix = &name[unpacked.len()..];
            refused(
                &ran,
                format,
                &format!("is the input's name without '{suffix}'"),
            );
        }
        assert!(!out.join("new").join(&unpacked).exists(), "not created");
        assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
        std::fs::remove_file(&existing).unwrap();
    }
    // A tarball's short suffix stands for .tar.
    let tgz = dir.path().join("backup.tgz");
    std::fs::copy(&packed[2].1, &tgz).unwrap();
    let ran = Ddx::new()
        .arg(operand("if", &tgz))
        .arg(operand("of", &out.join("backup.tar")))
        .run();
    refused(&ran, "gzip", "without '.tgz'");
}

/// GNU's operands alone, onto a file that is no image of the input (or
/// standard output): GNU's bytes, statistics and status.
#[test]
fn gnu_operands_onto_anything_else_keep_gnus_behaviour() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_raw, packed)) = packs(dir.path()) else {
        return;
    };
    for (_, pack) in &packed {
        let bytes = std::fs::read(pack).unwrap();
        let name = pack.file_name().unwrap().to_string_lossy().into_owned();
        for operands in [&["bs=64k"][..], &["bs=1000", "skip=3", "count=50"]] {
            Compare::new()
                .file(&name, bytes.clone())
                .args([format!("if={name}")])
                .args(operands)
                .output_file()
                .succeeds();
            Compare::new()
                .file(&name, bytes.clone())
                .args([format!("if={name}")])
                .args(operands)
                .succeeds();
        }
        Compare::new()
            .stdin(bytes.clone())
            .output_file()
            .total_only()
            .succeeds();
    }
}

/// An NBD export is a disk on another machine.
#[cfg(feature = "nbd")]
#[test]
fn a_compressed_input_onto_an_nbd_export_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_raw, packed)) = packs(dir.path()) else {
        return;
    };
    let Some(server) = rigs::nbd::nbdkit(&["memory", "size=1M"]) else {
        return;
    };
    let uri = server.uri();
    let (format, pack) = &packed[1];
    let ran = Ddx::new()
        .arg(operand("if", pack))
        .arg(format!("of={uri}"))
        .run();
    refused(&ran, format, "is an NBD export");
    let back = rigs::nbd::nbdcopy_read(&uri, dir.path()).unwrap();
    assert!(back.iter().all(|&b| b == 0), "nothing was written");
    Ddx::new()
        .arg(operand("if", pack))
        .arg(format!("of={uri}"))
        .arg("--no-decompress")
        .succeeds();
    let back = rigs::nbd::nbdcopy_read(&uri, dir.path()).unwrap();
    let bytes = std::fs::read(pack).unwrap();
    assert!(back[..bytes.len()] == bytes[..]);
}
