//! The README's common jobs: one line saying the job, then its command,
//! from the same examples as the man page and `--help`
//! (`cli::reference::EXAMPLES`), between two marker lines of README.md
//! that the rest of the README is written around.

use crate::cli::reference::EXAMPLES;

/// The line before the block.
pub const BEGIN: &str = "<!-- common jobs: generated from EXAMPLES in src/cli/reference.rs \
by `DDX_REGENERATE=1 cargo test --lib docs`; do not edit -->";

/// The line after it.
pub const END: &str = "<!-- end of common jobs -->";

/// The block between the markers (without them).
pub fn common_jobs() -> String {
    let mut out = String::from("```sh\n");
    for example in EXAMPLES {
        out.push_str(&format!("# {}\n{}\n", example.job, example.command));
    }
    out.push_str("```\n");
    out
}

/// `readme` with its common jobs replaced by [`common_jobs`]; None if
/// it lacks the markers.
pub fn with_common_jobs(readme: &str) -> Option<String> {
    let begin = readme.find(BEGIN)? + BEGIN.len() + 1;
    let end = begin + readme.get(begin..)?.find(END)?;
    Some(format!(
        "{}{}{}",
        &readme[..begin],
        common_jobs(),
        &readme[end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_goes_between_the_markers() {
        let readme = format!("# ddx\n\n{BEGIN}\nold\n{END}\n\nmore\n");
        let new = with_common_jobs(&readme).unwrap();
        assert!(new.starts_with(&format!("# ddx\n\n{BEGIN}\n```sh\n# ")));
        assert!(new.ends_with(&format!("```\n{END}\n\nmore\n")));
        assert_eq!(with_common_jobs(&new).as_deref(), Some(new.as_str()));
        assert_eq!(with_common_jobs("# ddx\n"), None);
    }
}
