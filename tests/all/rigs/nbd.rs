//! NBD servers for tests: nbdkit or qemu-nbd on a Unix socket in a
//! temporary directory, started in the foreground as a child of the test
//! and killed when dropped (also on panic), so no server outlives its
//! test. Err says why a server cannot be had here (a missing tool or
//! plugin), for `rigs::skip`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::have;

/// The log filter's file, in the server's directory.
const REQUESTS: &str = "requests.log";

pub struct Server {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    child: Option<Child>,
    stderr: PathBuf,
}

impl Server {
    /// `nbdkit ARGS` (plugin, filters and their parameters) on a fresh
    /// socket.
    pub fn nbdkit(args: &[&str]) -> Result<Server, String> {
        Server::nbdkit_in(tempdir()?, args)
    }

    /// `nbdkit ARGS` with its files in `dir` (made beforehand by the test
    /// for an image, a log...). Err also when a `--filter=NAME` in ARGS
    /// is not installed: a filter stack is part of the server asked for.
    pub fn nbdkit_in(dir: tempfile::TempDir, args: &[&str]) -> Result<Server, String> {
        if !have("nbdkit") {
            return Err("nbdkit is not installed (package nbdkit)".into());
        }
        let mut filters = args.iter().filter_map(|a| a.strip_prefix("--filter="));
        if let Some(missing) = filters.find(|f| !nbdkit_has_filter(f)) {
            return Err(format!("nbdkit has no {missing} filter"));
        }
        let socket = dir.path().join("nbd.sock");
        let mut cmd = Command::new("nbdkit");
        cmd.args(["--foreground", "--exit-with-parent", "--unix"])
            .arg(&socket)
            .args(args);
        Server::start(dir, socket, cmd, "nbdkit")
    }

    /// `nbdkit --filter=log ARGS`, logging every request the client sends
    /// to [`Server::log_file`] (the log filter outermost, before ARGS'
    /// filters).
    pub fn nbdkit_logged(args: &[&str]) -> Result<Server, String> {
        let dir = tempdir()?;
        let log = format!("logfile={}", dir.path().join(REQUESTS).display());
        let args = [&["--filter=log"], args, &[log.as_str()]].concat();
        Server::nbdkit_in(dir, &args)
    }

    /// The request log of a server from [`Server::nbdkit_logged`].
    pub fn log_file(&self) -> PathBuf {
        self.path(REQUESTS)
    }

    /// `nbdkit --tls=require ARGS`, taking only clients that hold the
    /// pre-shared key made here (by psktool, in the server's directory).
    pub fn nbdkit_psk(args: &[&str]) -> Result<(Server, Psk), String> {
        let dir = tempdir()?;
        let psk = Psk::make(dir.path().join("keys.psk"))?;
        let tls = format!("--tls-psk={}", psk.file.display());
        let args = [&["--tls=require", tls.as_str()], args].concat();
        Ok((Server::nbdkit_in(dir, &args)?, psk))
    }

    /// `qemu-nbd --socket=S ARGS` (serving more than one connection, and
    /// going on after a client leaves).
    pub fn qemu_nbd_in(dir: tempfile::TempDir, args: &[&str]) -> Result<Server, String> {
        if !have("qemu-nbd") {
            return Err("qemu-nbd is not installed (package qemu-utils)".into());
        }
        let socket = dir.path().join("nbd.sock");
        let mut cmd = Command::new("qemu-nbd");
        cmd.arg(format!("--socket={}", socket.display()))
            .args(["--persistent", "--shared=8"])
            .args(args);
        Server::start(dir, socket, cmd, "qemu-nbd")
    }

