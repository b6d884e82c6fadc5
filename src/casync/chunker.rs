//! casync's chunker: where a blob is cut into chunks, byte for byte as
//! `casync make` cuts it, so that ddx's index of a blob equals casync's
//! and chunks made by either are shared by both.
//!
//! A rolling hash (buzhash over a 48-byte window, with casync's table of
//! 256 words) is taken at every byte; a chunk ends after the first byte
//! at which the chunk is at least the minimum size and the hash, taken
//! modulo the *discriminator* (a number derived from the average size),
//! is the discriminator less one; or at the maximum size, whichever comes
//! first. The hash depends only on the window, so a cut depends only on
//! the 48 bytes before it: an insertion moves the cuts near it and no
//! others, which is what makes two versions of a disk share chunks.
//! When minimum, average and maximum are one size, chunks are of that
//! fixed size (casync's fixed-size mode).
//!
//! [`Cutter::cut`] answers, for bytes that start a chunk, where that chunk
//! ends; it starts hashing at the minimum size (the bytes before cannot
//! end a chunk, and the hash needs only the window), and passes over runs
//! of zeros without hashing them: a window of zeros always hashes the
//! same, so when that value cannot cut, nothing in the run does (an
//! empty disk's gigabytes of zeros cost a scan for the next byte that is
//! not zero, not a hash per byte).
//!
//! Pure: bytes in, lengths out. Depends on nothing in ddx.

/// The bytes the rolling hash is taken over.
pub const WINDOW: usize = 48;

/// The smallest and largest chunk sizes casync accepts.
pub const LIMIT_MIN: u64 = 1;
pub const LIMIT_MAX: u64 = 128 << 20;

/// casync's default average chunk size; the minimum is a quarter of it
/// and the maximum four times it.
pub const DEFAULT_AVG: u64 = 64 << 10;

