//! What a resumable upload keeps in the map of `--map`/`--resume`: the
//! multipart upload's id and the parts the server has stored, each with
//! its size, its ETag and the offset of the copy's input where its bytes
//! end, so that a later run can check them against the server (ListParts)
//! and go on from the input offset where the last of them ends.
//!
//! Only a prefix of parts is recorded: parts are sent in parallel and
//! may be stored out of order, but a run can resume only from where every
//! earlier part is stored. A part stored beyond that prefix is sent again
//! under its number, which replaces it.
//!
//! The record is written as comment lines of GNU ddrescue's mapfile
//! (ddrescue and ddrescuelog skip them), between the map's header and its
//! status line:
//!
//! ```text
//! # ddx upload: 2f1c...e9
//! # ddx part: 1 16777216 16777216 "5d41402abc4b2a76b9719d911017c592" sha256=oplo...Xzw=
//! ```
//!
//! a part line giving its number, its size in the object, the input
//! offset where its bytes end (from the copy's start), its ETag as the
//! server gave it and, where the server checked one, the part's SHA-256
//! (the completing request names every part's checksum). Always built:
//! the copy driver keeps the map whether or not ddx was built with the
//! object end.

/// One part the server has stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPart {
    /// S3's part number, from 1.
    pub number: usize,
    /// Its bytes in the object.
    pub size: u64,
    /// Bytes of the copy's input (from its start, after skip=) that the
    /// parts up to and including this one hold: the object's own offset
    /// for a plain upload, more under `--compress`, whose parts end at
    /// frame boundaries.
    pub source_end: u64,
    /// The ETag the server answered the part with.
    pub etag: String,
    /// The SHA-256 the server checked the part's bytes against (base64),
    /// where it said.
    pub sha256: Option<String>,
}

/// A multipart upload in progress, and its parts stored so far.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UploadRecord {
    pub id: String,
    /// Parts 1..=n, in order.
    pub parts: Vec<StoredPart>,
}

const UPLOAD: &str = "# ddx upload: ";
const PART: &str = "# ddx part: ";
const SHA256: &str = " sha256=";

impl UploadRecord {
    /// The input offset the next run goes on from.
    pub fn source_end(&self) -> u64 {
        self.parts.last().map_or(0, |p| p.source_end)
    }

    /// The object bytes stored so far.
    pub fn stored(&self) -> u64 {
        self.parts.iter().map(|p| p.size).sum()
    }

    /// The comment lines that record it, each ending in a newline.
    pub fn render(&self) -> String {
        let mut text = format!("{UPLOAD}{}\n", self.id);
        for part in &self.parts {
            text.push_str(&format!(
                "{PART}{} {} {} {}",
                part.number, part.size, part.source_end, part.etag
            ));
            if let Some(sha256) = &part.sha256 {
                text.push_str(&format!("{SHA256}{sha256}"));
            }
            text.push('\n');
        }
        text
    }

    /// The record a map's text holds, if any; Err names the line that
    /// cannot be read.
    pub fn parse(text: &str) -> Result<Option<UploadRecord>, String> {
        let mut record: Option<UploadRecord> = None;
        for (index, line) in text.lines().enumerate() {
            let bad = |what: &str| format!("line {}: {what}", index + 1);
            if let Some(id) = line.strip_prefix(UPLOAD) {
                let id = id.trim();
                if id.is_empty() || record.is_some() {
                    return Err(bad("a second or empty upload id"));
                }
                record = Some(UploadRecord {
                    id: id.to_owned(),
                    parts: Vec::new(),
                });
            } else if let Some(fields) = line.strip_prefix(PART) {
                let Some(upload) = record.as_mut() else {
                    return Err(bad("a part before the upload id"));
                };
                let mut words = fields.splitn(4, ' ');
                let mut number = || words.next().and_then(|w| w.parse::<u64>().ok());
                let (Some(n), Some(size), Some(source_end)) = (number(), number(), number()) else {
                    return Err(bad("expected 'number size input-end etag'"));
                };
                let rest = words.next().unwrap_or("");
                // The checksum, last and of base64's characters only,
                // where the line has one.
                let (etag, sha256) = match rest.rsplit_once(SHA256) {
                    Some((etag, sha256))
                        if !sha256.is_empty()
                            && sha256
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b)) =>
                    {
                        (etag.trim(), Some(sha256.to_owned()))
                    }
                    _ => (rest.trim(), None),
                };
                let follows = upload
                    .parts
                    .last()
                    .map_or((1, 0), |p| (p.number + 1, p.source_end));
                if n as usize != follows.0 || source_end < follows.1 || etag.is_empty() {
                    return Err(bad("parts out of order, or one without its ETag"));
                }
                upload.parts.push(StoredPart {
                    number: n as usize,
                    size,
                    source_end,
                    etag: etag.to_owned(),
                    sha256,
                });
            }
        }
        Ok(record)
    }
}

