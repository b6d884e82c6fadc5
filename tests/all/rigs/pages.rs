//! The page cache as the tests see it: everything written back (sync), a
//! file's pages dropped (GNU dd's documented idiom), and the share of a
//! file that is cached (fincore, util-linux).

use std::path::Path;
use std::process::Command;

use super::cmd::{gnu_dd, operand};

/// sync(1): every dirty page written back.
pub fn sync() {
    assert!(Command::new("sync").status().unwrap().success());
}

/// Write back and drop a file's pages.
pub fn drop_from_cache(path: &Path) {
    sync();
    let out = gnu_dd()
        .args([
            &operand("if", path),
            "iflag=nocache",
            "count=0",
            "status=none",
        ])
        .status();
    assert!(out.unwrap().success());
    assert!(cached_fraction(path) < 0.01, "could not evict {path:?}");
}

/// The fraction of a file's pages in the page cache.
pub fn cached_fraction(path: &Path) -> f64 {
    let out = Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES,SIZE"])
        .arg(path)
        .output()
        .expect("fincore (util-linux)");
    let text = String::from_utf8_lossy(&out.stdout);
    let numbers: Vec<f64> = text
        .split_whitespace()
        .map(|n| n.parse().expect("fincore prints bytes"))
        .collect();
    assert_eq!(numbers.len(), 2, "fincore said {text:?}");
    numbers[0] / numbers[1].max(1.0)
}
