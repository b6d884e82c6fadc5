//! [`NbdEnd`]: an NBD export as an [`End`] of kind [`Kind::NbdExport`], a
//! file of the export's size that reads and writes at offsets, flushes,
//! zeroes and knows its extents.
//!
//! Unpipelined, every call is synchronous: a read or write is sent and
//! waited for before the call returns, its error returned by that call.
//! After [`End::pipeline`] the end reads ahead (up to `depth` requests of
//! `chunk` bytes in flight beyond the position, none for runs the extents
//! say read as zeros) and writes behind (a write is copied into one of
//! the end's buffers, sent, and the call returns; up to `depth` in
//! flight, completed in any order; the first failure is returned by the
//! next write, sync, settle or close, and [`End::written_until`] tells
//! where the acknowledged prefix ends). When the server allows multi-conn
//! the requests are spread over up to [`MAX_CONNECTIONS`] connections to
//! the same URI.
//!
//! Under oflag=sync or oflag=dsync ([`NbdEnd::make_writes_durable`]) a
//! write is never left behind: it is sent, acknowledged and flushed
//! before the call returns, so that what the statistics count survives
//! the server losing its power. A failure says where it happened ("at
//! offset N") and, when the connection is gone, says so plainly before
//! libnbd's own words.
//!
//! Everything runs on the caller's thread: no thread of its own, no
//! callback that runs elsewhere. Requests progress whenever the end waits
//! (poll(2) over every connection's socket, then libnbd is told what is
//! ready); between calls nothing moves, which costs nothing because a
//! request already sent is being served meanwhile.

use std::fmt;

use super::buffers::Buffers;
use super::extents::ExtentMap;
use super::handle::{self, Completion, Cookie, Direction, ExportInfo, Handle, Lent, NbdError};
use super::reads::{self, Piece, ReadWindow};
use super::uri::NbdUri;
use super::writes::{self, Op, WriteWindow};
use crate::ends::{Capabilities, End, Kind, Pipeline, Whence};
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

/// Most connections to one export (nbdcopy's default too).
pub const MAX_CONNECTIONS: usize = 4;

/// The largest zero or trim request sent at once.
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

/// A read sent by [`NbdEnd::start_read`]: its connection and cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket {
    pub conn: usize,
    pub cookie: Cookie,
}

/// Where a read's bytes go: copied into a slice, or into a buffer that
/// may change places with a read-ahead piece's.
enum ReadInto<'a> {
    Slice(&'a mut [u8]),
    Exchange(&'a mut AlignedBuf),
}

impl ReadInto<'_> {
    fn len(&self) -> usize {
        match self {
            ReadInto::Slice(buf) => buf.len(),
            ReadInto::Exchange(buf) => buf.len(),
        }
    }
}

pub struct NbdEnd {
    uri: String,
    conns: Vec<Handle>,
    next_conn: usize,
    max_connections: usize,
    info: ExportInfo,
    access: Access,
    /// The server answers block status and has not failed at it.
    extents_usable: bool,
    pos: u64,
    /// Reads before this offset are sent exactly as asked (see `read`).
    suspect_until: u64,
    hint: Option<Pipeline>,
    reads: ReadWindow,
    writes: WriteWindow,
    /// A write returned before it was acknowledged (pipelined).
    deferred: bool,
    extents: ExtentMap,
    pool: Buffers,
    detail: Option<String>,
    /// Completions of requests a synchronous call is waiting for (and of
    /// requests whose waiter gave up).
    stray: Vec<(usize, Completion)>,
    /// oflag=sync/dsync: every write is flushed before it returns.
    durable: bool,
}

impl fmt::Debug for NbdEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NbdEnd")
            .field("uri", &self.uri)
            .field("size", &self.info.size)
            .field("pos", &self.pos)
            .field("connections", &self.conns.len())
            .finish_non_exhaustive()
    }
}

