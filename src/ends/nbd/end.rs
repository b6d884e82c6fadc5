//! [`NbdEnd`]: an NBD export as an [`End`] of kind [`Kind::NbdExport`], a
//! file of the export's size that reads and writes at offsets, flushes,
//! zeroes and knows its extents.
//!
//! As a transport it sends reads, writes and zero requests at offsets and
//! hands back each completion (`ends::transport`): the engine's window
//! keeps them in flight, in order, and knows what is stored. When the
//! server allows multi-conn the requests are spread over up to
//! [`MAX_CONNECTIONS`] connections to the same URI: once every connection
//! has a request in flight, or a reader's first question about extents
//! is asked, the others are all begun at once, and each takes requests
//! when its handshake is done. Their handshakes go on while the end waits
//! for the first connection's answers, so over a link with latency they
//! cost the copy no round trip of its own. An export opened
//! for writing asks for no extents, and so for neither structured replies
//! nor a meta context: its handshake is one and a half round trips, a
//! reader's three and a half. A fast zero the
//! server refuses is sent again as a plain zero request on the same
//! connection, under the same request. Calls that are not requests (a
//! read or write at the position, a flush) are sent and waited for before
//! they return, their error returned by that call; completions of
//! requests in flight that arrive meanwhile are kept for
//! [`End::complete`].
//!
//! Under oflag=sync or oflag=dsync ([`NbdEnd::make_writes_durable`]) the
//! end takes one request at a time and every write is flushed before the
//! call returns, so that what the statistics count survives the server
//! losing its power. A failure says where it happened ("at offset N")
//! and, when the connection is gone, says so plainly before libnbd's own
//! words.
//!
//! Everything runs on the caller's thread: no thread of its own, no
//! callback that runs elsewhere. Requests progress whenever the end waits
//! (poll(2) over every connection's socket, then libnbd is told what is
//! ready); between calls nothing moves, which costs nothing because a
//! request already sent is being served meanwhile.

use std::collections::HashMap;
use std::fmt;

use super::extents::ExtentMap;
use super::handle::{
    self, Completion as Done, Cookie, Direction, ExportInfo, Handle, Lent, NbdError,
};
use super::uri::NbdUri;
use crate::ends::transport::{Completion, Fault, Op, Request, Requests, Submitted};
use crate::ends::{Capabilities, End, Kind, Whence};
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

/// Most connections to one export (nbdcopy's default too).
pub const MAX_CONNECTIONS: usize = 4;

/// Requests in flight at most, over all connections (the window keeps
/// fewer: the copy's queue depth, or a round trip's bytes of them).
const MOST_IN_FLIGHT: usize = 128;

/// The most bytes worth keeping in flight to an export: a server on
/// another machine answers each request a round trip later, and only
/// what is in flight meanwhile moves. 128 MiB carries [`LINK_RATE`] over
/// a round trip of 50 ms (25 ms each way, as in bench/latency.sh), where
/// the plan's depth alone (a memory budget of 64 MiB, and 16 requests of
/// 1 MiB for the default bs) carried 16 to 64 MiB. The copy's memory
/// grows by as much: at most this much more in the window's buffers.
const ROUND_TRIP_MOST: usize = 128 << 20;

/// The least: an export is always across a link of some kind (GNU's
/// records go in flight to it, and a pipe's pieces are gathered).
const ROUND_TRIP_LEAST: usize = 1 << 20;

/// The rate a round trip is worth keeping in flight for, in bytes per
/// second (2.5 GiB/s: more than a copy through libnbd moves here).
const LINK_RATE: f64 = 2.5 * (1u64 << 30) as f64;

/// What a round trip to the server is worth, from how long the
/// handshake took: `round_trips` option round trips (3.5 for a reader,
/// which asks for structured replies and the allocation map; 1.5 for a
/// writer). Measured, not assumed: on a Unix socket a round trip is
/// tens of microseconds, and keeping 128 MiB in flight there only cost
/// the memory (a 1 GiB copy between two local exports mapped 225 more
/// buffers of 1 MiB, and took 9% longer) while carrying nothing more.
fn round_trip_bytes(handshake: std::time::Duration, round_trips: f64) -> usize {
    let bytes = handshake.as_secs_f64() / round_trips * LINK_RATE;
    (bytes as usize).clamp(ROUND_TRIP_LEAST, ROUND_TRIP_MOST)
}

