//! Faults a distributed object store has, through the command line,
//! against the SeaweedFS cluster these tests share, one at a time
//! (`rigs::cluster::for_faults`), each in a bucket of its own: a
//! volume server SIGKILLed during an upload and during a download, the
//! S3 gateway killed during an upload kept by `--map`, the filer
//! restarted during a download, and a bucket without replication with a
//! volume server down.
//!
//! What must hold: a fault the cluster survives (a replica left) costs
//! the copy nothing, and the object is the input; a fault it does not is
//! one line naming the end, the server and what ddx was doing, in the
//! server's own words (its status and S3 code); and nothing is said to
//! be stored that the cluster does not hold.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use crate::object_faults::{env, last_record, one_line, run};
use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cluster::{self, Cluster, Replication, Role};
use crate::rigs::cmd::ddx;
use crate::rigs::fault::{Fault, FaultProxy, Rule};
use crate::rigs::fixture::statistics;

const MIB: usize = 1 << 20;

/// The cluster the fault tests share, held by this test until it ends,
/// or None after `rigs::skip`.
fn fault_cluster() -> Option<MutexGuard<'static, Cluster>> {
    rigs::or_skip(cluster::for_faults())
}

/// Poll `done` every 10 ms for up to a minute; whether it came true.
fn wait_until(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// ddx reading its input from a pipe the test feeds, with stderr read by
/// a thread that forwards each line.
struct Feeding {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Feeding {
    fn start(cmd: &mut Command) -> Feeding {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let stderr = child.stderr.take().expect("stderr");
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Feeding { child, lines }
    }

    /// The exit status and everything said.
    fn finish(mut self) -> (std::process::ExitStatus, String) {
        drop(self.child.stdin.take());
        let status = self.child.wait().expect("wait");
        (status, self.lines.iter().collect::<Vec<_>>().join("\n"))
    }
}

/// A volume server that holds a copy of everything the bucket has is
/// SIGKILLed in the middle of an upload, and (each copy's server in turn)
/// in the middle of a download: every part and range is served by the
/// replica left, and the object and the download are the input.
#[test]
fn a_volume_server_killed_during_an_upload_or_a_download_costs_nothing() {
    let Some(cluster) = fault_cluster() else {
        return;
    };
    let bucket = cluster.bucket("replicated").expect("bucket");
    let data = pattern(21, 5 * 16 * MIB + 4321);
    let mut upload = Feeding::start(
        ddx()
            .envs(env(bucket.env(), &bucket.endpoint(), 10))
            .arg(format!("of={}", bucket.url("up.bin")))
            .arg("bs=1M"),
    );
    let mut stdin = upload.child.stdin.take().expect("stdin");
    stdin.write_all(&data[..16 * MIB + 1]).expect("feed");
    assert!(
        wait_until(|| bucket.stored_parts() >= 1),
        "the first part never landed"
    );
    let holders = cluster.holding(&bucket.name);
    assert_eq!(holders.len(), 2, "two copies of the bucket's volume");
    cluster.kill(Role::Volume(holders[0]));
    stdin.write_all(&data[16 * MIB + 1..]).expect("feed");
    drop(stdin);
    let (status, stderr) = upload.finish();
    assert!(status.success(), "{stderr}");
    assert!(
        bucket.object("up.bin").expect("stored") == data,
        "the cluster stored other bytes"
    );
    bucket.assert_no_pending_upload();
    cluster
        .restart(Role::Volume(holders[0]))
        .expect("the volume server again");

    // Down, each copy's server killed in turn while the ranges are held
    // back by a proxy: the gateway reads them from the other copy.
    let holders = cluster.holding(&bucket.name);
    assert!(holders.len() >= 2, "{holders:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    for &killed in &holders {
        let proxy = FaultProxy::start(
            cluster.port(),
            vec![Rule::new("GET", "/up.bin", Fault::Delay(Duration::from_millis(500))).times(100)],
        );
        let out = dir.path().join("down.bin");
        let mut download = ddx()
            .envs(env(bucket.env(), &proxy.endpoint(), 10))
            .arg(format!("if={}", bucket.url("up.bin")))
            .arg(format!("of={}", out.display()))
            .arg("bs=4M")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        assert!(
            wait_until(|| proxy.faults() > 0),
            "no range asked for: {:?}",
            proxy.seen()
        );
        cluster.kill(Role::Volume(killed));
        let mut stderr = String::new();
        download
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut stderr)
            .expect("stderr");
        let status = download.wait().expect("wait");
        assert!(status.success(), "volume server {killed} killed: {stderr}");
        assert!(
            std::fs::read(&out).expect("downloaded") == data,
            "volume server {killed} killed: other bytes downloaded"
        );
        cluster
            .restart(Role::Volume(killed))
            .expect("the volume server again");
    }
}

/// The gateway SIGKILLed in the middle of an upload kept by `--map`: ddx
/// exits 1 with one line naming the part, its offset and the server that
/// refused it, and saying the upload is kept; the statistics and the
/// last progress record count what the cluster stored, which the map
/// records; once the gateway is back, `--resume` completes the object.
#[test]
fn a_gateway_killed_during_a_mapped_upload_is_named_and_resumed_once_it_is_back() {
    let Some(cluster) = fault_cluster() else {
        return;
    };
    let bucket = cluster.bucket("kept").expect("bucket");
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(14, 16 * 16 * MIB + 99);
    let input = dir.path().join("in");
    std::fs::write(&input, &data).expect("input");
    let map = dir.path().join("m");
    let environment = env(bucket.env(), &bucket.endpoint(), 2);
    let upload = |resume: bool| {
        let mut cmd = ddx();
        cmd.envs(environment.clone())
            .arg(format!("if={}", input.display()))
            .arg(format!("of={}", bucket.url("kept.img")))
            .args(["bs=1M", "--progress-fd=2"])
            .arg(format!("--map={}", map.display()));
        if resume {
            cmd.arg("--resume");
        }
        cmd
    };
    let first = upload(false)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let recorded = || {
        std::fs::read_to_string(&map)
            .unwrap_or_default()
            .contains("# ddx part: 2 ")
    };
    assert!(wait_until(recorded), "no part recorded");
    cluster.kill(Role::Gateway);
    let out = first.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = one_line(&stderr, &format!("'{}'", bucket.url("kept.img")));
    assert!(line.contains("uploading part "), "{line}");
    assert!(line.contains(" (from byte "), "{line}");
    assert!(
        line.contains(&bucket.endpoint()),
        "the server is named: {line}"
    );
    assert!(
        line.contains("the upload stays on the server, for --resume"),
        "{line}"
    );
    // What the map records as stored is what the statistics and the last
    // progress record count.
    let text = std::fs::read_to_string(&map).expect("map");
    let record = ddx::ends::upload::UploadRecord::parse(&text)
        .expect("a record")
        .expect("an upload");
    let stored = record.stored();
    assert!(stored > 0 && stored < data.len() as u64, "{text}");
    let stats = statistics(&stderr);
    let mib = stored / MIB as u64;
    assert!(
        stats
            .iter()
            .any(|l| l.starts_with(&format!("{mib}+0 records out"))),
        "{stats:?} for {stored} bytes stored"
    );
    assert!(
        stats
            .iter()
            .any(|l| l.starts_with(&format!("{stored} bytes "))),
        "{stats:?} for {stored} bytes stored"
    );
    let last = last_record(&stderr);
    assert_eq!(last["bytes"], stored, "{last}");
    cluster.restart(Role::Gateway).expect("the gateway again");
    assert!(
        !bucket.pending_uploads().is_empty(),
        "the upload was not kept"
    );
    let out = run(&mut upload(true));
    assert!(out.status.success(), "{out:?}");
    assert!(bucket.object("kept.img").expect("stored") == data);
    bucket.assert_no_pending_upload();
}

/// The filer (where the gateway finds every object's chunks) restarted
/// while a download's ranges are on their way: with tries to spare ddx
/// retries until it is back and the copy completes; with one try, the
/// copy completes or fails in the server's own words.
#[test]
fn a_filer_restarted_during_a_download_is_retried_or_named_in_the_servers_words() {
    let Some(cluster) = fault_cluster() else {
        return;
    };
    let bucket = cluster.bucket("filer").expect("bucket");
    let data = pattern(22, 6 * 8 * MIB + 17);
    bucket.put("obj.bin", &data).expect("seed");
    let dir = tempfile::tempdir().expect("tempdir");
    for attempts in [20, 1] {
        let proxy = FaultProxy::start(
            cluster.port(),
            vec![
                Rule::new("GET", "/obj.bin", Fault::Delay(Duration::from_millis(1000))).times(100),
            ],
        );
        let out = dir.path().join(format!("down-{attempts}"));
        let download = ddx()
            .envs(env(bucket.env(), &proxy.endpoint(), attempts))
            .arg(format!("if={}", bucket.url("obj.bin")))
            .arg(format!("of={}", out.display()))
            .arg("bs=4M")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        assert!(wait_until(|| proxy.faults() > 0), "no range asked for");
        cluster.kill(Role::Filer);
        // Down while the held ranges go on to the gateway.
        std::thread::sleep(Duration::from_millis(1500));
        cluster.restart(Role::Filer).expect("the filer again");
        let done = download.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&done.stderr);
        // With one try, the gateway may still have answered every range
        // (it keeps what the filer told it a while): then the copy is
        // whole; otherwise it fails, in the server's words.
        if attempts > 1 || done.status.success() {
            assert!(done.status.success(), "{stderr}");
            assert!(std::fs::read(&out).expect("out") == data);
        } else {
            assert_eq!(done.status.code(), Some(1), "{stderr}");
            let line = one_line(&stderr, &format!("'{}'", bucket.url("obj.bin")));
            assert!(line.contains("the server answered "), "{line}");
        }
    }
}

