//! Write-behind: the window of writes, zero and trim requests in flight,
//! in the order they were submitted. The server may complete them in any
//! order; the window keeps "everything before offset N is acknowledged"
//! exact by retiring requests from its front only, and it keeps the first
//! failure (in submission order) for the next write, sync or close.
//!
//! With sequential writes (what `End::pipeline` promises) the front's
//! offset is the end of the acknowledged prefix; a request that failed
//! stays at the front for good, so the prefix stops before it whatever
//! completed after it.

use std::collections::VecDeque;

use super::buffers::Buffers;
use super::handle::{Completion, Cookie, NbdError};
use crate::sys::Errno;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NbdCommand {
    Data,
    /// A zero request; `fast` asked the server to refuse rather than
    /// zero slowly.
    Zero {
        fast: bool,
    },
    Trim,
}

#[derive(Debug)]
pub enum State {
    InFlight {
        conn: usize,
        cookie: Cookie,
    },
    /// Retired successfully, waiting for the requests before it.
    Done,
    /// The server refused a fast zero (ENOTSUP): to be sent again as a
    /// plain zero request on the same connection, in the same place in
    /// the window.
    Refused {
        conn: usize,
    },
    Failed(NbdError),
}

#[derive(Debug)]
pub struct Op {
    pub offset: u64,
    pub len: u64,
    pub kind: NbdCommand,
    pub state: State,
}

#[derive(Debug, Default)]
pub struct WriteWindow {
    ops: VecDeque<Op>,
    /// The end of the last request retired from the front.
    acked_until: Option<u64>,
    /// The errno of a failure already reported: the end has failed, and
    /// every later write says so again.
    reported: Option<Errno>,
}

impl WriteWindow {
    pub fn push(&mut self, op: Op) {
        self.ops.push_back(op);
    }

    pub fn in_flight(&self) -> usize {
        self.ops
            .iter()
            .filter(|op| matches!(op.state, State::InFlight { .. }))
            .count()
    }

    /// Whether a request in flight touches `len` bytes at `offset`: the
    /// server may carry out requests in flight in any order, so a write
    /// over one must wait for it.
    pub fn overlaps(&self, offset: u64, len: u64) -> bool {
        self.ops.iter().any(|op| {
            matches!(op.state, State::InFlight { .. } | State::Refused { .. })
                && op.offset < offset + len
                && offset < op.offset + op.len
        })
    }

    /// Requests refused as fast zeros, to be sent again plain.
    pub fn refused(&mut self) -> impl Iterator<Item = &mut Op> {
        self.ops
            .iter_mut()
            .filter(|op| matches!(op.state, State::Refused { .. }))
    }

    /// The offset before which every byte written is acknowledged (the
    /// front of the window, or the end of what it last retired).
    pub fn written_until(&self) -> Option<u64> {
        self.ops.front().map(|op| op.offset).or(self.acked_until)
    }

    /// The first failed request in submission order, if any.
    pub fn failure(&self) -> Option<&NbdError> {
        self.ops.iter().find_map(|op| match &op.state {
            State::Failed(e) => Some(e),
            _ => None,
        })
    }

    pub fn failure_offset(&self) -> Option<u64> {
        self.ops
            .iter()
            .find(|op| matches!(op.state, State::Failed(_)))
            .map(|op| op.offset)
    }

    /// Give up on the requests in flight (their connection is gone): they
    /// fail with `error`. Their buffers stay with their handle.
    pub fn fail_in_flight(&mut self, error: &NbdError) {
        for op in &mut self.ops {
            if matches!(op.state, State::InFlight { .. } | State::Refused { .. }) {
                op.state = State::Failed(error.clone());
            }
        }
    }

    pub fn reported(&self) -> Option<Errno> {
        self.reported
    }

    pub fn mark_reported(&mut self, errno: Errno) {
        self.reported = Some(errno);
    }

