//! Making a casync index: an output stage that cuts the stream it is
//! written into chunks, stores the chunks the store lacks, and writes the
//! blob's index once the stream is whole.
//!
//! The copy's writer thread cuts (casync's chunker, `casync::Cutter`): it
//! keeps the bytes since the last cut, and once they reach the maximum
//! chunk size, or the stream ends, the next cut is certain. Each chunk is
//! then handed, as a job with its place in the blob, to a pool of workers
//! that take its id (SHA-512/256 by default), and, the first time the id
//! is met in this run, ask the store whether it has the chunk, and if not
//! compress it (zstd) and store it. Workers run on every core; for a
//! store reached over a network there are more of them than cores, so
//! that requests wait in parallel.
//!
//! Zeros cost little: a chunk of zeros is not hashed again once its
//! length's id is known, and a hole the copy passes on without its bytes
//! ([`Stream::write_zeroes`], as `--used-only` passes unused blocks) becomes
//! chunks of zeros without being made into bytes where a whole chunk of
//! the maximum size fits (the chunker never cuts inside a run of zeros
//! before the maximum, unless zeros themselves cut).
//!
//! The index is written last, at [`Stream::finalise`]: every chunk stored and
//! the store synced first, then the index, to a file of its own renamed
//! over its name (or uploaded whole), so that an index never names a chunk
//! that is not durably stored, and a backup that fails leaves the index
//! it would have replaced as it was. A worker's failure (the store
//! refused a chunk) surfaces on a later write, with a detail naming the
//! chunk, its blob offset and the store.

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::casync::{chunk, ChunkId, ChunkSizes, Cutter, Digest, Entry, Index};
use crate::ends::{Kind, Whence};
use crate::engine::stream::Stream;
use crate::store::Store;
use crate::sys::Errno;

/// How the index is made.
#[derive(Debug, Clone, Copy)]
pub struct MakeSettings {
    pub sizes: ChunkSizes,
    pub digest: Digest,
    /// zstd's level for the chunks stored.
    pub level: i32,
    /// Threads hashing, compressing and storing.
    pub workers: usize,
}

/// Where the index goes.
#[derive(Debug)]
pub enum IndexFile {
    /// A file, written beside itself and renamed over its name.
    Path(PathBuf),
    /// An end written whole at the end (an upload), through its window.
    Stream(Box<dyn Stream>),
}

/// What the making did, counted as it goes.
#[derive(Debug, Default)]
pub struct MakeReport {
    /// Chunks in the index, and the blob's bytes.
    pub chunks: AtomicU64,
    pub bytes: AtomicU64,
    /// Chunks of distinct ids.
    pub distinct: AtomicU64,
    /// Chunks the store lacked and got: how many, their bytes, and the
    /// bytes of their files (compressed).
    pub added: AtomicU64,
    pub added_bytes: AtomicU64,
    pub added_stored: AtomicU64,
}

/// A chunk for the workers: its number in the blob, its offset, and its
/// bytes (or a length of zeros).
enum Job {
    Data { seq: usize, at: u64, data: Vec<u8> },
    Zeros { seq: usize, at: u64, len: usize },
}

/// What the workers share.
struct Shared {
    store: Arc<Store>,
    settings: MakeSettings,
    /// Each chunk's id, by number, as the workers find them.
    ids: Mutex<Vec<Option<ChunkId>>>,
    /// Ids met so far in this run: the first worker to meet one stores it.
    seen: Mutex<HashSet<ChunkId>>,
    /// The id of a chunk of zeros, by length.
    zero_ids: Mutex<HashMap<usize, ChunkId>>,
    /// The first failure: its errno and its line.
    failure: Mutex<Option<(Errno, String)>>,
    report: Arc<MakeReport>,
}

impl Shared {
    fn failed(&self) -> bool {
        self.failure.lock().map_or(true, |f| f.is_some())
    }

