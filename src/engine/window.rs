//! The window: an end as the copy's reader or writer sees it, with the
//! requests in flight that make it fast, for every kind of end.
//!
//! An end is a transport (`ends::transport`): it carries one request at
//! a time, or several at once, and says which through its capabilities
//! ([`Requests`]). The window owns everything around the requests:
//! which to send and when, their order, the position the stream's user
//! sees while the end's own lags behind it, the first failure (latched,
//! and reported at the next write, settle or close), buffer exchange
//! with the engine, and back-pressure. An end that does one request at a
//! time goes through the window untouched: each call is the end's own.
//!
//! **Reading ahead.** Where the copy's plan says (`Stream::pipeline`),
//! or by itself for an end that wants requests in flight whenever it is
//! read in order (`Requests::least` above one: a disk's command queue, a
//! store whose every request is a round trip), the window keeps pieces
//! of the end ahead of the position in flight, in offset order, and
//! hands out their bytes: a read of exactly a ready piece changes
//! buffers with the engine instead of copying ([`Stream::read_exchange`]).
//! Unasked, read-ahead starts once reads follow each other, in pieces
//! twice the run read so far (so that `count=` of a few records fetches
//! little more than it reads). Runs an end says read as zeros (NBD block
//! status) are not requested at all. A read that is not on whole units
//! of the end, or past its size, is the end's own, as without the
//! window.
//!
//! GNU's reads stay GNU's. A piece that fails is not the reader's error:
//! the window gives up what it read ahead and sends the read exactly as
//! asked (and every read after it inside the failed piece), so that an
//! error lands on the record GNU dd's read(2) fails on, with the end's
//! own words and, where the device named it, the first bad byte
//! ([`Stream::failed_at`]). A short piece is the end of the data: what
//! was read past it is given up.
//!
//! **Writing behind.** Under the same conditions a write is queued at its
//! offset (its buffer exchanged with one of the window's, or copied into
//! one) and returns; with as many in flight as the depth allows, or the
//! end busy, the window waits for a completion first. A write over
//! bytes that a request in flight is writing waits for it (the end may
//! carry out requests in any order). Completions come in any order: the
//! window retires requests from its front only, so
//! [`Stream::written_until`] is exactly "everything before this offset is
//! stored", and a failure stays at the front for good. A request the
//! device took only in part is sent again for its rest. An end that wants
//! its writes in requests of a size of its own (an upload's parts:
//! `End::request_len`) has them gathered, cut where the stream says a
//! unit ends when it marks resume points. Across a link (an end that says
//! what a round trip is worth), writes smaller than the plan's requests
//! (a pipe's pieces, in GNU's records) are gathered into whole ones while
//! each follows the last; anything that needs the end's writes done
//! (another write elsewhere, a read, a sync) sends them first.
//!
//! **Ownership.** A buffer handed to the end belongs to it until its
//! completion comes back (see `ends::transport`). Pieces given up while
//! in flight become orphans: their buffers come back to the pool when
//! their completions arrive. Close and sync wait for everything in
//! flight; abandon leaves it to the end, which frees nothing before its
//! own requests are done.

use std::collections::{HashSet, VecDeque};
use std::os::fd::BorrowedFd;

use crate::ends::transport::{Completion, Fault, Op, Request, Requests, Submitted};
use crate::ends::upload::{Journal, UploadRecord};
use crate::ends::{Capabilities, Discard, End, Kind, Whence};
use crate::engine::stream::{Pipeline, Stream};
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

/// The first piece read ahead when reads turn out to follow each other
/// without a plan; pieces then grow with the run.
const FIRST_UNASKED_PIECE: u64 = 1 << 20;

/// An end, seen through the window.
pub struct Window {
    end: Box<dyn End>,
    /// What the end can do, asked when the window was made.
    capabilities: Capabilities,
    requests: Requests,
    /// Where an end of a fixed size ends, once asked (see
    /// [`Window::fixed_size`]).
    size: Option<Option<u64>>,
    /// The copy's plan for this end, once it gave one.
    hint: Option<Pipeline>,
    /// [`Window::shape`], worked out whenever `hint` changes: a copy in
    /// GNU's records asks for it twice per record (whether the window is
    /// active, before each read and write), and working it out each time
    /// cost 38 instructions per record, 1.5% of a record loop's time.
    shaped: Option<Shape>,
    /// The position the stream's user sees; None until asked of the end.
    pos: Option<u64>,
    /// The end's own position is not `pos` (requests went at offsets).
    lagging: bool,
    reads: Reads,
    writes: Writes,
    /// Completions of requests no one waits for any more.
    orphans: HashSet<u64>,
    pool: Pool,
    next_id: u64,
    /// Words and place of the last failure, for `take_detail` and
    /// `failed_at`.
    detail: Option<String>,
    failed_at: Option<u64>,
}

/// Read-ahead: pieces in offset order from the position on.
#[derive(Default)]
struct Reads {
    pieces: VecDeque<Piece>,
    /// Bytes of the front piece handed out.
    used: u64,
    /// Where the next piece starts; None: not reading ahead.
    next: Option<u64>,
    /// Where reading ahead stops: the end's size when it began.
    limit: Option<u64>,
    /// Where the copy's reads end (its plan's total from where it
    /// began): past it, nothing is read ahead of the reader.
    stop: Option<u64>,
    /// Reads before this offset go to the end exactly as asked (a piece
    /// failed there).
    suspect_until: u64,
    /// Reads in a row without a plan: their bytes, and where they end.
    run: u64,
    run_end: u64,
}

struct Piece {
    id: u64,
    offset: u64,
    len: u64,
    state: PieceState,
}

enum PieceState {
    InFlight,
    /// Arrived: the buffer and the bytes it holds (fewer than `len` at
    /// the end of the data).
    Ready(AlignedBuf, u64),
    Failed,
    /// Reads as zeros: never requested.
    Zeros,
}

/// Write-behind: requests in the order they were sent.
#[derive(Default)]
struct Writes {
    sent: VecDeque<Sent>,
    /// The end of the last request retired from the front; None until a
    /// write went behind.
    stored_until: Option<u64>,
    /// A failure already reported: every later write says so again.
    reported: Option<Errno>,
    /// Bytes gathered for an upload's next part: where they start, and
    /// the buffer with the bytes so far.
    gathered: Option<Gathered>,
    /// The stream marks resume points: parts end only there.
    marked: bool,
}

struct Gathered {
    offset: u64,
    buf: AlignedBuf,
    filled: usize,
}

struct Sent {
    id: u64,
    op: Op,
    offset: u64,
    len: u64,
    /// Bytes the end stored of it so far.
    done: u64,
    /// Where in the request the bytes in flight start (its rest, sent
    /// again after the end took it in part).
    from: u64,
    state: SentState,
}

#[derive(Debug, PartialEq, Eq)]
enum SentState {
    InFlight,
    Done,
    Failed(Fault),
}

/// Buffers reused from request to request: fresh mappings cost page
/// faults on every megabyte moved.
#[derive(Default)]
struct Pool {
    spare: Vec<AlignedBuf>,
    keep: usize,
}

impl Pool {
    /// A buffer of exactly `len` bytes (contents unspecified). Out of
    /// memory ends the process, as a `Vec` would.
    fn take(&mut self, len: usize) -> AlignedBuf {
        let mut buf = match self.spare.iter().rposition(|b| b.capacity() >= len) {
            Some(at) => self.spare.swap_remove(at),
            None => AlignedBuf::new(len).unwrap_or_else(|_| {
                std::alloc::handle_alloc_error(
                    std::alloc::Layout::from_size_align(len.max(1), 4096).expect("a page layout"),
                )
            }),
        };
        buf.set_len(len);
        buf
    }

    fn give(&mut self, buf: AlignedBuf) {
        if self.spare.len() < self.keep.max(2) {
            self.spare.push(buf);
        }
    }
}

impl std::fmt::Debug for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("end", &self.end)
            .field("pos", &self.pos)
            .field("pieces", &self.reads.pieces.len())
            .field("writes", &self.writes.sent.len())
            .finish_non_exhaustive()
    }
}

/// Where a read's bytes go.
enum ReadInto<'a> {
    Slice(&'a mut [u8]),
    Exchange(&'a mut AlignedBuf),
}

impl ReadInto<'_> {
    fn len(&self) -> usize {
        match self {
            ReadInto::Slice(s) => s.len(),
            ReadInto::Exchange(b) => b.len(),
        }
    }

    fn bytes(&mut self) -> &mut [u8] {
        match self {
            ReadInto::Slice(s) => s,
            ReadInto::Exchange(b) => b.as_mut_slice(),
        }
    }

    fn reborrow(&mut self) -> ReadInto<'_> {
        match self {
            ReadInto::Slice(s) => ReadInto::Slice(s),
            ReadInto::Exchange(b) => ReadInto::Exchange(b),
        }
    }
}

/// Where a write's bytes come from.
enum WriteFrom<'a> {
    Slice(&'a [u8]),
    Exchange(&'a mut AlignedBuf),
}

impl WriteFrom<'_> {
    fn len(&self) -> usize {
        match self {
            WriteFrom::Slice(s) => s.len(),
            WriteFrom::Exchange(b) => b.len(),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            WriteFrom::Slice(s) => s,
            WriteFrom::Exchange(b) => b.as_slice(),
        }
    }

    fn reborrow(&mut self) -> WriteFrom<'_> {
        match self {
            WriteFrom::Slice(s) => WriteFrom::Slice(s),
            WriteFrom::Exchange(b) => WriteFrom::Exchange(b),
        }
    }
}

