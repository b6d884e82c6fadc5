//! Requests in flight: what an end is handed when the engine keeps
//! several of its reads or writes going at once, and what it hands back.
//!
//! An end is a transport. The engine's window (`engine::window`) decides
//! which requests to send, keeps them in order, knows where everything
//! before them is stored, latches the first failure and applies
//! back-pressure; the end only carries each request to its storage and
//! says when it is done ([`crate::ends::End::submit`],
//! [`crate::ends::End::complete`]). How many an end can keep in flight,
//! and of what sizes, it says in its capabilities ([`Requests`]).
//!
//! Buffers move by value: a request's buffer belongs to the end from the
//! moment it is submitted until it comes back in the request's
//! [`Completion`] (or at once, [`Submitted::Copied`], where the end copied
//! the bytes into memory of its own). An end that hands a buffer to the
//! kernel or to a library (io_uring, libnbd) keeps it where nothing else
//! can reach it until the completion is reaped, and waits for every
//! request in flight before it frees anything.

use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Fill the buffer from the offset.
    Read,
    /// Store the buffer's bytes at the offset.
    Write,
    /// Make `len` bytes at the offset read as zeros without sending them
    /// (an NBD zero request); no buffer.
    Zero,
}

/// One request, handed to [`crate::ends::End::submit`].
#[derive(Debug)]
pub struct Request {
    /// The window's name for it, given back in its completion.
    pub id: u64,
    pub op: Op,
    pub offset: u64,
    /// Bytes to read or write (the buffer's length), or to zero.
    pub len: u64,
    /// A read's destination or a write's bytes; None for [`Op::Zero`].
    pub buf: Option<AlignedBuf>,
}

/// A request that failed, with what the end knows beyond its errno.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub errno: Errno,
    /// The end's own words (a server's message, a sense key), for the
    /// line after GNU's.
    pub words: Option<String>,
    /// The first byte the device said it could not read or write, where
    /// it said so (a SCSI disk's sense data names the block).
    pub at: Option<u64>,
}

impl Fault {
    pub fn new(errno: Errno) -> Fault {
        Fault {
            errno,
            words: None,
            at: None,
        }
    }

    pub fn with_words(errno: Errno, words: impl Into<String>) -> Fault {
        Fault {
            errno,
            words: Some(words.into()),
            at: None,
        }
    }
}

/// A finished request.
#[derive(Debug)]
pub struct Completion {
    pub id: u64,
    /// The bytes moved (fewer than asked only at the end of the data for
    /// a read, or a write the device took only in part), or the failure.
    pub result: Result<u64, Fault>,
    /// The request's buffer, back (None where the end gave it back at
    /// submission, or the request had none).
    pub buf: Option<AlignedBuf>,
}

/// What became of a request handed to an end.
#[derive(Debug)]
pub enum Submitted {
    /// In flight: its completion, buffer and all, comes from
    /// [`crate::ends::End::complete`].
    InFlight,
    /// In flight, its bytes copied into the end's own memory: the buffer
    /// is back now, the completion comes later without it.
    Copied(AlignedBuf),
    /// Done already (an end that does each request when it is handed it).
    Done(Completion),
    /// Not taken: the end holds as much as it can (an upload's parts
    /// take memory). Hand it again once a completion came.
    Busy(Request),
}

/// How an end takes requests in flight: the answers the window sizes its
/// requests and its depth by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requests {
    /// The most it keeps in flight; 1: it does one request at a time,
    /// when it is handed it.
    pub most: usize,
    /// The fewest worth keeping in flight whenever it is read or written
    /// in order, asked or not: more than one where each request waits on
    /// a round trip (a store's, a disk's command queue). One: in flight
    /// only where the copy's plan says.
    pub least: usize,
    /// Requests start and end on multiples of this many bytes (a disk's
    /// block, O_DIRECT's sector); a read or write that does not is done
    /// on its own, after everything in flight.
    pub unit: u32,
    /// The smallest request worth sending (a store's range: below it a
    /// request costs more than it carries).
    pub min_len: usize,
    /// The largest request the end takes.
    pub max_len: usize,
    /// Bytes worth keeping in flight wherever requests go in flight: what
    /// the link to the end carries over a round trip, which requests as
    /// small as the copy's would not fill at the plan's depth (an NBD
    /// export's). 0: the plan's depth is enough.
    pub round_trip_bytes: usize,
    /// The requests' bytes pass through buffers of the end's own (an SCSI
    /// generic node's mapped reserve buffers): each is copied there, and
    /// a request's buffer can come back as soon as it is sent.
    pub owns_buffers: bool,
    /// What carries the requests kept in flight, as a report names it
    /// (and fio, where it has an engine of that name): "io_uring",
    /// "libnbd", "sg", "bsg", "io_uring_cmd", "HTTP". Empty where each
    /// request is done when it is handed over.
    pub via: &'static str,
}

impl Requests {
    /// One request at a time, of any size.
    pub const ONE_AT_A_TIME: Requests = Requests {
        most: 1,
        least: 1,
        unit: 1,
        min_len: 1,
        max_len: usize::MAX,
        round_trip_bytes: 0,
        owns_buffers: false,
        via: "",
    };

    /// Whether the end keeps more than one request in flight.
    pub const fn in_flight(self) -> bool {
        self.most > 1
    }
}
