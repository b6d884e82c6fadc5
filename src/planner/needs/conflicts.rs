//! What each option cannot be combined with, whatever the ends: the
//! operands and options that would make it do something other than what
//! it says. Each function is the `conflicts` of one or more rows of the
//! table (see [`super::TABLE`]); each is pure, so that a copy is refused
//! before anything is opened.

use crate::integrity::checkfile;
use crate::operands::symbols::{conv_symbols_in, flag_symbols_in, DATA_CONVERSIONS};
use crate::operands::{Conv, IoFlags};
use crate::request::{first_given, BackendChoice, Request};

use super::Refusal;

type Checked = Result<(), Refusal>;

fn refuse(line: String) -> Checked {
    Err(Refusal(line))
}

/// Nothing: the option goes with anything.
pub fn none(_: &Request) -> Checked {
    Ok(())
}

/// The image options asked for, in the order messages name them.
fn image_options(request: &Request) -> Option<&'static str> {
    let settings = &request.settings;
    first_given([
        (settings.decompress.is_some(), "--decompress"),
        (settings.compress.is_some(), "--compress"),
        (settings.bmap.is_some(), "--bmap"),
        (settings.bmap_create.is_some(), "--bmap-create"),
        (settings.used_only, "--used-only"),
        (!settings.tee.is_empty(), "--tee"),
    ])
}

/// The copy by position asked for (`--rescue`, `--retry-passes`,
/// `--resume`, `--map`), as messages name it.
fn positional_option(request: &Request) -> Option<&'static str> {
    let settings = &request.settings;
    first_given([
        (settings.rescue, "--rescue"),
        (settings.retry_passes.is_some(), "--retry-passes"),
        (settings.resume, "--resume"),
        (settings.map.is_some(), "--map"),
    ])
}

/// A copy by position (`--rescue`, `--retry-passes`, `--resume`, `--map`)
/// reads each byte from its place and writes it to its place: two named
/// ends, bytes unchanged, nothing that moves them.
pub fn positional(request: &Request) -> Checked {
    let Some(what) = positional_option(request) else {
        return Ok(());
    };
    let Request { plan, settings } = request;
    if !settings.rescue && settings.retry_passes.is_none() && super::resumes_upload(request) {
        return upload(what, request);
    }
    if plan.input.is_none() {
        return refuse(format!(
            "{what} needs if=FILE: it reads the input by position, not as a stream"
        ));
    }
    if plan.output.is_none() {
        return refuse(format!(
            "{what} needs of=FILE: it writes the output by position, not as a stream"
        ));
    }
    let moved = DATA_CONVERSIONS
        .iter()
        .chain(&[(Conv::SPARSE, "sparse")])
        .find(|(flag, _)| plan.conv.contains(*flag));
    if let Some((_, name)) = moved {
        return refuse(format!(
            "{what} cannot be combined with conv={name}: it copies bytes unchanged, each to \
             the same place"
        ));
    }
    // A rescue (--retry-passes is one) retries what fails instead.
    let rescue = settings.rescue || settings.retry_passes.is_some();
    if plan.conv.contains(Conv::NOERROR) != plan.conv.contains(Conv::SYNC) && !rescue {
        return refuse(format!(
            "{what} needs conv=noerror and conv=sync together (or --rescue): without \
             padding, every read error would move the rest of the output"
        ));
    }
    if plan.conv.contains(Conv::SYNC) && !plan.conv.contains(Conv::NOERROR) {
        return refuse(format!(
            "{what} cannot be combined with conv=sync alone: padding short reads changes \
             where later bytes go"
        ));
    }
    if plan.output_flags.contains(IoFlags::APPEND) {
        return refuse(format!(
            "{what} cannot be combined with oflag=append: it writes by position"
        ));
    }
    if plan.output_flags.contains(IoFlags::DIRECT) {
        return refuse(format!(
            "{what} cannot be combined with oflag=direct (the zeros and tails it writes \
             need not be aligned)"
        ));
    }
    if plan.skip.total_bytes(plan.input_block_size).is_none()
        || plan.seek.total_bytes(plan.output_block_size).is_none()
    {
        return refuse(format!("{what}: skip= or seek= is too large"));
    }
    if let Some(image) = image_options(request) {
        return refuse(format!(
            "{what} cannot be combined with {image}: a copy by position needs a file or \
             device at both ends, not a stream"
        ));
    }
    Ok(())
}

