//! The size a compressed input decodes to, where its format records it,
//! read without decoding: so that a block map made for another image
//! (`--bmap`) is refused before the output is opened, rather than at the
//! first range whose digest does not match, after writing part of it.
//!
//! - xz records every block's uncompressed size in the index at the end
//!   of each stream: read from the end, stream by stream, as `xz --list`
//!   does.
//! - zstd records a frame's content size in its header when the encoder
//!   knew it (the zstd tool compressing a file, ddx's `--compress`; not
//!   from a pipe); the frames are followed by their block headers, and
//!   one without it leaves the size unknown.
//! - lz4 records it only when asked (`lz4 --content-size`); likewise.
//! - gzip's trailer has the size modulo 4 GiB, of its last member only,
//!   and bzip2 none: unknown.
//!
//! Unknown here is not an error: the map's size is then checked where the
//! decoded stream ends, as before. The input is read by position only
//! (pread), never moved; a walk over frames asks one small read per block,
//! so it is done only on an end with a descriptor (a file, a device).

use super::super::format::{is_skippable_magic, Format, ZSTD_MAGIC};
use crate::ends::Whence;
use crate::engine::stream::Stream;

/// Bytes of an xz index read at most (a stream of 1 TiB in 1 MiB blocks
/// has an index of about 16 MiB).
const MAX_XZ_INDEX: u64 = 64 << 20;

/// What `input` decodes to from its position to its end, in `format`,
/// where the format records it; None where it does not, or the input
/// cannot be read by position.
pub fn decoded_size(input: &mut dyn Stream, format: Format) -> Option<u64> {
    if !input.capabilities().reads_at {
        return None;
    }
    let start = input.seek(Whence::Current(0)).ok()?;
    let end = input.size().ok().flatten()?;
    let mut at = Positioned { input, start, end };
    match format {
        Format::Xz => at.xz(),
        Format::Zstd if at.input.fd().is_some() => at.zstd(),
        Format::Lz4 if at.input.fd().is_some() => at.lz4(),
        _ => None,
    }
}

struct Positioned<'a> {
    input: &'a mut dyn Stream,
    start: u64,
    end: u64,
}

impl Positioned<'_> {
    /// `len` bytes at `offset`, whole, within the input.
    fn bytes(&mut self, offset: u64, len: usize) -> Option<Vec<u8>> {
        if offset < self.start || offset.checked_add(len as u64)? > self.end {
            return None;
        }
        let mut buf = vec![0; len];
        let mut filled = 0;
        while filled < len {
            match self
                .input
                .read_at(&mut buf[filled..], offset + filled as u64)
            {
                Ok(0) => return None,
                Ok(n) => filled += n,
                Err(crate::sys::Errno::INTR) => {}
                Err(_) => return None,
            }
        }
        Some(buf)
    }

    fn u32_at(&mut self, offset: u64) -> Option<u32> {
        let b = self.bytes(offset, 4)?;
        Some(u32::from_le_bytes(b.try_into().ok()?))
    }

    /// Streams from the end back: padding, footer, index, and the stream
    /// the index describes.
    fn xz(&mut self) -> Option<u64> {
        let mut pos = self.end;
        let mut total = 0u64;
        loop {
            // Stream padding: zeros in fours, between and after streams.
            while pos >= self.start + 4 && self.u32_at(pos - 4)? == 0 {
                pos -= 4;
            }
            if pos == self.start {
                return Some(total);
            }
            let footer = self.bytes(pos.checked_sub(12)?, 12)?;
            if &footer[10..] != b"YZ" {
                return None;
            }
            let backward = u32::from_le_bytes(footer[4..8].try_into().ok()?);
            let index_size = (u64::from(backward) + 1) * 4;
            if index_size > MAX_XZ_INDEX {
                return None;
            }
            let index_at = pos.checked_sub(12 + index_size)?;
            let index = self.bytes(index_at, index_size as usize)?;
            let (blocks, decoded) = xz_index(&index)?;
            total = total.checked_add(decoded)?;
            let stream = 12u64.checked_add(blocks)?.checked_add(index_size + 12)?;
            pos = pos.checked_sub(stream).filter(|&p| p >= self.start)?;
            if self.bytes(pos, 6)? != [0xFD, b'7', b'z', b'X', b'Z', 0x00] {
                return None;
            }
        }
    }

    /// Frames from the start: each one's content size, then over its
    /// blocks to the next.
    fn zstd(&mut self) -> Option<u64> {
        let mut pos = self.start;
        let mut total = 0u64;
        while pos < self.end {
            let magic = self.u32_at(pos)?;
            if is_skippable_magic(magic) {
                pos = pos.checked_add(8 + u64::from(self.u32_at(pos + 4)?))?;
                continue;
            }
            if magic != ZSTD_MAGIC {
                return None;
            }
            let header_len = (self.end - pos).min(18) as usize;
            let header = self.bytes(pos, header_len)?;
            let content = zstd::zstd_safe::get_frame_content_size(&header)
                .ok()
                .flatten()?;
            total = total.checked_add(content)?;
            let descriptor = header[4];
            let single_segment = descriptor & 0x20 != 0;
            let checksum = descriptor & 0x04 != 0;
            let dictionary = [0, 1, 2, 4][usize::from(descriptor & 3)];
            let content_field = match descriptor >> 6 {
                0 => usize::from(single_segment),
                1 => 2,
                2 => 4,
                _ => 8,
            };
            pos += (5 + usize::from(!single_segment) + dictionary + content_field) as u64;
            loop {
                let block = self.bytes(pos, 3)?;
                let header =
                    u32::from(block[0]) | u32::from(block[1]) << 8 | u32::from(block[2]) << 16;
                let size = u64::from(header >> 3);
                let body = match (header >> 1) & 3 {
                    0 | 2 => size,
                    1 => 1,
                    _ => return None,
                };
                pos = pos.checked_add(3 + body)?;
                if header & 1 == 1 {
                    break;
                }
            }
            if checksum {
                pos += 4;
            }
        }
        (pos == self.end).then_some(total)
    }

    /// lz4 frames, each with its content size, over their blocks.
    fn lz4(&mut self) -> Option<u64> {
        const LZ4_MAGIC: u32 = 0x184D_2204;
        let mut pos = self.start;
        let mut total = 0u64;
        while pos < self.end {
            let magic = self.u32_at(pos)?;
            if is_skippable_magic(magic) {
                pos = pos.checked_add(8 + u64::from(self.u32_at(pos + 4)?))?;
                continue;
            }
            if magic != LZ4_MAGIC {
                return None;
            }
            let flags = self.bytes(pos + 4, 2)?[0];
            if flags & 0x08 == 0 {
                // No content size: unknown without decoding.
                return None;
            }
            let content = self.bytes(pos + 6, 8)?;
            total = total.checked_add(u64::from_le_bytes(content.try_into().ok()?))?;
            let block_checksum = flags & 0x10 != 0;
            let content_checksum = flags & 0x04 != 0;
            let dictionary = if flags & 0x01 != 0 { 4 } else { 0 };
            pos += 4 + 2 + 8 + dictionary + 1;
            loop {
                let size = self.u32_at(pos)?;
                pos += 4;
                if size == 0 {
                    break;
                }
                pos = pos.checked_add(u64::from(size & 0x7FFF_FFFF))?;
                if block_checksum {
                    pos += 4;
                }
            }
            if content_checksum {
                pos += 4;
            }
        }
        (pos == self.end).then_some(total)
    }
}

