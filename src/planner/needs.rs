//! What each of ddx's own options needs of the copy's ends, in one table,
//! and the one check that holds a request to it before anything is
//! opened for writing.
//!
//! An option either does what it says on the ends it is given or the
//! copy is refused, with one line naming the option, the end and why,
//! and exit status 1: `--rescue` cannot read a character device by
//! position, so it must not "succeed" with nothing copied; `--verify`
//! cannot read a pipe back, so it must not copy first and complain after.
//! The check is a pure function of the [`Request`] and the gathered
//! [`Facts`], so every cell of the table is a unit test needing neither
//! root nor devices; `tests/all/refusals.rs` runs the same matrix over
//! real ends.
//!
//! Options that only tune how a copy runs (`--backend`, `--queue-depth`,
//! `--request-size`, `--offload`, `--keep-cache`, `bs=auto`) say in their
//! help that they apply where they can, and a copy they cannot shape runs
//! as GNU's would (`--verbose` says how it ran); they have rows too, with
//! no needs, so that the table lists every option. A new option is a new
//! row; a new kind of end answers the [`Need`]s below in one place each.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::facts::{EndFacts, Facts, Place};
use crate::ends::Kind;
use crate::operands::IoFlags;
use crate::request::{first_given, BackendChoice, CacheChoice, Offload, Request};
use crate::text::quote::quote_file;

/// What an option needs of one end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing: any end will do.
    Any,
    /// Every byte has one fixed position, and reading or writing it there
    /// is what the option does (a copy by position and its map). An
    /// output may also be the null device, which takes a write at any
    /// position: a scan that keeps only the map.
    Positions,
    /// The bytes written can be read again from the same place (`--verify`).
    ReadBack,
    /// What was read can be read again by name (`--hash-file`'s checker
    /// reads the input it names).
    ReadAgain,
    /// A range can be made to read as zeros without writing them, or,
    /// where the storage refuses, by writing them in place (`--trim`): a
    /// file, a block device or an export, not a stream.
    Discard,
}

/// What an option needs beyond its two ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beside {
    Nothing,
    /// A map file it writes as it goes (`--map`, `--resume`).
    Map,
    /// The file the digest is written to (`--hash-file`).
    HashFile,
}

/// One row: an option, when a request asks for it, and what it needs.
pub struct Row {
    /// As the user wrote it: `--rescue`, `bs=auto`.
    pub option: &'static str,
    pub asked: fn(&Request) -> bool,
    pub input: Need,
    pub output: Need,
    pub beside: Beside,
}

const fn row(
    option: &'static str,
    asked: fn(&Request) -> bool,
    input: Need,
    output: Need,
    beside: Beside,
) -> Row {
    Row {
        option,
        asked,
        input,
        output,
        beside,
    }
}

