//! Extracting a casync index: an input stage whose bytes are the index's
//! blob, from seeds where they hold its chunks and from the store where
//! they do not, each chunk checked against its id before it is passed
//! on.
//!
//! A pool of workers takes the chunks in order, a window of them ahead of
//! the copy, and for each finds its bytes:
//! 1. on the output itself, where it is a seed (an update in place): the
//!    output's bytes at the chunk's offset, if their digest is the
//!    chunk's id, are the chunk already there;
//! 2. a chunk of zeros of the maximum size (what runs of zeros are cut
//!    into) is made, not fetched;
//! 3. in the other seeds: an image, at the chunk's own offset (an
//!    earlier release of the same image), or an index's blob, wherever
//!    that index says the chunk is; each read checked against the id;
//! 4. from the store: the chunk's file fetched (many at once: one worker
//!    each, the same id fetched once while it is in hand), decoded, and
//!    checked against the id. A chunk the store lacks or holds corrupt is
//!    an error naming the chunk, its blob offset and the store.
//!
//! Where the output is a seed, each chunk's bytes are also compared with
//! what the output holds there, block by block ([`BLOCK`]); blocks that
//! already hold their bytes are holes of this stream
//! ([`Stream::next_data`], [`Stream::next_hole`]), which the copy leaves unwritten as it leaves a
//! block map's unmapped blocks: flash is not worn by writing what it
//! holds. The first MiB is never a hole (the safe order for bootable
//! media writes it last, over zeros). A read still returns the blob's
//! bytes wherever it lands: a copy that does not skip holes writes them
//! whole, and correctly.
//!
//! The copy reads in order and only moves forward; a seek forward passes
//! over chunks. Holes are looked for within the chunks in hand (the
//! window): a longer stretch is answered in pieces, which the copy asks
//! for again.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;

use crate::casync::{chunk, ChunkId, Digest, Index};
use crate::ends::{End, Kind, Whence};
use crate::engine::stream::Stream;
use crate::store::Store;
use crate::sys::Errno;

/// The unit in which the output's bytes are compared with the blob's and
/// left unwritten: a page, and every disk's logical block or a multiple
/// of it.
pub const BLOCK: u64 = 4096;

/// Bytes at the start never left unwritten (see the safe order).
const ALWAYS_WRITTEN: u64 = crate::image::safe_order::HELD as u64;

/// Where a seed's bytes are read.
pub enum SeedReader {
    /// A descriptor, read by position from any thread.
    Fd(OwnedFd),
    /// Another end (an NBD export, an object), one read at a time.
    End(Mutex<Box<dyn End>>),
}

impl std::fmt::Debug for SeedReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SeedReader::Fd(_) => "SeedReader::Fd",
            SeedReader::End(_) => "SeedReader::End",
        })
    }
}

impl SeedReader {
    /// `len` bytes at `offset`, fewer where the seed ends.
    fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let mut buf = vec![0u8; len];
        let mut done = 0;
        while done < len {
            let at = offset + done as u64;
            let n = match self {
                SeedReader::Fd(fd) => crate::sys::file::read_at(fd.as_fd(), &mut buf[done..], at),
                SeedReader::End(end) => {
                    let mut end = end.lock().map_err(|_| Errno::IO)?;
                    end.read_at(&mut buf[done..], at)
                }
            };
            match n {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                Err(errno) => return Err(errno),
            }
        }
        buf.truncate(done);
        Ok(buf)
    }
}

/// Where a seed holds chunks.
#[derive(Debug)]
pub enum SeedKind {
    /// The output itself: chunks already in place.
    Output,
    /// An image: a chunk at its own offset.
    Image,
    /// A blob with its index: each chunk where the index puts it (its
    /// offset and length).
    Indexed(HashMap<ChunkId, (u64, usize)>),
}

/// A place that may hold chunks already.
#[derive(Debug)]
pub struct Seed {
    pub reader: SeedReader,
    pub kind: SeedKind,
}

