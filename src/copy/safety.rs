//! What runs between a valid plan and opening the output: the
//! wrong-device guard, the notice and the one question before a whole
//! disk is overwritten or a compressed input is written onto a disk as it
//! is, and taking over the `--progress-fd` descriptor. Nothing here opens
//! a file.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use crate::diagnostic::Refusal;
use crate::guard::{self, WholeDisk};
use crate::operands::CopyPlan;
use crate::planner::needs::CompressedOnto;
use crate::progress::json::JsonStream;
use crate::progress::reporter::emit;

/// The guard's verdict as the command line acts on it: Err is the one line
/// to print (without the program name) before exiting 1; Ok(Some) names a
/// whole disk to tell a person about, and ask, once the input is open
/// ([`confirm`]).
pub fn guard(plan: &CopyPlan, force: bool) -> Result<Option<Disk>, Refusal> {
    let whole = guard::check(plan, force).map_err(|hazard| Refusal(hazard.to_string()))?;
    Ok(whole.map(|whole| Disk {
        whole,
        at: plan.output.clone(),
    }))
}

/// A whole disk the copy writes, and where to read what it holds.
pub struct Disk {
    whole: WholeDisk,
    /// of= (or a `--tee` output); None: standard output.
    at: Option<PathBuf>,
}

/// Before the output is opened: a person at a terminal is told what each
/// whole disk holds (`whole_disks`, from [`guard`]) and that a compressed
/// input would be written onto a disk as it is (`flash`), and asked once;
/// a script is refused the compressed input (one line naming the format
/// and the options) and not told about whole disks. `force` answers the
/// whole-disk question, not the compressed one: that has its own answers,
/// `--decompress` and `--no-decompress`. Err is the line to print.
pub fn confirm(
    program: &str,
    plan: &CopyPlan,
    whole_disks: &[Disk],
    flash: Option<&CompressedOnto>,
    force: bool,
) -> Result<(), Refusal> {
    // A person is watching only with a terminal on both stdin and stderr;
    // scripts get neither the notice nor, above all, a prompt to hang on.
    // With no if=, stdin is the data: the answer would be read as input.
    let watching = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let can_ask = watching && plan.input.is_some();
    if let (Some(flash), false) = (flash, can_ask) {
        return Err(flash.refusal());
    }
    if !watching || (whole_disks.is_empty() && flash.is_none()) {
        return Ok(());
    }
    for disk in whole_disks {
        // Read from the device only now that someone will read the answer.
        let contents = match &disk.at {
            Some(path) => guard::contents::probe(path),
            // The tools' own stdout is a pipe: name ours through /proc.
            None => {
                guard::contents::probe(&PathBuf::from(format!("/proc/{}/fd/1", std::process::id())))
            }
        };
        emit(format!("{program}: {}\n", disk.whole.notice(&contents)).as_bytes());
    }
    if let Some(flash) = flash {
        emit(format!("{program}: {}\n", flash.notice()).as_bytes());
    }
    let disks_asked = !whole_disks.is_empty() && !force;
    if !can_ask || (!disks_asked && flash.is_none()) {
        return Ok(());
    }
    let question = match (disks_asked, flash.is_some(), whole_disks.len()) {
        (true, true, 1) => "overwrite it with the compressed bytes?",
        (true, true, _) => "overwrite them with the compressed bytes?",
        (false, _, _) => "write the compressed bytes?",
        (true, false, 1) => "overwrite it?",
        (true, false, _) => "overwrite them?",
    };
    emit(format!("{program}: {question} [y/N] ").as_bytes());
    let answer = answer();
    match answer.trim() {
        "y" | "Y" | "yes" | "YES" | "Yes" => Ok(()),
        _ => Err(match flash {
            Some(flash) => flash.declined(),
            None => {
                let names: Vec<&str> = whole_disks.iter().map(|d| d.whole.path.as_str()).collect();
                Refusal(format!("not overwriting {}", names.join(", ")))
            }
        }),
    }
}

/// A line from the terminal. Ctrl-C (or SIGTERM) meanwhile ends ddx by
/// that signal: the signal watcher handles it (see
/// `Reporter::hold_clock`).
fn answer() -> String {
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    line
}

/// The `--progress-fd` descriptor, checked: open (that it is not the
/// copy's own output is a row of `planner::needs`).
pub fn progress_stream(fd: i32) -> Result<JsonStream, Refusal> {
    crate::sys::fd::inherit(fd)
        .map(JsonStream::new)
        .map_err(|errno| {
            Refusal(format!(
                "--progress-fd={fd}: {}",
                crate::sys::errno_text(errno)
            ))
        })
}