    fn fail(&self, errno: Errno, line: String) {
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.get_or_insert((errno, line));
    }

    fn zero_id(&self, len: usize) -> ChunkId {
        if let Some(id) = self
            .zero_ids
            .lock()
            .ok()
            .and_then(|ids| ids.get(&len).copied())
        {
            return id;
        }
        let id = self.settings.digest.id(&vec![0u8; len]);
        if let Ok(mut ids) = self.zero_ids.lock() {
            ids.insert(len, id);
        }
        id
    }

    /// One chunk: its id recorded, and stored if it is the first of its
    /// id in this run and the store lacks it.
    fn take(&self, job: Job) {
        let (seq, at, len, id, data) = match job {
            Job::Data { seq, at, data } => {
                let id = if is_zeros(&data) {
                    self.zero_id(data.len())
                } else {
                    self.settings.digest.id(&data)
                };
                (seq, at, data.len(), id, Some(data))
            }
            Job::Zeros { seq, at, len } => (seq, at, len, self.zero_id(len), None),
        };
        if let Ok(mut ids) = self.ids.lock() {
            if ids.len() <= seq {
                ids.resize(seq + 1, None);
            }
            ids[seq] = Some(id);
        }
        let first = self.seen.lock().is_ok_and(|mut seen| seen.insert(id));
        if !first {
            return;
        }
        self.report.distinct.fetch_add(1, Ordering::Relaxed);
        let failed = |e: crate::store::StoreError| {
            self.fail(
                e.errno,
                format!(
                    "chunk {id} at blob offset {at}: store {}: {}",
                    self.store.shown(),
                    e.detail
                ),
            )
        };
        match self.store.has(&id) {
            Ok(true) => return,
            Ok(false) => {}
            Err(e) => return failed(e),
        }
        let data = data.unwrap_or_else(|| vec![0u8; len]);
        let file = chunk::encode(&data, self.settings.level);
        let stored = file.len() as u64;
        if let Err(e) = self.store.put(&id, file) {
            return failed(e);
        }
        self.report.added.fetch_add(1, Ordering::Relaxed);
        self.report
            .added_bytes
            .fetch_add(len as u64, Ordering::Relaxed);
        self.report
            .added_stored
            .fetch_add(stored, Ordering::Relaxed);
    }
}

/// Whether `data` is all zeros: an OR over pieces, which the compiler
/// vectorises, with a stop at the first piece that is not.
fn is_zeros(data: &[u8]) -> bool {
    data.chunks(256)
        .all(|piece| piece.iter().fold(0u8, |acc, &b| acc | b) == 0)
}

fn worker(jobs: &Mutex<Receiver<Job>>, shared: &Shared) {
    while let Some(job) = crate::image::chunks::next_job(jobs) {
        if !shared.failed() {
            shared.take(job);
        }
    }
}

/// An index being made.
pub struct IndexMaker {
    cutter: Cutter,
    max: usize,
    /// The bytes since the last cut: `pending[start..]`.
    pending: Vec<u8>,
    start: usize,
    /// The blob's bytes so far, and where the last cut is.
    position: u64,
    cut_at: u64,
    /// Each chunk's end, by number.
    ends: Vec<u64>,
    jobs: Option<SyncSender<Job>>,
    workers: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
    index: Option<IndexFile>,
    finalised: bool,
    detail: Option<String>,
}

impl std::fmt::Debug for IndexMaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IndexMaker({} bytes)", self.position)
    }
}

