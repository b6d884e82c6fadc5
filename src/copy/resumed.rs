//! The input a resumed copy reads, held to its map before a byte is
//! written: a copy by position (`--map`, `--resume`) and an upload kept
//! resumable by its map both record what their input was
//! (`rescue::identity`), and a `--resume` that opens another input (of
//! another size, another file or disk, a file modified since, another
//! URI) is refused with the one line saying what differs, instead of
//! joining two inputs' bytes in one output.

use std::path::Path;

use crate::engine::stream::{Input, Output};
use crate::operands::CopyPlan;
use crate::rescue::identity::{EndRecord, Recorded};
use crate::text::quote::quote_file;

/// The record of the copy's input as opened (before any image end wraps
/// it: the file or device itself).
pub fn input_record(plan: &CopyPlan, input: &Input) -> EndRecord {
    let name = plan.input.as_deref().unwrap_or(Path::new("-"));
    let size = input.stream.size().ok().flatten();
    EndRecord::of(name, input.stream.fd(), size)
}

/// The record of the copy's output as opened.
pub fn output_record(plan: &CopyPlan, output: &Output) -> EndRecord {
    let name = plan.output.as_deref().unwrap_or(Path::new("-"));
    EndRecord::of(name, output.stream.fd(), None)
}

/// Err: the line refusing a resumed copy whose input (`now`) is not the
/// one the map at `map` recorded.
pub fn check_input(recorded: &Recorded, map: &Path, now: &EndRecord) -> Result<(), String> {
    match recorded.input_differs(now) {
        None => Ok(()),
        Some(why) => Err(format!(
            "--resume: {why}; give the input the map {} records to continue that copy, or \
             remove the map to start over",
            quote_file(map.as_os_str().as_encoded_bytes())
        )),
    }
}
