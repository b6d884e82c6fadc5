//! bs=auto: the copy is exactly GNU dd's with the block size ddx says it
//! chose, and sizes in blocks (which would mean nothing before the choice)
//! are refused before anything is touched.

use std::path::Path;

use crate::rigs::cmd::{gnu_dd, operand};
use crate::rigs::fixture::{statistics, Ddx};

fn chosen_block_size(stderr: &str) -> usize {
    let line = stderr
        .lines()
        .find(|l| l.contains("bs=auto chose"))
        .unwrap_or_else(|| panic!("no bs=auto line in {stderr}"));
    let bytes = line
        .split('(')
        .nth(1)
        .and_then(|rest| rest.split(" bytes)").next())
        .and_then(|n| n.parse().ok());
    bytes.unwrap_or_else(|| panic!("no byte count in {line}"))
}

/// ddx with bs=auto, then GNU dd with the size ddx chose: the same
/// statistics, exit status and bytes. (Not a `Compare`: GNU's operands
/// come from ddx's run.)
fn check_against_gnu(dir: &Path, input: &str, extra: &[&str]) {
    let ours = dir.join("ours");
    let theirs = dir.join("theirs");
    let out = Ddx::as_dd()
        .args([
            format!("if={input}"),
            operand("of", &ours),
            "bs=auto".into(),
        ])
        .args(extra)
        .arg("--verbose")
        .succeeds();
    let chosen = chosen_block_size(&out.stderr);
    assert!((512..=16 << 20).contains(&chosen), "chose {chosen}");
    let gnu = gnu_dd()
        .args([
            format!("if={input}"),
            operand("of", &theirs),
            format!("bs={chosen}"),
        ])
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), gnu.status.code());
    assert_eq!(
        statistics(&out.stderr),
        statistics(&String::from_utf8_lossy(&gnu.stderr)),
        "bs={chosen} {extra:?}"
    );
    assert!(std::fs::read(&ours).unwrap() == std::fs::read(&theirs).unwrap());
}

#[test]
fn a_probed_file_copies_as_gnu_dd_with_the_chosen_size() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    // Large enough to be probed (about 36 MiB of probe reads).
    let data = crate::rigs::bytes::pattern(48, (48 << 20) + 12345);
    std::fs::write(&input, &data).unwrap();
    let input = input.display().to_string();
    check_against_gnu(dir.path(), &input, &[]);
    check_against_gnu(dir.path(), &input, &["skip=1000B", "count=5000001B"]);
    check_against_gnu(
        dir.path(),
        &input,
        &[
            "iflag=skip_bytes,count_bytes",
            "skip=77",
            "count=3000000",
            "seek=9B",
        ],
    );
}

#[test]
fn an_unprobed_input_gets_the_default_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    check_against_gnu(dir.path(), "/dev/zero", &["count=1000000B"]);
    let out = Ddx::as_dd()
        .args([
            "if=/dev/zero",
            "of=/dev/null",
            "bs=auto",
            "count=1MB",
            "--verbose",
        ])
        .run();
    assert!(out.stderr.contains("not probed"), "{}", out.stderr);
    assert_eq!(chosen_block_size(&out.stderr), 128 * 1024);
}

#[test]
fn sizes_in_blocks_are_refused_before_anything_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("never");
    for operand in ["count=10", "skip=2", "seek=3"] {
        let key = operand.split('=').next().unwrap();
        let text = Ddx::as_dd()
            .args(["if=/dev/zero", "bs=auto", operand])
            .arg(format!("of={}", output.display()))
            .fails_with(&format!("bs=auto needs {key}= in bytes"))
            .stderr;
        assert_eq!(text.lines().count(), 1, "one line: {text}");
        assert!(!output.exists(), "{operand} created the output");
    }
}