/// Where the blob's bytes came from, counted as it goes.
#[derive(Debug, Default)]
pub struct ExtractReport {
    pub chunks: AtomicU64,
    /// Chunks the output held in place already: how many, and bytes.
    pub in_place: AtomicU64,
    pub in_place_bytes: AtomicU64,
    /// Chunks of zeros, made.
    pub zeros: AtomicU64,
    pub zero_bytes: AtomicU64,
    /// Chunks read from the other seeds.
    pub seeded: AtomicU64,
    pub seeded_bytes: AtomicU64,
    /// Chunks fetched from the store (each fetch counted): their bytes,
    /// and the bytes of their files as the store sent them.
    pub fetched: AtomicU64,
    pub fetched_bytes: AtomicU64,
    pub fetched_stored: AtomicU64,
    /// Bytes passed on as holes: already on the output, not written.
    pub unwritten: AtomicU64,
}

/// A chunk's bytes, ready, and which of its bytes the output holds
/// already (blob offsets, rising, apart).
struct Ready {
    start: u64,
    end: u64,
    data: Arc<Vec<u8>>,
    held: Vec<(u64, u64)>,
}

/// Why a chunk could not be had: the errno and the line for the message.
#[derive(Debug, Clone)]
struct Failed {
    errno: Errno,
    line: String,
}

type Fetched = Arc<OnceLock<Result<Arc<Vec<u8>>, Failed>>>;

/// Fetches by id, in flight or done and kept a while: the cells, the
/// order they came in (for letting the oldest go) and the bytes kept.
#[derive(Default)]
struct Fetches {
    cells: HashMap<ChunkId, Fetched>,
    order: VecDeque<(ChunkId, usize)>,
    kept: usize,
}

/// What the workers share.
struct Pool {
    index: Arc<Index>,
    digest: Digest,
    store: Arc<Store>,
    seeds: Vec<Seed>,
    /// Chunks worked on at most this far ahead of those handed to the
    /// reader.
    window: usize,
    state: Mutex<State>,
    changed: Condvar,
    fetches: Mutex<Fetches>,
    /// The id of a chunk of zeros of the maximum size.
    zero_id: OnceLock<ChunkId>,
    report: Arc<ExtractReport>,
}

struct State {
    /// The next chunk a worker takes, and how many the reader took.
    next: usize,
    taken: usize,
    done: HashMap<usize, Result<Ready, Failed>>,
    stop: bool,
}

/// Fetched chunks kept for another use of the same id: at most this many
/// bytes (duplicates further apart are fetched again).
const KEEP_FETCHED: usize = 64 << 20;

impl Pool {
    fn output(&self) -> Option<&Seed> {
        self.seeds
            .iter()
            .find(|s| matches!(s.kind, SeedKind::Output))
    }

    fn describe(&self, i: usize) -> String {
        let (start, _) = self.index.span(i);
        format!(
            "chunk {i} at blob offset {start} ({})",
            self.index.chunks[i].id
        )
    }

    /// Chunk `i`, found.
    fn work(&self, i: usize) -> Result<Ready, Failed> {
        let (start, end) = self.index.span(i);
        let id = self.index.chunks[i].id;
        let len = (end - start) as usize;
        let report = &self.report;
        let mut old = match self.output() {
            Some(output) => output.reader.read(start, len).ok(),
            None => None,
        };
        if let Some(held) = old.take_if(|old| old.len() == len && self.digest.id(old) == id) {
            report.in_place.fetch_add(1, Ordering::Relaxed);
            report
                .in_place_bytes
                .fetch_add(len as u64, Ordering::Relaxed);
            return Ok(Ready {
                start,
                end,
                data: Arc::new(held),
                held: vec![(start, end)],
            });
        }
        let data = if len as u64 == self.index.sizes.max && self.is_zero_id(&id, len) {
            report.zeros.fetch_add(1, Ordering::Relaxed);
            report.zero_bytes.fetch_add(len as u64, Ordering::Relaxed);
            Arc::new(vec![0u8; len])
        } else if let Some(data) = self.in_seeds(&id, start, len) {
            report.seeded.fetch_add(1, Ordering::Relaxed);
            report.seeded_bytes.fetch_add(len as u64, Ordering::Relaxed);
            Arc::new(data)
        } else {
            self.fetch(i, id, len)?
        };
        let held = match old {
            Some(old) => held_blocks(start, &old, &data),
            None => Vec::new(),
        };
        Ok(Ready {
            start,
            end,
            data,
            held,
        })
    }

