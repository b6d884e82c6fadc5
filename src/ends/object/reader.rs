//! Reading an object: a HEAD for its size, then ranged GETs.
//!
//! A read at the position, or at an offset, is one GET of exactly the
//! bytes asked for (what `skip=`/`count=` and odd probes need). As a
//! transport the end takes requests for ranges and fetches each in a
//! tokio task of its own on the end's runtime, into the request's buffer
//! (`ends::transport`); it asks the engine's window to keep at least
//! [`MIN_DEPTH`] ranges of at least [`MIN_RANGE`] bytes in flight when
//! it is read in order, so that a copy the engine does not plan for
//! (record by record, to a pipe) costs no GET per record either.
//!
//! A web server that ignores `Range` (python's http.server) is found at
//! open, by asking for the first byte: its object is then read as one
//! GET of the whole body, in order, skipping forward by reading and
//! starting again for a move backward.
//!
//! A read returns everything asked for up to the end of the object, or
//! an error with the position unchanged: never a short count, which the
//! engine would take for the end (`Kind::reads_whole`). Every GET after
//! the HEAD carries the HEAD's version: its ETag (If-Match, when the ETag
//! is a strong one), else its Last-Modified (If-Unmodified-Since), and
//! every answer's own ETag and Last-Modified are held to the HEAD's, so
//! an object replaced while it is read fails the copy ("changed since
//! the copy began") instead of mixing two versions.
//!
//! A body the server or the network cuts short is resumed: the rest of
//! the range is asked for again from where its bytes stopped (a range
//! request), with the version checked as above, up to the configured
//! number of tries in a row without progress, with a growing pause
//! between them. A server without ranges is asked for the whole object
//! again, read over up to where it stopped. (object_store resumes a body
//! itself when the answer has an ETag; these tries cover servers that
//! give only a Last-Modified, as most file servers do.)

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::ops::Range;
use std::sync::{mpsc, Arc};

use bytes::Bytes;
use futures_util::stream::{BoxStream, StreamExt};
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use tokio::runtime::Runtime;
use tokio::task::AbortHandle;

use super::config::{Config, Direction, Store};
use super::url::ObjectUrl;
use super::{runtime, ObjectError};
use crate::ends::transport::{Completion, Fault, Op, Request, Requests, Submitted};
use crate::ends::{Capabilities, End, Kind, Whence};
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

/// The smallest range read ahead: below this, requests cost more than
/// they carry.
pub const MIN_RANGE: usize = 8 << 20;

/// The fewest ranges kept in flight once pipelined. Against s3s-fs on
/// loopback, whose GETs cost it more CPU than they cost ddx, 16 took
/// 0.85x the time of 8 for a 1 GiB download (BENCHMARKS.md): more
/// requests keep the server busy on every CPU. Over a WAN each
/// connection is slow on its own (AWS suggests one per 85-90 MB/s
/// wanted). With 8 MiB ranges that is 128 MiB in flight.
pub const MIN_DEPTH: usize = 16;

/// The most bytes kept in flight, whatever the hint: ranges are fetched
/// whole into memory.
const MAX_AHEAD: usize = 256 << 20;

/// An object being read.
pub struct ObjectReader {
    runtime: Runtime,
    store: Store,
    size: u64,
    /// The version every GET is held to (see the module's header).
    version: Version,
    /// Tries in a row without progress, for a body cut short.
    attempts: usize,
    position: u64,
    /// Bytes of the whole body arrived, for a server without ranges:
    /// chunks in order, contiguous from `held_start`.
    held: VecDeque<Bytes>,
    held_start: u64,
    /// Whether the server serves ranges.
    ranges: bool,
    /// The whole body being read, where it does not.
    body: Option<Body>,
    /// Ranges being fetched, by request, and where their completions
    /// arrive.
    fetching: HashMap<u64, AbortHandle>,
    fetched: mpsc::Receiver<Fetched>,
    fetched_tx: mpsc::Sender<Fetched>,
    detail: Option<String>,
}

struct Fetch {
    range: Range<u64>,
    task: tokio::task::JoinHandle<object_store::Result<VecDeque<Bytes>>>,
}

/// A range fetched into a request's buffer: the request, the range, and
/// how it went.
struct Fetched {
    id: u64,
    range: Range<u64>,
    result: object_store::Result<u64>,
    buf: AlignedBuf,
}

