//! `--compress=ALG[:LEVEL]`: which algorithm and level, checked before
//! anything is opened, with one-line errors naming the option.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    Zstd,
    Xz,
    Gzip,
}

impl Algorithm {
    /// The levels the algorithm takes and its default (the one its own
    /// command-line tool uses).
    pub fn levels(self) -> (std::ops::RangeInclusive<i32>, i32) {
        match self {
            // 20-22 need `--ultra` in the zstd tool because of their window
            // size; ddx's frames are smaller than those windows anyway.
            Algorithm::Zstd => (1..=22, 3),
            Algorithm::Xz => (0..=9, 6),
            Algorithm::Gzip => (1..=9, 6),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Zstd => "zstd",
            Algorithm::Xz => "xz",
            Algorithm::Gzip => "gzip",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compression {
    pub algorithm: Algorithm,
    pub level: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("--compress={0}: unknown algorithm (zstd, xz or gzip, optionally followed by :LEVEL)")]
    UnknownAlgorithm(String),
    #[error("--compress={text}: the level must be a number from {min} to {max} for {algorithm}")]
    BadLevel {
        text: String,
        algorithm: Algorithm,
        min: i32,
        max: i32,
    },
}

impl Compression {
    /// Parse `ALG[:LEVEL]` (the text after `--compress=`).
    pub fn parse(text: &str) -> Result<Compression, SpecError> {
        let (name, level) = match text.split_once(':') {
            Some((name, level)) => (name, Some(level)),
            None => (text, None),
        };
        let algorithm = match name.to_ascii_lowercase().as_str() {
            "zstd" | "zst" => Algorithm::Zstd,
            "xz" => Algorithm::Xz,
            "gzip" | "gz" => Algorithm::Gzip,
            _ => return Err(SpecError::UnknownAlgorithm(text.to_owned())),
        };
        let (range, default) = algorithm.levels();
        let level = match level {
            None => default,
            Some(level) => level
                .parse::<i32>()
                .ok()
                .filter(|l| range.contains(l))
                .ok_or_else(|| SpecError::BadLevel {
                    text: text.to_owned(),
                    algorithm,
                    min: *range.start(),
                    max: *range.end(),
                })?,
        };
        Ok(Compression { algorithm, level })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithms_take_their_tools_default_levels() {
        let cases = [
            ("zstd", Algorithm::Zstd, 3),
            ("xz", Algorithm::Xz, 6),
            ("gzip", Algorithm::Gzip, 6),
            ("ZSTD:19", Algorithm::Zstd, 19),
            ("xz:0", Algorithm::Xz, 0),
            ("gz:1", Algorithm::Gzip, 1),
        ];
        for (text, algorithm, level) in cases {
            assert_eq!(
                Compression::parse(text),
                Ok(Compression { algorithm, level }),
                "{text}"
            );
        }
    }

    #[test]
    fn bad_specs_are_one_line_naming_the_option() {
        for (text, says) in [
            ("lzma", "--compress=lzma: unknown algorithm"),
            ("", "--compress=: unknown algorithm"),
            (
                "zstd:0",
                "--compress=zstd:0: the level must be a number from 1 to 22 for zstd",
            ),
            (
                "xz:10",
                "--compress=xz:10: the level must be a number from 0 to 9 for xz",
            ),
            (
                "gzip:fast",
                "--compress=gzip:fast: the level must be a number from 1 to 9",
            ),
            ("zstd:", "--compress=zstd:: the level must be"),
        ] {
            let message = Compression::parse(text).unwrap_err().to_string();
            assert!(message.starts_with(says), "{text}: {message}");
            assert!(!message.contains('\n'));
        }
    }
}
