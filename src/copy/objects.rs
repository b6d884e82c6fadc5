//! What `--map` and `--resume` mean for an upload (an `s3://` object as
//! the output): the map keeps the upload resumable.
//!
//! An object is written whole and appears under its key only when its
//! upload completes; what it cannot be asked to do (seek=, conv=notrunc,
//! `--rescue`, ...) is refused by rows of `planner::needs`. With
//! `--map=FILE` the multipart upload's id and the parts the server stored
//! are kept in the map (see `ends::upload`), with the input's range
//! those parts hold marked finished, and a copy that fails or is
//! interrupted leaves the upload on the server instead of aborting it.
//! `--resume` then continues it: the input is skipped to where the
//! recorded parts end and the next part follows them, once the server
//! confirmed it still holds them (the output end checks). This needs the
//! object's bytes to be the input's, one for one, or, with `--compress`,
//! independent frames (zstd, gzip) that parts end on: `planner::needs`
//! refuses the rest.

use std::path::{Path, PathBuf};

use crate::diagnostic::Refusal;
use crate::ends::upload::{Journal, UploadRecord};
use crate::ends::uri;
use crate::operands::CopyPlan;
use crate::request::Settings;
use crate::rescue::identity::Recorded;
use crate::rescue::mapfile::{BlockStatus, Map};
use crate::text::quote::quote_file;

/// An upload kept resumable by `--map`: what the map holds when the copy
/// starts and, once the copy knows its extent ([`UploadMap::kept`]), the
/// [`Journal`] the upload records its progress in. The map's extent is
/// the copy's input, the part the stored parts hold marked finished, and
/// the upload's record in its comments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadMap {
    pub path: PathBuf,
    /// The upload a `--resume` continues (None: a new one).
    pub resume: Option<UploadRecord>,
    /// Where the copy's input starts (skip=, before any resume).
    pub start: u64,
    /// What the map records of the resumed upload's input and output.
    pub recorded: Option<Recorded>,
    /// The line saying that the map named was not there, and the upload
    /// starts from the beginning.
    pub notice: Option<String>,
    /// What the map records once the copy knows it.
    kept: Kept,
}

/// What a map records beside the upload: the command, where the input
/// ends, and the copy's ends (`rescue::identity`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Kept {
    command_line: String,
    end: u64,
    ends: String,
}

/// Whether the copy's output is an upload the server keeps in parts
/// (an `s3://` object), which `--map` makes resumable.
pub fn is_upload(plan: &CopyPlan) -> bool {
    plan.output.as_deref().is_some_and(uri::is_resumable_upload)
}

/// With `--map`, the upload to keep resumable (and, resuming, `plan` is
/// what is left of the copy). What `--map` and `--resume` cannot be
/// combined with on an upload was refused by `planner::needs` already;
/// Err is the one line saying why the map cannot serve.
pub fn prepare(plan: &mut CopyPlan, settings: &Settings) -> Result<Option<UploadMap>, Refusal> {
    if !is_upload(plan) {
        return Ok(None);
    }
    let Some(map) = settings.map.clone() else {
        return Ok(None);
    };
    let start = plan.skip.total_bytes(plan.input_block_size).unwrap_or(0);
    let shown = quote_file(map.as_os_str().as_encoded_bytes());
    if !map.exists() {
        let named_by = if settings.resume {
            "--resume: no map"
        } else {
            "--map: no map"
        };
        return Ok(Some(UploadMap {
            path: map,
            resume: None,
            start,
            recorded: None,
            notice: Some(format!(
                "{named_by} {shown} yet: the upload starts from the beginning, and {shown} \
                 will record it"
            )),
            kept: Kept::default(),
        }));
    }
    if !settings.resume {
        return Err(Refusal(format!(
            "the map {shown} exists: add --resume to continue that upload, or remove it to \
             start over"
        )));
    }
    let text = std::fs::read_to_string(&map)
        .map_err(|e| Refusal(format!("--resume: map {shown}: {e}")))?;
    let record = UploadRecord::parse(&text)
        .map_err(|why| Refusal(format!("--resume: map {shown}: {why}")))?;
    let Some(record) = record else {
        let finished = Map::parse(&text, 0, 0).is_ok_and(|m| m.current_status == '+');
        return Err(Refusal(if finished {
            format!("the map {shown} says its upload completed: remove it to upload again")
        } else {
            format!("--resume: the map {shown} records no upload (it is the map of another copy)")
        }));
    };
    if settings.verify || !settings.hash.is_empty() {
        return Err(Refusal(
            "--hash and --verify cannot be combined with resuming a copy: they would see \
             only the part copied now"
                .into(),
        ));
    }
    let recorded = Recorded::read(&text);
    if let (Some(was), Some(output)) = (&recorded.output, &plan.output) {
        let now = String::from_utf8_lossy(&uri::shown(output)).into_owned();
        if was.name != now {
            return Err(Refusal(format!(
                "--resume: the map {shown} records an upload to {}, not to {}: give of={} \
                 to continue that upload, or remove the map to start over",
                quote_file(was.name.as_bytes()),
                quote_file(now.as_bytes()),
                was.name
            )));
        }
    }
    *plan = plan.clone().continued_after(record.source_end());
    Ok(Some(UploadMap {
        path: map,
        resume: Some(record),
        start,
        recorded: Some(recorded),
        notice: None,
        kept: Kept::default(),
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

impl UploadMap {
    /// The map as the upload keeps it: for an input range of `len` bytes,
    /// recording the command and the copy's `ends`.
    pub fn kept(&self, len: u64, command_line: &str, ends: String) -> UploadMap {
        UploadMap {
            kept: Kept {
                command_line: command_line.to_owned(),
                end: self.start.saturating_add(len),
                ends,
            },
            ..self.clone()
        }
    }

    fn save(&self, map: &Map, notes: &str) -> Result<(), String> {
        let notes = format!("{}{notes}", self.kept.ends);
        map.save_noted(Path::new(&self.path), &self.kept.command_line, &notes)
            .map_err(|e| e.to_string())
    }
}

impl Journal for UploadMap {
    fn record(&mut self, upload: &UploadRecord) -> Result<(), String> {
        let end = self.kept.end;
        let mut map = Map::new(self.start, end);
        let done = upload.source_end().min(end - self.start);
        map.mark(self.start, done, BlockStatus::Finished);
        map.current_pos = self.start + done;
        self.save(&map, &upload.render())
    }

    fn completed(&mut self) -> Result<(), String> {
        let end = self.kept.end;
        let mut map = Map::new(self.start, end);
        map.mark(self.start, end - self.start, BlockStatus::Finished);
        map.current_pos = end;
        map.current_status = '+';
        self.save(&map, "")
    }
}