impl IndexMaker {
    /// Start making the index `index` of what is written, its chunks
    /// stored in `store`.
    pub fn start(store: Arc<Store>, index: IndexFile, settings: MakeSettings) -> IndexMaker {
        let workers = settings.workers.max(1);
        let shared = Arc::new(Shared {
            store,
            settings,
            ids: Mutex::new(Vec::new()),
            seen: Mutex::new(HashSet::new()),
            zero_ids: Mutex::new(HashMap::new()),
            failure: Mutex::new(None),
            report: Arc::new(MakeReport::default()),
        });
        let (jobs, receiver) = sync_channel(workers * 2);
        let receiver = Arc::new(Mutex::new(receiver));
        let threads = (0..workers)
            .map(|_| {
                let (receiver, shared) = (Arc::clone(&receiver), Arc::clone(&shared));
                std::thread::Builder::new()
                    .name("ddx-chunks".into())
                    .spawn(move || worker(&receiver, &shared))
                    .expect("spawning a chunk worker")
            })
            .collect();
        let max = usize::try_from(settings.sizes.max).unwrap_or(usize::MAX);
        IndexMaker {
            cutter: Cutter::new(settings.sizes),
            max,
            pending: Vec::with_capacity(max * 4),
            start: 0,
            position: 0,
            cut_at: 0,
            ends: Vec::new(),
            jobs: Some(jobs),
            workers: threads,
            shared,
            index: Some(index),
            finalised: false,
            detail: None,
        }
    }

    pub fn report(&self) -> Arc<MakeReport> {
        Arc::clone(&self.shared.report)
    }

    /// Err with the first failure's detail kept.
    fn check(&mut self) -> Result<(), Errno> {
        let failure = self.shared.failure.lock().ok().and_then(|f| f.clone());
        match failure {
            Some((errno, line)) => {
                self.detail = Some(line);
                Err(errno)
            }
            None => Ok(()),
        }
    }

    fn send(&mut self, job: Job) -> Result<(), Errno> {
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        if !sent {
            self.check()?;
            return Err(Errno::IO);
        }
        Ok(())
    }

    /// The next `len` pending bytes as a chunk.
    fn emit(&mut self, len: usize) -> Result<(), Errno> {
        let data = self.pending[self.start..self.start + len].to_vec();
        self.start += len;
        let (seq, at) = (self.ends.len(), self.cut_at);
        self.cut_at += len as u64;
        self.ends.push(self.cut_at);
        self.send(Job::Data { seq, at, data })
    }

    /// Cut every chunk whose end is certain: while a maximum's worth is
    /// pending (or, at the end, while anything is).
    fn cut_pending(&mut self, at_end: bool) -> Result<(), Errno> {
        loop {
            let left = self.pending.len() - self.start;
            if left == 0 || (!at_end && left < self.max) {
                break;
            }
            let len = match self.cutter.cut(&self.pending[self.start..]) {
                Some(len) => len,
                None if at_end => left,
                None => break,
            };
            self.emit(len)?;
        }
        if self.start > 0 && self.start * 2 >= self.pending.len() {
            self.pending.drain(..self.start);
            self.start = 0;
        }
        Ok(())
    }

    /// The stream is whole: cut the rest, wait for every chunk, and make
    /// the index.
    fn finish(&mut self) -> Result<(), Errno> {
        self.cut_pending(true)?;
        self.jobs = None;
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
        self.check()?;
        let shared = &self.shared;
        shared.store.sync().map_err(|e| {
            self.detail = Some(format!("store {}: {}", shared.store.shown(), e.detail));
            e.errno
        })?;
        let ids = shared.ids.lock().map_err(|_| Errno::IO)?;
        let chunks: Vec<Entry> = self
            .ends
            .iter()
            .zip(ids.iter())
            .map(|(&end, id)| Entry {
                end,
                id: id.expect("every chunk's id is found once its worker is done"),
            })
            .collect();
        let report = &shared.report;
        report.chunks.store(chunks.len() as u64, Ordering::Relaxed);
        report.bytes.store(self.position, Ordering::Relaxed);
        let index = Index::new(shared.settings.digest, shared.settings.sizes, chunks);
        let bytes = index.to_bytes();
        drop(ids);
        match self.index.take() {
            Some(IndexFile::Path(path)) => write_beside(&path, &bytes).map_err(|(errno, why)| {
                self.detail = Some(why);
                errno
            }),
            Some(IndexFile::Stream(mut end)) => {
                let mut done = 0;
                while done < bytes.len() {
                    match end.write(&bytes[done..]) {
                        Ok(0) => return Err(Errno::IO),
                        Ok(n) => done += n,
                        Err(Errno::INTR) => {}
                        Err(errno) => {
                            self.detail = end.take_detail();
                            end.abandon();
                            return Err(errno);
                        }
                    }
                }
                if let Err(errno) = end.finalise(false) {
                    self.detail = end.take_detail();
                    end.abandon();
                    return Err(errno);
                }
                end.close()
            }
            None => Ok(()),
        }
    }

