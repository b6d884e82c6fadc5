//! Images: the stages of a copy that make ddx an image writer, each a
//! [`Stream`](crate::engine::stream::Stream) over the stream it is given
//! (an end through its window, or another stage), built and tested on
//! their own and wired into the copy by `copy::images`. A stage holds no
//! data of its own: it is not an end.
//!
//! - [`format`]: which compression a stream is in, from its magic bytes;
//!   [`peek`]: which one an input holds, without taking its bytes.
//! - [`Decompressed`]: an input read decompressed, on threads of its own
//!   (`--decompress`); [`open`] recognises the format and starts it.
//! - [`Compressed`]: an output written compressed (`--compress`).
//! - [`bmap`]: bmaptool's block maps: reading one into a filter over the
//!   input that reads unmapped blocks as holes and checks each mapped
//!   range's digest (`--bmap`), and recording one (`--bmap-create`).
//! - [`Tee`]: one stream written to several outputs in parallel (`--tee`).
//! - [`SafeOrder`]: the first MiB of a device written last, so that an
//!   interrupted write leaves no disk that looks bootable.
//! - [`DirectWrites`]: image writes onto a block device with O_DIRECT
//!   where aligned, so that no page-cache copy and no writeback tail are
//!   left for the final fsync.
//! - [`UsedOnly`]: a disk read as the blocks its file systems use
//!   (`--used-only`), the rest passed on as holes.
//!
//! Every stage here is `Kind::Stream` or passes its inner stream's kind
//! on, and none offers a descriptor: the engine's descriptor-only paths
//! (splice, copy_file_range, io_uring) would go around them. What a
//! compressed input decodes to, where its format records it, is read
//! without taking its bytes from the copy (`decompress::size`: xz's
//! index, zstd's and lz4's frame headers); a zstd frame too large to
//! hold decodes block by block (`decompress::zstd_blocks`, zstd's
//! buffer-less API over FFI, which no crate wraps).

pub mod bmap;
mod chunks;
pub mod compress;
pub mod decompress;
pub mod direct;
pub mod format;
pub mod peek;
mod prefixed;
pub mod safe_order;
mod source;
pub mod tee;
pub mod used;

pub use bmap::{Bmap, BmapError, BmapFilter, BmapRecorder};
pub use compress::{Algorithm, Compressed, Compression, SpecError};
pub use decompress::{open, Decompressed, FrameChecksums, Mode, OpenError, Opened};
pub use direct::{DirectReport, DirectWrites};
pub use format::{recognise, Format, Recognised};
pub use prefixed::Prefixed;
pub use safe_order::SafeOrder;
pub use source::InputProgress;
pub use tee::{Fate, Tee, TeeReport};
pub use used::{UsedOnly, UsedProgress};

#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;