    fn is_zero_id(&self, id: &ChunkId, len: usize) -> bool {
        *self.zero_id.get_or_init(|| self.digest.id(&vec![0u8; len])) == *id
    }

    /// The chunk from a seed other than the output, checked.
    fn in_seeds(&self, id: &ChunkId, start: u64, len: usize) -> Option<Vec<u8>> {
        for seed in &self.seeds {
            let at = match &seed.kind {
                SeedKind::Output => continue,
                SeedKind::Image => start,
                SeedKind::Indexed(map) => match map.get(id) {
                    Some(&(at, seed_len)) if seed_len == len => at,
                    _ => continue,
                },
            };
            if let Ok(data) = seed.reader.read(at, len) {
                if data.len() == len && self.digest.id(&data) == *id {
                    return Some(data);
                }
            }
        }
        None
    }

    /// Chunk `i` (`id`, `len` bytes) from the store, once for all who
    /// need it meanwhile.
    fn fetch(&self, i: usize, id: ChunkId, len: usize) -> Result<Arc<Vec<u8>>, Failed> {
        let cell: Fetched = {
            let mut fetches = self.fetches.lock().map_err(|_| self.internal(i))?;
            let Fetches { cells, order, kept } = &mut *fetches;
            if let Some(cell) = cells.get(&id) {
                Arc::clone(cell)
            } else {
                let cell: Fetched = Arc::default();
                cells.insert(id, Arc::clone(&cell));
                order.push_back((id, len));
                *kept += len;
                while *kept > KEEP_FETCHED {
                    let Some((old, old_len)) = order.pop_front() else {
                        break;
                    };
                    cells.remove(&old);
                    *kept -= old_len;
                }
                cell
            }
        };
        cell.get_or_init(|| self.fetch_now(i, id, len)).clone()
    }

    fn fetch_now(&self, i: usize, id: ChunkId, len: usize) -> Result<Arc<Vec<u8>>, Failed> {
        let store = self.store.shown();
        let file = match self.store.get(&id) {
            Ok(Some(file)) => file,
            Ok(None) => {
                return Err(Failed {
                    errno: Errno::NOENT,
                    line: format!("{} is not in the store {store}", self.describe(i)),
                })
            }
            Err(e) => {
                return Err(Failed {
                    errno: e.errno,
                    line: format!("{}: store {store}: {}", self.describe(i), e.detail),
                })
            }
        };
        let report = &self.report;
        report.fetched.fetch_add(1, Ordering::Relaxed);
        report
            .fetched_bytes
            .fetch_add(len as u64, Ordering::Relaxed);
        report
            .fetched_stored
            .fetch_add(file.len() as u64, Ordering::Relaxed);
        let data = chunk::decode(&file, len).map_err(|e| Failed {
            errno: Errno::BADMSG,
            line: format!(
                "{} in the store {store} cannot be read: {e}",
                self.describe(i)
            ),
        })?;
        if let Err(actual) = self.digest.check(&id, &data) {
            return Err(Failed {
                errno: Errno::BADMSG,
                line: format!(
                    "{} in the store {store} is not that chunk: its bytes' {} is {actual}",
                    self.describe(i),
                    self.digest.name()
                ),
            });
        }
        Ok(Arc::new(data))
    }

    fn internal(&self, i: usize) -> Failed {
        Failed {
            errno: Errno::IO,
            line: format!("{}: a worker failed", self.describe(i)),
        }
    }
}

/// The blocks (of [`BLOCK`], counted from the blob's start, cut at the
/// chunk's ends) where `old` already holds `new`'s bytes, for a chunk at
/// `start`: blob offset ranges, rising and apart.
fn held_blocks(start: u64, old: &[u8], new: &[u8]) -> Vec<(u64, u64)> {
    let mut held: Vec<(u64, u64)> = Vec::new();
    let mut at = 0usize;
    while at < new.len() {
        let absolute = start + at as u64;
        let block_end = (absolute / BLOCK + 1) * BLOCK;
        let piece = ((block_end - absolute) as usize).min(new.len() - at);
        let same = old.get(at..at + piece) == Some(&new[at..at + piece]);
        if same {
            let (from, to) = (absolute, absolute + piece as u64);
            match held.last_mut() {
                Some(last) if last.1 == from => last.1 = to,
                _ => held.push((from, to)),
            }
        }
        at += piece;
    }
    held
}

