//! `--verbose`: after GNU's statistics (unchanged), how the copy ran:
//! backend, request size, queue depth, cache policy, kernel offload,
//! what `--trim` discarded and CPU use (user + system time as a share of the elapsed time, as in the
//! copy tables of the benchmarks). Also the total a progress display can
//! count towards.

use std::sync::atomic::Ordering;

use crate::ends::Discard;
use crate::engine::cache::CachePolicy;
use crate::engine::depth::{
    Basis, PARALLEL_SCALING_PERCENT, PROBE_DEPTH, PROBE_READ, SEEK_LATENCY_US,
};
use crate::engine::stream::Input;
use crate::engine::{Backend, Counters};
use crate::operands::{CopyPlan, IoFlags};
use crate::planner::cache::{Bound, Budget, Reason, NO_BUDGET_KEEP, PRESSURE_PERCENT};
use crate::planner::facts::why_not_probed;
use crate::planner::{Crowded, Facts, InTurn, Strategy, CPU_CONTENDED_PERCENT};
use crate::progress::Reporter;
use crate::request::CacheChoice;
use crate::request::Settings;
use crate::sys::memory::CgroupVersion;
use crate::text::human::{human, Base};

/// What was decided before the copy, to print after it.
pub struct HowItRan {
    backend: String,
    requests: String,
    cache: String,
    offload_tried: bool,
    splice: bool,
    /// The io_uring backend was chosen: say whether its ring copied.
    uring: bool,
    /// bs=auto's choice, and why.
    block_size: Option<String>,
    /// `--trim`, and how the output discards.
    trim: Option<Discard>,
    /// CPU time already used when the copy started (start-up, opening).
    cpu_before: Option<(std::time::Duration, std::time::Duration)>,
    /// How each end reaches its device, where that says something (a
    /// generic node's commands): ("input", ...), ("output", ...).
    ends: Vec<(&'static str, String)>,
    /// How a rescue's phases went.
    rescue: Option<String>,
    /// What is known of the disks under the ends, and how.
    devices: Option<String>,
}

/// Why the reads and writes take turns.
fn in_turn_why(in_turn: Option<InTurn>) -> String {
    match in_turn {
        Some(InTurn::OneDisk) => {
            "both ends on one disk, which serves one request at a time".to_owned()
        }
        Some(InTurn::Crowded(Crowded::OneCpu)) => "one CPU".to_owned(),
        Some(InTurn::Crowded(Crowded::Contended { some_avg10 })) => format!(
            "the CPUs are taken: tasks waited for one {}.{:02}% of the last 10 s, \
             CPU pressure from {CPU_CONTENDED_PERCENT}%",
            some_avg10 / 100,
            some_avg10 % 100
        ),
        None => "as asked".to_owned(),
    }
}

/// What is known of the disk under an end and what it was taken for;
/// None for an end on no disk that was not measured either.
fn devices_line(end: &crate::planner::EndFacts) -> Option<String> {
    let hint = end.queue?;
    let name = end
        .disk
        .and_then(crate::sys::block::Node::of)
        .and_then(|node| node.name());
    let what = match (name, hint.transport) {
        (Some(name), Some(transport)) => format!("{name} ({})", transport.name()),
        (Some(name), None) => name,
        (None, _) if end.descriptor && end.disk.is_none() => {
            "(a file on no block device)".to_owned()
        }
        (None, _) => "(a server)".to_owned(),
    };
    let taken = |parallel: bool| {
        if parallel {
            "serves requests in parallel"
        } else {
            "serves one request at a time"
        }
    };
    let not_measured = || match why_not_probed(end) {
        Some(why) => format!("not measured: {why}"),
        None => "not measured: O_DIRECT reads failed".to_owned(),
    };
    let judged = match hint.parallel() {
        Some((parallel, Basis::Measured(probe))) => format!(
            "random {} reads took {} µs each one at a time (a disk that seeks takes \
             {} µs or more), {}.{:02}x their rate at depth {PROBE_DEPTH} (parallel from \
             {}.{:02}x): {}",
            size(PROBE_READ),
            probe.latency_us,
            SEEK_LATENCY_US,
            probe.scaling_percent / 100,
            probe.scaling_percent % 100,
            PARALLEL_SCALING_PERCENT / 100,
            PARALLEL_SCALING_PERCENT % 100,
            taken(parallel)
        ),
        Some((parallel, Basis::Transport(transport))) => format!(
            "a {} disk {} ({})",
            transport.name(),
            taken(parallel),
            not_measured()
        ),
        Some((parallel, Basis::Rotational(rotational))) => format!(
            "its queue says it {}: taken to serve {} ({})",
            if rotational {
                "rotates"
            } else {
                "does not rotate"
            },
            if parallel {
                "requests in parallel"
            } else {
                "one request at a time"
            },
            not_measured()
        ),
        None => format!(
            "nothing known: taken to serve one request at a time ({})",
            not_measured()
        ),
    };
    Some(format!("{what}: {judged}"))
}

fn size(bytes: usize) -> String {
    human(bytes as u64, Base::Iec, 1, 1)
}

impl HowItRan {
    pub fn new(settings: &Settings, strategy: &Strategy, plan: &CopyPlan) -> HowItRan {
        let Strategy {
            backend,
            shaping,
            cache,
            in_turn,
            input_in_flight,
            output_in_flight,
            one_shared_disk,
        } = strategy;
        // Said of an O_DIRECT end's reads ahead and writes behind; a
        // served end keeps the bulk requests in flight, as said above.
        let write_behind = output_in_flight.filter(|_| plan.output_flags.contains(IoFlags::DIRECT));
        let read_ahead = input_in_flight.filter(|_| plan.input_flags.contains(IoFlags::DIRECT));
        let uring = matches!(backend, Backend::Uring { .. });
        let how = if settings.backend.is_some() {
            "as asked"
        } else {
            "chosen by auto"
        };
        let backend = match *backend {
            Backend::Sync => format!("sync, {how} (read, then write, as GNU dd), queue depth 1"),
            Backend::Sequential => format!(
                "sequential, {how} ({}: in turn, in large requests), queue depth 1",
                in_turn_why(*in_turn)
            ),
            Backend::Threads { queue_depth } => format!(
                "threads, {how} (a reader thread ahead of the writer), queue depth {queue_depth}"
            ),
            Backend::Uring { queue_depth } => format!(
                "uring, {how} (io_uring, reads and writes in flight together; threads where \
                 it cannot apply), queue depth {queue_depth}"
            ),
        };
        let requests = match shaping.bulk {
            Some(shape) => format!(
                "{} per request (bulk; GNU's records of {} counted from the bytes)",
                size(shape.chunk),
                size(plan.input_block_size)
            ),
            None if plan.input_block_size == plan.output_block_size => {
                format!(
                    "{} per read and write (GNU's records)",
                    size(plan.input_block_size)
                )
            }
            None => format!(
                "{} per read, {} per write (GNU's records)",
                size(plan.input_block_size),
                size(plan.output_block_size)
            ),
        };
        let cache = cache_policy(cache, shaping.cache, settings.cache);
        let requests = match write_behind {
            Some(writes) => format!(
                "{requests}; writes: {} in flight (O_DIRECT, io_uring)",
                writes.depth
            ),
            None => requests,
        };
        let requests = match read_ahead {
            Some(reads) => format!(
                "{requests}; reads: {} in flight (O_DIRECT, io_uring)",
                reads.depth
            ),
            None => requests,
        };
        let direct = (plan.input_flags | plan.output_flags).contains(IoFlags::DIRECT);
        let requests =
            if *one_shared_disk && direct && matches!(strategy.backend, Backend::Threads { .. }) {
                format!(
                    "{requests}; at most {} of each (both ends on one disk, not measured \
                     gaining {}x with depth)",
                    crate::planner::SHARED_DISK_DEPTH,
                    crate::engine::depth::DEEP_SCALING_PERCENT / 100
                )
            } else {
                requests
            };
        HowItRan {
            backend,
            requests,
            cache,
            offload_tried: shaping.offload_unit.is_some(),
            splice: shaping.splice,
            uring,
            block_size: None,
            trim: None,
            cpu_before: None,
            ends: Vec::new(),
            rescue: None,
            devices: None,
        }
    }

