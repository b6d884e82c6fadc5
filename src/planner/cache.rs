//! The cache policy: whether the pages a copy brings into the page cache
//! stay there, as cp and dd leave them, or are dropped behind the copy
//! (`engine::cache`). A pure function of the request and the facts, the
//! memory ddx may use among them (`sys::memory`), tested by its table.
//!
//! The rule, as the README's "The page cache" states it:
//! 1. `--keep-cache` keeps, `--drop-cache` drops from the first byte (the
//!    last one given wins). GNU's `iflag=`/`oflag=nocache` give GNU's own
//!    advice instead; between two tmpfs files there is nothing to drop; a
//!    copy that brings nothing into the cache (pipes, character devices,
//!    O_DIRECT, an input already cached into a pipe) has nothing to drop.
//! 2. The budget is what ddx may fill without evicting anything it was not
//!    given: the least of `MemAvailable` and, for every memory cgroup from
//!    ddx's up with a limit, the limit less the usage.
//! 3. The copy's footprint is what it adds to the cache: the input's data
//!    it reads (not already cached) plus the bytes it writes (only the
//!    data under `conv=sparse`), over the input's size past `skip=` or
//!    `count=`.
//! 4. Memory pressure (some task waited for memory in at least
//!    [`PRESSURE_PERCENT`]% of the last ten seconds, the system's PSI or a
//!    limited cgroup's) drops from the first byte.
//! 5. A footprint that fits comfortably, in at most half the budget, goes
//!    through the cache; a larger one drops from the first byte. Half,
//!    because the budget is a moment's figure that other processes' growth
//!    takes back, and `MemAvailable` counts the reclaimable cache of
//!    others: a copy of half of it leaves the other half of what is cached
//!    alone.
//! 6. A footprint that cannot be known (a pipe's size) goes through the
//!    cache until the copy has added half the budget, then drops.
//! 7. With no budget at all (no /proc), the first [`NO_BUDGET_KEEP`] stay
//!    and the rest drops, the rule from before budgets.
//!
//! Pages that were in the cache before the copy are never dropped (the
//! engine's hot-file judgement).

use crate::engine::cache::CachePolicy;
use crate::operands::{Conv, CopyPlan, IoFlags};
use crate::request::{CacheChoice, Settings};
use crate::sys::filesystem::Storage;
use crate::sys::memory::CgroupVersion;

use super::{EndFacts, Facts};

/// Memory pressure (PSI "some avg10", in percent) from which every copy
/// drops behind.
pub const PRESSURE_PERCENT: u32 = 5;

/// Bytes a copy keeps cached before dropping when no budget is known.
pub const NO_BUDGET_KEEP: u64 = 64 << 20;

/// The cache policy, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub policy: CachePolicy,
    pub reason: Reason,
}

/// Why the policy is what it is: what `--verbose` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// `--keep-cache` or `--drop-cache`.
    Asked,
    /// `iflag=nocache` or `oflag=nocache`: GNU's own advice.
    GnuNocache,
    /// Both ends are tmpfs files: their pages are their data.
    InMemory,
    /// Nothing of the copy passes through the page cache.
    NothingCached,
    /// The memory ddx may use is unknown.
    NoBudget,
    /// Memory is under pressure.
    Pressure { source: String, some_avg10: u32 },
    /// The footprint fits in half the budget.
    Fits { footprint: u64, budget: Budget },
    /// It does not.
    TooLarge { footprint: u64, budget: Budget },
    /// The footprint is unknown (a pipe): the first half of the budget
    /// goes through the cache.
    UnknownSize { budget: Budget },
}

/// What ddx may fill with page cache, and which figure bounds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    pub bytes: u64,
    pub bound: Bound,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// `MemAvailable`.
    Available,
    /// A memory cgroup's limit less its usage.
    Cgroup {
        path: String,
        version: CgroupVersion,
        limit: u64,
        usage: u64,
    },
}

impl Budget {
    /// Half the budget: what a copy may add and still fit comfortably.
    pub fn comfortable(&self) -> u64 {
        self.bytes / 2
    }
}

