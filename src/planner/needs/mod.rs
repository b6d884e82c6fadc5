//! What each option needs of the copy's ends, in one table, and the one
//! check that holds a request to it before any output is opened: every
//! refusal of "this cannot work here" is a row of this module.
//!
//! An option either does what it says on the ends it is given or the
//! copy is refused, with one line naming the option, the end and why,
//! and exit status 1: `--rescue` cannot read a character device by
//! position, so it must not "succeed" with nothing copied; `--verify`
//! cannot read a pipe back, so it must not copy first and complain after.
//! A row says what the option needs of the input, of the output (and of
//! every `--tee` output), which file it writes beside the copy, and what
//! it cannot be combined with whatever the ends ([`conflicts`]). The ends
//! answer through their [`Capabilities`](crate::ends::Capabilities), so a
//! new kind of end answers the [`Need`]s once, in `ends`, and every row
//! follows.
//!
//! [`TABLE`] has a row for each of ddx's own options (and `bs=auto`);
//! [`OPERANDS`] has a row for each of GNU's operands that an end written
//! whole (an object) cannot honour. The checks are pure functions of the
//! [`Request`] and the gathered [`Facts`], so every cell of the table is a
//! unit test needing neither root nor devices; `tests/all/refusals.rs`
//! runs the same matrix over real ends. [`check`] holds the request to
//! the rows' conflicts before anything is opened; [`admit`] holds it to
//! the ends once the input is open and the output examined.
//!
//! Options that only tune how a copy runs (`--backend`, `--queue-depth`,
//! `--request-size`, `--offload`, `--keep-cache`, `bs=auto`) say in their
//! help that they apply where they can, and a copy they cannot shape runs
//! as GNU's would (`--verbose` says how it ran); they have rows too, with
//! no needs, so that the table lists every option. A new option is a new
//! row.

mod conflicts;

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::facts::{EndFacts, Facts, Identity, Place};
use crate::ends::Kind;
use crate::operands::{Conv, IoFlags};
use crate::request::{CacheChoice, Offload, Request};
use crate::text::quote::quote_file;

/// What an option needs of one end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing: any end will do.
    Any,
    /// Bytes to read: not a directory, whose read(2) fails with EISDIR.
    Data,
    /// Room for the whole input where the output's size is fixed (a
    /// block device, an export): `--bmap` writes an image of the map's
    /// size, `--decompress` one of the size its format records (xz, zstd
    /// and lz4 record it), known before the first write.
    Room,
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
    /// The output can be written at all (an `http://` object cannot).
    Writable,
    /// The output is written in pieces where it stands: at an offset,
    /// over the bytes it holds, leaving holes, appended to, or opened
    /// after asking whether it exists. An end written whole, in one
    /// upload that appears when complete (an object), cannot: the text
    /// says why, after what the end is ("an object ...").
    Piecewise(&'static str),
    /// A file or device on this machine, not an end reached over a
    /// connection (what every `--tee` output must be).
    Local,
    /// Each write sent with force unit access (`--fua`): the disk's own
    /// commands, through a SCSI or NVMe generic node.
    Fua,
}

/// Which file an option writes beside the copy's two ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritesBeside {
    Nothing,
    /// A map file it writes as it goes (`--map`, `--resume`).
    Map,
    /// The file the digest is written to (`--hash-file`).
    HashFile,
    /// The block map it records (`--bmap-create`).
    BmapCreate,
}

/// One row: an option, when a request asks for it, and what it needs.
pub struct Row {
    /// As the user wrote it: `--rescue`, `bs=auto`, `seek=`.
    pub option: &'static str,
    pub asked: fn(&Request) -> bool,
    pub input: Need,
    /// Of the output, and of every `--tee` output.
    pub output: Need,
    pub beside: WritesBeside,
    /// What it cannot be combined with, whatever the ends.
    pub conflicts: fn(&Request) -> Result<(), Refusal>,
}

const fn row(
    option: &'static str,
    asked: fn(&Request) -> bool,
    input: Need,
    output: Need,
    beside: WritesBeside,
    conflicts: fn(&Request) -> Result<(), Refusal>,
) -> Row {
    Row {
        option,
        asked,
        input,
        output,
        beside,
        conflicts,
    }
}

