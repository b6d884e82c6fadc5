//! Which compression format a stream is in, from its first bytes.
//!
//! `--decompress` must refuse an input that is not compressed (or, under
//! `--decompress=auto`, pass it through), so the format is recognised by
//! the magic numbers the formats' specifications fix, never by a file
//! name. Zstandard and LZ4 share the range of "skippable frame" magics
//! (pzstd writes one first), so those frames are followed to the first
//! real frame, as far as the bytes at hand allow.

use std::fmt;

/// A compression format ddx can decompress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    Zstd,
    Xz,
    Gzip,
    Bzip2,
    Lz4,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Zstd => "zstd",
            Format::Xz => "xz",
            Format::Gzip => "gzip",
            Format::Bzip2 => "bzip2",
            Format::Lz4 => "lz4",
        })
    }
}

/// RFC 8878: a Zstandard frame.
pub(crate) const ZSTD_MAGIC: u32 = 0xFD2F_B528;
/// RFC 8878 and the LZ4 frame format: 0x184D2A50..=0x184D2A5F, a frame a
/// decoder skips (its length follows the magic).
pub(crate) fn is_skippable_magic(magic: u32) -> bool {
    magic & 0xFFFF_FFF0 == 0x184D_2A50
}
const LZ4_MAGIC: u32 = 0x184D_2204;
/// The LZ4 "legacy" frame `lz4 -l` still writes.
const LZ4_LEGACY_MAGIC: u32 = 0x184C_2102;
const XZ_MAGIC: [u8; 6] = [0xFD, b'7', b'z', b'X', b'Z', 0x00];
/// RFC 1952: ID1, ID2, CM = 8 (deflate).
const GZIP_MAGIC: [u8; 3] = [0x1F, 0x8B, 0x08];

/// Bytes enough to recognise any format when no skippable frame leads.
pub const MAGIC_LEN: usize = 6;

/// What the first bytes of a stream say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recognised {
    Format(Format),
    /// Not a compressed stream ddx knows.
    Plain,
    /// Skippable frames lead and the bytes end inside them: this many
    /// bytes from the start would show the next frame's magic.
    NeedBytes(usize),
}

/// The format of a stream starting with `head`. A head shorter than
/// [`MAGIC_LEN`] is taken as the whole stream (a short file is plain).
pub fn recognise(head: &[u8]) -> Recognised {
    let mut at = 0usize;
    loop {
        let rest = &head[at..];
        let magic = rest
            .get(..4)
            .map(|m| u32::from_le_bytes(m.try_into().expect("4 bytes")));
        match magic {
            Some(m) if is_skippable_magic(m) => {
                let Some(len) = rest.get(4..8) else {
                    return Recognised::NeedBytes(at + 8);
                };
                let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
                at = at.saturating_add(8).saturating_add(len);
                if at + 4 > head.len() {
                    return Recognised::NeedBytes(at + 4);
                }
            }
            _ => return recognise_frame(rest, at > 0),
        }
    }
}

/// The format of the frame at the start of `rest`; `after_skippable`: a
/// skippable frame came first, which only zstd and lz4 allow.
fn recognise_frame(rest: &[u8], after_skippable: bool) -> Recognised {
    let magic = rest
        .get(..4)
        .map(|m| u32::from_le_bytes(m.try_into().expect("4 bytes")));
    let format = match magic {
        Some(ZSTD_MAGIC) => Some(Format::Zstd),
        Some(LZ4_MAGIC) | Some(LZ4_LEGACY_MAGIC) => Some(Format::Lz4),
        _ if after_skippable => None,
        _ if rest.starts_with(&XZ_MAGIC) => Some(Format::Xz),
        _ if rest.starts_with(&GZIP_MAGIC) => Some(Format::Gzip),
        // "BZh" and the block size digit '1'..'9'.
        _ if rest.len() >= 4 && &rest[..3] == b"BZh" && (b'1'..=b'9').contains(&rest[3]) => {
            Some(Format::Bzip2)
        }
        _ => None,
    };
    format.map_or(Recognised::Plain, Recognised::Format)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_is_known_by_its_magic() {
        let cases: [(&[u8], Format); 6] = [
            (&[0x28, 0xB5, 0x2F, 0xFD, 0x24, 0x00], Format::Zstd),
            (&[0xFD, b'7', b'z', b'X', b'Z', 0x00], Format::Xz),
            (&[0x1F, 0x8B, 0x08, 0x00, 0x00, 0x00], Format::Gzip),
            (b"BZh91AY&SY", Format::Bzip2),
            (&[0x04, 0x22, 0x4D, 0x18, 0x64, 0x40], Format::Lz4),
            (&[0x02, 0x21, 0x4C, 0x18, 0x00, 0x00], Format::Lz4),
        ];
        for (head, format) in cases {
            assert_eq!(recognise(head), Recognised::Format(format), "{head:x?}");
        }
    }

    #[test]
    fn anything_else_is_plain() {
        for head in [
            &b""[..],
            b"\0\0\0\0\0\0\0\0",
            b"BZh0xxxx",
            b"\x1f\x8b\x07\0\0\0",
            b"hello world",
            &[0xEB, 0x63, 0x90, 0x10, 0x8E, 0xD0][..],
        ] {
            assert_eq!(recognise(head), Recognised::Plain, "{head:x?}");
        }
    }

    #[test]
    fn skippable_frames_are_followed_to_the_real_frame() {
        let mut head = vec![0x5E, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 1, 2, 3];
        assert_eq!(recognise(&head), Recognised::NeedBytes(15));
        head.extend_from_slice(&[0x28, 0xB5, 0x2F, 0xFD]);
        assert_eq!(recognise(&head), Recognised::Format(Format::Zstd));
        head.truncate(11);
        head.extend_from_slice(&[0x04, 0x22, 0x4D, 0x18]);
        assert_eq!(recognise(&head), Recognised::Format(Format::Lz4));
        head.truncate(11);
        head.extend_from_slice(&[0xFD, b'7', b'z', b'X', b'Z', 0x00]);
        assert_eq!(
            recognise(&head),
            Recognised::Plain,
            "xz has no skippable frames"
        );
        assert_eq!(recognise(&head[..6]), Recognised::NeedBytes(8));
    }
}