/// Every option of ddx's own, and what it needs. The rows that need
/// something come first: the first unmet need is the one reported.
pub const TABLE: &[Row] = &[
    row(
        "--rescue",
        |r| r.settings.rescue,
        Need::Positions,
        Need::Positions,
        Beside::Nothing,
    ),
    row(
        "--resume",
        |r| r.settings.resume,
        Need::Positions,
        Need::Positions,
        Beside::Map,
    ),
    row(
        "--map",
        |r| r.settings.map.is_some(),
        Need::Positions,
        Need::Positions,
        Beside::Map,
    ),
    row(
        "--sector-size",
        |r| r.settings.sector_size.is_some(),
        Need::Positions,
        Need::Positions,
        Beside::Nothing,
    ),
    row(
        "--retry-passes",
        |r| r.settings.retry_passes.is_some(),
        Need::Positions,
        Need::Positions,
        Beside::Nothing,
    ),
    row(
        "--verify",
        |r| r.settings.verify,
        Need::Any,
        Need::ReadBack,
        Beside::Nothing,
    ),
    row(
        "--hash-file",
        |r| r.settings.hash_file.is_some(),
        Need::ReadAgain,
        Need::Any,
        Beside::HashFile,
    ),
    row(
        "--trim",
        |r| r.settings.trim,
        Need::Any,
        Need::Discard,
        Beside::Nothing,
    ),
    row(
        "--hash",
        |r| !r.settings.hash.is_empty(),
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    // Tuning: each applies where it can and says so in its help.
    row(
        "--backend",
        |r| r.settings.backend.is_some(),
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    row(
        "--queue-depth",
        |r| r.settings.queue_depth.is_some(),
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    row(
        "--request-size",
        |r| r.settings.request_size.is_some(),
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    row(
        "--offload",
        |r| r.settings.offload == Offload::Always,
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    row(
        "--no-offload",
        |r| r.settings.offload == Offload::Never,
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    row(
        "--keep-cache",
        |r| r.settings.cache == CacheChoice::Keep,
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    row(
        "--drop-cache",
        |r| r.settings.cache == CacheChoice::Drop,
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    // Images: each wraps an end into a stream of its own kind, and what
    // each cannot be combined with is refused by `copy::images` before
    // anything is opened.
    row(
        "--decompress",
        |r| r.settings.decompress.is_some(),
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    row(
        "--compress",
        |r| r.settings.compress.is_some(),
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    row(
        "--bmap",
        |r| r.settings.bmap.is_some(),
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    row(
        "--bmap-create",
        |r| r.settings.bmap_create.is_some(),
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    // Reads the input by position: refused by `copy::images` where it has
    // no positions, before the input is wrapped into a stream.
    row(
        "--used-only",
        |r| r.settings.used_only,
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    row(
        "--tee",
        |r| !r.settings.tee.is_empty(),
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    row(
        "bs=auto",
        |r| r.plan.auto_block_size,
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    // Reporting and safety: about the copy, not its ends.
    row(
        "--progress-fd",
        |r| r.settings.progress_fd.is_some(),
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    row(
        "--verbose",
        |r| r.settings.verbose,
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
    row(
        "--force",
        |r| r.settings.force,
        Need::Any,
        Need::Any,
        Beside::Nothing,
    ),
];

/// Why a copy is refused: one line, without the program name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// Hold the request to the table: Ok, or the first option that cannot
/// work on these ends, and why.
pub fn admit(request: &Request, facts: &Facts) -> Result<(), Refusal> {
    contradictions(request)?;
    let input = EndName::input(request.plan.input.as_deref());
    let output = EndName::output(request.plan.output.as_deref());
    let written = written(request, &facts.output);
    for row in TABLE.iter().filter(|row| (row.asked)(request)) {
        // Standard input is named '-', which its checker reads as such.
        let named = request.plan.input.is_some();
        if let Some(why) = unmet_input(row.input, &facts.input, named) {
            return Err(refusal(row, &input, why));
        }
        if let Some(why) = unmet_output(row.output, &written) {
            return Err(refusal(row, &output, why));
        }
        match row.beside {
            Beside::Nothing => {}
            Beside::Map => map_place(row.option, request, facts)?,
            Beside::HashFile => {
                if let (Some(path), Some(place)) =
                    (&request.settings.hash_file, &facts.beside.hash_file)
                {
                    writable_place(row.option, "=", path, place, facts)?;
                }
            }
        }
    }
    Ok(())
}

/// The same needs of every `--tee` output as of `of=`: each is written
/// the same bytes and, under `--verify`, read back the same way.
/// `tees` pairs each `--tee` path with its facts (see
/// `facts::output_facts_at`).
pub fn admit_tees(request: &Request, tees: &[(&Path, EndFacts)]) -> Result<(), Refusal> {
    for row in TABLE.iter().filter(|row| (row.asked)(request)) {
        for (path, end) in tees {
            if let Some(why) = unmet_output(row.output, end) {
                let name = EndName(format!("--tee={}", quote_file(path.as_os_str().as_bytes())));
                return Err(refusal(row, &name, why));
            }
        }
    }
    Ok(())
}

/// What the copy writes to: under `--compress`, a stream ddx encodes
/// (whatever the output is, the bytes written are not the copy's).
fn written(request: &Request, output: &EndFacts) -> EndFacts {
    if request.settings.compress.is_some() {
        EndFacts::of_kind(Kind::Stream)
    } else {
        output.clone()
    }
}

/// Options that contradict each other whatever the ends: a tuning of the
/// overlapped backends with GNU's own loop asked for; `--trim` where the
/// bytes do not go where the writer discards (oflag=append writes at the
/// end whatever the position; a copy by position writes each chunk as
/// it reads it, zeros included).
fn contradictions(request: &Request) -> Result<(), Refusal> {
    let settings = &request.settings;
    if settings.trim {
        let other = if request.plan.output_flags.contains(IoFlags::APPEND) {
            Some("oflag=append: an appended output is written at its end, not where its zeros would be discarded")
        } else if settings.rescue
            || settings.resume
            || settings.map.is_some()
            || settings.retry_passes.is_some()
        {
            Some(
                "--rescue, --map and --resume: a copy by position writes each chunk as it reads it",
            )
        } else {
            None
        };
        if let Some(other) = other {
            return Err(Refusal(format!("--trim cannot be combined with {other}")));
        }
    }
    if settings.backend == Some(BackendChoice::Sync) {
        let tuning = first_given([
            (settings.queue_depth.is_some(), "--queue-depth"),
            (settings.request_size.is_some(), "--request-size"),
        ]);
        if let Some(option) = tuning {
            return Err(Refusal(format!(
                "{option} shapes an overlapped backend's requests: --backend=sync reads \
                 and writes one record at a time"
            )));
        }
    }
    Ok(())
}

/// An end as messages name it.
struct EndName(String);

impl EndName {
    fn input(path: Option<&Path>) -> EndName {
        EndName(path.map_or("standard input".into(), |p| {
            format!("if={}", quote_file(p.as_os_str().as_bytes()))
        }))
    }

    fn output(path: Option<&Path>) -> EndName {
        EndName(path.map_or("standard output".into(), |p| {
            format!("of={}", quote_file(p.as_os_str().as_bytes()))
        }))
    }
}

/// What an unmet need says: what the option does with the end, and
/// what the end is that it cannot.
struct Unmet {
    does: &'static str,
    lacks: String,
}

fn unmet(does: &'static str, kind: Kind, which: &str) -> Option<Unmet> {
    Some(Unmet {
        does,
        lacks: format!("is {}, {which}", what(kind)),
    })
}

/// None when the input (`named` by if=) meets the need.
fn unmet_input(need: Need, end: &EndFacts, named: bool) -> Option<Unmet> {
    match need {
        Need::Any | Need::ReadBack | Need::Discard => None,
        Need::Positions
            if matches!(
                end.kind,
                Kind::RegularFile | Kind::BlockDevice | Kind::Remote | Kind::Object
            ) =>
        {
            None
        }
        Need::Positions => unmet(
            "reads the input by position",
            end.kind,
            "which has no positions",
        ),
        Need::ReadAgain
            if named && matches!(end.kind, Kind::CharDevice | Kind::Pipe | Kind::Socket) =>
        {
            unmet(
                "names the input for its checker to read again",
                end.kind,
                "which does not give the same bytes twice",
            )
        }
        Need::ReadAgain => None,
    }
}

/// None when the output meets the need.
fn unmet_output(need: Need, end: &EndFacts) -> Option<Unmet> {
    // Where a write can go to any offset (and a zeroed range be discarded).
    let addressed = matches!(
        end.kind,
        Kind::RegularFile | Kind::BlockDevice | Kind::Remote
    );
    match need {
        Need::Any | Need::ReadAgain => None,
        Need::Positions if end.null_device || addressed => None,
        Need::Positions => unmet(
            "writes the output by position",
            end.kind,
            "which has no positions",
        ),
        Need::ReadBack if end.null_device => Some(Unmet {
            does: "reads the output back",
            lacks: "is the null device, which keeps nothing".into(),
        }),
        // Read back through a descriptor of its own, or an export or an
        // object through a connection of its own.
        Need::ReadBack
            if (end.descriptor && matches!(end.kind, Kind::RegularFile | Kind::BlockDevice))
                || matches!(end.kind, Kind::Remote | Kind::Object) =>
        {
            None
        }
        Need::ReadBack => unmet(
            "reads the output back",
            end.kind,
            "which it cannot read back",
        ),
        Need::Discard if !end.null_device && addressed => None,
        Need::Discard => unmet(
            "discards zeros on the output",
            end.kind,
            "where nothing can be discarded",
        ),
    }
}

fn refusal(row: &Row, end: &EndName, unmet: Unmet) -> Refusal {
    Refusal(format!(
        "{} {}: {} {}",
        row.option, unmet.does, end.0, unmet.lacks
    ))
}

/// The map a copy by position keeps: a file ddx can write, and, for the
/// checkpoint `--resume` keeps beside the output, an output that is a
/// file (a map beside a device node would land in /dev).
fn map_place(option: &str, request: &Request, facts: &Facts) -> Result<(), Refusal> {
    let settings = &request.settings;
    let named = settings.map.is_some();
    if !named && settings.resume && facts.output.kind != Kind::RegularFile {
        return Err(Refusal(format!(
            "--resume keeps its map beside the output, and {} is {}: name the map with \
             --map=FILE",
            EndName::output(request.plan.output.as_deref()).0,
            what(facts.output.kind)
        )));
    }
    let Some(place) = &facts.beside.map else {
        return Ok(());
    };
    let path = match (&settings.map, &request.plan.output) {
        (Some(path), _) => path.clone(),
        (None, Some(output)) => {
            let mut path = output.as_os_str().to_owned();
            path.push(crate::rescue::CHECKPOINT_SUFFIX);
            path.into()
        }
        (None, None) => return Ok(()),
    };
    let option = if named { "--map" } else { option };
    let joint = if named { "=" } else { " " };
    writable_place(option, joint, &path, place, facts)
}

/// A file ddx will write beside the copy: nothing there or a regular
/// file that is neither end of the copy, and writable.
fn writable_place(
    option: &str,
    joint: &str,
    path: &Path,
    place: &Place,
    facts: &Facts,
) -> Result<(), Refusal> {
    let quoted = quote_file(path.as_os_str().as_bytes());
    let named = if joint == "=" {
        format!("{option}={quoted}")
    } else {
        format!("{option}: its map {quoted}")
    };
    if let Some(kind) = place.kind.filter(|kind| *kind != Kind::RegularFile) {
        return Err(Refusal(format!(
            "{named} is {}, not a file ddx may write",
            what(kind)
        )));
    }
    let ends = [facts.input.identity, facts.output.identity];
    if place.identity.is_some() && ends.contains(&place.identity) {
        return Err(Refusal(format!(
            "{named} is an end of the copy, which writing it would overwrite"
        )));
    }
    if let Some(errno) = place.unwritable {
        return Err(Refusal(format!(
            "{named} cannot be written: {}",
            crate::sys::errno_text(errno)
        )));
    }
    Ok(())
}

/// A kind of end, as the rest of a sentence names it.
fn what(kind: Kind) -> &'static str {
    match kind {
        Kind::RegularFile => "a regular file",
        Kind::BlockDevice => "a block device",
        Kind::CharDevice => "a character device",
        Kind::Pipe => "a pipe",
        Kind::Socket => "a socket",
        Kind::Directory => "a directory",
        Kind::Other => "not a file",
        Kind::Remote => "an NBD export",
        Kind::Object => "an object",
        Kind::Stream => "a stream",
    }
}

#[cfg(test)]
mod tests;
