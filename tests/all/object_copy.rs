//! Copies to and from objects through the command line (`of=s3://...`,
//! `if=s3://...`, `if=http://...`) against a SeaweedFS cluster on
//! loopback: GNU dd over the same bytes as a local file is the oracle for
//! records and statistics, and what the cluster's filer holds the oracle
//! for what was stored; refusals, interruptions and failures must leave neither an
//! object nor a pending multipart upload; secrets must not reach stderr,
//! `--verbose` or the progress JSON.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::rigs;
use crate::rigs::bytes::{pattern, sha256};
use crate::rigs::cluster::{bucket_or_skip, Bucket};
use crate::rigs::cmd::{ddx, gnu_dd};
use crate::rigs::fault::FaultProxy;
use crate::rigs::fixture::{statistics, Ddx};
use crate::rigs::object::{S3Server, ShortHttpServer};

const MIB: usize = 1 << 20;

/// The environment that points ddx at `bucket`'s cluster (and no shared
/// files).
fn env_for(bucket: &Bucket) -> Vec<(String, String)> {
    let mut env = vec![
        ("HOME".to_owned(), "/nonexistent".to_owned()),
        ("AWS_MAX_ATTEMPTS".to_owned(), "2".to_owned()),
    ];
    env.extend(bucket.env());
    env
}

/// ddx pointed at `bucket`'s cluster.
fn ddx_for(bucket: &Bucket) -> Ddx {
    Ddx::new().envs(env_for(bucket))
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
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
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
        let done = ddx_for(&bucket)
            .arg(format!("if={}", input.display()))
            .arg(format!("of={}", bucket.url(&key)))
            .args(*operands)
            .succeeds();
        assert_eq!(statistics(&done.stderr), gnu, "upload {operands:?}");
        let stored = bucket.object(&key).expect("stored");
        assert!(
            stored == expected,
            "upload {operands:?}: other bytes stored"
        );

        // Down, from an object of the input's bytes.
        bucket.put("source", &data).expect("seed");
        let out = dir.path().join(format!("down-{n}"));
        let done = ddx_for(&bucket)
            .arg(format!("if={}", bucket.url("source")))
            .arg(format!("of={}", out.display()))
            .args(*operands)
            .succeeds();
        assert_eq!(statistics(&done.stderr), gnu, "download {operands:?}");
        assert!(
            std::fs::read(&out).expect("out") == expected,
            "download {operands:?}"
        );
    }
    bucket.assert_no_pending_upload();

    // To a pipe and to a character device, record by record.
    let gnu = gnu_statistics(dir.path(), &input, &["bs=4k"]);
    let done = ddx_for(&bucket)
        .arg(format!("if={}", bucket.url("source")))
        .arg("bs=4k")
        .succeeds();
    assert_eq!(statistics(&done.stderr), gnu);
    assert!(done.stdout == data, "stdout: other bytes");
    let done = ddx_for(&bucket)
        .arg(format!("if={}", bucket.url("source")))
        .args(["of=/dev/null", "bs=4k"])
        .run();
    assert_eq!(statistics(&done.stderr), gnu, "{}", done.stderr);
}

#[test]
fn operands_an_object_cannot_honour_are_refused_before_anything_is_written() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in");
    std::fs::write(&input, pattern(1, 20 * MIB)).expect("input");
    let old = b"the object as it was".to_vec();
    bucket.put("kept", &old).expect("seed");
    let cases: &[(&[&str], &str)] = &[
        (&["seek=1"], "OF: seek= cannot be used"),
        (&["conv=notrunc"], "OF: conv=notrunc cannot be used"),
        (&["conv=sparse"], "conv=sparse cannot be used"),
        (&["oflag=append"], "oflag=append cannot be used"),
        (&["--resume"], "OF: --resume needs --map=FILE"),
        (
            &["--map=m", "conv=swab"],
            "OF: --map cannot be combined with conv=swab",
        ),
        (
            &["--map=m", "--compress=xz"],
            "OF: --map cannot be combined with --compress=xz",
        ),
        (&["--rescue"], "--rescue cannot be used"),
    ];
    let of = format!("of={}", bucket.url("kept"));
    for (extra, message) in cases {
        let message = message.replace("OF", &of);
        let done = ddx_for(&bucket)
            .arg(format!("if={}", input.display()))
            .arg(format!("of={}", bucket.url("kept")))
            .args(*extra)
            .fails();
        // One line about the object (oflag=append brings GNU's warning
        // about conv=notrunc too).
        let lines: Vec<&str> = done
            .stderr
            .lines()
            .filter(|line| line.contains("s3://"))
            .collect();
        assert_eq!(lines.len(), 1, "{extra:?}: {}", done.stderr);
        assert!(lines[0].contains(&message), "{extra:?}: {}", done.stderr);
        assert_eq!(bucket.object("kept").expect("kept"), old);
        bucket.assert_no_pending_upload();
    }
    ddx_for(&bucket)
        .arg(format!("if={}", input.display()))
        .arg("of=https://127.0.0.1:9/x")
        .fails_with("only s3:// objects can be written");
}

