//! What the user sees while and after copying: GNU's statistics and
//! progress lines, printed by a reporter that the copy loop never waits on.

pub mod json;
pub mod live;
pub mod rate;
pub mod reporter;
pub mod stats;
pub mod ticker;

pub use reporter::Reporter;

/// How far a copy has got through a compressed input (`--decompress`):
/// the position in the compressed stream, and the compressed size where
/// the input has one. The decoded size is not known until the end, so
/// the ETA comes from these. Defined here, where it is read, so that the
/// reporter needs nothing of the image ends that implement it.
pub trait CompressedPosition: Send + Sync {
    /// Compressed bytes read so far, and the compressed input's size.
    fn compressed(&self) -> Compressed;
}

/// A compressed input's position, as sampled for one frame or record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compressed {
    pub read: u64,
    pub total: Option<u64>,
}
pub use ticker::Ticker;

/// Where a rescue stands (`--rescue`): the phase running, as the progress
/// line names it (none before the first and after the last), and the
/// bytes read and failed so far, not recovered. Defined here, where it is
/// read, as [`CompressedPosition`] is.
pub trait RescueStanding: Send + Sync {
    fn standing(&self) -> (Option<String>, u64);
}
