//! `--tee=OUT`: one stream written to several outputs at once.
//!
//! The first output is written by the engine's own thread, exactly as if
//! it were the only one: its results are what [`Stream::write`] returns, so
//! GNU's statistics and messages are the first output's. Every further
//! output has a thread of its own. How it gets the bytes depends on the
//! write's size:
//! - A large write ([`LEND_BYTES`] or more) onto outputs that are all
//!   addressed by position (files, block devices, NBD exports) is *lent*:
//!   every output writes the caller's own buffer at the same time, and
//!   the write returns when all are done with it. Nothing is copied, so
//!   two outputs cost the slower one's write; a copy per write would cost
//!   as much CPU as the write itself (a loop device over tmpfs, or a
//!   cached block device, is a memory copy). Should the first output
//!   accept less than the whole buffer (the end of the device), the
//!   others are sought back to where the first stands, so that every
//!   output holds the same stream.
//! - A small write, or one to a pipe or an object, is copied once into a
//!   shared, recycled, page-aligned buffer (O_DIRECT outputs need the
//!   alignment), however many outputs there are, and the others write it
//!   one step behind the first. Each output's queue is bounded in bytes
//!   ([`QUEUE_BYTES`]), so a slow output slows the copy rather than
//!   filling memory.
//!
//! An extra output that fails (ENOSPC, EIO, a removed device) is dropped:
//! its failure is kept for [`TeeReport`], which names it, and the others
//! go on. When the *first* output fails, the copy stops as GNU dd stops
//! (the engine sees the error); the others have at least everything the first
//! accepted before the failure, and are then closed or abandoned with it
//! (the engine abandons a failed copy). The first output is never
//! replaced by another: its statistics would no longer be GNU's.
//!
//! `sync` waits for every output, so `conv=fsync` means all of them.

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::ends::{Capabilities, Kind, Whence};
use crate::engine::stream::{Pipeline, Stream};
use crate::sys::buffer::AlignedBuf;
use crate::sys::{errno_text, Errno};
use crate::text::human::{human, Base};

/// Bytes one extra output may have queued.
pub const QUEUE_BYTES: u64 = 64 << 20;

/// The smallest write lent to the outputs rather than copied: below it,
/// waiting for every output at each write costs more than the copy (a
/// thread's wake-up is tens of microseconds here; copying 256 KiB takes
/// about as long).
pub const LEND_BYTES: usize = 256 << 10;

/// The smallest buffer the copy path maps: records of a few bytes share
/// a recycled page rather than each mapping its own.
const MIN_BLOCK: usize = 64 << 10;
const ZEROS: usize = 1 << 20;

/// What became of an extra output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    Running,
    /// Closed after the last byte (or abandoned with the copy).
    Closed,
    Abandoned,
    /// Dropped: what failed, after how many bytes.
    Failed {
        errno: Errno,
        detail: Option<String>,
        doing: &'static str,
    },
}

/// One extra output's account.
#[derive(Debug)]
pub struct OutputReport {
    pub name: String,
    bytes: AtomicU64,
    fate: Mutex<Fate>,
}

impl OutputReport {
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn fate(&self) -> Fate {
        self.fate.lock().map(|f| f.clone()).unwrap_or(Fate::Running)
    }

    fn set(&self, fate: Fate) {
        if let Ok(mut slot) = self.fate.lock() {
            if !matches!(*slot, Fate::Failed { .. }) {
                *slot = fate;
            }
        }
    }