/// casync's buzhash table: a fixed random word per byte value. A fact of
/// the format (desync and RAUC use the same table): another table cuts
/// elsewhere, and no chunk would be shared with casync's stores.
const TABLE: [u32; 256] = [
    0x458be752, 0xc10748cc, 0xfbbcdbb8, 0x6ded5b68, 0xb10a82b5, 0x20d75648, 0xdfc5665f, 0xa8428801,
    0x7ebf5191, 0x841135c7, 0x65cc53b3, 0x280a597c, 0x16f60255, 0xc78cbc3e, 0x294415f5, 0xb938d494,
    0xec85c4e6, 0xb7d33edc, 0xe549b544, 0xfdeda5aa, 0x882bf287, 0x3116737c, 0x05569956, 0xe8cc1f68,
    0x0806ac5e, 0x22a14443, 0x15297e10, 0x50d090e7, 0x4ba60f6f, 0xefd9f1a7, 0x5c5c885c, 0x82482f93,
    0x9bfd7c64, 0x0b3e7276, 0xf2688e77, 0x8fad8abc, 0xb0509568, 0xf1ada29f, 0xa53efdfe, 0xcb2b1d00,
    0xf2a9e986, 0x6463432b, 0x95094051, 0x5a223ad2, 0x9be8401b, 0x61e579cb, 0x1a556a14, 0x5840fdc2,
    0x9261ddf6, 0xcde002bb, 0x52432bb0, 0xbf17373e, 0x7b7c222f, 0x2955ed16, 0x9f10ca59, 0xe840c4c9,
    0xccabd806, 0x14543f34, 0x1462417a, 0x0d4a1f9c, 0x087ed925, 0xd7f8f24c, 0x7338c425, 0xcf86c8f5,
    0xb19165cd, 0x9891c393, 0x325384ac, 0x0308459d, 0x86141d7e, 0xc922116a, 0xe2ffa6b6, 0x53f52aed,
    0x2cd86197, 0xf5b9f498, 0xbf319c8f, 0xe0411fae, 0x977eb18c, 0xd8770976, 0x9833466a, 0xc674df7f,
    0x8c297d45, 0x8ca48d26, 0xc49ed8e2, 0x7344f874, 0x556f79c7, 0x6b25eaed, 0xa03e2b42, 0xf68f66a4,
    0x8e8b09a2, 0xf2e0e62a, 0x0d3a9806, 0x9729e493, 0x8c72b0fc, 0x160b94f6, 0x450e4d3d, 0x7a320e85,
    0xbef8f0e1, 0x21d73653, 0x4e3d977a, 0x1e7b3929, 0x1cc6c719, 0xbe478d53, 0x8d752809, 0xe6d8c2c6,
    0x275f0892, 0xc8acc273, 0x4cc21580, 0xecc4a617, 0xf5f7be70, 0xe795248a, 0x375a2fe9, 0x425570b6,
    0x8898dcf8, 0xdc2d97c4, 0x0106114b, 0x364dc22f, 0x1e0cad1f, 0xbe63803c, 0x5f69fac2, 0x4d5afa6f,
    0x1bc0dfb5, 0xfb273589, 0x0ea47f7b, 0x3c1c2b50, 0x21b2a932, 0x6b1223fd, 0x2fe706a8, 0xf9bd6ce2,
    0xa268e64e, 0xe987f486, 0x3eacf563, 0x1ca2018c, 0x65e18228, 0x2207360a, 0x57cf1715, 0x34c37d2b,
    0x1f8f3cde, 0x93b657cf, 0x31a019fd, 0xe69eb729, 0x8bca7b9b, 0x4c9d5bed, 0x277ebeaf, 0xe0d8f8ae,
    0xd150821c, 0x31381871, 0xafc3f1b0, 0x927db328, 0xe95effac, 0x305a47bd, 0x426ba35b, 0x1233af3f,
    0x686a5b83, 0x50e072e5, 0xd9d3bb2a, 0x8befc475, 0x487f0de6, 0xc88dff89, 0xbd664d5e, 0x971b5d18,
    0x63b14847, 0xd7d3c1ce, 0x7f583cf3, 0x72cbcb09, 0xc0d0a81c, 0x7fa3429b, 0xe9158a1b, 0x225ea19a,
    0xd8ca9ea3, 0xc763b282, 0xbb0c6341, 0x020b8293, 0xd4cd299d, 0x58cfa7f8, 0x91b4ee53, 0x37e4d140,
    0x95ec764c, 0x30f76b06, 0x5ee68d24, 0x679c8661, 0xa41979c2, 0xf2b61284, 0x4fac1475, 0x0adb49f9,
    0x19727a23, 0x15a7e374, 0xc43a18d5, 0x3fb1aa73, 0x342fc615, 0x924c0793, 0xbee2d7f0, 0x8a279de9,
    0x4aa2d70c, 0xe24dd37f, 0xbe862c0b, 0x177c22c2, 0x5388e5ee, 0xcd8a7510, 0xf901b4fd, 0xdbc13dbc,
    0x6c0bae5b, 0x64efe8c7, 0x48b02079, 0x80331a49, 0xca3d8ae6, 0xf3546190, 0xfed7108b, 0xc49b941b,
    0x32baf4a9, 0xeb833a4a, 0x88a3f1a5, 0x3a91ce0a, 0x3cc27da1, 0x7112e684, 0x4a3096b1, 0x3794574c,
    0xa3c8b6f3, 0x1d213941, 0x6e0a2e00, 0x233479f1, 0x0f4cd82f, 0x6093edd2, 0x5d7d209e, 0x464fe319,
    0xd4dcac9e, 0x0db845cb, 0xfb5e4bc3, 0xe0256ce1, 0x09fb4ed1, 0x0914be1e, 0xa5bdb2c3, 0xc6eb57bb,
    0x30320350, 0x3f397e91, 0xa67791bc, 0x86bc0e2c, 0xefa0a7e2, 0xe9ff7543, 0xe733612c, 0xd185897b,
    0x329e5388, 0x91dd236b, 0x2ecb0d93, 0xf4d82a3d, 0x35b5c03f, 0xe4e606f0, 0x05b21843, 0x37b45964,
    0x5eff22f4, 0x6027f4cc, 0x77178b3c, 0xae507131, 0x7bf7cabc, 0xf9c18d66, 0x593ade65, 0xd95ddf11,
];

/// The minimum, average and maximum sizes of chunks, as an index
/// records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkSizes {
    pub min: u64,
    pub avg: u64,
    pub max: u64,
}

/// Why chunk sizes cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("the {which} chunk size {size} is outside 1 to 134217728 (128 MiB)")]
    OutOfRange { which: &'static str, size: u64 },
    #[error("the chunk sizes must grow from minimum to average to maximum ({min}, {avg}, {max})")]
    Unordered { min: u64, avg: u64, max: u64 },
    #[error(
        "a maximum chunk size of {max} is smaller than the {WINDOW}-byte window the cuts are \
         found with (casync cannot make such an index either)"
    )]
    BelowWindow { max: u64 },
}

