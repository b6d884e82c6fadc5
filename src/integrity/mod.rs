//! Integrity: digests of the copied stream (`--hash=sha256,blake3,xxh3`)
//! and the read-back check of the output (`--verify`).
//!
//! Hashing runs on its own thread so that it overlaps the copy's reads and
//! writes instead of adding to them: the copy hands a [`Tap`] the bytes it
//! passes on (one memcpy into a recycled 1 MiB staging buffer), and the
//! hasher thread digests full buffers while the copy goes on. The same
//! thread keeps one xxh3 digest per MiB of the stream, which is what
//! `--verify` compares the re-read output against, so a verify needs
//! neither the input again nor a second copy of the data.
//!
//! The hasher thread is never the copy's bottleneck where cores are to
//! spare: BLAKE3 spreads each staged MiB over rayon's threads, and several
//! digests of one buffer run side by side ([`PARALLEL_MIN`]).
//!
//! Buffer ownership: a staging buffer belongs to the Tap until it is sent;
//! the hasher thread sends it back empty when done with it.

pub mod checkfile;
pub mod verify;

use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;

use sha2::Digest as _;

/// Stream bytes per verify digest.
pub const VERIFY_CHUNK: usize = 1 << 20;

/// Staging buffers in flight between the copy and the hasher thread.
const STAGING_BUFFERS: usize = 4;

/// A digest algorithm of `--hash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Sha256,
    Blake3,
    /// XXH3, 64 bits (as `xxhsum -H3` prints it).
    Xxh3,
}