    /// The line the copy's report prints for this output; `image`: the
    /// bytes of a block-mapped image the copy went through (`--bmap`),
    /// of which this output was written only the mapped blocks.
    pub fn line(&self, image: Option<u64>) -> String {
        let bytes = self.bytes();
        let size = sizes(bytes);
        match self.fate() {
            Fate::Failed {
                errno,
                detail,
                doing,
            } => {
                let detail = detail.map(|d| format!(" ({d})")).unwrap_or_default();
                format!(
                    "{}: dropped after {bytes} bytes{size}: {doing} failed: {}{detail}",
                    self.name,
                    errno_text(errno)
                )
            }
            Fate::Abandoned => format!(
                "{}: {bytes} bytes{size} written, stopped with the copy",
                self.name
            ),
            Fate::Closed | Fate::Running => match image {
                Some(image) => format!(
                    "{}: {image} bytes{} of image copied: {bytes} bytes{size} of mapped \
                     blocks written, the others left as they were",
                    self.name,
                    sizes(image)
                ),
                None => format!("{}: {bytes} bytes{size} copied", self.name),
            },
        }
    }
}

/// " (1.0 MB, 1.0 MiB)", as GNU's statistics give a byte count; nothing
/// for none.
fn sizes(bytes: u64) -> String {
    if bytes == 0 {
        return String::new();
    }
    format!(
        " ({}, {})",
        human(bytes, Base::Si, 1, 1),
        human(bytes, Base::Iec, 1, 1)
    )
}

/// Every extra output's account, shared with whoever reports the copy.
#[derive(Debug)]
pub struct TeeReport {
    pub outputs: Vec<OutputReport>,
}

impl TeeReport {
    /// One line per extra output, in order; `image` as for
    /// [`OutputReport::line`].
    pub fn lines(&self, image: Option<u64>) -> Vec<String> {
        self.outputs.iter().map(|o| o.line(image)).collect()
    }

    /// Whether some extra output was dropped (exit status 1).
    pub fn any_failed(&self) -> bool {
        self.outputs
            .iter()
            .any(|o| matches!(o.fate(), Fate::Failed { .. }))
    }
}

/// Bytes shared by the extra outputs; the buffer goes back to the pool
/// when the last of them is done with it.
struct Block {
    buf: Option<AlignedBuf>,
    len: usize,
    home: Arc<Mutex<Vec<AlignedBuf>>>,
}

impl Block {
    fn data(&self) -> &[u8] {
        self.buf
            .as_ref()
            .map_or(&[], |buf| &buf.as_slice()[..self.len])
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // Recycling memory, not finalising anything.
        if let (Ok(mut free), Some(buf)) = (self.home.lock(), self.buf.take()) {
            if free.len() < 64 {
                free.push(buf);
            }
        }
    }
}

/// The caller's buffer, lent to the extra outputs for one write.
struct Lent {
    ptr: *const u8,
    len: usize,
}

// SAFETY: a Lent is only made by `Tee::lend` from a slice the caller
// holds borrowed for the whole call, and `lend` returns only after every
// extra output's thread has replied that it is done with it (or has gone,
// dropping the command and the reply's sender with it, after its last use
// of the bytes). The bytes are only read, by one thread at a time per
// output, while the caller reads them too: shared reads of memory nobody
// writes.
unsafe impl Send for Lent {}