/// The largest zero request sent at once.
const ZERO_MAX: u64 = 1 << 30;

/// How much block status is asked for at once (a hint to the server).
const EXTENT_QUERY: u64 = 1 << 30;

/// What the end will be used for; an export the server offers read-only
/// cannot be opened for writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// A request in flight: the window's id for it, and what it asked.
#[derive(Debug, Clone, Copy)]
struct Sent {
    id: u64,
    offset: u64,
    len: u64,
    /// A zero request sent as fast zero (refused ones are sent again).
    fast: bool,
}

pub struct NbdEnd {
    uri: String,
    conns: Vec<Handle>,
    /// Further connections whose handshakes are going on
    /// ([`Handle::connect_later`]).
    joining: Vec<Handle>,
    next_conn: usize,
    max_connections: usize,
    /// A further connection failed once: not tried again.
    no_more_connections: bool,
    info: ExportInfo,
    access: Access,
    /// The server answers block status and has not failed at it.
    extents_usable: bool,
    pos: u64,
    /// Requests in flight, by connection and cookie.
    sent: HashMap<(usize, Cookie), Sent>,
    /// Completions of requests that arrived while a call waited for its
    /// own, for [`End::complete`].
    arrived: Vec<Completion>,
    /// Completions of the calls' own commands, by connection and cookie.
    own: Vec<(usize, Done)>,
    extents: ExtentMap,
    /// Block status from the export's start, asked on the first
    /// connection as soon as it was made, for the first question about
    /// the allocation: its round trip passes while the copy sets up.
    asked: Option<Cookie>,
    detail: Option<String>,
    /// oflag=sync/dsync: every write is flushed before it returns.
    durable: bool,
    /// What a round trip to the server is worth keeping in flight, from
    /// the handshake's time ([`round_trip_bytes`]).
    round_trip_bytes: usize,
}

impl fmt::Debug for NbdEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NbdEnd")
            .field("uri", &self.uri)
            .field("size", &self.info.size)
            .field("pos", &self.pos)
            .field("connections", &self.conns.len())
            .field("joining", &self.joining.len())
            .field("in_flight", &self.sent.len())
            .finish_non_exhaustive()
    }
}

impl NbdEnd {
    /// Connect to the export `uri` names, for reading or writing, with up
    /// to [`MAX_CONNECTIONS`] connections once requests go in flight.
    pub fn open(uri: &NbdUri, access: Access) -> Result<NbdEnd, NbdError> {
        NbdEnd::open_with(uri, access, MAX_CONNECTIONS)
    }

    /// [`NbdEnd::open`] with at most `max_connections` connections (1:
    /// never more than the first, whatever the server allows).
    pub fn open_with(
        uri: &NbdUri,
        access: Access,
        max_connections: usize,
    ) -> Result<NbdEnd, NbdError> {
        let started = std::time::Instant::now();
        let mut handle = Handle::connect(&uri.text, access == Access::Read)?;
        let info = handle.info()?;
        let round_trips = if access == Access::Read { 3.5 } else { 1.5 };
        let round_trip_bytes = round_trip_bytes(started.elapsed(), round_trips);
        if access == Access::Write && info.read_only {
            // A read-only export is a read-only device: open(2) says
            // EROFS for those, and "Read-only file system" names the
            // cause where EPERM would read as the user's permissions.
            return Err(NbdError::new(
                Errno::ROFS,
                "the server exports it read-only",
            ));
        }
        // A reader's first question is about the allocation at the start.
        let asked = match (access, info.extents) {
            (Access::Read, true) if info.size > 0 => {
                handle.block_status(info.size.min(EXTENT_QUERY), 0).ok()
            }
            _ => None,
        };
        let mut end = NbdEnd {
            uri: uri.text.clone(),
            conns: vec![handle],
            joining: Vec::new(),
            next_conn: 0,
            max_connections: max_connections.max(1),
            no_more_connections: false,
            extents_usable: info.extents,
            info,
            access,
            pos: 0,
            sent: HashMap::new(),
            arrived: Vec::new(),
            own: Vec::new(),
            extents: ExtentMap::default(),
            asked,
            detail: None,
            durable: false,
            round_trip_bytes,
        };
        // A reader waits a round trip for that answer before its first
        // request: the other connections' handshakes go on meanwhile, and
        // they take requests that much sooner.
        if end.asked.is_some() {
            end.begin_joining();
        }
        Ok(end)
    }

