//! What runs between a valid plan and opening its ends: the wrong-device
//! guard with its notice and confirmation for a whole disk, and taking
//! over the `--progress-fd` descriptor. Nothing here opens a file.

use std::io::{BufRead, IsTerminal};
use std::os::fd::AsFd;

use crate::guard;
use crate::operands::CopyPlan;
use crate::progress::json::JsonStream;
use crate::progress::reporter::emit;
use crate::sys::signals::SignalPipes;

/// The guard's verdict as the command line acts on it: Err is the one line
/// to print (without the program name) before exiting 1.
pub fn guard(
    program: &str,
    plan: &CopyPlan,
    force: bool,
    signals: &SignalPipes,
) -> Result<(), String> {
    let whole_disk = guard::check(plan, force).map_err(|refusal| refusal.to_string())?;
    let Some(disk) = whole_disk else {
        return Ok(());
    };
    // A person is watching only with a terminal on both stdin and stderr;
    // scripts get neither the notice nor, above all, a prompt to hang on.
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Ok(());
    }
    // Read from the device only now that someone will read the answer.
    let contents = match &plan.output {
        Some(path) => guard::contents::probe(path),
        // The tools' own stdout is a pipe: name ours through /proc.
        None => guard::contents::probe(&std::path::PathBuf::from(format!(
            "/proc/{}/fd/1",
            std::process::id()
        ))),
    };
    emit(format!("{program}: {}\n", disk.notice(&contents)).as_bytes());
    // With no if=, stdin is the data: the answer would be read as input.
    if force || plan.input.is_none() {
        return Ok(());
    }
    emit(format!("{program}: overwrite it? [y/N] ").as_bytes());
    let answer = answer(signals);
    match answer.trim() {
        "y" | "Y" | "yes" | "YES" | "Yes" => Ok(()),
        _ => Err(format!("not overwriting {}", disk.path)),
    }
}

/// A line from the terminal; Ctrl-C (or SIGTERM) while waiting ends ddx
/// by that signal, since the handlers installed for the copy would
/// otherwise only note it while the read goes on.
fn answer(signals: &SignalPipes) -> String {
    let stdin = std::io::stdin();
    // Whatever else ends the wait (the answer, a poll cut short), the line
    // is read as before.
    let woken = crate::sys::signals::wait(
        signals,
        crate::sys::signals::Info::Leave,
        Some(stdin.as_fd()),
        None,
    );
    if let Some(signal) = woken.interrupted {
        emit(b"\n");
        crate::sys::signals::die_of(signal);
    }
    let mut line = String::new();
    let _ = stdin.lock().read_line(&mut line);
    line
}

/// The `--progress-fd` descriptor, checked: open (that it is not the
/// copy's own output is a row of `planner::needs`).
pub fn progress_stream(fd: i32) -> Result<JsonStream, String> {
    crate::sys::fd::inherit(fd)
        .map(JsonStream::new)
        .map_err(|errno| format!("--progress-fd={fd}: {}", crate::sys::errno_text(errno)))
}
