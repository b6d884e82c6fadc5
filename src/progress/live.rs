//! The live progress line on a terminal (status=progress with stderr a
//! TTY): bytes, the recent rate beside the average, elapsed time and, when
//! the total is known, percent, a bar and the time left.
//!
//! indicatif draws it (terminal width, erasing, the bar). Only the
//! reporter calls it, under the reporter's lock, from the ticker thread
//! once a second: the copy loop never touches it, and indicatif's own
//! ticking thread is not used. Without a terminal, GNU's exact line is
//! printed instead (see `reporter`).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};

use crate::progress::{InputRead, Measure};
use crate::text::human::{human, Base};

/// One frame's figures, computed by the reporter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Frame {
    /// Bytes written, and under `--resume` those earlier runs dealt with.
    pub bytes: u64,
    pub elapsed_ns: u64,
    /// Bytes per second over the last few seconds.
    pub recent_rate: f64,
    /// Average bytes per second since the start (of this run's bytes).
    pub average_rate: f64,
    pub total: Option<u64>,
    /// With `--decompress` or `--used-only`: how far through what is read.
    pub input: Option<InputRead>,
}

impl Frame {
    /// Where the bar stands and its length, when one can be drawn: the
    /// input's position and size when known (a compressed input's decoded
    /// size is not; a disk's used bytes are what take time), else the
    /// bytes written and the total.
    fn bar(&self) -> Option<(u64, u64)> {
        match self.input {
            Some(InputRead {
                read,
                total: Some(total),
                ..
            }) => Some((read, total.max(read))),
            Some(_) => None,
            // A conversion may write more than the input's size.
            None => self.total.map(|total| (self.bytes, total.max(self.bytes))),
        }
    }
}

pub struct Live {
    bar: ProgressBar,
}

/// Columns kept free at the end of the line. A Ctrl-C typed at the
/// terminal is echoed ("^C") where the cursor stands; indicatif pads the
/// line to the terminal's width, so after it the echo would wrap to the
/// next row, the clear before the statistics would erase that row only,
/// and the last frame would stay above them. With room left, the echo
/// lands on the line and is cleared with it.
const ECHO_ROOM: u16 = 3;

/// Standard error as indicatif sees it: a terminal [`ECHO_ROOM`] columns
/// narrower than it is (indicatif takes the width from here, for the bar
/// and the padding alike).
#[derive(Debug)]
struct Narrower(console::Term);

