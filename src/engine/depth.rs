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

/// What is known of the device under an end: what its queue says
/// (sysfs), what kind of device it is, and what a probe measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueHint {
    /// The queue's `rotational` flag. Virtual disks (virtio, most cloud
    /// block devices) say 1 whatever is behind them, so it counts only
    /// where nothing better is known ([`QueueHint::parallel`]).
    pub rotational: Option<bool>,
    pub nr_requests: Option<u32>,
    /// What kind of device the disk is, where its name or driver says.
    pub transport: Option<Transport>,
    /// How its random reads scaled with depth, where they were measured
    /// (`planner::facts` probes once per copy).
    pub measured: Option<Probe>,
}

/// Kinds of block device whose way of serving requests is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// NVMe: many hardware queues.
    Nvme,
    /// A virtio disk of a virtual machine: the host serves its requests,
    /// in parallel, whatever its `rotational` flag says.
    Virtio,
    /// An NBD export: a server answers, many requests at once.
    Nbd,
    /// A loop device: as parallel as the file system under its backing
    /// file, which its `rotational` flag follows.
    Loop,
}

impl Transport {
    /// The kind of a disk from its kernel name and its driver's name
    /// (the last part of sysfs's `device/driver` link).
    pub fn of(name: &str, driver: Option<&str>) -> Option<Transport> {
        let numbered = |prefix: &str| {
            name.strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        };
        if numbered("nvme") {
            Some(Transport::Nvme)
        } else if numbered("nbd") {
            Some(Transport::Nbd)
        } else if numbered("loop") {
            Some(Transport::Loop)
        } else if driver == Some("virtio_blk") {
            Some(Transport::Virtio)
        } else {
            None
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Transport::Nvme => "NVMe",
            Transport::Virtio => "virtio",
            Transport::Nbd => "NBD",
            Transport::Loop => "loop",
        }
    }

    /// Whether this kind of device serves requests in parallel, where
    /// the kind alone says.
    fn parallel(self) -> Option<bool> {
        match self {
            Transport::Nvme | Transport::Virtio | Transport::Nbd => Some(true),
            Transport::Loop => None,
        }
    }
}

/// Random reads of [`PROBE_READ`] bytes timed at depth 1 and at depth
/// [`PROBE_DEPTH`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// The median time of one read alone, in microseconds.
    pub latency_us: u32,
    /// Reads per second at depth [`PROBE_DEPTH`] as a share of those at
    /// depth 1, in percent: 100 for a device that serves one request at
    /// a time, up to `PROBE_DEPTH` times that for one that serves them all
    /// at once.
    pub scaling_percent: u32,
}

/// The depth a probe compares with depth 1.
pub const PROBE_DEPTH: usize = 8;

/// The size of each read of a probe: one page, aligned for O_DIRECT on
/// every device.
pub const PROBE_READ: usize = 4096;

/// A random read that takes less than this moved no head: a spinning
/// disk's takes a seek and half a turn, 4 ms and more at 7200 rpm (and
/// the slow-device lab's about 3 ms). A device that fast is taken to
/// serve requests in parallel whatever its depth gained: on a machine
/// with few CPUs, reads that fast are bound by the CPUs that issue them,
/// so depth cannot show the device's parallelism.
pub const SEEK_LATENCY_US: u32 = 500;

/// From how much more rate at depth [`PROBE_DEPTH`] a device counts as
/// serving requests in parallel: twice the rate at depth 1. In the
/// slow-device lab a device that serves one request at a time measured
/// about 100%, one that serves them in parallel about 700%; this
/// machine's virtio disk several hundred.
pub const PARALLEL_SCALING_PERCENT: u32 = 200;

/// From how much more rate at depth [`PROBE_DEPTH`] a disk keeps several
/// reads and writes in flight when a copy reads and writes it at once:
/// four times the rate at depth 1 (an NVMe drive gains six to eight). A
/// disk that gains less shares one path between the two: this machine's
/// virtio disk measured 1.1x to 2.6x, and a direct copy within it with 16
/// reads and 16 writes in flight took 1.25x as long as with two of each
/// (`planner::SHARED_DISK_DEPTH`).
pub const DEEP_SCALING_PERCENT: u32 = 400;

/// Why a device is taken to serve requests in parallel, or one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// A probe measured it.
    Measured(Probe),
    /// The kind of device says.
    Transport(Transport),
    /// Its queue's `rotational` flag says (nothing better is known).
    Rotational(bool),
}

impl QueueHint {
    /// Whether the device serves several requests at once (None: not
    /// known), and what says so: a measurement first, then the kind of
    /// device, then the `rotational` flag, which a virtual disk sets
    /// whatever is behind it.
    pub fn parallel(&self) -> Option<(bool, Basis)> {
        if let Some(probe) = self.measured {
            return Some((
                probe.scaling_percent >= PARALLEL_SCALING_PERCENT
                    || probe.latency_us < SEEK_LATENCY_US,
                Basis::Measured(probe),
            ));
        }
        if let Some((transport, parallel)) = self
            .transport
            .and_then(|t| t.parallel().map(|parallel| (t, parallel)))
        {
            return Some((parallel, Basis::Transport(transport)));
        }
        self.rotational
            .map(|rotational| (!rotational, Basis::Rotational(rotational)))
    }

    /// Whether a copy that reads and writes this one disk at once gains
    /// from keeping several of each in flight: where a probe measured,
    /// a rate that grew [`DEEP_SCALING_PERCENT`] with depth; otherwise an
    /// NVMe drive.
    pub fn deep_within_itself(&self) -> bool {
        match self.measured {
            Some(probe) => probe.scaling_percent >= DEEP_SCALING_PERCENT,
            None => self.transport == Some(Transport::Nvme),
        }
    }

