//! Copies to and from objects through the command line (`of=s3://...`,
//! `if=s3://...`, `if=http://...`) against a real s3s-fs on loopback:
//! GNU dd over the same bytes as a local file is the oracle for records
//! and statistics, and what s3s-fs keeps on its disk the oracle for what
//! was stored; refusals, interruptions and failures must leave neither an
//! object nor a pending multipart upload; secrets must not reach stderr,
//! `--verbose` or the progress JSON.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cmd::{ddx, gnu_dd};
use crate::rigs::fixture::statistics;
use crate::rigs::object::{S3Server, ShortHttpServer};

const MIB: usize = 1 << 20;

/// ddx with the environment that points it at `server` (and no shared
/// files).
fn ddx_for(server: &S3Server) -> Command {
    let mut cmd = ddx();
    cmd.env("HOME", "/nonexistent")
        .env("AWS_MAX_ATTEMPTS", "2")
        .envs(server.env());
    cmd
}

struct Done {
    code: Option<i32>,
    stderr: String,
    stdout: Vec<u8>,
}

fn run(mut cmd: Command) -> Done {
    let out = cmd.stdin(Stdio::null()).output().expect("run");
    Done {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        stdout: out.stdout,
    }
}

/// GNU dd's statistics for `operands` over the file `input` (to a file
/// beside it).
fn gnu_statistics(
    dir: &std::path::Path,
    input: &std::path::Path,
    operands: &[&str],
) -> Vec<String> {
    let out = gnu_dd()
        .arg(format!("if={}", input.display()))
        .arg(format!("of={}", dir.join("gnu.out").display()))
        .args(operands)
        .output()
        .expect("GNU dd");
    assert!(out.status.success(), "GNU dd {operands:?}");
    statistics(&String::from_utf8_lossy(&out.stderr))
}

#[test]
fn uploads_and_downloads_give_gnus_records_and_statistics() {
    let Some(server) = rigs::or_skip(S3Server::start()) else {
        return;
    };
    server.bucket("bkt");
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(21, 37 * MIB + 1234);
    let input = dir.path().join("in");
    std::fs::write(&input, &data).expect("input");
    let cases: &[&[&str]] = &[
        &["bs=8M"],
        &["bs=512"],
        &["ibs=4096", "obs=10000"],
        &["bs=64k", "skip=3", "count=100"],
        &[
            "bs=1M",
            "skip=12345",
            "count=3000000",
            "iflag=skip_bytes,count_bytes",
        ],
    ];
    for (n, operands) in cases.iter().enumerate() {
        let gnu = gnu_statistics(dir.path(), &input, operands);
        let expected = std::fs::read(dir.path().join("gnu.out")).expect("GNU's output");

        let key = format!("up-{n}");
        let mut up = ddx_for(&server);
        up.arg(format!("if={}", input.display()))
            .arg(format!("of=s3://bkt/{key}"))
            .args(*operands);
        let done = run(up);
        assert_eq!(done.code, Some(0), "{operands:?}: {}", done.stderr);
        assert_eq!(statistics(&done.stderr), gnu, "upload {operands:?}");
        let stored = std::fs::read(server.object_file("bkt", &key)).expect("stored");
        assert!(
            stored == expected,
            "upload {operands:?}: other bytes stored"
        );

        // Down, from an object of the input's bytes.
        let source = server.object_file("bkt", "source");
        std::fs::write(&source, &data).expect("seed");
        let out = dir.path().join(format!("down-{n}"));
        let mut down = ddx_for(&server);
        down.arg("if=s3://bkt/source")
            .arg(format!("of={}", out.display()))
            .args(*operands);
        let done = run(down);
        assert_eq!(done.code, Some(0), "{operands:?}: {}", done.stderr);
        assert_eq!(statistics(&done.stderr), gnu, "download {operands:?}");
        assert!(
            std::fs::read(&out).expect("out") == expected,
            "download {operands:?}"
        );
    }
    assert_eq!(server.pending_uploads(), Vec::<String>::new());

    // To a pipe and to a character device, record by record.
    let gnu = gnu_statistics(dir.path(), &input, &["bs=4k"]);
    let mut piped = ddx_for(&server);
    piped.args(["if=s3://bkt/source", "bs=4k"]);
    let done = run(piped);
    assert_eq!(done.code, Some(0), "{}", done.stderr);
    assert_eq!(statistics(&done.stderr), gnu);
    assert!(done.stdout == data, "stdout: other bytes");
    let mut to_null = ddx_for(&server);
    to_null.args(["if=s3://bkt/source", "of=/dev/null", "bs=4k"]);
    let done = run(to_null);
    assert_eq!(statistics(&done.stderr), gnu, "{}", done.stderr);
}

