//! GNU's quoting of names and values in messages, in the C locale.
//!
//! dd's messages quote operand values with `quote` (C-style escapes inside
//! '...'), file names with `quoteaf` (always shell-quoted) and, before a
//! colon, with `quotef` (shell-quoted only when needed). Scripts and tests
//! compare these messages, so the three styles are reproduced here.

use std::borrow::Cow;
use std::fmt::Write;

/// `quote()`: '...' with C escapes for the quote, backslash and non-printables.
pub fn quote(value: &[u8]) -> String {
    let mut out = String::from("'");
    for &c in value {
        match c {
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x0b => out.push_str("\\v"),
            0x20..=0x7e => out.push(c as char),
            _ => {
                let _ = write!(out, "\\{c:03o}");
            }
        }
    }
    out.push('\'');
    out
}

/// `text` with its control characters escaped as [`quote`] escapes them
/// (`\n`, `\r`, `\t`, `\ooo`) and nothing else changed, no quotes
/// added: for a value a message shows as it was given (a URL, a
/// library's own words about it), so that the message stays one line.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                for byte in c.encode_utf8(&mut [0; 4]).bytes() {
                    let _ = write!(out, "\\{byte:03o}");
                }
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `quoteaf()`: always shell-quoted, as in "failed to open 'x'".
pub fn quote_file(name: &[u8]) -> String {
    shell_quote(name, true)
}

/// `quotef()`: shell-quoted only when the name needs it, as in "x: cannot skip".
pub fn quote_file_if_needed(name: &[u8]) -> String {
    shell_quote(name, false)
}

fn needs_shell_quoting(name: &[u8]) -> bool {
    if name.is_empty() {
        return true;
    }
    name.iter().enumerate().any(|(i, &c)| match c {
        b'#' | b'~' => i == 0,
        b'{' | b'}' => name.len() == 1,
        b' ' | b'!' | b'"' | b'$' | b'&' | b'(' | b')' | b'*' | b';' | b'<' | b'=' | b'>'
        | b'[' | b'^' | b'`' | b'|' | b'\\' | b'\'' | b'?' => true,
        0x21..=0x7e => false,
        _ => true,
    })
}

fn shell_quote(name: &[u8], always: bool) -> String {
    if !always && !needs_shell_quoting(name) {
        return String::from_utf8_lossy(name).into_owned();
    }
    let mut out = String::from("'");
    let mut in_quotes = true;
    for &c in name {
        let printable = (0x20..=0x7e).contains(&c);
        if printable {
            if !in_quotes {
                out.push('\'');
                in_quotes = true;
            }
            if c == b'\'' {
                out.push_str("'\\''");
            } else {
                out.push(c as char);
            }
        } else {
            if in_quotes {
                out.push('\'');
                in_quotes = false;
            }
            let escaped = match c {
                b'\n' => "\\n".to_owned(),
                b'\t' => "\\t".to_owned(),
                b'\r' => "\\r".to_owned(),
                _ => format!("\\{c:03o}"),
            };
            let _ = write!(out, "$'{escaped}'");
        }
    }
    if in_quotes {
        out.push('\'');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each text, given to `quoting`, comes out as its quoted form.
    fn quotes(quoting: fn(&[u8]) -> String, cases: &[(&str, &str)]) {
        for &(text, quoted) in cases {
            assert_eq!(quoting(text.as_bytes()), quoted, "{text:?}");
        }
    }

    #[test]
    fn quote_values() {
        quotes(
            quote,
            &[
                ("abc", "'abc'"),
                ("", "''"),
                ("a'b", "'a\\'b'"),
                ("a\nb", "'a\\nb'"),
            ],
        );
    }

    #[test]
    fn printable_texts_escape_only_control_characters() {
        assert_eq!(printable("s3://b/k ü?"), "s3://b/k ü?");
        assert_eq!(
            printable("a\nb\rc\td\u{1}e\u{85}"),
            "a\\nb\\rc\\td\\001e\\302\\205"
        );
    }

    #[test]
    fn quote_files() {
        quotes(
            quote_file,
            &[
                ("out", "'out'"),
                ("standard input", "'standard input'"),
                ("it's", "'it'\\''s'"),
            ],
        );
        quotes(
            quote_file_if_needed,
            &[
                ("/dev/null", "/dev/null"),
                ("a b", "'a b'"),
                ("standard input", "'standard input'"),
            ],
        );
    }
}
