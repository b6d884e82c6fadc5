//! NBD servers killed in the middle of a copy (nbdkit and qemu-nbd, on
//! Unix sockets): the failure is one line that names the export, the
//! offset and what happened (the connection lost), and a copy kept by
//! `--map` is continued by `--resume` once the server is back, at the
//! same URI, to the exact image.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cmd::ddx;
use crate::rigs::nbd::{tempdir, Server};

const MIB: usize = 1 << 20;

/// Wait (up to a minute) until `ready`, or fail saying `what`.
fn wait_until(mut ready: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether the first `len` bytes of `file` are `data`'s (what has
/// landed on the server's disk so far).
fn landed(file: &Path, data: &[u8], len: usize) -> bool {
    std::fs::read(file).is_ok_and(|disk| disk.len() >= len && disk[..len] == data[..len])
}

/// The one message of a failed copy (statistics left out).
#[track_caller]
fn one_line(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.contains(" records ") && !l.contains(" bytes ("))
        .collect();
    assert_eq!(lines.len(), 1, "one line wanted: {stderr}");
    lines[0].to_owned()
}

fn spawn(cmd: &mut std::process::Command) -> Child {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

#[test]
fn a_server_killed_under_a_write_or_a_read_is_named_with_the_offset() {
    if !rigs::tools_or_skip(&["nbdkit"]) {
        return;
    }
    let data = pattern(1, 24 * MIB);
    let dir = tempfile::tempdir().expect("tempdir");
    let source = dir.path().join("source");
    std::fs::write(&source, &data).expect("source");

    // Writing to nbdkit, slow writes: killed once some have landed.
    let server_dir = tempdir().expect("tempdir");
    let disk = server_dir.path().join("disk");
    std::fs::write(&disk, vec![0u8; data.len()]).expect("disk");
    let disk_arg = disk.display().to_string();
    let Some(mut server) = rigs::or_skip(Server::nbdkit_in(
        server_dir,
        &[
            "--threads=1",
            "--filter=delay",
            "file",
            &disk_arg,
            "wdelay=50ms",
        ],
    )) else {
        return;
    };
    let uri = server.uri();
    let copy = spawn(
        ddx()
            .arg(format!("if={}", source.display()))
            .arg(format!("of={uri}"))
            .arg("bs=1M"),
    );
    wait_until(|| landed(&disk, &data, 2 * MIB), "nothing landed");
    server.kill();
    let out = copy.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = one_line(&stderr);
    assert!(line.contains(&format!("error writing '{uri}'")), "{line}");
    assert!(line.contains("at offset "), "{line}");
    assert!(
        line.contains("the connection to the server was lost"),
        "{line}"
    );

    // Reading from nbdkit, one slow read at a time: killed in the middle.
    let server_dir = tempdir().expect("tempdir");
    let image = server_dir.path().join("image");
    std::fs::write(&image, &data).expect("image");
    let image_arg = image.display().to_string();
    let slow_reads = [
        "--threads=1",
        "--filter=delay",
        "file",
        &image_arg,
        "rdelay=100ms",
    ];
    let Some(mut input) = rigs::or_skip(Server::nbdkit_in(server_dir, &slow_reads)) else {
        return;
    };
    let uri = input.uri();
    let out_file = dir.path().join("out");
    let copy = spawn(
        ddx()
            .arg(format!("if={uri}"))
            .arg(format!("of={}", out_file.display()))
            .arg("bs=1M"),
    );
    wait_until(|| landed(&out_file, &data, MIB), "nothing read");
    input.kill();
    let out = copy.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = one_line(&stderr);
    assert!(line.contains(&format!("error reading '{uri}'")), "{line}");
    assert!(line.contains("at offset "), "{line}");
    assert!(
        line.contains("the connection to the server was lost"),
        "{line}"
    );

    // Writing to qemu-nbd, fed by that slow input again: killed once
    // some has landed.
    if !rigs::tools_or_skip(&["qemu-nbd"]) {
        return;
    }
    let input_dir = tempdir().expect("tempdir");
    let image = input_dir.path().join("image");
    std::fs::write(&image, &data).expect("image");
    let image_arg = image.display().to_string();
    let slow_reads = [
        "--threads=1",
        "--filter=delay",
        "file",
        &image_arg,
        "rdelay=100ms",
    ];
    let Some(input) = rigs::or_skip(Server::nbdkit_in(input_dir, &slow_reads)) else {
        return;
    };
    let server_dir = tempdir().expect("tempdir");
    let disk = server_dir.path().join("disk");
    std::fs::write(&disk, vec![0u8; data.len()]).expect("disk");
    let disk_arg = disk.display().to_string();
    let Some(mut qemu) = rigs::or_skip(Server::qemu_nbd_in(
        server_dir,
        &["--format=raw", "--cache=writethrough", &disk_arg],
    )) else {
        return;
    };
    let uri = qemu.uri();
    let copy = spawn(
        ddx()
            .arg(format!("if={}", input.uri()))
            .arg(format!("of={uri}"))
            .arg("bs=1M"),
    );
    wait_until(|| landed(&disk, &data, MIB), "nothing written");
    qemu.kill();
    let out = copy.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = one_line(&stderr);
    assert!(line.contains(&format!("error writing '{uri}'")), "{line}");
    assert!(
        line.contains("the connection to the server was lost"),
        "{line}"
    );
}

#[test]
fn a_mapped_copy_onto_a_killed_export_resumes_from_its_map_once_the_server_is_back() {
    if !rigs::tools_or_skip(&["nbdkit"]) {
        return;
    }
    let data = pattern(2, 24 * MIB);
    let dir = tempfile::tempdir().expect("tempdir");
    let source = dir.path().join("source");
    std::fs::write(&source, &data).expect("source");
    let map = dir.path().join("copy.map");
    let server_dir = tempdir().expect("tempdir");
    let disk = server_dir.path().join("disk");
    std::fs::write(&disk, vec![0u8; data.len()]).expect("disk");
    let disk_arg = disk.display().to_string();
    let slow = [
        "--threads=1",
        "--filter=delay",
        "file",
        &disk_arg,
        "wdelay=100ms",
    ];
    let Some(mut server) = rigs::or_skip(Server::nbdkit_in(server_dir, &slow)) else {
        return;
    };
    let uri = server.uri();
    let copy = |resume: bool| {
        let mut cmd = ddx();
        cmd.arg(format!("if={}", source.display()))
            .arg(format!("of={uri}"))
            .arg(format!("--map={}", map.display()))
            .arg("bs=1M");
        if resume {
            cmd.arg("--resume");
        }
        cmd
    };
    let first = spawn(&mut copy(false));
    let finished = || std::fs::read_to_string(&map).is_ok_and(|m| m.contains("  +"));
    wait_until(finished, "the map never recorded a finished range");
    server.kill();
    let out = first.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("continue with --resume"), "{stderr}");
    server
        .restart_nbdkit(&["file", &disk_arg])
        .expect("the server again");
    let out = copy(true).output().expect("ddx");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("resuming from "), "{stderr}");
    // The disk is in the server's directory, which goes with it.
    let image = std::fs::read(&disk).expect("disk");
    drop(server);
    assert!(image == data, "not the exact image");
}