impl Algorithm {
    pub const NAMES: &'static [&'static str] = &["sha256", "blake3", "xxh3"];

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Sha256 => "sha256",
            Algorithm::Blake3 => "blake3",
            Algorithm::Xxh3 => "xxh3",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "sha256" => Some(Algorithm::Sha256),
            "blake3" => Some(Algorithm::Blake3),
            "xxh3" => Some(Algorithm::Xxh3),
            _ => None,
        }
    }

    /// `--hash=ALG[,ALG]...`: a list without repeats.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, String> {
        let mut list = Vec::new();
        for name in text.split(',') {
            let algorithm = Algorithm::from_name(name.trim()).ok_or_else(|| {
                format!(
                    "invalid argument {} for '--hash'; valid arguments are {}",
                    crate::text::quote::quote(name.as_bytes()),
                    Algorithm::NAMES
                        .iter()
                        .map(|n| format!("'{n}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            if !list.contains(&algorithm) {
                list.push(algorithm);
            }
        }
        Ok(list)
    }
}

enum State {
    Sha256(Box<sha2::Sha256>),
    Blake3(Box<blake3::Hasher>),
    Xxh3(Box<xxhash_rust::xxh3::Xxh3>),
}

/// Blocks from this size are hashed on several cores: BLAKE3 splits one
/// block over rayon's threads (its authors' advice: from 128 KiB the
/// split pays for itself), and several digests run side by side. SHA-256
/// cannot be split (each block depends on the one before), and runs on
/// the CPU's SHA extensions where it has them (the sha2 crate detects
/// them at run time).
const PARALLEL_MIN: usize = 128 * 1024;

impl State {
    fn update(&mut self, data: &[u8]) {
        match self {
            State::Sha256(h) => h.update(data),
            State::Blake3(h) if data.len() >= PARALLEL_MIN => {
                h.update_rayon(data);
            }
            State::Blake3(h) => {
                h.update(data);
            }
            State::Xxh3(h) => h.update(data),
        }
    }
}

/// The digests of a stream, fed in order.
pub struct Hashers {
    states: Vec<(Algorithm, State)>,
    /// One xxh3-64 per VERIFY_CHUNK of the stream, when verifying.
    chunk_digests: Option<ChunkDigests>,
}

/// Per-MiB digests of the stream, for `--verify`.
#[derive(Default, Clone)]
pub struct ChunkDigests {
    pub digests: Vec<u64>,
    current: xxhash_rust::xxh3::Xxh3,
    in_current: usize,
    /// Stream bytes seen.
    pub total: u64,
}

impl ChunkDigests {
    fn update(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        while !data.is_empty() {
            let take = (VERIFY_CHUNK - self.in_current).min(data.len());
            self.current.update(&data[..take]);
            self.in_current += take;
            data = &data[take..];
            if self.in_current == VERIFY_CHUNK {
                self.digests.push(self.current.digest());
                self.current.reset();
                self.in_current = 0;
            }
        }
    }

    fn finish(mut self) -> Self {
        if self.in_current > 0 {
            self.digests.push(self.current.digest());
            self.in_current = 0;
        }
        self
    }
}

/// A finished digest, for printing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    pub algorithm: Algorithm,
    pub hex: String,
}

impl Hashers {
    pub fn new(algorithms: &[Algorithm], chunk_digests: bool) -> Self {
        let states = algorithms
            .iter()
            .map(|&a| {
                let state = match a {
                    Algorithm::Sha256 => State::Sha256(Box::default()),
                    Algorithm::Blake3 => State::Blake3(Box::default()),
                    Algorithm::Xxh3 => State::Xxh3(Box::default()),
                };
                (a, state)
            })
            .collect();
        Hashers {
            states,
            chunk_digests: chunk_digests.then(ChunkDigests::default),
        }
    }

    pub fn update(&mut self, data: &[u8]) {
        let digests = self.states.len() + usize::from(self.chunk_digests.is_some());
        if data.len() < PARALLEL_MIN || digests < 2 {
            for (_, state) in &mut self.states {
                state.update(data);
            }
            if let Some(chunks) = &mut self.chunk_digests {
                chunks.update(data);
            }
            return;
        }
        // Each digest of a large block on a core of its own: with
        // `--hash=sha256,blake3 --verify` the stream goes no slower than
        // its slowest digest.
        rayon::scope(|scope| {
            for (_, state) in &mut self.states {
                scope.spawn(move |_| state.update(data));
            }
            if let Some(chunks) = &mut self.chunk_digests {
                scope.spawn(move |_| chunks.update(data));
            }
        });
    }

    pub fn zeros(&mut self, mut len: u64) {
        static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
        while len > 0 {
            let n = len.min(ZEROS.len() as u64) as usize;
            self.update(&ZEROS[..n]);
            len -= n as u64;
        }
    }

    pub fn finish(self) -> (Vec<Digest>, Option<ChunkDigests>) {
        let digests = self
            .states
            .into_iter()
            .map(|(algorithm, state)| {
                let hex = match state {
                    State::Sha256(h) => hex(&h.finalize()),
                    State::Blake3(h) => h.finalize().to_hex().to_string(),
                    State::Xxh3(h) => format!("{:016x}", h.digest()),
                };
                Digest { algorithm, hex }
            })
            .collect();
        (digests, self.chunk_digests.map(ChunkDigests::finish))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

enum Message {
    Data(Vec<u8>),
    Zeros(u64),
}

/// The copy's end of the hasher thread: hand it every byte passed on, in
/// order. Dropping it sends what is still staged.
pub struct Tap {
    sender: Option<SyncSender<Message>>,
    free: Receiver<Vec<u8>>,
    staging: Vec<u8>,
    allocated: usize,
}

/// The hasher thread, to be joined for the digests once the Tap is gone.
pub struct HashJob {
    thread: JoinHandle<(Vec<Digest>, Option<ChunkDigests>)>,
}

/// Start a hasher thread for `algorithms` (and per-MiB digests if
/// `chunk_digests`). None if no thread can be made: the caller then has
/// no way to hash and says so.
pub fn start(algorithms: &[Algorithm], chunk_digests: bool) -> Option<(Tap, HashJob)> {
    let (sender, receiver) = sync_channel::<Message>(STAGING_BUFFERS);
    let (free_sender, free): (Sender<Vec<u8>>, Receiver<Vec<u8>>) = channel();
    let mut hashers = Hashers::new(algorithms, chunk_digests);
    let thread = std::thread::Builder::new()
        .name("ddx-hash".into())
        .spawn(move || {
            for message in receiver {
                match message {
                    Message::Data(mut buf) => {
                        hashers.update(&buf);
                        buf.clear();
                        let _ = free_sender.send(buf);
                    }
                    Message::Zeros(len) => hashers.zeros(len),
                }
            }
            hashers.finish()
        })
        .ok()?;
    Some((
        Tap {
            sender: Some(sender),
            free,
            staging: Vec::with_capacity(VERIFY_CHUNK),
            allocated: 1,
        },
        HashJob { thread },
    ))
}

impl Tap {
    /// Bytes passed on by the copy.
    pub fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let room = VERIFY_CHUNK - self.staging.len();
            let take = room.min(data.len());
            self.staging.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.staging.len() == VERIFY_CHUNK {
                self.send_staging();
            }
        }
    }

    /// `len` zero bytes passed on (a hole, a zero-filled bad range).
    pub fn zeros(&mut self, len: u64) {
        self.send_staging();
        if let Some(sender) = &self.sender {
            let _ = sender.send(Message::Zeros(len));
        }
    }

    fn send_staging(&mut self) {
        if self.staging.is_empty() {
            return;
        }
        let next = match self.free.try_recv() {
            Ok(buf) => buf,
            Err(_) if self.allocated < STAGING_BUFFERS => {
                self.allocated += 1;
                Vec::with_capacity(VERIFY_CHUNK)
            }
            Err(_) => self.free.recv().unwrap_or_default(),
        };
        let full = std::mem::replace(&mut self.staging, next);
        if let Some(sender) = &self.sender {
            let _ = sender.send(Message::Data(full));
        }
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.send_staging();
        self.sender = None;
    }
}

impl HashJob {
    /// The digests, once the Tap has been dropped (else this waits).
    pub fn finish(self) -> (Vec<Digest>, Option<ChunkDigests>) {
        self.thread.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests_of_abc() {
        let mut hashers = Hashers::new(
            &[Algorithm::Sha256, Algorithm::Blake3, Algorithm::Xxh3],
            false,
        );
        hashers.update(b"ab");
        hashers.update(b"c");
        let (digests, _) = hashers.finish();
        assert_eq!(
            digests[0].hex,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            digests[1].hex,
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
        );
        assert_eq!(digests[2].hex.len(), 16);
    }

    #[test]
    fn the_thread_sees_what_the_tap_was_fed() {
        let data: Vec<u8> = (0..3 * VERIFY_CHUNK + 12345)
            .map(|i| (i % 251) as u8)
            .collect();
        let (mut tap, job) = start(&[Algorithm::Xxh3], true).unwrap();
        tap.feed(&data[..100]);
        tap.feed(&data[100..2 * VERIFY_CHUNK + 7]);
        tap.feed(&data[2 * VERIFY_CHUNK + 7..]);
        tap.zeros(5);
        drop(tap);
        let (digests, chunks) = job.finish();
        let mut whole = data.clone();
        whole.extend_from_slice(&[0; 5]);
        assert_eq!(
            digests[0].hex,
            format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&whole))
        );
        let chunks = chunks.unwrap();
        assert_eq!(chunks.total, whole.len() as u64);
        assert_eq!(chunks.digests.len(), 4);
        assert_eq!(
            chunks.digests[3],
            xxhash_rust::xxh3::xxh3_64(&whole[3 * VERIFY_CHUNK..])
        );
    }

    #[test]
    fn large_blocks_hashed_on_several_cores_give_the_same_digests() {
        let data: Vec<u8> = (0..3 * PARALLEL_MIN + 4099)
            .map(|i| (i * 7 % 253) as u8)
            .collect();
        let mut hashers = Hashers::new(
            &[Algorithm::Sha256, Algorithm::Blake3, Algorithm::Xxh3],
            true,
        );
        // A small block, then large ones: both paths, in order.
        hashers.update(&data[..100]);
        hashers.update(&data[100..2 * PARALLEL_MIN + 100]);
        hashers.update(&data[2 * PARALLEL_MIN + 100..]);
        let (digests, chunks) = hashers.finish();
        assert_eq!(digests[0].hex, hex(&sha2::Sha256::digest(&data)));
        assert_eq!(digests[1].hex, blake3::hash(&data).to_hex().to_string());
        assert_eq!(
            digests[2].hex,
            format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&data))
        );
        assert_eq!(chunks.unwrap().total, data.len() as u64);
    }

    #[test]
    fn lists_of_names() {
        assert_eq!(
            Algorithm::parse_list("sha256,BLAKE3,sha256").unwrap(),
            vec![Algorithm::Sha256, Algorithm::Blake3]
        );
        assert!(Algorithm::parse_list("md5").is_err());
    }
}