fn worker(pool: &Pool) {
    loop {
        let i = {
            let mut state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if state.stop || state.next >= pool.index.chunks.len() {
                    return;
                }
                if state.next < state.taken + pool.window {
                    break;
                }
                state = pool.changed.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            state.next += 1;
            state.next - 1
        };
        let result = pool.work(i);
        let mut state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
        state.done.insert(i, result);
        pool.changed.notify_all();
    }
}

/// How the blob is extracted.
#[derive(Debug, Clone, Copy)]
pub struct ExtractSettings {
    /// Workers finding chunks (fetches in flight).
    pub workers: usize,
    /// Chunks worked on ahead of the copy.
    pub window: usize,
    /// Pass blocks the output holds already on as holes (not with
    /// several outputs, which need not hold them).
    pub holes: bool,
}

/// The blob of an index, as an input.
pub struct IndexedBlob {
    pool: Arc<Pool>,
    workers: Vec<JoinHandle<()>>,
    size: u64,
    holes: bool,
    /// The blob offset of the next read.
    position: u64,
    /// Chunks taken from the pool, from the one holding `position` on.
    ahead: VecDeque<Ready>,
    /// A failure met, returned again on every read after.
    failed: Option<Failed>,
    detail: Option<String>,
}

impl std::fmt::Debug for IndexedBlob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IndexedBlob({} bytes at {})", self.size, self.position)
    }
}

impl IndexedBlob {
    /// Start finding the chunks of `index`: from `seeds`, else from
    /// `store`.
    pub fn start(
        index: Index,
        store: Arc<Store>,
        seeds: Vec<Seed>,
        settings: ExtractSettings,
    ) -> IndexedBlob {
        let size = index.blob_size();
        let report = Arc::new(ExtractReport::default());
        report
            .chunks
            .store(index.chunks.len() as u64, Ordering::Relaxed);
        let holes = settings.holes && seeds.iter().any(|s| matches!(s.kind, SeedKind::Output));
        let pool = Arc::new(Pool {
            digest: index.digest(),
            index: Arc::new(index),
            store,
            seeds,
            window: settings.window.max(1),
            state: Mutex::new(State {
                next: 0,
                taken: 0,
                done: HashMap::new(),
                stop: false,
            }),
            changed: Condvar::new(),
            fetches: Mutex::new(Fetches::default()),
            zero_id: OnceLock::new(),
            report,
        });
        let workers = (0..settings.workers.max(1))
            .map(|_| {
                let pool = Arc::clone(&pool);
                std::thread::Builder::new()
                    .name("ddx-extract".into())
                    .spawn(move || worker(&pool))
                    .expect("spawning an extraction worker")
            })
            .collect();
        IndexedBlob {
            pool,
            workers,
            size,
            holes,
            position: 0,
            ahead: VecDeque::new(),
            failed: None,
            detail: None,
        }
    }

    pub fn report(&self) -> Arc<ExtractReport> {
        Arc::clone(&self.pool.report)
    }

    /// Whether blocks the output holds are passed on as holes.
    pub fn holes(&self) -> bool {
        self.holes
    }

    fn chunks_taken(&self) -> usize {
        self.pool.state.lock().map_or(0, |state| state.taken)
    }

    /// Take the next chunk from the pool, waiting for it; false at the
    /// blob's end.
    fn take_next(&mut self) -> Result<bool, Errno> {
        if let Some(failed) = &self.failed {
            self.detail = Some(failed.line.clone());
            return Err(failed.errno);
        }
        let pool = &self.pool;
        let mut state = pool.state.lock().map_err(|_| Errno::IO)?;
        let i = state.taken;
        if i >= pool.index.chunks.len() {
            return Ok(false);
        }
        let result = loop {
            if let Some(result) = state.done.remove(&i) {
                break result;
            }
            state = pool.changed.wait(state).map_err(|_| Errno::IO)?;
        };
        state.taken += 1;
        pool.changed.notify_all();
        drop(state);
        match result {
            Ok(ready) => {
                self.ahead.push_back(ready);
                Ok(true)
            }
            Err(failed) => {
                self.detail = Some(failed.line.clone());
                let errno = failed.errno;
                self.failed = Some(failed);
                Err(errno)
            }
        }
    }

