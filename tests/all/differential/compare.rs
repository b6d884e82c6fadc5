//! Deciding whether two outcomes are the same, modulo what may differ.
//!
//! Only three things may legitimately differ between GNU dd and ddx: the
//! program name in messages, the elapsed time and rate at the end of the
//! statistics line, and progress lines (which depend on wall-clock time).
//! Everything else is compared byte for byte, and every difference becomes a
//! `Finding` that a human can act on without rerunning anything.

use super::run::{FileState, Outcome};

pub struct Finding {
    /// Short, stable name of what differed ("stdout", "stderr", "exit
    /// status", "file out"); failures are summarised by these.
    pub aspect: String,
    pub detail: String,
}

/// Program-independent stderr lines.
pub fn normalise_stderr(raw: &[u8], program: &str) -> Vec<String> {
    let text = String::from_utf8_lossy(raw);
    let mut lines: Vec<String> = text
        .split('\n')
        .map(|line| normalise_line(line, program))
        .collect();
    // `split` yields a final "" after a trailing newline; a missing final
    // newline is itself a difference worth seeing, so it becomes a marker.
    match lines.last().map(String::as_str) {
        Some("") => {
            lines.pop();
        }
        Some(_) => lines.push("<no newline at end of stderr>".to_string()),
        None => {}
    }
    lines
}

fn normalise_line(line: &str, program: &str) -> String {
    // A progress line is overwritten in place with '\r' and only appears
    // after a second of wall-clock time: keep what a terminal would show
    // last, which for our short cases is the real message.
    let line = line.rsplit('\r').next().unwrap_or(line);
    let prefix = format!("{program}: ");
    let mut line = match line.strip_prefix(&prefix) {
        Some(rest) => format!("PROG: {rest}"),
        None => line.to_string(),
    };
    line = line.replace(&format!("'{program} --help'"), "'PROG --help'");
    // "N bytes (...) copied, 0.0001 s, 1.2 MB/s": time and rate differ.
    if line.starts_with(|c: char| c.is_ascii_digit()) {
        if let Some(at) = line.find(" copied, ") {
            line.truncate(at + " copied".len());
        }
    }
    line
}

pub fn compare(gnu: &Outcome, ours: &Outcome, gnu_name: &str, our_name: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    if gnu.status != ours.status {
        findings.push(Finding {
            aspect: "exit status".to_string(),
            detail: format!("dd: {}, ddx: {}", gnu.status, ours.status),
        });
    }
    if gnu.stdout != ours.stdout {
        findings.push(Finding {
            aspect: "stdout".to_string(),
            detail: describe_bytes(&gnu.stdout, &ours.stdout),
        });
    }
    let gnu_err = normalise_stderr(&gnu.stderr, gnu_name);
    let our_err = normalise_stderr(&ours.stderr, our_name);
    if gnu_err != our_err {
        findings.push(Finding {
            aspect: "stderr".to_string(),
            detail: line_diff(&gnu_err, &our_err),
        });
    }
    let names = gnu.files.keys().chain(ours.files.keys());
    let mut names: Vec<&String> = names.collect();
    names.sort();
    names.dedup();
    for name in names {
        match (gnu.files.get(name), ours.files.get(name)) {
            (Some(a), Some(b)) if a == b => {}
            (a, b) => {
                let (kinds, detail) = describe_files(a, b);
                findings.push(Finding {
                    aspect: format!("file {name} ({kinds})"),
                    detail,
                });
            }
        }
    }
    findings
}

/// What differs about a file (for grouping: missing truncation and missing
/// holes are different bugs) and the details.
fn describe_files(gnu: Option<&FileState>, ours: Option<&FileState>) -> (String, String) {
    match (gnu, ours) {
        (
            Some(FileState::Regular {
                mode: gnu_mode,
                bytes: gnu_bytes,
                blocks: gnu_blocks,
            }),
            Some(FileState::Regular {
                mode: our_mode,
                bytes: our_bytes,
                blocks: our_blocks,
            }),
        ) => {
            let mut kinds = Vec::new();
            let mut parts = Vec::new();
            if gnu_mode != our_mode {
                kinds.push("mode");
                parts.push(format!("mode dd {gnu_mode:o}, ddx {our_mode:o}"));
            }
            if gnu_bytes != our_bytes {
                kinds.push(if gnu_bytes.len() == our_bytes.len() {
                    "content"
                } else {
                    "size"
                });
                parts.push(describe_bytes(gnu_bytes, our_bytes));
            }
            if gnu_blocks != our_blocks {
                kinds.push("holes");
                parts.push(format!(
                    "allocated 512-byte blocks dd {}, ddx {} (holes differ)",
                    gnu_blocks.unwrap_or(0),
                    our_blocks.unwrap_or(0)
                ));
            }
            (kinds.join(","), parts.join("; "))
        }
        (a, b) => (
            "existence or type".to_string(),
            format!("dd: {}, ddx: {}", describe_state(a), describe_state(b)),
        ),
    }
}

