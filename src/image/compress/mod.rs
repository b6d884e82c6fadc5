//! `--compress=ALG[:LEVEL]`: an output end that writes the stream
//! compressed into another end, on every core.
//!
//! zstd and gzip are cut into frames (members) of [`FRAME`] bytes,
//! compressed independently by a pool of workers and written in order by
//! one driver thread. Independent frames are what lets `--decompress` go
//! parallel again (one zstd frame per file, as the zstd tool writes even
//! with `-T`, can only be decoded on one core), and every frame records
//! its content size. The zstd crate's own multi-threaded mode (zstdmt)
//! was not used: it makes one frame of the whole stream unless ended, and
//! ending a frame makes it wait for all its jobs, idling the cores at
//! every boundary; the pool keeps them busy and needs no C threads.
//! `gzip -d` reads concatenated members as one file. xz goes through
//! liblzma's multi-threaded encoder, which writes one stream of blocks
//! that record their sizes, the form liblzma's threaded decoder splits.
//!
//! A frame's end is a place a copy can resume from: the output is told
//! so ([`Stream::mark_resume_points`] at the start, [`Stream::resume_point`]
//! after each frame with the input offset it ends at), and an upload
//! ends its parts there, so that `--resume` starts a new frame where the
//! stored parts end.
//!
//! Writes are behind: [`Stream::write`] queues the bytes and returns, and an
//! error of the output end (ENOSPC...) surfaces on a later write, sync or
//! close; [`Stream::written_until`] then says how much of the *uncompressed*
//! stream is known to be in the output: the frames written whole for zstd
//! and gzip, and for xz what the last sync flushed (liblzma does not say
//! which blocks its output holds in between).
//!
//! [`Stream::settle`] and [`Stream::sync`] end the current frame or block and
//! wait for the output to have everything so far (sync then syncs it).
//! [`Stream::close`] (or [`Stream::finalise`] before it, which also finalises
//! the output and keeps its error's detail) finishes the stream (xz's
//! index and footer) and, if the output was synced before (conv=fsync),
//! syncs it again so that the end of the stream is as durable as the
//! rest. [`Stream::abandon`] leaves a
//! stream that says it is cut short: zstd and gzip get the start of a
//! frame that never comes (so `zstd -d`/`gzip -d` report truncation
//! instead of a complete, shorter file), xz is left without its footer.

mod spec;
mod zstd_frame;

pub use spec::{Algorithm, Compression, SpecError};

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use liblzma::stream::{Action, Check, MtStreamBuilder, Status, Stream as XzStream};

use crate::ends::{Kind, Whence};
use crate::engine::stream::Stream;
use crate::image::chunks::{next_job, BufferPool, Fault};
use crate::sys::Errno;
use zstd_frame::FrameCompressor;

/// Uncompressed bytes per zstd frame or gzip member.
pub const FRAME: usize = 16 << 20;
/// Uncompressed bytes per hand-over to the xz encoder.
const XZ_BATCH: usize = 1 << 20;
/// Compressed bytes per write to the output, for xz.
const XZ_OUT: usize = 1 << 20;
/// Workers beyond this add memory (two frames each) more than speed.
const MAX_WORKERS: usize = 16;

/// What the driver does next, in stream order.
enum Step {
    Frame {
        compressed: Receiver<Result<Vec<u8>, String>>,
        /// Uncompressed offset at the frame's end.
        end: u64,
    },
    /// Bytes for the xz encoder.
    Data(Vec<u8>),
    Sync {
        data_only: bool,
        reply: SyncSender<()>,
    },
    /// Everything so far written out (no sync).
    Settle(SyncSender<()>),
    Finish,
    Abandon,
}

struct Job {
    data: Vec<u8>,
    result: SyncSender<Result<Vec<u8>, String>>,
}

/// State the driver shares with the end.
#[derive(Debug, Default)]
struct Shared {
    failed: AtomicBool,
    failure: Mutex<Option<Fault>>,
    written_until: AtomicU64,
    compressed: Arc<AtomicU64>,
    /// Where each frame (or xz flush) ends, in the output and in the
    /// stream: what the output stores translates back into the stream.
    ends: Mutex<Vec<(u64, u64)>>,
}

