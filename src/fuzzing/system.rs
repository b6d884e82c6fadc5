//! What the system says about itself and its devices: texts under /proc
//! and sysfs (a mount point or a cgroup's name is anyone's choice), and
//! what libblkid's tools read from a device about to be overwritten (its
//! labels and partition table are whatever the device holds).

use super::assert_one_line;
use crate::guard::contents;
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
