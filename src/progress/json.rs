//! Progress for programs (`--progress-fd=N`): one JSON object per line,
//! about once a second, on SIGUSR1 and at the end, for wrappers and GUIs
//! (as nbdcopy's `--progress=FD` or pv's `-n`, with more in each record).
//!
//! The last record has `"done": true` and is built from the same snapshot
//! and clock reading as the final statistics, so the two always agree.
//! A resumed copy (`--resume`) counts in `bytes` what its earlier runs
//! dealt with too (`resumed_bytes`), so that `bytes` over `total` is how
//! far the copy is, from the first record to the last (which ends at the
//! total); the statistics' count is `bytes - resumed_bytes`.

use std::os::fd::OwnedFd;

use serde::Serialize;

use crate::engine::Snapshot;
use crate::progress::rate::rate;
use crate::progress::{InputRead, Measure};

/// One update. Field names are part of ddx's interface: add, never rename.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    /// Bytes written so far (GNU's "bytes copied"), and under `--resume`
    /// those its earlier runs dealt with.
    pub bytes: u64,
    /// Under `--resume`: the bytes of the copy that earlier runs dealt
    /// with (copied, or found bad), counted in `bytes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_bytes: Option<u64>,
    pub records_in_full: u64,
    pub records_in_partial: u64,
    pub records_out_full: u64,
    pub records_out_partial: u64,
    pub records_truncated: u64,
    /// Seconds since the copy started (as the statistics count them, from
    /// before the ends are opened).
    pub elapsed: f64,
    /// Average bytes per second since the start (of this run's bytes).
    pub rate: f64,
    /// Bytes per second over the last few seconds.
    pub recent_rate: f64,
    /// Bytes the copy is expected to write, when known.
    pub total: Option<u64>,
    /// With `--decompress`: compressed bytes read so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compressed_bytes: Option<u64>,
    /// With `--decompress`: the compressed input's size, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compressed_total: Option<u64>,
    /// With `--used-only`: used bytes of the disk read so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    /// With `--used-only`: the used bytes the copy reads in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_total: Option<u64>,
    /// The final record: the copy has ended (or was interrupted).
    pub done: bool,
    /// The signal that ended the copy, if one did ("SIGINT", "SIGTERM").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<&'static str>,
    /// With `--rescue`: the phase running ("copying, pass 1", "trimming",
    /// "scraping", "retrying, pass 2 of 3").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// With `--rescue`: bytes read and failed so far, not recovered (in
    /// the last record, what the rescue left bad).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bad_bytes: Option<u64>,
}

impl Record {
    /// A record of `snapshot`; `resumed`: the bytes earlier runs of a
    /// resumed copy dealt with.
    pub fn new(
        snapshot: &Snapshot,
        elapsed_ns: u64,
        recent_rate: f64,
        total: Option<u64>,
        input: Option<InputRead>,
        resumed: Option<u64>,
    ) -> Record {
        let counted = |measure| input.filter(|i: &InputRead| i.measure == measure);
        Record {
            bytes: snapshot
                .bytes_out
                .saturating_add(resumed.unwrap_or_default()),
            resumed_bytes: resumed,
            records_in_full: snapshot.records_in_full,
            records_in_partial: snapshot.records_in_partial,
            records_out_full: snapshot.records_out_full,
            records_out_partial: snapshot.records_out_partial,
            records_truncated: snapshot.records_truncated,
            elapsed: elapsed_ns as f64 / 1e9,
            rate: rate(snapshot.bytes_out, elapsed_ns),
            recent_rate,
            total,
            compressed_bytes: counted(Measure::Compressed).map(|c| c.read),
            compressed_total: counted(Measure::Compressed).and_then(|c| c.total),
            used_bytes: counted(Measure::Used).map(|c| c.read),
            used_total: counted(Measure::Used).and_then(|c| c.total),
            done: false,
            signal: None,
            phase: None,
            bad_bytes: None,
        }
    }

    pub fn line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).expect("plain numbers serialise");
        line.push(b'\n');
        line
    }
}

/// The descriptor records go to; after a failed write it stays quiet (the
/// copy matters more than its observer).
#[derive(Debug)]
pub struct JsonStream {
    fd: Option<OwnedFd>,
}

impl JsonStream {
    pub fn new(fd: OwnedFd) -> JsonStream {
        JsonStream { fd: Some(fd) }
    }

    /// Write one record; returns the error that silenced the stream, once.
    pub fn write(&mut self, record: &Record) -> Option<crate::sys::Errno> {
        let fd = self.fd.as_ref()?;
        match crate::sys::fd::write_all_without_sigpipe(fd, &record.line()) {
            Ok(()) => None,
            Err(errno) => {
                self.fd = None;
                Some(errno)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_one_json_line() {
        let snapshot = Snapshot {
            records_in_full: 2,
            records_in_partial: 1,
            records_out_full: 2,
            records_out_partial: 1,
            records_truncated: 0,
            bytes_out: 1500,
        };
        let mut record = Record::new(&snapshot, 500_000_000, 3000.0, Some(4096), None, None);
        record.done = true;
        let line = String::from_utf8(record.line()).unwrap();
        assert!(line.ends_with("}\n") && line.matches('\n').count() == 1);
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["bytes"], 1500);
        assert_eq!(value["records_in_partial"], 1);
        assert_eq!(value["rate"], 3000.0);
        assert_eq!(value["total"], 4096);
        assert_eq!(value["done"], true);
        assert!(value.get("signal").is_none());
        assert!(value.get("compressed_bytes").is_none());
        assert!(value.get("used_bytes").is_none());
        assert!(value.get("resumed_bytes").is_none());
        assert!(value.get("phase").is_none() && value.get("bad_bytes").is_none());
        record.phase = Some("trimming".into());
        record.bad_bytes = Some(512);
        let value: serde_json::Value = serde_json::from_slice(&record.line()).unwrap();
        assert_eq!(value["phase"], "trimming");
        assert_eq!(value["bad_bytes"], 512);
    }

    #[test]
    fn a_disk_read_by_its_used_blocks_says_how_many_are_read() {
        let snapshot = Snapshot {
            bytes_out: 1 << 20,
            ..Snapshot::default()
        };
        let input = InputRead {
            read: 4096,
            total: Some(8192),
            measure: Measure::Used,
        };
        let record = Record::new(&snapshot, 1, 1.0, Some(2 << 20), Some(input), None);
        let value: serde_json::Value = serde_json::from_slice(&record.line()).unwrap();
        assert_eq!(value["used_bytes"], 4096);
        assert_eq!(value["used_total"], 8192);
        assert!(value.get("compressed_bytes").is_none());
    }

    #[test]
    fn a_resumed_copy_counts_its_earlier_runs() {
        let snapshot = Snapshot {
            records_in_full: 3,
            records_out_full: 3,
            bytes_out: 3000,
            ..Snapshot::default()
        };
        let record = Record::new(
            &snapshot,
            1_000_000_000,
            3000.0,
            Some(10_000),
            None,
            Some(7000),
        );
        let value: serde_json::Value = serde_json::from_slice(&record.line()).unwrap();
        assert_eq!(value["bytes"], 10_000, "all of the total: {value}");
        assert_eq!(value["resumed_bytes"], 7000);
        assert_eq!(value["rate"], 3000.0, "this run's rate");
        assert_eq!(value["records_in_full"], 3, "this run's records");
    }
}
