//! A zstd frame decoded block by block straight into the pieces handed to
//! the reader, with no window of zstd's own.
//!
//! `ZSTD_decompressStream` decodes into a window buffer it owns and copies
//! what it decoded out to the caller: for a large frame decoded on one
//! thread (the single-frame `.zst` the zstd tool writes) that copy was
//! about a tenth of the decoding thread's time, and that thread sets the
//! pace of the whole flash. zstd's buffer-less API (`ZSTD_decompressContinue`)
//! writes each block where the caller says and reads a block's matches
//! from two places: the block's own buffer up to it, and the one buffer
//! decoded before (`ZSTD_checkContinuity` makes that the "extDict" when the
//! output moves to a new buffer). So pieces of at least a window and a
//! block each are a window of their own: a piece is decoded into until
//! another block might not fit, kept while the next one is decoded (its
//! matches reach back into it), and handed to the reader after that.
//! The reader therefore gets pieces one piece late, and the decoder holds
//! two. No crate wraps this API safely (zstd-safe has only the block
//! functions, which leave the frame format to the caller), hence the FFI
//! calls here, each with its SAFETY line.
//!
//! Used where a window is small enough to make pieces of
//! ([`MAX_WINDOW`]); frames with larger windows go through
//! `ZSTD_decompressStream` as before.

use std::ptr::NonNull;

use zstd::zstd_safe::{self, zstd_sys};

use crate::image::chunks::BufferPool;

/// The largest window decoded here: pieces are a window and two blocks,
/// and a handful of them are in flight. zstd's levels up to 19 use at
/// most 8 MiB.
pub const MAX_WINDOW: u64 = 8 << 20;
/// The smallest piece: fewer, larger hand-offs to the reader.
const MIN_PIECE: usize = 4 << 20;
/// Decoded bytes in flight towards the reader, in pieces.
const IN_FLIGHT: usize = 16 << 20;

/// What a frame's header says about how it is decoded here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Capacity of each piece.
    pub piece: usize,
    /// The largest block the frame may hold, decoded.
    block_max: usize,
    /// What the header says the frame decodes to, where it says.
    pub content: Option<u64>,
}

impl Layout {
    /// The layout for the frame whose first bytes are `head`, or None when
    /// its window is too large for pieces (or the header is incomplete or
    /// not a frame's: the stream decoder then says what is wrong).
    pub fn of(head: &[u8]) -> Option<Layout> {
        let mut header = std::mem::MaybeUninit::<zstd_sys::ZSTD_FrameHeader>::uninit();
        // SAFETY: `head` is a live slice of `head.len()` bytes; zstd reads
        // only those and fills `header` when it returns 0.
        let code = unsafe {
            zstd_sys::ZSTD_getFrameHeader(header.as_mut_ptr(), head.as_ptr().cast(), head.len())
        };
        if code != 0 {
            return None;
        }
        // SAFETY: a return of 0 means the header was filled.
        let header = unsafe { header.assume_init() };
        if header.frameType != zstd_sys::ZSTD_FrameType_e::ZSTD_frame
            || header.windowSize > MAX_WINDOW
        {
            return None;
        }
        let block_max = header.blockSizeMax as usize;
        let piece = (header.windowSize as usize + 2 * block_max).max(MIN_PIECE);
        let content =
            Some(header.frameContentSize).filter(|&n| n != zstd_safe::CONTENTSIZE_UNKNOWN);
        Some(Layout {
            piece,
            block_max,
            content,
        })
    }

    /// Pieces a part may have waiting for the reader.
    pub fn depth(&self) -> usize {
        (IN_FLIGHT / self.piece).max(2)
    }
}

/// One frame being decoded: the zstd context, the piece being filled and
/// the one before it, which the context still reads.
pub struct BlockDecoder {
    dctx: NonNull<zstd_sys::ZSTD_DCtx>,
    layout: Layout,
    current: Vec<u8>,
    /// The piece decoded before `current`: zstd's extDict, never touched
    /// until it is replaced.
    history: Option<Vec<u8>>,
    /// Bytes decoded so far.
    decoded: u64,
}

// SAFETY: the context is used by one thread at a time (through &mut self)
// and holds no thread-local state; it points only into `current` and
// `history`, which move with it.
unsafe impl Send for BlockDecoder {}