impl Default for ChunkSizes {
    fn default() -> Self {
        ChunkSizes {
            min: DEFAULT_AVG / 4,
            avg: DEFAULT_AVG,
            max: DEFAULT_AVG * 4,
        }
    }
}

impl ChunkSizes {
    /// The sizes `casync make --chunk-size=` gives for what was asked
    /// (None: not given): an average alone takes a quarter of it as the
    /// minimum and four times it as the maximum, as casync's chunker
    /// derives them.
    pub fn resolve(
        min: Option<u64>,
        avg: Option<u64>,
        max: Option<u64>,
    ) -> Result<Self, SizeError> {
        let in_range = |which, size: u64| {
            if (LIMIT_MIN..=LIMIT_MAX).contains(&size) {
                Ok(size)
            } else {
                Err(SizeError::OutOfRange { which, size })
            }
        };
        let avg = match (avg, min, max) {
            (Some(avg), _, _) => in_range("average", avg)?,
            (None, Some(min), Some(max)) => {
                let mean = ((min as f64).log2() + (max as f64).log2()) / 2.0;
                (2f64.powf(mean).round_ties_even() as u64).clamp(LIMIT_MIN, LIMIT_MAX)
            }
            (None, Some(min), None) => (min.saturating_mul(4)).clamp(LIMIT_MIN, LIMIT_MAX),
            (None, None, Some(max)) => (max / 4).clamp(LIMIT_MIN, LIMIT_MAX),
            (None, None, None) => DEFAULT_AVG,
        };
        let min = match min {
            Some(min) => in_range("minimum", min)?,
            None => (avg / 4).max(LIMIT_MIN),
        };
        let max = match max {
            Some(max) => in_range("maximum", max)?,
            None => avg.saturating_mul(4).min(LIMIT_MAX),
        };
        let sizes = ChunkSizes { min, avg, max };
        sizes.check()?;
        Ok(sizes)
    }

    /// Whether the sizes can cut chunks (an index read from elsewhere is
    /// held to the same).
    pub fn check(&self) -> Result<(), SizeError> {
        let ChunkSizes { min, avg, max } = *self;
        if !(min <= avg && avg <= max) {
            return Err(SizeError::Unordered { min, avg, max });
        }
        if !self.fixed() && max < WINDOW as u64 {
            return Err(SizeError::BelowWindow { max });
        }
        Ok(())
    }

    /// Every chunk but the last of this one size.
    pub fn fixed(&self) -> bool {
        self.min == self.avg && self.avg == self.max
    }

    /// casync's discriminator for the average size: chunks cut where the
    /// hash modulo it is one less than it come out about 1.3 times larger
    /// than the modulus, which this corrects for (a fit casync made for
    /// the minimum at a quarter and the maximum at four times the
    /// average), held between the minimum and the maximum.
    pub fn discriminator(&self) -> u64 {
        let avg = self.avg as f64;
        let raw = avg / (-1.42888852e-7 * avg + 1.33237515);
        // Past about 9.3 MiB the fit's denominator turns negative;
        // casync's conversion of that to an unsigned size gives a huge
        // number, which the clamp makes the maximum.
        let raw = if raw < 0.0 { u64::MAX } else { raw as u64 };
        raw.clamp(self.min, self.max)
    }
}

/// Finds where chunks end, for one set of sizes.
#[derive(Debug, Clone)]
pub struct Cutter {
    sizes: ChunkSizes,
    /// The discriminator, and `ceil(2^64 / discriminator)` for a
    /// divisibility test by multiplication (a division per byte would
    /// be the chunker's largest cost).
    discriminator: u64,
    inverse: u64,
    /// The first chunk length at which a cut is tested.
    first: usize,
    /// The hash of a window of zeros, and whether it cuts.
    zero_hash: u32,
    zeros_cut: bool,
}

impl Cutter {
    pub fn new(sizes: ChunkSizes) -> Cutter {
        let discriminator = sizes.discriminator();
        let zero_hash = start(&[0; WINDOW]);
        let mut cutter = Cutter {
            sizes,
            discriminator,
            inverse: (u64::MAX / discriminator).wrapping_add(1),
            first: (sizes.min as usize).max(WINDOW),
            zero_hash,
            zeros_cut: false,
        };
        cutter.zeros_cut = cutter.cuts_at(zero_hash);
        cutter
    }

