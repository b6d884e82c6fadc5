//! Read-ahead: the pieces of the export ahead of the read position, in
//! order, each a request in flight, its data arrived, its error, or a run
//! the extents say reads as zeros (never requested). The end plans and
//! submits pieces; this module only keeps them, hands them out in order
//! and knows which completion is whose.
//!
//! A piece given up on (the reader sought elsewhere) while its request is
//! in flight becomes an orphan: its buffer stays with libnbd until the
//! completion arrives, then comes back to the pool.

use std::collections::VecDeque;

use super::buffers::Buffers;
use super::handle::{Completion, Cookie, NbdError};
use crate::sys::buffer::AlignedBuf;

#[derive(Debug)]
pub enum State {
    Zeros,
    InFlight { conn: usize, cookie: Cookie },
    Ready(AlignedBuf),
    Failed(NbdError),
}

#[derive(Debug)]
pub struct Piece {
    pub offset: u64,
    pub len: u64,
    pub state: State,
}

#[derive(Debug, Default)]
pub struct ReadWindow {
    pieces: VecDeque<Piece>,
    /// Bytes of the first piece already handed out.
    used: u64,
    /// Where the next piece will start; None: not reading ahead.
    planned_until: Option<u64>,
    orphans: Vec<(usize, Cookie)>,
}

impl ReadWindow {
    /// The offset the next byte handed out comes from.
    pub fn next_offset(&self) -> Option<u64> {
        match self.pieces.front() {
            Some(piece) => Some(piece.offset + self.used),
            None => self.planned_until,
        }
    }

    pub fn planned_until(&self) -> Option<u64> {
        self.planned_until
    }

    /// Pieces holding or awaiting data (what the depth bounds).
    pub fn data_pieces(&self) -> usize {
        self.pieces
            .iter()
            .filter(|p| !matches!(p.state, State::Zeros))
            .count()
    }

    /// Start afresh at `offset`, giving up what was planned.
    pub fn restart(&mut self, offset: u64, pool: &mut Buffers) {
        self.discard(pool);
        self.planned_until = Some(offset);
    }

    /// Move on to `offset`, ahead of the next offset but within what is
    /// planned, keeping the pieces from there on. False: it is not.
    pub fn skip_to(&mut self, offset: u64, pool: &mut Buffers) -> bool {
        let (Some(next), Some(until)) = (self.next_offset(), self.planned_until) else {
            return false;
        };
        if offset < next || offset >= until {
            return false;
        }
        while let Some(front) = self.pieces.front() {
            if front.offset + front.len > offset {
                self.used = offset - front.offset;
                return true;
            }
            let piece = self.pieces.pop_front().expect("front");
            self.let_go(piece, pool);
            self.used = 0;
        }
        true
    }

    /// Give up everything planned.
    pub fn discard(&mut self, pool: &mut Buffers) {
        while let Some(piece) = self.pieces.pop_front() {
            self.let_go(piece, pool);
        }
        self.used = 0;
        self.planned_until = None;
    }

    fn let_go(&mut self, piece: Piece, pool: &mut Buffers) {
        match piece.state {
            State::InFlight { conn, cookie } => self.orphans.push((conn, cookie)),
            State::Ready(buf) => pool.give(buf),
            State::Zeros | State::Failed(_) => {}
        }
    }

    pub fn push(&mut self, piece: Piece) {
        let end = piece.offset + piece.len;
        self.pieces.push_back(piece);
        self.planned_until = Some(end);
    }

    pub fn front(&self) -> Option<&Piece> {
        self.pieces.front()
    }

    /// Bytes of the first piece not yet handed out.
    pub fn front_left(&self) -> u64 {
        self.pieces.front().map_or(0, |p| p.len - self.used)
    }

    /// Copy up to `out.len()` bytes of the first piece, which must be
    /// ready or zeros, into `out`; returns how many.
    pub fn take_front(&mut self, out: &mut [u8], pool: &mut Buffers) -> usize {
        let Some(piece) = self.pieces.front() else {
            return 0;
        };
        let n = (piece.len - self.used).min(out.len() as u64) as usize;
        let from = self.used as usize;
        match &piece.state {
            State::Zeros => out[..n].fill(0),
            State::Ready(buf) => out[..n].copy_from_slice(&buf.as_slice()[from..from + n]),
            State::InFlight { .. } | State::Failed(_) => return 0,
        }
        self.used += n as u64;
        if self.used == piece.len {
            let piece = self.pieces.pop_front().expect("front");
            self.let_go(piece, pool);
            self.used = 0;
        }
        n
    }

    /// Hand out the whole first piece by exchanging buffers, if it is
    /// ready, none of it handed out yet, and exactly `buf.len()` long:
    /// `buf` then holds its bytes, and the buffer it held goes to the
    /// pool (it carries the next read-ahead). False: nothing changed.
    pub fn exchange_front(&mut self, buf: &mut AlignedBuf, pool: &mut Buffers) -> bool {
        let whole = matches!(
            self.pieces.front(),
            Some(Piece { len, state: State::Ready(_), .. })
                if self.used == 0 && *len == buf.len() as u64
        );
        if !whole {
            return false;
        }
        let Some(Piece {
            state: State::Ready(mut data),
            ..
        }) = self.pieces.pop_front()
        else {
            unreachable!("the first piece was ready");
        };
        std::mem::swap(buf, &mut data);
        pool.give(data);
        true
    }

    /// Take a completion that belongs to read-ahead (a piece's or an
    /// orphan's); give back any other.
    pub fn accept(
        &mut self,
        conn: usize,
        completion: Completion,
        pool: &mut Buffers,
    ) -> Option<Completion> {
        let cookie = completion.cookie;
        if let Some(at) = self
            .orphans
            .iter()
            .position(|&orphan| orphan == (conn, cookie))
        {
            self.orphans.swap_remove(at);
            if let Some(buf) = completion.buffer {
                pool.give(buf);
            }
            return None;
        }
        let Some(piece) = self.pieces.iter_mut().find(|p| {
            matches!(p.state, State::InFlight { conn: c, cookie: k } if c == conn && k == cookie)
        }) else {
            return Some(completion);
        };
        piece.state = match (completion.result, completion.buffer) {
            (Ok(()), Some(buf)) => State::Ready(buf),
            (Err(e), buf) => {
                if let Some(buf) = buf {
                    pool.give(buf);
                }
                State::Failed(e)
            }
            (Ok(()), None) => State::Failed(NbdError::new(
                crate::sys::Errno::IO,
                "a read completed without its buffer",
            )),
        };
        None
    }
}
