//! GNU dd's statistics lines, formatted into any `Write`.
//!
//! "N+M records in", "N+M records out", "N truncated record(s)", and the
//! transfer line "B bytes (SI, IEC) copied, T s, R/s" in every form GNU
//! chooses between (singular, no prefix, SI only).

use std::io::{self, Write};

use crate::engine::Snapshot;
use crate::text::human::{format_g, human, Base};

/// The two records lines and, if any, the truncated-records line.
pub fn write_records(w: &mut impl Write, s: &Snapshot) -> io::Result<()> {
    write!(
        w,
        "{}+{} records in\n{}+{} records out\n",
        s.records_in_full, s.records_in_partial, s.records_out_full, s.records_out_partial
    )?;
    if s.records_truncated != 0 {
        let plural = if s.records_truncated == 1 { "" } else { "s" };
        writeln!(w, "{} truncated record{plural}", s.records_truncated)?;
    }
    Ok(())
}

/// How the elapsed time is shown: `%g` in the final statistics, whole
/// seconds in the once-a-second progress line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeStyle {
    Precise,
    WholeSeconds,
}

/// The transfer line without its line ending.
pub fn transfer_line(bytes: u64, elapsed_ns: u64, style: TimeStyle) -> String {
    let si = human(bytes, Base::Si, 1, 1);
    let iec = human(bytes, Base::Iec, 1, 1);
    let (seconds, rate) = if elapsed_ns > 0 {
        (
            elapsed_ns as f64 / 1e9,
            format!("{}/s", human(bytes, Base::Si, 1_000_000_000, elapsed_ns)),
        )
    } else {
        (0.0, "Infinity B/s".to_owned())
    };
    let time = match style {
        TimeStyle::Precise => format!("{} s", format_g(seconds)),
        TimeStyle::WholeSeconds => format!("{seconds:.0} s"),
    };
    let lacks_prefix = |s: &str| s.as_bytes()[s.len() - 2] == b' ';
    if lacks_prefix(&si) {
        let noun = if bytes == 1 { "byte" } else { "bytes" };
        format!("{bytes} {noun} copied, {time}, {rate}")
    } else if lacks_prefix(&iec) {
        format!("{bytes} bytes ({si}) copied, {time}, {rate}")
    } else {
        format!("{bytes} bytes ({si}, {iec}) copied, {time}, {rate}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_lines() {
        let mut out = Vec::new();
        let s = Snapshot {
            records_in_full: 3,
            records_in_partial: 1,
            records_out_full: 2,
            records_out_partial: 0,
            records_truncated: 1,
            bytes_out: 0,
        };
        write_records(&mut out, &s).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "3+1 records in\n2+0 records out\n1 truncated record\n"
        );
    }

    #[test]
    fn transfer_line_forms() {
        let t = 1_500_000_000;
        assert_eq!(
            transfer_line(1, t, TimeStyle::Precise),
            "1 byte copied, 1.5 s, 0.0 kB/s"
        );
        assert_eq!(
            transfer_line(512, t, TimeStyle::Precise),
            "512 bytes copied, 1.5 s, 0.3 kB/s"
        );
        assert_eq!(
            transfer_line(1000, t, TimeStyle::Precise),
            "1000 bytes (1.0 kB) copied, 1.5 s, 0.7 kB/s"
        );
        assert_eq!(
            transfer_line(1048576, 2_000_000_000, TimeStyle::WholeSeconds),
            "1048576 bytes (1.0 MB, 1.0 MiB) copied, 2 s, 524 kB/s"
        );
        assert_eq!(
            transfer_line(5, 0, TimeStyle::Precise),
            "5 bytes copied, 0 s, Infinity B/s"
        );
    }
}
