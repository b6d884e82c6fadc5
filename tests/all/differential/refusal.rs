//! The two places ddx may differ from GNU dd with GNU operands.
//!
//! An input that is a directory: GNU dd opens (creates, truncates) the
//! output, then fails its first read with EISDIR; ddx refuses before the
//! output is opened, with GNU's line for that read. Accepted only if ddx
//! said GNU's warnings (those GNU prints before any error) and then
//! that line alone, exited as GNU did, wrote the same to standard
//! output, and left every file either as GNU left it or as it was before
//! the run (see [`check_directory_input`]). Where GNU fails to open the
//! output first (oflag=directory, conv=excl onto an existing file), its
//! message is about the output and ddx's about the input: the status
//! and the files still agree.
//!
//! A copy of a file onto itself that destroys input before reading it
//! (ddx's wrong-device guard). A refusal is accepted only if
//!
//! - ddx said so in one line naming `--force`, exited 1 and left the file
//!   as it was;
//! - with `--force`, ddx gives exactly GNU dd's result (the guard is the
//!   only difference);
//! - the copy is genuinely destructive, judged by GNU dd alone: its result
//!   differs from the same copy into a separate file holding the same
//!   bytes (also tried with aperiodic content, so that zeros or repeats
//!   in the data cannot hide an overlap).
//!
//! A refusal of a harmless copy (an in-place rewrite, a shift towards the
//! start) fails the case like any other mismatch.

use super::case::{Case, Entry, Stdin};
use super::compare::{compare, line_diff, normalise_stderr, Finding};
use super::run::{run, FileState, Outcome, Place, Program};

/// The name the separate output gets in the oracle's copy.
const SEPARATE: &str = "ddx-oracle-out";

pub fn is_self_copy_refusal(case: &Case, ours: &Outcome) -> bool {
    let stderr = String::from_utf8_lossy(&ours.stderr);
    let reads_in = case.operands.iter().any(|o| o == "if=in")
        || matches!(&case.stdin, Stdin::File(name) if name == "in");
    reads_in
        && case.operands.iter().any(|o| o == "of=in")
        && ours.status == "exit 1"
        && stderr.lines().count() == 1
        && stderr.contains("refusing to copy")
        && stderr.contains("onto itself")
        && stderr.contains("--force")
}

/// The case reads a directory of its own (`if=NAME`, NAME made a
/// directory), and ddx said one line, about a directory.
pub fn is_directory_input_refusal(case: &Case, ours: &Outcome) -> bool {
    let reads_directory = case.operands.iter().any(|operand| {
        operand.strip_prefix("if=").is_some_and(|input| {
            case.entries
                .iter()
                .any(|e| matches!(e, Entry::Dir { name } if name == input))
        })
    });
    let stderr = String::from_utf8_lossy(&ours.stderr);
    reads_directory
        && stderr
            .lines()
            .last()
            .is_some_and(|l| l.ends_with(": Is a directory"))
}