impl TermLike for Narrower {
    fn width(&self) -> u16 {
        self.0.size().1.saturating_sub(ECHO_ROOM).max(1)
    }
    fn height(&self) -> u16 {
        self.0.size().0
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_up(n)
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_down(n)
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_right(n)
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_left(n)
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.0.write_line(s)
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.0.write_str(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.0.clear_line()
    }
    fn flush(&self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Live {
    /// A live line on stderr, drawn from `first` on: a bar when its
    /// length is known.
    pub fn new(first: &Frame) -> Live {
        let total = first.bar().map(|(_, length)| length);
        // Redraws only when asked: the reporter draws once a tick.
        let target = ProgressDrawTarget::term_like_with_hz(
            Box::new(Narrower(console::Term::buffered_stderr())),
            1,
        );
        let bar = ProgressBar::with_draw_target(total, target);
        let template = if total.is_some() {
            "{prefix} [{wide_bar}] {msg}"
        } else {
            "{prefix} {msg}"
        };
        let style = ProgressStyle::with_template(template)
            .expect("a valid template")
            .progress_chars("=> ");
        bar.set_style(style);
        Live { bar }
    }

    /// Draw `frame`, and after it `note` (where a rescue stands).
    pub fn draw(&self, frame: &Frame, note: Option<&str>) {
        let (prefix, message) = texts(frame);
        let message = match note {
            Some(note) if message.is_empty() => note.to_owned(),
            Some(note) => format!("{message}, {note}"),
            None => message,
        };
        self.bar.set_prefix(prefix);
        self.bar.set_message(message);
        let (position, length) = frame.bar().unwrap_or((frame.bytes, frame.bytes));
        self.bar.set_length(length);
        self.bar.set_position(position);
        self.bar.force_draw();
    }

    /// Print something below the line without garbling it.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }

    /// Erase the line for good (before the final statistics).
    pub fn clear(&self) {
        self.bar.finish_and_clear();
    }
}

/// The text left and right of the bar.
pub fn texts(frame: &Frame) -> (String, String) {
    let copied = human(frame.bytes, Base::Iec, 1, 1);
    let elapsed = clock(frame.elapsed_ns / 1_000_000_000);
    let prefix = format!(
        "{copied} {elapsed} {} (avg {})",
        rate_text(frame.recent_rate),
        rate_text(frame.average_rate)
    );
    let prefix = match frame.input {
        Some(InputRead {
            read,
            total,
            measure,
        }) => {
            let of = total.map_or(String::new(), |total| {
                format!(" of {}", human(total, Base::Iec, 1, 1))
            });
            let what = match measure {
                Measure::Compressed => "",
                Measure::Used => " used",
            };
            format!("{prefix}, read {}{of}{what}", human(read, Base::Iec, 1, 1))
        }
        None => prefix,
    };
    // What is left to write: past the total, or, decompressing (or reading
    // used blocks), what the input left will come to at the ratio of
    // written to read seen so far.
    let left = match (frame.input, frame.total) {
        (
            Some(InputRead {
                read,
                total: Some(total),
                ..
            }),
            _,
        ) if read > 0 => {
            Some((total.saturating_sub(read) as f64 * frame.bytes as f64 / read as f64) as u64)
        }
        (Some(_), _) => None,
        (None, Some(total)) if total > 0 => Some(total.saturating_sub(frame.bytes)),
        (None, _) => None,
    };
    let message = match (frame.bar(), left) {
        (Some((position, length)), Some(left)) if length > 0 => {
            let percent = whole_percent(position, length);
            let eta = if left == 0 {
                clock(0)
            } else if frame.recent_rate >= 1.0 {
                clock((left as f64 / frame.recent_rate) as u64)
            } else {
                "--:--".to_owned()
            };
            format!("{percent:3}% ETA {eta}")
        }
        // Decompressing, before the first compressed byte is read.
        (Some((position, length)), None) if length > 0 && frame.input.is_some() => {
            let percent = whole_percent(position, length);
            format!("{percent:3}% ETA --:--")
        }
        _ => String::new(),
    };
    (prefix, message)
}

/// `position` of `length` in whole percent, rounded down as a resumed
/// copy's "(N% done)" is: 100 only at the end.
fn whole_percent(position: u64, length: u64) -> u64 {
    (u128::from(position.min(length)) * 100 / u128::from(length)) as u64
}

fn rate_text(bytes_per_second: f64) -> String {
    let per_second = bytes_per_second.max(0.0).round() as u64;
    format!("{}/s", human(per_second, Base::Si, 1, 1))
}

/// 0:07, 1:02:03.
fn clock(seconds: u64) -> String {
    let d = Duration::from_secs(seconds).as_secs();
    let (h, m, s) = (d / 3600, d / 60 % 60, d % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_total_shows_percent_and_eta() {
        let frame = Frame {
            bytes: 512 << 20,
            elapsed_ns: 65_000_000_000,
            recent_rate: 100e6,
            average_rate: 8e6,
            total: Some(1 << 30),
            input: None,
        };
        let (prefix, message) = texts(&frame);
        assert_eq!(prefix, "512 MiB 1:05 100 MB/s (avg 8.0 MB/s)");
        assert_eq!(message, " 50% ETA 0:05");
    }

    #[test]
    fn percent_is_rounded_down_so_that_100_means_done() {
        let frame = |bytes| Frame {
            bytes,
            elapsed_ns: 1_000_000_000,
            recent_rate: 10.0,
            average_rate: 10.0,
            total: Some(1000),
            input: None,
        };
        assert_eq!(texts(&frame(999)).1, " 99% ETA 0:00");
        assert_eq!(texts(&frame(296)).1, " 29% ETA 1:10");
        assert_eq!(texts(&frame(1000)).1, "100% ETA 0:00");
    }

    #[test]
    fn unknown_total_shows_no_percent() {
        let frame = Frame {
            bytes: 1000,
            elapsed_ns: 0,
            recent_rate: 0.0,
            average_rate: 0.0,
            total: None,
            input: None,
        };
        assert_eq!(
            texts(&frame),
            ("1000 B 0:00 0 B/s (avg 0 B/s)".into(), String::new())
        );
    }

    #[test]
    fn stalled_copy_has_no_eta() {
        let frame = Frame {
            bytes: 10,
            elapsed_ns: 3_000_000_000,
            recent_rate: 0.0,
            average_rate: 3.0,
            total: Some(100),
            input: None,
        };
        assert_eq!(texts(&frame).1, " 10% ETA --:--");
    }

    #[test]
    fn decompressing_counts_towards_the_compressed_size() {
        // 100 MiB of 400 MiB compressed read, decoding to 300 MiB so far:
        // 900 MiB are left to write, at 100 MB/s.
        let frame = Frame {
            bytes: 300 << 20,
            elapsed_ns: 10_000_000_000,
            recent_rate: 100.0 * (1 << 20) as f64,
            average_rate: 30e6,
            total: None,
            input: Some(InputRead {
                read: 100 << 20,
                total: Some(400 << 20),
                measure: Measure::Compressed,
            }),
        };
        let (prefix, message) = texts(&frame);
        assert_eq!(
            prefix,
            "300 MiB 0:10 105 MB/s (avg 30 MB/s), read 100 MiB of 400 MiB"
        );
        assert_eq!(message, " 25% ETA 0:09");
        assert_eq!(frame.bar(), Some((100 << 20, 400 << 20)));
    }

    #[test]
    fn decompressing_from_a_pipe_has_no_bar() {
        let frame = Frame {
            bytes: 3000,
            elapsed_ns: 0,
            recent_rate: 0.0,
            average_rate: 0.0,
            total: None,
            input: Some(InputRead {
                read: 1000,
                total: None,
                measure: Measure::Compressed,
            }),
        };
        assert_eq!(
            texts(&frame),
            (
                "2.9 KiB 0:00 0 B/s (avg 0 B/s), read 1000 B".into(),
                String::new()
            )
        );
        assert_eq!(frame.bar(), None);
    }

    #[test]
    fn reading_used_blocks_counts_towards_the_used_bytes() {
        // 1 GiB of 4 GiB used read, 6 GiB written with the holes between:
        // 18 GiB left to write at 1 GiB/s of writing.
        let frame = Frame {
            bytes: 6 << 30,
            elapsed_ns: 6_000_000_000,
            recent_rate: (1u64 << 30) as f64,
            average_rate: (1u64 << 30) as f64,
            total: Some(32 << 30),
            input: Some(InputRead {
                read: 1 << 30,
                total: Some(4 << 30),
                measure: Measure::Used,
            }),
        };
        let (prefix, message) = texts(&frame);
        assert!(
            prefix.ends_with(", read 1.0 GiB of 4.0 GiB used"),
            "{prefix}"
        );
        assert_eq!(message, " 25% ETA 0:18");
    }
}
