//! What the filesystem under a file can do that matters to a copy: whether
//! copy_file_range(2) can do better than copying the data itself (share
//! extents, copy on the server), and whether the page cache is the storage
//! (tmpfs), where dropping pages behind a copy would mean nothing.
//!
//! Read from statfs(2)'s f_type, the one portable-on-Linux answer; the
//! magic numbers are those of linux/magic.h.

use std::os::fd::BorrowedFd;

/// How a filesystem stores a file's data, as far as a copy cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// Local blocks, no shared extents: a kernel copy (copy_file_range)
    /// reads and writes every byte through the page cache, as ddx would,
    /// but on one CPU.
    LocalBlocks,
    /// The page cache is the storage (tmpfs, ramfs).
    Memory,
    /// Anything else: extents may be shared (XFS, Btrfs, bcachefs, OCFS2),
    /// the copy may happen on a server (NFS, SMB, Ceph), or ddx does not
    /// know the filesystem; the kernel's copy is given the chance.
    Other,
}

const EXT4_SUPER_MAGIC: i64 = 0xEF53; // ext2, ext3 and ext4 alike
const F2FS_SUPER_MAGIC: i64 = 0xF2F5_2010;
const MSDOS_SUPER_MAGIC: i64 = 0x4d44; // vfat
const EXFAT_SUPER_MAGIC: i64 = 0x2011_BAB0;
const TMPFS_MAGIC: i64 = 0x0102_1994;
const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// The storage under an open file; Other when statfs fails.
pub fn storage_of(fd: BorrowedFd<'_>) -> Storage {
    let Ok(stat) = rustix::fs::fstatfs(fd) else {
        return Storage::Other;
    };
    // f_type's C type differs between architectures; compare as i64 after
    // truncating to 32 bits (the magic numbers are 32-bit values).
    #[allow(clippy::unnecessary_cast)]
    let magic = (stat.f_type as i64) & 0xffff_ffff;
    match magic {
        EXT4_SUPER_MAGIC | F2FS_SUPER_MAGIC | MSDOS_SUPER_MAGIC | EXFAT_SUPER_MAGIC => {
            Storage::LocalBlocks
        }
        TMPFS_MAGIC | RAMFS_MAGIC => Storage::Memory,
        _ => Storage::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// coreutils' `stat -f` names the filesystem: the oracle.
    fn named_by_stat(path: &str) -> Option<String> {
        let out = std::process::Command::new("stat")
            .args(["-f", "-c", "%T", path])
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    #[test]
    fn agrees_with_stat_on_the_filesystems_at_hand() {
        let here = env!("CARGO_MANIFEST_DIR");
        let temp = std::env::temp_dir();
        let mut checked = 0;
        for path in [
            "/",
            "/dev/shm",
            "/proc",
            "/sys",
            here,
            temp.to_str().unwrap(),
        ] {
            let (Some(name), Ok(dir)) = (named_by_stat(path), std::fs::File::open(path)) else {
                continue;
            };
            let expected = match name.as_str() {
                "ext2/ext3" | "f2fs" | "msdos" | "exfat" => Storage::LocalBlocks,
                "tmpfs" | "ramfs" => Storage::Memory,
                _ => Storage::Other,
            };
            assert_eq!(storage_of(dir.as_fd()), expected, "{path} ({name})");
            checked += 1;
        }
        assert!(checked >= 3, "stat -f could not name the filesystems");
    }
}