/// `--map`/`--resume` onto an upload (an `s3://` object): the map keeps
/// the upload's parts, and a resumed upload reads the input again from
/// where they end, so the object's bytes must be the input's, one for
/// one, or independent compressed frames that parts end on.
fn upload(what: &str, request: &Request) -> Checked {
    let Request { plan, settings } = request;
    let output = super::EndName::output(plan.output.as_deref()).plain;
    if settings.map.is_none() {
        return refuse(format!(
            "{output}: --resume needs --map=FILE, where the upload's progress is kept: no \
             file can stand beside an object"
        ));
    }
    if plan.input.is_none() {
        return refuse(format!(
            "{output}: {what} needs if=FILE: a resumed upload reads its input again from \
             where the stored parts end"
        ));
    }
    let changes = DATA_CONVERSIONS
        .iter()
        .chain(&[(Conv::SYNC, "sync"), (Conv::NOERROR, "noerror")])
        .find(|(flag, _)| plan.conv.contains(*flag));
    if let Some((_, name)) = changes {
        return refuse(format!(
            "{output}: {what} cannot be combined with conv={name}: where a stored part ends \
             must be a place in the input"
        ));
    }
    let stream = first_given([
        (settings.decompress.is_some(), "--decompress"),
        (settings.bmap.is_some(), "--bmap"),
        (settings.bmap_create.is_some(), "--bmap-create"),
        (!settings.tee.is_empty(), "--tee"),
    ]);
    if let Some(image) = stream {
        return refuse(format!(
            "{output}: {what} cannot be combined with {image}: a resumed upload reads the \
             input again from where the stored parts end"
        ));
    }
    if settings
        .compress
        .is_some_and(|c| c.algorithm == crate::image::compress::Algorithm::Xz)
    {
        return refuse(format!(
            "{output}: {what} cannot be combined with --compress=xz, which writes one stream: \
             zstd and gzip write independent frames, which parts end on"
        ));
    }
    Ok(())
}

/// `--sector-size` is the unit `--rescue` retries in.
pub fn sector_size(request: &Request) -> Checked {
    if positional_option(request).is_none() {
        return refuse("--sector-size is the retry unit of --rescue: add --rescue".into());
    }
    Ok(())
}

/// `--verify` reads back the bytes it was given, where they were written.
pub fn verify(request: &Request) -> Checked {
    let plan = &request.plan;
    if plan.output.is_none() {
        return refuse("--verify needs of=FILE: it reads the output back".into());
    }
    if plan.output_flags.contains(IoFlags::APPEND) {
        return refuse("--verify cannot be combined with oflag=append".into());
    }
    if let Some((_, name)) = DATA_CONVERSIONS
        .iter()
        .find(|(flag, _)| plan.conv.contains(*flag))
    {
        return refuse(format!(
            "--verify cannot be combined with conv={name}: the output is not the bytes read"
        ));
    }
    Ok(())
}

/// `--hash-file`: one algorithm's digest, of the whole input it names, in
/// a line its checker can read.
pub fn hash_file(request: &Request) -> Checked {
    let Request { plan, settings } = request;
    let algorithm = match settings.hash.as_slice() {
        [one] => *one,
        [] => return refuse("--hash-file needs --hash=ALG: the digest it holds".into()),
        _ => {
            return refuse(
                "--hash-file holds one algorithm's digest, in that checker's format: give \
                 one algorithm in --hash"
                    .into(),
            )
        }
    };
    let part = first_given([
        (
            plan.skip.total_bytes(plan.input_block_size) != Some(0),
            "skip=",
        ),
        (plan.has_count(), "count="),
        (plan.conv.contains(Conv::SYNC), "conv=sync"),
    ]);
    if let Some(operand) = part {
        return refuse(format!(
            "--hash-file names the input as what its digest covers: it cannot be combined \
             with {operand}, which makes the digest cover something else"
        ));
    }
    match checkfile::unwritable(algorithm, &checkfile::input_name(plan.input.as_deref())) {
        Some(why) => refuse(why),
        None => Ok(()),
    }
}

