//! The planner's table: one row per case of the README's backend rules,
//! with made-up facts, so that no row needs root, a device or a
//! filesystem of a kind.

use super::*;
use crate::ends::Kind;
use crate::engine::cache::CachePolicy;
use crate::engine::depth::QueueHint;
use crate::request::Settings;
use crate::sys::block::DeviceNumber;

pub fn request(words: &[&str], settings: Settings) -> Request {
    let words: Vec<std::ffi::OsString> = words.iter().map(Into::into).collect();
    Request {
        plan: crate::operands::parse(&words).plan.expect("valid operands"),
        settings,
    }
}

pub fn auto() -> Settings {
    Settings::default()
}

const SSD: QueueHint = QueueHint::solid_state(64);
const HDD: QueueHint = QueueHint::rotating(64);

fn disk(major: u32) -> Option<DeviceNumber> {
    Some(DeviceNumber::from_raw(u64::from(major) << 8))
}

/// A regular file on a filesystem of `storage`, numbered `fs`, on `disk`.
pub fn file(inode: u64, fs: u64, storage: Storage) -> EndFacts {
    EndFacts {
        kind: Kind::RegularFile,
        can: Kind::RegularFile.capabilities(),
        descriptor: true,
        seekable: true,
        size: Some(1 << 30),
        allocated: Some(1 << 30),
        identity: Some(Identity::File { device: fs, inode }),
        filesystem: Some(fs),
        storage,
        disk: None,
        queue: None,
        cached: false,
        mapped: false,
        null_device: false,
        compressed: None,
        command_bytes: None,
    }
}

fn on(mut end: EndFacts, major: u32, queue: QueueHint) -> EndFacts {
    end.disk = disk(major);
    end.queue = Some(queue);
    end
}

fn device(number: u64) -> EndFacts {
    EndFacts {
        kind: Kind::BlockDevice,
        can: Kind::BlockDevice.capabilities(),
        identity: Some(Identity::Device(number)),
        storage: Storage::Memory,
        ..file(0, 0, Storage::Other)
    }
}

pub fn stream(kind: Kind) -> EndFacts {
    EndFacts {
        descriptor: true,
        ..EndFacts::of_kind(kind)
    }
}

/// Two CPUs and plenty of memory (16 GiB available, no cgroup limit).
pub fn facts(input: EndFacts, output: EndFacts) -> Facts {
    Facts {
        input,
        output,
        cpus: 2,
        cpu_pressure: Some(0),
        memory: crate::sys::memory::Memory {
            available: Some(16 << 30),
            total: Some(24 << 30),
            ..Default::default()
        },
        beside: Beside::default(),
    }
}

pub fn ext4(inode: u64) -> EndFacts {
    file(inode, 1, Storage::LocalBlocks)
}

fn xfs(inode: u64) -> EndFacts {
    file(inode, 2, Storage::Other)
}

pub fn tmpfs(inode: u64) -> EndFacts {
    file(inode, 3, Storage::Memory)
}

fn threads(depth: usize) -> Backend {
    Backend::Threads { queue_depth: depth }
}

#[test]
fn files_overlap_in_bulk_requests() {
    let s = plan(&request(&["bs=512"], auto()), &facts(ext4(1), ext4(2)));
    assert_eq!(s.backend, threads(8));
    let bulk = s.shaping.bulk.expect("bulk");
    assert_eq!((bulk.chunk, bulk.write_block), (1 << 20, 512));
    assert!(bulk.sparse_input);
    assert_eq!(s.shaping.cache, CachePolicy::Keep, "2 GiB fit in 16");
    assert_eq!(
        s.shaping.offload_unit, None,
        "ext4 with two CPUs: ddx's own copy"
    );
    assert!(!s.shaping.splice);
}

/// The offload unit the planner picks for `words` with `offload`.
fn offload_unit_of(words: &[&str], offload: Offload, facts: &Facts) -> Option<usize> {
    let settings = Settings { offload, ..auto() };
    plan(&request(words, settings), facts).shaping.offload_unit
}

