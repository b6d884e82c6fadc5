//! Reading an object: a HEAD for its size, then ranged GETs.
//!
//! Until the engine says how it will read ([`End::pipeline`]), every read
//! is one GET of exactly the bytes asked for (what `skip=`/`count=` and
//! odd probes need). After, ranges of at least [`MIN_RANGE`] bytes are
//! kept in flight ahead of the position, [`MIN_DEPTH`] or the hint's
//! depth of them, each a tokio task on the end's runtime; a read takes
//! its bytes from the oldest and starts the next. A seek moves the
//! position only: ranges that no longer follow it are dropped at the
//! next read, and new ones started from there.
//!
//! Copies the engine does not pipeline (record by record, to a pipe or a
//! terminal, with conversions) still read sequentially: reads that follow
//! each other start read-ahead by themselves, in ranges that grow with
//! the run of sequential bytes (twice what was read so far, from
//! [`FIRST_AUTO_RANGE`] to [`MIN_RANGE`]), so that `bs=512` costs no GET
//! per record while `count=` of a few records fetches little more than
//! it reads.
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

use std::collections::VecDeque;
use std::fmt;
use std::ops::Range;

use bytes::Bytes;
use futures_util::stream::{BoxStream, StreamExt};
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use super::config::{Config, Direction, Store};
use super::url::ObjectUrl;
use super::{runtime, ObjectError};
use crate::ends::{End, Kind, Pipeline, Whence};
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

/// The first range read ahead when reads turn out sequential without a
/// pipeline hint.
const FIRST_AUTO_RANGE: u64 = 1 << 20;

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
    /// Bytes fetched, as the server's body arrived: chunks in order,
    /// contiguous from `held_start`. Kept as they came, because joining
    /// them into one buffer would copy every byte once more (on loopback
    /// the copy's CPU, not the network, is what a download costs).
    held: VecDeque<Bytes>,
    held_start: u64,
    /// Ranges in flight, in order, contiguous.
    ahead: VecDeque<Fetch>,
    /// Read-ahead: from the pipeline hint, or found by sequential reads.
    plan: Option<ReadAhead>,
    /// The engine gave a pipeline hint: the plan is its, not found.
    pipelined: bool,
    /// Bytes read in a row, ending at `run_end`.
    run: u64,
    run_end: u64,
    /// Whether the server serves ranges.
    ranges: bool,
    /// The whole body being read, where it does not.
    body: Option<Body>,
    detail: Option<String>,
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

