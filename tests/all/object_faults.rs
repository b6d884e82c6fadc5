//! Remote failures, through the command line, against real servers: an
//! S3 server whose disk fills up during an overwrite (s3s-fs, on a small
//! tmpfs), a SeaweedFS cluster that answers 503 SlowDown or resets a
//! connection in the middle of a part, whose gateway is killed during an
//! upload, and web servers whose answers are cut in the middle of the
//! body. Where a fault must be put into a real
//! server's traffic, a fault-injecting proxy started by the test stands
//! in front of it (`rigs::fault`); the server behind does the work.
//!
//! Every failure is one line that names the end, carries the server's
//! words (its status, its S3 code and text) and no secret, and leaves
//! neither an object that was not meant nor a pending upload; every
//! passing trouble is retried until the copy completes. Uploads kept by
//! `--map` are resumed by `--resume` from the parts the server holds.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cluster::bucket_or_skip;
use crate::rigs::cmd::ddx;
use crate::rigs::delay::DelayProxy;
use crate::rigs::fault::{Fault, FaultProxy, Rule};
use crate::rigs::object::{HttpServer, PythonHttpServer, S3Server, SECRET_KEY};

const MIB: usize = 1 << 20;

/// ddx's environment for a server whose settings are `server_env`,
/// reached at `endpoint` (the server's own, or a proxy's), with
/// `attempts` tries per request.
pub(crate) fn env(
    server_env: Vec<(String, String)>,
    endpoint: &str,
    attempts: usize,
) -> Vec<(String, String)> {
    let mut env = server_env;
    env.retain(|(k, _)| k != "AWS_ENDPOINT_URL");
    env.push(("AWS_ENDPOINT_URL".into(), endpoint.into()));
    env.push(("HOME".into(), "/nonexistent".into()));
    env.push(("AWS_MAX_ATTEMPTS".into(), attempts.to_string()));
    env
}

/// The lines of `stderr` that are not GNU's statistics nor progress.
pub(crate) fn messages(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| {
            !l.contains(" records in")
                && !l.contains(" records out")
                && !l.contains(" bytes (")
                && !l.contains(" bytes copied")
                && !l.starts_with('{')
                // A map named and not there yet: the upload starts afresh.
                && !l.contains(": no map ")
        })
        .collect()
}

/// The one message of a failed copy, checked to name `end` and to show
/// no secret.
#[track_caller]
pub(crate) fn one_line(stderr: &str, end: &str) -> String {
    let lines = messages(stderr);
    assert_eq!(lines.len(), 1, "one line wanted: {stderr}");
    assert!(lines[0].contains(end), "{end} not named: {stderr}");
    rigs::object::assert_hidden(&[stderr.to_owned()], &[SECRET_KEY]);
    lines[0].to_owned()
}

pub(crate) fn run(cmd: &mut Command) -> std::process::Output {
    cmd.output().expect("ddx runs")
}

