//! The one place ddx may differ from GNU dd with GNU operands: it refuses
//! a copy of a file onto itself that destroys input before reading it
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
use super::compare::{compare, Finding};
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