impl Shared {
    fn fail(&self, failure: Fault) {
        if let Ok(mut slot) = self.failure.lock() {
            if slot.is_none() {
                *slot = Some(failure);
            }
        }
        self.failed.store(true, Ordering::Release);
    }

    fn failure(&self) -> Option<Fault> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.failure.lock().ok().and_then(|slot| slot.clone())
    }
}

/// An output end written compressed.
#[derive(Debug)]
pub struct Compressed {
    compression: Compression,
    batch: usize,
    pending: Vec<u8>,
    /// Uncompressed bytes accepted so far.
    accepted: u64,
    /// The output holds frames of an earlier run (a resumed upload): an
    /// empty stream is not one empty frame then, but nothing.
    continued: bool,
    pool: Arc<BufferPool>,
    steps: SyncSender<Step>,
    jobs: Option<SyncSender<Job>>,
    workers: Vec<JoinHandle<()>>,
    /// Taken when the threads are stopped (see `stop`).
    driver: Option<JoinHandle<Box<dyn Stream>>>,
    /// The output, once the stream is ended by [`Stream::finalise`].
    finalised: Option<Box<dyn Stream>>,
    shared: Arc<Shared>,
    detail: Option<String>,
    /// A whole frame of zeros, compressed once and written again for
    /// every frame of a run of zeros (`End::write_zeroes`): a disk's
    /// unused space comes as long runs of them, and compressing each
    /// frame of zeros anew would cost more than reading the used data.
    zero_frame: Option<Vec<u8>>,
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Step")
    }
}

impl Compressed {
    /// Compress into `output` with up to `threads` threads.
    pub fn start(
        mut output: Box<dyn Stream>,
        compression: Compression,
        threads: usize,
    ) -> Compressed {
        let threads = threads.clamp(1, MAX_WORKERS);
        let shared = Arc::new(Shared::default());
        let framed = compression.algorithm != Algorithm::Xz;
        // A frame's end is a place a copy can resume from (a new frame
        // starts from that input offset): an upload ends its parts there.
        let continued = framed && output.mark_resume_points();
        let batch = if framed { FRAME } else { XZ_BATCH };
        let pool = BufferPool::new(2 * threads + 4);
        let (steps_tx, steps_rx) = sync_channel(threads + 1);
        let mut workers = Vec::new();
        let jobs = framed.then(|| {
            let (jobs_tx, jobs_rx) = sync_channel::<Job>(threads);
            let jobs_rx = Arc::new(Mutex::new(jobs_rx));
            for n in 0..threads {
                let jobs_rx = Arc::clone(&jobs_rx);
                let pool = Arc::clone(&pool);
                workers.push(
                    std::thread::Builder::new()
                        .name(format!("ddx-{}-{n}", compression.algorithm))
                        .spawn(move || worker(&jobs_rx, compression, &pool))
                        .expect("spawning a compression thread"),
                );
            }
            jobs_tx
        });
        let driver = {
            let shared = Arc::clone(&shared);
            let pool = Arc::clone(&pool);
            std::thread::Builder::new()
                .name(format!("ddx-{}-out", compression.algorithm))
                .spawn(move || drive(output, steps_rx, &shared, &pool, compression, threads))
                .expect("spawning the compressed writer thread")
        };
        Compressed {
            compression,
            batch,
            pending: Vec::new(),
            accepted: 0,
            continued,
            pool,
            steps: steps_tx,
            jobs,
            workers,
            driver: Some(driver),
            finalised: None,
            shared,
            detail: None,
            zero_frame: None,
        }
    }

    /// The compressed frame of [`FRAME`] zeros, made on first use.
    fn zero_frame(&mut self) -> Result<Vec<u8>, Errno> {
        if let Some(frame) = &self.zero_frame {
            return Ok(frame.clone());
        }
        let zeros = vec![0u8; self.batch];
        let made = match self.compression.algorithm {
            Algorithm::Zstd => zstd_frame(&mut None, self.compression.level, &zeros),
            Algorithm::Gzip => gzip_member(self.compression.level, &zeros),
            Algorithm::Xz => unreachable!("xz has no frames"),
        };
        let frame = made.map_err(|why| {
            self.detail = Some(format!(
                "{} compression failed: {why}",
                self.compression.algorithm
            ));
            Errno::IO
        })?;
        self.zero_frame = Some(frame.clone());
        Ok(frame)
    }

