//! Servers for object ends, each started on a free loopback port over a
//! temporary directory and stopped on Drop (the S3 store of most tests is
//! the SeaweedFS cluster of `cluster`): s3s-fs (a one-process S3 server
//! storing objects as plain files in a directory the test chooses, for
//! what the cluster cannot show: a store whose disk fills, one that gives
//! no checksums) and rclone's HTTP server (ranges, HEAD, and TLS with a certificate the
//! test makes with openssl and trusts explicitly), python's http.server,
//! which ignores `Range`, a python server that hangs up mid-body (an
//! input that fails mid-stream), and socat as a TLS front for a plain
//! S3 endpoint (the cluster's gateway, as an https one).

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{have, run_tool, spawn_server};

/// The credentials every S3 server here is started with.
pub const ACCESS_KEY: &str = "ddx-test-access-key";
pub const SECRET_KEY: &str = "ddx-test-secret-Zq8vN3wX";

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// An http URL whose password and query (a presigned URL's signature)
/// are secrets that no text may show; nobody listens on its port.
pub fn secret_url() -> String {
    format!(
        "http://user:{}@127.0.0.1:{}/obj?X-Amz-Signature={}",
        URL_SECRETS[0],
        free_port(),
        URL_SECRETS[1]
    )
}

const URL_SECRETS: [&str; 2] = ["Url-Password-987", "SignatureValue555"];

/// No text shows any of `secrets`, nor [`secret_url`]'s.
#[track_caller]
pub fn assert_hidden(texts: &[String], secrets: &[&str]) {
    for text in texts {
        for secret in secrets.iter().chain(&URL_SECRETS) {
            assert!(!text.contains(secret), "{secret} in: {text}");
        }
    }
}

/// A server process listening on a loopback port: every server here is
/// one, killed on Drop (also when its start fails half-way, or a test
/// panics).
pub struct Listening {
    pub port: u16,
    child: Option<Child>,
}

