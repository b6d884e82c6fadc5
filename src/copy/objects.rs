//! What an object cannot be asked to do as the output of a copy, refused
//! with one line before anything is opened, and what `--map`/`--resume`
//! mean for one.
//!
//! An object is written whole, from its first byte to its last, and
//! appears under its key only when the upload completes: there is no
//! place in it to seek to, nothing to keep beside what is written, and no
//! hole to leave. The operands that need one of these (seek=,
//! conv=notrunc, conv=sparse, oflag=append, conv=excl and conv=nocreat,
//! which ask about an existing object without a way to ask atomically)
//! and `--rescue` are refused here rather than failing half-way, and
//! http(s):// is refused as an output since a web server takes no
//! uploads. An object as the input is read by ranges and supports all of
//! them.
//!
//! `--map=FILE` makes an upload resumable: the multipart upload's id and
//! the parts the server stored are kept in the map (see `ends::upload`),
//! with the input's range those parts hold marked finished, and a copy
//! that fails or is interrupted leaves the upload on the server instead
//! of aborting it. `--resume` then continues it: the input is skipped to
//! where the recorded parts end and the next part follows them, once the
//! server confirmed it still holds them (the output end checks). This
//! needs the object's bytes to be the input's, one for one (no data
//! conversion, no padding), or, with `--compress`, independent frames
//! (zstd, gzip) that parts end on. A map has no place beside an object,
//! so `--resume` onto one needs `--map`.

use std::path::{Path, PathBuf};

use crate::ends::remote::{self, Remote};
use crate::ends::upload::{Journal, UploadRecord};
use crate::operands::{Conv, CopyPlan, IoFlags};
use crate::request::Settings;
use crate::rescue::mapfile::{BlockStatus, Map};
use crate::text::quote::quote_file;

/// An upload kept resumable by `--map`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadMap {
    pub path: PathBuf,
    /// The upload a `--resume` continues (None: a new one).
    pub resume: Option<UploadRecord>,
    /// Where the copy's input starts (skip=, before any resume).
    pub start: u64,
}

/// Whether the copy's output is an object (S3 or http(s)).
pub fn is_object_output(plan: &CopyPlan) -> bool {
    let Some(path) = plan.output.as_deref() else {
        return false;
    };
    matches!(remote::recognise(path), Some(Ok(Remote::Object(_))))
}

/// Err: the one line saying why this copy cannot write its object. With
/// `--map`, the upload to keep resumable (and, resuming, `plan` is what
/// is left of the copy).
pub fn check(plan: &mut CopyPlan, settings: &Settings) -> Result<Option<UploadMap>, String> {
    let Some(path) = plan.output.as_deref() else {
        return Ok(None);
    };
    let Some(Ok(Remote::Object(url))) = remote::recognise(path) else {
        return Ok(None);
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
    if settings.rescue {
        return Err(named(
            "--rescue cannot be used: an object is uploaded whole, in order, so there is no \
             place in it to come back to (--map keeps an upload resumable)",
        ));
    }
    if settings.map.is_none() && !settings.resume {
        return Ok(None);
    }
    let Some(map) = settings.map.clone() else {
        return Err(named(
            "--resume needs --map=FILE, where the upload's progress is kept: no file can \
             stand beside an object",
        ));
    };
    let option = if settings.resume { "--resume" } else { "--map" };
    if plan.input.is_none() {
        return Err(named(&format!(
            "{option} needs if=FILE: a resumed upload reads its input again from where the \
             stored parts end"
        )));
    }
    let mut changes = crate::operands::symbols::DATA_CONVERSIONS
        .iter()
        .chain(&[(Conv::SYNC, "sync"), (Conv::NOERROR, "noerror")]);
    if let Some((_, name)) = changes.find(|(flag, _)| plan.conv.contains(*flag)) {
        return Err(named(&format!(
            "{option} cannot be combined with conv={name}: where a stored part ends must be \
             a place in the input"
        )));
    }
    if let Some(compression) = settings.compress {
        if compression.algorithm == crate::image::compress::Algorithm::Xz {
            return Err(named(&format!(
                "{option} cannot be combined with --compress=xz, which writes one stream: \
                 zstd and gzip write independent frames, which parts end on"
            )));
        }
    }
    let start = plan.skip.total_bytes(plan.input_block_size).unwrap_or(0);
    if !map.exists() {
        return Ok(Some(UploadMap {
            path: map,
            resume: None,
            start,
        }));
    }
    let shown = quote_file(map.as_os_str().as_encoded_bytes());
    if !settings.resume {
        return Err(format!(
            "the map {shown} exists: add --resume to continue that upload, or remove it to \
             start over"
        ));
    }
    let text = std::fs::read_to_string(&map).map_err(|e| format!("--resume: map {shown}: {e}"))?;
    let record =
        UploadRecord::parse(&text).map_err(|why| format!("--resume: map {shown}: {why}"))?;
    let Some(record) = record else {
        let finished = Map::parse(&text, 0, 0).is_ok_and(|m| m.current_status == '+');
        return Err(if finished {
            format!("the map {shown} says its upload completed: remove it to upload again")
        } else {
            format!("--resume: the map {shown} records no upload (it is the map of another copy)")
        });
    };
    if settings.verify || !settings.hash.is_empty() {
        return Err(
            "--hash and --verify cannot be combined with resuming a copy: they would see \
             only the part copied now"
                .into(),
        );
    }
    *plan = plan.clone().continued_after(record.source_end());
    Ok(Some(UploadMap {
        path: map,
        resume: Some(record),
        start,
    }))
}

/// The line a resumed upload starts with.
pub fn resume_summary(upload: &UploadMap, record: &UploadRecord, left: Option<u64>) -> String {
    let done = record.source_end();
    let left = left.map_or_else(|| "the rest".to_owned(), |l| format!("{l} bytes"));
    format!(
        "resuming upload {} from {}: {} parts stored, {done} bytes of the input done, {left} left",
        record.id,
        quote_file(upload.path.as_os_str().as_encoded_bytes()),
        record.parts.len(),
    )
}

/// The map kept for an upload: its extent is the copy's input, the part
/// the stored parts hold marked finished, and the upload's record in its
/// comments.
pub struct MapJournal {
    path: PathBuf,
    command_line: String,
    start: u64,
    end: u64,
}

impl MapJournal {
    /// A journal in `upload`'s map for an input range of `len` bytes.
    pub fn new(upload: &UploadMap, len: u64, command_line: &str) -> MapJournal {
        MapJournal {
            path: upload.path.clone(),
            command_line: command_line.to_owned(),
            start: upload.start,
            end: upload.start.saturating_add(len),
        }
    }

    fn save(&self, map: &Map, notes: &str) -> Result<(), String> {
        map.save_noted(Path::new(&self.path), &self.command_line, notes)
            .map_err(|e| e.to_string())
    }
}

impl Journal for MapJournal {
    fn record(&mut self, upload: &UploadRecord) -> Result<(), String> {
        let mut map = Map::new(self.start, self.end);
        let done = upload.source_end().min(self.end - self.start);
        map.mark(self.start, done, BlockStatus::Finished);
        map.current_pos = self.start + done;
        self.save(&map, &upload.render())
    }

    fn completed(&mut self) -> Result<(), String> {
        let mut map = Map::new(self.start, self.end);
        map.mark(self.start, self.end - self.start, BlockStatus::Finished);
        map.current_pos = self.end;
        map.current_status = '+';
        self.save(&map, "")
    }
}