    pub fn sizes(&self) -> ChunkSizes {
        self.sizes
    }

    /// Whether a window of zeros ends a chunk (then runs of zeros are cut
    /// at the minimum, else at the maximum).
    pub fn cuts_zeros(&self) -> bool {
        self.zeros_cut
    }

    /// Whether a hash of `h` ends a chunk of at least the minimum size:
    /// `h % d == d - 1`, that is, `h + 1` is a multiple of `d`, tested
    /// by multiplying with the inverse (Lemire, Kaser and Kurz, "Faster
    /// remainder by direct computation", 2019: for n below 2^32, n is a
    /// multiple of d exactly when n times ceil(2^64 / d), modulo 2^64,
    /// is below ceil(2^64 / d)).
    #[inline(always)]
    fn cuts_at(&self, h: u32) -> bool {
        // ceil(2^64 / 1) does not fit: with 1, every byte cuts.
        if h == u32::MAX || self.inverse == 0 {
            return (u64::from(h) + 1) % self.discriminator == 0;
        }
        (u64::from(h) + 1).wrapping_mul(self.inverse) < self.inverse
    }

    /// The length of the chunk that starts at `data[0]`: where casync
    /// cuts it. None when `data` holds no cut and is shorter than the
    /// maximum size: the chunk goes on in bytes not given yet, or, when
    /// `data` is the end of the blob, is the blob's last chunk, whole.
    pub fn cut(&self, data: &[u8]) -> Option<usize> {
        let max = usize::try_from(self.sizes.max).unwrap_or(usize::MAX);
        if self.sizes.fixed() {
            return (data.len() >= max).then_some(max);
        }
        let first = self.first;
        if data.len() < first {
            return None;
        }
        // Chunk lengths are tested from `first` to `limit`; the hash at
        // length c is of data[c - WINDOW..c].
        let limit = data.len().min(max);
        let mut h = start(&data[first - WINDOW..first]);
        let mut c = first;
        loop {
            if c >= max || self.cuts_at(h) {
                return Some(c);
            }
            if c == limit {
                return None;
            }
            // Roll on until a cut, the limit, or a window of zeros that
            // cannot cut (then passed over without hashing).
            let mut zeros = false;
            for (&leave, &enter) in data[c - WINDOW..limit - WINDOW].iter().zip(&data[c..limit]) {
                h = roll(h, leave, enter);
                c += 1;
                if self.cuts_at(h) {
                    return Some(c);
                }
                if h == self.zero_hash && !self.zeros_cut {
                    zeros = true;
                    break;
                }
            }
            if c >= max {
                return Some(c);
            }
            if c == limit {
                return None;
            }
            if zeros && data[c - WINDOW..c].iter().all(|&b| b == 0) {
                // Every window inside the run hashes as zeros do, and
                // does not cut: go on from the run's last zero.
                let run = data[c..limit].iter().position(|&b| b != 0);
                c = run.map_or(limit, |n| c + n);
                h = self.zero_hash;
            }
        }
    }

    /// The lengths of the chunks a whole blob `data` is cut into, the
    /// last one whatever is left.
    pub fn lengths<'a>(&'a self, data: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
        let mut at = 0;
        std::iter::from_fn(move || {
            if at == data.len() {
                return None;
            }
            let len = self.cut(&data[at..]).unwrap_or(data.len() - at);
            at += len;
            Some(len)
        })
    }
}

/// The hash of a whole window.
#[inline]
fn start(window: &[u8]) -> u32 {
    let n = window.len();
    window.iter().enumerate().fold(0u32, |h, (i, &b)| {
        h ^ TABLE[b as usize].rotate_left(((n - 1 - i) % 32) as u32)
    })
}

