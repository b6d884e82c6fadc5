//! bs=auto: the copy is exactly GNU dd's with the block size ddx says it
//! chose, and sizes in blocks (which would mean nothing before the choice)
//! are refused before anything is touched.

use std::path::Path;

use crate::rigs::cmd::{gnu_dd, operand};
use crate::rigs::fixture::{statistics, Ddx};

/// The --verbose line that says what bs=auto chose.
fn verbose_line(stderr: &str) -> String {
    stderr
        .lines()
        .find(|l| l.contains("bs=auto chose"))
        .unwrap_or_else(|| panic!("no bs=auto line in {stderr}"))
        .to_owned()
}

fn chosen_block_size(stderr: &str) -> usize {
    let line = verbose_line(stderr);
    let bytes = line
        .split('(')
        .nth(1)
        .and_then(|rest| rest.split(" bytes)").next())
        .and_then(|n| n.parse().ok());
    bytes.unwrap_or_else(|| panic!("no byte count in {line}"))
}

/// Read the --verbose line as a user would and check the rule it states
/// on the figures it prints: the size it names is at or over the bar, and
/// every smaller size it lists (the list goes from the smallest up) is
/// under it. Returns the size it names, as printed.
fn check_the_stated_rule(stderr: &str) -> String {
    let line = verbose_line(stderr);
    // "...: 256 KiB is the smallest size whose read throughput reaches the
    // bar of 93.1% of the best (1.23 GB/s; ...); ...: 4 KiB 38.2 MB/s
    // (3.1%), 16 KiB ..."
    let (head, rest) = line
        .split_once(" is the smallest size whose read throughput reaches the bar of ")
        .unwrap_or_else(|| panic!("no rule in {line}"));
    let answer = head.rsplit(": ").next().unwrap();
    let (bar, rest) = rest.split_once("% of the best (").unwrap();
    let bar: f64 = bar.parse().unwrap();
    // "1.23 GB/s, the highest; the bar is 95% of 1.20 GB/s (the median of
    // the three highest), less the noise between rounds, never below 85%
    // of the best)": the bar, a share of the best, is at or over the
    // floor, a share of the best too, and no more than the top share of
    // the reference unless the floor set it, on the figures printed
    // (three digits each).
    let (best, rest) = rest.split_once(", the highest; the bar is ").unwrap();
    let (top, rest) = rest.split_once("% of ").unwrap();
    let (reference, rest) = rest.split_once(" (").unwrap();
    let floor = rest.split_once("never below ").unwrap().1;
    let floor: f64 = floor
        .split_once("% of the best")
        .unwrap_or_else(|| panic!("the floor is no share of the best: {line}"))
        .0
        .parse()
        .unwrap();
    let top: f64 = top.parse().unwrap();
    let of_reference = bar / 100.0 * rate(best) / rate(reference) * 100.0;
    assert!(
        bar >= floor - 0.05,
        "a bar of {bar}% of the best under the floor: {line}"
    );
    assert!(
        of_reference < top + 1.0 || (bar - floor).abs() <= 0.05,
        "a bar of {bar}% of the best is {of_reference:.1}% of the reference, above \
         {top}% though the floor of {floor}% did not set it: {line}"
    );
    // And `--help` states that rule, not another.
    let help = String::from_utf8_lossy(&Ddx::new().arg("--help").succeeds().stdout).into_owned();
    let help: String = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let said = help
        .split_once("bs=auto")
        .and_then(|(_, h)| h.split_once("count=, skip="))
        .map(|(h, _)| h.to_owned())
        .expect("bs=auto in --help");
    assert!(
        said.contains(&format!("{top:.0}% of the best"))
            && said.contains(&format!("never below {floor:.0}%")),
        "--help states another rule than the one applied: {said}"
    );
    let points = rest.split_once(" rounds: ").unwrap().1;
    let points = points.split("; at least").next().unwrap();
    for point in points.split("), ") {
        // "4 KiB 38.2 MB/s (3.1"
        let (size, share) = point.split_once(" (").unwrap();
        let share: f64 = share.trim_end_matches([')', '%']).parse().unwrap();
        if size.starts_with(&format!("{answer} ")) {
            assert!(share >= bar - 0.05, "{point} short of the bar: {line}");
            return answer.to_owned();
        }
        assert!(share < bar + 0.05, "{point} reaches the bar: {line}");
    }
    panic!("{answer} not among the sizes listed: {line}");
}

/// Bytes per second of a printed rate ("1.23 GB/s", "38.2 MB/s").
fn rate(text: &str) -> f64 {
    let (n, unit) = text.trim().split_once(' ').unwrap();
    let n: f64 = n.parse().unwrap_or_else(|_| panic!("no rate: {text}"));
    let scale = match unit {
        "B/s" => 1.0,
        "kB/s" => 1e3,
        "MB/s" => 1e6,
        "GB/s" => 1e9,
        "TB/s" => 1e12,
        _ => panic!("no rate: {text}"),
    };
    n * scale
}

/// Copy `input` with bs=auto, then with GNU dd at the size chosen: the
/// same statistics, exit status and bytes (not a `Compare`: GNU's operands
/// come from ddx's run); returns ddx's stderr.
fn check_against_gnu(dir: &Path, input: &str, extra: &[&str]) -> String {
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
    out.stderr
}

#[test]
fn a_probed_file_copies_as_gnu_dd_with_the_chosen_size() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    // Large enough to be probed (about 36 MiB of probe reads).
    let data = crate::rigs::bytes::pattern(48, (48 << 20) + 12345);
    std::fs::write(&input, &data).unwrap();
    let input = input.display().to_string();
    let stderr = check_against_gnu(dir.path(), &input, &[]);
    // Probed from offset 0: the rule's answer is the choice (no floor for
    // a buffered copy), and it holds on the figures printed.
    let answer = check_the_stated_rule(&stderr);
    let chosen = chosen_block_size(&stderr);
    assert!(verbose_line(&stderr).contains(&format!("chose {answer} ({chosen} bytes)")));
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
    out.says("not probed");
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