    /// [`QueueHint::parallel`] without its reason.
    pub fn serves_in_parallel(&self) -> Option<bool> {
        self.parallel().map(|(parallel, _)| parallel)
    }
}

impl QueueHint {
    /// A queue that says it does not rotate (or serves as one that does
    /// not: an NBD server), taking `nr_requests` at once.
    pub const fn solid_state(nr_requests: u32) -> QueueHint {
        QueueHint {
            rotational: Some(false),
            nr_requests: Some(nr_requests),
            transport: None,
            measured: None,
        }
    }

    /// A queue that says it rotates, taking `nr_requests` at once.
    pub const fn rotating(nr_requests: u32) -> QueueHint {
        QueueHint {
            rotational: Some(true),
            nr_requests: Some(nr_requests),
            transport: None,
            measured: None,
        }
    }
}

/// The default depth for requests of `request_bytes`, from the hints of
/// both ends (None where an end is not on a block device).
pub fn default_depth(request_bytes: usize, ends: &[Option<QueueHint>]) -> usize {
    // A device that serves one request at a time (a spinning disk) streams
    // best with a short queue (more only adds seeks between requests); one
    // that serves them in parallel is kept busy by more, up to what its
    // queue accepts; unknown: the middle.
    let wanted = ends
        .iter()
        .flatten()
        .map(|hint| match hint.serves_in_parallel() {
            Some(false) => 4,
            Some(true) => 16usize.min(hint.nr_requests.map_or(16, |n| n.max(2) as usize)),
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
        transport: Transport::of(&disk.name()?, disk.driver().as_deref()),
        measured: None,
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

    /// Reads that took 3 ms each alone, as in the slow-device lab.
    fn measured(scaling_percent: u32) -> Probe {
        Probe {
            latency_us: 3000,
            scaling_percent,
        }
    }

    #[test]
    fn what_says_whether_a_device_serves_requests_in_parallel() {
        let virtio = QueueHint {
            transport: Some(Transport::Virtio),
            ..HDD
        };
        let looped = QueueHint {
            transport: Some(Transport::Loop),
            ..HDD
        };
        // (hint, parallel?, on what basis)
        let rows = [
            (HDD, Some(false), Some(Basis::Rotational(true))),
            (SSD, Some(true), Some(Basis::Rotational(false))),
            (QueueHint::default(), None, None),
            // A virtio disk says it rotates: its kind outweighs the flag.
            (
                virtio,
                Some(true),
                Some(Basis::Transport(Transport::Virtio)),
            ),
            // A loop device is what its backing file's disk is.
            (looped, Some(false), Some(Basis::Rotational(true))),
            // A measurement outweighs both.
            (
                QueueHint {
                    measured: Some(measured(110)),
                    ..virtio
                },
                Some(false),
                Some(Basis::Measured(measured(110))),
            ),
            (
                QueueHint {
                    measured: Some(measured(450)),
                    ..HDD
                },
                Some(true),
                Some(Basis::Measured(measured(450))),
            ),
            (
                QueueHint {
                    measured: Some(measured(PARALLEL_SCALING_PERCENT)),
                    ..QueueHint::default()
                },
                Some(true),
                Some(Basis::Measured(measured(PARALLEL_SCALING_PERCENT))),
            ),
            (
                QueueHint {
                    measured: Some(measured(PARALLEL_SCALING_PERCENT - 1)),
                    ..SSD
                },
                Some(false),
                Some(Basis::Measured(measured(PARALLEL_SCALING_PERCENT - 1))),
            ),
        ];
        // Reads faster than a seek: no head moved, whatever depth gained.
        let fast = Probe {
            latency_us: SEEK_LATENCY_US - 1,
            scaling_percent: 100,
        };
        let slow = Probe {
            latency_us: SEEK_LATENCY_US,
            ..fast
        };
        let rows = rows.into_iter().chain([
            (
                QueueHint {
                    measured: Some(fast),
                    ..HDD
                },
                Some(true),
                Some(Basis::Measured(fast)),
            ),
            (
                QueueHint {
                    measured: Some(slow),
                    ..SSD
                },
                Some(false),
                Some(Basis::Measured(slow)),
            ),
        ]);
        for (hint, parallel, basis) in rows {
            assert_eq!(hint.serves_in_parallel(), parallel, "{hint:?}");
            assert_eq!(hint.parallel().map(|(_, b)| b), basis, "{hint:?}");
        }
    }

    #[test]
    fn a_measured_parallel_disk_gets_a_deep_queue() {
        let virtio = QueueHint {
            transport: Some(Transport::Virtio),
            ..HDD
        };
        assert_eq!(default_depth(1 << 20, &[Some(virtio), Some(virtio)]), 16);
        let serial = QueueHint {
            measured: Some(measured(100)),
            ..SSD
        };
        assert_eq!(default_depth(1 << 20, &[Some(serial)]), 4);
    }

    #[test]
    fn kinds_of_disk_by_name_and_driver() {
        let rows = [
            ("nvme0n1", None, Some(Transport::Nvme)),
            ("vda", Some("virtio_blk"), Some(Transport::Virtio)),
            ("vdb", Some("virtio_blk"), Some(Transport::Virtio)),
            ("vdb", None, None),
            ("nbd3", None, Some(Transport::Nbd)),
            ("loop7", Some("loop"), Some(Transport::Loop)),
            ("sda", Some("sd"), None),
            ("vdisk", None, None),
            ("nbdx", None, None),
            ("xvda", Some("vbd"), None),
        ];
        for (name, driver, transport) in rows {
            assert_eq!(Transport::of(name, driver), transport, "{name}");
        }
    }
}
