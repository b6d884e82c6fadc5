//! casync's blob index (`.caibx`): the chunk sizes a blob was cut with,
//! then each chunk's end offset and id, in order.
//!
//! Layout, all numbers little-endian 64-bit:
//! - the index header, 48 bytes: its size (48), its type
//!   ([`INDEX_TYPE`]), feature flags (which digest the ids are, and what
//!   `casync make` records of its exclusion settings), and the minimum,
//!   average and maximum chunk sizes;
//! - the table header, 16 bytes: a size of `u64::MAX` (the table is
//!   written as the blob is cut) and its type ([`TABLE_TYPE`]);
//! - one 40-byte item per chunk: the offset at which the chunk ends,
//!   then its 32-byte id;
//! - the table's tail, 40 bytes: two zero words, the offset of the index
//!   header from the table (48), the table's size (16 + 40 per chunk +
//!   40), and [`TAIL_MARKER`].
//!
//! [`Index::parse`] reads an index ddx did not write as strictly as casync
//! reads it (every field checked, offsets rising, no chunk over the
//! maximum, nothing after the tail), and names the byte of the file at
//! which it is wrong; [`Index::to_bytes`] writes what `casync make`
//! writes, byte for byte, for the same chunks.

use super::chunk::{ChunkId, Digest, ID_LEN};
use super::chunker::{ChunkSizes, LIMIT_MAX, LIMIT_MIN};

pub const INDEX_TYPE: u64 = 0x9682_4d9c_7b12_9ff9;
pub const TABLE_TYPE: u64 = 0xe75b_9e11_2f17_417d;
pub const TAIL_MARKER: u64 = 0x4b4f_050e_5549_ecd1;

/// Feature flags casync records in a blob index: the digest the ids are
/// taken with, and two exclusion settings `casync make` always sets.
pub const FLAG_SHA512_256: u64 = 0x2000_0000_0000_0000;
pub const FLAG_EXCLUDE_FILE: u64 = 0x1000_0000_0000_0000;
pub const FLAG_EXCLUDE_NODUMP: u64 = 0x8000_0000_0000_0000;

const INDEX_HEADER: usize = 48;
const TABLE_HEADER: usize = 16;
const ITEM: usize = 8 + ID_LEN;
/// Where the first item is.
pub const ITEMS_START: usize = INDEX_HEADER + TABLE_HEADER;

/// One chunk of the blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The blob offset at which the chunk ends.
    pub end: u64,
    pub id: ChunkId,
}

/// A blob index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    pub flags: u64,
    pub sizes: ChunkSizes,
    pub chunks: Vec<Entry>,
}

/// Why bytes are not a usable blob index; each names where in the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("it is {len} bytes, shorter than an index's headers")]
    Short { len: usize },
    #[error("it does not start as a casync index")]
    NotAnIndex,
    #[error("its chunk sizes at byte 24 are not usable ({min}, {avg}, {max})")]
    Sizes { min: u64, avg: u64, max: u64 },
    #[error("its table header at byte 48 is not a casync index table")]
    Table,
    #[error("it ends at byte {len}, inside the table after {chunks} chunks: it is cut short")]
    Truncated { len: usize, chunks: usize },
    #[error(
        "chunk {chunk} (at byte {at}) ends at blob offset {end}, not after the chunk before it \
         (which ends at {previous})"
    )]
    NotRising {
        chunk: usize,
        at: usize,
        end: u64,
        previous: u64,
    },
    #[error(
        "chunk {chunk} (at byte {at}) is {size} bytes, more than the index's maximum chunk size \
         of {max}"
    )]
    TooLarge {
        chunk: usize,
        at: usize,
        size: u64,
        max: u64,
    },
    #[error("it goes on after the table's end at byte {end}")]
    Trailing { end: usize },
}

fn word(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))
}

impl Index {
    /// An index of `chunks`, cut with `sizes`, the ids taken with
    /// `digest`, flagged as `casync make` flags it.
    pub fn new(digest: Digest, sizes: ChunkSizes, chunks: Vec<Entry>) -> Index {
        let digest_flag = match digest {
            Digest::Sha512_256 => FLAG_SHA512_256,
            Digest::Sha256 => 0,
        };
        Index {
            flags: FLAG_EXCLUDE_FILE | FLAG_EXCLUDE_NODUMP | digest_flag,
            sizes,
            chunks,
        }
    }

    /// The digest the ids are taken with.
    pub fn digest(&self) -> Digest {
        if self.flags & FLAG_SHA512_256 != 0 {
            Digest::Sha512_256
        } else {
            Digest::Sha256
        }
    }

    /// The blob's size: where its last chunk ends.
    pub fn blob_size(&self) -> u64 {
        self.chunks.last().map_or(0, |c| c.end)
    }

    /// Chunk `i`'s blob offsets, start and end.
    pub fn span(&self, i: usize) -> (u64, u64) {
        let start = if i == 0 { 0 } else { self.chunks[i - 1].end };
        (start, self.chunks[i].end)
    }

    /// The index of the chunk holding blob offset `offset`.
    pub fn chunk_at(&self, offset: u64) -> Option<usize> {
        let i = self.chunks.partition_point(|c| c.end <= offset);
        (i < self.chunks.len()).then_some(i)
    }