/// How many requests the window keeps in flight, and of how many bytes
/// (the largest, for writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    depth: usize,
    request: u64,
}

impl Window {
    /// `end` seen through a window; nothing is in flight until the end
    /// is read or written in order, or the copy's plan says.
    pub fn over(end: Box<dyn End>) -> Window {
        let capabilities = end.capabilities();
        let mut window = Window {
            end,
            capabilities,
            requests: capabilities.requests,
            size: None,
            hint: None,
            shaped: None,
            pos: None,
            lagging: false,
            reads: Reads::default(),
            writes: Writes::default(),
            orphans: HashSet::new(),
            pool: Pool::default(),
            next_id: 0,
            detail: None,
            failed_at: None,
        };
        window.shaped = window.work_out_shape();
        window
    }

    /// Where an end of a fixed size ends (a device, an export; not a
    /// file, which grows, nor an upload, which has no size until it is
    /// whole), asked once.
    fn fixed_size(&mut self) -> Option<u64> {
        if self.size.is_none() {
            let can = self.capabilities;
            let fixed = can.device || (can.served && can.writes_at);
            let size = match (fixed, self.end.size()) {
                (false, _) => None,
                (true, Ok(Some(size))) => Some(size),
                (true, _) => {
                    // A block device's size is where its end is; the
                    // position is brought back before the end is used.
                    let here = self.position().ok();
                    let end = self.end.seek(Whence::End(0)).ok();
                    self.lagging = here.is_some();
                    end
                }
            };
            self.size = Some(size);
        }
        self.size.flatten()
    }

    /// The end seen through this window, for what only it answers.
    pub fn end(&self) -> &dyn End {
        self.end.as_ref()
    }

    fn unit(&self) -> u64 {
        u64::from(self.requests.unit.max(1))
    }

    /// The requests kept in flight, where the window keeps any (worked
    /// out by [`Window::work_out_shape`]).
    fn shape(&self) -> Option<Shape> {
        self.shaped
    }

    /// The requests kept in flight, where the window keeps any: as the
    /// plan says, deeper where that would not carry the end's round trip
    /// of bytes, within what the end takes; for an end that wants some
    /// whenever it is used in order, its own.
    fn work_out_shape(&self) -> Option<Shape> {
        let r = self.requests;
        if !r.in_flight() {
            return None;
        }
        let unit = self.unit();
        let fit = |len: u64| {
            let len = len.max(r.min_len as u64).div_ceil(unit) * unit;
            len.min(r.max_len as u64 / unit * unit).max(unit)
        };
        match self.hint {
            Some(hint) => {
                let request = fit(hint.chunk as u64);
                let round_trip = (r.round_trip_bytes as u64).div_ceil(request) as usize;
                Some(Shape {
                    depth: hint.depth.max(round_trip).clamp(r.least.max(1), r.most),
                    request,
                })
            }
            None if r.least > 1 => Some(Shape {
                depth: r.least.min(r.most),
                request: fit(r.min_len as u64),
            }),
            None => None,
        }
    }

    /// Whether the window keeps requests in flight for this end. Where it
    /// does not, every call is the end's own: the window keeps no
    /// position, and a descriptor's read(2) may go around it.
    fn active(&self) -> bool {
        self.shape().is_some()
    }

    fn position(&mut self) -> Result<u64, Errno> {
        match self.pos {
            Some(pos) => Ok(pos),
            None => {
                let pos = self.end.seek(Whence::Current(0))?;
                self.pos = Some(pos);
                Ok(pos)
            }
        }
    }