    /// Make sure the chunk holding `offset` is in hand (the ones before
    /// it dropped); false when `offset` is the blob's end.
    fn reach(&mut self, offset: u64) -> Result<bool, Errno> {
        while self.ahead.front().is_some_and(|c| c.end <= offset) {
            self.ahead.pop_front();
        }
        // The first MiB's chunks are found before any byte is handed out:
        // the output's first MiB is wiped before the first write (the
        // safe order), and must be read as it was.
        if self.position == 0 && offset == 0 {
            while self
                .ahead
                .back()
                .is_none_or(|c| c.end < ALWAYS_WRITTEN.min(self.size))
            {
                if !self.take_next()? {
                    break;
                }
            }
        }
        while self.ahead.back().is_none_or(|c| c.end <= offset) {
            if !self.take_next()? {
                return Ok(false);
            }
            while self.ahead.front().is_some_and(|c| c.end <= offset) {
                self.ahead.pop_front();
            }
        }
        Ok(true)
    }

    /// Chunks in hand from `offset` on, taking more up to the window.
    fn look_ahead(&mut self) -> Result<(), Errno> {
        while self.ahead.len() < self.pool.window
            && self.chunks_taken() < self.pool.index.chunks.len()
        {
            self.take_next()?;
        }
        Ok(())
    }

    /// The hole blocks around and after `offset` within the chunks in
    /// hand: the held ranges merged across chunks, cut to whole blocks
    /// (a block at the blob's end may be short) and to the first MiB;
    /// and where what is in hand ends.
    fn hole_spans(&self, offset: u64) -> (Vec<(u64, u64)>, u64) {
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for chunk in &self.ahead {
            for &(from, to) in &chunk.held {
                match merged.last_mut() {
                    Some(last) if last.1 == from => last.1 = to,
                    _ => merged.push((from, to)),
                }
            }
        }
        let known = self.ahead.back().map_or(offset, |c| c.end);
        let holes = merged
            .into_iter()
            .filter_map(|(from, to)| {
                let from = from.div_ceil(BLOCK) * BLOCK;
                let from = from.max(ALWAYS_WRITTEN);
                let to = if to == self.size {
                    to
                } else {
                    to / BLOCK * BLOCK
                };
                (from < to && to > offset).then_some((from, to))
            })
            .collect();
        (holes, known)
    }
}

impl Stream for IndexedBlob {
    fn kind(&self) -> Kind {
        Kind::Stream
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        let mut done = 0;
        while done < buf.len() && self.position < self.size {
            if !self.reach(self.position)? {
                break;
            }
            let chunk = self.ahead.front().expect("reached");
            let from = (self.position - chunk.start) as usize;
            let n = (chunk.data.len() - from).min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&chunk.data[from..from + n]);
            done += n;
            self.position += n as u64;
        }
        Ok(done)
    }

    fn seek(&mut self, to: Whence) -> Result<u64, Errno> {
        let target = match to {
            Whence::Start(at) => at,
            Whence::Current(delta) => self
                .position
                .checked_add_signed(delta)
                .ok_or(Errno::INVAL)?,
            Whence::End(delta) => self.size.checked_add_signed(delta).ok_or(Errno::INVAL)?,
        };
        if target < self.position {
            return Err(Errno::SPIPE);
        }
        let skipped = target.min(self.size) - self.position.min(self.size);
        self.pool
            .report
            .unwritten
            .fetch_add(skipped, Ordering::Relaxed);
        self.position = target;
        Ok(target)
    }

    fn size(&self) -> Result<Option<u64>, Errno> {
        Ok(Some(self.size))
    }

    fn next_data(&mut self, offset: u64) -> Result<Option<u64>, Errno> {
        if !self.holes {
            return Err(Errno::NOTSUP);
        }
        if offset >= self.size {
            return Ok(None);
        }
        if !self.reach(offset)? {
            return Ok(None);
        }
        self.look_ahead()?;
        let (holes, known) = self.hole_spans(offset);
        match holes.first() {
            Some(&(from, to)) if from <= offset => {
                // A hole reaching past what is in hand is answered up to
                // there; the copy asks again from it.
                let end = if to >= known && known < self.size {
                    known / BLOCK * BLOCK
                } else {
                    to
                };
                if end >= self.size {
                    Ok(None)
                } else {
                    Ok(Some(end.max(offset)))
                }
            }
            _ => Ok(Some(offset)),
        }
    }

    fn next_hole(&mut self, offset: u64) -> Result<u64, Errno> {
        if !self.holes {
            return Err(Errno::NOTSUP);
        }
        if offset >= self.size {
            return Err(Errno::NXIO);
        }
        if !self.reach(offset)? {
            return Ok(self.size);
        }
        self.look_ahead()?;
        let (holes, known) = self.hole_spans(offset);
        Ok(match holes.first() {
            Some(&(from, _)) => from.max(offset),
            // No hole in hand: the data goes on at least to there.
            None if known >= self.size => self.size,
            None => known.max(offset + 1),
        })
    }

    fn sync(&mut self, _data_only: bool) -> Result<(), Errno> {
        Ok(())
    }

    fn take_detail(&mut self) -> Option<String> {
        self.detail.take()
    }

    fn close(mut self: Box<Self>) -> Result<(), Errno> {
        self.stop();
        Ok(())
    }

    fn abandon(mut self: Box<Self>) {
        self.stop();
    }
}