/// `--trim` discards where the zeros would have been written: not where
/// the bytes go elsewhere (oflag=append writes at the end whatever the
/// position; a copy by position writes each chunk as it reads it, zeros
/// included).
pub fn trim(request: &Request) -> Checked {
    let other = if request.plan.output_flags.contains(IoFlags::APPEND) {
        Some("oflag=append: an appended output is written at its end, not where its zeros would be discarded")
    } else if positional_option(request).is_some() {
        Some("--rescue, --map and --resume: a copy by position writes each chunk as it reads it")
    } else {
        None
    };
    match other {
        Some(other) => refuse(format!("--trim cannot be combined with {other}")),
        None => Ok(()),
    }
}

/// A tuning of the overlapped backends' requests, with GNU's own loop
/// asked for.
pub fn overlap_tuning(request: &Request) -> Checked {
    let settings = &request.settings;
    if settings.backend != Some(BackendChoice::Sync) {
        return Ok(());
    }
    let tuning = first_given([
        (settings.queue_depth.is_some(), "--queue-depth"),
        (settings.request_size.is_some(), "--request-size"),
    ]);
    match tuning {
        Some(option) => refuse(format!(
            "{option} shapes an overlapped backend's requests: --backend=sync reads and \
             writes one record at a time"
        )),
        None => Ok(()),
    }
}

/// `--compress`: the output is one compressed stream, written from its
/// start.
pub fn compress(request: &Request) -> Checked {
    let Request { plan, settings } = request;
    let why = "the output is one compressed stream, written from its start";
    if !plan.seek.is_zero() {
        return refuse(format!("--compress cannot be combined with seek=: {why}"));
    }
    if plan.conv.contains(Conv::NOTRUNC) {
        return refuse(format!(
            "--compress cannot be combined with conv=notrunc: {why}, and the old bytes past \
             its end would follow it"
        ));
    }
    if plan.output_flags.contains(IoFlags::APPEND) {
        return refuse(format!(
            "--compress cannot be combined with oflag=append: {why}"
        ));
    }
    if settings.verify {
        return refuse(
            "--compress cannot be combined with --verify: the output holds the compressed \
             bytes, not those read (--hash gives the digest of what was read)"
                .into(),
        );
    }
    Ok(())
}

/// `--bmap` writes the image as the map describes it, from its first
/// byte to its last: nothing that changes the bytes or where they go.
pub fn bmap(request: &Request) -> Checked {
    let plan = &request.plan;
    let why = "the map describes the whole image, written from the output's start";
    let operand = first_given([
        (!plan.skip.is_zero(), "skip="),
        (plan.has_count(), "count="),
        (!plan.seek.is_zero(), "seek="),
    ]);
    if let Some(operand) = operand {
        return refuse(format!("--bmap cannot be combined with {operand}: {why}"));
    }
    let kept = Conv::NOTRUNC | Conv::NOCREAT | Conv::EXCL | Conv::FDATASYNC | Conv::FSYNC;
    if let Some(name) = conv_symbols_in(plan.conv - kept).next() {
        return refuse(format!(
            "--bmap cannot be combined with conv={name}: the bytes written would not be the \
             mapped blocks as the map checks them"
        ));
    }
    // Holes are found and left out in large requests only (see
    // `planner::bulk_shape`): flags that give each request a meaning
    // would have them written as zeros.
    sought_over(
        request,
        "--bmap",
        "the map is read in large requests",
        "unmapped blocks are sought over",
    )
}

