//! Backends: how the reader's event stream reaches the writer.
//!
//! `sync` runs both halves in one thread, one record at a time: GNU dd's
//! behaviour, the reference. `threads` runs the reader in its own thread,
//! up to the queue depth of records ahead of the writer, so a read and a
//! write are in flight at the same time and a copy between two devices
//! takes the slower one's time rather than the sum. `sequential` is one
//! thread again, for two ends on one disk. Whatever the backend, the bytes
//! and the statistics are the reference's; the requests are too, unless
//! the copy is shaped (bulk requests, kernel offload: see `shape`).

use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::Arc;

use crate::diagnostic::Events;
use crate::engine::cache::{CachePolicy, DropBehind};
use crate::engine::counters::Counters;
use crate::engine::handoff::Waiting;
use crate::engine::offload::Offloaded;
use crate::engine::reader::{Closed, Event, Reader, Sink, Stop};
pub use crate::engine::shape::BulkShape;
use crate::engine::stream::{Input, Output};
use crate::engine::writer::{Handled, RunResult, StreamEnd, Writer};
use crate::operands::CopyPlan;
use crate::sys::buffer::AlignedBuf;

/// Which backend runs a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// One thread, read then write (GNU dd's way).
    Sync,
    /// One thread, read then write, in large requests: for two ends on
    /// one disk, where overlapping would make it seek back and forth.
    Sequential,
    /// A reader thread feeding the writer through a pool of buffers.
    Threads { queue_depth: usize },
    /// io_uring: up to the queue depth of reads and writes in flight, for
    /// copies in bulk requests; threads for everything else (pipes,
    /// per-record flags, conversions) and where the kernel refuses a ring.
    Uring { queue_depth: usize },
}

/// The default number of records in flight for the threads backend.
pub const DEFAULT_QUEUE_DEPTH: usize = 8;

/// How a copy is shaped, beyond the backend: bulk requests, and kernel
/// offload first (with the unit its requests keep to).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shaping {
    pub bulk: Option<BulkShape>,
    pub offload_unit: Option<usize>,
    /// What becomes of the pages the copy brings into the page cache
    /// (see `planner::cache`): the output's on every path that writes
    /// through the cache, the input's behind bulk and kernel reads.
    pub cache: CachePolicy,
    /// Move records with splice(2) (a pipe end; see
    /// `planner::splice_fits`); in-line backends only.
    pub splice: bool,
    /// `--trim`: the writer discards zero blocks and holes on the output,
    /// so it must see every byte (no kernel copy writes past it).
    pub trim: bool,
}

/// The reader thread's stack: it keeps no large data on it, and a small
/// stack keeps ddx within tight virtual-memory limits.
const READER_STACK: usize = 256 * 1024;

/// Offload requests: large, since the kernel does the work.
const OFFLOAD_REQUEST: u64 = 64 << 20;

/// How one copy is to run: the planner's choice, and the hasher's tap
/// (`--hash`, `--verify`), which the writer hands every byte it is given.
pub struct How {
    pub backend: Backend,
    pub shaping: Shaping,
    pub tap: Option<crate::integrity::Tap>,
}

