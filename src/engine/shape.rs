//! The shape of a bulk copy: what the planner decides and both the reader
//! and the backends follow. A leaf of its own, so that the reader, which
//! the backends drive, need not import the backends to know it.

/// How a bulk copy counts its records (see `planner::bulk_shape`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkShape {
    /// Bytes per request: a whole number of input records.
    pub chunk: usize,
    /// The block GNU writes (obs when re-blocking, else ibs): holes are
    /// passed on in whole blocks of it.
    pub write_block: usize,
    /// The input is a regular file whose holes can be found (SEEK_DATA).
    pub sparse_input: bool,
    /// The input's holes are a block map's unmapped blocks (`--bmap`):
    /// passed on wherever they start, and left unwritten in the output
    /// (the output keeps what it had there, as with bmaptool). Records
    /// are then counted from the bytes (see `writer`), since a hole may
    /// start and end inside one.
    pub mapped_holes: bool,
}
