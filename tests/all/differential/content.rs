//! Input bytes for generated cases.
//!
//! Random bytes alone would leave most of dd untested: conv=block/unblock
//! need newlines and trailing spaces, lcase/ucase need letters, sparse needs
//! whole zero blocks at the output block size. Each kind here exists to make
//! one family of conversions do real work.

use super::prng::Rng;

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Random,
    /// Lines of mixed-case words, spaces (also trailing), digits and
    /// punctuation; sometimes without a final newline.
    Text,
    /// Zero runs with data in between, aligned to `block` or not.
    ZeroRuns,
    /// Nothing but zeros: the whole output is one hole.
    Zeros,
}

pub fn kind(rng: &mut Rng) -> Kind {
    match rng.weighted(&[35, 40, 18, 7]) {
        0 => Kind::Random,
        1 => Kind::Text,
        2 => Kind::ZeroRuns,
        _ => Kind::Zeros,
    }
}

/// `len` bytes of `kind`; `block` is the size zero runs should line up with
/// (the output block size, which is what conv=sparse looks at), and
/// `line_hint` is the conversion block size so lines are sometimes shorter
/// and sometimes longer than a cbs record.
pub fn generate(rng: &mut Rng, kind: Kind, len: usize, block: usize, line_hint: usize) -> Vec<u8> {
    match kind {
        Kind::Random => (0..len).map(|_| rng.byte()).collect(),
        Kind::Text => text(rng, len, line_hint),
        Kind::ZeroRuns => zero_runs(rng, len, block),
        Kind::Zeros => vec![0; len],
    }
}

fn text(rng: &mut Rng, len: usize, line_hint: usize) -> Vec<u8> {
    const WORD_CHARS: &[u8] =
        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:-_!?'\"()@#";
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        let line_len = match rng.weighted(&[10, 50, 30, 10]) {
            0 => 0,
            1 => rng.range(1, line_hint.max(1)),
            2 => rng.range(line_hint, line_hint * 2 + 3),
            _ => rng.range(0, 200),
        };
        for i in 0..line_len {
            // Spaces mid-line and runs of trailing spaces both matter:
            // unblock strips only the trailing ones.
            let trailing = i + 3 >= line_len && rng.chance(20);
            if trailing || rng.chance(15) {
                out.push(b' ');
            } else if rng.chance(2) {
                out.push(b'\t');
            } else {
                out.push(*rng.pick(WORD_CHARS));
            }
        }
        out.push(b'\n');
    }
    out.truncate(len);
    out
}

fn zero_runs(rng: &mut Rng, len: usize, block: usize) -> Vec<u8> {
    let block = block.max(1);
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let aligned = rng.chance(70);
        let run = if aligned {
            block * rng.range(1, 4)
        } else {
            rng.range(1, block * 3)
        };
        if rng.chance(55) {
            out.resize(out.len() + run, 0);
        } else {
            // Data blocks sometimes hold a single non-zero byte at either end,
            // the classic off-by-one in "is this block all zeros".
            let mut data = vec![0u8; run];
            match rng.range(0, 2) {
                0 => data[0] = 1 + rng.byte() % 255,
                1 => data[run - 1] = 1 + rng.byte() % 255,
                _ => data.iter_mut().for_each(|b| *b = rng.byte()),
            }
            out.extend(data);
        }
    }
    out.truncate(len);
    out
}