/// An xz index: the compressed size of its blocks (each padded to four
/// bytes) and what they decode to.
fn xz_index(index: &[u8]) -> Option<(u64, u64)> {
    if index.first() != Some(&0) {
        return None;
    }
    let mut at = 1;
    let mut number = || -> Option<u64> {
        let mut value = 0u64;
        for shift in 0..9 {
            let byte = *index.get(at)?;
            at += 1;
            value |= u64::from(byte & 0x7F) << (7 * shift);
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    };
    let records = number()?;
    let (mut blocks, mut decoded) = (0u64, 0u64);
    for _ in 0..records {
        let unpadded = number()?;
        blocks = blocks.checked_add(unpadded.checked_add(3)? / 4 * 4)?;
        decoded = decoded.checked_add(number()?)?;
    }
    Some((blocks, decoded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ends::file::FileEnd;
    use crate::engine::window::Window;
    use crate::sys::file::Handle;
    use std::io::Read;

    /// What `bytes`, in a file, decode to as `format` says.
    fn size_of(bytes: &[u8], format: Format) -> Option<u64> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("packed");
        std::fs::write(&path, bytes).unwrap();
        let fd = crate::sys::file::open_input(&path, rustix::fs::OFlags::empty()).unwrap();
        decoded_size(
            &mut Window::over(Box::new(FileEnd::new(Handle::Owned(fd)))),
            format,
        )
    }

    fn xz(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        liblzma::read::XzEncoder::new(data, 1)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn xz_streams_tell_their_size_by_their_index() {
        let data = crate::image::testing::sample(300_000, 4);
        let one = xz(&data);
        assert_eq!(size_of(&one, Format::Xz), Some(300_000));
        // Concatenated, with stream padding between and after.
        let mut two = one.clone();
        two.extend_from_slice(&[0; 8]);
        two.extend_from_slice(&xz(&data[..1000]));
        two.extend_from_slice(&[0; 4]);
        assert_eq!(size_of(&two, Format::Xz), Some(301_000));
        assert_eq!(size_of(&one[..one.len() - 1], Format::Xz), None);
    }

    #[test]
    fn zstd_frames_tell_their_size_where_their_header_has_it() {
        let data = crate::image::testing::sample(300_000, 5);
        let mut frames = zstd::bulk::compress(&data, 3).unwrap();
        assert_eq!(size_of(&frames, Format::Zstd), Some(300_000));
        // A skippable frame, then a second frame.
        frames.extend_from_slice(&[0x50, 0x2A, 0x4D, 0x18, 2, 0, 0, 0, 9, 9]);
        frames.extend_from_slice(&zstd::bulk::compress(&data[..5000], 1).unwrap());
        assert_eq!(size_of(&frames, Format::Zstd), Some(305_000));
        // A frame streamed without its size: unknown.
        let mut streamed = Vec::new();
        let mut encoder = zstd::stream::write::Encoder::new(&mut streamed, 3).unwrap();
        std::io::Write::write_all(&mut encoder, &data).unwrap();
        encoder.finish().unwrap();
        assert_eq!(size_of(&streamed, Format::Zstd), None);
        assert_eq!(size_of(&frames[..frames.len() - 3], Format::Zstd), None);
    }
}