    /// Hand on a frame of zeros already compressed, in stream order.
    fn submit_zero_frame(&mut self) -> Result<(), Errno> {
        let frame = self.zero_frame()?;
        let (result, compressed) = sync_channel(1);
        let _ = result.send(Ok(frame));
        self.accepted += self.batch as u64;
        let end = self.accepted;
        if self.steps.send(Step::Frame { compressed, end }).is_err() {
            return Err(self.failed().unwrap_or(Errno::IO));
        }
        Ok(())
    }

    /// Compressed bytes written to the output so far (for the report).
    pub fn compressed_bytes(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.shared.compressed)
    }

    pub fn compression(&self) -> Compression {
        self.compression
    }

    fn failed(&mut self) -> Option<Errno> {
        let failure = self.shared.failure()?;
        self.detail = Some(failure.detail);
        Some(failure.errno)
    }

    /// Hand the pending bytes on.
    fn submit(&mut self) -> Result<(), Errno> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.submit_frame()
    }

    /// Hand the pending bytes on as a frame, even none: an empty stream
    /// is still one frame, as the zstd and gzip tools write it.
    fn submit_frame(&mut self) -> Result<(), Errno> {
        let mut next = self.pool.take();
        next.clear();
        let data = std::mem::replace(&mut self.pending, next);
        let gone = |me: &mut Compressed| me.failed().unwrap_or(Errno::IO);
        match &self.jobs {
            Some(jobs) => {
                let (result, compressed) = sync_channel(1);
                if jobs.send(Job { data, result }).is_err() {
                    return Err(gone(self));
                }
                let end = self.accepted;
                if self.steps.send(Step::Frame { compressed, end }).is_err() {
                    return Err(gone(self));
                }
            }
            None => {
                if self.steps.send(Step::Data(data)).is_err() {
                    return Err(gone(self));
                }
            }
        }
        Ok(())
    }

    /// Take `len` bytes from `fill` into the stream.
    fn accept(
        &mut self,
        mut len: usize,
        fill: impl Fn(&mut Vec<u8>, usize, usize),
    ) -> Result<(), Errno> {
        if let Some(errno) = self.failed() {
            return Err(errno);
        }
        let mut from = 0;
        while len > 0 {
            if self.pending.capacity() < self.batch {
                self.pending.reserve(self.batch - self.pending.len());
            }
            let n = (self.batch - self.pending.len()).min(len);
            fill(&mut self.pending, from, n);
            from += n;
            len -= n;
            self.accepted += n as u64;
            if self.pending.len() == self.batch {
                self.submit()?;
            }
        }
        Ok(())
    }

    /// Halt the threads after `last`; the output end back.
    fn finish(mut self, last: Step) -> (Box<dyn Stream>, Arc<Shared>, Option<String>) {
        let output = match self.finalised.take() {
            Some(output) => output,
            None => self.stop(last),
        };
        (output, self.shared, self.detail)
    }

    /// Send `last`, let the workers and the driver end; the output end.
    fn stop(&mut self, last: Step) -> Box<dyn Stream> {
        let _ = self.steps.send(last);
        drop(self.jobs.take());
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
        self.driver
            .take()
            .expect("stopped once")
            .join()
            .expect("the compressed writer does not panic")
    }
}