/// A row that needs nothing of the ends and conflicts with nothing.
const fn free(option: &'static str, asked: fn(&Request) -> bool) -> Row {
    row(
        option,
        asked,
        Need::Any,
        Need::Any,
        WritesBeside::Nothing,
        conflicts::none,
    )
}

/// What GNU's operands need: bytes to read from if=, and of an output
/// that is not a file what each operand does to it (each row refused only
/// by an end that cannot do it, an object, written whole), before ddx's
/// own options are held to the ends.
pub const OPERANDS: &[Row] = &[
    // GNU's copy itself, wherever it reads: a directory fails its first
    // read, and GNU has created and truncated of= by then; refused here
    // with GNU's own words, before the output is opened.
    row(
        "if=",
        |r| !(r.plan.has_count() && r.plan.count.is_zero()),
        Need::Data,
        Need::Any,
        WritesBeside::Nothing,
        conflicts::none,
    ),
    row(
        "of=",
        |r| r.plan.output.is_some(),
        Need::Any,
        Need::Writable,
        WritesBeside::Nothing,
        conflicts::none,
    ),
    piecewise(
        "seek=",
        |r| r.plan.seek.total_bytes(r.plan.output_block_size) != Some(0),
        "is written whole, from its first byte",
    ),
    piecewise(
        "conv=notrunc",
        |r| r.plan.conv.contains(Conv::NOTRUNC),
        "is replaced whole, never written in place",
    ),
    piecewise(
        "conv=sparse",
        |r| r.plan.conv.contains(Conv::SPARSE),
        "has no holes to leave",
    ),
    piecewise(
        "conv=excl",
        |r| r.plan.conv.contains(Conv::EXCL),
        "is created by its upload, which cannot make sure that none exists under its name",
    ),
    piecewise(
        "conv=nocreat",
        |r| r.plan.conv.contains(Conv::NOCREAT),
        "is created by its upload",
    ),
    piecewise(
        "oflag=append",
        |r| r.plan.output_flags.contains(IoFlags::APPEND),
        "is replaced whole",
    ),
];

const fn piecewise(option: &'static str, asked: fn(&Request) -> bool, why: &'static str) -> Row {
    row(
        option,
        asked,
        Need::Any,
        Need::Piecewise(why),
        WritesBeside::Nothing,
        conflicts::none,
    )
}