impl IndexedBlob {
    fn stop(&mut self) {
        if let Ok(mut state) = self.pool.state.lock() {
            state.stop = true;
        }
        self.pool.changed.notify_all();
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

impl Drop for IndexedBlob {
    fn drop(&mut self) {
        // Workers only read: stopping them finalises nothing.
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::casync::{ChunkSizes, Cutter, Entry};
    use crate::store::{Location, Store};

    /// `len` pseudo-random bytes (xorshift from `seed`).
    fn noise(len: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    }

    /// A blob cut into small chunks, stored in a directory store; the
    /// index and the store.
    fn stored(blob: &[u8], dir: &std::path::Path) -> (Index, Arc<Store>) {
        let sizes = ChunkSizes {
            min: 4096,
            avg: 16384,
            max: 65536,
        };
        let store = Store::open(Location::Directory(dir.join("store")), true).unwrap();
        let mut chunks = Vec::new();
        let mut at = 0;
        for len in Cutter::new(sizes).lengths(blob) {
            let data = &blob[at..at + len];
            let id = Digest::Sha512_256.id(data);
            store.put(&id, chunk::encode(data, 1)).unwrap();
            at += len;
            chunks.push(Entry { end: at as u64, id });
        }
        (
            Index::new(Digest::Sha512_256, sizes, chunks),
            Arc::new(store),
        )
    }

    /// Read `blob` as the engine reads a mapped input: the data ranges,
    /// holes sought over. The ranges read, with their bytes.
    fn read_as_the_engine_does(end: &mut IndexedBlob, size: u64) -> Vec<(u64, Vec<u8>)> {
        let mut ranges = Vec::new();
        let mut at = 0;
        while at < size {
            let data = end.next_data(at).unwrap().unwrap_or(size);
            if data > at {
                assert_eq!(end.seek(Whence::Start(data)).unwrap(), data);
                at = data;
                continue;
            }
            let hole = end.next_hole(at).unwrap();
            assert!(hole > at, "no progress at {at}");
            let mut buf = vec![0u8; (hole - at).min(1 << 20) as usize];
            let n = end.read(&mut buf).unwrap();
            assert_eq!(n, buf.len());
            ranges.push((at, buf));
            at += n as u64;
        }
        ranges
    }

    #[test]
    fn blocks_the_output_holds_are_holes_and_the_rest_is_the_blob() {
        let dir = tempfile::tempdir().unwrap();
        let mut blob = noise(3 << 20, 5);
        blob[(2 << 20) + 100_000..(2 << 20) + 300_000].fill(0);
        let (index, store) = stored(&blob, dir.path());
        // The output holds the blob but for two blocks.
        let mut held = blob.clone();
        for at in [(3 << 19) + 10, (5 << 19) + 4095] {
            held[at] ^= 0xff;
        }
        let target = dir.path().join("target");
        std::fs::write(&target, &held).unwrap();
        let fd = std::fs::File::open(&target).unwrap();
        let seeds = vec![Seed {
            reader: SeedReader::Fd(fd.into()),
            kind: SeedKind::Output,
        }];
        let settings = ExtractSettings {
            workers: 4,
            window: 8,
            holes: true,
        };
        let mut end = IndexedBlob::start(index.clone(), Arc::clone(&store), seeds, settings);
        let size = blob.len() as u64;
        let ranges = read_as_the_engine_does(&mut end, size);
        let mut data = 0;
        for (at, bytes) in &ranges {
            assert_eq!(&blob[*at as usize..*at as usize + bytes.len()], &bytes[..]);
            data += bytes.len();
        }
        // The first MiB, and the two blocks that differ.
        let covered = |offset: usize| {
            ranges
                .iter()
                .any(|(at, b)| (*at as usize..*at as usize + b.len()).contains(&offset))
        };
        assert!((0..1 << 20).step_by(4096).all(covered));
        assert!(covered((3 << 19) + 10) && covered((5 << 19) + 4095));
        assert!(data <= (1 << 20) + 2 * 4096, "{data} bytes read as data");
        let report = end.report();
        assert_eq!(report.fetched.load(Ordering::Relaxed), 2);
        assert!(report.in_place.load(Ordering::Relaxed) > 100);
        assert_eq!(report.unwritten.load(Ordering::Relaxed), size - data as u64);
        Box::new(end).close().unwrap();

        // Without the output as a seed: no holes, every byte the blob's.
        let mut end = IndexedBlob::start(index.clone(), store, Vec::new(), settings);
        assert_eq!(end.next_data(0), Err(Errno::NOTSUP));
        let mut all = vec![0u8; blob.len() + 1];
        let mut got = 0;
        loop {
            let n = end.read(&mut all[got..]).unwrap();
            if n == 0 {
                break;
            }
            got += n;
        }
        assert_eq!(&all[..got], &blob[..]);
        // Each id fetched once, but a run of zeros of the maximum size,
        // which is made.
        let zeros = Digest::Sha512_256.id(&vec![0u8; index.sizes.max as usize]);
        let distinct: std::collections::HashSet<ChunkId> = index
            .chunks
            .iter()
            .map(|c| c.id)
            .filter(|id| *id != zeros)
            .collect();
        let report = end.report();
        assert_eq!(
            report.fetched.load(Ordering::Relaxed),
            distinct.len() as u64
        );
    }

    #[test]
    fn a_chunk_the_store_lacks_is_named_with_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let blob = noise(300_000, 9);
        let (index, store) = stored(&blob, dir.path());
        let lost = index.chunks.len() / 2;
        store.remove(&index.chunks[lost].id).unwrap();
        let (start, _) = index.span(lost);
        let settings = ExtractSettings {
            workers: 2,
            window: 4,
            holes: false,
        };
        let mut end = IndexedBlob::start(index.clone(), store, Vec::new(), settings);
        let mut buf = vec![0u8; blob.len()];
        let mut got = 0;
        let errno = loop {
            match end.read(&mut buf[got..]) {
                Ok(0) => panic!("read to the end"),
                Ok(n) => got += n,
                Err(errno) => break errno,
            }
        };
        assert_eq!(errno, Errno::NOENT);
        assert!(got as u64 <= start);
        let detail = end.take_detail().unwrap();
        assert!(
            detail.contains(&format!(
                "chunk {lost} at blob offset {start} ({})",
                index.chunks[lost].id
            )) && detail.contains("is not in the store"),
            "{detail}"
        );
    }

    #[test]
    fn held_blocks_are_whole_blocks_or_the_chunks_edges() {
        let new = vec![1u8; 10_000];
        let mut old = new.clone();
        old[5000] = 0;
        // The chunk starts at 3000: blocks [3000,4096) [4096,8192) [8192,12288) [12288,13000).
        let held = held_blocks(3000, &old, &new);
        assert_eq!(held, vec![(3000, 4096), (8192, 13000)]);
        assert_eq!(held_blocks(0, &[], &new), vec![]);
    }
}
