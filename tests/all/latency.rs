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
    /// `filters` (`--filter=NAME`) go before the plugin, their
    /// `parameters` after it.
    fn start(
        file: &std::path::Path,
        filters: &[&str],
        parameters: &[String],
    ) -> Result<TcpExport, String> {
        if !rigs::have("nbdkit") {
            return Err("nbdkit is not installed (package nbdkit)".into());
        }
        let port = free_port();
        let mut cmd = Command::new("nbdkit");
        cmd.args(["--foreground", "--exit-with-parent"])
            .args(["-i", "127.0.0.1", "-p", &port.to_string()])
            .args(filters)
            .arg("file")
            .arg(format!("file={}", file.display()))
            .args(parameters);
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
    let Some(export) = rigs::or_skip(TcpExport::start(&served, &[], &[])) else {
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

/// nbdkit serving `served` with its log filter, and the log's path (beside
/// `served`); None where there is no log filter or nbdkit (skipped, said).
fn logged_export(served: &std::path::Path) -> Option<(TcpExport, std::path::PathBuf)> {
    if !rigs::nbd::nbdkit_has_filter("log") {
        rigs::skip("nbdkit has no log filter");
        return None;
    }
    let log = served.with_file_name("requests.log");
    let logfile = [format!("logfile={}", log.display())];
    let export = rigs::or_skip(TcpExport::start(served, &["--filter=log"], &logfile))?;
    Some((export, log))
}

/// How many connections nbdkit's log filter shows begun, in its log from
/// byte `from` on. An NBD end that writes begins a connection beyond its
/// first only when a request is in flight on each it has: one at a time,
/// it never does.
fn connections(log: &std::path::Path, from: usize) -> usize {
    let text = std::fs::read_to_string(log).expect("log");
    text[from..].matches(" Preconnect id=").count()
}

/// The time of day of a line of nbdkit's log filter, in seconds.
fn logged_at(line: &str) -> f64 {
    let clock = line.split_whitespace().nth(1).expect("a time");
    clock
        .split(':')
        .map(|part| part.parse::<f64>().expect("a number"))
        .fold(0.0, |seconds, part| seconds * 60.0 + part)
}

/// How many of the reads in nbdkit's log from byte `from` on reached the
/// server within `within` of the read before them. A reader that sends
/// one at a time waits a round trip between two: none does.
fn reads_together(log: &std::path::Path, from: usize, within: Duration) -> usize {
    let text = std::fs::read_to_string(log).expect("log");
    let times: Vec<f64> = text[from..]
        .lines()
        .filter(|line| line.contains(" Read id="))
        .map(logged_at)
        .collect();
    times
        .windows(2)
        .filter(|pair| pair[1] - pair[0] < within.as_secs_f64())
        .count()
}

/// GNU's records (a write per read as a pipe gives them; reads into the
/// null device, a character device) go to and from an export across a
/// link several at once: one at a time, each waited a round trip, and a
/// pipe into an export 25 ms away moved 1.3 MB/s. nbdkit's log is the
/// test, not a copy's time: the writer's connections, and the reads
/// arriving together; and a pipe's pieces, smaller than the records,
/// reach the export gathered into whole ones.
#[test]
fn records_cross_a_link_with_latency_several_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(33, 16 * MIB);
    let served = dir.path().join("export.img");
    std::fs::File::create(&served)
        .and_then(|f| f.set_len(data.len() as u64))
        .expect("export");
    let Some((export, log)) = logged_export(&served) else {
        return;
    };
    let proxy = DelayProxy::start(export.port, DELAY).expect("proxy");
    let uri = format!("nbd://127.0.0.1:{}/", proxy.port());
    let up = Ddx::new()
        .arg(format!("of={uri}"))
        .arg("bs=256K")
        .stdin(data.clone())
        .succeeds();
    assert!(std::fs::read(&served).expect("served") == data);
    // The pipe's pieces went in whole records of bs= bytes, gathered.
    let text = std::fs::read_to_string(&log).expect("log");
    let sizes: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(" Write id="))
        .filter_map(|line| line.split_whitespace().find(|w| w.starts_with("count=")))
        .collect();
    assert_eq!(sizes, ["count=0x40000"; 64], "the writes the export saw");
    let writes = connections(&log, 0);
    assert!(
        writes > 1,
        "{writes} connection: a record at a time in flight"
    );
    let before = std::fs::read_to_string(&log).expect("log").len();
    let down = Ddx::new()
        .arg(format!("if={uri}"))
        .arg("of=/dev/null")
        .arg("bs=256K")
        .succeeds();
    // A reader begins its other connections at once (the test below), so
    // their count says nothing here: reads arriving together do.
    let together = reads_together(&log, before, DELAY / 2);
    assert!(
        together >= 8,
        "{together} of 64 reads came with the one before: a record at a time in flight"
    );
    // Every byte is counted, as GNU counts records: whole ones read back.
    assert_eq!(
        statistics(&down.stderr),
        [
            "64+0 records in",
            "64+0 records out",
            "16777216 bytes (17 MB, 16 MiB)"
        ]
    );
    assert_eq!(statistics(&up.stderr)[2], "16777216 bytes (17 MB, 16 MiB)");
}

/// A reader's other connections are begun while it waits for its first
/// answer about the export's extents, not after it: over a link with
/// latency their handshakes then overlap that round trip, and they take
/// requests a round trip sooner. nbdkit's log shows them begun before the
/// question reaches it (a link of 100 ms each way, so that a slow
/// machine's few milliseconds between the two cannot reorder them).
#[test]
fn a_reader_begins_its_other_connections_while_it_waits_for_extents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = pattern(34, 4 * MIB);
    let served = dir.path().join("export.img");
    std::fs::write(&served, &data).expect("export");
    let Some((export, log)) = logged_export(&served) else {
        return;
    };
    let proxy = DelayProxy::start(export.port, Duration::from_millis(100)).expect("proxy");
    let back = dir.path().join("back");
    Ddx::new()
        .arg(format!("if=nbd://127.0.0.1:{}/", proxy.port()))
        .arg(format!("of={}", back.display()))
        .arg("bs=1M")
        .succeeds();
    assert!(std::fs::read(&back).expect("back") == data);
    // From the first connection's handshake done to its first question.
    let text = std::fs::read_to_string(&log).expect("log");
    let ready = text.find(" Connect export=").expect("a handshake");
    let asked = text
        .find(" Extents id=")
        .expect("the reader asked for extents");
    let begun = text[ready..asked].matches(" Preconnect id=").count();
    assert_eq!(
        begun,
        3, // the most an NBD end makes (4), but for the first
        "connections begun between the first's handshake and its question about extents"
    );
}
