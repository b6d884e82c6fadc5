//! A load: requests kept in flight at offsets of the caller's choosing,
//! each timed, on any end that carries requests (`ends::transport`). It
//! is how `ddx bench` keeps random reads or writes at a queue depth, or a
//! stream of large ones eight deep, on a file or block device opened with
//! O_DIRECT (io_uring), an NBD export (libnbd) or a disk's generic node
//! (its command queue) alike.
//!
//! The window (`engine::window`) keeps requests in flight for a copy: in
//! order from a position, with a stored prefix and the copy's record
//! semantics. A load keeps them wherever the caller says, in no order,
//! and only counts and times them. Between the two they are the only
//! places in ddx that keep requests in flight; an end only carries them.
//!
//! **Buffers move by value.** A load owns `depth` buffers, made when it
//! is, so that nothing is allocated while it is timed and a writer can
//! fill them first ([`Load::buffers_mut`]). Each request takes one to the
//! end and gets it back in its completion (or at once, where the end
//! copies the bytes into buffers of its own: `Submitted::Copied`), and it
//! carries a later request. A buffer holds at least the smallest request
//! the end says is worth sending (`Requests::min_len`), so that an end
//! whose command slots are that size changes buffers with them instead of
//! copying the bytes.
//!
//! **Failure and interruption.** The first request that fails ends the
//! sending; the requests still in flight are waited for, whatever they
//! give, before [`Load::run`] returns the failure with its offset, so
//! that no completion of this load is left for the end's next user. The
//! caller stops a load by giving no more offsets: what is in flight is
//! waited for in the same way.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::ends::transport::{Completion, Fault, Op, Request, Submitted};
use crate::ends::End;
use crate::sys::buffer::AlignedBuf;
use crate::sys::Errno;

/// The largest buffer a load makes to let an end exchange it (see the
/// module header): above it, requests are copied rather than memory
/// spent on buffers larger than they are.
const MOST_EXCHANGED: usize = 16 << 20;

/// One request done: where it was, how long it took from its submission
/// to its completion, and how many bytes it moved (fewer than asked only
/// at the end of the data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    pub offset: u64,
    pub took: Duration,
    pub bytes: u64,
}

/// What a load did: requests sent and completed, bytes moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub sent: u64,
    pub done: u64,
    pub bytes: u64,
}

/// A request that failed, or the load that could not go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// The request's offset; None where no request is to blame (the
    /// end lost its requests, or would take none).
    pub offset: Option<u64>,
    pub fault: Fault,
    /// What was done before it, the requests drained after it included.
    pub tally: Tally,
}

/// A request in flight: where, and when it was sent.
#[derive(Debug, Clone, Copy)]
struct Sent {
    offset: u64,
    at: Instant,
}

/// Requests of `len` bytes, at most `depth` of them in flight on an end.
pub struct Load<'e> {
    end: &'e mut dyn End,
    op: Op,
    len: usize,
    depth: usize,
    sent: HashMap<u64, Sent>,
    /// The buffers not with the end, in the order they were made until
    /// the first request takes one.
    spare: Vec<AlignedBuf>,
    next_id: u64,
}

impl std::fmt::Debug for Load<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Load")
            .field("op", &self.op)
            .field("len", &self.len)
            .field("depth", &self.depth)
            .field("in_flight", &self.sent.len())
            .finish_non_exhaustive()
    }
}