    /// Read an index.
    pub fn parse(bytes: &[u8]) -> Result<Index, IndexError> {
        if bytes.len() < INDEX_HEADER {
            return Err(IndexError::Short { len: bytes.len() });
        }
        if word(bytes, 0) != INDEX_HEADER as u64 || word(bytes, 8) != INDEX_TYPE {
            return Err(IndexError::NotAnIndex);
        }
        let flags = word(bytes, 16);
        let (min, avg, max) = (word(bytes, 24), word(bytes, 32), word(bytes, 40));
        let limits = LIMIT_MIN..=LIMIT_MAX;
        let usable = [min, avg, max].iter().all(|s| limits.contains(s)) && min <= avg && avg <= max;
        if !usable {
            return Err(IndexError::Sizes { min, avg, max });
        }
        if bytes.len() < ITEMS_START {
            return Err(IndexError::Short { len: bytes.len() });
        }
        if word(bytes, 48) != u64::MAX || word(bytes, 56) != TABLE_TYPE {
            return Err(IndexError::Table);
        }
        let mut chunks = Vec::with_capacity((bytes.len() - ITEMS_START) / ITEM);
        let mut at = ITEMS_START;
        loop {
            if bytes.len() < at + ITEM {
                return Err(IndexError::Truncated {
                    len: bytes.len(),
                    chunks: chunks.len(),
                });
            }
            let item = &bytes[at..at + ITEM];
            let table_size = (TABLE_HEADER + ITEM * (chunks.len() + 1)) as u64;
            let is_tail = word(item, 32) == TAIL_MARKER
                && word(item, 0) == 0
                && word(item, 8) == 0
                && word(item, 16) == INDEX_HEADER as u64
                && word(item, 24) == table_size;
            if is_tail {
                at += ITEM;
                if bytes.len() != at {
                    return Err(IndexError::Trailing { end: at });
                }
                break;
            }
            let end = word(item, 0);
            let previous = chunks.last().map_or(0, |c: &Entry| c.end);
            if end <= previous {
                return Err(IndexError::NotRising {
                    chunk: chunks.len(),
                    at,
                    end,
                    previous,
                });
            }
            if end - previous > max {
                return Err(IndexError::TooLarge {
                    chunk: chunks.len(),
                    at,
                    size: end - previous,
                    max,
                });
            }
            let id = ChunkId(item[8..].try_into().expect("32 bytes"));
            chunks.push(Entry { end, id });
            at += ITEM;
        }
        Ok(Index {
            flags,
            sizes: ChunkSizes { min, avg, max },
            chunks,
        })
    }

    /// The index's file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ITEMS_START + ITEM * (self.chunks.len() + 1));
        for w in [
            INDEX_HEADER as u64,
            INDEX_TYPE,
            self.flags,
            self.sizes.min,
            self.sizes.avg,
            self.sizes.max,
            u64::MAX,
            TABLE_TYPE,
        ] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        for chunk in &self.chunks {
            out.extend_from_slice(&chunk.end.to_le_bytes());
            out.extend_from_slice(&chunk.id.0);
        }
        let table_size = (TABLE_HEADER + ITEM * (self.chunks.len() + 1)) as u64;
        for w in [0, 0, INDEX_HEADER as u64, table_size, TAIL_MARKER] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Index {
        let chunks = (1..=3u64)
            .map(|i| Entry {
                end: i * 20_000,
                id: Digest::Sha512_256.id(&i.to_le_bytes()),
            })
            .collect();
        Index::new(Digest::Sha512_256, ChunkSizes::default(), chunks)
    }

    #[test]
    fn an_index_round_trips_and_is_flagged_as_casync_flags_it() {
        let index = sample();
        let bytes = index.to_bytes();
        assert_eq!(bytes.len(), 64 + 3 * 40 + 40);
        assert_eq!(word(&bytes, 16), 0xb000_0000_0000_0000);
        assert_eq!(Index::parse(&bytes), Ok(index.clone()));
        assert_eq!(index.blob_size(), 60_000);
        assert_eq!(index.span(1), (20_000, 40_000));
        assert_eq!(index.chunk_at(39_999), Some(1));
        assert_eq!(index.chunk_at(40_000), Some(2));
        assert_eq!(index.chunk_at(60_000), None);
        let empty = Index::new(Digest::Sha256, ChunkSizes::default(), Vec::new());
        assert_eq!(Index::parse(&empty.to_bytes()), Ok(empty.clone()));
        assert_eq!(empty.digest(), Digest::Sha256);
    }

    #[test]
    fn every_damage_is_named_where_it_is() {
        let bytes = sample().to_bytes();
        assert_eq!(
            Index::parse(&bytes[..20]),
            Err(IndexError::Short { len: 20 })
        );
        assert_eq!(
            Index::parse(&bytes[..bytes.len() - 1]),
            Err(IndexError::Truncated {
                len: bytes.len() - 1,
                chunks: 3
            })
        );
        assert_eq!(
            Index::parse(&bytes[..64 + 40 + 7]),
            Err(IndexError::Truncated {
                len: 111,
                chunks: 1
            })
        );
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(
            Index::parse(&trailing),
            Err(IndexError::Trailing { end: bytes.len() })
        );
        let mut magic = bytes.clone();
        magic[9] ^= 1;
        assert_eq!(Index::parse(&magic), Err(IndexError::NotAnIndex));
        let mut sizes = bytes.clone();
        sizes[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            Index::parse(&sizes),
            Err(IndexError::Sizes { .. })
        ));
        let mut falling = bytes.clone();
        falling[104..112].copy_from_slice(&10u64.to_le_bytes());
        assert!(matches!(
            Index::parse(&falling),
            Err(IndexError::NotRising {
                chunk: 1,
                at: 104,
                ..
            })
        ));
        let mut large = bytes.clone();
        large[64..72].copy_from_slice(&300_000u64.to_le_bytes());
        assert!(matches!(
            Index::parse(&large),
            Err(IndexError::TooLarge {
                chunk: 0,
                at: 64,
                ..
            })
        ));
    }
}