/// An end written as one upload of parts, which a map can keep
/// resumable (see `ends::object::writer`). The engine's window gathers
/// the bytes written into requests of [`Upload::part_len`] bytes, one per
/// part, and hands the end what only the upload needs to know.
pub trait Upload {
    /// After the end is finalised: whether the store itself confirmed
    /// that it holds exactly the bytes written (an object whose checksum,
    /// as the server computed it, is the one of the bytes sent), for
    /// `--verify` to report instead of reading the output back: Ok says
    /// how it was confirmed, Err why the store could not say. None: no
    /// such word (read it back).
    fn stored_as_written(&self) -> Option<Result<String, String>> {
        None
    }

    /// The bytes the copy will write, where known: parts are sized so
    /// that the whole fits in the parts an upload may have.
    fn expect(&mut self, total: Option<u64>);

    /// The size of the next part: every part but the last has it (under
    /// resume points, at least it).
    fn part_len(&self) -> usize;

    /// The next part is the last (the copy is ending): an upload whose
    /// only part is the whole object may make it one PUT.
    fn ending(&mut self);

    /// Keep `journal` up to date with what the server has durably
    /// stored (the upload's id and its stored parts), and, with
    /// `resume`, go on with the upload it records once the server
    /// confirms it still holds those parts. Err (with the end's detail)
    /// when that cannot be.
    fn keep_journal(
        &mut self,
        journal: Box<dyn Journal>,
        resume: Option<&UploadRecord>,
    ) -> Result<(), crate::sys::Errno>;

    /// The bytes written from now on come in units a copy can resume
    /// from (compressed frames), each ended by [`Upload::resume_point`]:
    /// parts end only there. True when the upload holds units written by
    /// an earlier run (a resumed upload): a stream this run adds nothing
    /// to then adds no empty unit either.
    fn mark_resume_points(&mut self) -> bool;

    /// The bytes written up to `at` end a unit that `source` bytes of the
    /// copy's input made.
    fn resume_point(&mut self, at: u64, source: u64);
}

/// Where an upload records its progress (the copy keeps it in the map).
pub trait Journal: Send {
    /// The upload as it stands: saved before the call returns, so that a
    /// crash right after leaves it on disk.
    fn record(&mut self, upload: &UploadRecord) -> Result<(), String>;

    /// The upload completed: the object is whole under its key.
    fn completed(&mut self) -> Result<(), String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(number: usize, size: u64, source_end: u64) -> StoredPart {
        StoredPart {
            number,
            size,
            source_end,
            etag: format!("\"etag-{number}\""),
            sha256: (number % 2 == 0)
                .then(|| "oplo+tLngqqfIECjXwWtuX7Yl56x9XLIyOp4Y34nXzw=".into()),
        }
    }

    #[test]
    fn a_record_reads_back_as_written_among_other_lines() {
        let record = UploadRecord {
            id: "abc-123".into(),
            parts: vec![part(1, 16 << 20, 40 << 20), part(2, 7, 41 << 20)],
        };
        let text = format!("# Mapfile\n{}0x0 ? 1\n0x0 0x10 +\n", record.render());
        assert_eq!(UploadRecord::parse(&text), Ok(Some(record.clone())));
        assert_eq!(record.source_end(), 41 << 20);
        assert_eq!(record.stored(), (16 << 20) + 7);
        assert_eq!(UploadRecord::parse("0x0 ? 1\n"), Ok(None));
    }

    #[test]
    fn parts_out_of_order_or_without_an_upload_are_refused() {
        let gap = "# ddx upload: x\n# ddx part: 2 5 5 \"e\"\n";
        assert!(UploadRecord::parse(gap).unwrap_err().starts_with("line 2"));
        let orphan = "# ddx part: 1 5 5 \"e\"\n";
        assert!(UploadRecord::parse(orphan).is_err());
        let no_etag = "# ddx upload: x\n# ddx part: 1 5 5\n";
        assert!(UploadRecord::parse(no_etag).is_err());
        let backwards = "# ddx upload: x\n# ddx part: 1 5 9 e\n# ddx part: 2 5 8 f\n";
        assert!(UploadRecord::parse(backwards).is_err());
    }
}
