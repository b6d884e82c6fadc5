//! A resume that continues its own copy and no other: the map records
//! the copy's input and output, and `--resume` refuses, before a byte is
//! written, an input that differs (its size, another file, the same file
//! modified since, another disk behind a loop device, another URI, for a
//! copy by position and an upload alike) and an output the map's copy
//! did not write, naming the one it did. A map named but not there is
//! said in one line: the copy starts over.

use std::path::{Path, PathBuf};

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cmd::operand;
use crate::rigs::fixture::{Ddx, Ran};

const SIZE: usize = 1 << 20;

/// ddx (named "dd") copying `input` to `output` by position, its map
/// `map`, resuming where one is.
fn resumable(input: &Path, output: &Path, map: &Path) -> Ddx {
    Ddx::as_dd()
        .arg(operand("if", input))
        .arg(operand("of", output))
        .arg(operand("--map", map))
        .args(["--resume", "bs=64k"])
}

/// A finished copy of a fresh input (`SIZE` bytes of `seed`'s pattern)
/// with its map, in `dir`: (input, output, map).
fn copied(dir: &Path, seed: u64) -> (PathBuf, PathBuf, PathBuf) {
    let input = dir.join("in.img");
    let output = dir.join("out.img");
    let map = dir.join("out.map");
    std::fs::write(&input, pattern(seed, SIZE)).unwrap();
    resumable(&input, &output, &map).succeeds();
    (input, output, map)
}

/// The refusal of a resumed copy: exit 1, one line naming the map and
/// saying `what`, and the output's bytes as they were.
#[track_caller]
fn refused(ddx: Ddx, output: &Path, what: &str) -> Ran {
    let before = std::fs::read(output).ok();
    let ran = ddx.fails_with(what);
    let lines: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.contains("--resume"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", ran.stderr);
    assert!(lines[0].contains("remove the map"), "{}", ran.stderr);
    assert!(
        !ran.stderr.contains("records in"),
        "it copied: {}",
        ran.stderr
    );
    assert_eq!(std::fs::read(output).ok(), before, "the output was written");
    ran
}

/// Another file of the same size (the 1 GiB of the report, in small):
/// the map's copy read another input, and the resume says so instead of
/// joining two inputs' bytes.
#[test]
fn resume_refuses_another_input_of_the_same_size() {
    let dir = tempfile::tempdir().unwrap();
    let (_, output, map) = copied(dir.path(), 1);
    let other = dir.path().join("other.img");
    std::fs::write(&other, pattern(2, SIZE)).unwrap();
    let ran = refused(
        resumable(&other, &output, &map),
        &output,
        "is not the one the map's copy read",
    );
    ran.says("another file");
    ran.says("in.img");
    // Half done, as an interrupted copy leaves it: the other input's half
    // is not joined to the first one's.
    let text = std::fs::read_to_string(&map).unwrap();
    let half = SIZE / 2;
    let blocks = format!(
        "0x{half:08X}     ?               1\n0x00000000  0x{half:08X}  +\n0x{half:08X}  0x{half:08X}  ?\n"
    );
    let comments: String = text
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&map, format!("{comments}{blocks}")).unwrap();
    refused(
        resumable(&other, &output, &map),
        &output,
        "is not the one the map's copy read",
    );
}

/// An input of another size (the 64 MiB of the report): refused, and the
/// finished map and its output are left as they were.
#[test]
fn resume_refuses_an_input_of_another_size() {
    let dir = tempfile::tempdir().unwrap();
    let (_, output, map) = copied(dir.path(), 3);
    let small = dir.path().join("small.img");
    std::fs::write(&small, pattern(4, SIZE / 16)).unwrap();
    let ran = refused(
        resumable(&small, &output, &map),
        &output,
        &format!("is {} bytes", SIZE / 16),
    );
    ran.says(&format!("was {SIZE} bytes"));
    assert!(map.exists(), "the map was removed");
}

/// The same path, rewritten in place since (the same inode and size):
/// its modification time tells.
#[test]
fn resume_refuses_the_same_file_modified_since() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output, map) = copied(dir.path(), 5);
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&input, pattern(6, SIZE)).unwrap();
    refused(
        resumable(&input, &output, &map),
        &output,
        "modified since the map was saved",
    );
}

