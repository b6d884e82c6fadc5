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

/// The part size an upload kept resumable by its map starts from, and
/// the most bytes of its parts in flight. A process killed in the middle
/// loses the parts in flight, partly sent, which a `--resume` sends
/// again: on the SeaweedFS cluster of the tests (about 100 MiB/s up),
/// with 16 MiB parts and 8 in flight (4 under --compress), a kill at half
/// the upload's time found 38-47% of the input stored, and the resumed
/// run took 0.64x the whole upload's time (0.66x compressed). Four parts
/// kept the cluster as busy as eight (a compressed upload, 4 in flight,
/// sent its parts at the same rate), and 32 MiB in flight still carries
/// 640 MiB/s over a round trip of 50 ms.
pub const JOURNALED_PART: usize = 8 << 20;
pub const JOURNALED_IN_FLIGHT_BYTES: usize = 32 << 20;
const _: () = assert!(JOURNALED_PART >= S3_MIN_PART && JOURNALED_PART % (1 << 20) == 0);

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
    part_size_from(BASE_PART, total, index)
}

/// [`part_size`] starting from `base` instead of [`BASE_PART`]
/// ([`JOURNALED_PART`] for an upload kept resumable).
pub fn part_size_from(base: usize, total: Option<u64>, index: usize) -> usize {
    let fitting = total.map_or(0, |t| t.div_ceil(MAX_PARTS as u64)) as usize;
    let base = fitting.max(base).next_multiple_of(1 << 20);
    let doublings = (index / PARTS_PER_STEP).min(20) as u32;
    base.saturating_mul(1 << doublings).min(S3_MAX_PART)
}

/// How many parts of `len` bytes may be in flight at once: at least one,
/// at most [`MAX_IN_FLIGHT_BYTES`] of them.
pub fn in_flight(len: usize) -> usize {
    in_flight_within(MAX_IN_FLIGHT_BYTES, len)
}

/// How many parts of `len` bytes may be in flight within `bytes` of them
/// (one at least, [`MAX_UPLOADS`] at most).
pub fn in_flight_within(bytes: usize, len: usize) -> usize {
    (bytes / len.max(1)).clamp(1, MAX_UPLOADS)
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

    #[test]
    fn an_upload_kept_resumable_keeps_less_in_flight_in_smaller_parts() {
        assert_eq!(part_size_from(JOURNALED_PART, Some(1 << 30), 0), 8 << 20);
        assert_eq!(
            in_flight_within(JOURNALED_IN_FLIGHT_BYTES, JOURNALED_PART),
            MIN_UPLOADS
        );
        // A large input still fits in the parts an upload may have.
        let total = 1u64 << 40;
        let size = part_size_from(JOURNALED_PART, Some(total), 0) as u64;
        assert!(size * MAX_PARTS as u64 >= total, "{size}");
        assert_eq!(size, part_size(Some(total), 0) as u64);
    }
}