/// `--store`, `--seed`, `--chunk-size`: one end is a casync blob index
/// (named *.caibx), the other its blob. Making one (of=) takes any
/// input, read whole or by its used blocks, and writes the index whole
/// once its chunks are stored; extracting one (if=) writes the whole
/// blob from the output's start, checked chunk by chunk against the
/// index's ids.
pub fn indexed(request: &Request) -> Checked {
    let Request { plan, settings } = request;
    let Some(what) = first_given([
        (settings.store.is_some(), "--store"),
        (!settings.seeds.is_empty(), "--seed"),
        (settings.chunk_size.is_some(), "--chunk-size"),
    ]) else {
        return Ok(());
    };
    let named =
        |end: &Option<std::path::PathBuf>| end.as_deref().is_some_and(crate::request::names_index);
    let archive = plan.input.as_deref().is_some_and(|p| {
        let name = p.to_string_lossy();
        name.ends_with(".caidx") || name.ends_with(".catar")
    });
    if archive && !named(&plan.output) {
        return refuse(format!(
            "{what}: if= is a casync archive (.caidx, .catar), which holds a tree of files; \
             ddx makes and extracts blob indexes (.caibx), the images of whole disks"
        ));
    }
    match (named(&plan.input), named(&plan.output)) {
        (true, true) => {
            return refuse(format!(
                "{what}: if= and of= are both named as casync indexes (.caibx): one end is \
                 the index, the other its blob"
            ))
        }
        (false, false) => {
            return refuse(format!(
                "{what} needs an end named as a casync blob index: of=INDEX.caibx to make one \
                 of the input, or if=INDEX.caibx to write its blob to the output"
            ))
        }
        _ => {}
    }
    if let Some(option) = positional_option(request) {
        return refuse(format!(
            "{what} cannot be combined with {option}: the index is read or written whole"
        ));
    }
    match request.index_job() {
        Some(crate::request::IndexJob::Make) => indexed_make(request),
        _ => indexed_extract(request),
    }
}

fn indexed_make(request: &Request) -> Checked {
    let Request { plan, settings } = request;
    if !settings.seeds.is_empty() {
        return refuse(
            "--seed is for extracting an index (if=INDEX.caibx): making one reads all of \
             the input, and fetches nothing"
                .into(),
        );
    }
    let option = first_given([
        (settings.compress.is_some(), "--compress"),
        (!settings.tee.is_empty(), "--tee"),
        (settings.bmap.is_some(), "--bmap"),
        (settings.verify, "--verify"),
        (settings.trim, "--trim"),
        (settings.fua, "--fua"),
    ]);
    if let Some(option) = option {
        return refuse(format!(
            "--store cannot be combined with {option} when making an index: of= is the \
             index, written whole once every chunk is stored (the chunks are compressed \
             and checked by their ids)"
        ));
    }
    let operand = first_given([
        (!plan.seek.is_zero(), "seek="),
        (plan.conv.contains(Conv::NOTRUNC), "conv=notrunc"),
        (plan.conv.contains(Conv::SPARSE), "conv=sparse"),
        (plan.output_flags.contains(IoFlags::APPEND), "oflag=append"),
        (plan.output_flags.contains(IoFlags::DIRECT), "oflag=direct"),
    ]);
    if let Some(operand) = operand {
        return refuse(format!(
            "--store cannot be combined with {operand} when making an index: the index is \
             written whole, once every chunk is stored"
        ));
    }
    Ok(())
}