#[test]
fn kernel_copy_where_it_can_do_better() {
    // XFS shares extents: the kernel's copy, in whole records.
    let s = plan(&request(&["bs=4k"], auto()), &facts(xfs(1), xfs(2)));
    assert_eq!(s.shaping.offload_unit, Some(4096));
    // One CPU on ext4: ddx's reads and writes in turn, which measured
    // cheaper than the kernel's page-by-page copy.
    let one_cpu = Facts {
        cpus: 1,
        ..facts(ext4(1), ext4(2))
    };
    assert_eq!(offload_unit_of(&["bs=4k"], Offload::Auto, &one_cpu), None);
    // Within one rotating disk, in turn: the kernel's copy.
    let s = plan(
        &request(&["bs=1M"], auto()),
        &facts(on(ext4(1), 8, HDD), on(ext4(2), 8, HDD)),
    );
    assert_eq!(s.in_turn, Some(InTurn::OneDisk));
    assert_eq!(s.shaping.offload_unit, Some(1 << 20));
    // --offload forces it on ext4; --no-offload forbids it on XFS.
    assert_eq!(
        offload_unit_of(&[], Offload::Always, &facts(ext4(1), ext4(2))),
        Some(512)
    );
    assert_eq!(
        offload_unit_of(&[], Offload::Never, &facts(xfs(1), xfs(2))),
        None
    );
}

#[test]
fn no_kernel_copy_across_filesystems_with_sparse_or_when_hashing() {
    let across = facts(xfs(1), file(2, 9, Storage::Other));
    assert_eq!(
        plan(&request(&[], auto()), &across).shaping.offload_unit,
        None
    );
    let same = facts(xfs(1), xfs(2));
    assert_eq!(
        plan(&request(&["conv=sparse"], auto()), &same)
            .shaping
            .offload_unit,
        None
    );
    // The bytes must pass through ddx (digests, read-back), or the
    // kernel would write the zeros --trim discards.
    for (why, settings) in [
        (
            "hashing",
            Settings {
                hash: vec![crate::integrity::Algorithm::Sha256],
                ..auto()
            },
        ),
        (
            "verifying",
            Settings {
                verify: true,
                ..auto()
            },
        ),
        (
            "trimming",
            Settings {
                trim: true,
                ..auto()
            },
        ),
    ] {
        let s = plan(&request(&[], settings.clone()), &same);
        assert_eq!(s.shaping.offload_unit, None, "{why}");
        assert_eq!(s.shaping.trim, settings.trim, "{why}");
        // No splice either, from a pipe.
        let pipe_to_file = facts(stream(Kind::Pipe), ext4(2));
        assert!(
            !plan(&request(&[], settings), &pipe_to_file).shaping.splice,
            "{why}"
        );
    }
}

#[test]
fn reblocking_offloads_in_a_unit_both_record_sizes_divide() {
    let s = plan(
        &request(&["ibs=1536", "obs=4096"], auto()),
        &facts(xfs(1), xfs(2)),
    );
    assert_eq!(s.shaping.offload_unit, Some(12288));
    assert_eq!(s.shaping.bulk.unwrap().write_block, 4096);
}

#[test]
fn a_pipe_end_splices_with_gnus_loop() {
    for (input, output) in [(stream(Kind::Pipe), ext4(1)), (ext4(1), stream(Kind::Pipe))] {
        let s = plan(&request(&["bs=64k"], auto()), &facts(input, output));
        assert_eq!(s.backend, Backend::Sync);
        assert!(s.shaping.splice);
    }
    // Not when the bytes must pass through ddx, or with a conversion.
    let hashing = Settings {
        hash: vec![crate::integrity::Algorithm::Xxh3],
        ..auto()
    };
    let pipe_in = facts(stream(Kind::Pipe), ext4(1));
    assert!(
        !plan(&request(&["bs=64k"], hashing), &pipe_in)
            .shaping
            .splice
    );
    assert!(
        !plan(&request(&["bs=64k", "conv=ucase"], auto()), &pipe_in)
            .shaping
            .splice
    );
    assert!(
        !plan(&request(&["bs=64k", "iflag=fullblock"], auto()), &pipe_in)
            .shaping
            .splice
    );
    let no_offload = Settings {
        offload: Offload::Never,
        ..auto()
    };
    assert!(
        !plan(&request(&["bs=64k"], no_offload), &pipe_in)
            .shaping
            .splice
    );
}

#[test]
fn character_devices_keep_gnus_loop_unless_records_are_large() {
    let zero_to_file = facts(stream(Kind::CharDevice), ext4(1));
    let s = plan(&request(&[], auto()), &zero_to_file);
    assert_eq!(s.backend, Backend::Sync);
    assert_eq!(s.shaping.bulk, None);
    // Large records: a reader thread, record by record (no bulk: a
    // character device may return short reads).
    let s = plan(&request(&["bs=64k"], auto()), &zero_to_file);
    assert_eq!(s.backend, threads(8));
    assert_eq!(s.shaping.bulk, None);
    // Nothing that may be slow at either end: the reference loop.
    let s = plan(
        &request(&["bs=1M"], auto()),
        &facts(stream(Kind::CharDevice), stream(Kind::CharDevice)),
    );
    assert_eq!(s.backend, Backend::Sync);
}

