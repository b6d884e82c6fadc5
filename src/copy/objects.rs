//! What an object cannot be asked to do as the output of a copy, refused
//! with one line before anything is opened.
//!
//! An object is written whole, from its first byte to its last, and
//! appears under its key only when the upload completes: there is no
//! place in it to seek to, nothing to keep beside what is written, no
//! hole to leave, and no half-written object to resume (an interrupted
//! upload is aborted). The operands that need one of these (seek=,
//! conv=notrunc, conv=sparse, oflag=append, conv=excl and conv=nocreat,
//! which ask about an existing object without a way to ask atomically)
//! and ddx's positional copies (--rescue, --map, --resume) are refused
//! here rather than failing half-way, and http(s):// is refused as an
//! output since a web server takes no uploads. An object as the input is
//! read by ranges and supports all of them.

use crate::ends::remote::{self, Remote};
use crate::operands::{Conv, CopyPlan, IoFlags};
use crate::request::{first_given, Settings};

/// Err: the one line saying why this copy cannot write its object.
pub fn check(plan: &CopyPlan, settings: &Settings) -> Result<(), String> {
    let Some(path) = plan.output.as_deref() else {
        return Ok(());
    };
    let Some(Ok(Remote::Object(url))) = remote::recognise(path) else {
        return Ok(());
    };
    let named = |why: &str| format!("of={url}: {why}");
    if !url.writable() {
        return Err(named(
            "only s3:// objects can be written (http:// and https:// are read only)",
        ));
    }
    if plan.seek.total_bytes(plan.output_block_size) != Some(0) {
        return Err(named(
            "seek= cannot be used: an object is written whole, from its first byte",
        ));
    }
    let operand = [
        (
            Conv::NOTRUNC,
            "conv=notrunc",
            "an object is replaced whole, never written in place",
        ),
        (
            Conv::SPARSE,
            "conv=sparse",
            "an object has no holes to leave",
        ),
        (
            Conv::EXCL,
            "conv=excl",
            "ddx cannot make sure no object exists under the key",
        ),
        (
            Conv::NOCREAT,
            "conv=nocreat",
            "an object is created by its upload",
        ),
    ]
    .into_iter()
    .find(|(flag, _, _)| plan.conv.contains(*flag));
    if let Some((_, operand, why)) = operand {
        return Err(named(&format!("{operand} cannot be used: {why}")));
    }
    if plan.output_flags.contains(IoFlags::APPEND) {
        return Err(named(
            "oflag=append cannot be used: an object is replaced whole",
        ));
    }
    let positional = first_given([
        (settings.resume, "--resume"),
        (settings.rescue, "--rescue"),
        (settings.retry_passes.is_some(), "--retry-passes"),
        (settings.map.is_some(), "--map"),
    ]);
    if let Some(option) = positional {
        return Err(named(&format!(
            "{option} cannot be used: an object is uploaded whole, in order, and an \
             interrupted upload is aborted, so there is no part of it to resume"
        )));
    }
    Ok(())
}