struct Fetch {
    range: Range<u64>,
    task: JoinHandle<object_store::Result<VecDeque<Bytes>>>,
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

#[derive(Debug, Clone, Copy)]
struct ReadAhead {
    range: u64,
    depth: usize,
    /// Bytes the copy will read (the hint's total, `count=`).
    total: Option<u64>,
    /// Where reading ahead stops: the end, or `total` bytes after where
    /// the first pipelined read began (after any `skip=`, whichever came
    /// first, pipeline or seek).
    limit: Option<u64>,
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
        Ok(ObjectReader {
            runtime,
            size: meta.size,
            version: Version::of(&meta),
            attempts: config.max_attempts,
            store,
            position: 0,
            held: VecDeque::new(),
            held_start: 0,
            ahead: VecDeque::new(),
            plan: None,
            pipelined: false,
            run: 0,
            run_end: 0,
            ranges,
            body: None,
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

    /// Start a GET of `range` on the runtime. A body cut short is asked
    /// for again from where its bytes stopped, the version checked, up to
    /// the configured tries in a row without progress.
    fn fetch(&self, range: Range<u64>) -> Fetch {
        let store = self.store.store.clone();
        let path = self.store.path.clone();
        let version = self.version.clone();
        let attempts = self.attempts;
        let wanted = range.clone();
        let task = self.runtime.spawn(async move {
            let mut chunks = VecDeque::new();
            let mut from = wanted.start;
            let mut failures = 0;
            loop {
                let progress = from;
                let tried: object_store::Result<()> = async {
                    let got = store
                        .get_opts(&path, version.options(Some(from..wanted.end)))
                        .await?;
                    version.check(&got.meta)?;
                    let mut body = got.into_stream();
                    while let Some(chunk) = body.next().await {
                        let chunk = chunk?;
                        if !chunk.is_empty() {
                            from += chunk.len() as u64;
                            chunks.push_back(chunk);
                        }
                    }
                    Ok(())
                }
                .await;
                match tried {
                    Ok(()) => return Ok(chunks),
                    Err(e) if worth_retrying(&e) => {
                        still_the_version(&*store, &path, &version).await?;
                        failures = if from > progress { 1 } else { failures + 1 };
                        if failures >= attempts {
                            return Err(e);
                        }
                        tokio::time::sleep(pause_before(failures)).await;
                    }
                    Err(e) => return Err(e),
                }
            }
        });
        Fetch { range, task }
    }

    /// Wait for `fetch`; its chunks, checked to be the whole range.
    fn wait(&mut self, fetch: Fetch) -> Result<VecDeque<Bytes>, Errno> {
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

    /// Hold the chunks of a range fetched from `start`; the bytes at the
    /// position, at most `want` (the position is in the range).
    fn hold(&mut self, start: u64, chunks: VecDeque<Bytes>, want: usize) -> Bytes {
        self.held = chunks;
        self.held_start = start;
        self.take_held(want).unwrap_or_default()
    }

    /// The held bytes at the position, at most `want`; chunks behind the
    /// position are let go, and all of them when it moved elsewhere.
    fn take_held(&mut self, want: usize) -> Option<Bytes> {
        while let Some(front) = self.held.front() {
            let end = self.held_start + front.len() as u64;
            if (self.held_start..end).contains(&self.position) {
                let from = (self.position - self.held_start) as usize;
                let take = want.min(front.len() - from);
                return Some(front.slice(from..from + take));
            }
            if self.position < self.held_start {
                self.held.clear();
            } else {
                self.held_start = end;
                self.held.pop_front();
            }
        }
        None
    }

    fn fail(&mut self, what: &str) -> Errno {
        self.detail = Some(self.store.redactor.clean(what));
        Errno::IO
    }

    /// Drop the ranges in flight if they do not start at the position
    /// (it was sought elsewhere).
    fn drop_stale(&mut self) {
        if self
            .ahead
            .front()
            .is_some_and(|f| f.range.start != self.position)
        {
            for fetch in self.ahead.drain(..) {
                fetch.task.abort();
            }
        }
    }

    /// Start ranges after those in flight (or at `from` when none are),
    /// up to the plan's depth.
    fn fill(&mut self, plan: ReadAhead, from: u64) {
        let limit = plan.limit.unwrap_or(self.size);
        let mut next = self.ahead.back().map_or(from, |f| f.range.end);
        while self.ahead.len() < plan.depth && next < limit {
            let end = limit.min(next + plan.range);
            let fetch = self.fetch(next..end);
            self.ahead.push_back(fetch);
            next = end;
        }
    }

    /// Without a pipeline hint: read ahead once reads follow each other,
    /// in ranges twice the run so far; a read elsewhere starts over.
    fn follow_run(&mut self, start: u64, want: usize) {
        if start != self.run_end || self.run == 0 {
            self.plan = None;
            self.run = 0;
        }
        if self.run > 0 {
            let range = (self.run * 2)
                .next_power_of_two()
                .clamp(FIRST_AUTO_RANGE, MIN_RANGE as u64);
            let depth = if range == MIN_RANGE as u64 {
                MIN_DEPTH
            } else {
                2
            };
            self.plan = Some(ReadAhead {
                range,
                depth,
                total: None,
                limit: Some(self.size),
            });
        }
        self.run += want as u64;
        self.run_end = start + want as u64;
    }

    /// Fill `buf` from `offset` on, without read-ahead: one GET.
    fn get_direct(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        let end = self.size.min(offset + buf.len() as u64);
        if offset >= end {
            return Ok(0);
        }
        let fetch = self.fetch(offset..end);
        let mut done = 0;
        for chunk in self.wait(fetch)? {
            buf[done..done + chunk.len()].copy_from_slice(&chunk);
            done += chunk.len();
        }
        Ok(done)
    }

    /// Bytes held or fetched for the position, at most `want`.
    fn next_bytes(&mut self, want: usize) -> Result<Bytes, Errno> {
        if let Some(bytes) = self.take_held(want) {
            return Ok(bytes);
        }
        if !self.ranges {
            let bytes = self.next_from_body()?;
            return Ok(bytes.slice(..want.min(bytes.len())));
        }
        let Some(mut plan) = self.plan else {
            let end = self.size.min(self.position + want as u64);
            let fetch = self.fetch(self.position..end);
            let chunks = self.wait(fetch)?;
            return Ok(self.hold(self.position, chunks, want));
        };
        if plan.limit.is_none() {
            let limit = match plan.total {
                Some(total) => self.size.min(self.position.saturating_add(total)),
                None => self.size,
            };
            plan.limit = Some(limit);
            self.plan = Some(plan);
        }
        self.drop_stale();
        self.fill(plan, self.position);
        let Some(fetch) = self.ahead.pop_front() else {
            // Past where reading ahead stops (a guess from the hint's
            // total): one GET, as before pipelining.
            let end = self.size.min(self.position + want as u64);
            let fetch = self.fetch(self.position..end);
            let chunks = self.wait(fetch)?;
            return Ok(self.hold(self.position, chunks, want));
        };
        let (start, end) = (fetch.range.start, fetch.range.end);
        // The next range starts while this one is waited for.
        self.fill(plan, end);
        let chunks = self.wait(fetch)?;
        Ok(self.hold(start, chunks, want))
    }
}

impl End for ObjectReader {
    fn kind(&self) -> Kind {
        Kind::Object
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let want = self
            .size
            .saturating_sub(self.position)
            .min(buf.len() as u64) as usize;
        let start = self.position;
        if self.ranges && !self.pipelined && want > 0 {
            self.follow_run(start, want);
        }
        let mut done = 0;
        while done < want {
            match self.next_bytes(want - done) {
                Ok(bytes) => {
                    buf[done..done + bytes.len()].copy_from_slice(&bytes);
                    done += bytes.len();
                    self.position += bytes.len() as u64;
                }
                Err(errno) => {
                    // All or nothing: a short count would read as the end.
                    self.position = start;
                    return Err(errno);
                }
            }
        }
        Ok(done)
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
        if self.ranges {
            return self.get_direct(buf, offset);
        }
        let position = std::mem::replace(&mut self.position, offset);
        let read = self.read(buf);
        self.position = position;
        read
    }

    fn pipeline(&mut self, hint: Pipeline) {
        let range = hint.chunk.max(MIN_RANGE);
        let depth = hint.depth.max(MIN_DEPTH).min((MAX_AHEAD / range).max(2));
        self.pipelined = true;
        self.plan = Some(ReadAhead {
            range: range as u64,
            depth,
            total: hint.total,
            limit: None,
        });
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    fn close(self: Box<Self>) -> Result<(), Errno> {
        for fetch in &self.ahead {
            fetch.task.abort();
        }
        Ok(())
    }

    fn abandon(self: Box<Self>) {
        for fetch in &self.ahead {
            fetch.task.abort();
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
            .field("ranges_in_flight", &self.ahead.len())
            .field("plan", &self.plan)
            .finish()
    }
}