impl NbdEnd {
    /// Connect to the export `uri` names, for reading or writing, with up
    /// to [`MAX_CONNECTIONS`] connections once pipelined.
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
        let handle = Handle::connect(&uri.text)?;
        let info = handle.info()?;
        if access == Access::Write && info.read_only {
            // A read-only export is a read-only device: open(2) says
            // EROFS for those, and "Read-only file system" names the
            // cause where EPERM would read as the user's permissions.
            return Err(NbdError::new(
                Errno::ROFS,
                "the server exports it read-only",
            ));
        }
        Ok(NbdEnd {
            uri: uri.text.clone(),
            conns: vec![handle],
            next_conn: 0,
            max_connections: max_connections.max(1),
            extents_usable: info.extents,
            info,
            access,
            pos: 0,
            suspect_until: 0,
            hint: None,
            reads: ReadWindow::default(),
            writes: WriteWindow::default(),
            deferred: false,
            extents: ExtentMap::default(),
            pool: Buffers::default(),
            detail: None,
            stray: Vec::new(),
            durable: false,
        })
    }

    /// What the server said about the export.
    pub fn info(&self) -> ExportInfo {
        self.info
    }

    /// Connections open now (more after `pipeline` when multi-conn).
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Discard the next `len` bytes at the position (an NBD trim: the
    /// server may free them; what they read as after is unspecified) and
    /// move past them. EOPNOTSUPP where the server cannot trim.
    pub fn trim(&mut self, len: u64) -> Result<(), Errno> {
        if !self.info.can_trim && !self.info.read_only {
            return Err(Errno::NOTSUP);
        }
        self.no_write_op(len, writes::NbdCommand::Trim)
    }

    /// Send a read of `len` bytes at `offset` and return at once, for a
    /// measurement that keeps several requests in flight at random offsets
    /// (`ddx bench`'s queue-depth sweep), which read-ahead does not do.
    /// The data is not kept: [`NbdEnd::next_read`] says when one is done.
    pub fn start_read(&mut self, len: usize, offset: u64) -> Result<Ticket, Errno> {
        let buf = self.pool.take(len);
        match self.send(Direction::Read, buf, offset) {
            Ok((conn, cookie)) => Ok(Ticket { conn, cookie }),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Wait until a read sent by [`NbdEnd::start_read`] completes (any
    /// of them, in the order the server answers) and say which.
    pub fn next_read(&mut self) -> Result<Ticket, Errno> {
        loop {
            self.collect();
            if let Some((conn, done)) = self.stray.pop() {
                if let Some(buf) = done.buffer {
                    self.pool.give(buf);
                }
                return match done.result {
                    Ok(()) => Ok(Ticket {
                        conn,
                        cookie: done.cookie,
                    }),
                    Err(e) => Err(self.fail(e)),
                };
            }
            self.drive().map_err(|e| self.fail(e))?;
        }
    }

    /// From now on a write returns only once the server has it durably
    /// (oflag=sync or oflag=dsync): it is sent, acknowledged and followed
    /// by a flush, never left behind, so that what the statistics count
    /// as written survives a power cut of the server.
    pub fn make_writes_durable(&mut self) {
        self.durable = true;
    }

    /// `write`'s work: behind when pipelined (not under oflag=sync or
    /// dsync), else sent and waited for.
    fn write_now(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        self.before_writing()?;
        if buf.is_empty() {
            return Ok(0);
        }
        if self.pos >= self.info.size {
            return Err(Errno::NOSPC);
        }
        let start = self.pos;
        let n = (buf.len() as u64).min(self.info.size - start) as usize;
        if self.hint.is_some() && !self.durable {
            self.submit_data(&buf[..n], start);
            self.deferred = true;
            self.pos = start + n as u64;
            return Ok(n);
        }
        self.settle_writes();
        self.write_lent(&buf[..n], start);
        let done = match self.writes.failure_offset() {
            // What was written before the failure is a short write; the
            // error comes with the next call.
            Some(at) if at > start => (at - start) as usize,
            Some(_) => return self.report().map(|()| 0),
            None => n,
        };
        self.pos = start + done as u64;
        Ok(done)
    }

    /// After a write: under oflag=sync/dsync, flush it before returning.
    fn made_durable<T>(&mut self, written: Result<T, Errno>) -> Result<T, Errno> {
        let written = written?;
        if self.durable {
            self.sync(true)?;
        }
        Ok(written)
    }

    fn depth(&self) -> usize {
        self.hint.map_or(1, |h| h.depth)
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

    fn pick(&mut self) -> usize {
        let conn = self.next_conn % self.conns.len();
        self.next_conn = conn + 1;
        conn
    }

    /// Send a read into `buf` or a write of it at `offset` on the next
    /// connection: which connection and cookie, or the refusal (the
    /// buffer back in the pool).
    fn send(
        &mut self,
        direction: Direction,
        buf: AlignedBuf,
        offset: u64,
    ) -> Result<(usize, Cookie), NbdError> {
        let conn = self.pick();
        match self.conns[conn].transfer(direction, buf, offset) {
            Ok(cookie) => Ok((conn, cookie)),
            Err((e, buf)) => {
                self.pool.give(buf);
                Err(e)
            }
        }
    }

    /// Retire every completed request and hand it to whoever waits for
    /// it; how many there were.
    fn collect(&mut self) -> usize {
        let mut retired = 0;
        for conn in 0..self.conns.len() {
            while let Some(done) = self.conns[conn].completed() {
                retired += 1;
                let Some(done) = self.reads.accept(conn, done, &mut self.pool) else {
                    continue;
                };
                let Some(done) = self.writes.accept(conn, done, &mut self.pool) else {
                    continue;
                };
                self.stray.push((conn, done));
            }
        }
        for op in self.writes.refused() {
            let writes::State::Refused { conn } = op.state else {
                continue;
            };
            op.kind = writes::NbdCommand::Zero { fast: false };
            op.state = match self.conns[conn].zero(op.len, op.offset, false) {
                Ok(cookie) => writes::State::InFlight { conn, cookie },
                Err(e) => writes::State::Failed(e),
            };
        }
        retired
    }

    /// Wait until some request makes progress, and collect. Err: none can
    /// (no connection has anything in flight, or poll failed).
    fn drive(&mut self) -> Result<(), NbdError> {
        let mut interest = Vec::with_capacity(self.conns.len());
        let mut which = Vec::with_capacity(self.conns.len());
        for (conn, handle) in self.conns.iter().enumerate() {
            if let Some(wanted) = handle.interest() {
                interest.push(wanted);
                which.push(conn);
            }
        }
        if interest.is_empty() {
            if self.collect() > 0 {
                return Ok(());
            }
            return Err(NbdError::new(
                Errno::NOTCONN,
                "the NBD connection has nothing in flight to wait for",
            ));
        }
        let ready = handle::poll(&interest)?;
        let mut lost = None;
        for (k, revents) in ready.into_iter().enumerate() {
            if !revents.is_empty() {
                if let Err(e) = self.conns[which[k]].notify(revents) {
                    lost = Some(e);
                }
            }
        }
        self.collect();
        // A connection that died completes its requests with errors;
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

    /// Wait for one request sent for a synchronous call.
    fn wait_for(&mut self, conn: usize, cookie: Cookie) -> Result<Completion, NbdError> {
        loop {
            self.collect();
            if let Some(at) = self
                .stray
                .iter()
                .position(|(c, done)| *c == conn && done.cookie == cookie)
            {
                return Ok(self.stray.swap_remove(at).1);
            }
            self.drive()?;
        }
    }

    /// Wait until no write is in flight; writes that cannot complete
    /// fail with the reason.
    fn settle_writes(&mut self) {
        while self.writes.in_flight() > 0 || self.writes.refused().next().is_some() {
            if let Err(e) = self.drive() {
                self.writes.fail_in_flight(&e);
            }
        }
    }

    /// The first failed write not yet reported, once; after that the end
    /// has failed and every write says so again (without detail).
    fn report(&mut self) -> Result<(), Errno> {
        if let Some(errno) = self.writes.reported() {
            return Err(errno);
        }
        if self.writes.failure().is_none() {
            return Ok(());
        }
        self.settle_writes();
        let error = self.writes.failure().cloned().expect("a failure");
        self.writes.mark_reported(error.errno);
        match self.writes.failure_offset() {
            Some(offset) => Err(self.fail_at(error, offset)),
            None => Err(self.fail(error)),
        }
    }

    /// Before writing: the reads planned may be stale now, and so may the
    /// extents.
    fn before_writing(&mut self) -> Result<(), Errno> {
        self.report()?;
        if self.info.read_only {
            return Err(self.fail(NbdError::new(
                Errno::ROFS,
                "the server exports it read-only",
            )));
        }
        self.reads.discard(&mut self.pool);
        self.extents.clear();
        Ok(())
    }

    /// Send `data` to `offset` through the window, in requests the server
    /// takes, waiting for room as the depth requires. Stops at the first
    /// failure (what is left is not sent: the prefix is what counts).
    fn submit_data(&mut self, data: &[u8], offset: u64) {
        let max = self.info.max_request;
        for (k, piece) in data.chunks(max).enumerate() {
            let at = offset + (k * max) as u64;
            if !self.room_for_one(at, piece.len() as u64) {
                return;
            }
            let mut buf = self.pool.take(piece.len());
            buf.as_mut_slice().copy_from_slice(piece);
            self.send_write(buf, at);
        }
    }

    /// Write `data` at `offset` and wait, straight from the caller's
    /// memory (no write may be in flight): a synchronous write need not
    /// copy into a buffer of the end's. A failure goes into the window
    /// as a write-behind failure would, for the caller to report.
    fn write_lent(&mut self, data: &[u8], offset: u64) {
        let max = self.info.max_request;
        for (k, piece) in data.chunks(max).enumerate() {
            let at = offset + (k * max) as u64;
            let conn = self.pick();
            if let Err(e) = self.conns[conn].transfer_now(Lent::Write(piece), at) {
                self.push_data(at, piece.len() as u64, writes::State::Failed(e));
                return;
            }
        }
    }

    /// Send `buf` to `at` as a write in the window (room made already).
    fn send_write(&mut self, buf: AlignedBuf, at: u64) {
        let len = buf.len() as u64;
        let state = match self.send(Direction::Write, buf, at) {
            Ok((conn, cookie)) => writes::State::InFlight { conn, cookie },
            Err(e) => writes::State::Failed(e),
        };
        self.push_data(at, len, state);
    }

    /// A data write of `len` bytes at `at` into the window, in `state`.
    fn push_data(&mut self, at: u64, len: u64, state: writes::State) {
        self.writes.push(Op {
            offset: at,
            len,
            kind: writes::NbdCommand::Data,
            state,
        });
    }

    /// Wait for a free place in the window for a request over `len` bytes
    /// at `offset`, and for the requests in flight over those bytes (the
    /// server would apply overlapping requests in any order); false once a
    /// write failed.
    fn room_for_one(&mut self, offset: u64, len: u64) -> bool {
        while self.writes.failure().is_none()
            && (self.writes.in_flight() >= self.depth() || self.writes.overlaps(offset, len))
        {
            if let Err(e) = self.drive() {
                self.writes.fail_in_flight(&e);
            }
        }
        self.writes.failure().is_none()
    }

    /// A zero or trim request for `len` bytes at the position, which must
    /// lie within the export.
    fn no_write_op(&mut self, len: u64, kind: writes::NbdCommand) -> Result<(), Errno> {
        self.before_writing()?;
        if len == 0 {
            return Ok(());
        }
        if self.pos >= self.info.size || len > self.info.size - self.pos {
            // Past the end the caller's own write gives GNU's short count
            // and ENOSPC.
            return Err(Errno::NOTSUP);
        }
        let start = self.pos;
        let mut at = start;
        while at < start + len {
            let n = (start + len - at).min(ZERO_MAX);
            if !self.room_for_one(at, n) {
                break;
            }
            let conn = self.pick();
            let sent = match kind {
                writes::NbdCommand::Zero { fast } => self.conns[conn].zero(n, at, fast),
                _ => self.conns[conn].trim(n, at),
            };
            let state = match sent {
                Ok(cookie) => writes::State::InFlight { conn, cookie },
                Err(e) => writes::State::Failed(e),
            };
            self.writes.push(Op {
                offset: at,
                len: n,
                kind,
                state,
            });
            at += n;
        }
        if self.hint.is_some() && !self.durable {
            self.deferred = true;
        } else {
            self.settle_writes();
            self.report()?;
            self.made_durable(Ok(()))?;
        }
        self.pos = start + len;
        Ok(())
    }

    /// Where `at`'s allocation run ends (before `horizon`) and whether it
    /// reads as zeros; asks the server when the map does not know.
    fn allocation(&mut self, at: u64, horizon: u64) -> (u64, bool) {
        if !self.extents_usable {
            return (horizon, false);
        }
        if self.extents.lookup(at).is_none() && self.learn_extents(at).is_err() {
            return (horizon, false);
        }
        match self.extents.lookup(at) {
            Some((end, zero)) => (end.min(horizon), zero),
            None => (horizon, false),
        }
    }

    /// Block status from `at` on into the map. A server that fails at it
    /// or answers nothing useful is not asked again.
    fn learn_extents(&mut self, at: u64) -> Result<(), Errno> {
        let len = (self.info.size - at).min(EXTENT_QUERY);
        let learnt = self.conns[0]
            .block_status(len, at)
            .and_then(|cookie| self.wait_for(0, cookie))
            .and_then(|done| done.result.map(|()| done.extents.unwrap_or_default()))
            .map(|extents| self.extents.learn(at, &extents, self.info.size));
        if learnt == Ok(true) {
            Ok(())
        } else {
            self.extents_usable = false;
            self.extents.clear();
            Err(Errno::NOTSUP)
        }
    }

    /// `read`'s work, into a slice or, where the next piece is whole, by
    /// exchanging buffers.
    fn read_into(&mut self, mut out: ReadInto<'_>) -> Result<usize, Errno> {
        self.settle_writes();
        let size = self.info.size;
        if out.len() == 0 || self.pos >= size {
            return Ok(0);
        }
        let start = self.pos;
        let want = (out.len() as u64).min(size - start) as usize;
        'attempt: loop {
            if self.reads.next_offset() != Some(start) && !self.reads.skip_to(start, &mut self.pool)
            {
                self.reads.restart(start, &mut self.pool);
            }
            // Inside a read-ahead piece that failed, reads are sent as the
            // caller asks for them, so that an error lands on the block GNU
            // dd's read(2) would have failed on, not on the whole piece.
            let exact = start < self.suspect_until;
            let (horizon, chunk) = match self.hint {
                Some(hint) if !exact => (size, hint.chunk as u64),
                _ => (start + want as u64, want as u64),
            };
            let mut filled = 0;
            while filled < want {
                self.plan(horizon, chunk);
                loop {
                    match self.reads.front() {
                        Some(Piece {
                            state: reads::State::InFlight { .. },
                            ..
                        }) => {
                            if let Err(e) = self.drive() {
                                self.reads.discard(&mut self.pool);
                                return Err(self.fail_at(e, start));
                            }
                        }
                        Some(Piece {
                            state: reads::State::Failed(e),
                            offset,
                            len,
                        }) => {
                            let (e, piece_start, piece_end) = (e.clone(), *offset, offset + len);
                            self.reads.discard(&mut self.pool);
                            if !exact && e.errno != Errno::NOTCONN && !lost(&e) {
                                self.suspect_until = piece_end;
                                continue 'attempt;
                            }
                            return Err(self.fail_at(e, piece_start.max(start)));
                        }
                        Some(_) => break,
                        None => {
                            return Err(self.fail(NbdError::new(
                                Errno::IO,
                                "read-ahead planned nothing at the position",
                            )))
                        }
                    }
                }
                debug_assert!(self.reads.front_left() > 0);
                filled += match &mut out {
                    ReadInto::Exchange(buf) => {
                        if filled == 0 && self.reads.exchange_front(buf, &mut self.pool) {
                            want
                        } else {
                            let rest = &mut buf.as_mut_slice()[filled..want];
                            self.reads.take_front(rest, &mut self.pool)
                        }
                    }
                    ReadInto::Slice(buf) => self
                        .reads
                        .take_front(&mut buf[filled..want], &mut self.pool),
                };
            }
            self.pos = start + want as u64;
            self.extents.forget_before(self.pos);
            if self.hint.is_some() {
                self.plan(horizon, chunk);
            }
            return Ok(want);
        }
    }

    /// Plan and send read-ahead up to `horizon`: pieces of `chunk` bytes
    /// at most, until `depth` pieces hold or await data.
    fn plan(&mut self, horizon: u64, chunk: u64) {
        while self.reads.data_pieces() < self.depth() {
            let Some(at) = self.reads.planned_until() else {
                return;
            };
            if at >= horizon {
                return;
            }
            let (end, zero) = self.allocation(at, horizon);
            if zero {
                self.reads.push(Piece {
                    offset: at,
                    len: end - at,
                    state: reads::State::Zeros,
                });
                continue;
            }
            let len = (end - at).min(chunk).min(self.info.max_request as u64);
            let buf = self.pool.take(len as usize);
            let state = match self.send(Direction::Read, buf, at) {
                Ok((conn, cookie)) => reads::State::InFlight { conn, cookie },
                Err(e) => reads::State::Failed(e),
            };
            self.reads.push(Piece {
                offset: at,
                len,
                state,
            });
        }
    }
}

impl End for NbdEnd {
    fn kind(&self) -> Kind {
        Kind::NbdExport
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            exchanges_buffers: true,
            ..Capabilities::of(Kind::NbdExport)
        }
    }

    /// Full requests until the end of the export, then 0. An error leaves
    /// the position at the start of the request (what was read ahead is
    /// given up: a retry asks the server again).
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        self.read_into(ReadInto::Slice(buf))
    }

    /// Where the next bytes are a whole read-ahead piece of `buf`'s
    /// length, the piece's buffer and `buf` change places.
    fn read_exchange(&mut self, buf: &mut AlignedBuf) -> Option<Result<usize, Errno>> {
        self.hint?;
        Some(self.read_into(ReadInto::Exchange(buf)))
    }

    /// Under write-behind, a whole buffer that fits in the export is sent
    /// as it is, and one of the pool's takes its place.
    fn write_exchange(&mut self, buf: &mut AlignedBuf) -> Option<Result<usize, Errno>> {
        let len = buf.len();
        let fits = self.pos < self.info.size && len as u64 <= self.info.size - self.pos;
        if self.hint.is_none() || self.durable || len == 0 || len > self.info.max_request || !fits {
            return None;
        }
        if let Err(errno) = self.before_writing() {
            return Some(Err(errno));
        }
        let start = self.pos;
        if self.room_for_one(start, len as u64) {
            let data = std::mem::replace(buf, self.pool.take(len));
            self.send_write(data, start);
        }
        self.deferred = true;
        self.pos = start + len as u64;
        Some(Ok(len))
    }

    /// Up to the end of the export: a write across it is written up to it
    /// (a short count), one at or past it fails with ENOSPC.
    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        let written = self.write_now(buf);
        self.made_durable(written)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        let target = match to {
            Whence::Start(at) => Some(at),
            Whence::Current(by) => self.pos.checked_add_signed(by),
            Whence::End(by) => self.info.size.checked_add_signed(by),
        };
        let target = target.ok_or(Errno::INVAL)?;
        if self.access == Access::Write && target > self.info.size {
            // An output export is a block device of its size: lseek(2)
            // past a device's end is EINVAL, so seek= past the end fails
            // as GNU dd fails on a device ("cannot seek"), and conv=sparse
            // falls back to writing, which meets ENOSPC at the end. An
            // input keeps a file's behaviour (skip= past the end warns),
            // as the issue asks of if=.
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
        if !self.extents_usable {
            return Err(Errno::NOTSUP);
        }
        self.settle_writes();
        let mut at = offset;
        loop {
            if at >= self.info.size {
                return Ok(None);
            }
            if self.extents.lookup(at).is_none() {
                self.learn_extents(at)?;
            }
            match self.extents.lookup(at) {
                Some((_, false)) => return Ok(Some(at)),
                Some((end, true)) => at = end,
                None => return Err(Errno::NOTSUP),
            }
        }
    }

    /// An export's size is fixed: like a block device it is never
    /// truncated. Nothing is sent and the call succeeds, so that the
    /// engine needs no case of its own (GNU dd ignores ftruncate's
    /// failure on anything but a regular file).
    fn truncate(&mut self, len: u64) -> Result<(), Errno> {
        let _ = len;
        Ok(())
    }

    /// An NBD flush (after every write in flight is acknowledged): one on
    /// the first connection covers all of them, which is what the
    /// server's multi-conn promises. A server that cannot flush has
    /// nothing to flush.
    fn sync(&mut self, data_only: bool) -> Result<(), Errno> {
        let _ = data_only;
        self.settle_writes();
        self.report()?;
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

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        self.settle_writes();
        let size = self.info.size;
        if buf.is_empty() || offset >= size {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(size - offset) as usize;
        let max = self.info.max_request;
        if want <= max {
            // One request: straight into the caller's memory.
            let conn = self.pick();
            return match self.conns[conn].transfer_now(Lent::Read(&mut buf[..want]), offset) {
                Ok(()) => Ok(want),
                Err(e) => Err(self.fail_at(e, offset)),
            };
        }
        let mut sent = Vec::new();
        for (k, piece) in buf[..want].chunks(max).enumerate() {
            let at = offset + (k * max) as u64;
            let buf = self.pool.take(piece.len());
            sent.push(self.send(Direction::Read, buf, at));
        }
        let mut first_error = None;
        for (k, request) in sent.into_iter().enumerate() {
            let done = request.and_then(|(conn, cookie)| self.wait_for(conn, cookie));
            let result = done.and_then(|done| {
                let buf_back = done.buffer;
                done.result.map(|()| buf_back)
            });
            match result {
                Ok(Some(data)) => {
                    let from = k * max;
                    buf[from..from + data.len()].copy_from_slice(data.as_slice());
                    self.pool.give(data);
                }
                Ok(None) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(self.fail_at(e, offset)),
            None => Ok(want),
        }
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        self.before_writing()?;
        self.settle_writes();
        self.report()?;
        if buf.is_empty() {
            return Ok(0);
        }
        if offset >= self.info.size {
            return Err(Errno::NOSPC);
        }
        let n = (buf.len() as u64).min(self.info.size - offset) as usize;
        self.write_lent(&buf[..n], offset);
        let written = match self.writes.failure_offset() {
            Some(at) if at > offset => Ok((at - offset) as usize),
            Some(_) => self.report().map(|()| 0),
            None => Ok(n),
        };
        self.made_durable(written)
    }

    /// Read ahead and write behind from now on, over more connections
    /// when the server allows multi-conn (a connection that cannot be
    /// made is done without).
    fn pipeline(&mut self, hint: Pipeline) {
        let hint = Pipeline {
            chunk: hint.chunk.max(1),
            depth: hint.depth.max(1),
            total: hint.total,
        };
        self.hint = Some(hint);
        self.pool.keep(2 * hint.depth + 2);
        if self.info.can_multi_conn {
            let wanted = self.max_connections.min(hint.depth);
            let more = wanted.saturating_sub(self.conns.len());
            self.conns.extend(connect_at_once(&self.uri, more));
        }
    }

    fn written_until(&self) -> Option<u64> {
        if self.deferred {
            self.writes.written_until()
        } else {
            None
        }
    }

    /// An NBD zero request, with fast-zero where the server offers it (a
    /// refused fast zero is sent again plain: it still saves sending the
    /// zeros). EOPNOTSUPP where the server cannot zero, or past the end
    /// of the export: the caller writes the zeros instead.
    fn write_zeroes(&mut self, len: u64) -> Result<(), Errno> {
        if !self.info.can_zero && !self.info.read_only {
            return Err(Errno::NOTSUP);
        }
        let fast = self.info.can_fast_zero;
        self.no_write_op(len, writes::NbdCommand::Zero { fast })
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    fn settle(&mut self) -> Result<(), Errno> {
        self.settle_writes();
        self.report()
    }

    /// Flushes nothing (conv=fsync is `sync`): waits for the writes in
    /// flight and reports a failure not reported yet, then disconnects.
    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        self.reads.discard(&mut self.pool);
        self.settle_writes();
        let reported = self.writes.reported().is_some();
        let result = match self.report() {
            Err(_) if reported => Ok(()),
            other => other,
        };
        for handle in &mut self.conns {
            handle.shutdown();
        }
        result
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

/// `count` more connections to `uri`, made at once: each costs the
/// handshake's round trips (a few on loopback, a quarter of a second at
/// 25 ms each way), which one after another would add up before the
/// copy starts. Those that cannot be made are done without.
fn connect_at_once(uri: &str, count: usize) -> Vec<Handle> {
    std::thread::scope(|scope| {
        let connecting: Vec<_> = (0..count)
            .map(|_| scope.spawn(|| Handle::connect(uri)))
            .collect();
        connecting
            .into_iter()
            .filter_map(|c| c.join().ok()?.ok())
            .collect()
    })
}