/// One GET of the whole object, read in order. Every request and every
/// read of its body runs as a task on the end's runtime, never in the
/// caller's thread: a thread with a private descriptor table would make
/// the connection's socket where the runtime's workers cannot see it.
struct Body {
    /// The offset of the stream's next byte.
    next: u64,
    stream: BoxStream<'static, object_store::Result<Bytes>>,
}

/// The object's version as the HEAD gave it.
#[derive(Debug, Clone)]
struct Version {
    /// A strong ETag (If-Match compares strongly: a weak one, from a
    /// server that compresses on the fly, would refuse every GET).
    etag: Option<String>,
    /// The Last-Modified time, if the server gave one.
    modified: Option<chrono::DateTime<chrono::Utc>>,
}

impl Version {
    fn of(meta: &object_store::ObjectMeta) -> Version {
        Version {
            etag: meta.e_tag.clone().filter(|tag| !tag.starts_with("W/")),
            // object_store says the epoch when the header is absent.
            modified: Some(meta.last_modified).filter(|t| t.timestamp() != 0),
        }
    }

    /// GET options for `range` (None: the whole object) held to this
    /// version.
    fn options(&self, range: Option<Range<u64>>) -> GetOptions {
        GetOptions {
            range: range.map(GetRange::Bounded),
            if_match: self.etag.clone(),
            if_unmodified_since: self.modified.filter(|_| self.etag.is_none()),
            ..GetOptions::default()
        }
    }

    /// Err when an answer is of another version than this one.
    fn check(&self, meta: &object_store::ObjectMeta) -> object_store::Result<()> {
        let answered = Version::of(meta);
        let etag_differs = matches!((&self.etag, &answered.etag), (Some(a), Some(b)) if a != b);
        let time_differs =
            matches!((self.modified, answered.modified), (Some(a), Some(b)) if a != b);
        if etag_differs || time_differs {
            return Err(object_store::Error::Precondition {
                path: meta.location.to_string(),
                source: "the answer is of another version than the HEAD's".into(),
            });
        }
        Ok(())
    }
}

/// Err (a precondition failure) when the server now holds another version
/// of the object than `version`; Ok when it holds the same, or when the
/// HEAD fails too (the retry that follows will say why).
///
/// Asked before a failed GET is tried again: a server may answer a GET
/// held to a version that changed with a 412 whose body never comes
/// (rclone's `serve http` announces the object's length and sends
/// nothing), which reads as a body cut short, not as the change it is.
async fn still_the_version(
    store: &dyn object_store::ObjectStore,
    path: &object_store::path::Path,
    version: &Version,
) -> object_store::Result<()> {
    match store.head(path).await {
        Ok(meta) => version.check(&meta),
        Err(_) => Ok(()),
    }
}

/// Whether a failed GET is worth asking again: the connection or the
/// body failed, or the server had a passing trouble (5xx); not an answer
/// about the object itself (missing, forbidden, changed).
fn worth_retrying(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    match e {
        E::NotFound { .. }
        | E::Precondition { .. }
        | E::NotModified { .. }
        | E::PermissionDenied { .. }
        | E::Unauthenticated { .. }
        | E::NotSupported { .. } => false,
        other => {
            let text = other.to_string();
            !(text.contains("status code: 4") || text.contains("412"))
        }
    }
}

/// The pause before try `n` (from 1) of a body cut short.
fn pause_before(n: usize) -> std::time::Duration {
    std::time::Duration::from_millis(100 << n.min(6))
}

/// A GET of this object's bytes, held to its version, for a task.
struct Getting {
    store: Arc<dyn ObjectStore>,
    path: object_store::path::Path,
    version: Version,
    attempts: usize,
}