    /// A copy by position (`--rescue`, `--map`, `--resume`); `rescue` says
    /// how its phases went.
    pub fn positional(plan: &CopyPlan, rescue: Option<String>) -> HowItRan {
        HowItRan {
            backend: "positional (--rescue/--map/--resume: each chunk read and written \
                      at its place, one request at a time), queue depth 1"
                .to_owned(),
            rescue,
            requests: format!(
                "{} per read and write (GNU's records)",
                size(plan.input_block_size)
            ),
            cache: "left to the kernel".to_owned(),
            offload_tried: false,
            uring: false,
            splice: false,
            block_size: None,
            trim: None,
            cpu_before: None,
            ends: Vec::new(),
            devices: None,
        }
    }

    /// Count CPU time from `start` (when the statistics' clock started).
    pub fn with_cpu_since(
        mut self,
        start: Option<(std::time::Duration, std::time::Duration)>,
    ) -> Self {
        self.cpu_before = start;
        self
    }

    /// Say how the ends reach their devices, where they say (see
    /// `End::describe`).
    pub fn with_ends(mut self, input: Option<String>, output: Option<String>) -> Self {
        self.ends = [("input", input), ("output", output)]
            .into_iter()
            .filter_map(|(which, text)| Some((which, text?)))
            .collect();
        self
    }

