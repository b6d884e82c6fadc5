//! Help text wrapped as GNU's `--help` lays it out: a head (an operand,
//! an option, a test's name) in a gutter, its text beside it in words
//! wrapped at a width. Shared by the copy's `--help` and `ddx bench
//! --help`. Written by hand: the head-in-a-gutter shape is GNU's own, and
//! a general wrapping crate would have to be bent to it.

/// `text` wrapped to `width`, every line indented by `indent` spaces
/// except the first, which continues after `first` (padded to indent).
pub fn wrap(first: &str, text: &str, indent: usize, width: usize) -> String {
    let mut out = String::new();
    let mut line = first.to_owned();
    if line.len() + 1 > indent && !line.is_empty() {
        // The head is wider than the gutter: help starts on the next line.
        if line.len() >= indent {
            out.push_str(&line);
            out.push('\n');
            line = String::new();
        }
    }
    let mut fresh = true;
    for word in text.split_whitespace() {
        if line.len() < indent {
            line.push_str(&" ".repeat(indent - line.len()));
            fresh = true;
        }
        if !fresh && line.len() + 1 + word.len() > width {
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(indent);
            fresh = true;
        }
        if !fresh {
            line.push(' ');
        }
        line.push_str(word);
        fresh = false;
    }
    out.push_str(&line);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_the_gutter() {
        assert_eq!(
            wrap("  bs=BYTES", "one two three", 18, 31),
            "  bs=BYTES        one two three\n"
        );
        assert_eq!(
            wrap("  bs=BYTES", "one two three four", 18, 31),
            "  bs=BYTES        one two three\n                  four\n"
        );
    }
}