/// Findings if a directory input's refusal is not the one accepted (see
/// the module header).
pub fn check_directory_input(
    case: &Case,
    gnu: &Outcome,
    ours: &Outcome,
    gnu_name: &str,
    our_name: &str,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mismatch = |aspect: &str, detail: String| Finding {
        aspect: format!("directory input: {aspect}"),
        detail,
    };
    if gnu.status != ours.status {
        findings.push(mismatch(
            "exit status",
            format!("dd: {}, ddx: {}", gnu.status, ours.status),
        ));
    }
    if gnu.stdout != ours.stdout {
        findings.push(mismatch("stdout", "differs".into()));
    }
    // GNU's warnings (said before any error), then the one line.
    let gnu_err = normalise_stderr(&gnu.stderr, gnu_name);
    let mut expected: Vec<String> = gnu_err
        .iter()
        .take_while(|l| !l.contains("Is a directory") && !l.contains("failed to open"))
        .cloned()
        .collect();
    let input = case
        .operands
        .iter()
        .find_map(|o| o.strip_prefix("if="))
        .unwrap_or_default();
    expected.push(format!("PROG: error reading '{input}': Is a directory"));
    let ours_err = normalise_stderr(&ours.stderr, our_name);
    if expected != ours_err {
        findings.push(mismatch("stderr", line_diff(&expected, &ours_err)));
    }
    let before = |name: &str| -> Option<FileState> {
        case.entries.iter().find_map(|e| match e {
            Entry::File { name: n, bytes } if n == name => Some(FileState::Regular {
                mode: 0,
                bytes: bytes.clone(),
                blocks: None,
            }),
            Entry::Dir { name: n } if n == name => Some(FileState::Dir),
            Entry::Symlink { name: n, target } if n == name => {
                Some(FileState::Symlink(target.into()))
            }
            _ => None,
        })
    };
    let same_as_before = |name: &str, state: Option<&FileState>| match (before(name), state) {
        (None, None) => true,
        (Some(FileState::Regular { bytes: a, .. }), Some(FileState::Regular { bytes: b, .. })) => {
            a == *b
        }
        (Some(a), Some(b)) => a == *b,
        _ => false,
    };
    let mut names: Vec<&String> = gnu.files.keys().chain(ours.files.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let state = ours.files.get(name);
        if state != gnu.files.get(name) && !same_as_before(name, state) {
            findings.push(mismatch(
                &format!("file {name}"),
                "neither as GNU dd left it nor as it was".into(),
            ));
        }
    }
    findings
}

fn input_bytes(case: &Case) -> Option<&[u8]> {
    case.entries.iter().find_map(|e| match e {
        Entry::File { name, bytes } if name == "in" => Some(bytes.as_slice()),
        _ => None,
    })
}

fn regular(outcome: &Outcome, name: &str) -> Option<Vec<u8>> {
    match outcome.files.get(name) {
        Some(FileState::Regular { bytes, .. }) => Some(bytes.clone()),
        _ => None,
    }
}

fn with_content(case: &Case, content: &[u8]) -> Case {
    let mut case = case.clone();
    for entry in &mut case.entries {
        if let Entry::File { name, bytes } = entry {
            if name == "in" {
                *bytes = content.to_vec();
            }
        }
    }
    case
}

/// GNU dd's result differs between `of=in` and a separate copy of `in`.
fn destructive(case: &Case, gnu: &Program, place: &Place) -> bool {
    let original = input_bytes(case).unwrap_or_default().to_vec();
    let pattern: Vec<u8> = (0..original.len())
        .map(|i| ((i * 131 + i / 251) % 251) as u8 + 1)
        .collect();
    [original, pattern].iter().any(|content| {
        let same = with_content(case, content);
        let mut separate = same.clone();
        for operand in &mut separate.operands {
            if operand == "of=in" {
                *operand = format!("of={SEPARATE}");
            }
        }
        separate.entries.push(Entry::File {
            name: SEPARATE.to_string(),
            bytes: content.clone(),
        });
        let in_place = run(&same, gnu, place);
        let apart = run(&separate, gnu, place);
        regular(&in_place, "in") != regular(&apart, SEPARATE)
    })
}

/// Findings if the refusal is not one of those accepted (see above).
pub fn check(
    case: &Case,
    gnu_outcome: &Outcome,
    ours: &Outcome,
    gnu: &Program,
    our_program: &Program,
    place: &Place,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    if regular(ours, "in").as_deref() != input_bytes(case) {
        findings.push(Finding {
            aspect: "refusal".to_string(),
            detail: "ddx refused the copy but changed the file".to_string(),
        });
    }
    let mut forced = our_program.clone();
    forced.leading_args.push("--force".to_string());
    let forced_outcome = run(case, &forced, place);
    for mut finding in compare(gnu_outcome, &forced_outcome, gnu.name, forced.name) {
        finding.aspect = format!("{} with --force", finding.aspect);
        findings.push(finding);
    }
    if !destructive(case, gnu, place) {
        findings.push(Finding {
            aspect: "refusal".to_string(),
            detail: "ddx refused a copy onto itself that GNU dd completes as if \
                     into a separate file: not destructive"
                .to_string(),
        });
    }
    findings
}