    /// Bring the end's own position to the window's, before a call that
    /// uses it.
    fn catch_up(&mut self) -> Result<(), Errno> {
        if self.lagging {
            if let Some(pos) = self.pos {
                self.end.seek(Whence::Start(pos))?;
            }
            self.lagging = false;
        }
        Ok(())
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Hand `request` to the end; a request it completes at once is
    /// filed at once. Err: the end is busy (the request is given back).
    fn send(&mut self, request: Request) -> Result<(), Request> {
        match self.end.submit(request) {
            Submitted::InFlight => Ok(()),
            Submitted::Copied(buf) => {
                self.pool.give(buf);
                Ok(())
            }
            Submitted::Done(done) => {
                self.file(done);
                Ok(())
            }
            Submitted::Busy(request) => Err(request),
        }
    }

    /// File the completions the end already has, without waiting: what
    /// is stored (`written_until`, and an upload's journal, which records
    /// a part as its completion is filed) keeps up with the end, not only
    /// with the window's need of a free place for its next request.
    fn take_done(&mut self) {
        while let Some(done) = self.end.complete(false) {
            self.file(done);
        }
    }

    /// Wait for one completion and file it; false when nothing was in
    /// flight.
    fn reap(&mut self) -> bool {
        match self.end.complete(true) {
            Some(done) => {
                self.file(done);
                true
            }
            None => false,
        }
    }

    /// A completion, to the piece, write or orphan it belongs to.
    fn file(&mut self, done: Completion) {
        let Completion { id, result, buf } = done;
        if self.orphans.remove(&id) {
            if let Some(buf) = buf {
                self.pool.give(buf);
            }
            return;
        }
        if let Some(piece) = self.reads.pieces.iter_mut().find(|p| p.id == id) {
            piece.state = match (result, buf) {
                (Ok(n), Some(buf)) => PieceState::Ready(buf, n.min(piece.len)),
                (Ok(_), None) => PieceState::Failed,
                (Err(_), buf) => {
                    if let Some(buf) = buf {
                        self.pool.give(buf);
                    }
                    PieceState::Failed
                }
            };
            return;
        }
        let Some(at) = self.writes.sent.iter().position(|s| s.id == id) else {
            if let Some(buf) = buf {
                self.pool.give(buf);
            }
            return;
        };
        let sent = &mut self.writes.sent[at];
        match result {
            Ok(n) if sent.op == Op::Write && n == 0 => {
                sent.state = SentState::Failed(Fault::new(Errno::NOSPC));
            }
            Ok(n) if sent.op == Op::Write && n < sent.len - sent.done => {
                // Taken in part: the rest is sent again, at its own
                // offset, from the request's own bytes; where the end
                // kept fewer than the request (it took what fits before
                // its end), the rest fails as a short write(2) would.
                sent.done += n;
                let (offset, len) = (sent.offset + sent.done, sent.len - sent.done);
                let (held, from) = (sent.len - sent.from, (sent.done - sent.from) as usize);
                sent.from = sent.done;
                let rest = buf.and_then(|old| {
                    let kept = old.len() as u64 == held;
                    let rest = kept.then(|| {
                        let mut fresh = self.pool.take(len as usize);
                        fresh
                            .as_mut_slice()
                            .copy_from_slice(&old.as_slice()[from..]);
                        fresh
                    });
                    self.pool.give(old);
                    rest
                });
                let Some(rest) = rest else {
                    self.writes.sent[at].state = SentState::Failed(Fault::new(Errno::NOSPC));
                    self.retire();
                    return;
                };
                let id = self.id();
                self.writes.sent[at].id = id;
                let request = Request {
                    id,
                    op: Op::Write,
                    offset,
                    len,
                    buf: Some(rest),
                };
                if let Err(request) = self.send(request) {
                    // Busy: the rest cannot go now; it fails as a short
                    // write(2) would, at its first byte.
                    if let Some(buf) = request.buf {
                        self.pool.give(buf);
                    }
                    if let Some(sent) = self.writes.sent.iter_mut().find(|s| s.id == id) {
                        sent.state = SentState::Failed(Fault::new(Errno::NOSPC));
                    }
                }
                self.retire();
                return;
            }
            Ok(_) => {
                sent.done = sent.len;
                sent.state = SentState::Done;
            }
            Err(fault) => sent.state = SentState::Failed(fault),
        }
        if let Some(buf) = buf {
            self.pool.give(buf);
        }
        self.retire();
    }

    /// Retire the writes at the front that are done, in order.
    fn retire(&mut self) {
        while self
            .writes
            .sent
            .front()
            .is_some_and(|s| s.state == SentState::Done)
        {
            let sent = self.writes.sent.pop_front().expect("front");
            self.writes.stored_until = Some(sent.offset + sent.len);
        }
    }

    // ---- reading ----

    /// Give up every piece read ahead: those in flight become orphans.
    fn give_up_reads(&mut self) {
        while let Some(piece) = self.reads.pieces.pop_front() {
            self.let_go(piece);
        }
        self.reads.used = 0;
        self.reads.next = None;
    }

    fn let_go(&mut self, piece: Piece) {
        match piece.state {
            PieceState::InFlight => {
                self.orphans.insert(piece.id);
            }
            PieceState::Ready(buf, _) => self.pool.give(buf),
            PieceState::Failed | PieceState::Zeros => {}
        }
    }

    /// Whether a read of `len` bytes at `at` is served from pieces read
    /// ahead, and of which shape; None: the end reads it.
    fn reads_ahead(&mut self, at: u64, len: usize) -> Option<Shape> {
        let shape = self.shape()?;
        let unit = self.unit();
        if len == 0 || at % unit != 0 || len as u64 % unit != 0 || at < self.reads.suspect_until {
            return None;
        }
        if self.reads.pieces.is_empty() && self.reads.limit.is_some_and(|limit| at >= limit) {
            // Past the size it had: as the end reads it now.
            return None;
        }
        if self.hint.is_some() {
            return Some(shape);
        }
        // Unasked: once reads follow each other, in pieces twice the run
        // (within what the end takes), two at a time until they are as
        // large as the end wants them, then as many as it wants.
        if at != self.reads.run_end || self.reads.run == 0 {
            self.reads.run = len as u64;
            self.reads.run_end = at + len as u64;
            return None;
        }
        self.reads.run += len as u64;
        self.reads.run_end = at + len as u64;
        let full = shape.request;
        let grown = (self.reads.run * 2)
            .next_power_of_two()
            .clamp(FIRST_UNASKED_PIECE.min(full), full);
        let grown = (grown.div_ceil(unit) * unit).min(full);
        Some(Shape {
            depth: if grown < full {
                shape.depth.min(2)
            } else {
                shape.depth
            },
            request: grown,
        })
    }

    /// Keep the shape's depth of pieces in flight or ready from where the
    /// window stands, up to where reading ahead stops; past where the
    /// copy's reads end, only the piece a read `needs` now.
    fn fill(&mut self, shape: Shape, needs: bool) {
        let Some(mut at) = self.reads.next else {
            return;
        };
        let limit = self.reads.limit.unwrap_or(u64::MAX);
        let zero_runs = self.capabilities.extents && self.capabilities.served;
        loop {
            let data = self
                .reads
                .pieces
                .iter()
                .filter(|p| !matches!(p.state, PieceState::Zeros))
                .count();
            if data >= shape.depth || at >= limit {
                break;
            }
            // A copy of a few records fetches no more than it reads,
            // however deep the end's requests go; a reader that goes on
            // past its total is served a piece at a time.
            let stop = self.reads.stop.unwrap_or(u64::MAX);
            if at >= stop && (data > 0 || !needs) {
                break;
            }
            let mut len = shape.request.min(limit - at);
            if at < stop {
                len = len.min(stop - at);
            }
            if zero_runs {
                // A run that reads as zeros is not asked for.
                let zeros_until = match self.end.next_data(at) {
                    Ok(Some(data)) => data.min(limit),
                    Ok(None) => limit,
                    Err(_) => at,
                };
                if zeros_until > at {
                    self.reads.pieces.push_back(Piece {
                        id: 0,
                        offset: at,
                        len: zeros_until - at,
                        state: PieceState::Zeros,
                    });
                    at = zeros_until;
                    continue;
                }
                if let Ok(hole) = self.end.next_hole(at) {
                    if hole > at {
                        len = len.min(hole - at);
                    }
                }
            }
            let id = self.id();
            let buf = self.pool.take(len as usize);
            self.reads.pieces.push_back(Piece {
                id,
                offset: at,
                len,
                state: PieceState::InFlight,
            });
            let request = Request {
                id,
                op: Op::Read,
                offset: at,
                len,
                buf: Some(buf),
            };
            if let Err(request) = self.send(request) {
                // Busy: the pieces in flight are enough for now.
                self.reads.pieces.pop_back();
                if let Some(buf) = request.buf {
                    self.pool.give(buf);
                }
                break;
            }
            at += len;
        }
        self.reads.next = Some(at);
    }

    /// Stand at `at`: pieces before it are let go; a window that does not
    /// reach it starts again there.
    fn stand_at(&mut self, at: u64) {
        let standing = match self.reads.pieces.front() {
            Some(front) => Some(front.offset + self.reads.used),
            None => self.reads.next,
        };
        let ahead =
            standing.is_some_and(|s| s <= at) && self.reads.next.is_some_and(|next| at <= next);
        if !ahead {
            self.give_up_reads();
            if self.reads.limit.is_none() {
                self.reads.limit = self.end.size().ok().flatten();
                self.reads.stop = self
                    .hint
                    .and_then(|hint| hint.total)
                    .map(|total| at.saturating_add(total));
            }
            self.reads.next = Some(at);
            return;
        }
        while let Some(front) = self.reads.pieces.front() {
            if front.offset + front.len > at {
                self.reads.used = at - front.offset;
                return;
            }
            let piece = self.reads.pieces.pop_front().expect("front");
            self.let_go(piece);
            self.reads.used = 0;
        }
    }

    /// A read at `at` served from pieces, or None where the end is to
    /// read it itself. Moves nothing but the pieces.
    fn read_ahead_into(&mut self, mut out: ReadInto<'_>, at: u64) -> Option<Result<usize, Errno>> {
        let want = out.len();
        let shape = self.reads_ahead(at, want)?;
        self.pool.keep = 2 * shape.depth + 2;
        self.stand_at(at);
        let mut filled = 0usize;
        while filled < want {
            self.fill(shape, true);
            let Some(front) = self.reads.pieces.front() else {
                break;
            };
            match &front.state {
                PieceState::InFlight => {
                    if !self.reap() {
                        // Nothing in flight after all: the end reads it.
                        self.give_up_reads();
                        return None;
                    }
                }
                PieceState::Failed => {
                    // The end reads it as asked, and every read after it
                    // inside the failed piece too.
                    self.reads.suspect_until = front.offset + front.len;
                    self.give_up_reads();
                    return None;
                }
                PieceState::Zeros => {
                    let take = ((front.len - self.reads.used) as usize).min(want - filled);
                    out.bytes()[filled..filled + take].fill(0);
                    filled += take;
                    self.used_up(take as u64);
                }
                PieceState::Ready(_, n) => {
                    let (n, len) = (*n, front.len);
                    let whole = filled == 0 && self.reads.used == 0 && n == len && n == want as u64;
                    if let (true, ReadInto::Exchange(buf)) = (whole, &mut out) {
                        let piece = self.reads.pieces.pop_front().expect("front");
                        let PieceState::Ready(mut data, _) = piece.state else {
                            unreachable!("the front piece is ready");
                        };
                        std::mem::swap(*buf, &mut data);
                        self.pool.give(data);
                        filled = want;
                        break;
                    }
                    let from = self.reads.used as usize;
                    let take = (n as usize).saturating_sub(from).min(want - filled);
                    if let PieceState::Ready(data, _) = &self.reads.pieces[0].state {
                        out.bytes()[filled..filled + take]
                            .copy_from_slice(&data.as_slice()[from..from + take]);
                    }
                    filled += take;
                    if n < len && from + take >= n as usize {
                        // The end of the data: nothing is read past it.
                        self.give_up_reads();
                        self.reads.limit = Some(at + filled as u64);
                        break;
                    }
                    self.used_up(take as u64);
                }
            }
        }
        self.fill(shape, false);
        Some(Ok(filled))
    }

    /// `n` more bytes of the front piece are handed out.
    fn used_up(&mut self, n: u64) {
        self.reads.used += n;
        if let Some(front) = self.reads.pieces.front() {
            if self.reads.used >= front.len {
                let piece = self.reads.pieces.pop_front().expect("front");
                self.let_go(piece);
                self.reads.used = 0;
            }
        }
    }

    /// A read at the position, served from pieces or by the end.
    fn read_into(&mut self, mut out: ReadInto<'_>) -> Result<usize, Errno> {
        self.drain_quietly();
        let pos = self.position()?;
        if let Some(served) = self.read_ahead_into(out.reborrow(), pos) {
            let n = served?;
            self.pos = Some(pos + n as u64);
            self.lagging = true;
            return Ok(n);
        }
        self.give_up_reads();
        self.catch_up()?;
        self.failed_at = None;
        match self.end.read(out.bytes()) {
            Ok(n) => {
                self.pos = Some(pos + n as u64);
                Ok(n)
            }
            Err(errno) => {
                // The position stays before the record, as read(2)'s.
                self.failed_at = self.end.failed_at();
                self.pos = None;
                Err(errno)
            }
        }
    }

    // ---- writing ----

    /// Whether a write of `len` bytes at `at` goes behind, and of which
    /// shape; None: the end writes it itself. Not a write onto an end
    /// that cannot be written (its error is the end's, at once), nor one
    /// that reaches the end of an end of a fixed size (a device, an
    /// export): the end's own write gives GNU's short count there, and
    /// ENOSPC after it.
    fn writes_behind(&mut self, at: u64, len: usize) -> Option<Shape> {
        let shape = self.shape()?;
        let unit = self.unit();
        if len == 0 || at % unit != 0 || len as u64 % unit != 0 {
            return None;
        }
        if self.capabilities.read_only.is_some() {
            return None;
        }
        if self.fixed_size().is_some_and(|size| at + len as u64 > size) {
            return None;
        }
        Some(Shape {
            depth: shape.depth,
            request: self.requests.max_len as u64,
        })
    }

    /// The first failure among the writes, once: its errno, its words
    /// kept; after that every write says so again (`again`), while a sync
    /// or close, which GNU would see succeed having written nothing
    /// since, does not.
    fn write_failure(&mut self, again: bool) -> Result<(), Errno> {
        if let Some(errno) = self.writes.reported {
            return if again { Err(errno) } else { Ok(()) };
        }
        let failed = |sent: &VecDeque<Sent>| {
            sent.iter().find_map(|s| match &s.state {
                SentState::Failed(fault) => Some(fault.clone()),
                _ => None,
            })
        };
        if failed(&self.writes.sent).is_none() {
            return Ok(());
        }
        // What is stored before the failure is known exactly, and which
        // failure came first, once every request sent before it ended.
        self.wait_for_writes();
        let Some(fault) = failed(&self.writes.sent) else {
            return Ok(());
        };
        self.writes.reported = Some(fault.errno);
        // The end's own words, where it has any (a local device's errno
        // is GNU's whole message).
        if let Some(words) = &fault.words {
            self.detail = Some(words.clone());
        }
        self.failed_at = fault.at;
        Err(fault.errno)
    }

    /// Wait for every write in flight. A failure leaves the position
    /// where GNU would stand: at the start of the write that failed.
    fn wait_for_writes(&mut self) {
        if self.writes.gathered.is_some() && self.end.upload().is_none() {
            // Writes gathered for a link go first (an upload's part
            // waits to be whole: see `finalise`). A failure to send is
            // one already latched, which the caller reports.
            let depth = self.shape().map_or(1, |shape| shape.depth);
            let _ = self.send_gathered(depth);
        }
        while self
            .writes
            .sent
            .iter()
            .any(|s| s.state == SentState::InFlight)
        {
            if !self.reap() {
                // The end lost them: they fail.
                for sent in &mut self.writes.sent {
                    if sent.state == SentState::InFlight {
                        sent.state =
                            SentState::Failed(Fault::with_words(Errno::IO, "a request was lost"));
                    }
                }
            }
        }
        if let Some(front) = self.writes.sent.front() {
            self.pos = Some(front.offset + front.done);
            self.lagging = true;
        }
    }

    /// Wait for every write in flight, then report the first failure
    /// (see [`Window::write_failure`]).
    fn drain(&mut self, again: bool) -> Result<(), Errno> {
        self.wait_for_writes();
        self.write_failure(again)
    }

    /// Before a read: writes in flight end (a failure among them is the
    /// writes' to report).
    fn drain_quietly(&mut self) {
        if !self.writes.sent.is_empty() || self.writes.gathered.is_some() {
            self.wait_for_writes();
        }
    }

    /// Queue a request over `len` bytes at `offset` (`buf`'s bytes, or
    /// zeros), once fewer than the depth are in flight and none over
    /// those bytes.
    fn queue(
        &mut self,
        op: Op,
        offset: u64,
        len: u64,
        buf: Option<AlignedBuf>,
        depth: usize,
    ) -> Result<(), Errno> {
        loop {
            self.write_failure(true)?;
            let in_flight = self
                .writes
                .sent
                .iter()
                .filter(|s| s.state == SentState::InFlight)
                .count();
            let overlaps = self.writes.sent.iter().any(|s| {
                s.state == SentState::InFlight
                    && s.offset < offset + len
                    && offset < s.offset + s.len
            });
            if (in_flight < depth && !overlaps) || !self.reap() {
                break;
            }
        }
        if self.writes.stored_until.is_none() {
            self.writes.stored_until = Some(offset);
        }
        let id = self.id();
        self.writes.sent.push_back(Sent {
            id,
            op,
            offset,
            len,
            done: 0,
            from: 0,
            state: SentState::InFlight,
        });
        let mut request = Request {
            id,
            op,
            offset,
            len,
            buf,
        };
        loop {
            match self.send(request) {
                // A request the end failed at once fails this write.
                Ok(()) => return self.write_failure(true),
                Err(busy) => {
                    request = busy;
                    if !self.reap() {
                        // Busy with nothing in flight: it never will be
                        // free to take it.
                        if let Some(sent) = self.writes.sent.iter_mut().find(|s| s.id == id) {
                            sent.state = SentState::Failed(Fault::with_words(
                                Errno::IO,
                                "the end took no request with none in flight",
                            ));
                        }
                        return self.write_failure(true);
                    }
                }
            }
        }
    }

    /// Gather bytes into an upload's next part; a part is sent once
    /// whole (at a resume point, where the stream marks them).
    fn gather(&mut self, data: &[u8], at: u64, depth: usize) -> Result<(), Errno> {
        let mut rest = data;
        while !rest.is_empty() {
            if self.writes.gathered.is_none() {
                let want = self.part_len();
                let mut buf = self.pool.take(want);
                buf.set_len(want);
                let offset = at + (data.len() - rest.len()) as u64;
                self.writes.gathered = Some(Gathered {
                    offset,
                    buf,
                    filled: 0,
                });
            }
            let want = self.part_len();
            let marked = self.writes.marked;
            let gathered = self.writes.gathered.as_mut().expect("made above");
            let room = if marked {
                rest.len()
            } else {
                want.saturating_sub(gathered.filled).min(rest.len())
            };
            if gathered.filled + room > gathered.buf.len() {
                // A part that runs on to its resume point: more room.
                let mut bigger = AlignedBuf::new((gathered.filled + room).next_power_of_two())
                    .map_err(|_| Errno::NOMEM)?;
                bigger.as_mut_slice()[..gathered.filled]
                    .copy_from_slice(&gathered.buf.as_slice()[..gathered.filled]);
                gathered.buf = bigger;
            }
            gathered.buf.as_mut_slice()[gathered.filled..gathered.filled + room]
                .copy_from_slice(&rest[..room]);
            gathered.filled += room;
            rest = &rest[room..];
            if !marked && gathered.filled >= want {
                self.send_gathered(depth)?;
            }
        }
        Ok(())
    }

    /// The size of the upload's next part; for another end, of the
    /// plan's requests.
    fn part_len(&mut self) -> usize {
        let request = self
            .shape()
            .map_or(usize::MAX, |shape| shape.request as usize);
        self.end
            .upload()
            .map_or(request, |upload| upload.part_len())
    }

    /// Send what is gathered as one request.
    fn send_gathered(&mut self, depth: usize) -> Result<(), Errno> {
        let Some(Gathered {
            offset,
            mut buf,
            filled,
        }) = self.writes.gathered.take()
        else {
            return Ok(());
        };
        if filled == 0 {
            self.pool.give(buf);
            return Ok(());
        }
        buf.set_len(filled);
        self.queue(Op::Write, offset, filled as u64, Some(buf), depth)
    }

    /// A write at `at` queued behind, or None where the end is to write
    /// it itself.
    fn write_behind(&mut self, data: WriteFrom<'_>, at: u64) -> Option<Result<usize, Errno>> {
        let len = data.len();
        let shape = self.writes_behind(at, len)?;
        self.give_up_reads();
        self.pool.keep = shape.depth + 2;
        if self.end.upload().is_some() {
            // Parts the store holds are recorded as soon as it says so,
            // not once the window needs a place: a process killed then
            // loses only the parts still in flight. (Other ends need no
            // word before a failure or the end, when the window waits
            // for everything anyway.)
            self.take_done();
            if let Err(errno) = self.write_failure(true) {
                return Some(Err(errno));
            }
            return Some(self.gather(data.bytes(), at, shape.depth).map(|()| len));
        }
        if self.requests.round_trip_bytes > 0 {
            // Across a link, writes smaller than the plan's requests (a
            // pipe's, in GNU's records) are gathered into whole ones
            // while each follows the last: sent one by one, the depth of
            // them would carry too little over a round trip.
            let planned = self.shape().map_or(shape.request, |s| s.request);
            let follows = self
                .writes
                .gathered
                .as_ref()
                .map(|g| g.offset + g.filled as u64 == at);
            if follows.is_some_and(|follows| !follows || len as u64 >= planned) {
                if let Err(errno) = self.send_gathered(shape.depth) {
                    return Some(Err(errno));
                }
            }
            if (len as u64) < planned {
                return Some(self.gather(data.bytes(), at, shape.depth).map(|()| len));
            }
        }
        let result = match data {
            WriteFrom::Exchange(buf) if len as u64 <= shape.request => {
                let fresh = self.pool.take(len);
                let full = std::mem::replace(buf, fresh);
                self.queue(Op::Write, at, len as u64, Some(full), shape.depth)
            }
            other => {
                let bytes = other.bytes();
                let mut done = 0usize;
                let mut result = Ok(());
                while done < len && result.is_ok() {
                    let take = (len - done).min(shape.request as usize);
                    let mut buf = self.pool.take(take);
                    buf.as_mut_slice()
                        .copy_from_slice(&bytes[done..done + take]);
                    let offset = at + done as u64;
                    result = self.queue(Op::Write, offset, take as u64, Some(buf), shape.depth);
                    done += take;
                }
                result
            }
        };
        Some(result.map(|()| len))
    }

    fn write_from(&mut self, mut data: WriteFrom<'_>) -> Result<usize, Errno> {
        let pos = self.position()?;
        if let Some(result) = self.write_behind(data.reborrow(), pos) {
            let n = result?;
            self.pos = Some(pos + n as u64);
            self.lagging = true;
            return Ok(n);
        }
        self.drain(true)?;
        self.give_up_reads();
        self.catch_up()?;
        self.failed_at = None;
        let written = self.end.write(data.bytes());
        match written {
            Ok(n) => self.pos = Some(pos + n as u64),
            Err(_) => {
                self.pos = None;
                self.failed_at = self.end.failed_at();
            }
        }
        written
    }

    /// Wait for everything in flight (orphans too), before the end goes.
    fn quiesce(&mut self) {
        self.give_up_reads();
        while !self.orphans.is_empty()
            || self
                .writes
                .sent
                .iter()
                .any(|s| s.state == SentState::InFlight)
        {
            if !self.reap() {
                break;
            }
        }
        self.orphans.clear();
    }
}

impl Stream for Window {
    fn kind(&self) -> Kind {
        self.end.kind()
    }

