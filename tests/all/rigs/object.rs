//! Servers for object ends, each started on a free loopback port over a
//! temporary directory and stopped on Drop: s3s-fs (a real S3 server
//! storing objects as plain files, so a test can compare what it stored)
//! and rclone's HTTP server (ranges, HEAD, and TLS with a certificate the
//! test makes with openssl and trusts explicitly), python's http.server,
//! which ignores `Range`, a python server that hangs up mid-body (an
//! input that fails mid-stream), and socat as a TLS front for s3s-fs (an
//! https S3 endpoint).

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{have, run_tool};

/// The credentials s3s-fs is started with.
pub const ACCESS_KEY: &str = "ddx-test-access-key";
pub const SECRET_KEY: &str = "ddx-test-secret-Zq8vN3wX";

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Wait until something accepts connections on `port`.
fn wait_listening(port: u16, child: &mut Child, what: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("{what} exited at start: {status}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("{what} did not come up on port {port}"))
}

fn stop(child: &mut Option<Child>) {
    if let Some(mut child) = child.take() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// s3s-fs serving a temporary directory: each subdirectory is a bucket,
/// each object a file at `root/BUCKET/KEY`; a multipart upload in
/// progress is `root/.upload-ID.json` plus `root/.upload_id-ID.part-N`.
pub struct S3Server {
    pub root: PathBuf,
    pub port: u16,
    child: Option<Child>,
    _dir: tempfile::TempDir,
}

impl S3Server {
    /// Err says why not (s3s-fs missing, or it did not start).
    pub fn start() -> Result<S3Server, String> {
        let dir = tempfile::Builder::new()
            .prefix("ddx-s3-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let root = dir.path().to_owned();
        if !have("s3s-fs") {
            return Err(
                "s3s-fs is not installed (cargo install s3s-fs@0.14.1 --features binary --locked)"
                    .into(),
            );
        }
        let port = free_port();
        let child = S3Server::spawn(&root, port)?;
        Ok(S3Server {
            root,
            port,
            child: Some(child),
            _dir: dir,
        })
    }

    fn spawn(root: &Path, port: u16) -> Result<Child, String> {
        let mut child = Command::new("s3s-fs")
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("s3s-fs: {e}"))?;
        if let Err(e) = wait_listening(port, &mut child, "s3s-fs") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok(child)
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Make a bucket (a directory, as s3s-fs keeps them).
    pub fn bucket(&self, name: &str) -> PathBuf {
        let path = self.root.join(name);
        std::fs::create_dir_all(&path).expect("bucket directory");
        path
    }

    /// The file s3s-fs stores an object in.
    pub fn object_file(&self, bucket: &str, key: &str) -> PathBuf {
        self.root.join(bucket).join(key)
    }

    /// The multipart uploads in progress (their bookkeeping files, and
    /// parts).
    pub fn pending_uploads(&self) -> Vec<String> {
        std::fs::read_dir(&self.root)
            .expect("server root")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.starts_with(".upload"))
            .collect()
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

    /// Stop the server now (a test of a failure mid-upload).
    pub fn kill(&mut self) {
        stop(&mut self.child);
    }

    /// Start it again on the same port and directory, after [`kill`]:
    /// uploads in progress survive (s3s-fs keeps them on disk).
    ///
    /// [`kill`]: S3Server::kill
    pub fn restart(&mut self) -> Result<(), String> {
        stop(&mut self.child);
        self.child = Some(S3Server::spawn(&self.root, self.port)?);
        Ok(())
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        stop(&mut self.child);
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
    pub port: u16,
    pub https: bool,
    child: Option<Child>,
}

impl HttpServer {
    /// Serve `dir`; with `tls`, HTTPS with that certificate and key.
    pub fn start(dir: &Path, tls: Option<&TestCa>) -> Result<HttpServer, String> {
        if !have("rclone") {
            return Err("rclone is not installed (package rclone)".into());
        }
        let port = free_port();
        let mut cmd = Command::new("rclone");
        cmd.args(["serve", "http", "--addr", &format!("127.0.0.1:{port}")])
            .arg(dir)
            .env("RCLONE_CONFIG", "/dev/null");
        if let Some(ca) = tls {
            cmd.arg("--cert").arg(&ca.cert).arg("--key").arg(&ca.key);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("rclone: {e}"))?;
        if let Err(e) = wait_listening(port, &mut child, "rclone serve http") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok(HttpServer {
            port,
            https: tls.is_some(),
            child: Some(child),
        })
    }

    /// The URL of `name` in the served directory.
    pub fn url(&self, name: &str) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// `python3 -m http.server` over a directory: no ranges, whole bodies.
pub struct PythonHttpServer {
    pub port: u16,
    child: Option<Child>,
}

impl PythonHttpServer {
    pub fn start(dir: &Path) -> Result<PythonHttpServer, String> {
        if !have("python3") {
            return Err("python3 is not installed".into());
        }
        let port = free_port();
        let mut child = Command::new("python3")
            .args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
            ])
            .arg("--directory")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("python3: {e}"))?;
        if let Err(e) = wait_listening(port, &mut child, "python3 -m http.server") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok(PythonHttpServer {
            port,
            child: Some(child),
        })
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for PythonHttpServer {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// socat terminating TLS on a free port and passing the bytes on to
/// `port`: an https endpoint in front of a plain one (s3s-fs has no TLS).
pub struct TlsFront {
    pub port: u16,
    child: Option<Child>,
}

impl TlsFront {
    pub fn start(ca: &TestCa, port: u16) -> Result<TlsFront, String> {
        if !have("socat") {
            return Err("socat is not installed (package socat)".into());
        }
        let front = free_port();
        let mut child = Command::new("socat")
            .arg(format!(
                "OPENSSL-LISTEN:{front},bind=127.0.0.1,reuseaddr,fork,verify=0,cert={},key={}",
                ca.cert.display(),
                ca.key.display()
            ))
            .arg(format!("TCP:127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("socat: {e}"))?;
        if let Err(e) = wait_listening(front, &mut child, "socat") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok(TlsFront {
            port: front,
            child: Some(child),
        })
    }

    pub fn endpoint(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// An HTTP server (python3, inline) that promises `size` bytes of zeros
/// and hangs up after `sent`: an input that fails mid-stream while the
/// object store stays up. It ignores `Range`, so it is read as one body.
pub struct ShortHttpServer {
    pub port: u16,
    child: Option<Child>,
}

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
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Short).serve_forever()
"#;

impl ShortHttpServer {
    pub fn start(size: usize, sent: usize) -> Result<ShortHttpServer, String> {
        if !have("python3") {
            return Err("python3 is not installed".into());
        }
        let port = free_port();
        let mut child = Command::new("python3")
            .args(["-c", SHORT_SERVER])
            .args([port.to_string(), size.to_string(), sent.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("python3: {e}"))?;
        if let Err(e) = wait_listening(port, &mut child, "python3 (short server)") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok(ShortHttpServer {
            port,
            child: Some(child),
        })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/image.raw", self.port)
    }
}

impl Drop for ShortHttpServer {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}
