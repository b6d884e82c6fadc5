//! casync's format for blobs (disk images), which casync, desync and
//! RAUC read: a blob cut into chunks where its content says
//! ([`chunker`]), each chunk named by the digest of its bytes and kept
//! compressed in a store ([`chunk`]), and the blob's index, which lists
//! every chunk's end and id in order ([`index`]).
//!
//! The format only: no I/O, no policy. Where chunks are kept and fetched
//! is `store`'s; making an index of an input and writing an index's blob
//! onto an output are the image ends' (`image::indexed`). Every reader of
//! bytes here is pure and fuzzed (`fuzzing`). Depends on nothing in ddx.

pub mod chunk;
pub mod chunker;
pub mod index;

pub use chunk::{ChunkError, ChunkId, Digest};
pub use chunker::{ChunkSizes, Cutter, SizeError};
pub use index::{Entry, Index, IndexError};