#[test]
fn an_interrupted_upload_leaves_no_object_and_no_pending_upload() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let key = format!("interrupted-{signal}");
        let mut child = ddx()
            .envs(env_for(&bucket))
            .arg(format!("of={}", bucket.url(&key)))
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
        while bucket.stored_parts() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !bucket.pending_uploads().is_empty(),
            "the upload never started"
        );
        rigs::signal::send(child.id(), signal);
        let out = child.wait_with_output().expect("wait");
        drop(stdin);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(signal), "{out:?}");
        assert!(!bucket.has(&key), "an object was left");
        bucket.assert_no_pending_upload();
    }
}

#[test]
fn a_copy_that_fails_mid_stream_leaves_no_object_and_no_pending_upload() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    // Promises 48 MiB, sends 33 and hangs up: two parts are uploaded
    // before the input fails.
    let short = match ShortHttpServer::start(48 * MIB, 33 * MIB) {
        Ok(short) => short,
        Err(why) => return rigs::skip(&why),
    };
    let done = ddx_for(&bucket)
        .arg(format!("if={}", short.url()))
        .arg(format!("of={}", bucket.url("failed")))
        .arg("bs=1M")
        .fails();
    assert!(
        done.stderr.contains("error reading 'http://")
            && done.stderr.contains(&format!("reading at {}", 33 * MIB)),
        "the input's failure is named: {}",
        done.stderr
    );
    assert!(!bucket.has("failed"), "an object was left");
    bucket.assert_no_pending_upload();
}

/// `--verify` onto an object: the cluster checks every part's SHA-256 and
/// gives the object's (S3's composite of the parts'), which ddx compares
/// with its own, so the object is not read back; s3s-fs gives no
/// checksum (it shows a store that cannot say), and the object is read
/// back.
#[test]
fn verify_takes_the_servers_checksum_or_reads_the_object_back() {
    use base64::Engine;
    use sha2::{Digest, Sha256};
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(3, 20 * MIB + 5);
    let input = dir.path().join("in");
    std::fs::write(&input, &data).expect("input");
    let digest = sha256(&input);
    let watching = FaultProxy::start(bucket.cluster.port(), Vec::new());
    let done = ddx_for(&bucket)
        .env("AWS_ENDPOINT_URL", watching.endpoint())
        .arg(format!("if={}", input.display()))
        .arg(format!("of={}", bucket.url("checked")))
        .args(["bs=4M", "--hash=sha256", "--verify"])
        .succeeds();
    done.says(&format!("sha256: {digest}"));
    // S3's composite checksum of the two parts (16 MiB and the rest).
    let mut of_parts = Sha256::new();
    for part in [&data[..16 * MIB], &data[16 * MIB..]] {
        of_parts.update(Sha256::digest(part));
    }
    let composite = format!(
        "{}-2",
        base64::engine::general_purpose::STANDARD.encode(of_parts.finalize())
    );
    done.says(&format!(
        "verify: 20971525 bytes of '{}' not read back: the server's SHA-256 of its 2 parts, \
         {composite}, is that of the bytes sent",
        bucket.url("checked")
    ));
    let gets = watching
        .seen()
        .iter()
        .filter(|s| s.method == "GET" && !s.target.contains("uploadId"))
        .count();
    assert_eq!(gets, 0, "read back: {:?}", watching.seen());
    assert!(bucket.object("checked").expect("stored") == data);

    let Some(plain) = rigs::or_skip(S3Server::start_in(&dir.path().join("s3s"))) else {
        return;
    };
    let done = Ddx::new()
        .envs(plain.env())
        .env("HOME", "/nonexistent")
        .arg(format!("if={}", input.display()))
        .args(["of=s3://bkt/checked", "bs=4M", "--verify"])
        .succeeds();
    // s3s-fs answers parts without the checksum it was sent.
    done.says("part 1 has no SHA-256 the server checked, so it is read back");
    done.says("verify: 20971525 bytes of 's3://bkt/checked' read back, identical");
    assert!(std::fs::read(plain.object_file("bkt", "checked")).expect("stored") == data);
}