impl Lent {
    fn data(&self) -> &[u8] {
        // SAFETY: see `unsafe impl Send for Lent`: the slice is alive and
        // unchanged until the thread holding this Lent replies.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

enum Command {
    Write(Arc<Block>),
    WriteAt(Arc<Block>, u64),
    /// Write the lent bytes (at the offset, if any), then reply.
    Lend(Lent, Option<u64>, SyncSender<()>),
    Seek(u64),
    Truncate(u64),
    WriteZeroes(u64),
    Sync(bool, SyncSender<()>),
    Settle(SyncSender<()>),
    Pipeline(Pipeline),
    /// Close; `copy_failed`: as `End::close_failed` (an upload aborts).
    Close {
        copy_failed: bool,
    },
    Abandon,
}

impl Command {
    fn bytes(&self) -> u64 {
        match self {
            Command::Write(b) | Command::WriteAt(b, _) => b.len as u64,
            _ => 0,
        }
    }
}

/// Bytes queued for one output, bounded.
#[derive(Debug, Default)]
struct Budget {
    used: Mutex<u64>,
    freed: Condvar,
}

impl Budget {
    fn take(&self, n: u64) {
        let Ok(mut used) = self.used.lock() else {
            return;
        };
        while *used > 0 && *used + n > QUEUE_BYTES {
            match self.freed.wait(used) {
                Ok(guard) => used = guard,
                Err(_) => return,
            }
        }
        *used += n;
    }

    fn give(&self, n: u64) {
        if let Ok(mut used) = self.used.lock() {
            *used -= n.min(*used);
        }
        self.freed.notify_all();
    }
}

#[derive(Debug)]
struct Extra {
    /// Addressed by position, so that it can be lent a write and sought
    /// back after one.
    positional: bool,
    commands: Sender<Command>,
    budget: Arc<Budget>,
    thread: JoinHandle<()>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Command")
    }
}

/// The first output and the extra ones.
#[derive(Debug)]
pub struct Tee {
    first: Box<dyn Stream>,
    extras: Vec<Extra>,
    report: Arc<TeeReport>,
    free: Arc<Mutex<Vec<AlignedBuf>>>,
}

impl Tee {
    /// Close every output: the extras on their threads while the first
    /// closes here.
    fn close_all(self, copy_failed: bool) -> Result<(), Errno> {
        let Tee { first, extras, .. } = self;
        for extra in &extras {
            let _ = extra.commands.send(Command::Close { copy_failed });
        }
        let result = if copy_failed {
            first.close_failed()
        } else {
            first.close()
        };
        for extra in extras {
            drop(extra.commands);
            let _ = extra.thread.join();
        }
        result
    }