/// The same input resumes; so does the same file under another name.
#[test]
fn resume_goes_on_with_the_same_input_under_any_name() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output, map) = copied(dir.path(), 7);
    let ran = resumable(&input, &output, &map).succeeds();
    ran.says("resuming from");
    let linked = dir.path().join("linked.img");
    std::fs::hard_link(&input, &linked).unwrap();
    resumable(&linked, &output, &map).succeeds();
}

/// A loop device attached again over another file of the same size: the
/// same device node, another disk behind it.
#[test]
fn resume_refuses_a_loop_device_over_another_file() {
    if let Some(why) = rigs::LoopDevice::unavailable() {
        rigs::skip(&why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.img");
    let second = dir.path().join("second.img");
    std::fs::write(&first, pattern(8, SIZE)).unwrap();
    std::fs::write(&second, pattern(9, SIZE)).unwrap();
    let output = dir.path().join("out.img");
    let map = dir.path().join("out.map");
    let device = rigs::LoopDevice::attach(&first, rigs::LoopOptions::default()).unwrap();
    resumable(&device.path, &output, &map).succeeds();
    drop(device);
    // Another file, on the same node where the kernel gives it back.
    let again = rigs::LoopDevice::attach(&second, rigs::LoopOptions::default()).unwrap();
    refused(
        resumable(&again.path, &output, &map),
        &output,
        "is not the one the map's copy read",
    )
    .says("another disk");
}

/// Another export of the same size: the URI differs.
#[cfg(feature = "nbd")]
#[test]
fn resume_refuses_another_nbd_export() {
    let Some(server) = rigs::nbd::nbdkit(&["memory", "size=1M"]) else {
        return;
    };
    let Some(other) = rigs::nbd::nbdkit(&["memory", "size=1M"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.img");
    let map = dir.path().join("out.map");
    let run = |uri: &str| {
        Ddx::as_dd()
            .arg(format!("if={uri}"))
            .arg(operand("of", &output))
            .arg(operand("--map", &map))
            .args(["--resume", "bs=64k"])
    };
    run(&server.uri()).succeeds();
    run(&server.uri()).succeeds().says("resuming from");
    refused(run(&other.uri()), &output, "another URI");
}

/// An upload's map records its input too: a resume from another input is
/// refused before the server is asked anything (here there is none).
#[test]
fn an_upload_resumed_from_another_input_is_refused_before_the_server_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.img");
    std::fs::write(&input, pattern(10, 3 * SIZE)).unwrap();
    let map = dir.path().join("upload.map");
    std::fs::write(
        &map,
        format!(
            "# Mapfile. Created by ddx\n\
             # Command line: ddx if=in.img of=s3://bkt/k --map=upload.map\n\
             # Input: size={} file=8:1:12 modified=1.0 name=old.img\n\
             # Output: uri=s3://bkt/k name=s3://bkt/k\n\
             # ddx upload: 0000-upload\n\
             # ddx part: 1 1048576 1048576 \"0123\"\n\
             0x00100000     ?               1\n\
             0x00000000  0x00100000  +\n\
             0x00100000  0x00500000  ?\n",
            6 * SIZE
        ),
    )
    .unwrap();
    let ran = Ddx::as_dd()
        .arg(operand("if", &input))
        .args(["of=s3://bkt/k", "bs=1M", "--resume"])
        .arg(operand("--map", &map))
        // Nowhere to go: a request would fail with another message.
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .envs([
            ("AWS_ACCESS_KEY_ID", "ddxtest"),
            ("AWS_SECRET_ACCESS_KEY", "ddxtestsecret"),
        ])
        .fails_with(&format!("is {} bytes", 3 * SIZE));
    ran.says(&format!("was {} bytes", 6 * SIZE));
    // And to another key than the map's upload.
    Ddx::as_dd()
        .arg(operand("if", &input))
        .args(["of=s3://bkt/other", "bs=1M", "--resume"])
        .arg(operand("--map", &map))
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .fails_with("records an upload to 's3://bkt/k', not to 's3://bkt/other'");
}

/// A map made for `of=rescued.img` given with `of=out.img`: the message
/// names the file the map records and how to go on with it, and nothing
/// is created.
#[test]
fn a_map_given_with_another_output_names_the_one_it_records() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("disk.img");
    std::fs::write(&input, pattern(11, SIZE)).unwrap();
    let rescued = dir.path().join("rescued.img");
    let map = dir.path().join("rescued.map");
    Ddx::as_dd()
        .current_dir(dir.path())
        .args([
            "if=disk.img",
            "of=rescued.img",
            "--map=rescued.map",
            "bs=64k",
        ])
        .succeeds();
    let out = dir.path().join("out.img");
    let ran = Ddx::as_dd()
        .current_dir(dir.path())
        .args(["if=disk.img", "of=out.img", "--map=rescued.map", "--resume"])
        .fails_with("records a copy to 'rescued.img', not to 'out.img'");
    ran.says("give of=rescued.img to continue that copy");
    assert!(!out.exists(), "out.img was created");
    // Another file standing there is no better.
    std::fs::write(&out, b"something else").unwrap();
    Ddx::as_dd()
        .current_dir(dir.path())
        .args(["if=disk.img", "of=out.img", "--map=rescued.map", "--resume"])
        .fails_with("give of=rescued.img");
    assert_eq!(std::fs::read(&out).unwrap(), b"something else");
    // The map's output moved away: said so, and where to put it back.
    let moved = dir.path().join("moved.img");
    std::fs::rename(&rescued, &moved).unwrap();
    Ddx::as_dd()
        .current_dir(dir.path())
        .args([
            "if=disk.img",
            "of=rescued.img",
            "--map=rescued.map",
            "--resume",
        ])
        .fails_with("which is not there: put it back");
    // The same file under its new name goes on.
    Ddx::as_dd()
        .current_dir(dir.path())
        .args([
            "if=disk.img",
            "of=moved.img",
            "--map=rescued.map",
            "--resume",
        ])
        .succeeds();
    assert!(map.exists());
}

/// `--map`, `--resume` or both, with no map there: one line says that
/// the copy starts from the beginning (a mistyped name would re-read a
/// failing disk from its start unseen), then the copy runs; status=none
/// keeps it quiet.
#[test]
fn a_map_that_is_not_there_is_said_before_the_copy_starts_over() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.img");
    std::fs::write(&input, pattern(12, SIZE)).unwrap();
    let output = dir.path().join("out.img");
    for (args, said) in [
        (
            &["--map=typo.map", "--resume"][..],
            "dd: --resume: no map 'typo.map' yet: the copy starts from the beginning",
        ),
        (
            &["--map=fresh.map"],
            "dd: --map: no map 'fresh.map' yet: the copy starts from the beginning",
        ),
        (
            &["--resume"],
            "dd: --resume: no checkpoint 'out.img.ddx-map' yet: the copy starts from the \
             beginning",
        ),
        (
            &["--rescue", "--map=rescue.map", "--resume"],
            "dd: --resume: no map 'rescue.map' yet: the copy starts from the beginning",
        ),
    ] {
        let _ = std::fs::remove_file(&output);
        let ran = Ddx::as_dd()
            .current_dir(dir.path())
            .args(["if=in.img", "of=out.img", "bs=64k"])
            .args(args)
            .succeeds();
        let first = ran.stderr.lines().next().unwrap_or_default();
        assert!(first.starts_with(said), "{args:?}: {}", ran.stderr);
        assert_eq!(ran.stderr.matches("starts from the beginning").count(), 1);
        assert!(std::fs::read(&output).unwrap() == std::fs::read(&input).unwrap());
        for map in ["typo.map", "fresh.map", "rescue.map", "out.img.ddx-map"] {
            let _ = std::fs::remove_file(dir.path().join(map));
        }
    }
    let ran = Ddx::as_dd()
        .current_dir(dir.path())
        .args([
            "if=in.img",
            "of=out.img",
            "--map=quiet.map",
            "--resume",
            "status=none",
        ])
        .succeeds();
    assert_eq!(ran.stderr, "");
}