#[test]
fn secrets_reach_neither_messages_nor_verbose_nor_progress_json() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    bucket.put("obj", &pattern(4, 3 * MIB)).expect("seed");
    const TOKEN: &str = "Session/Token+Value=0123456789abcdef";
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let mut texts = Vec::new();
    // Right keys, a successful copy with everything ddx can print.
    let done = ddx_for(&bucket)
        .arg(format!("if={}", bucket.url("obj")))
        .args(["bs=1M", "status=progress", "--verbose"])
        .arg(format!("of={}", out.display()))
        .arg("--progress-fd=2")
        .succeeds();
    assert!(
        done.stderr.contains('{'),
        "no progress JSON: {}",
        done.stderr
    );
    texts.push(done.stderr);
    // Right keys with a session token the store never issued: refused
    // (the cluster checks tokens), the answer printed.
    let done = ddx_for(&bucket)
        .env("AWS_SESSION_TOKEN", TOKEN)
        .arg(format!("if={}", bucket.url("obj")))
        .args(["bs=1M", "status=progress", "--verbose", "--progress-fd=2"])
        .arg(format!("of={}", out.display()))
        .fails();
    texts.push(done.stderr);
    // A wrong secret: refused by the server, whose answer is printed.
    let done = ddx_for(&bucket)
        .env("AWS_SECRET_ACCESS_KEY", "Wrong+Secret/Key0123456789")
        .env("AWS_SESSION_TOKEN", TOKEN)
        .arg(format!("if={}", bucket.url("obj")))
        .args(["--verbose", "--progress-fd=2"])
        .arg(format!("of={}", out.display()))
        .fails();
    texts.push(done.stderr);
    // A URL's password and signature.
    let done = ddx_for(&bucket)
        .arg(format!("if={}", rigs::object::secret_url()))
        .arg(format!("of={}", out.display()))
        .fails();
    texts.push(done.stderr);
    let secrets = [
        rigs::object::SECRET_KEY,
        "Wrong+Secret",
        "Wrong%2BSecret",
        "Session/Token",
        "Session%2FToken",
    ];
    rigs::object::assert_hidden(&texts, &secrets);
}

/// A backup straight into an object, compressed, and its restore, one
/// command each: the stored object is a zstd stream that `zstd -d` turns
/// back into the input, and `--decompress` from the object gives the
/// input's bytes again.
#[test]
fn a_compressed_backup_to_an_object_and_its_restore_are_one_command_each() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    if !rigs::have("zstd") {
        rigs::skip("zstd is not installed (apt-get install zstd)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // Half zeros, half a pattern: compressible, and more than one part.
    let mut data = vec![0u8; 20 * MIB];
    data.extend(pattern(33, 20 * MIB + 4321));
    let input = dir.path().join("disk.img");
    std::fs::write(&input, &data).expect("input");

    ddx_for(&bucket)
        .arg(format!("if={}", input.display()))
        .arg(format!("of={}", bucket.url("disk.img.zst")))
        .args(["--compress=zstd", "bs=4M"])
        .succeeds();
    let stored = dir.path().join("stored.zst");
    std::fs::write(&stored, bucket.object("disk.img.zst").expect("stored")).expect("copy");
    assert!(std::fs::metadata(&stored).expect("stored").len() < data.len() as u64 * 3 / 4);
    let unzstd = Command::new("zstd")
        .args(["-d", "-c", "-q"])
        .arg(&stored)
        .output()
        .expect("zstd -d");
    assert!(unzstd.status.success());
    assert!(unzstd.stdout == data, "zstd -d: other bytes");

    let restored = dir.path().join("restored.img");
    ddx_for(&bucket)
        .arg(format!("if={}", bucket.url("disk.img.zst")))
        .args(["--decompress", "bs=4M"])
        .arg(format!("of={}", restored.display()))
        .succeeds();
    assert!(
        std::fs::read(&restored).expect("restored") == data,
        "restore: other bytes"
    );
    bucket.assert_no_pending_upload();
}