#[test]
fn per_request_flags_and_conversions_keep_gnus_records() {
    let files = facts(ext4(1), ext4(2));
    for words in [
        &["bs=64k", "oflag=direct"][..],
        &["bs=64k", "iflag=direct"],
        &["bs=64k", "oflag=dsync"],
        &["bs=64k", "oflag=append", "conv=notrunc"],
        &["bs=64k", "conv=ucase"],
        &["bs=64k", "conv=swab"],
    ] {
        let s = plan(&request(words, auto()), &files);
        assert_eq!(s.shaping.bulk, None, "{words:?}");
        assert_eq!(s.backend, threads(8), "{words:?}: still overlapped");
    }
    // nocache: GNU's advice comes from one copying thread.
    let s = plan(&request(&["bs=64k", "iflag=nocache"], auto()), &files);
    assert_eq!(s.backend, Backend::Sync);
    assert_eq!(s.shaping.bulk, None);
}

#[test]
fn a_file_copied_onto_itself_or_nothing_copied_runs_in_gnus_loop() {
    let same = facts(ext4(7), ext4(7));
    for settings in [
        auto(),
        Settings {
            backend: Some(BackendChoice::Threads),
            ..auto()
        },
        Settings {
            backend: Some(BackendChoice::Uring),
            ..auto()
        },
    ] {
        let s = plan(&request(&["conv=notrunc"], settings), &same);
        assert_eq!(s.backend, Backend::Sync);
        assert_eq!(s.shaping.bulk, None);
    }
    let dev = facts(device(0x0700), device(0x0700));
    assert_eq!(plan(&request(&[], auto()), &dev).backend, Backend::Sync);
    let s = plan(&request(&["count=0"], auto()), &facts(ext4(1), ext4(2)));
    assert_eq!(s.backend, Backend::Sync);
}

#[test]
fn the_backend_asked_for_is_the_backend_used() {
    let files = facts(ext4(1), ext4(2));
    let with = |choice| Settings {
        backend: Some(choice),
        ..auto()
    };
    assert_eq!(
        plan(&request(&[], with(BackendChoice::Sync)), &files).backend,
        Backend::Sync
    );
    assert_eq!(
        plan(&request(&[], with(BackendChoice::Threads)), &files).backend,
        threads(8)
    );
    assert_eq!(
        plan(&request(&[], with(BackendChoice::Uring)), &files).backend,
        Backend::Uring { queue_depth: 8 }
    );
    // Even where auto would keep GNU's loop.
    let pipes = facts(stream(Kind::Pipe), stream(Kind::Pipe));
    assert_eq!(
        plan(&request(&[], with(BackendChoice::Threads)), &pipes).backend,
        threads(8)
    );
}

#[test]
fn one_rotating_disk_copies_in_turn_in_large_requests() {
    let hdd = facts(on(ext4(1), 8, HDD), on(ext4(2), 8, HDD));
    let s = plan(&request(&[], auto()), &hdd);
    assert_eq!(s.backend, Backend::Sequential);
    assert_eq!(s.shaping.bulk.unwrap().chunk, SAME_DISK_REQUEST);
    // In turn within one disk, the kernel's copy is the cheaper one.
    assert_eq!(s.shaping.offload_unit, Some(512));
    // A disk that does not say is taken to rotate.
    let unknown = facts(
        EndFacts {
            disk: disk(8),
            ..ext4(1)
        },
        EndFacts {
            disk: disk(8),
            ..ext4(2)
        },
    );
    assert_eq!(
        plan(&request(&[], auto()), &unknown).backend,
        Backend::Sequential
    );
    // A solid-state disk, a cached input, two disks, or a backend asked
    // for: overlapped.
    let ssd = facts(on(ext4(1), 8, SSD), on(ext4(2), 8, SSD));
    assert_eq!(plan(&request(&[], auto()), &ssd).backend, threads(16));
    let cached = facts(
        EndFacts {
            cached: true,
            ..on(ext4(1), 8, HDD)
        },
        on(ext4(2), 8, HDD),
    );
    assert_eq!(plan(&request(&[], auto()), &cached).backend, threads(4));
    let two = facts(on(ext4(1), 8, HDD), on(ext4(2), 9, HDD));
    assert_eq!(plan(&request(&[], auto()), &two).backend, threads(4));
    let asked = Settings {
        backend: Some(BackendChoice::Threads),
        ..auto()
    };
    assert_eq!(plan(&request(&[], asked), &hdd).backend, threads(4));
}