/// Decide the cache policy.
pub fn decide(plan: &CopyPlan, settings: &Settings, facts: &Facts) -> Decision {
    let decision = |policy, reason| Decision { policy, reason };
    let drop_all = CachePolicy::DropBehind { after: 0 };
    if plan.input_nocache || plan.output_nocache {
        return decision(CachePolicy::Keep, Reason::GnuNocache);
    }
    if facts.input.storage == Storage::Memory && facts.output.storage == Storage::Memory {
        return decision(CachePolicy::Keep, Reason::InMemory);
    }
    match settings.cache {
        CacheChoice::Keep => return decision(CachePolicy::Keep, Reason::Asked),
        CacheChoice::Drop => return decision(drop_all, Reason::Asked),
        CacheChoice::Auto => {}
    }
    let reads = reads_into_cache(plan, &facts.input);
    let writes = writes_into_cache(plan, &facts.output);
    if !reads && !writes {
        return decision(CachePolicy::Keep, Reason::NothingCached);
    }
    let Some(budget) = budget(facts) else {
        return decision(
            CachePolicy::DropBehind {
                after: NO_BUDGET_KEEP,
            },
            Reason::NoBudget,
        );
    };
    if let Some(worst) = facts
        .memory
        .pressure
        .iter()
        .max_by_key(|p| p.some_avg10)
        .filter(|p| p.some_avg10 >= PRESSURE_PERCENT * 100)
    {
        return decision(
            drop_all,
            Reason::Pressure {
                source: worst.source.clone(),
                some_avg10: worst.some_avg10,
            },
        );
    }
    match footprint(plan, facts, reads, writes) {
        Some(footprint) if footprint <= budget.comfortable() => {
            decision(CachePolicy::Keep, Reason::Fits { footprint, budget })
        }
        Some(footprint) => decision(drop_all, Reason::TooLarge { footprint, budget }),
        None => {
            // Each byte copied adds a page's worth on each side that
            // passes through the cache.
            let sides = u64::from(reads) + u64::from(writes);
            decision(
                CachePolicy::DropBehind {
                    after: budget.comfortable() / sides,
                },
                Reason::UnknownSize { budget },
            )
        }
    }
}

/// The least of what the kernel says ddx may fill; None if it says
/// nothing.
pub fn budget(facts: &Facts) -> Option<Budget> {
    let memory = &facts.memory;
    let available = memory.available.map(|bytes| Budget {
        bytes,
        bound: Bound::Available,
    });
    let cgroups = memory.cgroups.iter().map(|c| Budget {
        bytes: c.limit.saturating_sub(c.usage),
        bound: Bound::Cgroup {
            path: c.path.clone(),
            version: c.version,
            limit: c.limit,
            usage: c.usage,
        },
    });
    available.into_iter().chain(cgroups).min_by_key(|b| b.bytes)
}

/// Whether reading the input brings pages into the cache that were not
/// there: a file or block device read through the cache, not cached yet.
fn reads_into_cache(plan: &CopyPlan, input: &EndFacts) -> bool {
    passes_through_cache(input) && !plan.input_flags.contains(IoFlags::DIRECT) && !input.cached
}

/// Whether writing the output fills the cache.
fn writes_into_cache(plan: &CopyPlan, output: &EndFacts) -> bool {
    passes_through_cache(output) && !plan.output_flags.contains(IoFlags::DIRECT)
}

/// A file or block device ddx holds a descriptor of, whose pages it can
/// drop (tmpfs pages are the file itself).
fn passes_through_cache(end: &EndFacts) -> bool {
    end.can.local_storage && end.descriptor && end.storage != Storage::Memory
}

