//! What the system says about itself and its devices: texts under /proc
//! and sysfs (a mount point or a cgroup's name is anyone's choice), and
//! what libblkid's tools read from a device about to be overwritten (its
//! labels and partition table are whatever the device holds), and the
//! sense data a SCSI device answers a failed command with.

use super::assert_one_line;
use crate::guard::contents;
use crate::sys::scsi::judge_read;
use crate::sys::scsi::sense::{Sense, SenseKey};
use crate::sys::{block, memory, mounts};

/// `data` is one of the kernel's texts; every parser reads it.
pub fn kernel_texts(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let plain_path = !text.contains('\\');
    for mount in mounts::parse_mountinfo(&text) {
        // Escapes are the kernel's `\ooo`: a field without one is taken
        // as it is.
        if plain_path {
            assert!(text.contains(mount.mount_point.to_string_lossy().as_ref()));
        }
    }
    for swap in mounts::parse_swaps(&text) {
        if plain_path {
            assert!(text.contains(swap.to_string_lossy().as_ref()));
        }
    }
    let (available, total) = memory::parse_meminfo(&text);
    let _ = (available, total);
    for (_, path) in memory::parse_membership(&text) {
        assert!(text.contains(path.as_str()));
    }
    if let Some(limit) = memory::parse_limit(&text) {
        assert!(limit < 1 << 62);
    }
    let _ = memory::parse_pressure(&text);
    let _ = block::DeviceNumber::parse(&text);
}

/// `data` is what `blkid -p -o export`, `partx --pairs` and `dumpe2fs -h`
/// print for a device (one text read by all three parsers): the notice
/// that names what overwriting it destroys is one line.
pub fn device_probe(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let found = contents::from_tools(&text, &text, &text);
    let notice = contents::describe(&found);
    // A label is the device's to choose, and quoted; the kinds are
    // libblkid's names, which hold no control character.
    let named_by_libblkid = ["TYPE=", "PTTYPE=", "USAGE="];
    let plain_kinds = text
        .lines()
        .filter(|line| named_by_libblkid.iter().any(|key| line.starts_with(key)))
        .all(|line| !line.chars().any(char::is_control));
    if plain_kinds {
        assert_one_line("what a device holds", &notice);
        assert!(!notice.chars().any(char::is_control), "{notice:?}");
    }
}

/// `data` is the sense data a SCSI device (or a driver, or a bridge)
/// returned with a failed command. Decoded, it is one line without a
/// control character; the logical block it names is the INFORMATION
/// field exactly where the format marks it valid (fixed format: the
/// VALID bit and four bytes present; descriptor format: an information
/// descriptor with its VALID bit, whole within the additional length),
/// as a reference reading of SPC here finds it, and the line names it;
/// a command judged on these bytes fails with one line, and names a bad
/// block only for a medium or hardware error whose sense names one.
pub fn scsi_sense(data: &[u8]) {
    let code = data.first().map(|b| b & 0x7f);
    let sense = Sense::parse(data);
    let long_enough = match code {
        Some(0x70 | 0x71) => data.len() >= 3,
        Some(0x72 | 0x73) => data.len() >= 2,
        _ => false,
    };
    assert_eq!(sense.is_some(), long_enough, "{data:02x?}");
    if let Some(sense) = sense {
        let text = sense.to_string();
        assert!(!text.is_empty());
        assert_one_line("decoded sense data", &text);
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert_eq!(sense.information, information(data), "{data:02x?}");
        match sense.information {
            Some(lba) => assert!(text.ends_with(&format!(" at LBA {lba}")), "{text}"),
            None => assert!(!text.contains(" at LBA "), "{text}"),
        }
        assert_eq!(sense.deferred, matches!(code, Some(0x71 | 0x73)));
        assert_eq!(text.starts_with("deferred "), sense.deferred);
    }
    // A CHECK CONDITION with these bytes as its sense, and the bytes as
    // the statuses of a command and the sense after them.
    let statuses = |i: usize| data.get(i).copied().unwrap_or(0);
    for (scsi, host, driver, bytes) in [
        (0x02, 0, 0x08, data),
        (
            statuses(0),
            u16::from(statuses(1) & 0x1f),
            u16::from(statuses(2)),
            data.get(3..).unwrap_or(&[]),
        ),
    ] {
        let Err((error, _)) = judge_read(scsi, host, driver, bytes) else {
            continue;
        };
        assert_one_line("a failed command's cause", &error.cause);
        assert!(
            !error.cause.chars().any(char::is_control),
            "{:?}",
            error.cause
        );
        if let Some(block) = error.bad_block {
            let sense = Sense::parse(bytes).expect("a block named by sense data");
            assert!(matches!(
                sense.key,
                SenseKey::MediumError | SenseKey::HardwareError
            ));
            assert_eq!(Some(block), sense.information);
        }
    }
}

/// The INFORMATION field of sense data where SPC-5 marks it valid, read
/// independently of the decoder: fixed format (70h, 71h) holds it in
/// bytes 3-6 under the VALID bit of byte 0; descriptor format (72h, 73h)
/// in an information descriptor (type 0, additional length 0Ah, VALID in
/// its first byte), the last such descriptor counting, among the
/// descriptors that lie whole within the additional length.
fn information(data: &[u8]) -> Option<u64> {
    match data.first()? & 0x7f {
        0x70 | 0x71 => {
            if data[0] & 0x80 == 0 || data.len() < 7 {
                return None;
            }
            Some(u64::from(u32::from_be_bytes([
                data[3], data[4], data[5], data[6],
            ])))
        }
        0x72 | 0x73 => {
            let additional = data.get(7).map_or(0, |&n| usize::from(n));
            let end = data.len().min(8 + additional);
            let mut at = 8;
            let mut found = None;
            while at + 2 <= end {
                let (kind, len) = (data[at], usize::from(data[at + 1]));
                if at + 2 + len > end {
                    break;
                }
                if kind == 0 && len >= 10 && data[at + 2] & 0x80 != 0 {
                    let field: [u8; 8] = data[at + 4..at + 12].try_into().expect("eight bytes");
                    found = Some(u64::from_be_bytes(field));
                }
                at += 2 + len;
            }
            found
        }
        _ => None,
    }
}
