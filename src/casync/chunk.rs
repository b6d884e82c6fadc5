//! A chunk as casync names and stores it: its id, the digest of its
//! bytes (SHA-512/256 by default, SHA-256 where the index's flags say
//! so), and its file in a store, `xxxx/<id>.cacnk`, the bytes compressed
//! (zstd as ddx and casync write them; xz and gzip as casync may have
//! written them too, told apart by their magic bytes as casync tells
//! them).
//!
//! [`decode`] is a reader of bytes ddx did not write (a store's files):
//! it never holds more than the size the index gives the chunk, and says
//! in one line what is wrong with a chunk that cannot be read. Checking
//! that the bytes are the chunk's (their digest is its id) is
//! [`Digest::check`], done wherever a chunk arrives.

use std::fmt;
use std::io::Read;

/// An id's bytes.
pub const ID_LEN: usize = 32;

/// What a chunk's file name ends in.
pub const SUFFIX: &str = ".cacnk";

/// A chunk's id: the digest of its uncompressed bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkId(pub [u8; ID_LEN]);

impl ChunkId {
    /// An id from its 64 lower-case hex digits, as store files name it.
    pub fn parse(hex: &str) -> Option<ChunkId> {
        let bytes = hex.as_bytes();
        if bytes.len() != ID_LEN * 2 {
            return None;
        }
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let mut id = [0u8; ID_LEN];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            id[i] = digit(pair[0])? << 4 | digit(pair[1])?;
        }
        Some(ChunkId(id))
    }

    /// Where the chunk's file is in a store: `xxxx/<id>.cacnk`, the
    /// directory named by the id's first four hex digits.
    pub fn store_path(&self) -> String {
        let hex = self.to_string();
        format!("{}/{hex}{SUFFIX}", &hex[..4])
    }

    /// The id a store file's name (`<id>.cacnk`) gives, if it is one.
    pub fn of_file_name(name: &str) -> Option<ChunkId> {
        ChunkId::parse(name.strip_suffix(SUFFIX)?)
    }
}

impl fmt::Display for ChunkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ChunkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ChunkId({self})")
    }
}

/// The digest chunk ids are taken with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Digest {
    /// casync's default (the index's `SHA512_256` flag).
    Sha512_256,
    Sha256,
}

impl Digest {
    pub fn name(self) -> &'static str {
        match self {
            Digest::Sha512_256 => "sha512-256",
            Digest::Sha256 => "sha256",
        }
    }

    /// The id of `data`.
    pub fn id(self, data: &[u8]) -> ChunkId {
        use sha2::Digest as _;
        let bytes: [u8; ID_LEN] = match self {
            Digest::Sha512_256 => sha2::Sha512_256::digest(data).into(),
            Digest::Sha256 => sha2::Sha256::digest(data).into(),
        };
        ChunkId(bytes)
    }

    /// Ok when `data` is the chunk `id`; else the id the bytes have.
    pub fn check(self, id: &ChunkId, data: &[u8]) -> Result<(), ChunkId> {
        let actual = self.id(data);
        if actual == *id {
            Ok(())
        } else {
            Err(actual)
        }
    }
}

/// Why a chunk's file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    #[error("the chunk's file is empty")]
    Empty,
    #[error("the chunk's file is not compressed as casync compresses chunks (zstd, xz or gzip)")]
    UnknownFormat,
    #[error("its {format} data is corrupt: {cause}")]
    Corrupt { format: &'static str, cause: String },
    #[error("it decompresses to more than the {expected} bytes the index gives the chunk")]
    TooLong { expected: usize },
    #[error("it decompresses to {actual} bytes, where the index gives the chunk {expected}")]
    WrongSize { expected: usize, actual: usize },
}

/// The compressed file of `data`: one zstd frame at `level`, which
/// casync, desync and ddx all read.
pub fn encode(data: &[u8], level: i32) -> Vec<u8> {
    zstd::bulk::compress(data, level).expect("compressing into a buffer of zstd's bound")
}