impl<'e> Load<'e> {
    /// A load of `op` requests of `len` bytes on `end`, at most `depth`
    /// in flight, or as many as the end keeps where that is fewer (see
    /// [`Load::depth`]). EINVAL where `len` is no whole number of the
    /// end's unit, or more than it takes in one request; a buffer the
    /// system would not map fails with its errno.
    pub fn new(end: &'e mut dyn End, op: Op, len: usize, depth: usize) -> Result<Load<'e>, Fault> {
        let requests = end.capabilities().requests;
        let unit = requests.unit.max(1) as usize;
        if op == Op::Zero || len == 0 || len % unit != 0 || len > requests.max_len {
            return Err(Fault::with_words(
                Errno::INVAL,
                format!(
                    "requests of {len} bytes: the end takes whole units of {unit} bytes, at \
                     most {} at once",
                    requests.max_len
                ),
            ));
        }
        let depth = depth.clamp(1, requests.most.max(1));
        let exchanged = requests.min_len.max(len);
        let capacity = if exchanged <= MOST_EXCHANGED {
            exchanged
        } else {
            len
        };
        let spare = (0..depth)
            .map(|_| {
                AlignedBuf::new(capacity).map(|mut buf| {
                    buf.set_len(len);
                    buf
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(Fault::new)?;
        Ok(Load {
            end,
            op,
            len,
            depth,
            sent: HashMap::with_capacity(depth),
            spare,
            next_id: 0,
        })
    }

    /// Requests in flight at most: as asked, or as many as the end keeps.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The end loaded, for what is no request (a flush after a pass).
    pub fn end(&mut self) -> &mut dyn End {
        &mut *self.end
    }

    /// The load's buffers, in the order they were made, for a writer to
    /// fill before the first request (afterwards, those not in flight).
    pub fn buffers_mut(&mut self) -> impl Iterator<Item = &mut [u8]> {
        self.spare.iter_mut().map(|buf| buf.as_mut_slice())
    }

    /// Keep requests in flight at the offsets `next` gives until it gives
    /// None, then wait for every one. `next` is shown what is done so far
    /// and the buffer the request will carry (a write's bytes, to stamp;
    /// a read's, to ignore). `done` hears of each request as it
    /// completes. Err: the first request that failed (the rest drained).
    pub fn run(
        &mut self,
        mut next: impl FnMut(&Tally, &mut [u8]) -> Option<u64>,
        mut done: impl FnMut(Done),
    ) -> Result<Tally, LoadError> {
        let mut tally = Tally::default();
        let mut failed: Option<(Option<u64>, Fault)> = None;
        // A request the end was too busy to take: it goes again first.
        let mut pending: Option<(u64, AlignedBuf)> = None;
        let mut more = true;
        loop {
            while more && failed.is_none() && self.sent.len() < self.depth {
                let (offset, buf) = match pending.take() {
                    Some(request) => request,
                    None => {
                        let mut buf = self.spare.pop().expect("a buffer for each request");
                        buf.set_len(self.len);
                        match next(&tally, buf.as_mut_slice()) {
                            Some(offset) => (offset, buf),
                            None => {
                                self.spare.push(buf);
                                more = false;
                                break;
                            }
                        }
                    }
                };
                self.next_id += 1;
                let id = self.next_id;
                let request = Request {
                    id,
                    op: self.op,
                    offset,
                    len: self.len as u64,
                    buf: Some(buf),
                };
                self.sent.insert(
                    id,
                    Sent {
                        offset,
                        at: Instant::now(),
                    },
                );
                match self.end.submit(request) {
                    Submitted::InFlight => tally.sent += 1,
                    Submitted::Copied(buf) => {
                        tally.sent += 1;
                        self.spare.push(buf);
                    }
                    Submitted::Done(completion) => {
                        tally.sent += 1;
                        self.file(completion, &mut tally, &mut failed, &mut done);
                    }
                    Submitted::Busy(request) => {
                        self.sent.remove(&id);
                        let buf = request.buf.expect("the request's buffer, back");
                        if self.sent.is_empty() {
                            self.spare.push(buf);
                            failed = Some((
                                None,
                                Fault::with_words(
                                    Errno::IO,
                                    "the end took no request with none in flight",
                                ),
                            ));
                        } else {
                            pending = Some((offset, buf));
                        }
                        break;
                    }
                }
            }
            if self.sent.is_empty() {
                break;
            }
            let Some(completion) = self.end.complete(true) else {
                // The end has none of them: they are lost, and their
                // buffers with them.
                self.sent.clear();
                failed.get_or_insert((
                    None,
                    Fault::with_words(Errno::IO, "requests in flight were lost"),
                ));
                break;
            };
            self.file(completion, &mut tally, &mut failed, &mut done);
        }
        if let Some((_, buf)) = pending {
            self.spare.push(buf);
        }
        match failed {
            None => Ok(tally),
            Some((offset, fault)) => Err(LoadError {
                offset,
                fault,
                tally,
            }),
        }
    }

    /// A completion in: its buffer back, the request timed and counted,
    /// or its failure kept if it is the first.
    fn file(
        &mut self,
        completion: Completion,
        tally: &mut Tally,
        failed: &mut Option<(Option<u64>, Fault)>,
        done: &mut impl FnMut(Done),
    ) {
        let Completion { id, result, buf } = completion;
        if let Some(mut buf) = buf {
            buf.set_len(self.len);
            self.spare.push(buf);
        }
        let Some(sent) = self.sent.remove(&id) else {
            return;
        };
        let took = sent.at.elapsed();
        tally.done += 1;
        match result {
            Ok(bytes) => {
                tally.bytes += bytes;
                done(Done {
                    offset: sent.offset,
                    took,
                    bytes,
                });
            }
            Err(fault) => {
                failed.get_or_insert((Some(sent.offset), fault));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ends::transport::Requests;
    use crate::ends::{Capabilities, Kind, Whence};

    /// How the fake end treats requests.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Style {
        /// Keeps them in flight with their buffers, completes newest
        /// first.
        InFlight,
        /// Copies a write's bytes at once and gives the buffer back.
        Copies,
        /// Does each when it is handed it (the default adapter).
        AtOnce,
    }

    /// A disk in memory that keeps up to `most` requests in flight, says
    /// Busy beyond `takes` of them, and fails requests over `bad`.
    #[derive(Debug)]
    struct Fake {
        data: Vec<u8>,
        style: Style,
        most: usize,
        takes: usize,
        unit: u32,
        min_len: usize,
        bad: Option<u64>,
        in_flight: Vec<(Request, Option<Vec<u8>>)>,
        /// What it was handed, in order: (op, offset, len).
        seen: Vec<(Op, u64, u64)>,
        most_in_flight: usize,
        busy_answers: usize,
        /// Buffer addresses it was handed, to count the distinct ones.
        buffers: std::collections::HashSet<usize>,
    }

    impl Fake {
        fn new(len: usize, style: Style, most: usize) -> Fake {
            Fake {
                data: (0..len).map(|i| (i / 512) as u8 ^ (i % 7) as u8).collect(),
                style,
                most,
                takes: most,
                unit: 512,
                min_len: 1,
                bad: None,
                in_flight: Vec::new(),
                seen: Vec::new(),
                most_in_flight: 0,
                busy_answers: 0,
                buffers: Default::default(),
            }
        }

        fn carry(&mut self, request: &mut Request, copied: Option<&[u8]>) -> Result<u64, Fault> {
            let (at, len) = (request.offset as usize, request.len as usize);
            if self
                .bad
                .is_some_and(|bad| bad >= request.offset && bad < request.offset + request.len)
            {
                return Err(Fault::with_words(Errno::IO, "medium error"));
            }
            match request.op {
                Op::Read => {
                    let buf = request.buf.as_mut().unwrap();
                    buf.as_mut_slice()[..len].copy_from_slice(&self.data[at..at + len]);
                }
                _ => {
                    let bytes = match copied {
                        Some(bytes) => bytes.to_vec(),
                        None => request.buf.as_ref().unwrap().as_slice()[..len].to_vec(),
                    };
                    self.data[at..at + len].copy_from_slice(&bytes);
                }
            }
            Ok(len as u64)
        }
    }

    impl End for Fake {
        fn kind(&self) -> Kind {
            Kind::Memory
        }
        fn capabilities(&self) -> Capabilities {
            Capabilities {
                requests: Requests {
                    most: self.most,
                    unit: self.unit,
                    min_len: self.min_len,
                    ..Requests::ONE_AT_A_TIME
                },
                ..Capabilities::of(Kind::Memory)
            }
        }
        fn seek(&mut self, _: Whence) -> Result<u64, Errno> {
            Ok(0)
        }
        fn size(&self) -> Result<Option<u64>, Errno> {
            Ok(Some(self.data.len() as u64))
        }
        fn sync(&mut self, _: bool) -> Result<(), Errno> {
            Ok(())
        }
        fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
            let at = offset as usize;
            buf.copy_from_slice(&self.data[at..at + buf.len()]);
            Ok(buf.len())
        }
        fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
            let at = offset as usize;
            self.data[at..at + buf.len()].copy_from_slice(buf);
            Ok(buf.len())
        }
        fn submit(&mut self, mut request: Request) -> Submitted {
            if let Some(buf) = &request.buf {
                self.buffers.insert(buf.as_slice().as_ptr() as usize);
                assert!(buf.len() >= request.len as usize, "a buffer too short");
            }
            if self.style == Style::AtOnce {
                self.seen.push((request.op, request.offset, request.len));
                let result = self.carry(&mut request, None);
                return Submitted::Done(Completion {
                    id: request.id,
                    result,
                    buf: request.buf,
                });
            }
            if self.in_flight.len() >= self.takes {
                self.busy_answers += 1;
                return Submitted::Busy(request);
            }
            assert!(self.in_flight.len() < self.most, "more than it keeps");
            self.seen.push((request.op, request.offset, request.len));
            if self.style == Style::Copies && request.op == Op::Write {
                let buf = request.buf.take().unwrap();
                let bytes = buf.as_slice()[..request.len as usize].to_vec();
                self.in_flight.push((request, Some(bytes)));
                self.most_in_flight = self.most_in_flight.max(self.in_flight.len());
                return Submitted::Copied(buf);
            }
            self.in_flight.push((request, None));
            self.most_in_flight = self.most_in_flight.max(self.in_flight.len());
            Submitted::InFlight
        }
        fn complete(&mut self, _wait: bool) -> Option<Completion> {
            let (mut request, copied) = self.in_flight.pop()?;
            let result = self.carry(&mut request, copied.as_deref());
            Some(Completion {
                id: request.id,
                result,
                buf: request.buf,
            })
        }
        fn close(self: Box<Self>) -> Result<(), Errno> {
            Ok(())
        }
    }

    /// Offsets 0, len, 2 len, ... `count` of them.
    fn in_order(count: u64, len: u64) -> impl FnMut(&Tally, &mut [u8]) -> Option<u64> {
        let mut n = 0;
        move |_, _| {
            (n < count).then(|| {
                n += 1;
                (n - 1) * len
            })
        }
    }

    #[test]
    fn reads_are_kept_depth_in_flight_and_each_is_done_once() {
        for style in [Style::InFlight, Style::Copies] {
            let mut end = Fake::new(64 << 10, style, 64);
            let mut offsets = Vec::new();
            let mut load = Load::new(&mut end, Op::Read, 4096, 8).unwrap();
            assert_eq!(load.depth(), 8);
            let tally = load
                .run(in_order(16, 4096), |done| {
                    assert_eq!(done.bytes, 4096);
                    offsets.push(done.offset);
                })
                .unwrap();
            assert_eq!(
                tally,
                Tally {
                    sent: 16,
                    done: 16,
                    bytes: 16 * 4096
                }
            );
            offsets.sort_unstable();
            assert_eq!(offsets, (0..16).map(|n| n * 4096).collect::<Vec<_>>());
            assert_eq!(end.most_in_flight, 8, "{style:?}");
            assert!(end.in_flight.is_empty());
            assert!(end.buffers.len() <= 8, "{} buffers", end.buffers.len());
        }
    }

    #[test]
    fn writes_carry_what_the_caller_stamped_to_their_offsets() {
        for style in [Style::InFlight, Style::Copies, Style::AtOnce] {
            let mut end = Fake::new(32 << 10, style, 4);
            let mut load = Load::new(&mut end, Op::Write, 1024, 4).unwrap();
            for (k, buf) in load.buffers_mut().enumerate() {
                buf.fill(0xa0 + k as u8);
            }
            let mut n = 0u64;
            load.run(
                |_, buf| {
                    (n < 32).then(|| {
                        let at = (31 - n) * 1024;
                        buf[..8].copy_from_slice(&at.to_le_bytes());
                        n += 1;
                        at
                    })
                },
                |_| {},
            )
            .unwrap();
            for block in end.data.chunks(1024).enumerate() {
                let (k, bytes) = block;
                assert_eq!(bytes[..8], (k as u64 * 1024).to_le_bytes(), "{style:?}");
                assert!(
                    bytes[8..].iter().all(|&b| b == bytes[8]) && (0xa0..0xa4).contains(&bytes[8]),
                    "{style:?}: block {k} is not one of the buffers' bytes"
                );
            }
        }
    }

    #[test]
    fn an_end_that_does_one_at_a_time_is_loaded_one_deep() {
        let mut end = Fake::new(16 << 10, Style::AtOnce, 1);
        let mut load = Load::new(&mut end, Op::Read, 512, 32).unwrap();
        assert_eq!(load.depth(), 1);
        let tally = load.run(in_order(32, 512), |_| {}).unwrap();
        assert_eq!(tally.done, 32);
        assert_eq!(end.seen.len(), 32);
        assert_eq!(end.buffers.len(), 1);
    }

    #[test]
    fn a_busy_end_is_handed_the_request_again_after_a_completion() {
        let mut end = Fake::new(64 << 10, Style::InFlight, 16);
        end.takes = 3;
        let mut load = Load::new(&mut end, Op::Read, 4096, 8).unwrap();
        let tally = load.run(in_order(16, 4096), |_| {}).unwrap();
        assert_eq!(tally.done, 16);
        assert!(end.busy_answers > 0);
        assert_eq!(end.most_in_flight, 3);
        let mut offsets: Vec<u64> = end.seen.iter().map(|s| s.1).collect();
        offsets.sort_unstable();
        assert_eq!(offsets, (0..16).map(|n| n * 4096).collect::<Vec<_>>());
    }

    #[test]
    fn an_end_that_takes_nothing_fails_the_load_rather_than_hang() {
        let mut end = Fake::new(16 << 10, Style::InFlight, 4);
        end.takes = 0;
        let mut load = Load::new(&mut end, Op::Read, 4096, 4).unwrap();
        let error = load.run(in_order(4, 4096), |_| {}).unwrap_err();
        assert_eq!((error.offset, error.fault.errno), (None, Errno::IO));
        assert_eq!(error.tally.sent, 0);
    }

    #[test]
    fn the_first_failure_ends_the_load_after_the_rest_are_drained() {
        let mut end = Fake::new(64 << 10, Style::InFlight, 8);
        end.bad = Some(5 * 4096 + 100);
        let mut load = Load::new(&mut end, Op::Read, 4096, 4).unwrap();
        let mut done = 0;
        let error = load.run(in_order(16, 4096), |_| done += 1).unwrap_err();
        assert_eq!(error.offset, Some(5 * 4096));
        assert_eq!(error.fault.words.as_deref(), Some("medium error"));
        assert!(end.in_flight.is_empty(), "requests left in flight");
        assert!(
            end.seen.len() < 16,
            "sending went on after the failure: {}",
            end.seen.len()
        );
        assert_eq!(error.tally.done, error.tally.sent);
        assert_eq!(done + 1, error.tally.done);
        // The end is fit for another load: nothing of this one is left.
        end.bad = None;
        let mut load = Load::new(&mut end, Op::Read, 4096, 4).unwrap();
        assert_eq!(load.run(in_order(4, 4096), |_| {}).unwrap().done, 4);
    }

    #[test]
    fn requests_off_the_ends_unit_are_refused_before_anything_is_sent() {
        let mut end = Fake::new(16 << 10, Style::InFlight, 4);
        end.unit = 4096;
        assert_eq!(
            Load::new(&mut end, Op::Read, 512, 4).unwrap_err().errno,
            Errno::INVAL
        );
        assert_eq!(
            Load::new(&mut end, Op::Zero, 4096, 4).unwrap_err().errno,
            Errno::INVAL
        );
        assert!(end.seen.is_empty());
    }

    #[test]
    fn buffers_hold_the_ends_smallest_request_so_it_can_exchange_them() {
        let mut end = Fake::new(16 << 10, Style::InFlight, 4);
        end.min_len = 8192;
        let mut load = Load::new(&mut end, Op::Read, 512, 2).unwrap();
        assert!(load.buffers_mut().all(|buf| buf.len() == 512));
        assert!(load.spare.iter().all(|buf| buf.capacity() >= 8192));
        load.run(in_order(4, 512), |_| {}).unwrap();
    }
}
