//! Passthrough ends in an emulated machine (`rigs::guest`): a virtio-scsi
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
    let run = run(
        &guest,
        r#"
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
r verify_sg $DDX if=/dev/zero of=/dev/sg0 count=1 --verify
r sg_full $DDX if=/dev/zero of=/dev/sg0 bs=1M seek=3 count=2
r sd_full dd if=/dev/zero of=/dev/sda bs=1M seek=3 count=2

# The guard looks behind the sg node at its disk.
mkswap /dev/sda >/dev/null 2>&1 && swapon /dev/sda
r guard $DDX if=/dev/zero of=/dev/sg0 count=1
r guard_sd dd if=/dev/sda of=/dev/null count=1
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
"#,
    );

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
    // Refused before anything is written: --fua onto the block device,
    // --verify onto the generic node (it would read(2) the node).
    assert_eq!(rc(&run, "fua_sd"), 1);
    assert!(
        err(&run, "fua_sd")
            .contains("--fua sends each write with force unit access: of='/dev/sda'"),
        "{}",
        err(&run, "fua_sd")
    );
    assert_eq!(rc(&run, "verify_sg"), 1);
    assert!(
        err(&run, "verify_sg").contains("generic node"),
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
    let run = run(
        &guest,
        r#"
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
"#,
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