    /// Say what `--trim` did onto an output that discards as `how`
    /// says (an output that cannot had its zeros written, which the
    /// line counts as refused).
    pub fn with_trim(mut self, trim: bool, how: Option<Discard>) -> Self {
        self.trim = trim.then(|| how.unwrap_or(Discard::PunchHoles));
        self
    }

    /// Say what is known of the disks under the ends: measured, known by
    /// their kind, or only what their queues say.
    pub fn with_devices(mut self, facts: &Facts) -> Self {
        let input = devices_line(&facts.input);
        let output = if facts.output.disk.is_some() && facts.output.disk == facts.input.disk {
            input.as_ref().map(|_| "the same disk".to_owned())
        } else {
            devices_line(&facts.output)
        };
        self.devices = match (input, output) {
            (None, None) => None,
            (Some(input), None) => Some(format!("input {input}")),
            (None, Some(output)) => Some(format!("output {output}")),
            (Some(input), Some(output)) => Some(format!("input {input}; output {output}")),
        };
        self
    }

    /// Say what bs=auto chose.
    pub fn with_block_choice(mut self, choice: Option<&crate::engine::auto_block::Choice>) -> Self {
        self.block_size = choice.map(|c| c.describe());
        self
    }

    /// Print the report after the statistics.
    pub fn print(&self, reporter: &Reporter, counters: &Counters) {
        let elapsed = reporter.elapsed_ns();
        let offloaded = counters.bytes_offloaded.load(Ordering::Acquire);
        let offload = match (self.offload_tried, offloaded) {
            _ if self.splice => {
                "splice: records moved inside the kernel, not copied through ddx".to_owned()
            }
            (false, _) => "not used".to_owned(),
            (true, 0) => "tried (copy_file_range), not supported here".to_owned(),
            (true, bytes) => format!("copy_file_range copied {bytes} bytes"),
        };
        let cpu = match (crate::sys::usage::cpu_times(), self.cpu_before) {
            (Some((user, system)), Some((user_before, system_before))) => {
                let (user, system) = (
                    user.saturating_sub(user_before),
                    system.saturating_sub(system_before),
                );
                let busy = (user + system).as_nanos() as f64;
                let share = if elapsed == 0 {
                    0.0
                } else {
                    busy * 100.0 / elapsed as f64
                };
                format!(
                    "{share:.1}% of {:.3} s (user {:.3} s, system {:.3} s)",
                    elapsed as f64 / 1e9,
                    user.as_secs_f64(),
                    system.as_secs_f64()
                )
            }
            _ => "unknown".to_owned(),
        };
        let uncached = counters.bytes_uncached.load(Ordering::Acquire);
        let cache = if uncached > 0 {
            format!(
                "{}; {uncached} bytes written uncached (RWF_DONTCACHE: the kernel drops \
                 them once they are on the device)",
                self.cache
            )
        } else {
            self.cache.clone()
        };
        let uring = self.uring.then(|| {
            let copied = counters.bytes_by_uring.load(Ordering::Acquire);
            if counters.uring_unavailable.load(Ordering::Acquire) {
                "no ring could be set up here: threads copied instead".to_owned()
            } else if copied > 0 {
                format!("the ring copied {copied} bytes")
            } else {
                "not used: threads copied (the ring takes a bulk copy between \
                 descriptors, without --hash, --verify, --trim or conv=sparse, from \
                 an input without holes)"
                    .to_owned()
            }
        });
        if let Some(devices) = &self.devices {
            reporter.message(format_args!("devices: {devices}"));
        }
        if let Some(block_size) = &self.block_size {
            reporter.message(format_args!("block size: {block_size}"));
        }
        if let Some(rescue) = &self.rescue {
            reporter.message(format_args!("rescue: {rescue}"));
        }
        if let Some(how) = self.trim {
            let discarded = counters.bytes_discarded.load(Ordering::Acquire);
            let refused = counters.bytes_discard_refused.load(Ordering::Acquire);
            reporter.message(format_args!("trim: {}", trim_line(how, discarded, refused)));
        }
        for (which, text) in &self.ends {
            reporter.message(format_args!("{which}: {text}"));
        }
        let lines = [
            ("backend", Some(self.backend.as_str())),
            ("io_uring", uring.as_deref()),
            ("requests", Some(self.requests.as_str())),
            ("cache", Some(cache.as_str())),
            ("offload", Some(offload.as_str())),
            ("CPU", Some(cpu.as_str())),
        ];
        for (what, text) in lines {
            if let Some(text) = text {
                reporter.message(format_args!("{what}: {text}"));
            }
        }
    }
}

/// The trim line: bytes discarded and how, and zeros written where the
/// output refused.
fn trim_line(how: Discard, discarded: u64, refused: u64) -> String {
    let how = match how {
        Discard::ZeroRequests => "as NBD zero requests, which let the server deallocate",
        Discard::PunchHoles => "as holes punched (fallocate PUNCH_HOLE)",
    };
    let mut line = format!("{discarded} bytes discarded {how}");
    if refused > 0 {
        line.push_str(&format!(
            "; {refused} bytes written as zeros because the output refused"
        ));
    }
    line
}

/// The cache line: the decision, and the figures it was made on.
fn cache_policy(reason: &Reason, policy: CachePolicy, asked: CacheChoice) -> String {
    let size = |bytes: u64| human(bytes, Base::Iec, 1, 1);
    let budget = |b: &Budget| {
        let bound = match &b.bound {
            Bound::Available => "MemAvailable".to_owned(),
            Bound::Cgroup {
                path,
                version,
                limit,
                usage,
            } => format!(
                "memory cgroup {path} ({}): limit {}, usage {}",
                match version {
                    CgroupVersion::V1 => "v1",
                    CgroupVersion::V2 => "v2",
                },
                size(*limit),
                size(*usage)
            ),
        };
        format!("half of the {} ddx may use ({bound})", size(b.bytes))
    };
    match reason {
        Reason::Asked => match asked {
            CacheChoice::Drop => "drop-behind as asked (--drop-cache): pages the copy brings \
                                  into the page cache are dropped behind it"
                .to_owned(),
            _ => "kept as asked (--keep-cache): through the page cache, as cp and dd".to_owned(),
        },
        Reason::GnuNocache => "dropped as asked (iflag/oflag=nocache)".to_owned(),
        Reason::InMemory => {
            "left to the kernel: both ends are in memory (tmpfs), their pages are their data"
                .to_owned()
        }
        Reason::NothingCached => {
            "left to the kernel: nothing of this copy passes through the page cache".to_owned()
        }
        Reason::NoBudget => format!(
            "drop-behind past the first {}: the memory ddx may use is unknown (no \
             MemAvailable, no cgroup limit)",
            size(NO_BUDGET_KEEP)
        ),
        Reason::Pressure { source, some_avg10 } => format!(
            "drop-behind: memory is under pressure ({source}: some task waited for memory \
             {}.{:02}% of the last 10 s, PSI some avg10; the bar is {PRESSURE_PERCENT}%)",
            some_avg10 / 100,
            some_avg10 % 100
        ),
        Reason::Fits {
            footprint,
            budget: b,
        } => format!(
            "kept: the copy adds about {} to the page cache, within {}; through the cache, \
             as cp and dd",
            size(*footprint),
            budget(b)
        ),
        Reason::TooLarge {
            footprint,
            budget: b,
        } => format!(
            "drop-behind: the copy would add about {} to the page cache, more than {}; pages \
             it brings in are dropped behind it (pages cached before it stay)",
            size(*footprint),
            budget(b)
        ),
        Reason::UnknownSize { budget: b } => format!(
            "through the page cache for the first {} copied, then drop-behind: the input's \
             size is unknown, and that much fills {}",
            size(policy.drops_after().unwrap_or(0)),
            budget(b)
        ),
    }
}

/// The bytes a copy should write, when the input's size or count= says:
/// what the input holds past skip= (a file's size, a device's), capped
/// by count=. Conversions may change it; progress displays clamp.
pub fn expected_bytes(plan: &CopyPlan, input: &Input, facts: &Facts) -> Option<u64> {
    let count = if plan.has_count() {
        plan.count.total_bytes(plan.input_block_size)
    } else {
        None
    };
    // The size as the input is now (it may be the output, truncated by
    // opening), else the device's.
    let size = input.stream.size().ok().flatten().or(facts.input.size);
    let available = size.and_then(|size| {
        let skip = plan.skip.total_bytes(plan.input_block_size)?;
        let start = (input.offset.max(0) as u64).saturating_add(skip);
        Some(size.saturating_sub(start))
    });
    match (available, count) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, c) => a.or(c),
    }
}
