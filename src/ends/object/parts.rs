//! How an upload is cut into parts: S3's limits, and the size of each
//! part, so that an input of any size fits in the parts an upload may
//! have while memory stays bounded.

/// S3's limits: parts per upload, the smallest part (all but the last)
/// and the largest.
pub const MAX_PARTS: usize = 10_000;
pub const S3_MIN_PART: usize = 5 << 20;
pub const S3_MAX_PART: usize = 5 << 30;

/// The part size ddx starts from: larger parts cost fewer requests,
/// smaller ones less memory and an earlier start.
pub const BASE_PART: usize = 16 << 20;
const _: () = assert!(BASE_PART >= S3_MIN_PART && BASE_PART % (1 << 20) == 0);

/// Parts in flight at least, whatever the copy's plan.
pub const MIN_UPLOADS: usize = 4;

/// Parts in flight at most, whatever the copy's plan.
pub const MAX_UPLOADS: usize = 32;

/// The most bytes of parts in flight (one part at least): memory is the
/// parts in flight and the one being gathered. Parts grow large only for
/// inputs of unknown size past hundreds of GiB (S3 allows 10,000 parts),
/// and then fewer are in flight.
pub const MAX_IN_FLIGHT_BYTES: usize = 512 << 20;

/// Parts of the same size grow this many at a time (unknown sizes).
const PARTS_PER_STEP: usize = 1_000;

/// The size of part `index` (from 0) of an upload of `total` bytes (None:
/// unknown, as from a pipe). With the total known, the smallest size that
/// fits it in [`MAX_PARTS`], at least [`BASE_PART`]; either way the size
/// doubles every [`PARTS_PER_STEP`] parts, so that an unknown input (or
/// one larger than announced) still fits: from 16 MiB that reaches 16 TiB
/// in 10,000 parts. Whole MiB, never over [`S3_MAX_PART`].
pub fn part_size(total: Option<u64>, index: usize) -> usize {
    let fitting = total.map_or(0, |t| t.div_ceil(MAX_PARTS as u64)) as usize;
    let base = fitting.max(BASE_PART).next_multiple_of(1 << 20);
    let doublings = (index / PARTS_PER_STEP).min(20) as u32;
    base.saturating_mul(1 << doublings).min(S3_MAX_PART)
}

/// How many parts of `len` bytes may be in flight at once: at least one,
/// at most [`MAX_IN_FLIGHT_BYTES`] of them.
pub fn in_flight(len: usize) -> usize {
    (MAX_IN_FLIGHT_BYTES / len.max(1)).clamp(1, MAX_UPLOADS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn small_and_unknown_inputs_start_from_the_base_part() {
        assert_eq!(part_size(None, 0), BASE_PART);
        assert_eq!(part_size(Some(0), 0), BASE_PART);
        assert_eq!(part_size(Some(1 << 30), 2_500), BASE_PART * 4);
    }

    #[test]
    fn a_known_size_fits_in_ten_thousand_parts_of_whole_mebibytes() {
        for total in [200 << 30, 1 << 40, 3 * (1 << 40) + 12_345] {
            let size = part_size(Some(total), 0) as u64;
            assert_eq!(size % MIB, 0);
            assert!(size * MAX_PARTS as u64 >= total, "{total}: {size}");
            assert!(size >= S3_MIN_PART as u64);
        }
    }

    #[test]
    fn unknown_sizes_still_fit_five_tebibytes_and_parts_stay_within_limits() {
        let mut sum = 0u64;
        for index in 0..MAX_PARTS {
            let size = part_size(None, index);
            assert!(
                (S3_MIN_PART..=S3_MAX_PART).contains(&size),
                "{index}: {size}"
            );
            sum += size as u64;
        }
        assert!(sum >= 5 << 40, "{sum}");
        assert_eq!(part_size(Some(u64::MAX), 50_000), S3_MAX_PART);
    }

    #[test]
    fn parts_in_flight_are_bounded_by_memory() {
        assert_eq!(in_flight(BASE_PART), MAX_UPLOADS);
        assert_eq!(in_flight(S3_MAX_PART), 1);
        assert_eq!(in_flight(256 << 20), 2);
    }
}