    /// Stop the workers and leave no index.
    fn stop(&mut self) {
        self.shared.fail(Errno::CANCELED, "stopped".into());
        self.jobs = None;
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
        if let Some(IndexFile::Stream(end)) = self.index.take() {
            end.abandon();
        }
    }
}

/// Write `bytes` to a file beside `path` and rename it over `path`: the
/// index appears whole, and an index that was there stays until then.
fn write_beside(path: &std::path::Path, bytes: &[u8]) -> Result<(), (Errno, String)> {
    let shown = path.display();
    let failed = |what: &str, e: std::io::Error| {
        let errno = Errno::from_io_error(&e).unwrap_or(Errno::IO);
        (
            errno,
            format!("{what} {shown}: {}", crate::sys::errno_text(errno)),
        )
    };
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(name);
    let written = std::fs::File::create(&temporary).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(failed("writing the index beside", e));
    }
    std::fs::rename(&temporary, path).map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        failed("renaming the index to", e)
    })
}

impl Stream for IndexMaker {
    fn kind(&self) -> Kind {
        Kind::Stream
    }

    fn write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        self.check()?;
        self.pending.extend_from_slice(buf);
        self.position += buf.len() as u64;
        self.cut_pending(false)?;
        Ok(buf.len())
    }

    fn write_zeroes(&mut self, len: u64) -> Result<(), Errno> {
        self.check()?;
        let mut left = len;
        while left > 0 {
            // A whole chunk of zeros of the maximum size, where one starts
            // here: the chunker would cut it so.
            let starts_clean = self.pending.len() == self.start;
            if starts_clean && left >= self.max as u64 && !self.cutter.cuts_zeros() {
                let (seq, at) = (self.ends.len(), self.cut_at);
                self.cut_at += self.max as u64;
                self.position += self.max as u64;
                self.ends.push(self.cut_at);
                self.send(Job::Zeros {
                    seq,
                    at,
                    len: self.max,
                })?;
                left -= self.max as u64;
                continue;
            }
            let piece = left.min(self.max as u64) as usize;
            self.pending.resize(self.pending.len() + piece, 0);
            self.position += piece as u64;
            self.cut_pending(false)?;
            left -= piece as u64;
        }
        Ok(())
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        match to {
            Whence::Current(0) => Ok(self.position),
            _ => Err(Errno::SPIPE),
        }
    }

    fn size(&self) -> Result<Option<u64>, Errno> {
        Ok(None)
    }

    fn sync(&mut self, _data_only: bool) -> Result<(), Errno> {
        self.check()
    }

    fn settle(&mut self) -> Result<(), Errno> {
        self.check()
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    fn finalise(&mut self, copy_failed: bool) -> Result<(), Errno> {
        if self.finalised {
            return Ok(());
        }
        self.finalised = true;
        if copy_failed {
            self.stop();
            return Ok(());
        }
        let done = self.finish();
        if done.is_err() {
            self.stop();
        }
        done
    }

    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        self.finalise(false)
    }

    fn close_failed(mut self: Box<Self>) -> Result<(), Errno> {
        self.finalise(true)
    }

    fn abandon(mut self: Box<Self>) {
        self.finalised = true;
        self.stop();
    }
}