impl Stream for Compressed {
    fn kind(&self) -> Kind {
        Kind::Stream
    }

    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        self.accept(buf.len(), |pending, from, n| {
            pending.extend_from_slice(&buf[from..from + n])
        })?;
        Ok(buf.len())
    }

    /// The zeros go into the stream; every whole frame of them is the
    /// same frame, compressed once.
    fn write_zeroes(&mut self, len: u64) -> Result<(), Errno> {
        let batch = self.batch as u64;
        let mut left = len;
        while left > 0 {
            if self.jobs.is_some() && self.pending.is_empty() && left >= batch {
                if let Some(errno) = self.failed() {
                    return Err(errno);
                }
                self.submit_zero_frame()?;
                left -= batch;
                continue;
            }
            // Up to the next frame's start, or what is left.
            let n = left.min(batch - self.pending.len() as u64) as usize;
            self.accept(n, |pending, _, n| pending.resize(pending.len() + n, 0))?;
            left -= n as u64;
        }
        Ok(())
    }

    fn seek(&mut self, _to: Whence) -> Result<u64, Errno> {
        Err(Errno::SPIPE)
    }

    fn size(&self) -> Result<Option<u64>, Errno> {
        Ok(None)
    }

    /// Ends the current frame (or xz block), waits until everything
    /// accepted so far is in the output, and syncs the output.
    fn sync(&mut self, data_only: bool) -> Result<(), Errno> {
        self.submit()?;
        let (reply, done) = sync_channel(1);
        if self.steps.send(Step::Sync { data_only, reply }).is_err() || done.recv().is_err() {
            return Err(self.failed().unwrap_or(Errno::IO));
        }
        match self.failed() {
            Some(errno) => Err(errno),
            None => Ok(()),
        }
    }

    fn written_until(&self) -> Option<u64> {
        Some(self.shared.written_until.load(Ordering::Acquire))
    }

    /// Ends the current frame (or xz block) and waits until everything
    /// accepted so far is in the output: its errors, with their detail,
    /// come here rather than from close.
    fn settle(&mut self) -> Result<(), Errno> {
        // Settled even after a failure: what the output stores is then
        // what `written_until` says.
        let submitted = self.submit();
        let (reply, done) = sync_channel(1);
        if self.steps.send(Step::Settle(reply)).is_err() || done.recv().is_err() {
            return Err(self.failed().unwrap_or(Errno::IO));
        }
        submitted?;
        match self.failed() {
            Some(errno) => Err(errno),
            None => Ok(()),
        }
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    /// Ends the stream (the last frame, xz's footer) and finalises the
    /// output (completes an upload), whose error and detail come here.
    fn finalise(&mut self, copy_failed: bool) -> Result<(), Errno> {
        if self.finalised.is_none() {
            let submitted = if self.accepted == 0 && self.jobs.is_some() && !self.continued {
                self.submit_frame()
            } else {
                self.submit()
            };
            let output = self.stop(Step::Finish);
            self.finalised = Some(output);
            // After a failed copy, a failure of the stream is that copy's,
            // said already: the output is still finalised as a failed
            // copy's (an upload kept for --resume, or aborted).
            if let Some(errno) = submitted.err().or(self.failed()) {
                if !copy_failed {
                    return Err(errno);
                }
                self.detail = None;
            }
        }
        let output = self.finalised.as_mut().expect("set above");
        output.finalise(copy_failed).inspect_err(|_| {
            self.detail = output.take_detail();
            // What the output stores of the stream, now that it failed.
            stored_in_output(output.as_mut(), &self.shared);
        })
    }

    fn close(self: Box<Self>) -> Result<(), Errno> {
        match self.finalised {
            Some(output) => output.close(),
            None => (*self).end_stream(false),
        }
    }
    fn close_failed(self: Box<Self>) -> Result<(), Errno> {
        match self.finalised {
            Some(output) => output.close_failed(),
            None => (*self).end_stream(true),
        }
    }
    fn abandon(self: Box<Self>) {
        let (output, _, _) = self.finish(Step::Abandon);
        output.abandon();
    }
}

impl Compressed {
    /// Finish the compressed stream and close the output, as
    /// `End::close_failed` when the copy failed.
    fn end_stream(mut self, copy_failed: bool) -> Result<(), Errno> {
        let submitted = if self.accepted == 0 && self.jobs.is_some() && !self.continued {
            self.submit_frame()
        } else {
            self.submit()
        };
        let (output, shared, _) = self.finish(Step::Finish);
        match submitted.err().or(shared.failure().map(|f| f.errno)) {
            None if copy_failed => output.close_failed(),
            None => output.close(),
            Some(errno) => {
                output.abandon();
                Err(errno)
            }
        }
    }
}

fn worker(jobs: &Mutex<Receiver<Job>>, compression: Compression, pool: &BufferPool) {
    let mut zstd = None;
    while let Some(job) = next_job(jobs) {
        let result = match compression.algorithm {
            Algorithm::Zstd => zstd_frame(&mut zstd, compression.level, &job.data),
            Algorithm::Gzip => gzip_member(compression.level, &job.data),
            Algorithm::Xz => unreachable!("xz has no frame workers"),
        };
        pool.give(job.data);
        let _ = job.result.send(result);
    }
}