    /// Take a completion that belongs to the window; give back any other.
    pub fn accept(
        &mut self,
        conn: usize,
        completion: Completion,
        pool: &mut Buffers,
    ) -> Option<Completion> {
        let cookie = completion.cookie;
        let Some(op) = self.ops.iter_mut().find(|op| {
            matches!(op.state, State::InFlight { conn: c, cookie: k } if c == conn && k == cookie)
        }) else {
            return Some(completion);
        };
        if let Some(buf) = completion.buffer {
            pool.give(buf);
        }
        op.state = match completion.result {
            Ok(()) => State::Done,
            Err(e) if op.kind == (NbdCommand::Zero { fast: true }) && e.errno == Errno::NOTSUP => {
                State::Refused { conn }
            }
            Err(e) => State::Failed(e),
        };
        while self
            .ops
            .front()
            .is_some_and(|op| matches!(op.state, State::Done))
        {
            let op = self.ops.pop_front().expect("front");
            self.acked_until = Some(op.offset + op.len);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(offset: u64, len: u64, cookie: Cookie) -> Op {
        Op {
            offset,
            len,
            kind: NbdCommand::Data,
            state: State::InFlight { conn: 0, cookie },
        }
    }

    fn done(cookie: Cookie, result: Result<(), NbdError>) -> Completion {
        Completion {
            cookie,
            result,
            buffer: None,
            extents: None,
        }
    }

    /// Four 10-byte writes in flight at 0, 10, 20 and 30, cookies 1 to 4.
    fn four_writes() -> WriteWindow {
        let mut window = WriteWindow::default();
        for i in 0..4 {
            window.push(op(i * 10, 10, i + 1));
        }
        window
    }

    #[test]
    fn the_acknowledged_prefix_moves_only_when_its_front_completes() {
        let mut window = four_writes();
        let mut pool = Buffers::default();
        assert_eq!(window.written_until(), Some(0));
        window.accept(0, done(3, Ok(())), &mut pool);
        window.accept(0, done(2, Ok(())), &mut pool);
        assert_eq!(window.written_until(), Some(0), "out of order: not yet");
        window.accept(0, done(1, Ok(())), &mut pool);
        assert_eq!(window.written_until(), Some(30));
        window.accept(0, done(4, Ok(())), &mut pool);
        assert_eq!(window.written_until(), Some(40));
        assert_eq!(window.in_flight(), 0);
    }

    #[test]
    fn a_failure_holds_the_prefix_before_it_whatever_completes_after() {
        let mut window = four_writes();
        let mut pool = Buffers::default();
        let eio = NbdError::new(Errno::IO, "write failed");
        window.accept(0, done(4, Ok(())), &mut pool);
        window.accept(0, done(2, Err(eio.clone())), &mut pool);
        window.accept(0, done(1, Ok(())), &mut pool);
        window.accept(0, done(3, Ok(())), &mut pool);
        assert_eq!(window.written_until(), Some(10));
        assert_eq!(window.failure(), Some(&eio));
        assert_eq!(window.failure_offset(), Some(10));
    }

    #[test]
    fn a_refused_fast_zero_waits_to_be_sent_again() {
        let mut window = WriteWindow::default();
        let mut pool = Buffers::default();
        window.push(Op {
            offset: 0,
            len: 10,
            kind: NbdCommand::Zero { fast: true },
            state: State::InFlight { conn: 0, cookie: 1 },
        });
        window.accept(
            0,
            done(1, Err(NbdError::new(Errno::NOTSUP, "no"))),
            &mut pool,
        );
        assert_eq!(window.failure(), None);
        assert_eq!(window.refused().count(), 1);
        assert_eq!(window.written_until(), Some(0));
    }

    #[test]
    fn completions_of_others_are_given_back() {
        let mut window = WriteWindow::default();
        let mut pool = Buffers::default();
        window.push(op(0, 10, 1));
        assert!(window.accept(1, done(1, Ok(())), &mut pool).is_some());
        assert!(window.accept(0, done(2, Ok(())), &mut pool).is_some());
    }
}