#[test]
fn queue_depth_from_the_devices_within_the_memory_budget() {
    let hdd_to_ssd = facts(on(ext4(1), 8, HDD), on(ext4(2), 9, SSD));
    assert_eq!(plan(&request(&[], auto()), &hdd_to_ssd).backend, threads(4));
    let ssd = facts(on(ext4(1), 8, SSD), on(ext4(2), 9, SSD));
    assert_eq!(plan(&request(&[], auto()), &ssd).backend, threads(16));
    // 16 MiB records: 64 MiB of buffers at most.
    assert_eq!(
        plan(&request(&["bs=16M"], auto()), &ssd).backend,
        threads(4)
    );
    let given = Settings {
        queue_depth: Some(3),
        ..auto()
    };
    assert_eq!(plan(&request(&[], given), &ssd).backend, threads(3));
}

#[test]
fn request_size_rounds_to_whole_records() {
    let files = facts(ext4(1), ext4(2));
    let sized = Settings {
        request_size: Some(3 << 20),
        ..auto()
    };
    let s = plan(&request(&["bs=1000"], sized), &files);
    assert_eq!(s.shaping.bulk.unwrap().chunk, (3 << 20) / 1000 * 1000);
    // Records larger than a bulk request are requests of their own.
    let s = plan(&request(&["bs=4M"], auto()), &files);
    assert_eq!(s.shaping.bulk.unwrap().chunk, 4 << 20);
}

#[test]
fn bulk_requests_into_or_out_of_a_passthrough_node_are_one_command_each() {
    let node = |command| EndFacts {
        command_bytes: Some(command),
        seekable: true,
        ..EndFacts::of_kind(Kind::GenericNode)
    };
    let s = plan(
        &request(&["bs=64k"], auto()),
        &facts(node(256 << 10), ext4(1)),
    );
    assert_eq!(s.shaping.bulk.unwrap().chunk, 256 << 10);
    let s = plan(
        &request(&["bs=64k"], auto()),
        &facts(ext4(1), node(128 << 10)),
    );
    assert_eq!(s.shaping.bulk.unwrap().chunk, 128 << 10);
    // Whole records still: a command holds two of 100 KiB.
    let s = plan(
        &request(&["bs=100k"], auto()),
        &facts(node(256 << 10), ext4(1)),
    );
    assert_eq!(s.shaping.bulk.unwrap().chunk, 200 << 10);
    // Never larger than bulk requests are, and --request-size rules.
    let s = plan(
        &request(&["bs=64k"], auto()),
        &facts(node(4 << 20), ext4(1)),
    );
    assert_eq!(s.shaping.bulk.unwrap().chunk, 1 << 20);
    let sized = Settings {
        request_size: Some(2 << 20),
        ..auto()
    };
    let s = plan(
        &request(&["bs=64k"], sized),
        &facts(node(256 << 10), ext4(1)),
    );
    assert_eq!(s.shaping.bulk.unwrap().chunk, 2 << 20);
}

#[test]
fn block_devices_are_storage_too() {
    let s = plan(
        &request(&["bs=4M"], auto()),
        &facts(device(0x0700), ext4(1)),
    );
    assert_eq!(s.backend, threads(8));
    let bulk = s.shaping.bulk.unwrap();
    assert!(!bulk.sparse_input, "holes are a file's");
    assert_eq!(s.shaping.offload_unit, None, "copy_file_range takes files");
}

#[test]
fn an_unseekable_input_is_not_read_in_bulk() {
    let mut input = ext4(1);
    input.seekable = false;
    assert_eq!(
        plan(&request(&[], auto()), &facts(input, ext4(2)))
            .shaping
            .bulk,
        None
    );
}

#[test]
fn a_decoded_stream_is_read_in_bulk_though_it_cannot_seek() {
    let input = EndFacts::of_kind(Kind::Stream);
    assert!(!input.seekable);
    let s = plan(&request(&[], auto()), &facts(input, ext4(2)));
    assert_eq!(s.backend, threads(8));
    let bulk = s.shaping.bulk.expect("bulk");
    assert!(!bulk.sparse_input && !bulk.mapped_holes);
    assert_eq!(s.shaping.offload_unit, None, "no descriptor to offload");
    let out = plan(
        &request(&[], auto()),
        &facts(ext4(1), EndFacts::of_kind(Kind::Stream)),
    );
    assert!(out.shaping.bulk.is_some(), "a compressed output takes bulk");
}