#[test]
fn operands_an_object_cannot_honour_are_refused_before_anything_is_written() {
    let Some(server) = rigs::or_skip(S3Server::start()) else {
        return;
    };
    let bucket = server.bucket("bkt");
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in");
    std::fs::write(&input, pattern(1, 20 * MIB)).expect("input");
    let old = b"the object as it was".to_vec();
    std::fs::write(bucket.join("kept"), &old).expect("seed");
    let cases: &[(&[&str], &str)] = &[
        (&["seek=1"], "of=s3://bkt/kept: seek= cannot be used"),
        (
            &["conv=notrunc"],
            "of=s3://bkt/kept: conv=notrunc cannot be used",
        ),
        (&["conv=sparse"], "conv=sparse cannot be used"),
        (&["oflag=append"], "oflag=append cannot be used"),
        (&["--resume"], "of=s3://bkt/kept: --resume cannot be used"),
        (&["--rescue"], "--rescue cannot be used"),
    ];
    for (extra, message) in cases {
        let mut cmd = ddx_for(&server);
        cmd.arg(format!("if={}", input.display()))
            .arg("of=s3://bkt/kept")
            .args(*extra);
        let done = run(cmd);
        assert_eq!(done.code, Some(1), "{extra:?}: {}", done.stderr);
        // One line about the object (oflag=append brings GNU's warning
        // about conv=notrunc too).
        let lines: Vec<&str> = done
            .stderr
            .lines()
            .filter(|line| line.contains("s3://"))
            .collect();
        assert_eq!(lines.len(), 1, "{extra:?}: {}", done.stderr);
        assert!(lines[0].contains(message), "{extra:?}: {}", done.stderr);
        assert_eq!(std::fs::read(bucket.join("kept")).expect("kept"), old);
        assert_eq!(server.pending_uploads(), Vec::<String>::new());
    }
    let mut cmd = ddx_for(&server);
    cmd.arg(format!("if={}", input.display()))
        .arg("of=https://127.0.0.1:9/x");
    let done = run(cmd);
    assert_eq!(done.code, Some(1));
    assert!(
        done.stderr.contains("only s3:// objects can be written"),
        "{}",
        done.stderr
    );
}

#[test]
fn an_interrupted_upload_leaves_no_object_and_no_pending_upload() {
    let Some(server) = rigs::or_skip(S3Server::start()) else {
        return;
    };
    let bucket = server.bucket("bkt");
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let key = format!("interrupted-{signal}");
        let mut child = ddx_for(&server)
            .arg(format!("of=s3://bkt/{key}"))
            .arg("bs=1M")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        rigs::signal::wait_for_handler(child.id(), signal);
        let mut stdin = child.stdin.take().expect("stdin");
        // Two whole parts and some: the upload is under way.
        stdin.write_all(&pattern(2, 40 * MIB)).expect("feed");
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.pending_uploads().len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !server.pending_uploads().is_empty(),
            "the upload never started"
        );
        rigs::signal::send(child.id(), signal);
        let out = child.wait_with_output().expect("wait");
        drop(stdin);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(signal), "{out:?}");
        assert!(!bucket.join(&key).exists(), "an object was left");
        assert_eq!(server.pending_uploads(), Vec::<String>::new());
    }
}

#[test]
fn a_copy_that_fails_mid_stream_leaves_no_object_and_no_pending_upload() {
    let Some(server) = rigs::or_skip(S3Server::start()) else {
        return;
    };
    let bucket = server.bucket("bkt");
    // Promises 48 MiB, sends 33 and hangs up: two parts are uploaded
    // before the input fails.
    let short = match ShortHttpServer::start(48 * MIB, 33 * MIB) {
        Ok(short) => short,
        Err(why) => return rigs::skip(&why),
    };
    let mut cmd = ddx_for(&server);
    cmd.arg(format!("if={}", short.url()))
        .args(["of=s3://bkt/failed", "bs=1M"]);
    let done = run(cmd);
    assert_eq!(done.code, Some(1), "{}", done.stderr);
    assert!(
        done.stderr.contains("error reading 'http://")
            && done.stderr.contains(&format!("reading at {}", 33 * MIB)),
        "the input's failure is named: {}",
        done.stderr
    );
    assert!(!bucket.join("failed").exists(), "an object was left");
    assert_eq!(server.pending_uploads(), Vec::<String>::new());
}

#[test]
fn hash_and_verify_read_the_object_back() {
    let Some(server) = rigs::or_skip(S3Server::start()) else {
        return;
    };
    let bucket = server.bucket("bkt");
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(3, 20 * MIB + 5);
    let input = dir.path().join("in");
    std::fs::write(&input, &data).expect("input");
    let sha = Command::new("sha256sum")
        .arg(&input)
        .output()
        .expect("sha256sum");
    let digest = String::from_utf8_lossy(&sha.stdout)
        .split_whitespace()
        .next()
        .expect("a digest")
        .to_owned();
    let mut cmd = ddx_for(&server);
    cmd.arg(format!("if={}", input.display())).args([
        "of=s3://bkt/checked",
        "bs=4M",
        "--hash=sha256",
        "--verify",
    ]);
    let done = run(cmd);
    assert_eq!(done.code, Some(0), "{}", done.stderr);
    assert!(
        done.stderr.contains(&format!("sha256: {digest}")),
        "{}",
        done.stderr
    );
    assert!(
        done.stderr
            .contains("verify: 20971525 bytes of 's3://bkt/checked' read back, identical"),
        "{}",
        done.stderr
    );
    assert!(std::fs::read(bucket.join("checked")).expect("stored") == data);
}