    fn capabilities(&self) -> Capabilities {
        self.end.capabilities()
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.end.fd()
    }

    /// The end's, while nothing is in flight or read ahead: a read(2) or
    /// write(2) of the descriptor would go around them.
    fn plain_fd(&self) -> Option<BorrowedFd<'_>> {
        if self.active() {
            return None;
        }
        self.end.fd()
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        if !self.active() {
            return self.end.read(buf);
        }
        self.read_into(ReadInto::Slice(buf))
    }

    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        if !self.active() {
            return self.end.write(buf);
        }
        self.write_from(WriteFrom::Slice(buf))
    }

    fn read_exchange(&mut self, buf: &mut AlignedBuf) -> Option<Result<usize, Errno>> {
        self.shape()?;
        Some(self.read_into(ReadInto::Exchange(buf)))
    }

    fn write_exchange(&mut self, buf: &mut AlignedBuf) -> Option<Result<usize, Errno>> {
        if !self.active() {
            return None;
        }
        let pos = match self.position() {
            Ok(pos) => pos,
            Err(errno) => return Some(Err(errno)),
        };
        let n = match self.write_behind(WriteFrom::Exchange(buf), pos)? {
            Ok(n) => n,
            Err(errno) => return Some(Err(errno)),
        };
        self.pos = Some(pos + n as u64);
        self.lagging = true;
        Some(Ok(n))
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        if !self.active() {
            return self.end.seek(to);
        }
        let to = match (to, self.pos) {
            (Whence::Current(delta), Some(pos)) => {
                Whence::Start(pos.checked_add_signed(delta).ok_or(Errno::INVAL)?)
            }
            (to, _) => to,
        };
        if let (Some(gathered), Whence::Start(at)) = (&self.writes.gathered, to) {
            // An upload is written in order: only where its bytes end.
            if at == gathered.offset + gathered.filled as u64 {
                return Ok(at);
            }
        }
        if self.lagging && self.end.upload().is_some() && to == Whence::Start(self.pos.unwrap_or(0))
        {
            return Ok(self.pos.unwrap_or(0));
        }
        let at = self.end.seek(to)?;
        self.pos = Some(at);
        self.lagging = false;
        Ok(at)
    }

    fn size(&self) -> Result<Option<u64>, Errno> {
        self.end.size()
    }

    fn next_data(&mut self, offset: u64) -> Result<Option<u64>, Errno> {
        self.end.next_data(offset)
    }

    fn next_hole(&mut self, offset: u64) -> Result<u64, Errno> {
        self.end.next_hole(offset)
    }

    fn truncate(&mut self, len: u64) -> Result<(), Errno> {
        self.drain(false)?;
        self.end.truncate(len)
    }

    fn sync(&mut self, data_only: bool) -> Result<(), Errno> {
        self.drain(false)?;
        self.end.sync(data_only)
    }

    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        if !self.active() {
            return self.end.read_at(buf, offset);
        }
        self.drain_quietly();
        if let Some(served) = self.read_ahead_into(ReadInto::Slice(buf), offset) {
            return served;
        }
        self.give_up_reads();
        self.failed_at = None;
        let read = self.end.read_at(buf, offset);
        if read.is_err() {
            self.failed_at = self.end.failed_at();
        }
        read
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        if !self.active() {
            return self.end.write_at(buf, offset);
        }
        if self.end.upload().is_none() {
            if let Some(queued) = self.write_behind(WriteFrom::Slice(buf), offset) {
                return queued;
            }
        }
        self.drain(true)?;
        self.give_up_reads();
        self.failed_at = None;
        let written = self.end.write_at(buf, offset);
        if written.is_err() {
            self.failed_at = self.end.failed_at();
        }
        written
    }

    fn pipeline(&mut self, hint: Pipeline) {
        self.hint = Some(hint);
        self.shaped = self.work_out_shape();
        if let Some(upload) = self.end.upload() {
            upload.expect(hint.total);
        }
    }

    fn written_until(&self) -> Option<u64> {
        // A request taken in part counts its part (GNU counts it).
        self.writes
            .sent
            .front()
            .map(|s| s.offset + s.done)
            .or(self.writes.stored_until)
    }

    fn write_zeroes(&mut self, len: u64) -> Result<(), Errno> {
        if !self.active() {
            return self.end.write_zeroes(len);
        }
        let pos = self.position()?;
        let zero_requests = self.end.capabilities().discards == Some(Discard::ZeroRequests);
        let within = self
            .end
            .size()
            .ok()
            .flatten()
            .is_some_and(|size| pos.checked_add(len).is_some_and(|end| end <= size));
        if let (true, true, Some(shape)) = (zero_requests && len > 0, within, self.shape()) {
            self.give_up_reads();
            self.queue(Op::Zero, pos, len, None, shape.depth)?;
            self.pos = Some(pos + len);
            self.lagging = true;
            return Ok(());
        }
        self.drain(true)?;
        self.give_up_reads();
        self.catch_up()?;
        let zeroed = self.end.write_zeroes(len);
        self.pos = None;
        zeroed
    }

    fn settle(&mut self) -> Result<(), Errno> {
        self.drain(false)
    }

    fn failed_at(&self) -> Option<u64> {
        self.failed_at
    }

    fn logical_block(&self) -> Option<u32> {
        self.end.capabilities().block_addressed
    }

    fn describe(&self) -> Option<String> {
        self.end.describe()
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take().or_else(|| self.end.take_detail())
    }

    fn stored_as_written(&mut self) -> Option<Result<String, String>> {
        self.end.upload()?.stored_as_written()
    }

    fn finalise(&mut self, copy_failed: bool) -> Result<(), Errno> {
        if copy_failed {
            if let Some(gathered) = self.writes.gathered.take() {
                self.pool.give(gathered.buf);
            }
        } else if self.writes.gathered.is_some() {
            // The last part, whatever its size.
            if let Some(upload) = self.end.upload() {
                upload.ending();
            }
            let depth = self.shape().map_or(1, |shape| shape.depth);
            self.send_gathered(depth)?;
        }
        let drained = self.drain(false);
        if !copy_failed {
            drained?;
        }
        self.end.finalise(copy_failed)
    }

    fn keep_journal(
        &mut self,
        journal: Box<dyn Journal>,
        resume: Option<&UploadRecord>,
    ) -> Result<(), Errno> {
        match self.end.upload() {
            Some(upload) => upload.keep_journal(journal, resume),
            None => Err(Errno::NOTSUP),
        }
    }

    fn mark_resume_points(&mut self) -> bool {
        self.writes.marked = true;
        self.end
            .upload()
            .is_some_and(|upload| upload.mark_resume_points())
    }

    fn resume_point(&mut self, source: u64) {
        let Ok(pos) = self.position() else {
            return;
        };
        if let Some(upload) = self.end.upload() {
            upload.resume_point(pos, source);
        }
        let whole = self
            .writes
            .gathered
            .as_ref()
            .map(|gathered| gathered.filled);
        if let Some(filled) = whole {
            if filled >= self.part_len() {
                let depth = self.shape().map_or(1, |shape| shape.depth);
                // An error is kept for the next write, sync or close.
                let _ = self.send_gathered(depth);
            }
        }
    }

    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        let finalised = if self.writes.gathered.is_some() {
            self.finalise(false)
        } else {
            Ok(())
        };
        let drained = self.drain(false);
        self.quiesce();
        let closed = self.end.close();
        finalised.and(drained).and(closed)
    }

    fn close_failed(mut self: Box<Self>) -> Result<(), Errno> {
        if let Some(gathered) = self.writes.gathered.take() {
            self.pool.give(gathered.buf);
        }
        let _ = self.drain(false);
        self.quiesce();
        self.end.close_failed()
    }

    fn abandon(self: Box<Self>) {
        self.end.abandon()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ends::upload::Upload;
    use std::sync::{Arc, Mutex, MutexGuard};

    /// A store in memory that keeps requests in flight and completes them
    /// newest first (so out of order), with blocks that fail to read or
    /// write, writes it takes only in part, and the parts of an upload.
    #[derive(Debug, Default)]
    struct Lab {
        requests: Option<Requests>,
        in_flight: Vec<Request>,
        seen: Arc<Mutex<Seen>>,
        /// Offsets whose byte fails to read, or to write.
        bad_reads: Vec<u64>,
        bad_writes: Vec<u64>,
        /// A write request at this offset stores only half of itself.
        half_write_at: Option<u64>,
        failed_at: Option<u64>,
        pos: u64,
        /// An upload: its part size.
        part_len: Option<usize>,
        /// Requests are done once sent: complete(false) hands them back.
        done_at_once: bool,
    }

    /// What the test looks at after the fact.
    #[derive(Debug, Default)]
    struct Seen {
        data: Vec<u8>,
        submitted: Vec<(Op, u64, u64)>,
        most_in_flight: usize,
        /// An upload's resume points, and whether it was told the next
        /// part is the last.
        points: Vec<(u64, u64)>,
        ending: bool,
    }

    impl Lab {
        fn holding(data: Vec<u8>, requests: Requests) -> Lab {
            let lab = Lab {
                requests: Some(requests),
                ..Lab::default()
            };
            lab.seen().data = data;
            lab
        }

        fn seen(&self) -> MutexGuard<'_, Seen> {
            self.seen.lock().unwrap()
        }

        /// A window over it, and what it will have seen.
        fn window(self) -> (Window, Arc<Mutex<Seen>>) {
            let seen = Arc::clone(&self.seen);
            (Window::over(Box::new(self)), seen)
        }

        fn fails(bad: &[u64], offset: u64, len: u64) -> Option<u64> {
            bad.iter()
                .copied()
                .find(|&b| b >= offset && b < offset + len)
        }

        fn do_read(&self, buf: &mut [u8], offset: u64) -> Result<usize, Fault> {
            let len = buf.len() as u64;
            if let Some(bad) = Lab::fails(&self.bad_reads, offset, len) {
                return Err(Fault {
                    errno: Errno::IO,
                    words: Some(format!("bad byte at {bad}")),
                    at: Some(bad),
                });
            }
            let seen = self.seen();
            let end = (offset + len).min(seen.data.len() as u64);
            let n = end.saturating_sub(offset) as usize;
            buf[..n].copy_from_slice(&seen.data[offset as usize..offset as usize + n]);
            Ok(n)
        }

        fn do_write(&mut self, buf: &[u8], offset: u64) -> Result<usize, Fault> {
            if let Some(bad) = Lab::fails(&self.bad_writes, offset, buf.len() as u64) {
                return Err(Fault {
                    errno: Errno::IO,
                    words: Some(format!("write failed at {bad}")),
                    at: Some(bad),
                });
            }
            let end = offset as usize + buf.len();
            let mut seen = self.seen();
            if seen.data.len() < end {
                seen.data.resize(end, 0);
            }
            seen.data[offset as usize..end].copy_from_slice(buf);
            Ok(buf.len())
        }
    }

    impl End for Lab {
        fn kind(&self) -> Kind {
            Kind::Memory
        }
        fn capabilities(&self) -> Capabilities {
            Capabilities {
                requests: self.requests.unwrap_or(Requests::ONE_AT_A_TIME),
                ..Capabilities::of(Kind::Memory)
            }
        }
        fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
            let n = self.read_at(buf, self.pos)?;
            self.pos += n as u64;
            Ok(n)
        }
        fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
            let n = self.write_at(buf, self.pos)?;
            self.pos += n as u64;
            Ok(n)
        }
        fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
            self.pos = match to {
                Whence::Start(at) => at,
                Whence::Current(by) => self.pos.checked_add_signed(by).ok_or(Errno::INVAL)?,
                Whence::End(by) => (self.seen().data.len() as u64)
                    .checked_add_signed(by)
                    .ok_or(Errno::INVAL)?,
            };
            Ok(self.pos)
        }
        fn size(&self) -> Result<Option<u64>, Errno> {
            Ok(Some(self.seen().data.len() as u64))
        }
        fn sync(&mut self, _: bool) -> Result<(), Errno> {
            Ok(())
        }
        fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
            self.do_read(buf, offset).map_err(|fault| {
                self.failed_at = fault.at;
                fault.errno
            })
        }
        fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
            self.do_write(buf, offset).map_err(|f| f.errno)
        }
        fn failed_at(&self) -> Option<u64> {
            self.failed_at
        }
        fn submit(&mut self, request: Request) -> Submitted {
            let most = self.requests.map_or(1, |r| r.most);
            if most <= 1 {
                return crate::ends::at_once(self, request);
            }
            if self.in_flight.len() >= most {
                return Submitted::Busy(request);
            }
            self.in_flight.push(request);
            let mut seen = self.seen();
            let request = self.in_flight.last().expect("pushed");
            seen.submitted
                .push((request.op, request.offset, request.len));
            seen.most_in_flight = seen.most_in_flight.max(self.in_flight.len());
            Submitted::InFlight
        }
        /// Requests complete when waited for (or at once, where the lab
        /// says), the last sent first.
        fn complete(&mut self, wait: bool) -> Option<Completion> {
            if !wait && !self.done_at_once {
                return None;
            }
            let Request {
                id,
                op,
                offset,
                len,
                buf,
            } = self.in_flight.pop()?;
            let mut buf = buf;
            let result = match (op, buf.as_mut()) {
                (Op::Read, Some(buf)) => {
                    self.do_read(&mut buf.as_mut_slice()[..len as usize], offset)
                }
                (Op::Write, Some(buf)) => {
                    let mut take = len as usize;
                    if self.half_write_at == Some(offset) {
                        self.half_write_at = None;
                        take /= 2;
                    }
                    let bytes = buf.as_slice()[..take].to_vec();
                    self.do_write(&bytes, offset)
                }
                _ => Err(Fault::new(Errno::NOTSUP)),
            };
            Some(Completion {
                id,
                result: result.map(|n| n as u64),
                buf,
            })
        }
        fn upload(&mut self) -> Option<&mut dyn Upload> {
            if self.part_len.is_some() {
                Some(self)
            } else {
                None
            }
        }
        fn close(self: Box<Self>) -> Result<(), Errno> {
            Ok(())
        }
    }

    impl Upload for Lab {
        fn expect(&mut self, _total: Option<u64>) {}
        fn part_len(&self) -> usize {
            self.part_len.expect("an upload")
        }
        fn ending(&mut self) {
            self.seen().ending = true;
        }
        fn keep_journal(
            &mut self,
            _: Box<dyn Journal>,
            _: Option<&UploadRecord>,
        ) -> Result<(), Errno> {
            Ok(())
        }
        fn mark_resume_points(&mut self) -> bool {
            false
        }
        fn resume_point(&mut self, at: u64, source: u64) {
            self.seen().points.push((at, source));
        }
    }

    fn in_flight(most: usize, least: usize, unit: u32) -> Requests {
        Requests {
            most,
            least,
            unit,
            ..Requests::ONE_AT_A_TIME
        }
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    fn hint(chunk: usize, depth: usize) -> Pipeline {
        Pipeline {
            chunk,
            depth,
            total: None,
        }
    }

    fn read_all(window: &mut Window, bs: usize) -> Vec<u8> {
        let mut all = Vec::new();
        let mut buf = vec![0; bs];
        loop {
            let n = window.read(&mut buf).expect("read");
            if n == 0 {
                return all;
            }
            all.extend_from_slice(&buf[..n]);
        }
    }

    #[test]
    fn reads_ahead_give_the_ends_bytes_whatever_the_read_size() {
        let data = pattern(300_000);
        for bs in [1usize, 512, 1000, 4096, 65_536, 100_000] {
            for planned in [false, true] {
                let (mut window, seen) = Lab::holding(data.clone(), in_flight(8, 1, 1)).window();
                if planned {
                    window.pipeline(hint(16_384, 4));
                }
                assert!(
                    read_all(&mut window, bs) == data,
                    "bs={bs} planned={planned}"
                );
                let sent = seen.lock().unwrap().submitted.len();
                assert_eq!(sent > 0, planned, "bs={bs}: requests only where planned");
            }
        }
    }

    #[test]
    fn an_end_that_wants_requests_in_flight_reads_ahead_once_reads_follow_each_other() {
        let data = pattern(4 << 20);
        let (mut window, seen) = Lab::holding(data.clone(), in_flight(8, 4, 1)).window();
        let mut buf = vec![0; 512];
        // One read alone: the end's own, nothing read ahead of it.
        window.seek(Whence::Start(1 << 20)).unwrap();
        assert_eq!(window.read(&mut buf), Ok(512));
        assert!(seen.lock().unwrap().submitted.is_empty());
        assert_eq!(buf, data[1 << 20..(1 << 20) + 512]);
        // Reads that follow it: read ahead, the same bytes.
        let rest = read_all(&mut window, 512);
        assert!(rest == data[(1 << 20) + 512..]);
        assert!(!seen.lock().unwrap().submitted.is_empty());
    }

    #[test]
    fn a_few_records_read_unasked_fetch_little_more_than_they_read() {
        let data = pattern(64 << 20);
        // A store: at least 16 ranges of 8 MiB wanted in flight.
        let store = Requests {
            most: 32,
            least: 16,
            min_len: 8 << 20,
            ..Requests::ONE_AT_A_TIME
        };
        let (mut window, seen) = Lab::holding(data.clone(), store).window();
        let mut buf = vec![0; 512];
        for record in 0..3 {
            assert_eq!(window.read(&mut buf), Ok(512));
            assert_eq!(buf, data[record * 512..(record + 1) * 512]);
        }
        let asked: u64 = seen.lock().unwrap().submitted.iter().map(|r| r.2).sum();
        assert!(
            asked <= 2 << 20,
            "three records asked for {asked} bytes ahead"
        );
        // A disk whose commands carry 256 KiB at most: no piece larger.
        let disk = Requests {
            most: 8,
            least: 8,
            unit: 512,
            min_len: 256 << 10,
            max_len: 256 << 10,
            ..Requests::ONE_AT_A_TIME
        };
        let (mut window, seen) = Lab::holding(data.clone(), disk).window();
        assert!(read_all(&mut window, 64 << 10) == data);
        let largest = seen.lock().unwrap().submitted.iter().map(|r| r.2).max();
        assert_eq!(largest, Some(256 << 10));
    }

    #[test]
    fn a_read_over_a_failed_piece_fails_only_the_records_over_the_bad_byte() {
        let data = pattern(64 * 1024);
        let mut lab = Lab::holding(data.clone(), in_flight(8, 1, 1));
        lab.bad_reads = vec![9 * 512 + 3];
        let (mut window, _) = lab.window();
        window.pipeline(hint(8192, 4));
        let mut buf = vec![0; 1024];
        let mut failed = Vec::new();
        for record in 0..64 {
            match window.read(&mut buf) {
                Ok(n) => {
                    assert_eq!(n, 1024);
                    assert_eq!(buf, data[record * 1024..(record + 1) * 1024]);
                }
                Err(errno) => {
                    assert_eq!(errno, Errno::IO);
                    assert_eq!(window.failed_at(), Some(9 * 512 + 3));
                    failed.push(record);
                    window.seek(Whence::Current(1024)).unwrap();
                }
            }
        }
        assert_eq!(failed, vec![4], "only the record holding the bad byte");
    }

    #[test]
    fn whole_pieces_change_places_with_the_engines_buffers() {
        let data = pattern(64 * 1024);
        let (mut window, _) = Lab::holding(data.clone(), in_flight(8, 1, 1)).window();
        window.pipeline(hint(8192, 4));
        let mut held = Vec::new();
        for piece in 0..8 {
            let mut buf = AlignedBuf::new(8192).unwrap();
            let given = buf.as_slice().as_ptr();
            assert_eq!(window.read_exchange(&mut buf), Some(Ok(8192)));
            assert_ne!(buf.as_slice().as_ptr(), given, "piece {piece}: exchanged");
            held.push(buf);
        }
        for (piece, buf) in held.iter().enumerate() {
            assert_eq!(buf.as_slice(), &data[piece * 8192..(piece + 1) * 8192]);
        }
        // Half a piece: copied.
        window.seek(Whence::Start(100)).unwrap();
        let mut buf = AlignedBuf::new(4096).unwrap();
        let given = buf.as_slice().as_ptr();
        assert_eq!(window.read_exchange(&mut buf), Some(Ok(4096)));
        assert_eq!(buf.as_slice().as_ptr(), given, "copied, not exchanged");
        assert_eq!(buf.as_slice(), &data[100..4196]);
    }

    #[test]
    fn small_writes_across_a_link_go_in_whole_requests_while_they_follow_one_another() {
        let requests = Requests {
            round_trip_bytes: 1 << 20,
            ..in_flight(8, 1, 1)
        };
        let (mut window, seen) = Lab::holding(Vec::new(), requests).window();
        window.pipeline(hint(4096, 4));
        let data = pattern(10 * 4096);
        for piece in data.chunks(1000) {
            assert_eq!(window.write(piece), Ok(piece.len()));
        }
        // Read back before anything settled: what was gathered is sent
        // first.
        window.seek(Whence::Start(0)).unwrap();
        assert!(read_all(&mut window, 4096) == data);
        let writes = |seen: &Seen| -> Vec<(u64, u64)> {
            seen.submitted
                .iter()
                .filter(|(op, _, _)| *op == Op::Write)
                .map(|&(_, offset, len)| (offset, len))
                .collect()
        };
        let whole: Vec<(u64, u64)> = (0..10).map(|k| (k * 4096, 4096)).collect();
        assert_eq!(writes(&seen.lock().unwrap()), whole);
        // A write elsewhere sends what was gathered before it.
        window.seek(Whence::Start(20 * 4096)).unwrap();
        assert_eq!(window.write(&[1; 100]), Ok(100));
        window.seek(Whence::Start(30 * 4096)).unwrap();
        assert_eq!(window.write(&[2; 100]), Ok(100));
        window.settle().unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(writes(&seen)[10..], [(20 * 4096, 100), (30 * 4096, 100)]);
        assert_eq!(seen.data[20 * 4096..20 * 4096 + 100], [1; 100]);
        assert_eq!(seen.data[30 * 4096..], [2; 100]);
    }

    #[test]
    fn writes_behind_are_stored_in_order_and_the_stored_prefix_is_exact() {
        let data = pattern(40 * 4096);
        let (mut window, seen) = Lab::holding(Vec::new(), in_flight(4, 1, 512)).window();
        window.pipeline(hint(4096, 4));
        for block in data.chunks(4096) {
            assert_eq!(window.write(block), Ok(4096));
        }
        assert!(
            window.written_until() < Some(40 * 4096),
            "some still in flight"
        );
        window.settle().unwrap();
        assert_eq!(window.written_until(), Some(40 * 4096));
        assert!(seen.lock().unwrap().data == data);
        // A write of no whole sectors goes to the end itself, in order.
        assert_eq!(window.write(b"tail"), Ok(4));
        assert_eq!(&seen.lock().unwrap().data[40 * 4096..], b"tail");
    }

    #[test]
    fn a_failed_write_behind_is_reported_once_with_what_was_stored_before_it() {
        let mut lab = Lab::holding(Vec::new(), in_flight(4, 1, 1));
        lab.bad_writes = vec![10 * 4096 + 7];
        let (mut window, _) = lab.window();
        window.pipeline(hint(4096, 4));
        let block = [7u8; 4096];
        let mut failed = None;
        for _ in 0..16 {
            if let Err(errno) = window.write(&block) {
                failed = Some(errno);
                break;
            }
        }
        let failed = failed.or_else(|| window.settle().err());
        assert_eq!(failed, Some(Errno::IO));
        assert_eq!(
            window.take_detail().as_deref(),
            Some(format!("write failed at {}", 10 * 4096 + 7).as_str())
        );
        assert_eq!(window.written_until(), Some(10 * 4096), "blocks 0-9 stored");
        assert_eq!(window.settle(), Ok(()), "reported once");
        assert_eq!(
            window.write(&block),
            Err(Errno::IO),
            "every write after fails"
        );
    }

    #[test]
    fn a_write_taken_in_part_is_sent_again_for_its_rest() {
        let data = pattern(8 * 4096);
        let mut lab = Lab::holding(Vec::new(), in_flight(4, 1, 1));
        lab.half_write_at = Some(2 * 4096);
        let (mut window, seen) = lab.window();
        window.pipeline(hint(4096, 4));
        for block in data.chunks(4096) {
            assert_eq!(window.write(block), Ok(4096));
        }
        window.settle().unwrap();
        assert_eq!(window.written_until(), Some(8 * 4096));
        let seen = seen.lock().unwrap();
        assert!(seen.data == data);
        let sent = &seen.submitted;
        assert!(
            sent.contains(&(Op::Write, 2 * 4096 + 2048, 2048)),
            "the rest: {sent:?}"
        );
    }

    #[test]
    fn whole_buffers_written_behind_go_as_they_are() {
        let data = pattern(8 * 8192);
        let (mut window, seen) = Lab::holding(Vec::new(), in_flight(4, 1, 1)).window();
        window.pipeline(hint(8192, 4));
        for piece in data.chunks(8192) {
            let mut buf = AlignedBuf::new(8192).unwrap();
            buf.as_mut_slice().copy_from_slice(piece);
            let given = buf.as_slice().as_ptr();
            assert_eq!(window.write_exchange(&mut buf), Some(Ok(8192)));
            assert_ne!(
                buf.as_slice().as_ptr(),
                given,
                "another buffer in its place"
            );
            // The engine fills what it got for its next write.
            buf.as_mut_slice().fill(0xaa);
        }
        window.settle().unwrap();
        assert!(seen.lock().unwrap().data == data);
    }

    #[test]
    fn an_end_of_one_request_at_a_time_is_never_sent_requests() {
        let data = pattern(100_000);
        let (mut window, seen) = Lab::holding(data.clone(), Requests::ONE_AT_A_TIME).window();
        window.pipeline(hint(8192, 8));
        assert!(read_all(&mut window, 4096) == data);
        window.seek(Whence::Start(0)).unwrap();
        assert_eq!(window.write(&[1; 4096]), Ok(4096));
        assert_eq!(window.written_until(), None, "nothing was deferred");
        assert!(seen.lock().unwrap().submitted.is_empty());
    }

    #[test]
    fn an_upload_gets_whole_parts_cut_at_resume_points_and_its_last_part_at_the_end() {
        let data = pattern(100_000);
        let mut lab = Lab::holding(Vec::new(), in_flight(4, 4, 1));
        lab.part_len = Some(30_000);
        let (mut window, seen) = lab.window();
        for piece in data.chunks(7_000) {
            assert_eq!(window.write(piece), Ok(piece.len()));
        }
        window.finalise(false).unwrap();
        let seen = seen.lock().unwrap();
        let parts: Vec<u64> = seen.submitted.iter().map(|&(_, _, len)| len).collect();
        assert_eq!(parts, [30_000, 30_000, 30_000, 10_000]);
        assert!(seen.ending, "told before its last part");
        assert!(seen.data == data);

        // Marked: parts end only where the stream says a unit ends.
        let mut marked = Lab::holding(Vec::new(), in_flight(4, 4, 1));
        marked.part_len = Some(30_000);
        let (mut window, seen) = marked.window();
        window.mark_resume_points();
        for (k, piece) in data.chunks(25_000).enumerate() {
            assert_eq!(window.write(piece), Ok(piece.len()));
            window.resume_point((k as u64 + 1) * 1000);
        }
        window.finalise(false).unwrap();
        let seen = seen.lock().unwrap();
        let parts: Vec<u64> = seen.submitted.iter().map(|&(_, _, len)| len).collect();
        assert_eq!(parts, [50_000, 50_000]);
        assert_eq!(seen.points[1], (50_000, 2000));
    }

    #[test]
    fn a_busy_end_holds_the_writer_back_and_loses_nothing() {
        let data = pattern(64 * 4096);
        let (mut window, seen) = Lab::holding(Vec::new(), in_flight(2, 1, 1)).window();
        window.pipeline(hint(4096, 16));
        for block in data.chunks(4096) {
            assert_eq!(window.write(block), Ok(4096));
        }
        window.settle().unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.most_in_flight, 2, "as many as the end takes");
        assert!(seen.data == data);
    }

    #[test]
    fn reading_ahead_stops_where_the_copy_does() {
        let data = pattern(1 << 20);
        let (mut window, seen) = Lab::holding(data.clone(), in_flight(16, 1, 1)).window();
        window.seek(Whence::Start(4096)).unwrap();
        window.pipeline(Pipeline {
            chunk: 16_384,
            depth: 16,
            total: Some(100_000),
        });
        let mut buf = vec![0; 10_000];
        for k in 0..10 {
            assert_eq!(window.read(&mut buf), Ok(10_000));
            let at = 4096 + k * 10_000;
            assert!(buf == data[at..at + 10_000]);
        }
        let end = |seen: &Arc<Mutex<Seen>>| {
            let seen = seen.lock().unwrap();
            seen.submitted.iter().map(|&(_, at, len)| at + len).max()
        };
        assert_eq!(end(&seen), Some(104_096));
        // A reader that goes on past it still gets the end's bytes, read
        // a piece at a time.
        for k in 0..3 {
            assert_eq!(window.read(&mut buf), Ok(10_000));
            let at = 104_096 + k * 10_000;
            assert!(buf == data[at..at + 10_000]);
        }
        assert!(end(&seen) < Some(104_096 + 3 * 16_384 + 1));
    }

    #[test]
    fn parts_the_store_holds_count_as_stored_at_the_next_write() {
        let data = pattern(4 * 4096);
        let mut lab = Lab::holding(Vec::new(), in_flight(8, 1, 1));
        lab.part_len = Some(4096);
        lab.done_at_once = true;
        let (mut window, seen) = lab.window();
        window.pipeline(hint(4096, 8));
        for (k, block) in data.chunks(4096).enumerate() {
            assert_eq!(window.write(block), Ok(4096));
            // Each write files the parts the store finished before it,
            // without waiting for the depth to fill.
            assert_eq!(window.written_until(), Some(k as u64 * 4096));
        }
        window.finalise(false).unwrap();
        assert_eq!(window.written_until(), Some(data.len() as u64));
        assert!(seen.lock().unwrap().data == data);
    }

    #[test]
    fn small_requests_go_as_deep_as_the_ends_round_trip_of_bytes() {
        let data = pattern(256 * 4096);
        // An end over a link: 64 KiB worth keeping in flight, 32 requests
        // at most; the plan asks for 2 in flight.
        let link = Requests {
            round_trip_bytes: 64 << 10,
            ..in_flight(32, 1, 1)
        };
        for (chunk, deepest) in [(1024, 32), (4096, 16), (16_384, 4), (65_536, 2)] {
            let (mut window, seen) = Lab::holding(Vec::new(), link).window();
            window.pipeline(hint(chunk, 2));
            for block in data.chunks(chunk) {
                assert_eq!(window.write(block), Ok(chunk));
            }
            window.settle().unwrap();
            let seen = seen.lock().unwrap();
            assert_eq!(seen.most_in_flight, deepest, "writes of {chunk}");
            assert!(seen.data == data);

            let (mut window, seen) = Lab::holding(data.clone(), link).window();
            window.pipeline(hint(chunk, 2));
            assert!(read_all(&mut window, chunk) == data);
            assert_eq!(
                seen.lock().unwrap().most_in_flight,
                deepest,
                "reads of {chunk}"
            );
        }
    }

    /// A disk in memory behind its generic node's command queue, seen
    /// through the window as the copy sees it.
    mod passthrough {
        use super::*;
        use crate::ends::generic_node::testing::{end, pattern, MemoryDisk};
        use crate::ends::generic_node::GenericNodeEnd;
        use crate::sys::passthrough::{CommandError, CommandQueue, Geometry, Interface, Op};

        fn window(end: GenericNodeEnd) -> Window {
            Window::over(Box::new(end))
        }

        #[test]
        fn a_large_piece_that_fails_fails_only_the_records_over_the_bad_block() {
            let data = pattern(64 * 512);
            let mut e = window(end(data.clone(), vec![9]));
            e.pipeline(Pipeline {
                chunk: 8192,
                depth: 1,
                total: None,
            });
            let mut buf = vec![0u8; 1024];
            let mut failed = Vec::new();
            for record in 0..32 {
                match e.read(&mut buf) {
                    Ok(n) => {
                        assert_eq!(n, 1024);
                        assert_eq!(buf, data[record * 1024..(record + 1) * 1024]);
                    }
                    Err(_) => {
                        failed.push(record);
                        e.seek(Whence::Current(1024)).unwrap();
                    }
                }
            }
            assert_eq!(failed, vec![4], "only the record holding block 9");
        }

        fn whole_pieces(e: &mut Window) {
            e.pipeline(Pipeline {
                chunk: 8192,
                depth: 4,
                total: None,
            });
        }

        #[test]
        fn whole_pieces_change_hands_and_are_not_reused_while_held() {
            let data = pattern(64 * 512);
            let mut e = window(end(data.clone(), vec![]));
            whole_pieces(&mut e);
            let mut held = Vec::new();
            for piece in 0..4 {
                let mut buf = AlignedBuf::new(8192).unwrap();
                let given = buf.as_slice().as_ptr();
                assert_eq!(e.read_exchange(&mut buf), Some(Ok(8192)));
                assert_ne!(buf.as_slice().as_ptr(), given, "piece {piece}: exchanged");
                assert_eq!(buf.len(), 8192);
                held.push(buf);
            }
            // Every piece the engine holds still has its bytes: the slots
            // read on into the buffers they were given in exchange.
            for (piece, buf) in held.iter().enumerate() {
                assert_eq!(buf.as_slice(), &data[piece * 8192..(piece + 1) * 8192]);
            }
            // A read that is not one whole piece is copied.
            e.seek(Whence::Start(100)).unwrap();
            let mut buf = AlignedBuf::new(8192).unwrap();
            let given = buf.as_slice().as_ptr();
            assert_eq!(e.read_exchange(&mut buf), Some(Ok(8192)));
            assert_eq!(buf.as_slice().as_ptr(), given, "copied, not exchanged");
            assert_eq!(buf.as_slice(), &data[100..8292]);
        }

        #[test]
        fn a_failed_piece_read_whole_still_fails_only_its_own_record() {
            let data = pattern(64 * 512);
            let mut e = window(end(data.clone(), vec![9]));
            whole_pieces(&mut e);
            let mut buf = AlignedBuf::new(8192).unwrap();
            // Blocks 0-15: the piece fails (block 9); the read of it fails
            // with the block named, as read_exact found it.
            assert_eq!(e.read_exchange(&mut buf), Some(Err(Errno::IO)));
            assert_eq!(e.failed_at(), Some(9 * 512));
            // The engine then reads the records before it one by one.
            let mut record = [0u8; 4096];
            assert_eq!(e.read_at(&mut record, 0), Ok(4096));
            assert_eq!(record[..], data[..4096]);
            assert_eq!(e.read_at(&mut record, 4096), Err(Errno::IO));
            e.seek(Whence::Start(8192)).unwrap();
            assert_eq!(e.read_exchange(&mut buf), Some(Ok(8192)));
            assert_eq!(buf.as_slice(), &data[8192..16384]);
        }

        #[test]
        fn whole_buffers_are_written_behind_from_themselves() {
            let data = pattern(64 * 512);
            let mut e = window(end(vec![0; data.len()], vec![]));
            whole_pieces(&mut e);
            for piece in 0..4 {
                let mut buf = AlignedBuf::new(8192).unwrap();
                buf.as_mut_slice()
                    .copy_from_slice(&data[piece * 8192..(piece + 1) * 8192]);
                let given = buf.as_slice().as_ptr();
                assert_eq!(e.write_exchange(&mut buf), Some(Ok(8192)));
                assert_ne!(
                    buf.as_slice().as_ptr(),
                    given,
                    "the slot's buffer in its place"
                );
                assert_eq!(buf.len(), 8192);
                // The engine fills what it was given for its next write: not
                // what the write behind is sent from.
                buf.as_mut_slice().fill(0xaa);
            }
            // Not whole blocks: written as usual.
            let mut odd = AlignedBuf::new(1000).unwrap();
            assert_eq!(e.write_exchange(&mut odd), None);
            e.settle().unwrap();
            assert_eq!(e.written_until(), Some(4 * 8192));
            let mut back = vec![0u8; data.len()];
            assert_eq!(e.read_at(&mut back, 0), Ok(data.len()));
            assert_eq!(back, data);
        }

        #[test]
        fn a_failed_write_behind_is_reported_later_with_what_was_stored() {
            #[derive(Debug)]
            struct FailingWrites(MemoryDisk, u64);
            impl CommandQueue for FailingWrites {
                fn interface(&self) -> Interface {
                    self.0.interface()
                }
                fn geometry(&self) -> Geometry {
                    self.0.geometry()
                }
                fn slots(&self) -> usize {
                    self.0.slots()
                }
                fn describe(&self) -> String {
                    self.0.describe()
                }
                fn buffer(&self, slot: usize) -> Option<&[u8]> {
                    self.0.buffer(slot)
                }
                fn buffer_mut(&mut self, slot: usize) -> Option<&mut [u8]> {
                    self.0.buffer_mut(slot)
                }
                fn submit(
                    &mut self,
                    s: usize,
                    op: Op,
                    lba: u64,
                    n: u32,
                ) -> Result<(), CommandError> {
                    self.0.submit(s, op, lba, n)
                }
                fn wait(&mut self) -> Option<(usize, Result<(), CommandError>)> {
                    let slot = *self.0.order.front()?;
                    let (_, lba, n) = self.0.busy[slot].unwrap();
                    let done = self.0.wait()?;
                    if (lba..lba + u64::from(n)).contains(&self.1) {
                        return Some((
                            slot,
                            Err(CommandError {
                                errno: Errno::IO,
                                cause: format!("medium error, write error at LBA {}", self.1),
                                bad_block: Some(self.1),
                            }),
                        ));
                    }
                    Some(done)
                }
                fn flush(&mut self) -> Result<(), CommandError> {
                    Ok(())
                }
            }
            let disk = FailingWrites(MemoryDisk::new(vec![0; 64 * 512], 4, vec![]), 40);
            let mut e = window(GenericNodeEnd::new(Box::new(disk), false, None));
            let block = [7u8; 4096];
            // Four slots: every write is taken, the failure is still in flight.
            for _ in 0..8 {
                assert_eq!(e.write(&block), Ok(4096));
            }
            assert_eq!(e.settle(), Err(Errno::IO));
            assert_eq!(
                e.take_detail().as_deref(),
                Some("medium error, write error at LBA 40")
            );
            assert_eq!(e.written_until(), Some(5 * 4096), "blocks 0-39 are stored");
            assert_eq!(e.settle(), Ok(()), "reported once");
            assert_eq!(
                e.write_at(&block, 0),
                Err(Errno::IO),
                "and every write after fails"
            );
        }
    }
}
