//! What an upload keeps in the map of `--map`/`--resume` (the record's
//! format is `ends::upload`'s): the prefix of parts stored without a gap,
//! brought up to date as parts are stored, and on `--resume` the parts
//! the map records held to what the server still holds.

use super::list_parts::Listed;
use super::ObjectError;
use crate::ends::upload::{Journal, StoredPart, UploadRecord};
use crate::sys::Errno;

/// One part of the upload, as the writer holds it.
#[derive(Debug, Clone)]
pub struct Part {
    pub size: u64,
    /// The input offset where its bytes end (see `ends::upload`).
    pub source_end: u64,
    /// Set once the server stored it.
    pub etag: Option<String>,
}

/// The upload as a journal records it: its id and the parts stored
/// without a gap from the first.
pub fn stored_prefix(id: &str, parts: &[Part]) -> UploadRecord {
    let parts = parts
        .iter()
        .enumerate()
        .map_while(|(index, part)| {
            Some(StoredPart {
                number: index + 1,
                size: part.size,
                source_end: part.source_end,
                etag: part.etag.clone()?,
            })
        })
        .collect();
    UploadRecord {
        id: id.to_owned(),
        parts,
    }
}

/// The journal an upload keeps, and how many parts it holds.
pub struct Kept {
    journal: Box<dyn Journal>,
    /// Parts recorded (0 until the upload's id is).
    recorded: usize,
}

impl Kept {
    pub fn new(journal: Box<dyn Journal>, recorded: usize) -> Kept {
        Kept { journal, recorded }
    }

    /// Record the upload when its stored prefix grew, or when it was just
    /// created; Err says why the map could not be saved.
    pub fn record(&mut self, id: &str, parts: &[Part]) -> Result<(), ObjectError> {
        let record = stored_prefix(id, parts);
        let first = self.recorded == 0 && record.parts.is_empty();
        if !first && record.parts.len() <= self.recorded {
            return Ok(());
        }
        self.journal.record(&record).map_err(|why| ObjectError {
            errno: Errno::IO,
            detail: format!("saving the upload's progress in the map: {why}"),
        })?;
        self.recorded = record.parts.len().max(1);
        Ok(())
    }

    /// The object is whole: the map says so.
    pub fn completed(&mut self) -> Result<(), String> {
        self.journal.completed()
    }
}

/// The parts `record` holds, as the writer goes on with them, once the
/// server's list shows each of them still stored (number, size, and ETag
/// where the server gives one); Err names the part that differs.
pub fn resumed_parts(record: &UploadRecord, listed: &[Listed]) -> Result<Vec<Part>, ObjectError> {
    for part in &record.parts {
        let held = listed.iter().find(|(number, _, _)| *number == part.number);
        let matches = held.is_some_and(|(_, size, etag)| {
            *size == part.size
                && etag
                    .as_deref()
                    .is_none_or(|etag| etag.trim_matches('"') == part.etag.trim_matches('"'))
        });
        if !matches {
            let why = match held {
                None => "is not on the server".to_owned(),
                Some((_, size, etag)) => format!(
                    "differs on the server ({size} bytes, ETag {}; the map says {} bytes, ETag {})",
                    etag.as_deref().unwrap_or("none"),
                    part.size,
                    part.etag
                ),
            };
            return Err(ObjectError {
                errno: Errno::STALE,
                detail: format!(
                    "part {} of upload {} {why}: the upload was aborted, completed or \
                     changed since the map was saved",
                    part.number, record.id
                ),
            });
        }
    }
    Ok(record
        .parts
        .iter()
        .map(|p| Part {
            size: p.size,
            source_end: p.source_end,
            etag: Some(p.etag.clone()),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> UploadRecord {
        UploadRecord {
            id: "u".into(),
            parts: vec![
                StoredPart {
                    number: 1,
                    size: 10,
                    source_end: 10,
                    etag: "\"a\"".into(),
                },
                StoredPart {
                    number: 2,
                    size: 5,
                    source_end: 15,
                    etag: "\"b\"".into(),
                },
            ],
        }
    }

    #[test]
    fn a_resume_goes_on_only_with_the_parts_the_server_holds_as_recorded() {
        let held = vec![(1, 10, Some("a".to_owned())), (2, 5, None), (3, 9, None)];
        let parts = resumed_parts(&record(), &held).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1].source_end, 15);
        let changed = vec![(1, 10, Some("x".to_owned())), (2, 5, None)];
        let why = resumed_parts(&record(), &changed).unwrap_err().detail;
        assert!(
            why.starts_with("part 1 of upload u differs on the server"),
            "{why}"
        );
        let missing = vec![(1, 10, None)];
        let why = resumed_parts(&record(), &missing).unwrap_err().detail;
        assert!(
            why.starts_with("part 2 of upload u is not on the server"),
            "{why}"
        );
    }

    #[test]
    fn the_stored_prefix_stops_at_the_first_part_not_stored() {
        let part = |etag: Option<&str>| Part {
            size: 1,
            source_end: 1,
            etag: etag.map(str::to_owned),
        };
        let parts = [part(Some("a")), part(None), part(Some("c"))];
        assert_eq!(stored_prefix("u", &parts).parts.len(), 1);
    }
}