/// Every option of ddx's own, and what it needs. The rows that need
/// something come first: the first unmet need is the one reported.
pub const TABLE: &[Row] = &[
    row(
        "--rescue",
        |r| r.settings.rescue,
        Need::Positions,
        Need::Positions,
        WritesBeside::Nothing,
        conflicts::positional,
    ),
    row(
        "--resume",
        |r| r.settings.resume,
        Need::Positions,
        Need::Positions,
        WritesBeside::Map,
        conflicts::positional,
    ),
    row(
        "--map",
        |r| r.settings.map.is_some(),
        Need::Positions,
        Need::Positions,
        WritesBeside::Map,
        conflicts::positional,
    ),
    row(
        "--sector-size",
        |r| r.settings.sector_size.is_some(),
        Need::Positions,
        Need::Positions,
        WritesBeside::Nothing,
        conflicts::sector_size,
    ),
    row(
        "--retry-passes",
        |r| r.settings.retry_passes.is_some(),
        Need::Positions,
        Need::Positions,
        WritesBeside::Nothing,
        conflicts::positional,
    ),
    row(
        "--verify",
        |r| r.settings.verify,
        Need::Any,
        Need::ReadBack,
        WritesBeside::Nothing,
        conflicts::verify,
    ),
    row(
        "--hash-file",
        |r| r.settings.hash_file.is_some(),
        Need::ReadAgain,
        Need::Any,
        WritesBeside::HashFile,
        conflicts::hash_file,
    ),
    row(
        "--trim",
        |r| r.settings.trim,
        Need::Any,
        Need::Discard,
        WritesBeside::Nothing,
        conflicts::trim,
    ),
    row(
        "--fua",
        |r| r.settings.fua,
        Need::Any,
        Need::Fua,
        WritesBeside::Nothing,
        conflicts::none,
    ),
    free("--hash", |r| !r.settings.hash.is_empty()),
    // Tuning: each applies where it can and says so in its help.
    free("--backend", |r| r.settings.backend.is_some()),
    row(
        "--queue-depth",
        |r| r.settings.queue_depth.is_some(),
        Need::Any,
        Need::Any,
        WritesBeside::Nothing,
        conflicts::overlap_tuning,
    ),
    row(
        "--request-size",
        |r| r.settings.request_size.is_some(),
        Need::Any,
        Need::Any,
        WritesBeside::Nothing,
        conflicts::overlap_tuning,
    ),
    free("--offload", |r| r.settings.offload == Offload::Always),
    free("--no-offload", |r| r.settings.offload == Offload::Never),
    free("--keep-cache", |r| r.settings.cache == CacheChoice::Keep),
    free("--drop-cache", |r| r.settings.cache == CacheChoice::Drop),
    // Images: each wraps an end into a stream of its own kind, which the
    // planner plans for (a copy by position refuses them, above).
    // The decoded image must fit an output of fixed size, where its
    // format records its size (facts: `input.size`, the decoded size).
    row(
        "--decompress",
        |r| r.settings.decompress.is_some(),
        Need::Any,
        Need::Room,
        WritesBeside::Nothing,
        conflicts::none,
    ),
    // What a compressed input onto a disk needs is a choice between these
    // two; without either, see `compressed_onto`.
    free("--no-decompress", |r| r.settings.no_decompress),
    row(
        "--compress",
        |r| r.settings.compress.is_some(),
        Need::Any,
        Need::Any,
        WritesBeside::Nothing,
        conflicts::compress,
    ),
    row(
        "--bmap",
        |r| r.settings.bmap.is_some(),
        Need::Any,
        Need::Room,
        WritesBeside::Nothing,
        conflicts::bmap,
    ),
    row(
        "--bmap-create",
        |r| r.settings.bmap_create.is_some(),
        Need::Any,
        Need::Any,
        WritesBeside::BmapCreate,
        conflicts::bmap_create,
    ),
    // Reads the disk as opened, by position: its partition table and its
    // file systems' maps first, then the used blocks where they are.
    row(
        "--used-only",
        |r| r.settings.used_only,
        Need::Positions,
        Need::Any,
        WritesBeside::Nothing,
        conflicts::used_only,
    ),
    // A casync index made of the input (of=*.caibx) or extracted onto
    // the output (if=*.caibx): once extracting, the input is the blob,
    // which must fit a device written with it.
    row(
        "--store",
        |r| r.settings.store.is_some(),
        Need::Data,
        Need::Room,
        WritesBeside::Nothing,
        conflicts::indexed,
    ),
    row(
        "--seed",
        |r| !r.settings.seeds.is_empty(),
        Need::Data,
        Need::Room,
        WritesBeside::Nothing,
        conflicts::indexed,
    ),
    row(
        "--chunk-size",
        |r| r.settings.chunk_size.is_some(),
        Need::Data,
        Need::Any,
        WritesBeside::Nothing,
        conflicts::indexed,
    ),
    // Each further output is held to every row's output need, and to
    // [`TEE_OUTPUT`], in `admit_tees`.
    free("--tee", |r| !r.settings.tee.is_empty()),
    free("bs=auto", |r| r.plan.auto_block_size),
    // Reporting and safety: about the copy, not its ends.
    row(
        "--progress-fd",
        |r| r.settings.progress_fd.is_some(),
        Need::Any,
        Need::Any,
        WritesBeside::Nothing,
        conflicts::progress_fd,
    ),
    free("--verbose", |r| r.settings.verbose),
    free("--force", |r| r.settings.force),
];

/// What every `--tee` output needs, beyond what the rows need of of=:
/// it is opened as of= would be, on this machine.
pub const TEE_OUTPUT: Need = Need::Local;

pub use crate::diagnostic::Refusal;

/// The rows a request asks for: GNU's operands first, then ddx's options.
fn asked(request: &Request) -> impl Iterator<Item = &'static Row> + '_ {
    OPERANDS
        .iter()
        .chain(TABLE)
        .filter(move |row| (row.asked)(request))
}

/// Hold the request to what its options cannot be combined with,
/// whatever the ends: Ok, or the first conflict. Nothing needs to be
/// open for this.
pub fn check(request: &Request) -> Result<(), Refusal> {
    asked(request).try_for_each(|row| (row.conflicts)(request))
}

