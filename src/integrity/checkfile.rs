//! `--hash-file=FILE`: a digest written the way its checker reads it, so
//! that `sha256sum -c FILE`, `b3sum -c FILE` or `xxhsum -c FILE` checks
//! the copy's input later. The `--hash` lines on standard error
//! (`sha256: HEX  NAME`) are for people; no checker reads them.
//!
//! One file holds one algorithm: each checker reads only its own lines, so
//! a file mixing them would fail every check. The formats, as the
//! checkers installed here (coreutils 9.1, b3sum 1.x, xxhsum 0.8.1) read
//! them:
//! - sha256 and blake3: `HEX  NAME` (two spaces: binary and text modes are
//!   the same on Linux); a name holding a backslash or a newline is
//!   escaped (`\\`, `\n`) and the line starts with a backslash, as
//!   `sha256sum` and `b3sum` write it. `sha256sum` also escapes a carriage
//!   return (`\r`), because its `-c` drops one at the end of a line as a
//!   DOS line ending (and with it the last byte of such a name); `b3sum`
//!   keeps a carriage return and knows no such escape, so it stays raw.
//! - xxh3: the tagged line `XXH3 (NAME) = HEX`, which `xxhsum -H3 --tag`
//!   writes and every xxhsum since 0.8 checks (0.8.1 does not read the
//!   `XXH3_HEX  NAME` lines of later versions). xxhsum 0.8.1 has no escapes,
//!   so a name with a newline cannot be written.
//!
//! NAME is the input as if= gave it, `-` for standard input (which
//! `sha256sum -c` and `b3sum -c` read from their own standard input).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::{Algorithm, Digest};

/// The name a check line gives the copy's input.
pub fn input_name(input: Option<&Path>) -> Vec<u8> {
    match input {
        None => b"-".to_vec(),
        // A file really named "-" is not standard input to a checker.
        Some(path) if path.as_os_str() == "-" => b"./-".to_vec(),
        // An object URL without its secrets.
        Some(path) => crate::ends::uri::shown(path),
    }
}

/// Why `name` cannot be written in `algorithm`'s check format, if it
/// cannot (checked before the copy).
pub fn unwritable(algorithm: Algorithm, name: &[u8]) -> Option<String> {
    (algorithm == Algorithm::Xxh3 && name.contains(&b'\n')).then(|| {
        format!(
            "--hash-file: xxhsum's check format cannot hold the name {} (it has a newline)",
            crate::text::quote::quote_file(name)
        )
    })
}

/// The check line for `digest` of the input called `name`, newline
/// included.
pub fn line(digest: &Digest, name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(digest.hex.len() + name.len() + 16);
    match digest.algorithm {
        Algorithm::Sha256 | Algorithm::Blake3 => {
            let escape_cr = digest.algorithm == Algorithm::Sha256;
            let escape = name
                .iter()
                .any(|&b| b == b'\\' || b == b'\n' || (escape_cr && b == b'\r'));
            if escape {
                out.push(b'\\');
            }
            out.extend_from_slice(digest.hex.as_bytes());
            out.extend_from_slice(b"  ");
            for &byte in name {
                match byte {
                    b'\\' if escape => out.extend_from_slice(b"\\\\"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' if escape_cr => out.extend_from_slice(b"\\r"),
                    _ => out.push(byte),
                }
            }
        }
        Algorithm::Xxh3 => {
            out.extend_from_slice(b"XXH3 (");
            out.extend_from_slice(name);
            out.extend_from_slice(b") = ");
            out.extend_from_slice(digest.hex.as_bytes());
        }
    }
    out.push(b'\n');
    out
}

/// Write `line` to `path` (created or replaced). Err is the one line to
/// print.
pub fn write(path: &Path, line: &[u8]) -> Result<(), String> {
    std::fs::write(path, line).map_err(|e| {
        let reason = e
            .raw_os_error()
            .map(|raw| crate::sys::errno_text(crate::sys::Errno::from_raw_os_error(raw)))
            .unwrap_or_else(|| e.to_string());
        format!(
            "--hash-file: cannot write {}: {reason}",
            crate::text::quote::quote_file(OsStr::as_bytes(path.as_os_str()))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(algorithm: Algorithm, hex: &str) -> Digest {
        Digest {
            algorithm,
            hex: hex.into(),
        }
    }

    #[test]
    fn lines_in_each_checkers_format() {
        assert_eq!(
            line(&digest(Algorithm::Sha256, "ab12"), b"disk.img"),
            b"ab12  disk.img\n"
        );
        assert_eq!(line(&digest(Algorithm::Blake3, "cd34"), b"-"), b"cd34  -\n");
        assert_eq!(
            line(&digest(Algorithm::Xxh3, "0123456789abcdef"), b"a b"),
            b"XXH3 (a b) = 0123456789abcdef\n"
        );
    }

    #[test]
    fn names_with_backslashes_or_newlines_are_escaped_as_sha256sum_does() {
        assert_eq!(
            line(&digest(Algorithm::Sha256, "ab"), b"a\\b"),
            b"\\ab  a\\\\b\n"
        );
        assert_eq!(
            line(&digest(Algorithm::Blake3, "ab"), b"n\nl"),
            b"\\ab  n\\nl\n"
        );
        // sha256sum -c would drop a name's last carriage return; b3sum
        // keeps it and has no escape for it.
        assert_eq!(
            line(&digest(Algorithm::Sha256, "ab"), b"c\r"),
            b"\\ab  c\\r\n"
        );
        assert_eq!(line(&digest(Algorithm::Blake3, "ab"), b"c\r"), b"ab  c\r\n");
        assert!(unwritable(Algorithm::Xxh3, b"n\nl").is_some());
        assert!(unwritable(Algorithm::Xxh3, b"a\\b").is_none());
        assert!(unwritable(Algorithm::Sha256, b"n\nl").is_none());
    }

    #[test]
    fn standard_input_is_dash_and_a_file_named_dash_is_not() {
        assert_eq!(input_name(None), b"-");
        assert_eq!(input_name(Some(Path::new("-"))), b"./-");
        assert_eq!(input_name(Some(Path::new("x/y"))), b"x/y");
    }
}