#[test]
fn a_mapped_input_passes_its_holes_on_to_be_left_unwritten() {
    let mut input = EndFacts::of_kind(Kind::Stream);
    input.mapped = true;
    let bulk = plan(&request(&["bs=4M"], auto()), &facts(input, device(0x0700)))
        .shaping
        .bulk
        .expect("bulk");
    assert!(bulk.sparse_input && bulk.mapped_holes);
}

#[test]
fn on_one_cpu_a_copy_from_memory_runs_in_turn() {
    let mut cached = ext4(1);
    cached.cached = true;
    let one_cpu = |input: EndFacts, output: EndFacts| Facts {
        cpus: 1,
        ..facts(input, output)
    };
    // No overlap to gain: read, then write, in large requests (the
    // kernel's copy measured dearer on ext4: it splices page by page).
    let s = plan(
        &request(&["bs=1M"], auto()),
        &one_cpu(cached.clone(), ext4(2)),
    );
    assert_eq!(s.backend, Backend::Sequential);
    assert_eq!(s.shaping.offload_unit, None);
    assert_eq!(
        s.shaping.bulk.unwrap().chunk,
        1 << 20,
        "not the same-disk size"
    );
    // A sparse input: ddx's own copy, in turn, which never reads a hole
    // (the kernel's would read each one as zeros into the cache).
    let mut sparse = cached.clone();
    sparse.allocated = Some(100 << 20);
    for operands in [&["bs=1M", "conv=sparse"][..], &["bs=1M"][..], &[][..]] {
        let s = plan(
            &request(operands, auto()),
            &one_cpu(sparse.clone(), ext4(2)),
        );
        assert_eq!(s.backend, Backend::Sequential, "{operands:?}");
        assert!(s.shaping.bulk.is_some(), "{operands:?}");
        assert_eq!(s.shaping.offload_unit, None, "{operands:?}");
    }
    // Records that must stay GNU's: GNU's loop.
    let s = plan(
        &request(&["bs=64k", "conv=ucase"], auto()),
        &one_cpu(cached.clone(), ext4(2)),
    );
    assert_eq!(s.backend, Backend::Sync);
    // An input that must come from its device: the reader waits for it
    // while the writer works, on one CPU too.
    let s = plan(&request(&["bs=1M"], auto()), &one_cpu(ext4(1), ext4(2)));
    assert_eq!(s.backend, threads(8));
    // Two CPUs: overlapped, cached or not.
    let s = plan(&request(&["bs=1M"], auto()), &facts(cached, ext4(2)));
    assert_eq!(s.backend, threads(8));
    // What is asked for is what runs.
    let asked = Settings {
        backend: Some(BackendChoice::Threads),
        ..auto()
    };
    let mut cached = ext4(1);
    cached.cached = true;
    assert_eq!(
        plan(&request(&["bs=1M"], asked), &one_cpu(cached, ext4(2))).backend,
        threads(8)
    );
}

#[test]
fn within_one_disk_a_sparse_input_is_not_handed_to_the_kernel() {
    let mut sparse = on(ext4(1), 8, HDD);
    sparse.allocated = Some(64 << 20);
    let s = plan(
        &request(&["bs=1M"], auto()),
        &facts(sparse, on(ext4(2), 8, HDD)),
    );
    assert_eq!(s.backend, Backend::Sequential);
    assert_eq!(s.shaping.offload_unit, None);
}

#[test]
fn on_cpus_others_wait_for_a_copy_from_memory_runs_in_turn() {
    let mut cached = ext4(1);
    cached.cached = true;
    let with_pressure = |input: EndFacts, some_avg10: u32| Facts {
        cpu_pressure: Some(some_avg10),
        ..facts(input, ext4(2))
    };
    // Tasks waited for a CPU 97% of the time: no CPU for a reader thread,
    // read and write in turn, as on one CPU.
    let s = plan(
        &request(&["bs=1M"], auto()),
        &with_pressure(cached.clone(), 9700),
    );
    assert_eq!(s.backend, Backend::Sequential);
    assert_eq!(
        s.in_turn,
        Some(InTurn::Crowded(Crowded::Contended { some_avg10: 9700 }))
    );
    assert_eq!(s.shaping.offload_unit, None);
    // Just below the mark, or no PSI at all: the overlap.
    for pressure in [Some(CPU_CONTENDED_PERCENT * 100 - 1), None] {
        let facts = Facts {
            cpu_pressure: pressure,
            ..facts(cached.clone(), ext4(2))
        };
        let s = plan(&request(&["bs=1M"], auto()), &facts);
        assert_eq!(s.backend, threads(8), "{pressure:?}");
        assert_eq!(s.in_turn, None);
    }
    // An input read from its disk: the reader waits for the device, not
    // for a CPU, and overlapping still pays.
    let s = plan(&request(&["bs=1M"], auto()), &with_pressure(ext4(1), 9700));
    assert_eq!(s.backend, threads(8));
    // Without bulk requests (a conversion), GNU's own loop.
    let s = plan(
        &request(&["bs=1M", "conv=ucase"], auto()),
        &with_pressure(cached, 9700),
    );
    assert_eq!(s.backend, Backend::Sync);
}