/// Hold the request to the table: Ok, or the first option that cannot
/// work on these ends, and why.
pub fn admit(request: &Request, facts: &Facts) -> Result<(), Refusal> {
    check(request)?;
    let input = EndName::input(request.plan.input.as_deref());
    let output = EndName::output(request.plan.output.as_deref());
    let written = written(request, &facts.output);
    for row in asked(request) {
        // An upload kept resumable by its map is resumed after its
        // stored parts, not by position (see `conflicts::upload`).
        let upload = row.beside == WritesBeside::Map && facts.output.can.resumable_upload;
        // Standard input is named '-', which its checker reads as such.
        let named = request.plan.input.is_some();
        if row.input == Need::Data && facts.input.kind == Kind::Directory {
            // GNU's message for its first read, which this stands for.
            let name = request.plan.input.as_deref().map_or_else(
                || quote_file(b"standard input"),
                |p| quote_file(p.as_os_str().as_bytes()),
            );
            return Err(Refusal(format!(
                "error reading {name}: {}",
                crate::sys::errno_text(crate::sys::Errno::ISDIR)
            )));
        }
        if let Some(why) = unmet_input(row.input, &facts.input, named).filter(|_| !upload) {
            return Err(refusal(row, &input, why));
        }
        if let Some(why) = unmet_output(row.output, &written).filter(|_| !upload) {
            return Err(refusal(row, &output, why));
        }
        if let Some(why) = no_room(row.output, request, &facts.input, &written) {
            return Err(refusal(row, &output, why));
        }
        match row.beside {
            WritesBeside::Nothing => {}
            WritesBeside::Map => map_place(row.option, request, facts)?,
            WritesBeside::HashFile => {
                if let (Some(path), Some(place)) =
                    (&request.settings.hash_file, &facts.beside.hash_file)
                {
                    writable_place(row.option, path, place, request, facts)?;
                }
            }
            WritesBeside::BmapCreate => {
                if let (Some(path), Some(place)) =
                    (&request.settings.bmap_create, &facts.beside.bmap_create)
                {
                    writable_place(row.option, path, place, request, facts)?;
                }
            }
        }
    }
    Ok(())
}

/// Every `--tee` output against the ends of the copy (`ends`: which file
/// the input and the output are, see `facts::identities`) and each
/// other, and against the same needs as of=: each is written the same
/// bytes and, under `--verify`, read back the same way. `tees` pairs each
/// `--tee` path with its facts (see `facts::output_facts_at`).
pub fn admit_tees(
    request: &Request,
    ends: [Option<Identity>; 2],
    tees: &[(&Path, EndFacts)],
) -> Result<(), Refusal> {
    let plan = &request.plan;
    for (index, (path, end)) in tees.iter().enumerate() {
        let name = EndName::tee(path);
        for need in [TEE_OUTPUT, Need::Writable] {
            if let Some(why) = unmet_output(need, end) {
                return Err(refusal_of("--tee", &name, why));
            }
        }
        let is = |other: Option<&Path>, identity: Option<Identity>| {
            other == Some(*path) || (end.identity.is_some() && end.identity == identity)
        };
        if is(plan.input.as_deref(), ends[0]) || is(plan.output.as_deref(), ends[1]) {
            return Err(Refusal(format!(
                "{} is already an end of the copy: it would be written twice",
                name.quoted
            )));
        }
        if tees[..index]
            .iter()
            .any(|(other, facts)| is(Some(*other), facts.identity))
        {
            return Err(Refusal(format!("{} is given twice", name.quoted)));
        }
        for row in asked(request) {
            if let Some(why) = unmet_output(row.output, end) {
                return Err(refusal(row, &name, why));
            }
        }
    }
    Ok(())
}