fn zstd_frame(
    compressor: &mut Option<FrameCompressor>,
    level: i32,
    data: &[u8],
) -> Result<Vec<u8>, String> {
    if compressor.is_none() {
        *compressor = Some(FrameCompressor::new(level)?);
    }
    compressor.as_mut().expect("made above").frame(data)
}

fn gzip_member(level: i32, data: &[u8]) -> Result<Vec<u8>, String> {
    let out = Vec::with_capacity(data.len() / 2 + 64);
    let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::new(level as u32));
    encoder.write_all(data).map_err(|e| e.to_string())?;
    encoder.finish().map_err(|e| e.to_string())
}

/// What the output stores, once its requests in flight are settled (an
/// upload's parts the server took, where a later part failed), as the
/// stream's bytes: the last frame (or xz flush) that ends within it. The
/// output took more than it stores where it writes behind; what the
/// copy stored is what a failed copy's statistics give.
fn stored_in_output(end: &mut dyn Stream, shared: &Shared) {
    let _ = end.settle();
    let Some(stored) = end.written_until() else {
        return;
    };
    let Ok(ends) = shared.ends.lock() else {
        return;
    };
    let held = ends
        .iter()
        .rev()
        .find(|&&(compressed, _)| compressed <= stored)
        .map_or(0, |&(_, end)| end);
    shared.written_until.fetch_min(held, Ordering::AcqRel);
}

impl Shared {
    /// A frame (or xz flush) ends at `compressed` in the output and at
    /// `end` in the stream.
    fn frame_ends(&self, compressed: u64, end: u64) {
        if let Ok(mut ends) = self.ends.lock() {
            ends.push((compressed, end));
        }
    }
}

/// The driver: takes the steps in order, writes the output, and gives the
/// output end back at the end.
fn drive(
    mut output: Box<dyn Stream>,
    steps: Receiver<Step>,
    shared: &Shared,
    pool: &BufferPool,
    compression: Compression,
    threads: usize,
) -> Box<dyn Stream> {
    let mut out = Output {
        end: &mut *output,
        offset: 0,
        shared,
        algorithm: compression.algorithm,
    };
    let mut xz = None;
    if compression.algorithm == Algorithm::Xz {
        match XzEncoder::new(compression.level, threads) {
            Ok(encoder) => xz = Some(encoder),
            Err(e) => shared.fail(Fault::new(
                Errno::NOMEM,
                format!("--compress=xz: liblzma cannot start its encoder: {e}"),
            )),
        }
    }
    let mut synced = None;
    let mut fed = 0u64;
    for step in steps {
        let failed = shared.failed.load(Ordering::Acquire);
        match step {
            Step::Frame { compressed, end } => {
                if failed {
                    continue;
                }
                match compressed.recv() {
                    Ok(Ok(bytes)) => {
                        if out.put(&bytes).is_ok() {
                            shared.written_until.store(end, Ordering::Release);
                            shared.frame_ends(out.offset, end);
                            out.end.resume_point(end);
                        }
                    }
                    Ok(Err(why)) => shared.fail(Fault::new(
                        Errno::IO,
                        format!("{} compression failed: {why}", compression.algorithm),
                    )),
                    Err(_) => shared.fail(Fault::new(
                        Errno::IO,
                        "a compression thread stopped".to_owned(),
                    )),
                }
            }
            Step::Data(data) => {
                if let (false, Some(xz)) = (failed, xz.as_mut()) {
                    fed += data.len() as u64;
                    let _ = xz.feed(&mut out, &data, Action::Run);
                }
                pool.give(data);
            }
            Step::Sync { data_only, reply } => {
                if !failed {
                    let flushed = match xz.as_mut() {
                        Some(xz) => xz.feed(&mut out, &[], Action::FullFlush),
                        None => Ok(()),
                    };
                    if flushed.is_ok() {
                        if xz.is_some() {
                            shared.written_until.store(fed, Ordering::Release);
                            shared.frame_ends(out.offset, fed);
                        }
                        out.sync(data_only);
                        synced = Some(data_only);
                    }
                }
                let _ = reply.send(());
            }
            Step::Settle(reply) => {
                if let (false, Some(xz)) = (failed, xz.as_mut()) {
                    if xz.feed(&mut out, &[], Action::FullFlush).is_ok() {
                        shared.written_until.store(fed, Ordering::Release);
                        shared.frame_ends(out.offset, fed);
                    }
                }
                stored_in_output(out.end, shared);
                let _ = reply.send(());
            }
            Step::Finish => {
                if failed {
                    stored_in_output(out.end, shared);
                } else {
                    if let Some(xz) = xz.as_mut() {
                        if xz.feed(&mut out, &[], Action::Finish).is_ok() {
                            shared.written_until.store(fed, Ordering::Release);
                        }
                    }
                    if let Some(data_only) = synced {
                        out.sync(data_only);
                    }
                }
                break;
            }
            Step::Abandon => {
                // A frame that starts and never ends: decoders report the
                // stream as truncated. Best effort: the copy failed anyway.
                let marker: &[u8] = match compression.algorithm {
                    Algorithm::Zstd => &[0x28, 0xB5, 0x2F, 0xFD],
                    Algorithm::Gzip => &[0x1F, 0x8B, 0x08],
                    Algorithm::Xz => &[],
                };
                if !marker.is_empty() {
                    let _ = out.put(marker);
                }
                break;
            }
        }
    }
    output
}