impl Listening {
    /// Spawn `cmd` (no stdio) and wait until something accepts
    /// connections on `port`; Err if `what` exits first or never does.
    fn start(mut cmd: Command, port: u16, what: &str) -> Result<Listening, String> {
        let child = spawn_server(&mut cmd, Stdio::null(), what)?;
        let mut server = Listening {
            port,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
                return Ok(server);
            }
            if let Some(Ok(Some(status))) = server.child.as_mut().map(Child::try_wait) {
                return Err(format!("{what} exited at start: {status}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!("{what} did not come up on port {port}"))
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.stop();
    }
}

/// s3s-fs serving a temporary directory: each subdirectory is a bucket,
/// each object a file at `root/BUCKET/KEY`; a multipart upload in
/// progress is `root/.upload-ID.json` plus `root/.upload_id-ID.part-N`.
pub struct S3Server {
    pub root: PathBuf,
    pub port: u16,
    /// The running server, stopped when this is dropped.
    _server: Listening,
}

impl S3Server {
    /// s3s-fs storing its buckets in `root` (a small filesystem the test
    /// made), with an empty bucket "bkt".
    pub fn start_in(root: &Path) -> Result<S3Server, String> {
        if !have("s3s-fs") {
            return Err("s3s-fs is not installed".into());
        }
        std::fs::create_dir_all(root.join("bkt")).map_err(|e| e.to_string())?;
        let port = free_port();
        let server = S3Server::spawn(root, port)?;
        Ok(S3Server {
            root: root.to_owned(),
            port,
            _server: server,
        })
    }

    /// Every file of a multipart upload left on the server's disk: its
    /// bookkeeping and its parts, whole or being received.
    pub fn upload_files(&self) -> Vec<String> {
        std::fs::read_dir(&self.root)
            .expect("server root")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.starts_with(".upload") || name.contains(".upload-"))
            .collect()
    }

    fn spawn(root: &Path, port: u16) -> Result<Listening, String> {
        let mut cmd = Command::new("s3s-fs");
        cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(root);
        Listening::start(cmd, port, "s3s-fs")
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The file s3s-fs stores an object in.
    pub fn object_file(&self, bucket: &str, key: &str) -> PathBuf {
        self.root.join(bucket).join(key)
    }

    /// The standard environment pointing a client at this server.
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
}

/// A certificate authority and a certificate it signed for 127.0.0.1,
/// made with openssl in `dir`.
pub struct TestCa {
    /// The authority's certificate: what a client must trust.
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TestCa {
    pub fn new(dir: &Path) -> Result<TestCa, String> {
        if !have("openssl") {
            return Err("openssl is not installed".into());
        }
        let file = |name: &str| dir.join(name);
        let ca = TestCa {
            ca: file("ca.pem"),
            cert: file("cert.pem"),
            key: file("key.pem"),
        };
        run_tool(
            Command::new("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                ])
                .args(["-subj", "/CN=ddx test CA", "-keyout"])
                .arg(file("ca.key"))
                .arg("-out")
                .arg(&ca.ca),
            "openssl (CA)",
        )?;
        run_tool(
            Command::new("openssl")
                .args([
                    "req",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-subj",
                    "/CN=127.0.0.1",
                ])
                .arg("-keyout")
                .arg(&ca.key)
                .arg("-out")
                .arg(file("cert.csr")),
            "openssl (request)",
        )?;
        std::fs::write(
            file("ext.cnf"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n",
        )
        .map_err(|e| e.to_string())?;
        run_tool(
            Command::new("openssl")
                .args(["x509", "-req", "-days", "2", "-in"])
                .arg(file("cert.csr"))
                .arg("-CA")
                .arg(&ca.ca)
                .arg("-CAkey")
                .arg(file("ca.key"))
                .args(["-CAcreateserial", "-extfile"])
                .arg(file("ext.cnf"))
                .arg("-out")
                .arg(&ca.cert),
            "openssl (signing)",
        )?;
        Ok(ca)
    }
}

/// `rclone serve http` over a directory, plain or with TLS.
pub struct HttpServer {
    server: Listening,
    pub https: bool,
}

impl HttpServer {
    /// Serve `dir`; with `tls`, HTTPS with that certificate and key.
    pub fn start(dir: &Path, tls: Option<&TestCa>) -> Result<HttpServer, String> {
        if !have("rclone") {
            return Err("rclone is not installed (package rclone)".into());
        }
        let port = free_port();
        let mut cmd = Command::new("rclone");
        // Without --dir-cache-time 0, rclone answers from a listing it
        // keeps for minutes: a file replaced meanwhile is served with its
        // old Last-Modified, and If-Unmodified-Since cannot catch it.
        cmd.args(["serve", "http", "--dir-cache-time", "0s"])
            .args(["--addr", &format!("127.0.0.1:{port}")])
            .arg(dir)
            .env("RCLONE_CONFIG", "/dev/null");
        if let Some(ca) = tls {
            cmd.arg("--cert").arg(&ca.cert).arg("--key").arg(&ca.key);
        }
        Ok(HttpServer {
            server: Listening::start(cmd, port, "rclone serve http")?,
            https: tls.is_some(),
        })
    }

    /// The URL of `name` in the served directory.
    pub fn url(&self, name: &str) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}/{name}", self.server.port)
    }
}

/// `python3 -m http.server` over a directory: no ranges, whole bodies.
pub struct PythonHttpServer(Listening);

impl PythonHttpServer {
    pub fn start(dir: &Path) -> Result<PythonHttpServer, String> {
        if !have("python3") {
            return Err("python3 is not installed".into());
        }
        let port = free_port();
        let mut cmd = Command::new("python3");
        cmd.args(["-m", "http.server", "--bind", "127.0.0.1"])
            .arg(port.to_string())
            .arg("--directory")
            .arg(dir);
        let server = Listening::start(cmd, port, "python3 -m http.server")?;
        Ok(PythonHttpServer(server))
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.0.port)
    }
}

/// socat terminating TLS on a free port and passing the bytes on to
/// `port`: an https endpoint in front of a plain one (the gateway here
/// serves plain HTTP).
pub struct TlsFront(Listening);

impl TlsFront {
    pub fn start(ca: &TestCa, port: u16) -> Result<TlsFront, String> {
        if !have("socat") {
            return Err("socat is not installed (package socat)".into());
        }
        let front = free_port();
        let mut cmd = Command::new("socat");
        cmd.arg(format!(
            "OPENSSL-LISTEN:{front},bind=127.0.0.1,reuseaddr,fork,verify=0,cert={},key={}",
            ca.cert.display(),
            ca.key.display()
        ))
        .arg(format!("TCP:127.0.0.1:{port}"));
        Ok(TlsFront(Listening::start(cmd, front, "socat")?))
    }

    pub fn endpoint(&self) -> String {
        format!("https://127.0.0.1:{}", self.0.port)
    }
}

/// An HTTP server (python3, inline) that promises `size` bytes of zeros
/// and hangs up after `sent`: an input that fails mid-stream while the
/// object store stays up. It ignores `Range`, so it is read as one body.
/// A web server (python3's, one thread per connection, as real servers
/// serve several at once) that promises `size` bytes and hangs up after
/// `sent`, ignoring ranges. One connection at a time let the answer to
/// ddx's one-byte range probe, whose body the client drops unread, hold
/// the only thread while the next GET waited to be accepted: a two-minute
/// timeout now and then.
pub struct ShortHttpServer(Listening);

const SHORT_SERVER: &str = r#"
import http.server, sys
size, sent = int(sys.argv[2]), int(sys.argv[3])
class Short(http.server.BaseHTTPRequestHandler):
    def head(self):
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
    def do_HEAD(self):
        self.head()
    def do_GET(self):
        self.head()
        block = bytes(1 << 20)
        left = sent
        while left > 0:
            self.wfile.write(block[:min(left, len(block))])
            left -= len(block)
        self.wfile.flush()
        self.close_connection = True
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Short)
server.daemon_threads = True
server.serve_forever()
"#;

impl ShortHttpServer {
    pub fn start(size: usize, sent: usize) -> Result<ShortHttpServer, String> {
        if !have("python3") {
            return Err("python3 is not installed".into());
        }
        let port = free_port();
        let mut cmd = Command::new("python3");
        cmd.args(["-c", SHORT_SERVER])
            .args([port.to_string(), size.to_string(), sent.to_string()]);
        let server = Listening::start(cmd, port, "python3 (short server)")?;
        Ok(ShortHttpServer(server))
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/image.raw", self.0.port)
    }
}
