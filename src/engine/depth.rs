//! How many requests a copy keeps in flight by default.
//!
//! Depth buys overlap (two are enough for a read and a write at once) and,
//! with io_uring, parallelism inside a device that has several queues or
//! spindles. It costs memory: every request in flight holds a buffer, and
//! a buffer is as large as a record or a bulk request. So the depth is
//! what the devices can use, capped so that buffers in flight stay within
//! a budget, and never below two.

/// Buffers in flight at most, by default (`--queue-depth` overrides).
pub const MEMORY_BUDGET: usize = 64 << 20;

/// What the device under an end says about its queue (sysfs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueHint {
    pub rotational: Option<bool>,
    pub nr_requests: Option<u32>,
}

impl QueueHint {
    /// A queue that says it does not rotate (or serves as one that does
    /// not: an NBD server), taking `nr_requests` at once.
    pub const fn solid_state(nr_requests: u32) -> QueueHint {
        QueueHint {
            rotational: Some(false),
            nr_requests: Some(nr_requests),
        }
    }

    /// A queue that says it rotates, taking `nr_requests` at once.
    pub const fn rotating(nr_requests: u32) -> QueueHint {
        QueueHint {
            rotational: Some(true),
            nr_requests: Some(nr_requests),
        }
    }
}

/// The default depth for requests of `request_bytes`, from the hints of
/// both ends (None where an end is not on a block device).
pub fn default_depth(request_bytes: usize, ends: &[Option<QueueHint>]) -> usize {
    // A spinning disk streams best with a short queue (more only adds
    // seeks between requests); a solid-state or network device is kept
    // busy by more, up to what its queue accepts; unknown: the middle.
    let wanted = ends
        .iter()
        .flatten()
        .map(|hint| match hint.rotational {
            Some(true) => 4,
            Some(false) => 16usize.min(hint.nr_requests.map_or(16, |n| n.max(2) as usize)),
            None => crate::engine::DEFAULT_QUEUE_DEPTH,
        })
        .min()
        .unwrap_or(crate::engine::DEFAULT_QUEUE_DEPTH);
    let affordable = MEMORY_BUDGET / request_bytes.max(1);
    wanted.min(affordable).max(2)
}

/// The queue hints of the disk under `fd`, if it is on one.
pub fn hint_of(fd: std::os::fd::BorrowedFd<'_>) -> Option<QueueHint> {
    let disk = crate::sys::block::Node::of(crate::sys::device::disk_of(fd)?)?;
    Some(QueueHint {
        rotational: disk.queue::<u8>("rotational").map(|v| v == 1),
        nr_requests: disk.queue("nr_requests"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SSD: QueueHint = QueueHint::solid_state(256);
    const HDD: QueueHint = QueueHint::rotating(64);

    #[test]
    fn the_slowest_kind_of_device_decides() {
        assert_eq!(default_depth(1 << 20, &[Some(SSD), Some(SSD)]), 16);
        assert_eq!(default_depth(1 << 20, &[Some(SSD), Some(HDD)]), 4);
        assert_eq!(default_depth(1 << 20, &[None, None]), 8);
        assert_eq!(default_depth(1 << 20, &[Some(SSD), None]), 16);
    }

    #[test]
    fn a_short_device_queue_limits_the_depth() {
        let shallow = QueueHint::solid_state(4);
        assert_eq!(default_depth(1 << 20, &[Some(shallow)]), 4);
    }

    #[test]
    fn large_buffers_are_capped_by_memory_but_still_overlap() {
        assert_eq!(default_depth(16 << 20, &[Some(SSD)]), 4);
        assert_eq!(default_depth(1 << 30, &[Some(SSD)]), 2);
        assert_eq!(default_depth(512, &[None]), 8);
    }
}
