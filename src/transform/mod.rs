//! Data conversions of `conv=`: character sets, case, byte swapping,
//! fixed/variable record blocking, and all-zero detection for `sparse`.
//!
//! Everything works in place or into caller-owned buffers, so the copy loop
//! never allocates per block.

pub mod block;
pub mod tables;

use crate::operands::Conv;

pub use block::{Blocker, Unblocker};

/// The byte translation of ascii/ebcdic/ibm/lcase/ucase, composed in GNU's
/// order: EBCDIC→ASCII first, then case, then ASCII→EBCDIC/IBM.
#[derive(Clone)]
pub struct Translation {
    table: [u8; 256],
    /// The record separator and pad byte after translation (EBCDIC's differ).
    pub newline: u8,
    pub space: u8,
}

impl Translation {
    /// The translation `conv` asks for, or None when bytes pass unchanged.
    pub fn for_conversions(conv: Conv) -> Option<Translation> {
        let mut table: [u8; 256] = std::array::from_fn(|i| i as u8);
        let mut translated = false;
        let mut newline = b'\n';
        let mut space = b' ';
        let compose = |table: &mut [u8; 256], with: &[u8; 256]| {
            for t in table.iter_mut() {
                *t = with[usize::from(*t)];
            }
        };
        if conv.contains(Conv::ASCII) {
            compose(&mut table, &tables::EBCDIC_TO_ASCII);
            translated = true;
        }
        if conv.contains(Conv::UCASE) {
            table.iter_mut().for_each(|t| *t = t.to_ascii_uppercase());
            translated = true;
        } else if conv.contains(Conv::LCASE) {
            table.iter_mut().for_each(|t| *t = t.to_ascii_lowercase());
            translated = true;
        }
        if conv.contains(Conv::EBCDIC) {
            compose(&mut table, &tables::ASCII_TO_EBCDIC);
            newline = tables::ASCII_TO_EBCDIC[usize::from(b'\n')];
            space = tables::ASCII_TO_EBCDIC[usize::from(b' ')];
            translated = true;
        } else if conv.contains(Conv::IBM) {
            compose(&mut table, &tables::ASCII_TO_IBM);
            newline = tables::ASCII_TO_IBM[usize::from(b'\n')];
            space = tables::ASCII_TO_IBM[usize::from(b' ')];
            translated = true;
        }
        translated.then_some(Translation {
            table,
            newline,
            space,
        })
    }

    pub fn apply(&self, buf: &mut [u8]) {
        for b in buf {
            *b = self.table[usize::from(*b)];
        }
    }
}

/// conv=swab: swaps byte pairs across reads, carrying an odd byte over.
///
/// GNU's algorithm shifts the data by one byte inside a buffer that has one
/// spare byte at the end; the result (including how an odd final byte is
/// emitted after EOF) is reproduced exactly.
#[derive(Debug, Default)]
pub struct Swab {
    saved: Option<u8>,
}

impl Swab {
    /// Swap `buf[..len]`; `buf` must hold `len + 1` bytes. Returns the range
    /// of `buf` holding the swapped output.
    pub fn apply(&mut self, buf: &mut [u8], len: usize) -> std::ops::Range<usize> {
        if len == 0 {
            return 0..0;
        }
        let mut n = len;
        let prev = self.saved;
        if prev.is_none() == (n % 2 == 1) {
            n -= 1;
            self.saved = Some(buf[n]);
        } else {
            self.saved = None;
        }
        // Move every other byte two places toward the end, from the end.
        let mut i = n;
        while i > 1 {
            buf[i] = buf[i - 2];
            i -= 2;
        }
        match prev {
            None => 1..n + 1,
            Some(b) => {
                buf[1] = b;
                0..n + 1
            }
        }
    }

    /// The byte still held back at end of input, if any.
    pub fn take_saved(&mut self) -> Option<u8> {
        self.saved.take()
    }
}

/// True if every byte is zero (conv=sparse writes such blocks as holes).
pub fn is_all_zero(buf: &[u8]) -> bool {
    // Whole 16-byte words first: this runs on every output block.
    let words = buf.chunks_exact(16);
    let tail = words.remainder();
    tail.iter().all(|&b| b == 0)
        && words
            .map(|w| u128::from_ne_bytes(w.try_into().expect("16-byte chunk")))
            .all(|w| w == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swab_all(chunks: &[&[u8]]) -> Vec<u8> {
        let mut s = Swab::default();
        let mut out = Vec::new();
        for c in chunks {
            let mut buf = c.to_vec();
            buf.push(0);
            let r = s.apply(&mut buf, c.len());
            out.extend_from_slice(&buf[r]);
        }
        out.extend(s.take_saved());
        out
    }

    #[test]
    fn swab_even_and_odd() {
        assert_eq!(swab_all(&[b"abcd"]), b"badc");
        assert_eq!(swab_all(&[b"abcde"]), b"badce");
        assert_eq!(swab_all(&[b"abc", b"def"]), b"badcfe");
        assert_eq!(swab_all(&[b"a", b"b", b"c"]), b"bac");
    }

    #[test]
    fn case_and_charset_tables_compose() {
        let t = Translation::for_conversions(Conv::UCASE).unwrap();
        let mut b = *b"aBz!";
        t.apply(&mut b);
        assert_eq!(&b, b"ABZ!");
        assert!(Translation::for_conversions(Conv::SYNC).is_none());
        let e = Translation::for_conversions(Conv::EBCDIC).unwrap();
        assert_eq!((e.newline, e.space), (0x25, 0x40));
        let round = Translation::for_conversions(Conv::ASCII).unwrap();
        let mut x = [b'A'];
        e.apply(&mut x);
        round.apply(&mut x);
        assert_eq!(x, [b'A']);
    }

    #[test]
    fn zero_detection() {
        assert!(is_all_zero(&[]));
        assert!(is_all_zero(&[0; 37]));
        let mut v = vec![0u8; 37];
        v[36] = 1;
        assert!(!is_all_zero(&v));
        v[36] = 0;
        v[3] = 1;
        assert!(!is_all_zero(&v));
    }
}