fn indexed_extract(request: &Request) -> Checked {
    let Request { plan, settings } = request;
    if settings.chunk_size.is_some() {
        return refuse(
            "--chunk-size is for making an index (of=INDEX.caibx): an index records the sizes \
             it was cut with"
                .into(),
        );
    }
    let why = "the index describes the whole blob, written from the output's start";
    let operand = first_given([
        (!plan.skip.is_zero(), "skip="),
        (plan.has_count(), "count="),
        (!plan.seek.is_zero(), "seek="),
    ]);
    if let Some(operand) = operand {
        return refuse(format!(
            "extracting an index cannot be combined with {operand}: {why}"
        ));
    }
    let kept = Conv::NOTRUNC | Conv::NOCREAT | Conv::EXCL | Conv::FDATASYNC | Conv::FSYNC;
    if let Some(name) = conv_symbols_in(plan.conv - kept).next() {
        return refuse(format!(
            "extracting an index cannot be combined with conv={name}: the bytes written are \
             the blob's, each chunk checked against its id"
        ));
    }
    let option = first_given([
        (settings.decompress.is_some(), "--decompress"),
        (settings.compress.is_some(), "--compress"),
        (settings.bmap.is_some(), "--bmap"),
        (settings.bmap_create.is_some(), "--bmap-create"),
        (settings.used_only, "--used-only"),
        (settings.trim, "--trim"),
        (!settings.hash.is_empty(), "--hash"),
        (settings.hash_file.is_some(), "--hash-file"),
    ]);
    if let Some(option) = option {
        return refuse(format!(
            "extracting an index cannot be combined with {option}: if= is the index, and \
             its blob is written as the index's chunk ids say (--verify reads the output \
             back against them)"
        ));
    }
    // As under --bmap: blocks that already hold their bytes are sought
    // over in large requests, which per-request flags would forbid.
    sought_over(
        request,
        "extracting an index",
        "if= is the index",
        "blocks that already hold their bytes are sought over",
    )
}

/// What a copy that seeks over blocks in large requests (`--bmap`'s
/// holes, an extract's blocks that hold their bytes already) cannot be
/// combined with: flags that give each request a meaning, and nocache.
/// `what` names the option in the refusal; `input_why` and `output_why`
/// say why for iflag= and oflag=.
fn sought_over(request: &Request, what: &str, input_why: &str, output_why: &str) -> Checked {
    let plan = &request.plan;
    let per_request = IoFlags::DIRECT
        | IoFlags::DSYNC
        | IoFlags::SYNC
        | IoFlags::NONBLOCK
        | IoFlags::NOCACHE
        | IoFlags::FULLBLOCK;
    if let Some(name) = flag_symbols_in(plan.input_flags & per_request).next() {
        return refuse(format!(
            "{what} cannot be combined with iflag={name}: {input_why}"
        ));
    }
    if let Some(name) = flag_symbols_in(
        plan.output_flags & (IoFlags::APPEND | IoFlags::NONBLOCK | IoFlags::NOCACHE),
    )
    .next()
    {
        return refuse(format!(
            "{what} cannot be combined with oflag={name}: {output_why}"
        ));
    }
    if plan.input_nocache || plan.output_nocache {
        return refuse(format!("{what} cannot be combined with nocache"));
    }
    Ok(())
}

/// `--bmap-create`: a map of the bytes read, as read.
pub fn bmap_create(request: &Request) -> Checked {
    let plan = &request.plan;
    if let Some(name) = conv_symbols_in(plan.conv & (Conv::SYNC | Conv::NOERROR)).next() {
        return refuse(format!(
            "--bmap-create cannot be combined with conv={name}: the map describes the bytes \
             read, and {name} makes the output something else"
        ));
    }
    if let Some((_, name)) = DATA_CONVERSIONS
        .iter()
        .find(|(flag, _)| plan.conv.contains(*flag))
    {
        return refuse(format!(
            "--bmap-create cannot be combined with conv={name}: the map describes the bytes \
             read, and {name} changes them"
        ));
    }
    Ok(())
}

/// `--used-only` reads a disk by its partition table and file systems:
/// not an image being decoded or filtered through a map.
pub fn used_only(request: &Request) -> Checked {
    let settings = &request.settings;
    let image = first_given([
        (settings.decompress.is_some(), "--decompress"),
        (settings.bmap.is_some(), "--bmap"),
    ]);
    match image {
        Some(other) => refuse(format!(
            "--used-only cannot be combined with {other}: it reads a disk by its partition \
             table and file systems, not an image"
        )),
        None => Ok(()),
    }
}

/// `--progress-fd=1`: JSON in the data would corrupt it.
pub fn progress_fd(request: &Request) -> Checked {
    match request.settings.progress_fd {
        Some(fd @ 1) if request.plan.output.is_none() => refuse(format!(
            "--progress-fd={fd}: standard output carries the copy's data"
        )),
        _ => Ok(()),
    }
}
