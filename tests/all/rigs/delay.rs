//! A TCP proxy on loopback that delays every byte by a fixed time in each
//! direction: a remote store's latency, on a machine whose kernel has no
//! `netem`. Whatever one side sends is read at once and written to the
//! other side `delay` later, while the next bytes are already being read:
//! the link has latency but no bandwidth limit, and its round trip is
//! twice the delay. A proxy with no delay is the same path without the
//! latency, so that a delayed copy and its baseline pay the same copying.
//!
//! It can also go away and come back on the same port ([`cut`] and
//! [`restore`]): every connection reset and new ones refused, as when a
//! server or its network does.
//!
//! Written by hand because no tool here delays TCP (socat and nbdkit's
//! delay filter do not: the filter delays NBD requests in the server, not
//! bytes on the wire). The bench scripts use it too (`examples/
//! delay_proxy.rs` builds it as a command).
//!
//! [`cut`]: DelayProxy::cut
//! [`restore`]: DelayProxy::restore

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The most bytes taken in one read.
const READ_SIZE: usize = 256 << 10;

pub struct DelayProxy {
    port: u16,
    upstream: u16,
    delay: Duration,
    /// Every connection's two sockets, to reset on [`DelayProxy::cut`].
    open: Arc<Mutex<Vec<TcpStream>>>,
    accepting: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl DelayProxy {
    /// A proxy on a free loopback port to `127.0.0.1:upstream`, holding
    /// each read `delay` before writing it on.
    pub fn start(upstream: u16, delay: Duration) -> std::io::Result<DelayProxy> {
        Self::on_port(0, upstream, delay)
    }

    /// The same on `port` (0: a free one).
    pub fn on_port(port: u16, upstream: u16, delay: Duration) -> std::io::Result<DelayProxy> {
        let mut proxy = DelayProxy {
            port,
            upstream,
            delay,
            open: Arc::new(Mutex::new(Vec::new())),
            accepting: None,
        };
        proxy.listen()?;
        Ok(proxy)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stop taking connections (the port is closed) and reset every open
    /// one.
    pub fn cut(&mut self) {
        if let Some((stop, accepter)) = self.accepting.take() {
            stop.store(true, Ordering::Release);
            let _ = accepter.join();
        }
        for stream in self
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Take connections again on the same port, after [`DelayProxy::cut`].
    pub fn restore(&mut self) -> std::io::Result<()> {
        if self.accepting.is_none() {
            self.listen()?;
        }
        Ok(())
    }

    fn listen(&mut self) -> std::io::Result<()> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, self.port))?;
        self.port = listener.local_addr()?.port();
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (upstream, delay) = (self.upstream, self.delay);
        let (open, stopped) = (Arc::clone(&self.open), Arc::clone(&stop));
        let accepter = std::thread::Builder::new()
            .name("delay proxy".into())
            .spawn(move || {
                while !stopped.load(Ordering::Acquire) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            let _ = connect(client, upstream, delay, &open);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(2)),
                    }
                }
            })?;
        self.accepting = Some((stop, accepter));
        Ok(())
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.cut();
    }
}

/// Join `client` to a new connection to the upstream, a delayed pump each
/// way.
fn connect(
    client: TcpStream,
    upstream: u16,
    delay: Duration,
    open: &Mutex<Vec<TcpStream>>,
) -> std::io::Result<()> {
    client.set_nonblocking(false)?;
    let server = match TcpStream::connect((Ipv4Addr::LOCALHOST, upstream)) {
        Ok(server) => server,
        Err(e) => {
            let _ = client.shutdown(Shutdown::Both);
            return Err(e);
        }
    };
    for stream in [&client, &server] {
        stream.set_nodelay(true)?;
    }
    {
        let mut open = open.lock().unwrap_or_else(PoisonError::into_inner);
        // Connections that ended are let go as new ones come.
        open.retain(|s| s.peer_addr().is_ok());
        open.push(client.try_clone()?);
        open.push(server.try_clone()?);
    }
    pump(client.try_clone()?, server.try_clone()?, delay)?;
    pump(server, client, delay)
}

/// Copy what `from` sends to `to`, each read's bytes `delay` after the
/// read: a reading thread stamps each read, a writing thread waits for
/// its time. The end of `from` is passed on as the end of `to`'s writes,
/// delayed the same; an error ends both. Buffers go back to the reader
/// once written, so that a link holding a round trip's bytes costs the
/// proxy about the CPU of one holding none. With a new buffer per read,
/// a delayed 1 GiB NBD read cost the proxy 0.81 CPU-seconds against 0.69
/// undelayed, on two CPUs that the copy's three processes share; with
/// buffers reused, 0.71 against 0.69.
fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration) -> std::io::Result<()> {
    let (send, receive) = mpsc::channel::<(Instant, Option<(Vec<u8>, usize)>)>();
    let (give_back, take_back) = mpsc::channel::<Vec<u8>>();
    std::thread::Builder::new()
        .name("delay proxy read".into())
        .spawn(move || loop {
            let mut buf = take_back
                .try_recv()
                .unwrap_or_else(|_| vec![0u8; READ_SIZE]);
            match from.read(&mut buf) {
                Ok(0) | Err(_) => {
                    let _ = send.send((Instant::now() + delay, None));
                    return;
                }
                Ok(n) => {
                    if send.send((Instant::now() + delay, Some((buf, n)))).is_err() {
                        let _ = from.shutdown(Shutdown::Both);
                        return;
                    }
                }
            }
        })?;
    std::thread::Builder::new()
        .name("delay proxy write".into())
        .spawn(move || {
            for (due, data) in receive {
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                match data {
                    Some((buf, n)) => {
                        if to.write_all(&buf[..n]).is_err() {
                            let _ = to.shutdown(Shutdown::Both);
                            return;
                        }
                        let _ = give_back.send(buf);
                    }
                    None => {
                        let _ = to.shutdown(Shutdown::Write);
                        return;
                    }
                }
            }
        })?;
    Ok(())
}
