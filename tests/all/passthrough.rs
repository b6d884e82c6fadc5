//! Generic-node ends in an emulated machine (`rigs::guest`): a virtio-scsi
//! disk through its SCSI generic nodes (/dev/sg0, /dev/bsg/0:0:0:0), a
//! scsi_debug disk with injected medium errors (/dev/sg1), and an NVMe
//! namespace through its generic node (/dev/ng0n1).
//!
//! The oracles run in the same guest: GNU dd on the block device of the
//! same disk (the bytes, and the statistics for the same operands), and
//! the SCSI and NVMe tools that speak to the passthrough node themselves
//! (sg_dd, sgp_dd, ddpt, fio's io_uring_cmd engine, GNU ddrescue on the
//! block device for the bad blocks). What ddx writes is checked again
//! here, in the disk image, once the guest is off.
//!
//! `ddx bench` measures each disk through its generic node first: its
//! figures at each depth, by the node's engine, and what it wrote read
//! back through the block device (each request starts with its own
//! offset); then the disk's first MiB is put back as it was for the
//! copies.
//!
//! Each group boots one guest and runs its cases in one script: a boot
//! costs seconds under TCG.

use std::time::Duration;

use crate::rigs::cmd::DDX;
use crate::rigs::fixture::statistics;
use crate::rigs::guest::{Guest, Machine, Run};
use crate::rigs::or_skip;

const MIB: usize = 1 << 20;
/// A guest that takes longer than this has hung.
const LIMIT: Duration = Duration::from_secs(240);

/// Bytes that differ at every offset that matters (no two 512-byte
/// blocks alike), seeded so that each disk has its own.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(seed);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(bytes))
}