/// Run the copy; returns the result and the input (for closing), which is
/// absent if the reader thread could not be taken back.
pub fn run(
    how: How,
    plan: Arc<CopyPlan>,
    input: Input,
    output: &mut Output,
    counters: &Counters,
    events: &dyn Events,
) -> (RunResult, Option<Input>) {
    let How {
        backend,
        shaping,
        tap,
    } = how;
    let input_drop_after = shaping
        .cache
        .drops_after()
        .filter(|_| shaping.bulk.is_some());
    let mut reader =
        Reader::new(Arc::clone(&plan), input).with_bulk(shaping.bulk, input_drop_after);
    let mut writer = Writer::new(Arc::clone(&plan), output, counters, events)
        .with_mapped_holes(shaping.bulk.is_some_and(|shape| shape.mapped_holes))
        .with_cache(shaping.cache)
        .with_trim(shaping.trim)
        .with_tap(tap);
    // io_uring writes by itself, past the writer: not when the writer
    // must see the bytes (--hash, --verify, --trim).
    let uring = match (backend, shaping.bulk) {
        (Backend::Uring { queue_depth }, Some(shape)) if !writer.has_tap() && !shaping.trim => {
            Some((shape, queue_depth.max(1)))
        }
        _ => None,
    };
    // A kernel copy starts where skip= and seek= leave the two ends; the
    // ordinary way runs them itself (a second skip phase is a no-op).
    if shaping.offload_unit.is_some() || uring.is_some() {
        if let Err(end) = skip_and_seek(&mut reader, &mut writer) {
            return (writer.conclude(end), Some(reader.into_input()));
        }
    }
    let mut offload_stopped = false;
    if let Some(unit) = shaping.offload_unit {
        match try_offload(&plan, unit, &mut reader, &mut writer) {
            Kernel::Done(end) => return (writer.conclude(end), Some(reader.into_input())),
            Kernel::Stopped => offload_stopped = true,
            Kernel::NotHere => {}
        }
    }
    if let (Some((shape, queue_depth)), false) = (uring, offload_stopped) {
        let uring = try_uring(
            &plan,
            shape,
            queue_depth,
            &mut reader,
            &mut writer,
            counters,
        );
        if let Kernel::Done(end) = uring {
            return (writer.conclude(end), Some(reader.into_input()));
        }
    }
    match backend {
        Backend::Sync | Backend::Sequential => {
            let splice_to = shaping
                .splice
                .then(|| writer.output_fd()?.try_clone_to_owned().ok())
                .flatten();
            let reader = reader.with_splice(splice_to);
            let mut sink = InlineSink {
                writer: &mut writer,
                spare: None,
                end: None,
            };
            let input = reader.run(&mut sink);
            let end = sink.end.take().unwrap_or(Err(Stop::Quit));
            (writer.conclude(end), Some(input))
        }
        Backend::Threads { queue_depth } | Backend::Uring { queue_depth } => {
            run_threads(reader, &mut writer, queue_depth.max(1))
        }
    }
}

/// How a copy handed to the kernel (offload, io_uring) went.
enum Kernel {
    /// The copy is over.
    Done(StreamEnd),
    /// Stopped part way, at a record boundary the reader and writer have
    /// been moved to: go on the ordinary way, which meets the error again.
    Stopped,
    /// Not possible here; nothing was copied.
    NotHere,
}

/// skip= and seek=, ahead of a kernel copy: Err(end) if the copy ends there.
fn skip_and_seek(reader: &mut Reader, writer: &mut Writer<'_>) -> Result<(), StreamEnd> {
    let mut sink = InlineSink {
        writer,
        spare: None,
        end: None,
    };
    match reader.skip_phase(&mut sink) {
        Ok(true) => Ok(()),
        _ => Err(sink.end.take().unwrap_or(Err(Stop::Quit))),
    }
}

/// The bytes the stream will carry, where the input's size tells: what
/// it holds past the offset and skip=, capped by count=.
pub fn stream_total(plan: &CopyPlan, input: &Input) -> Option<u64> {
    let size = input.stream.size().ok().flatten()?;
    let skip = plan.skip.total_bytes(plan.input_block_size)?;
    let left = size.saturating_sub((input.offset.max(0) as u64).saturating_add(skip));
    Some(left.min(count_limit(plan)))
}

/// The bytes count= allows, or no limit.
fn count_limit(plan: &CopyPlan) -> u64 {
    if plan.has_count() {
        plan.count
            .records
            .saturating_mul(plan.input_block_size as u64)
            .saturating_add(plan.count.bytes)
    } else {
        u64::MAX
    }
}