#[test]
fn busy_cpus_never_take_the_overlap_from_a_copy_to_or_from_a_server() {
    let mut cached = ext4(1);
    cached.cached = true;
    let crowded = |input: EndFacts, output: EndFacts| Facts {
        cpu_pressure: Some(9700),
        ..facts(input, output)
    };
    for (input, output) in [
        (cached.clone(), EndFacts::of_kind(Kind::Object)),
        (cached.clone(), EndFacts::of_kind(Kind::NbdExport)),
        (EndFacts::of_kind(Kind::Object), ext4(2)),
        (EndFacts::of_kind(Kind::NbdExport), ext4(2)),
    ] {
        let (from, to) = (input.kind, output.kind);
        let s = plan(&request(&["bs=8M"], auto()), &crowded(input, output));
        assert!(
            matches!(s.backend, Backend::Threads { queue_depth } if queue_depth > 1),
            "{from:?} to {to:?}: {:?}",
            s.backend
        );
        assert_eq!(s.in_turn, None, "{from:?} to {to:?}");
    }
    // One CPU: the same, the other end waits on the network.
    let one = Facts {
        cpus: 1,
        ..facts(cached.clone(), EndFacts::of_kind(Kind::Object))
    };
    let s = plan(&request(&["bs=8M"], auto()), &one);
    assert!(
        matches!(s.backend, Backend::Threads { .. }),
        "{:?}",
        s.backend
    );
    // Between two local ends the busy CPUs still mean in turn.
    let s = plan(&request(&["bs=8M"], auto()), &crowded(cached, ext4(2)));
    assert_eq!(s.backend, Backend::Sequential);
}

#[test]
fn direct_reads_go_several_at_once_only_where_both_ends_take_parallel_requests() {
    let with = |words: &[&str], depth: Option<usize>, facts: &Facts| {
        let settings = Settings {
            queue_depth: depth,
            ..auto()
        };
        plan(&request(words, settings), facts).input_in_flight
    };
    let ssd = |number| on(device(number), 8 + number as u32, SSD);
    let hdd = |number| on(device(number), 8 + number as u32, HDD);
    let direct = ["bs=64K", "iflag=direct"];
    // Solid-state queues give a queue depth of 16.
    let expected = Some(InFlight {
        depth: 16,
        request: 64 << 10,
    });
    assert_eq!(with(&direct, None, &facts(ssd(1), ssd(2))), expected);
    assert_eq!(
        with(&direct, None, &facts(ssd(1), stream(Kind::Pipe))),
        expected,
        "a pipe out: only the input's queue counts"
    );
    assert_eq!(
        with(&direct, None, &facts(hdd(1), ssd(2))),
        None,
        "a rotating input"
    );
    assert_eq!(
        with(&direct, None, &facts(ssd(1), hdd(2))),
        None,
        "a rotating output"
    );
    assert_eq!(
        with(&direct, None, &facts(device(1), device(2))),
        None,
        "queues that do not say"
    );
    assert_eq!(
        with(&direct, Some(4), &facts(device(1), device(2))).map(|r| r.depth),
        Some(4),
        "an asked queue depth"
    );
    assert_eq!(
        with(&direct, Some(1), &facts(ssd(1), ssd(2))),
        None,
        "queue depth 1"
    );
    assert_eq!(
        with(&["bs=64K"], None, &facts(ssd(1), ssd(2))),
        None,
        "not direct"
    );
    assert_eq!(
        with(
            &["bs=64K", "iflag=direct,fullblock"],
            None,
            &facts(ssd(1), ssd(2))
        ),
        None,
        "fullblock reads follow what came before"
    );
    assert_eq!(
        with(&direct, Some(8), &facts(stream(Kind::Pipe), ssd(2))),
        None,
        "a pipe in"
    );
}

