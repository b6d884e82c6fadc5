//! casync indexes as stages of a copy: making one of the input
//! ([`IndexMaker`], in place of the output) and writing one's blob onto
//! the output ([`IndexedBlob`], in place of the input, which was the
//! index), with a chunk store (`store`) and casync's format (`casync`).
//!
//! Both are streams the engine reads or writes
//! ([`crate::engine::stream::Stream`]): it moves the bytes, counts them
//! and shows progress as for any copy, and the stages around them (the
//! safe order, direct writes, `--tee`) apply as they do to a decompressed
//! image. Each keeps its own pool of workers and chunks in flight, as the
//! decoder keeps its frames: a chunk is found where its id says (in a
//! seed, in the store), which no window of an end's requests knows, and
//! which blocks are holes must be known before the copy asks for them.
//! When they apply is the copy's (`copy::indexed`).

mod extract;
mod make;

pub use extract::{ExtractReport, ExtractSettings, IndexedBlob, Seed, SeedKind, SeedReader, BLOCK};
pub use make::{IndexFile, IndexMaker, MakeReport, MakeSettings};