/// The script's preamble: the tools on PATH, this build's ddx, and `r`,
/// which runs a case (its stderr and status into the share), and `h`,
/// which records a file's SHA-256 there.
fn preamble() -> String {
    format!(
        "export PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C
DDX={DDX}
r() {{ n=$1; shift; \"$@\" 2>/tmp/out/$n.err; echo $? >/tmp/out/$n.rc; }}
h() {{ sha256sum \"$1\" | cut -c1-64 >/tmp/out/$2.sha; }}
# A device node appears when udev would have made it: wait for it.
wait_for() {{ i=0; while [ ! -e \"$1\" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; }}
"
    )
}

fn rc(run: &Run, case: &str) -> i32 {
    run.text(&format!("{case}.rc")).trim().parse().unwrap()
}

fn err(run: &Run, case: &str) -> String {
    run.text(&format!("{case}.err"))
}

fn sha(run: &Run, case: &str) -> String {
    run.text(&format!("{case}.sha")).trim().to_owned()
}

/// ddx's case and GNU dd's agree: status, statistics, output bytes.
fn same_as_gnu(run: &Run, ddx: &str, gnu: &str) {
    assert_eq!(
        (rc(run, ddx), statistics(&err(run, ddx))),
        (rc(run, gnu), statistics(&err(run, gnu))),
        "{ddx} against GNU dd's {gnu}:\n{}\n---\n{}",
        err(run, ddx),
        err(run, gnu)
    );
}

/// The script's lines that measure `node` (the disk of `disk`) with
/// `ddx bench`: the random depths first (case NAME_qd), then the
/// sequential tests (case NAME), whose writes are then the last, read back
/// through `disk` into NAME.bin; then the disk's first MiB is put back
/// (head.bin).
fn bench_lines(name: &str, node: &str, disk: &str) -> String {
    format!(
        "$DDX bench {node} --destructive --size=1M --runs=1 --time-per-run=0.2 \
           --tests=qd-sweep --json >/tmp/out/{name}_qd.json 2>/tmp/out/{name}_qd.err
echo $? >/tmp/out/{name}_qd.rc
$DDX bench {node} --destructive --size=1M --runs=1 \
           --tests=seq-read,seq-write --json >/tmp/out/{name}.json 2>/tmp/out/{name}.err
echo $? >/tmp/out/{name}.rc
dd if={disk} of=/tmp/out/{name}.bin bs=64k count=16 iflag=direct 2>/dev/null
dd if=/tmp/out/head.bin of={disk} bs=64k oflag=direct conv=fsync 2>/dev/null
r {name}_ro $DDX bench {node} --size=1M --tests=seq-write
"
    )
}

/// `ddx bench` on a generic node: the sequential figures one at a time
/// and 8 in flight, each write mode, the random depths the node's queue
/// keeps (`beyond`: the ones it cannot, skipped with the reason), all by
/// `engine`; the summary's fio options name fio's engine for the node
/// (`fio`); where ddx maps the driver's buffers (`mapped`: an sg node),
/// the summary's cells measured again fio's way, the driver copying each
/// buffer, and each cell carrying that figure with what differs; and
/// every request it wrote landed at its place on the disk, whose first
/// MiB held `before`.
fn check_bench(
    run: &Run,
    name: &str,
    (kind, engine, fio, mapped): (&str, &str, &str, bool),
    (disk, beyond): (&str, &[u64]),
    before: &[u8],
) {
    let json = |case: &str| -> serde_json::Value {
        assert_eq!(rc(run, case), 0, "{}", err(run, case));
        let text = run.text(&format!("{case}.json"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{case}: {e}"))
    };
    let (report, random) = (json(name), json(&format!("{name}_qd")));
    assert_eq!(report["target"]["kind"], kind, "{report:#}");
    assert_eq!(random["target"]["kind"], kind, "{random:#}");
    // The guest's CPU is QEMU's TCG: the report says no figure there is
    // the device's own, and why.
    for r in [&report, &random] {
        let why = r["summary"]["not_the_device"].as_str().unwrap_or_default();
        assert!(
            why.contains("QEMU's emulation (TCG") && why.contains("--gtod_reduce=1"),
            "{name}: {:#}",
            r["summary"]
        );
    }
    let results: Vec<&serde_json::Value> = [&report, &random]
        .iter()
        .flat_map(|r| r["results"].as_array().unwrap())
        .collect();
    let find = |test: &str, mode: &str, op: &str, qd: u64| {
        results.iter().find(|r| {
            r["test"] == test && r["mode"] == mode && r["op"] == op && r["queue_depth"] == qd
        })
    };
    let mut request = 0;
    for (test, mode, op, qd) in [
        ("seq-read", "passthrough", "read", 1),
        ("seq-read", "passthrough", "read", 8),
        ("seq-write", "passthrough", "write", 1),
        ("seq-write", "passthrough", "write", 8),
        ("seq-write", "passthrough+flush", "write", 1),
        ("seq-write", "passthrough+fua", "write", 1),
    ] {
        let r = find(test, mode, op, qd)
            .unwrap_or_else(|| panic!("{name}: no {test} {mode} at depth {qd}: {report:#}"));
        assert_eq!(r["engine"], engine, "{r:#}");
        assert!(
            r["throughput_bytes_per_sec"].as_f64().unwrap() > 0.0,
            "{r:#}"
        );
        request = r["block_size"].as_u64().unwrap();
    }
    for op in ["read", "write"] {
        for qd in [1, 4, 16, 32, 64] {
            match find("qd-sweep", "passthrough", op, qd) {
                Some(r) => {
                    assert!(!beyond.contains(&qd), "{name}: {op} at depth {qd} measured");
                    assert_eq!(r["engine"], engine);
                    assert!(r["iops"].as_f64().unwrap() > 0.0, "{r:#}");
                }
                None => {
                    assert!(beyond.contains(&qd), "{name}: no {op} at depth {qd}");
                    let skipped = random["skipped"].as_array().unwrap();
                    assert!(
                        skipped.iter().any(|s| s["test"] == "qd-sweep"
                            && s["op"] == op
                            && s["queue_depth"] == qd
                            && s["reason"].as_str().unwrap().contains("commands in flight")),
                        "{name}: depth {qd} skipped without its reason: {random:#}"
                    );
                }
            }
        }
    }
    for (summary, row) in [(&report, 0), (&random, 2)] {
        let cell = &summary["summary"]["rows"][row]["read"];
        if cell["iops"].is_null() {
            continue;
        }
        assert_eq!(cell["engine"], engine, "{cell:#}");
        assert!(
            cell["fio"].as_str().unwrap().contains(fio),
            "{name}: {}",
            cell["fio"]
        );
    }
    for (summary, row, test, op, qd) in [
        (&report, 0, "seq-read", "read", 8),
        (&report, 0, "seq-write", "write", 8),
        (&report, 1, "seq-read", "read", 1),
        (&report, 1, "seq-write", "write", 1),
        (&random, 3, "qd-sweep", "read", 1),
        (&random, 3, "qd-sweep", "write", 1),
    ] {
        let cell = &summary["summary"]["rows"][row][op];
        let copied = find(test, "passthrough+copied", op, qd);
        if !mapped {
            assert!(copied.is_none(), "{name}: {test} {op} copied: {copied:#?}");
            assert!(cell["fio_way"].is_null(), "{name}: {cell:#}");
            continue;
        }
        let copied =
            copied.unwrap_or_else(|| panic!("{name}: no {test} {op} at depth {qd} made fio's way"));
        assert_eq!(copied["engine"], engine, "{copied:#}");
        assert!(
            copied["note"]
                .as_str()
                .unwrap()
                .contains("which the sg driver copies"),
            "{copied:#}"
        );
        let way = &cell["fio_way"];
        assert_eq!(way["mode"], "passthrough+copied", "{name}: {cell:#}");
        let key = match test {
            "qd-sweep" => "iops",
            _ => "throughput_bytes_per_sec",
        };
        assert_eq!(way[key], copied[key], "{name}: {cell:#}");
        assert!(
            way["differs"]
                .as_str()
                .unwrap()
                .contains("fio's sg engine cannot map them"),
            "{way:#}"
        );
        if test != "qd-sweep" {
            let own = find(test, "passthrough", op, qd).unwrap();
            assert!(
                own["note"]
                    .as_str()
                    .unwrap()
                    .contains("reserve buffers mapped into ddx"),
                "{own:#}"
            );
        }
    }
    let notes = report["notes"].to_string();
    assert!(
        notes.contains(&format!("the disk of /dev/{disk} through its ")),
        "{notes}"
    );
    // What it wrote last, through the block device: the writes with 8
    // in flight, each request the bytes of the command slot it went from
    // (the bench fills its slots with its own xorshift64* bytes, slot
    // after slot) stamped with its offset, whole at its place.
    let written = run.file(&format!("{name}.bin"));
    assert_eq!(written.len(), MIB);
    let request = request as usize;
    assert!(request > 0 && MIB % request == 0, "{request}");
    let slots = slot_bytes(8, request);
    for at in (0..MIB).step_by(request) {
        let got = &written[at..at + request];
        assert_eq!(
            got[..8],
            (at as u64).to_le_bytes(),
            "{name}: the request at offset {at} is not on the disk"
        );
        assert!(
            slots.iter().any(|slot| slot[8..] == got[8..]),
            "{name}: the request at offset {at} is not a command slot's bytes"
        );
    }
    assert_ne!(written, before);
    // Without --destructive nothing is written, and it says why.
    assert_eq!(rc(run, &format!("{name}_ro")), 1);
    assert!(
        err(run, &format!("{name}_ro")).contains("only written with --destructive"),
        "{}",
        err(run, &format!("{name}_ro"))
    );
}

/// The bytes `ddx bench` fills `slots` command slots of `len` bytes
/// with before writing: xorshift64* words from its seed, slot after slot.
fn slot_bytes(slots: usize, len: usize) -> Vec<Vec<u8>> {
    let mut state: u64 = 0x005e_eddd;
    let mut word = || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes()
    };
    (0..slots)
        .map(|_| (0..len / 8).flat_map(|_| word()).collect())
        .collect()
}

fn boot(machine: Machine, seed: u8) -> Option<Guest> {
    or_skip(Guest::new(machine, |_, size| pattern(size as usize, seed)))
}

fn run(guest: &Guest, script: &str) -> Run {
    let run = guest
        .run(&format!("{}{script}", preamble()), LIMIT)
        .unwrap_or_else(|why| panic!("{why}"));
    assert_eq!(run.status, 0, "the script failed:\n{}", run.log);
    run
}

/// One guest: reads and writes through /dev/sg0 and /dev/bsg/0:0:0:0
/// against GNU dd on /dev/sda and the sg3-utils and ddpt copies, the
/// guard through the sg node, and a scsi_debug disk with three bad
/// blocks read with conv=noerror,sync and --rescue against GNU dd and
/// GNU ddrescue on its /dev/sdb.
#[test]
fn scsi_generic_copies_as_dd_does_on_the_block_device() {
    let disk = 4 * MIB;
    let Some(guest) = boot(
        Machine {
            scsi_disk: Some(disk as u64),
            ..Machine::default()
        },
        1,
    ) else {
        return;
    };
    let original = pattern(disk, 1);
    let source = pattern(MIB, 7);
    guest.share_file("src.bin", &source);
    let bad = pattern(disk, 9);
    guest.share_file("bad.bin", &bad);
    guest.share_file("head.bin", &original[..MIB]);
    let script = bench_lines("bench_sg", "/dev/sg0", "/dev/sda")
        + r#"
# The bench's tests through the copy's end alone, read only.
r bench_end $DDX bench /dev/sg0 --size=1M --runs=1 --tests=latency,zones --latency-count=20 --zones=2 --json
r sg_read $DDX if=/dev/sg0 of=/tmp/a bs=64k --verbose; h /tmp/a sg_read
r sd_read dd if=/dev/sda of=/tmp/b bs=64k; h /tmp/b sd_read
r sg_odd $DDX if=/dev/sg0 of=/tmp/a bs=1000 skip=3 count=700; h /tmp/a sg_odd
r sd_odd dd if=/dev/sda of=/tmp/b bs=1000 skip=3 count=700; h /tmp/b sd_odd
r sg_tail $DDX if=/dev/sg0 of=/tmp/a bs=3000 skip=1397; h /tmp/a sg_tail
r sd_tail dd if=/dev/sda of=/tmp/b bs=3000 skip=1397; h /tmp/b sd_tail
r sg_past $DDX if=/dev/sg0 of=/tmp/a bs=1M skip=5
r sd_past dd if=/dev/sda of=/tmp/b bs=1M skip=5
r bsg_read $DDX if=/dev/bsg/0:0:0:0 of=/tmp/a bs=64k --verbose; h /tmp/a bsg_read
r sg_dd sg_dd if=/dev/sg0 of=/tmp/c bs=512 bpt=128; h /tmp/c sg_dd
r sgp_dd sgp_dd if=/dev/sg0 of=/tmp/c bs=512 bpt=128 thr=4; h /tmp/c sgp_dd
r ddpt ddpt if=/dev/sg0 of=/tmp/c bs=512; h /tmp/c ddpt

# Writes: ddx first, then GNU dd the same bytes at the same place (for
# its statistics; the disk is unchanged by it), read back past the cache.
r sg_write $DDX if=/tmp/out/src.bin of=/dev/sg0 bs=64k seek=8 conv=fsync
dd if=/dev/sda of=/tmp/a bs=64k skip=8 count=16 iflag=direct 2>/dev/null; h /tmp/a sg_write
r sd_write dd if=/tmp/out/src.bin of=/dev/sda bs=64k seek=8 conv=fsync
r sg_rmw $DDX if=/tmp/out/src.bin of=/dev/sg0 bs=1000 seek=3001 skip=7 count=333
r sd_rmw dd if=/tmp/out/src.bin of=/dev/sda bs=1000 seek=3001 skip=7 count=333 conv=fsync
r sg_fua $DDX if=/tmp/out/src.bin of=/dev/sg0 bs=128k seek=24 count=4 --fua --verbose
r fua_sd $DDX if=/dev/zero of=/dev/sda count=1 --fua
r verify_sg $DDX if=/tmp/out/src.bin of=/dev/sg0 bs=64k seek=8 --verify
r sg_full $DDX if=/dev/zero of=/dev/sg0 bs=1M seek=3 count=2
r sd_full dd if=/dev/zero of=/dev/sda bs=1M seek=3 count=2

# The guard looks behind the sg node at its disk.
mkswap /dev/sda >/dev/null 2>&1 && swapon /dev/sda
r guard $DDX if=/dev/zero of=/dev/sg0 count=1
r guard_sd dd if=/dev/sda of=/dev/null count=1
r bench_guard $DDX bench /dev/sg0 --destructive --size=1M --tests=seq-write
swapoff /dev/sda

# A disk with three bad blocks from LBA 4660 on.
insmod /tmp/modules/scsi_debug.ko dev_size_mb=4 opts=2 medium_error_start=4660 medium_error_count=3 delay=0 ndelay=0
wait_for /dev/sdb; wait_for /dev/sg1
dd if=/tmp/out/bad.bin of=/dev/sdb bs=64k oflag=direct 2>/dev/null
r bad_noerror $DDX if=/dev/sg1 of=/tmp/a bs=4096 conv=noerror,sync; h /tmp/a bad_noerror
r bad_noerror_sd dd if=/dev/sdb of=/tmp/b bs=4096 conv=noerror,sync iflag=direct; h /tmp/b bad_noerror_sd
r bad_stop $DDX if=/dev/sg1 of=/tmp/a bs=64k
r bad_stop_sd dd if=/dev/sdb of=/tmp/b bs=64k iflag=direct
r bad_rescue $DDX --rescue if=/dev/sg1 of=/tmp/a bs=64k --map=/tmp/out/ddx.map; h /tmp/a bad_rescue
r ddrescue ddrescue -d -b 512 -q /dev/sdb /tmp/b /tmp/out/gnu.map; h /tmp/b ddrescue
"#;
    let run = run(&guest, &script);
    check_bench(
        &run,
        "bench_sg",
        (
            "SCSI generic node",
            "sg",
            "--ioengine=sg --filename=/dev/sg0",
            true,
        ),
        ("sda", &[32, 64]),
        &original[..MIB],
    );
    assert_eq!(rc(&run, "bench_end"), 0, "{}", err(&run, "bench_end"));

    // Reads: the disk's bytes, GNU's statistics, the passthrough named.
    let whole = sha256(&original);
    for case in ["sg_read", "sd_read", "bsg_read", "sg_dd", "sgp_dd", "ddpt"] {
        assert_eq!(rc(&run, case), 0, "{case}: {}", err(&run, case));
        assert_eq!(sha(&run, case), whole, "{case} read other bytes");
    }
    same_as_gnu(&run, "sg_read", "sd_read");
    same_as_gnu(&run, "bsg_read", "sd_read");
    assert!(
        err(&run, "sg_read").contains("input: SCSI generic (the disk of /dev/sda): READ(10)"),
        "{}",
        err(&run, "sg_read")
    );
    // The data in the driver's reserve buffers, mapped: no copy by the
    // driver, none into fresh kernel pages.
    assert!(
        err(&run, "sg_read").contains("in its mapped reserve buffers"),
        "{}",
        err(&run, "sg_read")
    );
    assert!(err(&run, "bsg_read").contains("SCSI generic (bsg)"));
    assert_eq!(sha(&run, "sg_odd"), sha256(&original[3000..3000 + 700_000]));
    same_as_gnu(&run, "sg_odd", "sd_odd");
    assert_eq!(sha(&run, "sg_tail"), sha256(&original[1397 * 3000..]));
    same_as_gnu(&run, "sg_tail", "sd_tail");
    same_as_gnu(&run, "sg_past", "sd_past");
    assert_eq!(rc(&run, "sg_past"), 1);

    // Writes: in place on the disk, as GNU dd's statistics say.
    assert_eq!(sha(&run, "sg_write"), sha256(&source));
    same_as_gnu(&run, "sg_write", "sd_write");
    same_as_gnu(&run, "sg_rmw", "sd_rmw");
    assert_eq!(rc(&run, "sg_fua"), 0, "{}", err(&run, "sg_fua"));
    assert!(err(&run, "sg_fua").contains("writes with FUA"));
    // Refused before anything is written: --fua onto the block device.
    assert_eq!(rc(&run, "fua_sd"), 1);
    assert!(
        err(&run, "fua_sd")
            .contains("--fua sends each write with force unit access: of='/dev/sda'"),
        "{}",
        err(&run, "fua_sd")
    );
    // --verify onto the generic node reads the disk back with its own
    // commands (the same bytes as sg_write: the disk is unchanged).
    assert_eq!(rc(&run, "verify_sg"), 0, "{}", err(&run, "verify_sg"));
    assert!(
        err(&run, "verify_sg").contains("verify: 1048576 bytes of '/dev/sg0' read back, identical"),
        "{}",
        err(&run, "verify_sg")
    );
    same_as_gnu(&run, "sg_full", "sd_full");
    assert_eq!(rc(&run, "sg_full"), 1, "{}", err(&run, "sg_full"));
    let image = std::fs::read(&guest.scsi.as_ref().unwrap().image).unwrap();
    let mut expected = original.clone();
    expected[8 * 65536..8 * 65536 + MIB].copy_from_slice(&source);
    expected[3001 * 1000..3001 * 1000 + 333_000].copy_from_slice(&source[7000..7000 + 333_000]);
    expected[24 * 131072..28 * 131072].copy_from_slice(&source[..4 * 131072]);
    expected[3 * MIB..].fill(0);
    // mkswap wrote its first page and label.
    assert!(
        image[4096..] == expected[4096..],
        "the disk after the writes differs from the first byte at {:?}",
        image
            .iter()
            .zip(&expected)
            .skip(4096)
            .position(|(a, b)| a != b)
            .map(|p| p + 4096)
    );

    // The guard: the swap is on /dev/sda, refused through /dev/sg0.
    assert_eq!(rc(&run, "guard"), 1);
    let refusal = err(&run, "guard");
    assert!(
        refusal.contains("refusing to write '/dev/sg0'")
            && refusal.contains("SCSI generic node of /dev/sda")
            && refusal.contains("active swap"),
        "{refusal}"
    );
    assert_eq!(rc(&run, "bench_guard"), 1);
    let refusal = err(&run, "bench_guard");
    assert!(
        refusal.contains("SCSI generic node of /dev/sda") && refusal.contains("active swap"),
        "{refusal}"
    );

    // Bad blocks: noerror,sync pads the same records as GNU dd does on
    // the block device, and names the block.
    same_as_gnu(&run, "bad_noerror", "bad_noerror_sd");
    assert_eq!(sha(&run, "bad_noerror"), sha(&run, "bad_noerror_sd"));
    let mut padded = bad.clone();
    padded[4656 * 512..4664 * 512].fill(0);
    assert_eq!(sha(&run, "bad_noerror"), sha256(&padded));
    assert!(
        err(&run, "bad_noerror").contains("medium error, unrecovered read error at LBA 4660"),
        "{}",
        err(&run, "bad_noerror")
    );
    same_as_gnu(&run, "bad_stop", "bad_stop_sd");
    assert_eq!(rc(&run, "bad_stop"), 1);

    // --rescue: exactly the bad blocks, as GNU ddrescue finds them.
    let mut rescued = bad.clone();
    rescued[4660 * 512..4663 * 512].fill(0);
    assert_eq!(
        sha(&run, "bad_rescue"),
        sha256(&rescued),
        "{}",
        err(&run, "bad_rescue")
    );
    assert_eq!(sha(&run, "ddrescue"), sha256(&rescued));
    let bad_ranges = |map: &str| -> Vec<(u64, u64)> {
        map.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
                (f.len() == 3 && f[2] == "-").then(|| (hex(f[0]).unwrap(), hex(f[1]).unwrap()))
            })
            .collect()
    };
    let ddx_bad = bad_ranges(&run.text("ddx.map"));
    assert_eq!(ddx_bad, vec![(4660 * 512, 3 * 512)]);
    assert_eq!(
        ddx_bad,
        bad_ranges(&run.text("gnu.map")),
        "GNU ddrescue's map"
    );
    let report = err(&run, "bad_rescue");
    assert!(
        report.contains("bad range at offset 2385920, 1536 bytes")
            && report.contains("LBA 4660 to 4662"),
        "{report}"
    );
}

/// One guest: reads and writes through /dev/ng0n1 (io_uring URING_CMD)
/// against GNU dd on /dev/nvme0n1 and fio's io_uring_cmd engine, and the
/// guard through the ng node.
#[test]
fn nvme_generic_copies_as_dd_does_on_the_block_device() {
    let disk = 4 * MIB;
    let Some(guest) = boot(
        Machine {
            nvme_disk: Some(disk as u64),
            ..Machine::default()
        },
        2,
    ) else {
        return;
    };
    let original = pattern(disk, 2);
    let source = pattern(MIB, 8);
    guest.share_file("src.bin", &source);
    guest.share_file("head.bin", &original[..MIB]);
    let script = bench_lines("bench_ng", "/dev/ng0n1", "/dev/nvme0n1")
        + r#"
r ng_read $DDX if=/dev/ng0n1 of=/tmp/a bs=64k --verbose; h /tmp/a ng_read
r nvme_read dd if=/dev/nvme0n1 of=/tmp/b bs=64k; h /tmp/b nvme_read
r ng_odd $DDX if=/dev/ng0n1 of=/tmp/a bs=1000 skip=3 count=700 --queue-depth=2; h /tmp/a ng_odd
r nvme_odd dd if=/dev/nvme0n1 of=/tmp/b bs=1000 skip=3 count=700; h /tmp/b nvme_odd
r ng_write $DDX if=/tmp/out/src.bin of=/dev/ng0n1 bs=64k seek=8 conv=fsync
dd if=/dev/nvme0n1 of=/tmp/a bs=64k skip=8 count=16 iflag=direct 2>/dev/null; h /tmp/a ng_write
r nvme_write dd if=/tmp/out/src.bin of=/dev/nvme0n1 bs=64k seek=8 conv=fsync
r ng_rmw $DDX if=/tmp/out/src.bin of=/dev/ng0n1 bs=1000 seek=3001 skip=7 count=333 --fua --verbose
r nvme_rmw dd if=/tmp/out/src.bin of=/dev/nvme0n1 bs=1000 seek=3001 skip=7 count=333 conv=fsync
# fio writes a pattern through the ng node; ddx reads it back.
r fio fio --name=w --ioengine=io_uring_cmd --cmd_type=nvme --filename=/dev/ng0n1 --rw=write --bs=64k --offset=3M --size=512k --iodepth=4 --buffer_pattern=0x5a --output=/dev/null
r ng_fio $DDX if=/dev/ng0n1 of=/tmp/a bs=64k skip=48 count=8; h /tmp/a ng_fio
mkswap /dev/nvme0n1 >/dev/null 2>&1 && swapon /dev/nvme0n1
r guard $DDX if=/dev/zero of=/dev/ng0n1 count=1
swapoff /dev/nvme0n1
"#;
    let run = run(&guest, &script);
    check_bench(
        &run,
        "bench_ng",
        (
            "NVMe generic node",
            "io_uring_cmd",
            "--ioengine=io_uring_cmd --cmd_type=nvme --filename=/dev/ng0n1",
            false,
        ),
        ("nvme0n1", &[]),
        &original[..MIB],
    );
    let whole = sha256(&original);
    for case in ["ng_read", "nvme_read"] {
        assert_eq!(rc(&run, case), 0, "{case}: {}", err(&run, case));
        assert_eq!(sha(&run, case), whole, "{case} read other bytes");
    }
    same_as_gnu(&run, "ng_read", "nvme_read");
    assert!(
        err(&run, "ng_read").contains("input: NVMe generic (the disk of /dev/nvme0n1): NVMe Read"),
        "{}",
        err(&run, "ng_read")
    );
    assert_eq!(sha(&run, "ng_odd"), sha256(&original[3000..3000 + 700_000]));
    same_as_gnu(&run, "ng_odd", "nvme_odd");
    assert_eq!(sha(&run, "ng_write"), sha256(&source));
    same_as_gnu(&run, "ng_write", "nvme_write");
    same_as_gnu(&run, "ng_rmw", "nvme_rmw");
    assert!(err(&run, "ng_rmw").contains("writes with FUA"));
    assert_eq!(rc(&run, "fio"), 0, "{}", err(&run, "fio"));
    assert_eq!(sha(&run, "ng_fio"), sha256(&vec![0x5a; 512 * 1024]));
    let image = std::fs::read(&guest.nvme.as_ref().unwrap().image).unwrap();
    let mut expected = original.clone();
    expected[8 * 65536..8 * 65536 + MIB].copy_from_slice(&source);
    expected[3001 * 1000..3001 * 1000 + 333_000].copy_from_slice(&source[7000..7000 + 333_000]);
    expected[3 * MIB..3 * MIB + 512 * 1024].fill(0x5a);
    assert!(
        image[4096..] == expected[4096..],
        "the disk after the writes"
    );
    assert_eq!(rc(&run, "guard"), 1);
    let refusal = err(&run, "guard");
    assert!(
        refusal.contains("NVMe generic node of /dev/nvme0n1") && refusal.contains("active swap"),
        "{refusal}"
    );
}