#[test]
fn direct_writes_go_several_at_once_only_where_the_copy_overlaps() {
    let to_device = facts(ext4(1), device(2));
    let with = |words: &[&str], depth: Option<usize>, facts: &Facts| {
        let settings = Settings {
            queue_depth: depth,
            ..auto()
        };
        plan(&request(words, settings), facts).output_in_flight
    };
    let direct = ["bs=1M", "oflag=direct"];
    assert_eq!(
        with(&direct, Some(8), &to_device),
        Some(InFlight {
            depth: 8,
            request: 1 << 20
        })
    );
    assert_eq!(
        with(&direct, Some(8), &facts(ext4(1), ext4(2))).map(|w| w.depth),
        Some(8),
        "a file opened O_DIRECT too"
    );
    assert_eq!(with(&direct, Some(1), &to_device), None, "queue depth 1");
    assert_eq!(with(&["bs=1M"], Some(8), &to_device), None, "not direct");
    let both = ["bs=1M", "iflag=direct", "oflag=direct"];
    let between = |input, output| facts(on(device(1), 8, input), on(device(2), 9, output));
    assert_eq!(
        with(&both, None, &between(HDD, SSD)),
        None,
        "reads O_DIRECT one at a time from a device that may take one request at a time"
    );
    assert_eq!(
        with(&both, None, &facts(device(1), device(2))),
        None,
        "devices that do not say what their queue is"
    );
    assert_eq!(
        with(&both, None, &between(SSD, SSD)).map(|w| w.depth),
        Some(16),
        "with reads in flight, between solid-state devices"
    );
    assert_eq!(
        with(&both, Some(4), &to_device).map(|w| w.depth),
        Some(4),
        "an asked queue depth holds for both ends"
    );
    assert_eq!(
        with(&["bs=512", "oflag=direct"], Some(8), &to_device),
        None,
        "small records keep GNU's loop"
    );
    assert_eq!(
        with(&["bs=1M", "oflag=direct,append"], Some(8), &to_device),
        None,
        "a positional write would append"
    );
    assert_eq!(
        with(&["ibs=1M", "obs=64K", "oflag=direct"], Some(8), &to_device),
        None,
        "re-blocked"
    );
    assert_eq!(
        with(&direct, Some(8), &facts(ext4(1), stream(Kind::Pipe))),
        None,
        "a pipe"
    );
    assert_eq!(
        with(&["bs=32M", "oflag=direct"], Some(8), &to_device).map(|w| w.depth),
        Some(2),
        "slots within the memory budget"
    );
}