impl BlockDecoder {
    /// Ready to decode a frame from its first byte, into a first piece from
    /// `pool`; its checksum is verified if `verify`.
    pub fn new(
        layout: Layout,
        pool: &BufferPool,
        verify: bool,
    ) -> Result<BlockDecoder, &'static str> {
        // SAFETY: plain allocation; a null return is handled below.
        let dctx = NonNull::new(unsafe { zstd_sys::ZSTD_createDCtx() })
            .ok_or("out of memory for a zstd context")?;
        let decoder = BlockDecoder {
            dctx,
            layout,
            current: fresh(pool, layout.piece),
            history: None,
            decoded: 0,
        };
        if !verify {
            // SAFETY: a valid context and a parameter zstd bounds-checks.
            let code = unsafe {
                zstd_sys::ZSTD_DCtx_setParameter(
                    decoder.dctx.as_ptr(),
                    zstd_sys::ZSTD_dParameter::ZSTD_d_experimentalParam3,
                    1,
                )
            };
            check(code)?;
        }
        // SAFETY: the context was just created and is valid.
        let code = unsafe { zstd_sys::ZSTD_decompressBegin(decoder.dctx.as_ptr()) };
        check(code)?;
        Ok(decoder)
    }

    /// Compressed bytes the next step takes: exactly this many. 0 once the
    /// frame (and its checksum) is complete.
    pub fn wants(&mut self) -> usize {
        // SAFETY: the context is valid; the call only reads its state.
        unsafe { zstd_sys::ZSTD_nextSrcSizeToDecompress(self.dctx.as_ptr()) }
    }

    /// If the current piece may not hold another block: start a new one
    /// (from `pool`) and give back the piece zstd no longer reads, if any,
    /// for the reader.
    pub fn rotate(&mut self, pool: &BufferPool) -> Option<Vec<u8>> {
        if self.current.capacity() - self.current.len() >= self.layout.block_max {
            return None;
        }
        let full = std::mem::replace(&mut self.current, fresh(pool, self.layout.piece));
        // The old history stays named as zstd's extDict until the next
        // step, whose continuity check (before it decodes anything) moves
        // the extDict to `full`: the pointer is never followed again.
        self.history.replace(full)
    }

    /// Decode `src` (exactly [`BlockDecoder::wants`] bytes) onto the end of
    /// the current piece. Call [`BlockDecoder::rotate`] first.
    pub fn step(&mut self, src: &[u8]) -> Result<(), &'static str> {
        // SAFETY: the context is valid; the call only reads its state.
        let next = unsafe { zstd_sys::ZSTD_nextInputType(self.dctx.as_ptr()) };
        if next == zstd_sys::ZSTD_nextInputType_e::ZSTDnit_blockHeader && empty_compressed(src) {
            // The buffer-less API takes a block of no bytes as empty
            // whatever its type; a compressed block holds at least its
            // literals' header, and zstd's one-shot decoder (which ddx
            // uses for the frames it holds whole) calls it corrupt.
            return Err("Data corruption detected (a compressed block of no bytes)");
        }
        let len = self.current.len();
        let room = self.current.capacity() - len;
        debug_assert!(room >= self.layout.block_max);
        // SAFETY: `dst` is the spare capacity of `current` (`room` bytes,
        // allocated, nothing else refers to it) and zstd writes at most
        // `room` bytes there. The bytes zstd reads back for matches are
        // those it wrote earlier in `current` and in `history`, both
        // allocated and unchanged since (neither is resized, written or
        // dropped while the context refers to them; see `rotate`).
        let code = unsafe {
            zstd_sys::ZSTD_decompressContinue(
                self.dctx.as_ptr(),
                self.current.as_mut_ptr().add(len).cast(),
                room,
                src.as_ptr().cast(),
                src.len(),
            )
        };
        let written = check(code)?;
        // SAFETY: zstd initialised `written` (<= room) bytes after `len`.
        unsafe { self.current.set_len(len + written) };
        self.decoded += written as u64;
        Ok(())
    }

    /// The frame, complete, decoded to the size its header gives, where
    /// it gives one. zstd checks that size at the end of the last block,
    /// but not when the last block is empty: a frame whose blocks end
    /// early with an empty one would otherwise pass for whole.
    pub fn check_size(&self) -> Result<(), String> {
        match self.layout.content {
            Some(content) if content != self.decoded => Err(format!(
                "the frame decodes to {} bytes, its header says {content}",
                self.decoded
            )),
            _ => Ok(()),
        }
    }

    /// The decoded pieces not handed out yet, in order, once the frame is
    /// complete.
    pub fn finish(mut self) -> impl Iterator<Item = Vec<u8>> {
        let history = self.history.take();
        let current = std::mem::take(&mut self.current);
        history
            .into_iter()
            .chain(std::iter::once(current))
            .filter(|piece| !piece.is_empty())
    }
}

impl Drop for BlockDecoder {
    fn drop(&mut self) {
        // SAFETY: the context was created by ZSTD_createDCtx and is freed
        // once; nothing uses it afterwards.
        unsafe { zstd_sys::ZSTD_freeDCtx(self.dctx.as_ptr()) };
    }
}

/// Whether `header`, a block's 3-byte header, is a compressed block's
/// that says it has no bytes.
fn empty_compressed(header: &[u8]) -> bool {
    let Ok(&[a, b, c]) = <&[u8; 3]>::try_from(header) else {
        return false;
    };
    let header = u32::from_le_bytes([a, b, c, 0]);
    // Bit 0: last block; bits 1-2: type (2 is compressed); then the size.
    (header >> 1) & 3 == 2 && header >> 3 == 0
}

/// An empty buffer of at least `capacity` bytes, from the pool.
fn fresh(pool: &BufferPool, capacity: usize) -> Vec<u8> {
    let mut buf = pool.take();
    buf.clear();
    buf.reserve(capacity);
    buf
}

fn check(code: usize) -> Result<usize, &'static str> {
    // SAFETY: a pure function of the code.
    if unsafe { zstd_sys::ZSTD_isError(code) } != 0 {
        Err(zstd_safe::get_error_name(code))
    } else {
        Ok(code)
    }
}
