//! A fault-injecting HTTP proxy on loopback, in front of a real server
//! (s3s-fs, rclone's HTTP server): the server does the work, the proxy
//! only breaks the traffic where a test says, the way a network or a busy
//! store does. A request that matches a [`Rule`] is answered by the proxy
//! (503 SlowDown, 500 InternalError), has its body cut with a connection
//! reset or one of its bytes changed, is held back for a while, or has
//! its answer's body cut short after some bytes; every other request
//! passes through unchanged.
//!
//! One request per connection: the proxy adds `Connection: close` both
//! ways, so it needs to know where a request ends (its Content-Length)
//! but never where an answer does (the server closes after it).
//! Request bodies must have a Content-Length (S3 clients send one).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// What to do to a request a rule matches.
#[derive(Clone)]
pub enum Fault {
    /// Answer it with this status and an S3 error document, without
    /// passing it on (its body is read and dropped).
    Answer {
        status: u16,
        code: &'static str,
        message: &'static str,
    },
    /// Pass the head and half the body on, then reset the connection.
    ResetMidBody,
    /// Hold the request back this long, then pass it on.
    Delay(Duration),
    /// Pass it on with the byte at `at` of its body changed (its bits
    /// flipped), as a link or a memory that corrupts data on the way.
    FlipByte { at: usize },
    /// Pass it on, and cut the answer's body after `after` bytes; `then`
    /// runs once the connection is cut (a test changes the object there).
    CutAnswer {
        after: usize,
        then: Option<Arc<dyn Fn() + Send + Sync>>,
    },
    /// Pass it on, and give the answer the header `name` with `value`
    /// instead of the server's (as a store that says it holds other
    /// bytes than it was sent).
    SetAnswerHeader {
        name: &'static str,
        value: &'static str,
    },
}

/// Which requests a fault hits: by method, a piece of the request target
/// (`partNumber=2`, `uploads`) and of its Range header where one is given
/// (a client's GETs of one object go out in no set order), after letting
/// `pass` matching requests through, the next `times` of them.
#[derive(Clone)]
pub struct Rule {
    pub method: &'static str,
    pub target_has: &'static str,
    pub range_has: Option<&'static str>,
    pub pass: usize,
    pub times: usize,
    pub fault: Fault,
}

impl Rule {
    pub fn new(method: &'static str, target_has: &'static str, fault: Fault) -> Rule {
        Rule {
            method,
            target_has,
            range_has: None,
            pass: 0,
            times: 1,
            fault,
        }
    }

    pub fn after(mut self, pass: usize) -> Rule {
        self.pass = pass;
        self
    }

    pub fn range_has(mut self, range: &'static str) -> Rule {
        self.range_has = Some(range);
        self
    }

    pub fn times(mut self, times: usize) -> Rule {
        self.times = times;
        self
    }
}

/// A request the proxy saw: method, target, and the fault it met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub range: Option<String>,
    pub faulted: bool,
}

struct State {
    rules: Vec<(Rule, usize)>,
    seen: Vec<Seen>,
    strip_etag: bool,
}