#[test]
fn one_disk_that_serves_requests_in_parallel_overlaps_its_reads_and_writes() {
    use crate::engine::depth::{Probe, Transport};
    // A virtio disk says it rotates; its kind says it does not seek.
    let virtio = QueueHint {
        transport: Some(Transport::Virtio),
        ..HDD
    };
    let on_virtio = facts(on(ext4(1), 8, virtio), on(ext4(2), 8, virtio));
    let s = plan(&request(&["bs=1M"], auto()), &on_virtio);
    assert_eq!(s.backend, threads(16));
    assert_eq!(s.in_turn, None);
    // With O_DIRECT at both ends, two reads and two writes in flight at
    // most: they share the disk, and its kind does not say it gains from
    // more of each.
    let direct = ["bs=1M", "iflag=direct", "oflag=direct"];
    let s = plan(&request(&direct, auto()), &on_virtio);
    let two = Some(InFlight {
        depth: SHARED_DISK_DEPTH,
        request: 1 << 20,
    });
    assert_eq!((s.input_in_flight, s.output_in_flight), (two, two));
    assert_eq!(s.backend, threads(SHARED_DISK_DEPTH));
    assert!(s.one_shared_disk);
    // An NVMe drive, or a disk measured gaining 4x with depth, keeps
    // reads and writes in flight within itself.
    let in_flight = Some(InFlight {
        depth: 16,
        request: 1 << 20,
    });
    let nvme = QueueHint {
        transport: Some(Transport::Nvme),
        ..SSD
    };
    let s = plan(
        &request(&direct, auto()),
        &facts(on(ext4(1), 8, nvme), on(ext4(2), 8, nvme)),
    );
    assert_eq!(
        (s.input_in_flight, s.output_in_flight),
        (in_flight, in_flight)
    );
    assert!(!s.one_shared_disk);
    let deep = QueueHint {
        measured: Some(Probe {
            latency_us: 80,
            scaling_percent: 650,
        }),
        ..virtio
    };
    let s = plan(
        &request(&direct, auto()),
        &facts(on(ext4(1), 8, deep), on(ext4(2), 8, deep)),
    );
    assert_eq!(
        (s.input_in_flight, s.output_in_flight),
        (in_flight, in_flight)
    );
    // Between two such disks, the reads and writes do not share one.
    let s = plan(
        &request(&direct, auto()),
        &facts(on(ext4(1), 8, virtio), on(ext4(2), 9, virtio)),
    );
    assert_eq!(
        (s.input_in_flight, s.output_in_flight),
        (in_flight, in_flight)
    );
    // A disk measured gaining less than 4x (this machine's virtio disk:
    // 1.1x to 2.6x) keeps one of each, and --queue-depth more.
    let shallow = QueueHint {
        measured: Some(Probe {
            latency_us: 36,
            scaling_percent: 229,
        }),
        ..virtio
    };
    let on_shallow = facts(on(ext4(1), 8, shallow), on(ext4(2), 8, shallow));
    let s = plan(&request(&direct, auto()), &on_shallow);
    assert_eq!((s.input_in_flight, s.output_in_flight), (two, two));
    let asked = Settings {
        queue_depth: Some(4),
        ..auto()
    };
    let s = plan(&request(&direct, asked), &on_shallow);
    assert_eq!(s.input_in_flight.map(|r| r.depth), Some(4));
    assert!(!s.one_shared_disk);
    // A measurement outweighs the kind: a disk measured serving one
    // request at a time copies in turn, and keeps nothing in flight.
    let serial = QueueHint {
        measured: Some(Probe {
            latency_us: 3000,
            scaling_percent: 105,
        }),
        ..virtio
    };
    let measured_serial = facts(on(ext4(1), 8, serial), on(ext4(2), 8, serial));
    let s = plan(&request(&["bs=1M"], auto()), &measured_serial);
    assert_eq!(s.backend, Backend::Sequential);
    assert_eq!(s.in_turn, Some(InTurn::OneDisk));
    let s = plan(&request(&direct, auto()), &measured_serial);
    assert_eq!((s.input_in_flight, s.output_in_flight), (None, None));
    // Reads faster than a seek whose rate did not grow with depth (a
    // virtio disk its host caches) still copy in turn within the disk.
    let cached_host = QueueHint {
        measured: Some(Probe {
            latency_us: 34,
            scaling_percent: 153,
        }),
        ..virtio
    };
    let s = plan(
        &request(&["bs=1M"], auto()),
        &facts(on(ext4(1), 8, cached_host), on(ext4(2), 8, cached_host)),
    );
    assert_eq!(s.in_turn, Some(InTurn::OneDisk));
    // The same-disk rule stays overridable: a backend asked for.
    let asked = Settings {
        backend: Some(BackendChoice::Threads),
        ..auto()
    };
    assert_eq!(
        plan(&request(&["bs=1M"], asked), &measured_serial).backend,
        threads(4)
    );
    // And --queue-depth keeps reads in flight on it.
    let deep = Settings {
        queue_depth: Some(8),
        ..auto()
    };
    let s = plan(&request(&direct, deep), &measured_serial);
    assert_eq!(s.input_in_flight.map(|r| r.depth), Some(8));
}

#[test]
fn records_go_in_flight_to_and_from_an_end_across_a_link() {
    let mut export = EndFacts::of_kind(Kind::NbdExport);
    export.can.requests = crate::ends::transport::Requests {
        most: 128,
        round_trip_bytes: 128 << 20,
        ..crate::ends::transport::Requests::ONE_AT_A_TIME
    };
    let null = EndFacts {
        null_device: true,
        ..stream(Kind::CharDevice)
    };
    let records = |words: &[&str], input: &EndFacts, output: &EndFacts| {
        let s = plan(
            &request(words, auto()),
            &facts(input.clone(), output.clone()),
        );
        assert_eq!(s.shaping.bulk, None, "{words:?}: GNU's records");
        (s.input_in_flight, s.output_in_flight)
    };
    let several = |in_flight: Option<InFlight>, request: usize| matches!(in_flight, Some(f) if f.depth > 1 && f.request == request);
    // From a pipe, each record is written as it came, several in flight.
    let (_, out) = records(&["bs=1M"], &stream(Kind::Pipe), &export);
    assert!(several(out, 1 << 20), "{out:?}");
    // Into the null device (a character device: records), read ahead.
    let (read, _) = records(&["bs=1M"], &export, &null);
    assert!(several(read, 1 << 20), "{read:?}");
    // Records re-blocked into another size: one write at a time.
    let (_, out) = records(&["ibs=64k", "obs=1M"], &stream(Kind::Pipe), &export);
    assert_eq!(out, None);
    // An end a round trip costs nothing (local, or its kind's default).
    let plain = EndFacts::of_kind(Kind::NbdExport);
    assert_eq!(records(&["bs=1M"], &stream(Kind::Pipe), &plain).1, None);
    assert_eq!(records(&["bs=1M"], &plain, &null).0, None);
}