/// The hash one byte on: `leave` goes out of the window, `enter` comes in.
#[inline(always)]
fn roll(h: u32, leave: u8, enter: u8) -> u32 {
    h.rotate_left(1)
        ^ TABLE[leave as usize].rotate_left((WINDOW % 32) as u32)
        ^ TABLE[enter as usize]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// casync's chunker as its source states it, byte by byte (a window
    /// filled, then a hash test at every byte), to hold the fast one to.
    fn reference(sizes: ChunkSizes, data: &[u8]) -> Vec<usize> {
        let d = sizes.discriminator();
        let mut lengths = Vec::new();
        let mut at = 0;
        while at < data.len() {
            let rest = &data[at..];
            let mut cut = rest.len();
            if sizes.fixed() {
                cut = cut.min(sizes.max as usize);
            } else {
                for c in WINDOW..=rest.len() {
                    let h = start(&rest[c - WINDOW..c]);
                    let len = c as u64;
                    if len >= sizes.max || (len >= sizes.min && u64::from(h) % d == d - 1) {
                        cut = c;
                        break;
                    }
                }
            }
            lengths.push(cut);
            at += cut;
        }
        lengths
    }

    #[test]
    fn sizes_are_derived_as_casync_derives_them() {
        assert_eq!(
            ChunkSizes::resolve(None, None, None),
            Ok(ChunkSizes {
                min: 16384,
                avg: 65536,
                max: 262144
            })
        );
        assert_eq!(
            ChunkSizes::resolve(None, Some(32768), None),
            Ok(ChunkSizes {
                min: 8192,
                avg: 32768,
                max: 131072
            })
        );
        assert_eq!(
            ChunkSizes::resolve(Some(1000), None, Some(16000)),
            Ok(ChunkSizes {
                min: 1000,
                avg: 4000,
                max: 16000
            })
        );
        assert!(matches!(
            ChunkSizes::resolve(Some(9), Some(8), Some(100)),
            Err(SizeError::Unordered { .. })
        ));
        assert!(matches!(
            ChunkSizes::resolve(None, Some(0), None),
            Err(SizeError::OutOfRange { .. })
        ));
        assert!(matches!(
            ChunkSizes::resolve(Some(4), Some(8), Some(16)),
            Err(SizeError::BelowWindow { .. })
        ));
        assert_eq!(ChunkSizes::default().discriminator(), 49535);
    }

    #[test]
    fn the_hash_rolls_as_it_is_taken_whole() {
        let data: Vec<u8> = (0..500u32).map(|i| (i * 7919 % 251) as u8).collect();
        let mut h = start(&data[..WINDOW]);
        for c in WINDOW..data.len() {
            h = roll(h, data[c - WINDOW], data[c]);
            assert_eq!(h, start(&data[c + 1 - WINDOW..=c]), "at {c}");
        }
    }

    #[test]
    fn the_divisibility_test_is_the_remainders() {
        for d in [1u64, 2, 3, 7, 4096, 49190, 65521, 1 << 27, (1 << 27) - 1] {
            let sizes = ChunkSizes {
                min: 1,
                avg: d.max(64),
                max: 1 << 27,
            };
            let mut cutter = Cutter::new(sizes);
            cutter.discriminator = d;
            cutter.inverse = (u64::MAX / d).wrapping_add(1);
            for h in (0..2000u32)
                .chain(u32::MAX - 2000..=u32::MAX)
                .chain([d as u32, (d - 1) as u32])
            {
                assert_eq!(cutter.cuts_at(h), u64::from(h) % d == d - 1, "h {h} d {d}");
            }
        }
    }

    fn bytes_with_zero_runs() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..3000),
                (0usize..5000).prop_map(|n| vec![0u8; n]),
            ],
            0..12,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn cuts_are_the_reference_chunkers(
            data in bytes_with_zero_runs(),
            min in 1u64..300,
            spread in 0u64..700,
            fixed in any::<bool>(),
        ) {
            let sizes = if fixed {
                ChunkSizes { min, avg: min, max: min }
            } else {
                let avg = min + spread;
                ChunkSizes { min, avg, max: (avg * 4).max(WINDOW as u64) }
            };
            let cutter = Cutter::new(sizes);
            let fast: Vec<usize> = cutter.lengths(&data).collect();
            prop_assert_eq!(fast, reference(sizes, &data));
        }
    }

    #[test]
    fn long_zero_runs_are_cut_at_the_maximum() {
        let sizes = ChunkSizes::default();
        let cutter = Cutter::new(sizes);
        assert!(!cutter.zeros_cut);
        let mut data = vec![0u8; 3 << 20];
        data[1000] = 1;
        let lengths: Vec<usize> = cutter.lengths(&data).collect();
        assert_eq!(lengths, reference(sizes, &data));
        assert_eq!(lengths.iter().sum::<usize>(), data.len());
    }
}