#[test]
fn secrets_reach_neither_messages_nor_verbose_nor_progress_json() {
    let Some(server) = rigs::or_skip(S3Server::start()) else {
        return;
    };
    server.bucket("bkt");
    std::fs::write(server.object_file("bkt", "obj"), pattern(4, 3 * MIB)).expect("seed");
    const TOKEN: &str = "Session/Token+Value=0123456789abcdef";
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let mut texts = Vec::new();
    // Right keys (s3s-fs ignores the token), a successful copy with
    // everything ddx can print.
    let mut ok = ddx_for(&server);
    ok.env("AWS_SESSION_TOKEN", TOKEN)
        .args(["if=s3://bkt/obj", "bs=1M", "status=progress", "--verbose"])
        .arg(format!("of={}", out.display()))
        .arg("--progress-fd=2");
    let done = run(ok);
    assert_eq!(done.code, Some(0), "{}", done.stderr);
    assert!(
        done.stderr.contains('{'),
        "no progress JSON: {}",
        done.stderr
    );
    texts.push(done.stderr);
    // A wrong secret: refused by the server, whose answer is printed.
    let mut refused = ddx_for(&server);
    refused
        .env("AWS_SECRET_ACCESS_KEY", "Wrong+Secret/Key0123456789")
        .env("AWS_SESSION_TOKEN", TOKEN)
        .args(["if=s3://bkt/obj", "--verbose", "--progress-fd=2"])
        .arg(format!("of={}", out.display()));
    let done = run(refused);
    assert_eq!(done.code, Some(1), "{}", done.stderr);
    texts.push(done.stderr);
    // A URL's password and signature.
    let mut url = ddx_for(&server);
    url.arg(format!(
        "if=http://user:Url-Password-987@127.0.0.1:{}/obj?X-Amz-Signature=SignatureValue555",
        rigs::object::free_port()
    ))
    .arg(format!("of={}", out.display()));
    let done = run(url);
    assert_eq!(done.code, Some(1), "{}", done.stderr);
    texts.push(done.stderr);
    for text in &texts {
        for secret in [
            rigs::object::SECRET_KEY,
            "Wrong+Secret",
            "Wrong%2BSecret",
            "Session/Token",
            "Session%2FToken",
            "Url-Password-987",
            "SignatureValue555",
        ] {
            assert!(!text.contains(secret), "{secret} in: {text}");
        }
    }
}

/// A backup straight into an object, compressed, and its restore, one
/// command each: the stored object is a zstd stream that `zstd -d` turns
/// back into the input, and `--decompress` from the object gives the
/// input's bytes again.
#[test]
fn a_compressed_backup_to_an_object_and_its_restore_are_one_command_each() {
    let Some(server) = rigs::or_skip(S3Server::start()) else {
        return;
    };
    if !rigs::have("zstd") {
        rigs::skip("zstd is not installed (apt-get install zstd)");
        return;
    }
    server.bucket("bkt");
    let dir = tempfile::tempdir().expect("tempdir");
    // Half zeros, half a pattern: compressible, and more than one part.
    let mut data = vec![0u8; 20 * MIB];
    data.extend(pattern(33, 20 * MIB + 4321));
    let input = dir.path().join("disk.img");
    std::fs::write(&input, &data).expect("input");

    let mut backup = ddx_for(&server);
    backup.arg(format!("if={}", input.display())).args([
        "of=s3://bkt/disk.img.zst",
        "--compress=zstd",
        "bs=4M",
    ]);
    let done = run(backup);
    assert_eq!(done.code, Some(0), "{}", done.stderr);
    let stored = server.object_file("bkt", "disk.img.zst");
    assert!(std::fs::metadata(&stored).expect("stored").len() < data.len() as u64 * 3 / 4);
    let unzstd = Command::new("zstd")
        .args(["-d", "-c", "-q"])
        .arg(&stored)
        .output()
        .expect("zstd -d");
    assert!(unzstd.status.success());
    assert!(unzstd.stdout == data, "zstd -d: other bytes");

    let restored = dir.path().join("restored.img");
    let mut restore = ddx_for(&server);
    restore
        .args(["if=s3://bkt/disk.img.zst", "--decompress", "bs=4M"])
        .arg(format!("of={}", restored.display()));
    let done = run(restore);
    assert_eq!(done.code, Some(0), "{}", done.stderr);
    assert!(
        std::fs::read(&restored).expect("restored") == data,
        "restore: other bytes"
    );
    assert_eq!(server.pending_uploads(), Vec::<String>::new());
}