pub struct FaultProxy {
    pub port: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    accepter: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// A proxy to `127.0.0.1:upstream` applying `rules` (each request
    /// meets the first rule that matches and still has faults to give).
    pub fn start(upstream: u16, rules: Vec<Rule>) -> FaultProxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        listener.set_nonblocking(true).expect("nonblocking accept");
        let state = Arc::new(Mutex::new(State {
            rules: rules.into_iter().map(|r| (r, 0)).collect(),
            seen: Vec::new(),
            strip_etag: false,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let accepter = {
            let (state, stop) = (Arc::clone(&state), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            let state = Arc::clone(&state);
                            std::thread::spawn(move || {
                                let _ = serve(client, upstream, &state);
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        FaultProxy {
            port,
            state,
            stop,
            accepter: Some(accepter),
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Answers lose their ETag: a server that gives only Last-Modified.
    pub fn strip_etag(&self) {
        self.lock().strip_etag = true;
    }

    /// Every request seen so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.lock().seen.clone()
    }

    /// How many requests met a fault.
    pub fn faults(&self) -> usize {
        self.seen().iter().filter(|s| s.faulted).count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(accepter) = self.accepter.take() {
            let _ = accepter.join();
        }
    }
}

/// A request's head as read: its lines, method, target, body length.
struct Head {
    lines: Vec<String>,
    method: String,
    target: String,
    length: usize,
    range: Option<String>,
}

fn read_head(reader: &mut impl BufRead) -> std::io::Result<Option<Head>> {
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let line = line.trim_end_matches(['\r', '\n']).to_owned();
        if line.is_empty() {
            break;
        }
        lines.push(line);
    }
    let mut words = lines[0].split(' ');
    let method = words.next().unwrap_or("").to_owned();
    let target = words.next().unwrap_or("").to_owned();
    let header = |name: &str| {
        lines[1..].iter().find_map(|l| {
            let (key, value) = l.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    let length = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let range = header("range");
    Ok(Some(Head {
        lines,
        method,
        target,
        length,
        range,
    }))
}

/// The head to send on: hop-by-hop `Connection` replaced by `close`.
fn rewritten(lines: &[String], drop: &[&str]) -> Vec<u8> {
    let mut out = String::new();
    for (n, line) in lines.iter().enumerate() {
        let name = line.split(':').next().unwrap_or("").trim();
        if n > 0
            && (name.eq_ignore_ascii_case("connection")
                || drop.iter().any(|d| name.eq_ignore_ascii_case(d)))
        {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

fn serve(client: TcpStream, upstream: u16, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let Some(head) = read_head(&mut reader)? else {
        return Ok(());
    };
    let lock = || state.lock().unwrap_or_else(PoisonError::into_inner);
    let (fault, strip_etag) = {
        let mut state = lock();
        let strip = state.strip_etag;
        let hit = state.rules.iter_mut().find_map(|(rule, matched)| {
            let range_matches = rule
                .range_has
                .is_none_or(|want| head.range.as_deref().is_some_and(|r| r.contains(want)));
            if rule.method != head.method
                || !head.target.contains(rule.target_has)
                || !range_matches
            {
                return None;
            }
            *matched += 1;
            (*matched > rule.pass && *matched <= rule.pass + rule.times).then(|| rule.fault.clone())
        });
        state.seen.push(Seen {
            method: head.method.clone(),
            target: head.target.clone(),
            range: head.range.clone(),
            faulted: hit.is_some(),
        });
        (hit, strip)
    };
    let mut client = client;
    match fault {
        Some(Fault::Answer {
            status,
            code,
            message,
        }) => {
            std::io::copy(
                &mut (&mut reader).take(head.length as u64),
                &mut std::io::sink(),
            )?;
            let body = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
                 <Message>{message}</Message><RequestId>fault-proxy</RequestId></Error>"
            );
            write!(
                client,
                "HTTP/1.1 {status} Fault\r\nContent-Type: application/xml\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )?;
            let _ = client.shutdown(Shutdown::Both);
            return Ok(());
        }
        Some(Fault::Delay(pause)) => std::thread::sleep(pause),
        _ => {}
    }
    let mut server = TcpStream::connect((Ipv4Addr::LOCALHOST, upstream))?;
    server.write_all(&rewritten(&head.lines, &[]))?;
    let body_to_send = match fault {
        Some(Fault::ResetMidBody) => head.length / 2,
        _ => head.length,
    };
    if let Some(Fault::FlipByte { at }) = fault {
        let mut body = vec![0u8; head.length];
        reader.read_exact(&mut body)?;
        if let Some(byte) = body.get_mut(at) {
            *byte ^= 0xff;
        }
        server.write_all(&body)?;
    } else {
        std::io::copy(&mut (&mut reader).take(body_to_send as u64), &mut server)?;
    }
    if matches!(fault, Some(Fault::ResetMidBody)) {
        reset(&client);
        drop((client, reader));
        let _ = server.shutdown(Shutdown::Both);
        return Ok(());
    }
    // The answer: its head rewritten, then its body until the server
    // closes (or until the cut).
    let mut answer = BufReader::new(server);
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if answer.read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end_matches(['\r', '\n']).to_owned();
        if line.is_empty() {
            break;
        }
        lines.push(line);
    }
    if lines.is_empty() {
        let _ = client.shutdown(Shutdown::Both);
        return Ok(());
    }
    if let Some(Fault::SetAnswerHeader { name, value }) = &fault {
        lines.retain(|l| {
            !l.split(':')
                .next()
                .is_some_and(|n| n.trim().eq_ignore_ascii_case(name))
        });
        lines.push(format!("{name}: {value}"));
    }
    let left_out: &[&str] = if strip_etag { &["etag"] } else { &[] };
    client.write_all(&rewritten(&lines, left_out))?;
    match fault {
        Some(Fault::CutAnswer { after, then }) => {
            std::io::copy(&mut (&mut answer).take(after as u64), &mut client)?;
            client.flush()?;
            reset(&client);
            drop((client, reader));
            if let Some(then) = then {
                then();
            }
        }
        _ => {
            std::io::copy(&mut answer, &mut client)?;
            let _ = client.shutdown(Shutdown::Both);
        }
    }
    Ok(())
}

/// Make the close of `stream` (once every handle of it is dropped) a
/// reset (RST), as from a peer that went away.
fn reset(stream: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket this test owns, with a properly
    // sized linger struct; the descriptor is closed right after.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}