/// A bucket without replication, one of whose volume servers is down:
/// reading what it held fails with the server's 500 named, an upload
/// either fails the same way or is stored whole, and nothing said to be
/// stored is missing once the server is back.
#[test]
fn an_unreplicated_bucket_with_a_volume_server_down_names_the_500_and_claims_nothing() {
    let Some(cluster) = fault_cluster() else {
        return;
    };
    let bucket = cluster
        .bucket_replicated("single", Replication::None)
        .expect("bucket");
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(23, 2 * 16 * MIB + 5);
    let input = dir.path().join("in");
    std::fs::write(&input, &data).expect("input");
    let copy = |from: String, to: String| {
        run(ddx()
            .envs(env(bucket.env(), &bucket.endpoint(), 3))
            .arg(format!("if={from}"))
            .arg(format!("of={to}"))
            .arg("bs=1M"))
    };
    let out = copy(input.display().to_string(), bucket.url("before.bin"));
    assert!(out.status.success(), "{out:?}");
    let holders = cluster.holding(&bucket.name);
    assert_eq!(holders.len(), 1, "one copy: {holders:?}");
    cluster.kill(Role::Volume(holders[0]));

    // Its only copy is gone with its server: the download fails, naming
    // the gateway's 500.
    let back = dir.path().join("back");
    let out = copy(bucket.url("before.bin"), back.display().to_string());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = one_line(&stderr, &format!("'{}'", bucket.url("before.bin")));
    assert!(line.contains("500"), "{line}");
    let copied = statistics(&stderr);
    let written = std::fs::metadata(&back).map_or(0, |m| m.len());
    assert!(
        copied
            .iter()
            .any(|l| l.starts_with(&format!("{written} bytes"))),
        "{copied:?}, {written} bytes in the output"
    );
    assert!(data[..written as usize] == std::fs::read(&back).unwrap_or_default()[..]);

    // An upload while the server is down: stored whole, or failed with
    // the server's words; never said to be stored when it is not.
    let out = copy(input.display().to_string(), bucket.url("during.bin"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said_stored = out.status.success();
    if !said_stored {
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let line = one_line(&stderr, &format!("'{}'", bucket.url("during.bin")));
        assert!(line.contains("the server answered "), "{line}");
        assert!(!bucket.has("during.bin"));
    }
    cluster
        .restart(Role::Volume(holders[0]))
        .expect("the volume server again");
    if said_stored {
        assert!(
            bucket.object("during.bin").expect("stored") == data,
            "said to be stored, and is not"
        );
    }
    let out = copy(bucket.url("before.bin"), back.display().to_string());
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::read(&back).expect("back") == data);
}