/// copy_file_range, after skip= and seek=.
fn try_offload(
    plan: &CopyPlan,
    unit: usize,
    reader: &mut Reader,
    writer: &mut Writer<'_>,
) -> Kernel {
    let limit = count_limit(plan);
    let chunk = (OFFLOAD_REQUEST / unit as u64).max(1) as usize * unit;
    // A second descriptor for the same open output (same offset), so that
    // the writer can count and drop pages while the kernel copies.
    let Some(Ok(output_fd)) = writer.output_fd().map(|fd| fd.try_clone_to_owned()) else {
        return Kernel::NotHere;
    };
    let Some(Ok(input_fd)) = reader.input_fd().map(|fd| fd.try_clone_to_owned()) else {
        return Kernel::NotHere;
    };
    let input_start = crate::sys::file::current_offset(input_fd.as_fd())
        .unwrap_or(0)
        .max(0) as u64;
    let mut observer = OffloadObserver(KernelTally::new(writer, input_fd.as_fd(), input_start));
    let outcome = crate::engine::offload::copy_range(
        input_fd.as_fd(),
        output_fd.as_fd(),
        limit,
        chunk,
        unit,
        &mut observer,
    );
    after_kernel_copy(outcome, reader, observer.0.finish())
}

/// The io_uring copy, after skip= and seek=; an input with holes is left
/// to the bulk reader, which does not read them.
fn try_uring(
    plan: &CopyPlan,
    shape: BulkShape,
    queue_depth: usize,
    reader: &mut Reader,
    writer: &mut Writer<'_>,
    counters: &Counters,
) -> Kernel {
    if plan.conv.contains(crate::operands::Conv::SPARSE) {
        return Kernel::NotHere;
    }
    let (Some(Ok(input_fd)), Some(Ok(output_fd))) = (
        reader.input_fd().map(|fd| fd.try_clone_to_owned()),
        writer.output_fd().map(|fd| fd.try_clone_to_owned()),
    ) else {
        return Kernel::NotHere;
    };
    let offset = |fd| {
        crate::sys::file::current_offset(fd)
            .ok()
            .map(|o| o.max(0) as u64)
    };
    let (Some(input_start), Some(output_start)) =
        (offset(input_fd.as_fd()), offset(output_fd.as_fd()))
    else {
        return Kernel::NotHere;
    };
    if shape.sparse_input && crate::sys::file::has_hole_after(input_fd.as_fd(), input_start) {
        return Kernel::NotHere;
    }
    let job = crate::engine::uring::Job {
        input: input_fd.as_fd(),
        output: output_fd.as_fd(),
        input_start,
        output_start,
        limit: count_limit(plan),
        chunk: shape.chunk,
        queue_depth,
    };
    let mut observer = UringObserver {
        tally: KernelTally::new(writer, input_fd.as_fd(), input_start),
        output_start,
    };
    let outcome = crate::engine::uring::copy(job, &mut observer);
    match outcome {
        Offloaded::Complete { bytes } | Offloaded::Stopped { bytes } => {
            counters.bytes_by_uring.store(bytes, Ordering::Release);
        }
        Offloaded::Unsupported => counters.uring_unavailable.store(true, Ordering::Release),
    }
    after_kernel_copy(outcome, reader, observer.tally.finish())
}

fn after_kernel_copy(outcome: Offloaded, reader: &mut Reader, writer: &mut Writer<'_>) -> Kernel {
    match outcome {
        Offloaded::Complete { bytes } => {
            writer.offloaded_end(bytes);
            let late = reader.end_of_offload();
            Kernel::Done(
                match writer.handle(Event::End {
                    failed: false,
                    late,
                }) {
                    Ok(Handled::Done { failed, late }) => Ok((failed, late)),
                    Ok(Handled::Continue(_)) => Ok((false, None)),
                    Err(stop) => Err(stop),
                },
            )
        }
        Offloaded::Stopped { bytes } => {
            reader.resume_after_offload(bytes);
            Kernel::Stopped
        }
        Offloaded::Unsupported => Kernel::NotHere,
    }
}

/// What the kernel's copies (copy_file_range, io_uring) report to, alike:
/// the writer's counts, and drop-behind on the input.
struct KernelTally<'w, 'a, 'f> {
    writer: &'w mut Writer<'a>,
    input_fd: std::os::fd::BorrowedFd<'f>,
    input_start: u64,
    input_behind: Option<DropBehind>,
}

