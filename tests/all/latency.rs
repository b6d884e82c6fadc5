//! Remote ends over a link with latency: the object end against the
//! shared SeaweedFS cluster and the NBD end against nbdkit on TCP, each
//! reached through the delay proxy (`rigs::delay`, every byte held 25 ms
//! each way). What is held here is that such a link changes nothing in
//! what is copied or counted; how much of the throughput it keeps is
//! measured by bench/latency.sh, not by a timed test.

use std::net::{Ipv4Addr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::rigs;
use crate::rigs::bytes::pattern;
use crate::rigs::cluster::bucket_or_skip;
use crate::rigs::delay::DelayProxy;
use crate::rigs::fixture::{statistics, Ddx};
use crate::rigs::object::free_port;

const MIB: usize = 1 << 20;
const DELAY: Duration = Duration::from_millis(25);

#[test]
fn an_object_goes_up_and_down_a_link_with_latency_unchanged() {
    let Some(bucket) = bucket_or_skip() else {
        return;
    };
    let proxy = DelayProxy::start(bucket.cluster.port(), DELAY).expect("proxy");
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(31, 3 * 16 * MIB + 777);
    let input = dir.path().join("in");
    std::fs::write(&input, &data).expect("input");
    let ddx = || {
        Ddx::new()
            .envs(bucket.env())
            .env("HOME", "/nonexistent")
            .env("AWS_ENDPOINT_URL", proxy.endpoint())
    };
    let up = ddx()
        .arg(format!("if={}", input.display()))
        .arg(format!("of={}", bucket.url("far.img")))
        .arg("bs=4M")
        .succeeds();
    assert!(bucket.object("far.img").expect("stored") == data);
    let back = dir.path().join("back");
    let down = ddx()
        .arg(format!("if={}", bucket.url("far.img")))
        .arg(format!("of={}", back.display()))
        .arg("bs=4M")
        .succeeds();
    assert!(std::fs::read(&back).expect("back") == data);
    assert_eq!(statistics(&up.stderr), statistics(&down.stderr));
    bucket.assert_no_pending_upload();
}

/// nbdkit serving a file on a TCP port of its own.
struct TcpExport {
    port: u16,
    child: Child,
}

impl TcpExport {
    fn start(file: &std::path::Path) -> Result<TcpExport, String> {
        if !rigs::have("nbdkit") {
            return Err("nbdkit is not installed (package nbdkit)".into());
        }
        let port = free_port();
        let mut cmd = Command::new("nbdkit");
        cmd.args(["--foreground", "--exit-with-parent"])
            .args(["-i", "127.0.0.1", "-p", &port.to_string(), "file"])
            .arg(format!("file={}", file.display()));
        let mut child = rigs::spawn_server(&mut cmd, Stdio::null(), "nbdkit")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
                let _ = child.kill();
                return Err("nbdkit did not start on TCP".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(TcpExport { port, child })
    }
}

impl Drop for TcpExport {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_nbd_export_is_written_and_read_over_a_link_with_latency_unchanged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(32, 40 * MIB + 512);
    let input = dir.path().join("in");
    std::fs::write(&input, &data).expect("input");
    let served = dir.path().join("export.img");
    std::fs::File::create(&served)
        .and_then(|f| f.set_len(data.len() as u64))
        .expect("export");
    let Some(export) = rigs::or_skip(TcpExport::start(&served)) else {
        return;
    };
    let proxy = DelayProxy::start(export.port, DELAY).expect("proxy");
    let uri = format!("nbd://127.0.0.1:{}/", proxy.port());
    let up = Ddx::new()
        .arg(format!("if={}", input.display()))
        .arg(format!("of={uri}"))
        .arg("bs=1M")
        .succeeds();
    assert!(std::fs::read(&served).expect("served") == data);
    let back = dir.path().join("back");
    let down = Ddx::new()
        .arg(format!("if={uri}"))
        .arg(format!("of={}", back.display()))
        .arg("bs=1M")
        .succeeds();
    assert!(std::fs::read(&back).expect("back") == data);
    assert_eq!(statistics(&up.stderr), statistics(&down.stderr));
}
