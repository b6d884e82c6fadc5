//! splice(2) for pipe ends: with auto, records move inside the kernel
//! (ddx says so under --verbose), and the bytes, the statistics and what
//! is left in the input pipe are GNU dd's.

use crate::rigs::bytes::{file_with, pattern};
use crate::rigs::fixture::{Compare, Ddx};

/// The comparison holds, and ddx (under --verbose) says it spliced.
fn spliced_as_gnu(compare: Compare) {
    let compared = compare.ddx_args(["--verbose"]).run();
    let ours = &compared.ddx().stderr;
    assert!(ours.contains("splice"), "not spliced: {ours}");
}

#[test]
fn a_pipe_into_a_file_is_spliced_and_equals_gnu_dd() {
    let data = pattern(1, 3_000_000 + 17);
    for operands in [
        &["bs=64k"][..],
        &["bs=1M", "count=2"],
        &["bs=4096", "seek=3"],
    ] {
        // Read sizes from a pipe depend on timing: compare totals, which
        // do not.
        spliced_as_gnu(
            Compare::new()
                .args(operands)
                .stdin(data.clone())
                .output_file()
                .total_only(),
        );
    }
}

#[test]
fn a_file_into_a_pipe_is_spliced_and_equals_gnu_dd() {
    let (_dir, input) = file_with("in", pattern(2, 5_000_000 + 3));
    for operands in [
        &["bs=1M"][..],
        &["bs=100000", "skip=3", "count=20"],
        &["bs=512"],
    ] {
        // A file reads whole records: the statistics are exact. Standard
        // output is a pipe.
        spliced_as_gnu(
            Compare::new()
                .input_path(&input)
                .args(operands)
                .statistics_only(),
        );
    }
}

#[test]
fn conversions_and_explicit_sync_do_not_splice() {
    for extra in [
        &["conv=ucase"][..],
        &["--backend=sync"],
        &["--no-offload"],
        &["iflag=fullblock"],
    ] {
        let ran = Ddx::as_dd()
            .args(["of=/dev/null", "bs=64k", "--verbose"])
            .args(extra)
            .stdin(pattern(3, 100_000))
            .succeeds();
        assert!(
            !ran.stderr.contains("splice"),
            "{extra:?} spliced: {}",
            ran.stderr
        );
    }
}