impl<'w, 'a, 'f> KernelTally<'w, 'a, 'f> {
    fn new(
        writer: &'w mut Writer<'a>,
        input_fd: std::os::fd::BorrowedFd<'f>,
        input_start: u64,
    ) -> Self {
        KernelTally {
            input_behind: writer
                .drops_after()
                .map(|after| DropBehind::new(false, after)),
            input_fd,
            input_start,
            writer,
        }
    }

    /// `len` bytes of input are about to be read, `offset` bytes into the
    /// copy.
    fn before_read(&mut self, offset: u64, len: u64) {
        if let Some(behind) = &mut self.input_behind {
            behind.before(self.input_fd, self.input_start + offset, len);
        }
    }

    /// `copied` bytes are copied in all.
    fn after(&mut self, copied: u64) {
        let before = self.writer.bytes_out();
        if let Some(behind) = &mut self.input_behind {
            behind.after(self.input_fd, copied - before);
        }
        self.writer.offloaded(copied);
    }

    /// The copy is over: the input's last pages dropped, the writer back.
    fn finish(mut self) -> &'w mut Writer<'a> {
        if let Some(behind) = &mut self.input_behind {
            behind.finish(self.input_fd);
        }
        self.writer
    }
}

/// Counts and drop-behind while io_uring copies.
struct UringObserver<'w, 'a, 'f> {
    tally: KernelTally<'w, 'a, 'f>,
    output_start: u64,
}

impl crate::engine::uring::Observer for UringObserver<'_, '_, '_> {
    fn before_read(&mut self, offset: u64, len: u64) {
        self.tally.before_read(offset, len);
    }

    fn before_write(&mut self, offset: u64, len: u64) {
        self.tally
            .writer
            .behind_before_at(self.output_start + offset, len);
    }

    fn after(&mut self, copied: u64) {
        self.tally.after(copied);
    }
}

/// Counts and drop-behind while the kernel copies.
struct OffloadObserver<'w, 'a, 'f>(KernelTally<'w, 'a, 'f>);

impl crate::engine::offload::Observer for OffloadObserver<'_, '_, '_> {
    fn before(&mut self, copied: u64, want: u64) {
        self.0.before_read(copied, want);
        self.0.writer.offload_before(want);
    }

    fn after(&mut self, copied: u64) {
        self.0.after(copied);
    }
}

/// The sync backend's sink: every event is handled as soon as it is sent.
struct InlineSink<'w, 'a> {
    writer: &'w mut Writer<'a>,
    /// The one buffer, back from the writer.
    spare: Option<AlignedBuf>,
    /// How the stream ended, once it has.
    end: Option<StreamEnd>,
}

impl InlineSink<'_, '_> {
    /// Go on, or keep how the stream ended.
    #[inline(always)]
    fn settle(&mut self, handled: Result<Handled, Stop>) -> Result<(), Closed> {
        match handled {
            Ok(Handled::Continue(buf)) => {
                if buf.is_some() {
                    self.spare = buf;
                }
                Ok(())
            }
            Ok(Handled::Done { failed, late }) => {
                self.end = Some(Ok((failed, late)));
                Err(Closed)
            }
            Err(stop) => {
                self.end = Some(Err(stop));
                Err(Closed)
            }
        }
    }
}

impl Sink for InlineSink<'_, '_> {
    fn send(&mut self, event: Event) -> Result<(), Closed> {
        if self.end.is_some() {
            return Err(Closed);
        }
        let handled = self.writer.handle(event);
        self.settle(handled)
    }

    #[inline(always)]
    fn write_now(
        &mut self,
        buf: &mut AlignedBuf,
        len: usize,
        full: bool,
    ) -> Option<Result<(), Closed>> {
        if self.end.is_some() {
            return Some(Err(Closed));
        }
        let handled = self.writer.record_now(buf, len, full)?;
        Some(self.settle(handled))
    }