fn describe_state(state: Option<&FileState>) -> String {
    match state {
        None => "absent".to_string(),
        Some(FileState::Regular { bytes, .. }) => format!("regular file of {} bytes", bytes.len()),
        Some(FileState::Symlink(target)) => format!("symlink to {}", target.display()),
        Some(FileState::Dir) => "directory".to_string(),
        Some(FileState::Other) => "special file".to_string(),
    }
}

/// Sizes, the first differing offset, and a window of both around it.
pub fn describe_bytes(gnu: &[u8], ours: &[u8]) -> String {
    let first = gnu
        .iter()
        .zip(ours)
        .position(|(a, b)| a != b)
        .unwrap_or(gnu.len().min(ours.len()));
    let start = first.saturating_sub(8);
    format!(
        "dd {} bytes, ddx {} bytes, first difference at offset {first}\n  dd  @{start}: {}\n  ddx @{start}: {}",
        gnu.len(),
        ours.len(),
        excerpt(gnu, start),
        excerpt(ours, start)
    )
}

fn excerpt(bytes: &[u8], start: usize) -> String {
    let window = bytes.get(start..).unwrap_or(&[]);
    let window = &window[..window.len().min(24)];
    if window.is_empty() {
        return "<end>".to_string();
    }
    let hex: Vec<String> = window.iter().map(|b| format!("{b:02x}")).collect();
    let text: String = window
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '.'
            }
        })
        .collect();
    format!("{}  |{text}|", hex.join(" "))
}

/// A minimal line diff (longest common subsequence). stderr is a handful of
/// lines, so quadratic is fine and the output reads like `diff -u`.
pub fn line_diff(gnu: &[String], ours: &[String]) -> String {
    let (n, m) = (gnu.len(), ours.len());
    let mut common = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            common[i][j] = if gnu[i] == ours[j] {
                common[i + 1][j + 1] + 1
            } else {
                common[i + 1][j].max(common[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < n || j < m {
        if i < n && j < m && gnu[i] == ours[j] {
            out.push(format!("        {}", gnu[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || common[i + 1][j] >= common[i][j + 1]) {
            out.push(format!("  dd  - {}", gnu[i]));
            i += 1;
        } else {
            out.push(format!("  ddx + {}", ours[j]));
            j += 1;
        }
    }
    out.join("\n")
}

/// A grouping key for the summary: which aspects differed and, for stderr,
/// the first differing line pair with digits blurred, so "partial read (3
/// bytes)" and "(5 bytes)" land in one bucket.
pub fn signature(
    findings: &[Finding],
    gnu: &Outcome,
    ours: &Outcome,
    gnu_name: &str,
    our_name: &str,
) -> String {
    let aspects: Vec<&str> = findings.iter().map(|f| f.aspect.as_str()).collect();
    let mut key = aspects.join(" + ");
    if findings.iter().any(|f| f.aspect == "stderr") {
        let gnu_err = normalise_stderr(&gnu.stderr, gnu_name);
        let our_err = normalise_stderr(&ours.stderr, our_name);
        let first_only = |mine: &[String], theirs: &[String]| {
            mine.iter()
                .find(|line| !theirs.contains(line))
                .map(|line| blur_digits(line))
                .unwrap_or_else(|| "(nothing)".to_string())
        };
        key.push_str(&format!(
            " | dd: {} | ddx: {}",
            first_only(&gnu_err, &our_err),
            first_only(&our_err, &gnu_err)
        ));
    }
    key
}

fn blur_digits(line: &str) -> String {
    let mut out = String::new();
    for c in line.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}