/// The bytes of a chunk's file `file`, which the index says are
/// `expected` bytes long.
pub fn decode(file: &[u8], expected: usize) -> Result<Vec<u8>, ChunkError> {
    if file.is_empty() {
        return Err(ChunkError::Empty);
    }
    let data = if file.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        // One more byte of room than the chunk needs: a file that fills
        // it decodes to more than the chunk, whatever its header claims.
        let mut decoder = zstd::bulk::Decompressor::new().map_err(|e| corrupt("zstd", e))?;
        match decoder.decompress(file, expected + 1) {
            Ok(data) => data,
            Err(e) if e.to_string().contains("Destination buffer is too small") => {
                return Err(ChunkError::TooLong { expected });
            }
            Err(e) => return Err(corrupt("zstd", e)),
        }
    } else if file.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
        read_limited("xz", liblzma::read::XzDecoder::new(file), expected)?
    } else if file.starts_with(&[0x1f, 0x8b]) {
        read_limited("gzip", flate2::read::GzDecoder::new(file), expected)?
    } else {
        return Err(ChunkError::UnknownFormat);
    };
    if data.len() > expected {
        return Err(ChunkError::TooLong { expected });
    }
    if data.len() != expected {
        return Err(ChunkError::WrongSize {
            expected,
            actual: data.len(),
        });
    }
    Ok(data)
}

fn corrupt(format: &'static str, e: impl fmt::Display) -> ChunkError {
    ChunkError::Corrupt {
        format,
        cause: e
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// At most `expected + 1` bytes of `reader`'s stream.
fn read_limited(
    format: &'static str,
    reader: impl Read,
    expected: usize,
) -> Result<Vec<u8>, ChunkError> {
    let mut data = Vec::with_capacity(expected + 1);
    reader
        .take(expected as u64 + 1)
        .read_to_end(&mut data)
        .map_err(|e| corrupt(format, e))?;
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_named_and_stored_as_casync_names_them() {
        let id = Digest::Sha512_256.id(b"abc");
        // SHA-512/256("abc"), FIPS 180-4's example.
        assert_eq!(
            id.to_string(),
            "53048e2681941ef99b2e29b76b4c7dabe4c2d0c634fc6d46e0e2f13107e7af23"
        );
        assert_eq!(ChunkId::parse(&id.to_string()), Some(id));
        assert_eq!(
            id.store_path(),
            "5304/53048e2681941ef99b2e29b76b4c7dabe4c2d0c634fc6d46e0e2f13107e7af23.cacnk"
        );
        assert_eq!(ChunkId::of_file_name(&format!("{id}.cacnk")), Some(id));
        for bad in [
            "",
            "5304",
            &id.to_string().to_uppercase(),
            &format!("{id}0"),
        ] {
            assert_eq!(ChunkId::parse(bad), None, "{bad}");
        }
        assert_eq!(ChunkId::of_file_name(&format!("{id}.tmp")), None);
        assert_eq!(Digest::Sha512_256.check(&id, b"abc"), Ok(()));
        assert!(Digest::Sha256.check(&id, b"abc").is_err());
    }

    #[test]
    fn a_chunk_round_trips_through_each_format_casync_reads() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let zstd = encode(&data, 3);
        assert_eq!(decode(&zstd, data.len()), Ok(data.clone()));
        let mut xz = Vec::new();
        liblzma::read::XzEncoder::new(&data[..], 1)
            .read_to_end(&mut xz)
            .unwrap();
        assert_eq!(decode(&xz, data.len()), Ok(data.clone()));
        let mut gz = Vec::new();
        flate2::read::GzEncoder::new(&data[..], flate2::Compression::fast())
            .read_to_end(&mut gz)
            .unwrap();
        assert_eq!(decode(&gz, data.len()), Ok(data.clone()));
    }

    #[test]
    fn a_chunk_of_another_size_or_corrupt_is_named_so() {
        let data = vec![7u8; 5000];
        let file = encode(&data, 3);
        assert_eq!(
            decode(&file, 4999),
            Err(ChunkError::TooLong { expected: 4999 })
        );
        assert_eq!(
            decode(&file, 5001),
            Err(ChunkError::WrongSize {
                expected: 5001,
                actual: 5000
            })
        );
        assert_eq!(decode(b"", 1), Err(ChunkError::Empty));
        assert_eq!(decode(b"plain text", 10), Err(ChunkError::UnknownFormat));
        let mut broken = file.clone();
        broken.truncate(file.len() - 3);
        assert!(matches!(
            decode(&broken, 5000),
            Err(ChunkError::Corrupt { .. })
        ));
    }
}