/// The output end as the driver writes it: whole buffers, counted, errors
/// recorded with where they happened.
struct Output<'a> {
    end: &'a mut dyn Stream,
    offset: u64,
    shared: &'a Shared,
    algorithm: Algorithm,
}

impl Output<'_> {
    fn put(&mut self, mut buf: &[u8]) -> Result<(), ()> {
        while !buf.is_empty() {
            let errno = match self.end.write(buf) {
                Ok(0) => Errno::NOSPC,
                Ok(n) => {
                    buf = &buf[n..];
                    self.offset += n as u64;
                    self.shared
                        .compressed
                        .fetch_add(n as u64, Ordering::Relaxed);
                    continue;
                }
                Err(Errno::INTR) => continue,
                Err(errno) => errno,
            };
            let said = self.end.take_detail();
            let mut detail = format!(
                "writing the {} stream failed at compressed offset {}",
                self.algorithm, self.offset
            );
            if let Some(said) = said {
                detail = format!("{said} ({detail})");
            }
            self.shared.fail(Fault::new(errno, detail));
            return Err(());
        }
        Ok(())
    }

    fn sync(&mut self, data_only: bool) {
        if let Err(errno) = self.end.sync(data_only) {
            let detail = self
                .end
                .take_detail()
                .unwrap_or_else(|| format!("syncing the {} stream failed", self.algorithm));
            self.shared.fail(Fault::new(errno, detail));
        }
    }
}

/// liblzma's multi-threaded encoder and its output buffer.
struct XzEncoder {
    stream: XzStream,
    out: Vec<u8>,
}

impl XzEncoder {
    fn new(level: i32, threads: usize) -> Result<XzEncoder, liblzma::stream::Error> {
        let stream = MtStreamBuilder::new()
            .threads(threads as u32)
            .preset(level as u32)
            .check(Check::Crc64)
            // liblzma's default block size (three dictionaries): blocks
            // record their sizes, so its threaded decoder can split them.
            .block_size(0)
            .timeout_ms(0)
            .encoder()?;
        Ok(XzEncoder {
            stream,
            out: Vec::with_capacity(XZ_OUT),
        })
    }

    /// Run `data` through the encoder with `action`, writing full output
    /// buffers; flushes and finishes go on until liblzma says they are
    /// done, and write what they produced.
    fn feed(&mut self, out: &mut Output<'_>, data: &[u8], action: Action) -> Result<(), ()> {
        let mut at = 0;
        loop {
            let before = self.stream.total_in();
            let status = self.stream.process_vec(&data[at..], &mut self.out, action);
            at += (self.stream.total_in() - before) as usize;
            let status = match status {
                Ok(status) => status,
                Err(e) => {
                    out.shared
                        .fail(Fault::new(Errno::IO, format!("xz compression failed: {e}")));
                    return Err(());
                }
            };
            let done = match action {
                Action::Run => at == data.len(),
                _ => status == Status::StreamEnd,
            };
            if self.out.len() == self.out.capacity() || (done && !matches!(action, Action::Run)) {
                out.put(&self.out)?;
                self.out.clear();
            }
            if done {
                return Ok(());
            }
        }
    }
}