    /// `first` and the `(name, end)` extra outputs.
    pub fn new(first: Box<dyn Stream>, extras: Vec<(String, Box<dyn Stream>)>) -> Tee {
        let report = Arc::new(TeeReport {
            outputs: extras
                .iter()
                .map(|(name, _)| OutputReport {
                    name: name.clone(),
                    bytes: AtomicU64::new(0),
                    fate: Mutex::new(Fate::Running),
                })
                .collect(),
        });
        let extras = extras
            .into_iter()
            .enumerate()
            .map(|(index, (_, end))| {
                let positional = end.capabilities().writes_at;
                let (commands, queue) = channel();
                let budget = Arc::new(Budget::default());
                let thread = {
                    let budget = Arc::clone(&budget);
                    let report = Arc::clone(&report);
                    std::thread::Builder::new()
                        .name(format!("ddx-tee-{index}"))
                        .spawn(move || serve(end, &queue, &budget, &report.outputs[index]))
                        .expect("spawning a --tee thread")
                };
                Extra {
                    positional,
                    commands,
                    budget,
                    thread,
                }
            })
            .collect();
        Tee {
            first,
            extras,
            report,
            free: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// The extra outputs' accounts (bytes, fate, report lines).
    pub fn report(&self) -> Arc<TeeReport> {
        Arc::clone(&self.report)
    }

    fn block(&self, data: &[u8]) -> Result<Arc<Block>, Errno> {
        let recycled = self.free.lock().ok().and_then(|mut free| {
            let fits = free.iter().position(|buf| buf.len() >= data.len())?;
            Some(free.swap_remove(fits))
        });
        let mut buf = match recycled {
            Some(buf) => buf,
            None => AlignedBuf::new(data.len().max(MIN_BLOCK))?,
        };
        buf.as_mut_slice()[..data.len()].copy_from_slice(data);
        Ok(Arc::new(Block {
            buf: Some(buf),
            len: data.len(),
            home: Arc::clone(&self.free),
        }))
    }

    /// Whether `len` bytes go to the extras lent rather than copied.
    fn lends(&self, len: usize) -> bool {
        len >= LEND_BYTES
            && self.first.capabilities().writes_at
            && self
                .extras
                .iter()
                .zip(&self.report.outputs)
                .all(|(extra, report)| {
                    extra.positional || matches!(report.fate(), Fate::Failed { .. })
                })
    }

    /// Write `buf` (at `at`) to the first output while the extras write
    /// it from the same memory; return when all are done with it.
    fn lend(&mut self, buf: &[u8], at: Option<u64>) -> Result<usize, Errno> {
        let (reply, done) = sync_channel(self.extras.len());
        self.to_extras(|| {
            Command::Lend(
                Lent {
                    ptr: buf.as_ptr(),
                    len: buf.len(),
                },
                at,
                reply.clone(),
            )
        });
        drop(reply);
        let written = match at {
            None => self.first.write(buf),
            Some(offset) => self.first.write_at(buf, offset),
        };
        // The extras must be done with `buf` before it goes back to the
        // caller: every one replies, or drops its sender by going away.
        while done.recv().is_ok() {}
        if at.is_none() && written.as_ref().is_ok_and(|&n| n < buf.len()) {
            // The extras wrote all of it: put them where the first is.
            if let Ok(position) = self.first.seek(Whence::Current(0)) {
                self.to_extras(|| Command::Seek(position));
            }
        }
        written
    }

    /// Queue `command` for every output still going.
    fn to_extras(&self, make: impl Fn() -> Command) {
        for (extra, report) in self.extras.iter().zip(&self.report.outputs) {
            if matches!(report.fate(), Fate::Failed { .. }) {
                continue;
            }
            let command = make();
            let n = command.bytes();
            extra.budget.take(n);
            if extra.commands.send(command).is_err() {
                extra.budget.give(n);
            }
        }
    }

    fn copy_to_extras(&self, data: &[u8], at: Option<u64>) -> Result<(), Errno> {
        if data.is_empty() || self.extras.is_empty() {
            return Ok(());
        }
        let block = self.block(data)?;
        self.to_extras(|| match at {
            None => Command::Write(Arc::clone(&block)),
            Some(offset) => Command::WriteAt(Arc::clone(&block), offset),
        });
        Ok(())
    }

    fn finish(self, last: fn() -> Command) -> Box<dyn Stream> {
        let Tee { first, extras, .. } = self;
        for extra in &extras {
            let _ = extra.commands.send(last());
        }
        for extra in extras {
            drop(extra.commands);
            let _ = extra.thread.join();
        }
        first
    }
}

impl Stream for Tee {
    fn kind(&self) -> Kind {
        self.first.kind()
    }

    /// The first output's.
    fn capabilities(&self) -> Capabilities {
        self.first.capabilities()
    }

    /// None: a descriptor would let the engine write the first output
    /// alone.
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn read(&mut self, _buf: &mut [u8]) -> Result<usize, Errno> {
        Err(Errno::BADF)
    }

    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        if self.lends(buf.len()) {
            return self.lend(buf, None);
        }
        let n = self.first.write(buf)?;
        self.copy_to_extras(&buf[..n], None)?;
        Ok(n)
    }

    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<usize, Errno> {
        if self.lends(buf.len()) {
            return self.lend(buf, Some(offset));
        }
        let n = self.first.write_at(buf, offset)?;
        self.copy_to_extras(&buf[..n], Some(offset))?;
        Ok(n)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        let at = self.first.seek(to)?;
        self.to_extras(|| Command::Seek(at));
        Ok(at)
    }

    fn size(&self) -> Result<Option<u64>, Errno> {
        self.first.size()
    }

    fn truncate(&mut self, len: u64) -> Result<(), Errno> {
        self.first.truncate(len)?;
        self.to_extras(|| Command::Truncate(len));
        Ok(())
    }

    fn write_zeroes(&mut self, len: u64) -> Result<(), Errno> {
        self.first.write_zeroes(len)?;
        self.to_extras(|| Command::WriteZeroes(len));
        Ok(())
    }

    fn sync(&mut self, data_only: bool) -> Result<(), Errno> {
        let (reply, done) = sync_channel(self.extras.len().max(1));
        self.to_extras(|| Command::Sync(data_only, reply.clone()));
        drop(reply);
        let result = self.first.sync(data_only);
        // Every extra output replies (or has gone): wait for them all.
        while done.recv().is_ok() {}
        result
    }

    /// The first output's; the others settle too, and what they report
    /// goes to their account.
    fn settle(&mut self) -> Result<(), Errno> {
        let (reply, done) = sync_channel(self.extras.len().max(1));
        self.to_extras(|| Command::Settle(reply.clone()));
        drop(reply);
        let result = self.first.settle();
        while done.recv().is_ok() {}
        result
    }

    fn pipeline(&mut self, hint: Pipeline) {
        self.first.pipeline(hint);
        self.to_extras(|| Command::Pipeline(hint));
    }

    fn written_until(&self) -> Option<u64> {
        self.first.written_until()
    }

    fn take_detail(&mut self) -> Option<String> {
        self.first.take_detail()
    }

    fn close(self: Box<Self>) -> Result<(), Errno> {
        (*self).close_all(false)
    }
    fn close_failed(self: Box<Self>) -> Result<(), Errno> {
        (*self).close_all(true)
    }

    fn abandon(self: Box<Self>) {
        self.finish(|| Command::Abandon).abandon()
    }
}

/// An extra output's thread: does what it is told until told to close or
/// abandon, or until the tee goes.
fn serve(
    mut end: Box<dyn Stream>,
    queue: &Receiver<Command>,
    budget: &Budget,
    report: &OutputReport,
) {
    let mut failed = false;
    let mut zeros: Vec<u8> = Vec::new();
    for command in queue {
        let n = command.bytes();
        let outcome = if failed {
            match command {
                Command::Close { .. } | Command::Abandon => break,
                _ => Ok(()),
            }
        } else {
            match command {
                Command::Write(block) => write_all(&mut *end, block.data(), None, report),
                Command::WriteAt(block, offset) => {
                    write_all(&mut *end, block.data(), Some(offset), report)
                }
                Command::Lend(lent, at, reply) => {
                    // The reply gives the bytes back: nothing reads them after.
                    let result = write_all(&mut *end, lent.data(), at, report);
                    let _ = reply.send(());
                    result
                }
                Command::Seek(at) => end
                    .seek(Whence::Start(at))
                    .map(drop)
                    .map_err(|e| (e, "seek")),
                Command::Truncate(len) => end.truncate(len).map_err(|e| (e, "truncate")),
                Command::WriteZeroes(len) => match end.write_zeroes(len) {
                    Err(Errno::NOTSUP) => {
                        zeros.resize(ZEROS, 0);
                        let mut left = len;
                        let mut result = Ok(());
                        while left > 0 && result.is_ok() {
                            let k = left.min(ZEROS as u64) as usize;
                            result = write_all(&mut *end, &zeros[..k], None, report);
                            left -= k as u64;
                        }
                        result
                    }
                    Ok(()) => {
                        report.bytes.fetch_add(len, Ordering::Relaxed);
                        Ok(())
                    }
                    Err(e) => Err((e, "write")),
                },
                Command::Sync(data_only, reply) => {
                    let result = end.sync(data_only).map_err(|e| (e, "sync"));
                    let _ = reply.send(());
                    result
                }
                Command::Settle(reply) => {
                    let result = end.settle().map_err(|e| (e, "write"));
                    let _ = reply.send(());
                    result
                }
                Command::Pipeline(hint) => {
                    end.pipeline(hint);
                    Ok(())
                }
                Command::Close { copy_failed } => {
                    let closed = if copy_failed {
                        end.close_failed()
                    } else {
                        end.close()
                    };
                    match closed {
                        Ok(()) => report.set(Fate::Closed),
                        Err(errno) => report.set(Fate::Failed {
                            errno,
                            detail: None,
                            doing: "close",
                        }),
                    }
                    budget.give(n);
                    return;
                }
                Command::Abandon => {
                    end.abandon();
                    report.set(Fate::Abandoned);
                    budget.give(n);
                    return;
                }
            }
        };
        budget.give(n);
        if let Err((errno, doing)) = outcome {
            failed = true;
            report.set(Fate::Failed {
                errno,
                detail: end.take_detail(),
                doing,
            });
        }
    }
    // The tee went away without a word, or this output failed: what is
    // half-done must not look complete.
    end.abandon();
    report.set(Fate::Abandoned);
}

fn write_all(
    end: &mut dyn Stream,
    mut data: &[u8],
    mut at: Option<u64>,
    report: &OutputReport,
) -> Result<(), (Errno, &'static str)> {
    while !data.is_empty() {
        let result = match at {
            None => end.write(data),
            Some(offset) => end.write_at(data, offset),
        };
        match result {
            Ok(0) => return Err((Errno::NOSPC, "write")),
            Ok(n) => {
                data = &data[n..];
                at = at.map(|a| a + n as u64);
                report.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(Errno::INTR) => {}
            Err(errno) => return Err((errno, "write")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::testing::{sample, Memory};

    fn write_in(tee: &mut Tee, data: &[u8], piece: usize) -> Result<(), Errno> {
        for chunk in data.chunks(piece) {
            assert_eq!(tee.write(chunk)?, chunk.len());
        }
        Ok(())
    }

    #[test]
    fn a_failing_extra_output_is_dropped_and_named_while_the_others_complete() {
        let data = sample(1 << 20, 7);
        let (first, first_bytes) = Memory::boxed(Kind::RegularFile, Vec::new());
        let (good, good_bytes) = Memory::boxed(Kind::RegularFile, Vec::new());
        let (mut bad, _) = Memory::new(Kind::RegularFile, Vec::new());
        bad.fail_at = Some((100_000, Errno::NOSPC));
        let mut tee = Tee::new(
            first,
            vec![
                ("good.img".into(), good),
                ("full.img".into(), Box::new(bad)),
            ],
        );
        let report = tee.report();
        write_in(&mut tee, &data, 4096).unwrap();
        tee.sync(false).unwrap();
        Box::new(tee).close().unwrap();
        assert_eq!(*first_bytes.lock().unwrap(), data);
        assert_eq!(*good_bytes.lock().unwrap(), data);
        assert_eq!(report.outputs[0].fate(), Fate::Closed);
        assert!(report.any_failed());
        let lines = report.lines(None);
        assert_eq!(lines[0], "good.img: 1048576 bytes (1.0 MB, 1.0 MiB) copied");
        assert_eq!(
            lines[1],
            "full.img: dropped after 100000 bytes (100 kB, 98 KiB): write failed: No space left on device"
        );
        // Through a block map, the image's bytes and those written, each
        // named.
        assert_eq!(
            report.lines(Some(4 << 20))[0],
            "good.img: 4194304 bytes (4.2 MB, 4.0 MiB) of image copied: 1048576 bytes \
             (1.0 MB, 1.0 MiB) of mapped blocks written, the others left as they were"
        );
    }

    #[test]
    fn when_the_first_output_fails_the_copy_stops_there_for_all() {
        let data = sample(256 << 10, 8);
        let (mut first, _) = Memory::new(Kind::RegularFile, Vec::new());
        first.fail_at = Some((100_000, Errno::IO));
        let (extra, extra_bytes) = Memory::boxed(Kind::RegularFile, Vec::new());
        let mut tee = Tee::new(Box::new(first), vec![("b".into(), extra)]);
        let report = tee.report();
        let mut written = 0;
        let failed = loop {
            match tee.write(&data[written..written + 4096]) {
                Ok(n) => written += n,
                Err(errno) => break errno,
            }
        };
        assert_eq!((failed, written), (Errno::IO, 100_000));
        Box::new(tee).abandon();
        assert_eq!(*extra_bytes.lock().unwrap(), data[..100_000]);
        assert_eq!(report.outputs[0].fate(), Fate::Abandoned);
        assert!(!report.any_failed());
    }

    #[test]
    fn large_writes_are_lent_and_every_output_gets_the_same_stream() {
        let data = sample(6 << 20, 9);
        let (first, a) = Memory::boxed(Kind::BlockDevice, Vec::new());
        let (extra, b) = Memory::boxed(Kind::RegularFile, Vec::new());
        let mut tee = Tee::new(first, vec![("b".into(), extra)]);
        // Lent, copied, lent again and positional: one stream throughout.
        write_in(&mut tee, &data[..2 << 20], LEND_BYTES).unwrap();
        write_in(&mut tee, &data[2 << 20..3 << 20], 4096).unwrap();
        write_in(&mut tee, &data[3 << 20..], 1 << 20).unwrap();
        tee.write_at(&data[..LEND_BYTES], 5 << 20).unwrap();
        Box::new(tee).close().unwrap();
        let mut want = data.clone();
        want[5 << 20..(5 << 20) + LEND_BYTES].copy_from_slice(&data[..LEND_BYTES]);
        assert_eq!(*a.lock().unwrap(), want);
        assert_eq!(*b.lock().unwrap(), want);
    }

    #[test]
    fn when_the_first_output_takes_part_of_a_lent_write_the_others_follow_its_position() {
        let data = sample(4 << 20, 10);
        let end = (3 << 20) + 100;
        let (mut first, a) = Memory::new(Kind::BlockDevice, Vec::new());
        first.fail_at = Some((end, Errno::NOSPC));
        let (extra, b) = Memory::boxed(Kind::BlockDevice, Vec::new());
        let mut tee = Tee::new(Box::new(first), vec![("b".into(), extra)]);
        let report = tee.report();
        // As the engine does: the rest of a short write is written again.
        let mut written = 0;
        let failed = loop {
            let piece = (written + (1 << 20)).min(data.len()) - written;
            match tee.write(&data[written..written + piece]) {
                Ok(n) => written += n,
                Err(errno) => break errno,
            }
        };
        assert_eq!((failed, written as u64), (Errno::NOSPC, end));
        Box::new(tee).abandon();
        assert_eq!(*a.lock().unwrap(), data[..end as usize]);
        // Every byte in its place: what the extra wrote past the first's
        // end was written again at the same offset, not after it.
        assert_eq!(*b.lock().unwrap(), data);
        assert!(!report.any_failed());
    }

    #[test]
    fn an_extra_output_failing_a_lent_write_is_dropped_while_the_others_complete() {
        let data = sample(4 << 20, 11);
        let (first, a) = Memory::boxed(Kind::RegularFile, Vec::new());
        let (good, b) = Memory::boxed(Kind::RegularFile, Vec::new());
        let (mut bad, _) = Memory::new(Kind::BlockDevice, Vec::new());
        bad.fail_at = Some((3 << 19, Errno::IO));
        let mut tee = Tee::new(
            first,
            vec![("good".into(), good), ("bad".into(), Box::new(bad))],
        );
        let report = tee.report();
        write_in(&mut tee, &data, 1 << 20).unwrap();
        Box::new(tee).close().unwrap();
        assert_eq!(*a.lock().unwrap(), data);
        assert_eq!(*b.lock().unwrap(), data);
        assert_eq!(
            report.lines(None)[1],
            "bad: dropped after 1572864 bytes (1.6 MB, 1.5 MiB): write failed: Input/output error"
        );
    }

    #[test]
    fn seeks_and_positional_writes_reach_every_output() {
        let (first, a) = Memory::boxed(Kind::RegularFile, Vec::new());
        let (extra, b) = Memory::boxed(Kind::RegularFile, Vec::new());
        let mut tee = Tee::new(first, vec![("b".into(), extra)]);
        tee.write(b"head").unwrap();
        tee.seek(Whence::Current(4)).unwrap();
        tee.write(b"tail").unwrap();
        tee.write_at(b"HE", 0).unwrap();
        tee.truncate(10).unwrap();
        Box::new(tee).close().unwrap();
        assert_eq!(*a.lock().unwrap(), b"HEad\0\0\0\0ta");
        assert_eq!(*b.lock().unwrap(), b"HEad\0\0\0\0ta");
    }
}
