//! What the user sees while and after copying: GNU's statistics and
//! progress lines, printed by a reporter that the copy loop never waits on.
//!
//! The copy loop only bumps atomic counters (`engine::counters`); a ticker
//! thread samples them once a second, or when SIGUSR1 asks, and renders
//! GNU's `status=progress` line, the live line on a terminal (with what a
//! compressed or used-only input has left, from the stage's own position),
//! or a JSON record per second to `--progress-fd`; the reporter prints the
//! statistics in GNU's words and order, and the messages ddx adds after
//! them.

pub mod json;
pub mod live;
pub mod rate;
pub mod reporter;
pub mod stats;
pub mod ticker;

pub use reporter::Reporter;

/// How far a copy has got through what it reads, where that is not what
/// it writes: a compressed input (`--decompress`: the position in the
/// compressed stream, and its size where the input has one; the decoded
/// size is not known until the end), or a disk's used blocks
/// (`--used-only`: the used bytes read, of all the used bytes; the holes
/// between them cost nothing). The bar and the ETA come from these.
/// Defined here, where it is read, so that the reporter needs nothing of
/// the image ends that implement it.
pub trait InputPosition: Send + Sync {
    /// Bytes read so far, of how many.
    fn position(&self) -> InputRead;
}

/// What an [`InputPosition`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Bytes of a compressed input.
    Compressed,
    /// Used bytes of a disk.
    Used,
}

/// An input's position, as sampled for one frame or record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputRead {
    pub read: u64,
    pub total: Option<u64>,
    pub measure: Measure,
}
pub use ticker::Ticker;

/// Where a rescue stands (`--rescue`): the phase running, as the progress
/// line names it (none before the first and after the last), and the
/// bytes read and failed so far, not recovered. Defined here, where it is
/// read, as [`InputPosition`] is.
pub trait RescueStanding: Send + Sync {
    fn standing(&self) -> (Option<String>, u64);
}