    /// What the server said about the export.
    pub fn info(&self) -> ExportInfo {
        self.info
    }

    /// Connections open now (more once requests go in flight, when
    /// multi-conn).
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// From now on a write returns only once the server has it durably
    /// (oflag=sync or oflag=dsync): it is sent, acknowledged and followed
    /// by a flush, never left in flight, so that what the statistics
    /// count as written survives a power cut of the server.
    pub fn make_writes_durable(&mut self) {
        self.durable = true;
    }

    /// Keep `error`'s message for take_detail; its errno for the caller.
    fn fail(&mut self, error: NbdError) -> Errno {
        self.detail = Some(words(&error));
        error.errno
    }

    /// [`NbdEnd::fail`] for a request at `offset` of the export.
    fn fail_at(&mut self, error: NbdError, offset: u64) -> Errno {
        self.detail = Some(format!("at offset {offset}: {}", words(&error)));
        error.errno
    }

    /// The connection for the next request: the next in turn among those
    /// made. Once every connection has a request in flight, the rest are
    /// begun ([`NbdEnd::begin_joining`]).
    fn pick(&mut self) -> usize {
        self.join();
        if self.sent.len() >= self.conns.len() {
            self.begin_joining();
        }
        let conn = self.next_conn % self.conns.len();
        self.next_conn = conn + 1;
        conn
    }

    /// Where the server allows multi-conn, the connections beyond those
    /// made or joining are begun, up to the most, all at once, without
    /// waiting for them (one that cannot be made is done without, and so
    /// are those after it).
    fn begin_joining(&mut self) {
        let more = self
            .max_connections
            .saturating_sub(self.conns.len() + self.joining.len());
        if self.info.can_multi_conn && !self.no_more_connections && more > 0 {
            for _ in 0..more {
                match Handle::connect_later(&self.uri, self.access == Access::Read) {
                    Ok(handle) => self.joining.push(handle),
                    Err(_) => {
                        self.no_more_connections = true;
                        break;
                    }
                }
            }
        }
    }

    /// Connections whose handshake is done take requests from now on; one
    /// whose handshake failed is let go, and no more are tried.
    fn join(&mut self) {
        let mut k = 0;
        while k < self.joining.len() {
            if self.joining[k].dead() {
                drop(self.joining.swap_remove(k));
                self.no_more_connections = true;
            } else if !self.joining[k].connecting() {
                let handle = self.joining.swap_remove(k);
                self.conns.push(handle);
            } else {
                k += 1;
            }
        }
    }

    /// Take every completion there is: a request's becomes a
    /// [`Completion`] for the window (a refused fast zero is sent again
    /// plain instead), a call's own is kept for it.
    fn collect(&mut self) {
        for conn in 0..self.conns.len() {
            while let Some(done) = self.conns[conn].completed() {
                let Some(sent) = self.sent.remove(&(conn, done.cookie)) else {
                    self.own.push((conn, done));
                    continue;
                };
                if let (true, Err(e)) = (sent.fast, &done.result) {
                    if e.errno == Errno::NOTSUP {
                        // Refused as a fast zero: still cheaper than
                        // sending the zeros, so plain.
                        match self.conns[conn].zero(sent.len, sent.offset, false) {
                            Ok(cookie) => {
                                self.sent.insert(
                                    (conn, cookie),
                                    Sent {
                                        fast: false,
                                        ..sent
                                    },
                                );
                                continue;
                            }
                            Err(e) => {
                                self.arrived.push(self.completion(sent, Err(e), None));
                                continue;
                            }
                        }
                    }
                }
                let completion = self.completion(sent, done.result, done.buffer);
                self.arrived.push(completion);
            }
        }
    }