impl Getting {
    /// GET `range`, handing each chunk of the body to `sink` with its
    /// offset in the range (`sink` says how many of its bytes it took):
    /// the bytes taken in all. A body cut short is asked for again from
    /// where its bytes stopped, the version checked, up to the configured
    /// tries in a row without progress.
    async fn range(
        &self,
        range: Range<u64>,
        mut sink: impl FnMut(u64, &Bytes) -> usize,
    ) -> object_store::Result<u64> {
        let Getting {
            store,
            path,
            version,
            attempts,
        } = self;
        let mut from = range.start;
        let mut failures = 0;
        loop {
            let progress = from;
            let tried: object_store::Result<()> = async {
                let got = store
                    .get_opts(path, version.options(Some(from..range.end)))
                    .await?;
                version.check(&got.meta)?;
                let mut body = got.into_stream();
                while let Some(chunk) = body.next().await {
                    let chunk = chunk?;
                    if !chunk.is_empty() {
                        from += sink(from - range.start, &chunk) as u64;
                    }
                }
                Ok(())
            }
            .await;
            match tried {
                Ok(()) => return Ok(from - range.start),
                Err(e) if worth_retrying(&e) => {
                    still_the_version(&**store, path, version).await?;
                    failures = if from > progress { 1 } else { failures + 1 };
                    if failures >= *attempts {
                        return Err(e);
                    }
                    tokio::time::sleep(pause_before(failures)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl ObjectReader {
    /// Open `url` for reading: one HEAD, for its size and ETag.
    pub fn open(url: &ObjectUrl, config: &Config) -> Result<ObjectReader, ObjectError> {
        let runtime = runtime::new()?;
        let store = config.store(url, Direction::Read, &runtime)?;
        let (client, path) = (store.store.clone(), store.path.clone());
        let meta = runtime::run(&runtime, async move { client.head(&path).await })
            .map_err(|e| store.error("reading its size", &e))?;
        // S3 always serves ranges; a web server is asked for one byte.
        let ranges = match url {
            ObjectUrl::S3 { .. } => true,
            ObjectUrl::Http(_) if meta.size == 0 => true,
            ObjectUrl::Http(_) => {
                let (client, path) = (store.store.clone(), store.path.clone());
                let probe =
                    runtime::run(&runtime, async move { client.get_range(&path, 0..1).await });
                match probe {
                    Ok(_) => true,
                    // object_store's HTTP client says NotSupported when a
                    // ranged GET is answered 200 with the whole body.
                    Err(object_store::Error::NotSupported { .. }) => false,
                    Err(e) => return Err(store.error("reading its first byte", &e)),
                }
            }
        };
        let (fetched_tx, fetched) = mpsc::channel();
        Ok(ObjectReader {
            runtime,
            size: meta.size,
            version: Version::of(&meta),
            attempts: config.max_attempts,
            store,
            position: 0,
            held: VecDeque::new(),
            held_start: 0,
            ranges,
            body: None,
            fetching: HashMap::new(),
            fetched,
            fetched_tx,
            detail: None,
        })
    }

    /// The next bytes at the position from the whole body (a server
    /// without ranges): skipped forward to the position, started again
    /// when the position is behind it, or when the body was cut short
    /// (then read over up to where it stopped, the version checked).
    fn next_from_body(&mut self) -> Result<Bytes, Errno> {
        let mut failures = 0;
        loop {
            let body = match self.body.take() {
                Some(body) if body.next <= self.position => body,
                _ => {
                    let store = self.store.store.clone();
                    let path = self.store.path.clone();
                    let version = self.version.clone();
                    let got = runtime::run(&self.runtime, async move {
                        let got = match store.get_opts(&path, version.options(None)).await {
                            Ok(got) => got,
                            Err(e) if worth_retrying(&e) => {
                                still_the_version(&*store, &path, &version).await?;
                                return Err(e);
                            }
                            Err(e) => return Err(e),
                        };
                        version.check(&got.meta)?;
                        Ok(got)
                    });
                    match got {
                        Ok(got) => Body {
                            next: 0,
                            stream: got.into_stream(),
                        },
                        Err(e) if worth_retrying(&e) && failures + 1 < self.attempts => {
                            failures += 1;
                            std::thread::sleep(pause_before(failures));
                            continue;
                        }
                        Err(e) => return Err(self.failed("reading from the start", &e)),
                    }
                }
            };
            let start = body.next;
            let task = self.runtime.spawn(async move {
                let mut body = body;
                let chunk = body.stream.next().await;
                (body, chunk)
            });
            let (mut body, chunk) = match self.runtime.block_on(task) {
                Ok(done) => done,
                Err(join) => {
                    let e = object_store::Error::JoinError { source: join };
                    return Err(self.failed(&format!("reading at {start}"), &e));
                }
            };
            let chunk = match chunk {
                Some(Ok(chunk)) => chunk,
                Some(Err(e)) if worth_retrying(&e) && failures + 1 < self.attempts => {
                    // Cut short: the whole object again, from its start.
                    failures += 1;
                    std::thread::sleep(pause_before(failures));
                    continue;
                }
                Some(Err(e)) => return Err(self.failed(&format!("reading at {start}"), &e)),
                None if start < self.size && failures + 1 < self.attempts => {
                    failures += 1;
                    std::thread::sleep(pause_before(failures));
                    continue;
                }
                None => {
                    return Err(self.fail(&format!(
                        "the server ended the object at {start}, short of its {} bytes",
                        self.size
                    )));
                }
            };
            body.next += chunk.len() as u64;
            let after = body.next;
            self.body = Some(body);
            if after > self.position {
                self.held = VecDeque::from([chunk.clone()]);
                self.held_start = start;
                return Ok(chunk.slice((self.position - start) as usize..));
            }
        }
    }

    /// Record `e`'s detail; its errno.
    fn failed(&mut self, what: &str, e: &object_store::Error) -> Errno {
        let error = self.store.error(what, e);
        self.detail = Some(error.detail);
        error.errno
    }

    /// Start a GET of `range` into `buf` on the runtime; its outcome
    /// arrives on `fetched`.
    fn fetch(&mut self, id: u64, range: Range<u64>, mut buf: AlignedBuf) {
        let getting = self.getting();
        let wanted = range.clone();
        let done = self.fetched_tx.clone();
        let task = self.runtime.spawn(async move {
            let result = getting
                .range(wanted.clone(), |at, chunk| {
                    let at = at as usize;
                    let take = chunk.len().min(buf.len().saturating_sub(at));
                    buf.as_mut_slice()[at..at + take].copy_from_slice(&chunk[..take]);
                    take
                })
                .await;
            let _ = done.send(Fetched {
                id,
                range: wanted,
                result,
                buf,
            });
        });
        self.fetching.insert(id, task.abort_handle());
    }

    /// What a GET of this object needs, for a task of its own.
    fn getting(&self) -> Getting {
        Getting {
            store: self.store.store.clone(),
            path: self.store.path.clone(),
            version: self.version.clone(),
            attempts: self.attempts,
        }
    }

    /// A fetched range as the window's completion: its bytes, checked to
    /// be the whole range, or the failure in the store's words.
    fn completion(&mut self, fetched: Fetched) -> Completion {
        self.fetching.remove(&fetched.id);
        let Fetched {
            id,
            range,
            result,
            buf,
        } = fetched;
        let wanted = range.end - range.start;
        let result = match result {
            Ok(sent) if sent == wanted => Ok(sent),
            Ok(sent) => Err(Fault::with_words(
                Errno::IO,
                self.store.redactor.clean(&format!(
                    "reading {wanted} bytes at {}: the server sent {sent}",
                    range.start
                )),
            )),
            Err(e) => {
                let error = self.store.error(&format!("reading at {}", range.start), &e);
                Err(Fault::with_words(error.errno, error.detail))
            }
        };
        Completion {
            id,
            result,
            buf: Some(buf),
        }
    }

    /// Start a GET of `range` on the runtime, its chunks kept as they
    /// come (for a read of the caller's: no buffer of the end's).
    fn fetch_chunks(&self, range: Range<u64>) -> Fetch {
        let getting = self.getting();
        let wanted = range.clone();
        let task = self.runtime.spawn(async move {
            let mut chunks = VecDeque::new();
            getting
                .range(wanted, |_, chunk| {
                    chunks.push_back(chunk.clone());
                    chunk.len()
                })
                .await
                .map(|_| chunks)
        });
        Fetch { range, task }
    }

    /// Wait for `fetch`; its chunks, checked to be the whole range.
    fn wait_chunks(&mut self, fetch: Fetch) -> Result<VecDeque<Bytes>, Errno> {
        let Fetch { range, task } = fetch;
        let result = match self.runtime.block_on(task) {
            Ok(result) => result,
            Err(join) => Err(object_store::Error::JoinError { source: join }),
        };
        match result {
            Ok(chunks) => {
                let sent: u64 = chunks.iter().map(|c| c.len() as u64).sum();
                if sent == range.end - range.start {
                    Ok(chunks)
                } else {
                    Err(self.fail(&format!(
                        "reading {} bytes at {}: the server sent {sent}",
                        range.end - range.start,
                        range.start,
                    )))
                }
            }
            Err(e) => Err(self.failed(&format!("reading at {}", range.start), &e)),
        }
    }

    /// Fill `buf` from `offset` on: one GET (a range), or the whole body
    /// read in order where the server serves no ranges.
    fn get(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        let end = self.size.min(offset + buf.len() as u64);
        if offset >= end {
            return Ok(0);
        }
        let want = (end - offset) as usize;
        if self.ranges {
            let fetch = self.fetch_chunks(offset..end);
            let mut done = 0;
            for chunk in self.wait_chunks(fetch)? {
                buf[done..done + chunk.len()].copy_from_slice(&chunk);
                done += chunk.len();
            }
            return Ok(done);
        }
        let position = std::mem::replace(&mut self.position, offset);
        let mut done = 0;
        let mut result = Ok(want);
        while done < want {
            match self.next_from_held_or_body() {
                Ok(bytes) => {
                    let take = bytes.len().min(want - done);
                    buf[done..done + take].copy_from_slice(&bytes[..take]);
                    done += take;
                    self.position += take as u64;
                }
                Err(errno) => {
                    result = Err(errno);
                    break;
                }
            }
        }
        self.position = position;
        result
    }

    /// The held body bytes at the position, or the next from the body.
    fn next_from_held_or_body(&mut self) -> Result<Bytes, Errno> {
        while let Some(front) = self.held.front() {
            let end = self.held_start + front.len() as u64;
            if (self.held_start..end).contains(&self.position) {
                let from = (self.position - self.held_start) as usize;
                return Ok(front.slice(from..));
            }
            if self.position < self.held_start {
                self.held.clear();
            } else {
                self.held_start = end;
                self.held.pop_front();
            }
        }
        self.next_from_body()
    }

    fn fail(&mut self, what: &str) -> Errno {
        self.detail = Some(self.store.redactor.clean(what));
        Errno::IO
    }
}

impl End for ObjectReader {
    fn kind(&self) -> Kind {
        Kind::Object
    }

    /// Its kind's, with ranges fetched in flight: at least [`MIN_DEPTH`]
    /// of at least [`MIN_RANGE`] bytes whenever it is read in order, and
    /// no more than [`MAX_AHEAD`] bytes; one GET at a time where the
    /// server serves no ranges.
    fn capabilities(&self) -> Capabilities {
        let requests = if self.ranges {
            Requests {
                most: (MAX_AHEAD / MIN_RANGE).max(MIN_DEPTH),
                least: MIN_DEPTH,
                min_len: MIN_RANGE,
                max_len: MAX_AHEAD / MIN_DEPTH,
                ..Requests::ONE_AT_A_TIME
            }
        } else {
            Requests::ONE_AT_A_TIME
        };
        Capabilities {
            requests,
            ..Capabilities::of(Kind::Object)
        }
    }

    /// Everything asked for up to the end of the object, or an error with
    /// the position unchanged: a short count would read as the end.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let n = self.get(buf, self.position)?;
        self.position += n as u64;
        Ok(n)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        let target = match to {
            Whence::Start(offset) => Some(offset),
            Whence::Current(delta) => self.position.checked_add_signed(delta),
            Whence::End(delta) => self.size.checked_add_signed(delta),
        };
        self.position = target.ok_or(Errno::INVAL)?;
        Ok(self.position)
    }

    fn size(&self) -> Result<Option<u64>, Errno> {
        Ok(Some(self.size))
    }

    fn sync(&mut self, _data_only: bool) -> Result<(), Errno> {
        Ok(())
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        self.get(buf, offset)
    }

    /// A range, fetched by a task of its own; a range past the object's
    /// end moves nothing.
    fn submit(&mut self, request: Request) -> Submitted {
        let (id, offset) = (request.id, request.offset);
        if request.op != Op::Read || !self.ranges {
            return crate::ends::at_once(self, request);
        }
        let Some(mut buf) = request.buf else {
            return crate::ends::at_once(self, request);
        };
        let end = self.size.min(offset.saturating_add(request.len));
        if offset >= end {
            return Submitted::Done(Completion {
                id,
                result: Ok(0),
                buf: Some(buf),
            });
        }
        buf.set_len((end - offset) as usize);
        self.fetch(id, offset..end, buf);
        Submitted::InFlight
    }

    fn complete(&mut self, wait: bool) -> Option<Completion> {
        if self.fetching.is_empty() {
            return None;
        }
        let fetched = if wait {
            self.fetched.recv().ok()?
        } else {
            self.fetched.try_recv().ok()?
        };
        Some(self.completion(fetched))
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    fn close(self: Box<Self>) -> Result<(), Errno> {
        for task in self.fetching.values() {
            task.abort();
        }
        Ok(())
    }

    fn abandon(self: Box<Self>) {
        for task in self.fetching.values() {
            task.abort();
        }
    }
}

impl fmt::Debug for ObjectReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectReader")
            .field("url", &self.store.label)
            .field("size", &self.size)
            .field("position", &self.position)
            .field("ranges", &self.ranges)
            .field("ranges_in_flight", &self.fetching.len())
            .finish()
    }
}