    fn start(
        dir: tempfile::TempDir,
        socket: PathBuf,
        mut cmd: Command,
        what: &str,
    ) -> Result<Server, String> {
        let stderr = dir.path().join(format!("{what}.stderr"));
        let log = std::fs::File::create(&stderr).map_err(|e| e.to_string())?;
        let child = super::spawn_server(&mut cmd, log, what)?;
        let mut server = Server {
            dir,
            socket,
            child: Some(child),
            stderr,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        // The socket file appears at bind(2), before the server listens:
        // ready is when a connection is accepted.
        while std::os::unix::net::UnixStream::connect(&server.socket).is_err() {
            let exited = server
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > deadline {
                return Err(format!("{what} did not start: {}", server.log().trim()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(server)
    }

    /// The export as an NBD URI.
    pub fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.socket.display())
    }

    /// What the server wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Start nbdkit again with `args` on the same socket, after
    /// [`Server::kill`]: clients reach it at the same URI.
    pub fn restart_nbdkit(&mut self, args: &[&str]) -> Result<(), String> {
        self.kill();
        let _ = std::fs::remove_file(&self.socket);
        let mut cmd = Command::new("nbdkit");
        cmd.args(["--foreground", "--exit-with-parent", "--unix"])
            .arg(&self.socket)
            .args(args);
        let log = std::fs::File::create(&self.stderr).map_err(|e| e.to_string())?;
        self.child = Some(super::spawn_server(&mut cmd, log, "nbdkit")?);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            if Instant::now() > deadline {
                return Err(format!("nbdkit did not start again: {}", self.log().trim()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Kill the server now (SIGKILL: no goodbye to its clients).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A TLS pre-shared key for the user "ddx", in a file psktool made.
pub struct Psk {
    pub file: PathBuf,
    /// The key itself (hex), which no message may show.
    pub key: String,
}

impl Psk {
    /// A fresh key in `file`.
    pub fn make(file: PathBuf) -> Result<Psk, String> {
        if !have("psktool") {
            return Err("psktool is not installed (package gnutls-bin)".into());
        }
        run(Command::new("psktool").args(["-u", "ddx", "-p"]).arg(&file))?;
        let text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
        let Some((_, key)) = text.trim().split_once(':') else {
            return Err(format!("psktool wrote no key: {text:?}"));
        };
        let key = key.to_owned();
        Ok(Psk { file, key })
    }

    /// The `nbds+unix://` URI of `server` presenting this key.
    pub fn uri(&self, server: &Server) -> String {
        format!(
            "nbds+unix://ddx@/?socket={}&tls-psk-file={}",
            server.socket.display(),
            self.file.display()
        )
    }
}

/// `Server::nbdkit`, or None after `rigs::skip` says why not.
pub fn nbdkit(args: &[&str]) -> Option<Server> {
    super::or_skip(Server::nbdkit(args))
}

/// `Server::nbdkit_in`, or None after `rigs::skip` says why not.
pub fn nbdkit_in(dir: tempfile::TempDir, args: &[&str]) -> Option<Server> {
    super::or_skip(Server::nbdkit_in(dir, args))
}

pub fn tempdir() -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix("ddx-nbd-")
        .tempdir()
        .map_err(|e| e.to_string())
}

/// Whether nbdkit has `plugin` (a name like "sparse-random").
pub fn nbdkit_has_plugin(plugin: &str) -> bool {
    plugin_dir("plugindir").is_some_and(|dir| {
        dir.join(format!("nbdkit-{plugin}-plugin.so")).exists()
            || dir.join(format!("nbdkit-{plugin}-plugin")).exists()
    })
}

/// Whether nbdkit has `filter`.
pub fn nbdkit_has_filter(filter: &str) -> bool {
    plugin_dir("filterdir")
        .is_some_and(|dir| dir.join(format!("nbdkit-{filter}-filter.so")).exists())
}

fn plugin_dir(key: &str) -> Option<PathBuf> {
    let out = Command::new("nbdkit").arg("--dump-config").output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{key}=")).map(PathBuf::from))
}

/// Runs `cmd` to the end; Err with its stderr if it failed.
pub fn run(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let what = format!("{cmd:?}");
    super::run_tool(cmd, &what).map(|out| out.stdout)
}

/// The whole export behind `uri`, as nbdcopy (libnbd's own copier, the
/// oracle) reads it.
pub fn nbdcopy_read(uri: &str, dir: &Path) -> Result<Vec<u8>, String> {
    let out = dir.join("nbdcopy.out");
    run(Command::new("nbdcopy").arg(uri).arg(&out))?;
    std::fs::read(&out).map_err(|e| e.to_string())
}