    /// The window's completion of `sent`.
    fn completion(
        &self,
        sent: Sent,
        result: Result<(), NbdError>,
        buf: Option<AlignedBuf>,
    ) -> Completion {
        Completion {
            id: sent.id,
            result: match result {
                Ok(()) => Ok(sent.len),
                Err(e) => Err(Fault::with_words(
                    e.errno,
                    format!("at offset {}: {}", sent.offset, words(&e)),
                )),
            },
            buf,
        }
    }

    /// Wait until some command makes progress (or a handshake of a
    /// connection joining), and collect. Err: none can (no connection has
    /// anything in flight, or poll failed).
    fn drive(&mut self) -> Result<(), NbdError> {
        let mut interest = Vec::with_capacity(self.conns.len() + self.joining.len());
        let mut which = Vec::with_capacity(self.conns.len());
        for (conn, handle) in self.conns.iter().enumerate() {
            if let Some(wanted) = handle.interest() {
                interest.push(wanted);
                which.push(conn);
            }
        }
        if interest.is_empty() {
            return Err(NbdError::new(
                Errno::NOTCONN,
                "the NBD connection has nothing in flight to wait for",
            ));
        }
        let mut joining = Vec::with_capacity(self.joining.len());
        for (k, handle) in self.joining.iter().enumerate() {
            if let Some(wanted) = handle.interest() {
                interest.push(wanted);
                joining.push(k);
            }
        }
        let ready = handle::poll(&interest)?;
        let mut lost = None;
        for (k, revents) in ready.into_iter().enumerate() {
            if revents.is_empty() {
                continue;
            }
            match which.get(k) {
                Some(&conn) => {
                    if let Err(e) = self.conns[conn].notify(revents) {
                        lost = Some(e);
                    }
                }
                // A handshake that fails leaves its handle dead, which
                // `join` lets go.
                None => {
                    let _ = self.joining[joining[k - which.len()]].notify(revents);
                }
            }
        }
        self.join();
        self.collect();
        // A connection that died completes its commands with errors;
        // what is still pending on it can never complete.
        if let Some(e) = lost {
            if which
                .iter()
                .any(|&c| self.conns[c].interest().is_none() && self.conns[c].pending() > 0)
            {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Every request in flight fails with `error` (its connection is
    /// gone); their buffers stay with their handles.
    fn fail_in_flight(&mut self, error: &NbdError) {
        let sent: Vec<Sent> = self.sent.drain().map(|(_, sent)| sent).collect();
        for sent in sent {
            let completion = self.completion(sent, Err(error.clone()), None);
            self.arrived.push(completion);
        }
    }

    /// Wait for one command a call sent itself.
    fn wait_for(&mut self, conn: usize, cookie: Cookie) -> Result<Done, NbdError> {
        loop {
            self.collect();
            if let Some(at) = self
                .own
                .iter()
                .position(|(c, done)| *c == conn && done.cookie == cookie)
            {
                return Ok(self.own.swap_remove(at).1);
            }
            self.drive()?;
        }
    }

    fn writable(&mut self) -> Result<(), Errno> {
        if self.info.read_only {
            return Err(self.fail(NbdError::new(
                Errno::ROFS,
                "the server exports it read-only",
            )));
        }
        // What was known of the allocation may be stale now.
        self.extents.clear();
        Ok(())
    }

    /// Write `data` at `offset` and wait, straight from the caller's
    /// memory (a synchronous write need not copy into a buffer of the
    /// end's): the bytes written, or the first failure and where.
    fn write_lent(&mut self, data: &[u8], offset: u64) -> Result<usize, Errno> {
        let max = self.info.max_request;
        for (k, piece) in data.chunks(max).enumerate() {
            let at = offset + (k * max) as u64;
            let conn = self.pick();
            if let Err(e) = self.conns[conn].transfer_now(Lent::Write(piece), at) {
                if k > 0 {
                    // What was written before the failure is a short
                    // write; the error comes with the next call.
                    return Ok(k * max);
                }
                return Err(self.fail_at(e, at));
            }
        }
        Ok(data.len())
    }

    /// After a write: under oflag=sync/dsync, flush it before returning.
    fn made_durable<T>(&mut self, written: Result<T, Errno>) -> Result<T, Errno> {
        let written = written?;
        if self.durable {
            self.sync(true)?;
        }
        Ok(written)
    }

    /// Block status from `at` on into the map. A server that fails at it
    /// or answers nothing useful is not asked again.
    fn learn_extents(&mut self, at: u64) -> Result<(), Errno> {
        let (cookie, from) = match self.asked.take() {
            // The question asked at the start answers for the start.
            Some(cookie) if at < self.info.size.min(EXTENT_QUERY) => (Ok(cookie), 0),
            _ => {
                let len = (self.info.size - at).min(EXTENT_QUERY);
                (self.conns[0].block_status(len, at), at)
            }
        };
        let learnt = cookie
            .and_then(|cookie| self.wait_for(0, cookie))
            .and_then(|done| done.result.map(|()| done.extents.unwrap_or_default()))
            .map(|extents| self.extents.learn(from, &extents, self.info.size));
        if learnt == Ok(true) {
            Ok(())
        } else {
            self.extents_usable = false;
            self.extents.clear();
            Err(Errno::NOTSUP)
        }
    }

    /// The run of the allocation holding `at`: where it ends and whether
    /// it reads as zeros, asking the server when the map does not know.
    fn run_at(&mut self, at: u64) -> Result<(u64, bool), Errno> {
        if !self.extents_usable {
            return Err(Errno::NOTSUP);
        }
        // Twice at most: the question asked at the start may have been
        // answered for less than reaches `at`.
        for _ in 0..2 {
            if self.extents.lookup(at).is_none() {
                self.learn_extents(at)?;
            }
        }
        self.extents.lookup(at).ok_or(Errno::NOTSUP)
    }

    /// Send `request` on `conn`: its cookie, or the refusal with the
    /// buffer back.
    fn send(&mut self, conn: usize, request: &mut Request) -> Result<Cookie, NbdError> {
        let offset = request.offset;
        match request.op {
            Op::Zero => {
                let fast = self.info.can_fast_zero;
                self.conns[conn].zero(request.len, offset, fast)
            }
            Op::Read | Op::Write => {
                let buf = request
                    .buf
                    .take()
                    .expect("a read or write carries its buffer");
                let direction = if request.op == Op::Read {
                    Direction::Read
                } else {
                    Direction::Write
                };
                match self.conns[conn].transfer(direction, buf, offset) {
                    Ok(cookie) => Ok(cookie),
                    Err((e, buf)) => {
                        request.buf = Some(buf);
                        Err(e)
                    }
                }
            }
        }
    }
}

impl End for NbdEnd {
    fn kind(&self) -> Kind {
        Kind::NbdExport
    }

    /// Its kind's, with requests in flight up to the server's largest,
    /// a round trip's bytes of them at least (one at a time under
    /// oflag=sync/dsync); read only where the server says so.
    fn capabilities(&self) -> Capabilities {
        let requests = if self.durable {
            Requests {
                via: "libnbd",
                ..Requests::ONE_AT_A_TIME
            }
        } else {
            Requests {
                most: MOST_IN_FLIGHT,
                max_len: self.info.max_request,
                round_trip_bytes: self.round_trip_bytes,
                via: "libnbd",
                ..Requests::ONE_AT_A_TIME
            }
        };
        Capabilities {
            requests,
            read_only: self
                .info
                .read_only
                .then_some("the server exports it read-only"),
            ..Capabilities::of(Kind::NbdExport)
        }
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        let target = to.from(self.pos, self.info.size);
        let target = target.ok_or(Errno::INVAL)?;
        if self.access == Access::Write && target > self.info.size {
            // An output export is a block device of its size: lseek(2)
            // past a device's end is EINVAL, so seek= past the end fails
            // as GNU dd fails on a device ("cannot seek"), and conv=sparse
            // falls back to writing, which meets ENOSPC at the end. An
            // input keeps a file's behaviour (skip= past the end warns).
            return Err(Errno::INVAL);
        }
        self.pos = target;
        Ok(self.pos)
    }

    fn size(&self) -> Result<Option<u64>, Errno> {
        Ok(Some(self.info.size))
    }

    /// From block status: only runs the server marks as reading zeros
    /// (`NBD_STATE_ZERO`, holes and allocated zeros alike) are not data;
    /// a hole without that bit may read as anything, so it is data.
    /// EOPNOTSUPP when the server gives no extents.
    fn next_data(&mut self, offset: u64) -> Result<Option<u64>, Errno> {
        let mut at = offset;
        loop {
            if at >= self.info.size {
                return Ok(None);
            }
            match self.run_at(at)? {
                (_, false) => return Ok(Some(at)),
                (end, true) => at = end,
            }
        }
    }

    /// Where the data at `offset` ends: the first run from there that
    /// reads as zeros, or the end of the export.
    fn next_hole(&mut self, offset: u64) -> Result<u64, Errno> {
        let mut at = offset;
        while at < self.info.size {
            match self.run_at(at)? {
                (_, true) => return Ok(at),
                (end, false) => at = end,
            }
        }
        Ok(self.info.size)
    }

    /// An export's size is fixed: like a block device it is never
    /// truncated. Nothing is sent and the call succeeds, so that the
    /// engine needs no case of its own (GNU dd ignores ftruncate's
    /// failure on anything but a regular file).
    fn truncate(&mut self, len: u64) -> Result<(), Errno> {
        let _ = len;
        Ok(())
    }

    /// An NBD flush: one on the first connection covers all of them,
    /// which is what the server's multi-conn promises. A server that
    /// cannot flush has nothing to flush.
    fn sync(&mut self, data_only: bool) -> Result<(), Errno> {
        let _ = data_only;
        if !self.info.can_flush {
            return Ok(());
        }
        let flushed = self.conns[0]
            .flush()
            .and_then(|cookie| self.wait_for(0, cookie))
            .and_then(|done| done.result);
        flushed.map_err(|e| {
            let errno = e.errno;
            self.detail = Some(format!("flushing: {}", words(&e)));
            errno
        })
    }

    /// Full requests until the end of the export, then 0.
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        let size = self.info.size;
        if buf.is_empty() || offset >= size {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(size - offset) as usize;
        let max = self.info.max_request;
        for (k, piece) in buf[..want].chunks_mut(max).enumerate() {
            // Straight into the caller's memory, one request at a time.
            let at = offset + (k * max) as u64;
            let conn = self.pick();
            if let Err(e) = self.conns[conn].transfer_now(Lent::Read(piece), at) {
                return Err(self.fail_at(e, at));
            }
        }
        Ok(want)
    }

    /// Up to the end of the export: a write across it is written up to it
    /// (a short count), one at or past it fails with ENOSPC.
    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        self.writable()?;
        if buf.is_empty() {
            return Ok(0);
        }
        if offset >= self.info.size {
            return Err(Errno::NOSPC);
        }
        let n = (buf.len() as u64).min(self.info.size - offset) as usize;
        let written = self.write_lent(&buf[..n], offset);
        self.made_durable(written)
    }

    /// An NBD zero request at the position, with fast-zero where the
    /// server offers it (a refused fast zero is sent again plain: it
    /// still saves sending the zeros). EOPNOTSUPP where the server cannot
    /// zero, or past the end of the export: the caller writes the zeros
    /// instead.
    fn write_zeroes(&mut self, len: u64) -> Result<(), Errno> {
        if !self.info.can_zero && !self.info.read_only {
            return Err(Errno::NOTSUP);
        }
        self.writable()?;
        if self.pos >= self.info.size || len > self.info.size - self.pos {
            return Err(Errno::NOTSUP);
        }
        let start = self.pos;
        let mut at = start;
        while at < start + len {
            let n = (start + len - at).min(ZERO_MAX);
            let mut fast = self.info.can_fast_zero;
            loop {
                let done = self.conns[0]
                    .zero(n, at, fast)
                    .and_then(|cookie| self.wait_for(0, cookie))
                    .and_then(|done| done.result);
                match done {
                    Ok(()) => break,
                    Err(e) if fast && e.errno == Errno::NOTSUP => fast = false,
                    Err(e) => return Err(self.fail_at(e, at)),
                }
            }
            at += n;
        }
        self.made_durable(Ok(()))?;
        self.pos = start + len;
        Ok(())
    }

    /// A read, write or zero request at its offset, on the next
    /// connection. A write past the export's end stores nothing (0
    /// bytes: ENOSPC for the window), one across it what fits.
    fn submit(&mut self, mut request: Request) -> Submitted {
        let size = self.info.size;
        let past_end = request.offset >= size;
        if request.op != Op::Read {
            if let Err(errno) = self.writable() {
                return Submitted::Done(Completion {
                    id: request.id,
                    result: Err(Fault {
                        errno,
                        words: self.detail.take(),
                        at: None,
                    }),
                    buf: request.buf,
                });
            }
        }
        if past_end || request.len == 0 {
            return Submitted::Done(Completion {
                id: request.id,
                result: Ok(0),
                buf: request.buf,
            });
        }
        request.len = request.len.min(size - request.offset);
        if let Some(buf) = &mut request.buf {
            buf.set_len(request.len as usize);
        }
        let conn = self.pick();
        match self.send(conn, &mut request) {
            Ok(cookie) => {
                let fast = request.op == Op::Zero && self.info.can_fast_zero;
                self.sent.insert(
                    (conn, cookie),
                    Sent {
                        id: request.id,
                        offset: request.offset,
                        len: request.len,
                        fast,
                    },
                );
                Submitted::InFlight
            }
            Err(e) => Submitted::Done(Completion {
                id: request.id,
                result: Err(Fault::with_words(
                    e.errno,
                    format!("at offset {}: {}", request.offset, words(&e)),
                )),
                buf: request.buf,
            }),
        }
    }

    fn complete(&mut self, wait: bool) -> Option<Completion> {
        loop {
            if let Some(done) = self.arrived.pop() {
                return Some(done);
            }
            if self.sent.is_empty() {
                return None;
            }
            self.collect();
            if !self.arrived.is_empty() {
                continue;
            }
            if !wait {
                return None;
            }
            if let Err(e) = self.drive() {
                self.fail_in_flight(&e);
            }
        }
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    /// Flushes nothing (conv=fsync is `sync`): waits for the requests in
    /// flight, then tells the server on every connection at once that it
    /// is going, and goes once that is sent.
    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        while self.complete(true).is_some() {}
        for handle in &mut self.conns {
            handle.disconnect();
        }
        loop {
            let (sending, interest): (Vec<usize>, Vec<_>) = (0..self.conns.len())
                .filter(|&conn| self.conns[conn].sending())
                .filter_map(|conn| Some((conn, self.conns[conn].interest()?)))
                .unzip();
            if interest.is_empty() {
                return Ok(());
            }
            let Ok(ready) = handle::poll(&interest) else {
                return Ok(());
            };
            for (k, revents) in ready.into_iter().enumerate() {
                if !revents.is_empty() {
                    let _ = self.conns[sending[k]].notify(revents);
                }
            }
        }
    }

    /// Drops the connections at once, requests in flight and all.
    fn abandon(self: Box<Self>) {}
}

/// Whether `error` says the connection is gone (the server closed it, was
/// killed, or the network dropped it): libnbd then fails every command
/// with ESHUTDOWN, ENOTCONN or the like.
fn lost(error: &NbdError) -> bool {
    matches!(
        error.errno,
        Errno::SHUTDOWN | Errno::NOTCONN | Errno::CONNRESET | Errno::PIPE | Errno::CONNABORTED
    ) || error.message.contains("DEAD")
}

/// `error` in words: libnbd's own (which name the call and what the
/// server said), after a plain statement when the connection is gone.
fn words(error: &NbdError) -> String {
    if lost(error) {
        format!(
            "the connection to the server was lost: it closed it or went away ({})",
            error.message
        )
    } else {
        error.message.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_round_trip_is_worth_what_the_handshake_says() {
        // A reader's handshake through 25 ms each way: 3.5 round trips
        // of 50 ms, about 175 ms, is worth the most.
        let far = round_trip_bytes(Duration::from_millis(190), 3.5);
        assert_eq!(far, ROUND_TRIP_MOST);
        // A writer's, 1.5 round trips of 10 ms: 25 MiB at 2.5 GiB/s.
        let near = round_trip_bytes(Duration::from_millis(15), 1.5);
        assert_eq!(near >> 20, 25);
        assert!(near < ROUND_TRIP_MOST);
        // A Unix socket's handshake, well under a millisecond: the least,
        // never nothing.
        let local = round_trip_bytes(Duration::from_micros(300), 3.5);
        assert_eq!(local, ROUND_TRIP_LEAST);
        assert!(round_trip_bytes(Duration::ZERO, 1.5) > 0);
    }
}
