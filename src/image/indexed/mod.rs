//! casync indexes as ends of a copy: making one of the input
//! ([`IndexMaker`], an output end) and writing one's blob onto the output
//! ([`IndexedBlob`], an input end), with a chunk store (`store`) and
//! casync's format (`casync`).
//!
//! Both are peers of the file end behind [`crate::ends::End`]: the engine
//! moves the bytes, counts them and shows progress as for any copy, and
//! the image writers around them (the safe order, direct writes, `--tee`)
//! apply as they do to a decompressed image. When they apply is the
//! copy's (`copy::indexed`).

mod extract;
mod make;

pub use extract::{ExtractReport, ExtractSettings, IndexedBlob, Seed, SeedKind, SeedReader, BLOCK};
pub use make::{IndexFile, IndexMaker, MakeReport, MakeSettings};