    fn buffer(&mut self, len: usize) -> Result<AlignedBuf, Option<Closed>> {
        match self.spare.take() {
            Some(buf) if buf.len() >= len => Ok(buf),
            _ => AlignedBuf::new(len).map_err(|_| None),
        }
    }
}

/// The threads backend's sink, on the reader thread.
struct ChannelSink {
    events: SyncSender<Event>,
    free: Receiver<AlignedBuf>,
    allocated: usize,
    queue_depth: usize,
    waiting: Waiting,
}

impl Sink for ChannelSink {
    fn send(&mut self, event: Event) -> Result<(), Closed> {
        self.events.send(event).map_err(|_| Closed)
    }

    fn buffer(&mut self, len: usize) -> Result<AlignedBuf, Option<Closed>> {
        if let Ok(buf) = self.free.try_recv() {
            return Ok(buf);
        }
        if self.allocated < self.queue_depth {
            self.allocated += 1;
            return AlignedBuf::new(len).map_err(|_| None);
        }
        self.waiting.recv(&self.free).map_err(|_| Some(Closed))
    }
}

fn run_threads(
    reader: Reader,
    writer: &mut Writer<'_>,
    queue_depth: usize,
) -> (RunResult, Option<Input>) {
    let reads_return = reader.input_seekable();
    let detach = reader.input_has_descriptor();
    let (event_tx, event_rx) = sync_channel::<Event>(queue_depth);
    let mut waiting = Waiting::for_this_machine();
    let (free_tx, free_rx): (Sender<AlignedBuf>, Receiver<AlignedBuf>) = channel();
    // The reader waits in a slot so that it can be taken back if no thread
    // can be made (a tight `ulimit -v`): the copy then runs in turn.
    let slot = Arc::new(std::sync::Mutex::new(Some(reader)));
    let thread_slot = Arc::clone(&slot);
    let thread = std::thread::Builder::new()
        .name("ddx-reader".into())
        .stack_size(READER_STACK)
        .spawn(move || {
            // The reader only uses its input, which its private copy of the
            // descriptor table keeps; the writer's syscalls stay fast. Not
            // for an end without a descriptor: it may open connections
            // later (an object's client), which must be in the one table.
            if detach {
                crate::sys::threads::detach_fd_table();
            }
            let reader = thread_slot.lock().ok().and_then(|mut r| r.take())?;
            let mut sink = ChannelSink {
                events: event_tx,
                free: free_rx,
                allocated: 0,
                queue_depth,
                waiting,
            };
            Some(reader.run(&mut sink))
        });
    let thread = match thread {
        Ok(thread) => thread,
        Err(_) => {
            let reader = slot.lock().ok().and_then(|mut r| r.take());
            let Some(reader) = reader else {
                return (RunResult::Died, None);
            };
            let mut sink = InlineSink {
                writer,
                spare: None,
                end: None,
            };
            let input = reader.run(&mut sink);
            let end = sink.end.take().unwrap_or(Err(Stop::Quit));
            return (writer.conclude(end), Some(input));
        }
    };

    let mut end = Err(Stop::Quit);
    while let Ok(event) = waiting.recv(&event_rx) {
        match writer.handle(event) {
            Ok(Handled::Continue(Some(buf))) => {
                let _ = free_tx.send(buf);
            }
            Ok(Handled::Continue(None)) => {}
            Ok(Handled::Done { failed, late }) => {
                end = Ok((failed, late));
                break;
            }
            Err(stop) => {
                end = Err(stop);
                break;
            }
        }
    }
    // Unblock a reader waiting to send or for a buffer, then take it back
    // if it is done, or soon will be: one in a read(2) of a file returns
    // (and the input goes back to where GNU dd would have left it, see
    // `Input::give_back_read_ahead`); one stuck in a read(2) on a pipe is
    // left behind (the process exits soon), as GNU dd would not have read
    // further either.
    drop(event_rx);
    drop(free_tx);
    let input = if thread.is_finished() || end.is_ok() || reads_return {
        thread.join().ok().flatten()
    } else {
        None
    };
    (writer.conclude(end), input)
}