#[test]
fn an_overwrite_that_fills_the_servers_disk_keeps_the_old_object_and_leaves_no_part() {
    let Some(fs) = rigs::or_skip(rigs::SmallTmpfs::new(80 * MIB as u64)) else {
        return;
    };
    let Some(server) = rigs::or_skip(S3Server::start_in(fs.path())) else {
        return;
    };
    let old = pattern(1, 24 * MIB);
    std::fs::write(server.object_file("bkt", "x.bin"), &old).expect("old object");
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("new");
    std::fs::write(&input, pattern(2, 72 * MIB)).expect("input");
    let out = run(ddx()
        .envs(env(server.env(), &server.endpoint(), 2))
        .arg(format!("if={}", input.display()))
        .args(["of=s3://bkt/x.bin", "bs=8M"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), None, "killed by a signal: {stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = one_line(&stderr, "'s3://bkt/x.bin'");
    // The server's answer: its status and its S3 code.
    assert!(line.contains("500 Internal Server Error"), "{line}");
    assert!(line.contains("InternalError"), "{line}");
    assert!(
        std::fs::read(server.object_file("bkt", "x.bin")).expect("old") == old,
        "the old object changed"
    );
    assert_eq!(server.upload_files(), Vec::<String>::new(), "parts left");
}

#[test]
fn slow_down_and_resets_in_the_middle_of_a_part_are_retried_until_the_copy_completes() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let slow_down = Fault::Answer {
        status: 503,
        code: "SlowDown",
        message: "Please reduce your request rate.",
    };
    let proxy = FaultProxy::start(
        bucket.cluster.port(),
        vec![
            Rule::new("POST", "uploads", slow_down.clone()),
            Rule::new("PUT", "partNumber=2", slow_down.clone()).times(2),
            Rule::new("PUT", "partNumber=3", Fault::ResetMidBody),
            Rule::new(
                "POST",
                "uploadId",
                Fault::Answer {
                    status: 500,
                    code: "InternalError",
                    message: "We encountered an internal error. Please try again.",
                },
            ),
            Rule::new("GET", "/x.bin", slow_down.clone()).after(1),
            Rule::new("GET", "/x.bin", Fault::ResetMidBody).after(2),
        ],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(3, 3 * 16 * MIB + 4321);
    let input = dir.path().join("in");
    std::fs::write(&input, &data).expect("input");
    let out = run(ddx()
        .envs(env(bucket.env(), &proxy.endpoint(), 5))
        .arg(format!("if={}", input.display()))
        .arg(format!("of={}", bucket.url("x.bin")))
        .arg("bs=1M"));
    assert!(out.status.success(), "{out:?}");
    assert!(
        bucket.object("x.bin").expect("stored") == data,
        "other bytes stored"
    );
    bucket.assert_no_pending_upload();
    // And back down, through the same troubles.
    let back = dir.path().join("back");
    let out = run(ddx()
        .envs(env(bucket.env(), &proxy.endpoint(), 5))
        .arg(format!("if={}", bucket.url("x.bin")))
        .arg(format!("of={}", back.display()))
        .arg("bs=4M"));
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::read(&back).expect("back") == data);
    // Every fault was met (and retried): create, 2 parts x2, 1 reset,
    // complete, and two GETs.
    assert_eq!(proxy.faults(), 7, "{:?}", proxy.seen());
}

#[test]
fn a_server_that_keeps_failing_a_part_is_named_with_its_answer_and_the_upload_aborted() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let proxy = FaultProxy::start(
        bucket.cluster.port(),
        vec![Rule::new(
            "PUT",
            "partNumber=2",
            Fault::Answer {
                status: 503,
                code: "SlowDown",
                message: "Please reduce your request rate.",
            },
        )
        .times(100)],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in");
    std::fs::write(&input, pattern(4, 40 * MIB)).expect("input");
    let out = run(ddx()
        .envs(env(bucket.env(), &proxy.endpoint(), 3))
        .arg(format!("if={}", input.display()))
        .arg(format!("of={}", bucket.url("failed")))
        .arg("bs=1M"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = one_line(&stderr, &format!("'{}'", bucket.url("failed")));
    for said in [
        "part 2 (from byte 16777216)",
        "503",
        "SlowDown: Please reduce your request rate.",
        "after 3 tries",
    ] {
        assert!(line.contains(said), "{said:?} not in: {line}");
    }
    assert!(!bucket.has("failed"));
    bucket.assert_no_pending_upload();
}

/// A part whose bytes change on the way (one byte of its body flipped by
/// the proxy, after ddx computed its SHA-256): the server checks the
/// part's checksum and refuses it, ddx names the part and the server's
/// answer, and the upload is aborted, never completed.
#[test]
fn a_part_changed_on_the_way_is_refused_by_the_server_and_never_completed() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let proxy = FaultProxy::start(
        bucket.cluster.port(),
        vec![Rule::new(
            "PUT",
            "partNumber=2",
            Fault::FlipByte { at: 12_345 },
        )],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in");
    std::fs::write(&input, pattern(15, 3 * 16 * MIB + 5)).expect("input");
    let out = run(ddx()
        .envs(env(bucket.env(), &proxy.endpoint(), 3))
        .arg(format!("if={}", input.display()))
        .arg(format!("of={}", bucket.url("flipped")))
        .arg("bs=1M"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = one_line(&stderr, &format!("'{}'", bucket.url("flipped")));
    for said in ["part 2 (from byte 16777216)", "400", "BadDigest"] {
        assert!(line.contains(said), "{said:?} not in: {line}");
    }
    assert_eq!(proxy.faults(), 1, "{:?}", proxy.seen());
    assert!(
        !proxy
            .seen()
            .iter()
            .any(|s| s.method == "POST" && s.target.contains("uploadId=")),
        "the upload was completed: {:?}",
        proxy.seen()
    );
    assert!(!bucket.has("flipped"));
    bucket.assert_no_pending_upload();
}

/// An object whose checksum, as the store gives it once the object is
/// whole, is not that of the bytes ddx sent (the proxy changes the
/// store's answer to ddx's HEAD): the copy fails in one line that gives
/// both checksums, and `--verify` never reports the object as checked.
/// Both ways an object is stored: parts completed into one object, and
/// one PUT.
#[test]
fn an_object_whose_stored_checksum_is_not_ddxs_is_named_and_never_called_verified() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    for (key, size) in [("parts", 2 * 16 * MIB + 7), ("one", MIB + 3)] {
        let proxy = FaultProxy::start(
            bucket.cluster.port(),
            vec![Rule::new(
                "HEAD",
                key,
                Fault::SetAnswerHeader {
                    name: "x-amz-checksum-sha256",
                    value: "q0s6mvA4M6X2Y5UZxe3n5Cz8hDCXK9ehm2NqD5G0dFY=",
                },
            )
            .times(100)],
        );
        let input = dir.path().join(key);
        std::fs::write(&input, pattern(31, size)).expect("input");
        let out = run(ddx()
            .envs(env(bucket.env(), &proxy.endpoint(), 2))
            .arg(format!("if={}", input.display()))
            .arg(format!("of={}", bucket.url(key)))
            .args(["bs=4M", "--verify"]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{key}: {stderr}");
        let line = one_line(&stderr, &format!("'{}'", bucket.url(key)));
        for said in [
            "the upload completed, but the server's SHA-256 of the object is ",
            "q0s6mvA4M6X2Y5UZxe3n5Cz8hDCXK9ehm2NqD5G0dFY=",
            "as of the bytes sent",
        ] {
            assert!(line.contains(said), "{key}: {said:?} not in: {line}");
        }
        assert!(proxy.faults() >= 1, "{key}: {:?}", proxy.seen());
        assert!(!stderr.contains("verify:"), "{key}: {stderr}");
    }
}

/// The parts the proxy saw uploaded, by number.
fn parts_put(proxy: &FaultProxy) -> Vec<usize> {
    proxy
        .seen()
        .iter()
        .filter(|s| s.method == "PUT")
        .filter_map(|s| {
            let at = s.target.find("partNumber=")? + "partNumber=".len();
            let n: String = s.target[at..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            n.parse().ok()
        })
        .collect()
}

/// An upload killed once `parts` parts are in its map, and resumed:
/// plain or compressed, the object is the input (decompressed), the
/// resumed run checks the parts with ListParts and sends none of those
/// the map holds again.
fn killed_and_resumed(compress: Option<&str>) {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    if compress.is_some() && !rigs::tools_or_skip(&["zstd"]) {
        return;
    }
    // Slow parts: the kill lands in the middle of the upload. The first
    // run can never complete it (its completing request is refused), so
    // that a kill that comes late still finds the upload in progress; the
    // resumed run goes through a proxy of its own.
    let first_proxy = FaultProxy::start(
        bucket.cluster.port(),
        vec![
            Rule::new(
                "PUT",
                "partNumber",
                Fault::Delay(Duration::from_millis(150)),
            )
            .times(1000),
            Rule::new(
                "POST",
                "uploadId",
                Fault::Answer {
                    status: 503,
                    code: "SlowDown",
                    message: "Please reduce your request rate.",
                },
            )
            .times(1000),
        ],
    );
    let proxy = FaultProxy::start(bucket.cluster.port(), Vec::new());
    let dir = tempfile::tempdir().expect("tempdir");
    // Half compressible, so that a compressed part holds more input than
    // its own size, and not too much: parts end on frames of 16 MiB of
    // input.
    let mut data = Vec::new();
    for n in 0..12 {
        data.extend(pattern(n + 1, 4 * MIB));
        data.extend(vec![n as u8; 4 * MIB]);
    }
    let input = dir.path().join("in");
    std::fs::write(&input, &data).expect("input");
    let map = dir.path().join("upload.map");
    let key = if compress.is_some() { "k.zst" } else { "k" };
    let upload = |resume: bool| {
        let through = if resume { &proxy } else { &first_proxy };
        let mut cmd = ddx();
        cmd.envs(env(bucket.env(), &through.endpoint(), 3))
            .arg(format!("if={}", input.display()))
            .arg(format!("of={}", bucket.url(key)))
            .arg(format!("--map={}", map.display()))
            .arg("bs=1M");
        if let Some(compress) = compress {
            cmd.arg(format!("--compress={compress}"));
        }
        if resume {
            cmd.arg("--resume");
        }
        cmd
    };
    let mut first = upload(false)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let recorded = |n: usize| {
        std::fs::read_to_string(&map)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("# ddx part: "))
            .count()
            >= n
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !recorded(2) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(recorded(2), "no parts recorded");
    // (It may have ended by itself, its completion refused.)
    let _ = first.kill();
    first.wait().expect("wait");
    let text = std::fs::read_to_string(&map).expect("map");
    let recorded: Vec<(usize, usize)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# ddx part: "))
        .filter_map(|l| {
            let mut fields = l.split(' ');
            Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
        })
        .collect();
    let stored: Vec<usize> = recorded.iter().map(|&(number, _)| number).collect();
    if compress.is_none() {
        // An upload kept resumable goes in small parts: a kill loses
        // little (see `parts::JOURNALED_PART`).
        assert!(recorded.iter().all(|&(_, size)| size == 8 * MIB), "{text}");
    }
    let before = parts_put(&proxy).len();
    // Progress as JSON on standard output, which the upload leaves free.
    let out = run(upload(true).arg("--progress-fd=1"));
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("resuming upload "), "{stderr}");
    // The last record counts the parts earlier runs stored: it ends at
    // the whole input, as the live line's bar does.
    let text = String::from_utf8_lossy(&out.stdout);
    let last: serde_json::Value =
        serde_json::from_str(text.lines().last().expect("a record")).expect("JSON");
    assert_eq!(last["done"], true, "{text}");
    assert_eq!(last["bytes"], data.len() as u64, "{text}");
    assert_eq!(last["total"], data.len() as u64, "{text}");
    assert!(
        last["resumed_bytes"].as_u64().is_some_and(|b| b > 0),
        "{text}"
    );
    let again: Vec<usize> = parts_put(&proxy)[before..].to_vec();
    for part in &stored {
        assert!(!again.contains(part), "part {part} sent again: {again:?}");
    }
    assert!(
        proxy
            .seen()
            .iter()
            .any(|s| s.method == "GET" && s.target.contains("uploadId=")),
        "the parts were not listed: {:?}",
        proxy.seen()
    );
    let stored = bucket.object(key).expect("stored");
    let stored = match compress {
        None => stored,
        Some(_) => {
            let packed = dir.path().join("stored.zst");
            std::fs::write(&packed, &stored).expect("a copy");
            let unpacked = Command::new("zstd")
                .args(["-d", "-c", "-q"])
                .arg(&packed)
                .output()
                .expect("zstd");
            assert!(unpacked.status.success(), "{unpacked:?}");
            unpacked.stdout
        }
    };
    assert!(stored == data, "the object is not the input");
    bucket.assert_no_pending_upload();
    // The map says the upload is done; a third run refuses to redo it.
    let out = run(&mut upload(true));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("says its upload completed"));
}

#[test]
fn an_upload_killed_half_way_resumes_from_the_parts_the_server_holds() {
    killed_and_resumed(None);
}

#[test]
fn a_compressed_upload_killed_half_way_resumes_on_a_frame_boundary() {
    killed_and_resumed(Some("zstd"));
}

#[test]
fn a_resume_whose_upload_is_gone_from_the_server_is_refused_before_anything_is_sent() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("in");
    std::fs::write(&input, pattern(8, 40 * MIB)).expect("input");
    let map = dir.path().join("m");
    // An upload the server never had (its 404 NoSuchUpload is named), and
    // one it has without the part the map records.
    let held = bucket.create_upload("gone").expect("an upload");
    for (id, said) in [
        (
            "00000000-0000-0000-0000-000000000000".to_owned(),
            "NoSuchUpload".to_owned(),
        ),
        (
            held.clone(),
            format!("part 1 of upload {held} is not on the server"),
        ),
    ] {
        std::fs::write(
            &map,
            format!(
                "# ddx upload: {id}\n\
                 # ddx part: 1 16777216 16777216 \"0123\"\n\
                 0x01000000     ?               1\n\
                 0x00000000  0x01000000  +\n\
                 0x01000000  0x01800000  ?\n"
            ),
        )
        .expect("map");
        let out = run(ddx()
            .envs(env(bucket.env(), &bucket.endpoint(), 2))
            .arg(format!("if={}", input.display()))
            .arg(format!("of={}", bucket.url("gone")))
            .args(["bs=1M", "--resume"])
            .arg(format!("--map={}", map.display())));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let line = one_line(&stderr, &bucket.url("gone"));
        assert!(line.contains(&said), "{line}");
        assert!(line.contains("remove the map"), "{line}");
        assert!(!bucket.has("gone"));
    }
    // Nothing was sent to the upload the server holds.
    assert_eq!(bucket.pending_uploads().len(), 1);
    assert_eq!(bucket.stored_parts(), 0);
}

/// An upload with `--map` of `eighths` times 8 MiB to the cluster, parts
/// delayed by `delay`, cut off from the store once its first part is
/// recorded (every connection reset and new ones refused, as when the
/// gateway dies: the shared cluster's own gateway stays up for the other
/// tests): the error is said once, and the statistics and the last JSON
/// record say what was read and what the server stores (the parts the
/// map records, as input bytes), plain or compressed.
fn cut_off_counts(compress: Option<&str>, eighths: u8, delay: Duration) {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    // The completing request held long enough that the cut comes first
    // (the cluster completes an upload in milliseconds).
    let proxy = FaultProxy::start(
        bucket.cluster.port(),
        vec![
            Rule::new("PUT", "partNumber", Fault::Delay(delay)).times(1000),
            Rule::new("POST", "uploadId", Fault::Delay(Duration::from_secs(5))),
        ],
    );
    let mut front = DelayProxy::start(proxy.port, Duration::ZERO).expect("proxy");
    let dir = tempfile::tempdir().expect("tempdir");
    // Half compressible: a compressed part holds more than its size.
    let mut data = Vec::new();
    for n in 0..eighths {
        data.extend(pattern(u64::from(n) + 30, 4 * MIB));
        data.extend(vec![n; 4 * MIB]);
    }
    let input = dir.path().join("in");
    std::fs::write(&input, &data).expect("input");
    let map = dir.path().join("m");
    let key = if compress.is_some() { "c.zst" } else { "c" };
    let mut cmd = ddx();
    cmd.envs(env(bucket.env(), &front.endpoint(), 2))
        .arg(format!("if={}", input.display()))
        .arg(format!("of={}", bucket.url(key)))
        .args(["bs=1M", "--progress-fd=2"])
        .arg(format!("--map={}", map.display()));
    if let Some(compress) = compress {
        cmd.arg(format!("--compress={compress}"));
    }
    let first = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(60);
    let recorded = || {
        std::fs::read_to_string(&map)
            .unwrap_or_default()
            .contains("# ddx part: 1 ")
    };
    while !recorded() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(recorded(), "no part recorded");
    front.cut();
    let out = first.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // Said once, and kept for --resume.
    let line = one_line(&stderr, &format!("'{}'", bucket.url(key)));
    assert!(
        line.contains("the upload stays on the server, for --resume"),
        "{line}"
    );
    // What the server stores: the input bytes the map's parts hold.
    let stored: u64 = std::fs::read_to_string(&map)
        .expect("map")
        .lines()
        .filter_map(|l| l.strip_prefix("# ddx part: "))
        .filter_map(|l| l.split(' ').nth(2)?.parse().ok())
        .max()
        .expect("parts");
    assert!(stored > 0);
    let copied = stderr
        .lines()
        .find(|l| l.contains(" copied, "))
        .unwrap_or_else(|| panic!("no statistics: {stderr}"));
    assert!(
        copied.starts_with(&format!("{stored} bytes")),
        "{stored} bytes stored, the statistics say: {copied}"
    );
    let records_out = stderr
        .lines()
        .find(|l| l.ends_with(" records out"))
        .unwrap_or_else(|| panic!("no statistics: {stderr}"));
    let full = stored / MIB as u64;
    let partial = u64::from(stored % MIB as u64 != 0);
    assert_eq!(
        records_out,
        format!("{full}+{partial} records out"),
        "{stderr}"
    );
    let records_in = stderr
        .lines()
        .find(|l| l.ends_with(" records in"))
        .expect("records in");
    let read: u64 = records_in
        .split('+')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a count");
    assert!(read >= full, "fewer read than stored: {stderr}");
    let last = last_record(&stderr);
    assert_eq!(last["done"], true, "{last}");
    assert_eq!(last["bytes"], stored, "{last}");
    assert_eq!(last["records_in_full"], read, "{last}");
}

#[test]
fn a_cut_off_upload_counts_what_was_read_and_what_is_stored() {
    cut_off_counts(None, 12, Duration::from_millis(200));
}

/// Slow parts and a short input (as many parts as a resumable upload
/// keeps in flight): the whole input is read and its last parts are in
/// flight when the store goes, so the failure is met as the upload is
/// finalised.
#[test]
fn an_upload_cut_off_once_read_counts_what_is_stored() {
    cut_off_counts(None, 4, Duration::from_millis(1500));
}

#[test]
fn a_cut_off_compressed_upload_counts_what_was_read_and_what_is_stored() {
    cut_off_counts(Some("zstd"), 12, Duration::from_millis(200));
}

/// The last JSON progress record in `stderr`.
pub(crate) fn last_record(stderr: &str) -> serde_json::Value {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .expect("a JSON record");
    serde_json::from_str(line).expect("JSON")
}

/// SIGTERM while the upload's completing request is held by the proxy,
/// or while its last part is: after the commit was sent the copy counts
/// as completed; before, it is interrupted and the upload aborted.
#[test]
fn sigterm_before_the_commit_aborts_and_after_it_completes() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(9, 2 * 16 * MIB + 77);
    let input = dir.path().join("in");
    std::fs::write(&input, &data).expect("input");
    for (held, key, committed) in [
        ("uploadId", "after", true),
        ("partNumber=3", "before", false),
    ] {
        let method = if committed { "POST" } else { "PUT" };
        let proxy = FaultProxy::start(
            bucket.cluster.port(),
            vec![Rule::new(
                method,
                held,
                Fault::Delay(Duration::from_millis(1500)),
            )],
        );
        let child = ddx()
            .envs(env(bucket.env(), &proxy.endpoint(), 2))
            .arg(format!("if={}", input.display()))
            .arg(format!("of={}", bucket.url(key)))
            .args(["bs=1M", "--progress-fd=2"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        rigs::signal::wait_for_handler(child.id(), libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(60);
        while proxy.faults() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(proxy.faults(), 1, "the request was never held");
        rigs::signal::send(child.id(), libc::SIGTERM);
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let record = last_record(&stderr);

        if committed {
            assert_eq!(out.status.code(), Some(0), "{stderr}");
            assert_eq!(record["done"], true, "{stderr}");
            assert!(record.get("signal").is_none(), "{stderr}");
            assert!(
                stderr.contains(&format!(
                    "SIGTERM came once '{}' was committed",
                    bucket.url("after")
                )),
                "{stderr}"
            );
            assert!(bucket.object(key).expect("object") == data);
        } else {
            assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{stderr}");
            assert_eq!(record["signal"], "SIGTERM", "{stderr}");
            assert!(!bucket.has(key), "an object was left");
        }
        bucket.assert_no_pending_upload();
    }
}

#[test]
fn a_small_put_with_a_wrong_key_says_the_servers_code() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    for (size, key) in [(1000, "small"), (20 * MIB, "large")] {
        let input = dir.path().join(key);
        std::fs::write(&input, pattern(10, size)).expect("input");
        let out = run(ddx()
            .envs(env(bucket.env(), &bucket.endpoint(), 1))
            .env("AWS_SECRET_ACCESS_KEY", "Wrong+Secret/Key0123456789")
            .arg(format!("if={}", input.display()))
            .arg(format!("of={}", bucket.url(key))));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let line = one_line(&stderr, &format!("'{}'", bucket.url(key)));
        assert!(line.contains("403 Forbidden"), "{line}");
        assert!(line.contains("SignatureDoesNotMatch"), "{line}");
        rigs::object::assert_hidden(&[stderr.to_string()], &["Wrong+Secret", "Wrong%2BSecret"]);
        bucket.assert_no_pending_upload();
    }
}

/// A web server's answer cut in the middle of the body: the read goes on
/// from where it stopped with a range request, the version checked; a
/// changed object fails the copy instead of being stitched to the old.
#[test]
fn an_http_body_cut_short_is_resumed_from_where_it_stopped_unless_the_object_changed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let served = dir.path().join("www");
    std::fs::create_dir(&served).expect("mkdir");
    let data = pattern(11, 24 * MIB + 5);
    let file = served.join("image.raw");
    std::fs::write(&file, &data).expect("seed");
    let server = match HttpServer::start(&served, None) {
        Ok(server) => server,
        Err(why) => return rigs::skip(&why),
    };
    let port: u16 = server
        .url("")
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("a port");
    let out_file = dir.path().join("out");
    let copy = |proxy: &FaultProxy| {
        run(ddx()
            .env("HOME", "/nonexistent")
            .env("AWS_MAX_ATTEMPTS", "3")
            .arg(format!("if={}/image.raw", proxy.endpoint()))
            .arg(format!("of={}", out_file.display()))
            .arg("bs=1M"))
    };
    // rclone gives no ETag: the Last-Modified is what holds the version.
    let cut_at = 5 * MIB + 1234;
    let proxy = FaultProxy::start(
        port,
        vec![Rule::new(
            "GET",
            "/image.raw",
            Fault::CutAnswer {
                after: cut_at,
                then: None,
            },
        )
        .range_has("bytes=0-8388607")],
    );
    let out = copy(&proxy);
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::read(&out_file).expect("out") == data);
    let ranges: Vec<String> = proxy
        .seen()
        .iter()
        .filter_map(|s| s.range.clone())
        .collect();
    // Where ddx stopped is at most where the proxy cut (a reset may take
    // with it bytes the client had not read yet), and inside the answer
    // that was cut: the rest of that answer's range is asked for again.
    let resumed_inside_the_cut_answer = |r: &String| {
        let Some((from, to)) = r.strip_prefix("bytes=").and_then(|r| r.split_once('-')) else {
            return false;
        };
        let from: usize = from.parse().unwrap_or(0);
        from > 0 && from <= cut_at && to == "8388607"
    };
    assert!(
        ranges.iter().any(resumed_inside_the_cut_answer),
        "not resumed where it stopped: {ranges:?}"
    );

    // The object replaced while the cut answer is read: never stitched.
    let newer = pattern(12, data.len());
    let (replace_file, replacement) = (file.clone(), newer.clone());
    // Replaced as a new file renamed over the old, as a publisher would:
    // the answers already streaming go on reading the old file whole, and
    // only a request made after it sees the new one.
    let replace = Arc::new(move || {
        let new = replace_file.with_extension("new");
        std::fs::write(&new, &replacement).expect("replace");
        let later = std::time::SystemTime::now() + Duration::from_secs(100);
        std::fs::File::options()
            .write(true)
            .open(&new)
            .and_then(|f| f.set_modified(later))
            .expect("mtime");
        std::fs::rename(&new, &replace_file).expect("rename");
    });
    let proxy = FaultProxy::start(
        port,
        vec![Rule::new(
            "GET",
            "/image.raw",
            Fault::CutAnswer {
                after: cut_at,
                then: Some(replace),
            },
        )
        .range_has("bytes=0-8388607")],
    );
    let out = copy(&proxy);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // One line naming the object and the change. rclone answers the
    // resumed range 412 with a body it announces and never sends, which
    // reads as a cut body: the change is what ddx must still name.
    let line = one_line(&stderr, "/image.raw'");
    assert!(line.contains("/image.raw'"), "{line}");
    assert!(line.contains("changed since the copy began"), "{line}");
    let written = std::fs::read(&out_file).expect("out");
    assert!(
        written.len() <= cut_at + MIB
            && data[..written.len().min(cut_at)] == written[..written.len().min(cut_at)],
        "bytes of the new version written after the old"
    );
}

/// The same cut with an ETag (S3, where object_store resumes the body
/// itself) and with a server that has no ranges (read again from the
/// start up to where it stopped).
#[test]
fn s3_and_rangeless_bodies_cut_short_are_resumed() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let data = pattern(13, 20 * MIB + 3);
    bucket.put("obj", &data).expect("seed");
    let dir = tempfile::tempdir().expect("tempdir");
    let out_file = dir.path().join("out");
    let proxy = FaultProxy::start(
        bucket.cluster.port(),
        vec![Rule::new(
            "GET",
            "/obj",
            Fault::CutAnswer {
                after: 3 * MIB,
                then: None,
            },
        )],
    );
    let out = run(ddx()
        .envs(env(bucket.env(), &proxy.endpoint(), 3))
        .arg(format!("if={}", bucket.url("obj")))
        .arg(format!("of={}", out_file.display()))
        .arg("bs=1M"));
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::read(&out_file).expect("out") == data);
    assert_eq!(proxy.faults(), 1);
    // Without its ETag the server's Last-Modified holds the version.
    let proxy = FaultProxy::start(
        bucket.cluster.port(),
        vec![Rule::new(
            "GET",
            "/obj",
            Fault::CutAnswer {
                after: 3 * MIB,
                then: None,
            },
        )],
    );
    proxy.strip_etag();
    std::fs::remove_file(&out_file).expect("rm");
    let out = run(ddx()
        .envs(env(bucket.env(), &proxy.endpoint(), 3))
        .arg(format!("if={}", bucket.url("obj")))
        .arg(format!("of={}", out_file.display()))
        .arg("bs=1M"));
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::read(&out_file).expect("out") == data);
    assert_eq!(proxy.faults(), 1);

    let served = dir.path().join("www");
    std::fs::create_dir(&served).expect("mkdir");
    std::fs::write(served.join("image.raw"), &data).expect("seed");
    let plain = match PythonHttpServer::start(&served) {
        Ok(plain) => plain,
        Err(why) => return rigs::skip(&why),
    };
    let port: u16 = plain
        .url("")
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("a port");
    // The first GET is ddx's one-byte probe, answered whole.
    let proxy = FaultProxy::start(
        port,
        vec![Rule::new(
            "GET",
            "/image.raw",
            Fault::CutAnswer {
                after: 7 * MIB,
                then: None,
            },
        )
        .after(1)],
    );
    let out = run(ddx()
        .env("HOME", "/nonexistent")
        .env("AWS_MAX_ATTEMPTS", "3")
        .arg(format!("if={}/image.raw", proxy.endpoint()))
        .arg(format!("of={}", out_file.display()))
        .arg("bs=1M"));
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::read(&out_file).expect("out") == data);
    assert_eq!(proxy.faults(), 1);
}
