//! Test data, and the digest that tells whether a file changed. One
//! generator for every test outside the differential suite (whose cases
//! make their own bytes from their seed, to stay replayable): the same
//! `seed` always gives the same bytes, so a failure can be rerun.

use std::path::{Path, PathBuf};

/// `len` bytes, the low byte of each step of xorshift64 from `seed` (not
/// 0, from which it stays 0): no short period, so a block at the wrong
/// offset or a repeated request shows, and no block of zeros that a
/// sparse copy could elide or a zero-filled bad sector could hide in.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    assert_ne!(seed, 0, "xorshift from 0 gives nothing but zeros");
    let mut state = seed;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// `bytes` in a file `name` in a fresh directory: (the directory, which
/// takes the file with it when dropped; the file).
pub fn file_with(name: &str, bytes: impl AsRef<[u8]>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).expect("a test file");
    (dir, path)
}

/// The SHA-256 of a file (or device), as sha256sum prints it.
pub fn sha256(path: impl AsRef<Path>) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path.as_ref())
        .output()
        .expect("sha256sum");
    assert!(out.status.success(), "sha256sum {:?}", path.as_ref());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}
