//! One zstd frame at a time, from zstd's own compression context.
//!
//! By hand rather than through `zstd::bulk::Compressor`, which gives no
//! access to its context, for one parameter the crate does not expose:
//! `ZSTD_c_blockSplitterLevel`. From zstd 1.5.7 (the library the crate
//! builds) the compressor splits blocks where the data seems to change,
//! at about 16 KiB on a disk image, where the zstd tool 1.5.4 writes
//! blocks of 128 KiB: eight times the blocks, which every reader that
//! walks them pays for (the size an image decodes to is found before
//! writing by reading each block's header: 53 ms for 1 GiB of ddx's
//! frames against 8 ms). Level 1 turns that splitting off; the frames
//! are otherwise the ones the crate made, with their checksums.

use std::ptr::NonNull;

use zstd::zstd_safe::zstd_sys as sys;

/// `ZSTD_c_blockSplitterLevel` (zstd.h: experimental parameter 20).
const BLOCK_SPLITTER_LEVEL: sys::ZSTD_cParameter = sys::ZSTD_cParameter::ZSTD_c_experimentalParam20;

/// A compression context, for one thread at a time.
pub struct FrameCompressor(NonNull<sys::ZSTD_CCtx>);

// SAFETY: a ZSTD_CCtx holds no thread-local state; zstd allows using it
// from any thread as long as one thread at a time does (`&mut self` for
// compressing, and nothing is shared: the type is not Sync).
unsafe impl Send for FrameCompressor {}

fn checked(code: usize) -> Result<usize, String> {
    // SAFETY: ZSTD_isError takes any value and reads nothing.
    if unsafe { sys::ZSTD_isError(code) } == 0 {
        return Ok(code);
    }
    Err(zstd::zstd_safe::get_error_name(code).to_owned())
}

impl FrameCompressor {
    /// A context for frames at `level`, each with its checksum.
    pub fn new(level: i32) -> Result<FrameCompressor, String> {
        // SAFETY: ZSTD_createCCtx has no preconditions; null is out of memory.
        let context = unsafe { sys::ZSTD_createCCtx() };
        let context = NonNull::new(context).ok_or("zstd: no memory for a compression context")?;
        let compressor = FrameCompressor(context);
        compressor.set(sys::ZSTD_cParameter::ZSTD_c_compressionLevel, level)?;
        compressor.set(sys::ZSTD_cParameter::ZSTD_c_checksumFlag, 1)?;
        // A library without the parameter has no such splitting either.
        let _ = compressor.set(BLOCK_SPLITTER_LEVEL, 1);
        Ok(compressor)
    }

    fn set(&self, parameter: sys::ZSTD_cParameter, value: i32) -> Result<(), String> {
        // SAFETY: the context is valid from ZSTD_createCCtx to Drop.
        checked(unsafe { sys::ZSTD_CCtx_setParameter(self.0.as_ptr(), parameter, value) }).map(drop)
    }

    /// `data` as one frame.
    pub fn frame(&mut self, data: &[u8]) -> Result<Vec<u8>, String> {
        // SAFETY: ZSTD_compressBound only computes.
        let bound = unsafe { sys::ZSTD_compressBound(data.len()) };
        let mut out = Vec::<u8>::with_capacity(bound);
        // SAFETY: the context is valid and used by this thread alone
        // (&mut self); `out` has `bound` bytes of capacity to write and
        // `data` is read for its length, both for the call only.
        let written = checked(unsafe {
            sys::ZSTD_compress2(
                self.0.as_ptr(),
                out.as_mut_ptr().cast(),
                bound,
                data.as_ptr().cast(),
                data.len(),
            )
        })?;
        // SAFETY: ZSTD_compress2 wrote `written` bytes (at most `bound`,
        // which it checks) at the start of `out`.
        unsafe { out.set_len(written) };
        Ok(out)
    }
}

impl Drop for FrameCompressor {
    fn drop(&mut self) {
        // SAFETY: the context was made by ZSTD_createCCtx and is freed once.
        unsafe { sys::ZSTD_freeCCtx(self.0.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocks of a frame (its header, then block headers to the last).
    fn blocks(frame: &[u8]) -> usize {
        let descriptor = frame[4];
        let single = usize::from(descriptor & 0x20 != 0);
        let content = match descriptor >> 6 {
            0 => single,
            1 => 2,
            2 => 4,
            _ => 8,
        };
        let dictionary = [0, 1, 2, 4][usize::from(descriptor & 3)];
        let mut at = 5 + (1 - single) + dictionary + content;
        let mut count = 0;
        loop {
            let header = u32::from(frame[at])
                | u32::from(frame[at + 1]) << 8
                | u32::from(frame[at + 2]) << 16;
            let size = (header >> 3) as usize;
            at += 3 + if (header >> 1) & 3 == 1 { 1 } else { size };
            count += 1;
            if header & 1 == 1 {
                return count;
            }
        }
    }

    /// Runs of text and noise, as a disk image has: zstd 1.5.7 split them
    /// into blocks of about 16 KiB.
    fn image_like(len: usize) -> Vec<u8> {
        let mut data = Vec::with_capacity(len);
        let mut state = 0x2545_f491_4f6c_dd1du64;
        while data.len() < len {
            for _ in 0..(12 << 10) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                data.push(state as u8);
            }
            data.extend(b"ddx copies disks; ".iter().cycle().take(20 << 10));
        }
        data.truncate(len);
        data
    }

    #[test]
    fn frames_keep_whole_blocks_and_decode_with_their_checksum() {
        let data = image_like(4 << 20);
        let frame = FrameCompressor::new(3).unwrap().frame(&data).unwrap();
        let split = zstd::bulk::compress(&data, 3).unwrap();
        // 4 MiB in blocks of 128 KiB: 32; split, several times that.
        assert!(blocks(&frame) <= 40, "{} blocks", blocks(&frame));
        assert!(
            blocks(&split) > 2 * blocks(&frame),
            "{} split",
            blocks(&split)
        );
        assert_eq!(frame[4] & 0x04, 0x04, "the frame has its checksum");
        assert!(zstd::bulk::decompress(&frame, data.len()).unwrap() == data);
    }

    #[test]
    fn a_context_makes_many_frames() {
        let mut compressor = FrameCompressor::new(19).unwrap();
        for len in [0, 1, 1000, 300_000] {
            let data = image_like(len);
            let frame = compressor.frame(&data).unwrap();
            assert!(
                zstd::bulk::decompress(&frame, len).unwrap() == data,
                "{len} bytes"
            );
        }
    }
}
