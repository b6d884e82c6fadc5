//! Deterministic test data, and the digest that tells whether a file
//! changed. Each generator keeps the exact bytes its tests were written
//! against: a changed input would change what they compare.

use std::path::Path;

/// The low byte of each step of xorshift64 from `seed`: no short period,
/// so a block at the wrong offset shows.
pub fn xorshift(seed: u64, len: usize) -> Vec<u8> {
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

/// Byte i is `i * step + i / period`, truncated: cheap to make in bulk.
pub fn ramp(len: usize, step: usize, period: usize) -> Vec<u8> {
    (0..len).map(|i| (i * step + i / period) as u8).collect()
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