/// Bytes the copy adds to the page cache, where the input's size or
/// count= tells how much it copies.
pub fn footprint(plan: &CopyPlan, facts: &Facts, reads: bool, writes: bool) -> Option<u64> {
    let count = if plan.has_count() {
        plan.count.total_bytes(plan.input_block_size)
    } else {
        None
    };
    let skip = plan.skip.total_bytes(plan.input_block_size).unwrap_or(0);
    let available = facts.input.size.map(|size| size.saturating_sub(skip));
    let copied = match (available, count) {
        (Some(a), Some(c)) => a.min(c),
        (a, c) => a.or(c)?,
    };
    // Of a sparse file only the data is read (and, under conv=sparse,
    // written): holes are skipped (SEEK_DATA) and sought over.
    let data = match (facts.input.allocated, facts.input.size) {
        (Some(allocated), Some(size)) if allocated < size && size > 0 => {
            (copied as u128 * allocated as u128 / size as u128) as u64
        }
        _ => copied,
    };
    let read = if reads { data } else { 0 };
    let written = match (writes, plan.conv.contains(Conv::SPARSE)) {
        (false, _) => 0,
        (true, true) => data,
        (true, false) => copied,
    };
    Some(read.saturating_add(written))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ends::Kind;
    use crate::planner::tests::{auto, ext4, facts, request, stream, tmpfs};
    use crate::sys::memory::{CgroupLimit, Memory, Pressure};

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn decided(words: &[&str], settings: Settings, facts: &Facts) -> Decision {
        decide(&request(words, settings.clone()).plan, &settings, facts)
    }

    /// ext4 to ext4 (a 1 GiB source, see `planner::tests`) with `memory`.
    fn files_with(memory: Memory) -> Facts {
        Facts {
            memory,
            ..facts(ext4(1), ext4(2))
        }
    }

    fn available(bytes: u64) -> Memory {
        Memory {
            available: Some(bytes),
            total: Some(24 * GIB),
            ..Memory::default()
        }
    }

    fn cgroup(path: &str, limit: u64, usage: u64) -> CgroupLimit {
        CgroupLimit {
            path: path.into(),
            version: CgroupVersion::V2,
            limit,
            usage,
        }
    }

    const DROP_ALL: CachePolicy = CachePolicy::DropBehind { after: 0 };

    #[test]
    fn a_copy_that_fits_in_half_the_budget_goes_through_the_cache() {
        // 1 GiB read, 1 GiB written: 2 GiB of 16 available.
        let d = decided(&["bs=1M"], auto(), &files_with(available(16 * GIB)));
        assert_eq!(d.policy, CachePolicy::Keep);
        assert_eq!(
            d.reason,
            Reason::Fits {
                footprint: 2 * GIB,
                budget: Budget {
                    bytes: 16 * GIB,
                    bound: Bound::Available
                }
            }
        );
        // Half exactly still fits; a byte less of budget does not.
        let at_half = decided(&["bs=1M"], auto(), &files_with(available(4 * GIB)));
        assert_eq!(at_half.policy, CachePolicy::Keep);
        let over = decided(&["bs=1M"], auto(), &files_with(available(4 * GIB - 2)));
        assert_eq!(over.policy, DROP_ALL);
        assert!(matches!(
            over.reason,
            Reason::TooLarge {
                footprint,
                ..
            } if footprint == 2 * GIB
        ));
    }

    #[test]
    fn the_tightest_memory_cgroup_is_the_budget() {
        // The cgroup: 1.5 GiB, a 512 MiB file read once in it.
        let memory = Memory {
            cgroups: vec![
                cgroup("/bench/copy", 1536 * MIB, 560 * MIB),
                cgroup("/bench", 8 * GIB, 2 * GIB),
            ],
            ..available(16 * GIB)
        };
        let d = decided(&["bs=1M"], auto(), &files_with(memory.clone()));
        assert_eq!(d.policy, DROP_ALL);
        let Reason::TooLarge { budget, .. } = d.reason else {
            panic!("{:?}", d.reason);
        };
        assert_eq!(budget.bytes, 976 * MIB);
        assert_eq!(
            budget.bound,
            Bound::Cgroup {
                path: "/bench/copy".into(),
                version: CgroupVersion::V2,
                limit: 1536 * MIB,
                usage: 560 * MIB
            }
        );
        // A small copy fits there still.
        let d = decided(&["bs=1M", "count=200"], auto(), &files_with(memory));
        assert_eq!(d.policy, CachePolicy::Keep, "{:?}", d.reason);
        // A cgroup over its limit leaves nothing.
        let full = Memory {
            cgroups: vec![cgroup("/x", GIB, GIB + 5)],
            ..available(16 * GIB)
        };
        assert_eq!(budget_of(&full), Some(0));
    }

    fn budget_of(memory: &Memory) -> Option<u64> {
        budget(&files_with(memory.clone())).map(|b| b.bytes)
    }

    #[test]
    fn what_is_cached_already_adds_nothing_and_holes_add_nothing() {
        // A cached source: only the written gigabyte counts.
        let mut cached = ext4(1);
        cached.cached = true;
        let memory = available(2 * GIB);
        let d = decided(
            &["bs=1M"],
            auto(),
            &Facts {
                memory: memory.clone(),
                ..facts(cached, ext4(2))
            },
        );
        assert_eq!(d.policy, CachePolicy::Keep, "{:?}", d.reason);
        // A 1 GiB image with 100 MiB of data: read 100 MiB, write 100 MiB
        // under conv=sparse, the whole gigabyte without.
        let mut image = ext4(1);
        image.allocated = Some(100 * MIB);
        let on = |memory: Memory| Facts {
            memory,
            ..facts(image.clone(), ext4(2))
        };
        let footprint =
            |words: &[&str]| match decided(words, auto(), &on(available(16 * GIB))).reason {
                Reason::Fits { footprint, .. } => footprint,
                other => panic!("{other:?}"),
            };
        assert_eq!(footprint(&["bs=1M", "conv=sparse"]), 200 * MIB);
        assert_eq!(footprint(&["bs=1M"]), 100 * MIB + GIB);
        assert_eq!(footprint(&["bs=1M", "skip=512"]), 50 * MIB + 512 * MIB);
        assert_eq!(footprint(&["bs=1M", "count=256"]), 25 * MIB + 256 * MIB);
        // So the image fits where the whole gigabyte twice would not.
        let d = decided(&["bs=1M", "conv=sparse"], auto(), &on(available(GIB)));
        assert_eq!(d.policy, CachePolicy::Keep);
    }

    #[test]
    fn under_memory_pressure_every_copy_drops() {
        let pressed = |source: &str, some_avg10| Memory {
            pressure: vec![
                Pressure {
                    source: "system".into(),
                    some_avg10: 12,
                },
                Pressure {
                    source: source.into(),
                    some_avg10,
                },
            ],
            ..available(16 * GIB)
        };
        let d = decided(&["count=1"], auto(), &files_with(pressed("/a", 500)));
        assert_eq!(d.policy, DROP_ALL);
        assert_eq!(
            d.reason,
            Reason::Pressure {
                source: "/a".into(),
                some_avg10: 500
            }
        );
        let calm = decided(&["count=1"], auto(), &files_with(pressed("/a", 499)));
        assert_eq!(calm.policy, CachePolicy::Keep);
    }

    #[test]
    fn a_pipe_goes_through_the_cache_until_it_has_filled_half_the_budget() {
        let from_pipe = |memory: Memory| Facts {
            memory,
            ..facts(stream(Kind::Pipe), ext4(2))
        };
        let d = decided(&["bs=1M"], auto(), &from_pipe(available(16 * GIB)));
        assert_eq!(d.policy, CachePolicy::DropBehind { after: 8 * GIB });
        assert!(matches!(d.reason, Reason::UnknownSize { .. }));
        // count= tells the size.
        let d = decided(
            &["bs=1M", "count=100"],
            auto(),
            &from_pipe(available(16 * GIB)),
        );
        assert_eq!(d.policy, CachePolicy::Keep);
        // A device whose size is unknown, read and written through the
        // cache: each byte copied fills two pages' worth.
        let mut unknown = ext4(1);
        unknown.size = None;
        let d = decided(
            &["bs=1M"],
            auto(),
            &Facts {
                memory: available(16 * GIB),
                ..facts(unknown, ext4(2))
            },
        );
        assert_eq!(d.policy, CachePolicy::DropBehind { after: 4 * GIB });
    }

    #[test]
    fn keep_and_drop_as_asked() {
        let keep = Settings {
            cache: CacheChoice::Keep,
            ..auto()
        };
        let drop = Settings {
            cache: CacheChoice::Drop,
            ..auto()
        };
        let tight = files_with(available(MIB));
        let plenty = files_with(available(16 * GIB));
        assert_eq!(decided(&[], keep, &tight).policy, CachePolicy::Keep);
        let d = decided(&[], drop.clone(), &plenty);
        assert_eq!((d.policy, d.reason), (DROP_ALL, Reason::Asked));
        // Between two tmpfs files there is nothing to drop, asked or not.
        let memory_files = facts(tmpfs(1), tmpfs(2));
        let d = decided(&[], drop, &memory_files);
        assert_eq!((d.policy, d.reason), (CachePolicy::Keep, Reason::InMemory));
    }

    #[test]
    fn gnus_nocache_tmpfs_and_uncached_ends_are_left_alone() {
        let tight = available(MIB);
        for words in [&["iflag=nocache"][..], &["oflag=nocache"][..]] {
            let d = decided(words, auto(), &files_with(tight.clone()));
            assert_eq!(
                (d.policy, d.reason),
                (CachePolicy::Keep, Reason::GnuNocache)
            );
        }
        // tmpfs to ext4: the written side drops.
        let to_disk = Facts {
            memory: tight.clone(),
            ..facts(tmpfs(1), ext4(2))
        };
        assert_eq!(decided(&[], auto(), &to_disk).policy, DROP_ALL);
        // Pipe to pipe, or O_DIRECT on both sides: no page cache.
        let pipes = Facts {
            memory: tight.clone(),
            ..facts(stream(Kind::Pipe), stream(Kind::Pipe))
        };
        assert_eq!(decided(&[], auto(), &pipes).reason, Reason::NothingCached);
        let direct = decided(
            &["iflag=direct", "oflag=direct"],
            auto(),
            &files_with(tight.clone()),
        );
        assert_eq!(direct.reason, Reason::NothingCached);
        // A cached file into a pipe brings nothing in.
        let mut cached = ext4(1);
        cached.cached = true;
        let out = Facts {
            memory: tight,
            ..facts(cached, stream(Kind::Pipe))
        };
        assert_eq!(decided(&[], auto(), &out).reason, Reason::NothingCached);
    }

    #[test]
    fn without_a_budget_the_first_64_mib_stay() {
        let d = decided(&["bs=1M"], auto(), &files_with(Memory::default()));
        assert_eq!(
            (d.policy, d.reason),
            (
                CachePolicy::DropBehind {
                    after: NO_BUDGET_KEEP
                },
                Reason::NoBudget
            )
        );
    }
}