/// Whether the output is an upload the server keeps in parts, which
/// `--map` keeps resumable (its rows' needs are then the upload's).
fn resumes_upload(request: &Request) -> bool {
    request
        .plan
        .output
        .as_deref()
        .is_some_and(crate::ends::uri::is_resumable_upload)
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

/// An end as messages name it: quoted as GNU quotes file names, and
/// plain, as a remote end's URI is named where it leads the line (both
/// without an object URL's secrets).
struct EndName {
    quoted: String,
    plain: String,
}

impl EndName {
    fn named(operand: &str, path: &Path) -> EndName {
        let shown = crate::ends::uri::shown(path);
        EndName {
            quoted: format!("{operand}={}", quote_file(&shown)),
            plain: format!("{operand}={}", String::from_utf8_lossy(&shown)),
        }
    }

    fn standard(name: &str) -> EndName {
        EndName {
            quoted: name.to_owned(),
            plain: name.to_owned(),
        }
    }

    fn input(path: Option<&Path>) -> EndName {
        path.map_or(EndName::standard("standard input"), |p| {
            EndName::named("if", p)
        })
    }

    fn output(path: Option<&Path>) -> EndName {
        path.map_or(EndName::standard("standard output"), |p| {
            EndName::named("of", p)
        })
    }

    fn tee(path: &Path) -> EndName {
        let quoted = format!("--tee={}", quote_file(path.as_os_str().as_bytes()));
        EndName {
            plain: quoted.clone(),
            quoted,
        }
    }
}

/// What an unmet need says.
enum Unmet {
    /// What the option does with the end, and what the end is that it
    /// cannot: "--verify reads the output back: of='p' is a pipe, ...".
    Lacks { does: &'static str, lacks: String },
    /// An end that cannot take the option at all, and why:
    /// "of=s3://b/k: seek= cannot be used: an object is written whole...".
    CannotBeUsed(String),
    /// An end that can take nothing of the kind, whatever the option:
    /// "of=http://h/x: only s3:// objects can be written ...".
    Said(&'static str),
}

fn lacks(does: &'static str, kind: Kind, which: &str) -> Option<Unmet> {
    Some(Unmet::Lacks {
        does,
        lacks: format!("is {}, {which}", kind.described()),
    })
}

/// None when the input (`named` by if=) meets the need.
fn unmet_input(need: Need, end: &EndFacts, named: bool) -> Option<Unmet> {
    match need {
        Need::Any
        | Need::ReadBack
        | Need::Discard
        | Need::Writable
        | Need::Piecewise(_)
        | Need::Local
        | Need::Room
        | Need::Fua => None,
        Need::Data if end.kind == Kind::Directory => {
            lacks("reads the input", end.kind, "which has no bytes to read")
        }
        Need::Data => None,
        Need::Positions if end.can.reads_at => None,
        Need::Positions => lacks(
            "reads the input by position",
            end.kind,
            "which has no positions",
        ),
        Need::ReadAgain if named && !end.can.reads_again => lacks(
            "names the input for its checker to read again",
            end.kind,
            "which does not give the same bytes twice",
        ),
        Need::ReadAgain => None,
    }
}

/// None when the output meets the need.
fn unmet_output(need: Need, end: &EndFacts) -> Option<Unmet> {
    match need {
        Need::Any | Need::ReadAgain | Need::Data | Need::Room => None,
        Need::Positions if end.null_device || end.can.writes_at => None,
        Need::Positions if end.can.written_whole => Some(Unmet::CannotBeUsed(format!(
            "{} is uploaded whole, in order, so there is no place in it to come back to \
             (--map keeps an upload resumable)",
            end.kind.described()
        ))),
        Need::Positions => lacks(
            "writes the output by position",
            end.kind,
            "which has no positions",
        ),
        Need::ReadBack if end.null_device => Some(Unmet::Lacks {
            does: "reads the output back",
            lacks: "is the null device, which keeps nothing".into(),
        }),
        // Read back through a descriptor of its own, or an export or an
        // object through a connection of its own.
        Need::ReadBack if end.can.reads_back => None,
        Need::ReadBack => lacks(
            "reads the output back",
            end.kind,
            "which it cannot read back",
        ),
        Need::Discard if !end.null_device && end.can.discards.is_some() => None,
        Need::Discard => lacks(
            "discards zeros on the output",
            end.kind,
            "where nothing can be discarded",
        ),
        Need::Writable => end.can.read_only.map(Unmet::Said),
        Need::Piecewise(why) if end.can.written_whole => Some(Unmet::CannotBeUsed(format!(
            "{} {why}",
            end.kind.described()
        ))),
        Need::Piecewise(_) => None,
        Need::Local if end.can.served => Some(Unmet::Said(
            "a further output is a file or a device, not a remote end",
        )),
        Need::Local => None,
        Need::Fua if end.can.fua => None,
        Need::Fua => Some(Unmet::Lacks {
            does: "sends each write with force unit access",
            lacks: format!(
                "is {}, not a SCSI or NVMe generic node (/dev/sg*, /dev/bsg/*, /dev/ng*); \
                 oflag=dsync makes each write durable there",
                end.kind.described()
            ),
        }),
    }
}

/// Some when the output's fixed size (a device's, an export's) cannot
/// hold what the copy writes of an input whose size is known (a mapped
/// image's, a compressed image's decoded size): its bytes after skip=,
/// at most count=, from seek= on.
fn no_room(need: Need, request: &Request, input: &EndFacts, output: &EndFacts) -> Option<Unmet> {
    let (Need::Room, Some(image), Some(size)) = (need, input.size, output.size) else {
        return None;
    };
    if !output.can.fixed_size {
        return None;
    }
    let plan = &request.plan;
    let skip = plan.skip.total_bytes(plan.input_block_size).unwrap_or(0);
    let mut bytes = image.saturating_sub(skip);
    if plan.has_count() {
        let count = plan
            .count
            .records
            .saturating_mul(plan.input_block_size as u64)
            .saturating_add(plan.count.bytes);
        bytes = bytes.min(count);
    }
    let seek = plan.seek.total_bytes(plan.output_block_size).unwrap_or(0);
    let room = size.saturating_sub(seek);
    let from = if seek > 0 {
        format!(", written from byte {seek} (seek=), where {room} bytes are left")
    } else {
        String::new()
    };
    (room < bytes).then(|| Unmet::Lacks {
        does: "writes the whole image",
        lacks: format!(
            "is {} of {size} bytes, and the image is {bytes} bytes{from}",
            output.kind.described()
        ),
    })
}

/// Every further output (`--tee`) against what the copy writes, once the
/// input's size is known (a compressed image's decoded size is known
/// once it is open): an output of fixed size must hold it.
pub fn admit_room(
    request: &Request,
    input: &EndFacts,
    outputs: &[(&Path, EndFacts)],
) -> Result<(), Refusal> {
    for (path, end) in outputs {
        let name = EndName::tee(path);
        for row in asked(request) {
            if let Some(why) = no_room(row.output, request, input, end) {
                return Err(refusal(row, &name, why));
            }
        }
    }
    Ok(())
}

/// The output as opened, whose size only its opening tells (an NBD
/// export's), against what the copy writes.
pub fn admit_opened_room(
    request: &Request,
    input: &EndFacts,
    output: &EndFacts,
) -> Result<(), Refusal> {
    let name = EndName::output(request.plan.output.as_deref());
    for row in asked(request) {
        if let Some(why) = no_room(row.output, request, input, &written(request, output)) {
            return Err(refusal(row, &name, why));
        }
    }
    Ok(())
}

fn refusal(row: &Row, end: &EndName, unmet: Unmet) -> Refusal {
    refusal_of(row.option, end, unmet)
}

fn refusal_of(option: &str, end: &EndName, unmet: Unmet) -> Refusal {
    Refusal(match unmet {
        Unmet::Lacks { does, lacks } => format!("{option} {does}: {} {lacks}", end.quoted),
        Unmet::CannotBeUsed(why) => format!("{}: {option} cannot be used: {why}", end.plain),
        Unmet::Said(why) => format!("{}: {why}", end.plain),
    })
}

/// The map a copy by position keeps: a file ddx can write, and, for the
/// checkpoint `--resume` keeps beside the output, an output that is a
/// file (a map beside a device node would land in /dev). A copy resumed
/// from a map it left is not hashed or verified: the digests would cover
/// only the part copied now.
fn map_place(option: &str, request: &Request, facts: &Facts) -> Result<(), Refusal> {
    let settings = &request.settings;
    let named = settings.map.is_some();
    if !named && settings.resume && facts.output.kind != Kind::RegularFile {
        return Err(Refusal(format!(
            "--resume keeps its map beside the output, and {} is {}: name the map with \
             --map=FILE",
            EndName::output(request.plan.output.as_deref()).quoted,
            facts.output.kind.described()
        )));
    }
    let Some(place) = &facts.beside.map else {
        return Ok(());
    };
    let resuming = settings.resume && place.kind.is_some();
    if resuming && (settings.verify || !settings.hash.is_empty()) {
        return Err(Refusal(
            "--hash and --verify cannot be combined with resuming a copy: they would see \
             only the part copied now"
                .into(),
        ));
    }
    let path = match (&settings.map, &request.plan.output) {
        (Some(path), _) => path.clone(),
        (None, Some(output)) => {
            let mut path = output.as_os_str().to_owned();
            path.push(crate::rescue::CHECKPOINT_SUFFIX);
            path.into()
        }
        (None, None) => return Ok(()),
    };
    if named {
        writable_place("--map", &path, place, request, facts)
    } else {
        let quoted = quote_file(path.as_os_str().as_bytes());
        place_refusal(
            &format!("{option}: its map {quoted}"),
            &path,
            place,
            request,
            facts,
        )
    }
}

/// A file ddx will write beside the copy (`option=path`): nothing there
/// or a regular file that is neither end of the copy, and writable.
fn writable_place(
    option: &str,
    path: &Path,
    place: &Place,
    request: &Request,
    facts: &Facts,
) -> Result<(), Refusal> {
    let named = format!("{option}={}", quote_file(path.as_os_str().as_bytes()));
    place_refusal(&named, path, place, request, facts)
}

fn place_refusal(
    named: &str,
    path: &Path,
    place: &Place,
    request: &Request,
    facts: &Facts,
) -> Result<(), Refusal> {
    if let Some(kind) = place.kind.filter(|kind| *kind != Kind::RegularFile) {
        return Err(Refusal(format!(
            "{named} is {}, not a file ddx may write",
            kind.described()
        )));
    }
    // An end is the same file as the place, or, where neither exists
    // yet, has its name.
    let plan = &request.plan;
    let is = |end: Option<&Path>, identity: Option<Identity>| {
        end == Some(path) || (place.identity.is_some() && place.identity == identity)
    };
    if is(plan.input.as_deref(), facts.input.identity)
        || is(plan.output.as_deref(), facts.output.identity)
    {
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

/// Why an output takes a compressed input's bytes as a disk image: GNU
/// would write the compressed stream onto it as it is, which is never
/// what a flash means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Onto {
    BlockDevice,
    /// An NBD export: a disk on another machine.
    Export,
    /// A file named as the input without its compression suffix (the
    /// suffix, as the input's name has it): `img.raw.xz` onto `img.raw`.
    NameWithoutSuffix(String),
}

/// A compressed input about to be written as it is onto an output that
/// takes it as a disk image ([`compressed_onto`]): the copy asks on a
/// terminal and otherwise refuses, naming the format and the options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressedOnto {
    pub format: crate::image::Format,
    /// The input as messages name it: `if='img.raw.xz'`.
    pub input: String,
    /// The output as messages name it: `of='/dev/sdb'`, `--tee='x'`.
    pub output: String,
    pub onto: Onto,
}

impl CompressedOnto {
    /// What the output is, as the rest of a sentence says it.
    fn what(&self) -> String {
        match &self.onto {
            Onto::BlockDevice => "a block device".into(),
            Onto::Export => "an NBD export".into(),
            Onto::NameWithoutSuffix(suffix) => {
                format!("the input's name without {}", quote_file(suffix.as_bytes()))
            }
        }
    }

    /// The one line of a copy that is not asked (no terminal).
    pub fn refusal(&self) -> Refusal {
        Refusal(format!(
            "{} is {}-compressed and {} is {}: --decompress writes the image it holds, \
             --no-decompress its compressed bytes as they are",
            self.input,
            self.format,
            self.output,
            self.what()
        ))
    }

    /// What a person at a terminal is told before being asked.
    pub fn notice(&self) -> String {
        format!(
            "{} is {}-compressed: this copy writes its compressed bytes as they are onto {}, \
             which is {} (--decompress writes the image it holds)",
            self.input,
            self.format,
            self.output,
            self.what()
        )
    }

    /// The line after a person said no.
    pub fn declined(&self) -> Refusal {
        Refusal(format!(
            "not writing {}-compressed bytes onto {}: --decompress writes the image, \
             --no-decompress the bytes as they are",
            self.format, self.output
        ))
    }
}

/// Compression suffixes, and what a name without them ends with instead
/// (`x.tgz` unpacks to `x.tar`).
const SUFFIXES: &[(&str, &str)] = &[
    (".xz", ""),
    (".zst", ""),
    (".zstd", ""),
    (".gz", ""),
    (".bz2", ""),
    (".lz4", ""),
    (".tgz", ".tar"),
    (".txz", ".tar"),
    (".tzst", ".tar"),
    (".tbz2", ".tar"),
    (".tbz", ".tar"),
];

/// The suffix `output`'s file name drops from `input`'s (`img.raw.xz`
/// and `/mnt/img.raw`), if it does.
fn dropped_suffix(input: &Path, output: &Path) -> Option<String> {
    let input = input.file_name()?.as_bytes();
    let output = output.file_name()?.as_bytes();
    SUFFIXES.iter().find_map(|(suffix, instead)| {
        let cut = input
            .len()
            .checked_sub(suffix.len())
            .filter(|&cut| cut > 0)?;
        let (stem, tail) = input.split_at(cut);
        let matches = tail.eq_ignore_ascii_case(suffix.as_bytes())
            && output.len() == stem.len() + instead.len()
            && output.starts_with(stem)
            && output[stem.len()..].eq_ignore_ascii_case(instead.as_bytes());
        matches.then(|| String::from_utf8_lossy(tail).into_owned())
    })
}

/// Whether an output (`of=`, named `path`; None: standard output) takes
/// the input's bytes as a disk image: a whole device's blocks, storage
/// served by another machine and written in place (an NBD export; an
/// object is written whole, as a file is), or a file named as the input
/// without its compression suffix.
fn onto(request: &Request, path: Option<&Path>, end: &EndFacts) -> Option<Onto> {
    let can = &end.can;
    if can.device {
        Some(Onto::BlockDevice)
    } else if can.served && can.writes_at {
        Some(Onto::Export)
    } else if can.local_storage {
        dropped_suffix(request.plan.input.as_deref()?, path?).map(Onto::NameWithoutSuffix)
    } else {
        None
    }
}

/// Whether the copy writes the input's bytes as they are without having
/// been told what they are: neither `--decompress` nor
/// `--no-decompress`, nor `--compress` (whose output is no image), nor a
/// casync index made or extracted (`--store`: the index's blob is what is
/// written, or the index is).
pub fn copies_input_unasked(request: &Request) -> bool {
    let settings = &request.settings;
    settings.decompress.is_none()
        && !settings.no_decompress
        && settings.compress.is_none()
        && !request.indexed()
}

/// Whether the input's format matters to this copy: it copies the input
/// unasked ([`copies_input_unasked`]) onto an output (`of=`, or a
/// `--tee` output, with its facts) that takes it as a disk image. The
/// copy looks at the input's first bytes only then.
pub fn input_format_matters(
    request: &Request,
    output: &EndFacts,
    tees: &[(&Path, EndFacts)],
) -> bool {
    if !copies_input_unasked(request) {
        return false;
    }
    onto(request, request.plan.output.as_deref(), output).is_some()
        || tees
            .iter()
            .any(|(path, end)| onto(request, Some(path), end).is_some())
}

/// A compressed input (`facts.input.compressed`) that this copy would
/// write as it is onto an output that takes it as a disk image (see
/// [`input_format_matters`]); the first such output.
pub fn compressed_onto(
    request: &Request,
    facts: &Facts,
    tees: &[(&Path, EndFacts)],
) -> Option<CompressedOnto> {
    let format = facts.input.compressed?;
    if !input_format_matters(request, &facts.output, tees) {
        return None;
    }
    let of = request.plan.output.as_deref();
    let (output, onto) = match onto(request, of, &facts.output) {
        Some(onto) => (EndName::output(of).quoted, onto),
        None => tees.iter().find_map(|(path, end)| {
            let onto = onto(request, Some(path), end)?;
            Some((EndName::tee(path).quoted, onto))
        })?,
    };
    Some(CompressedOnto {
        format,
        input: EndName::input(request.plan.input.as_deref()).quoted,
        output,
        onto,
    })
}

#[cfg(test)]
mod tests;
