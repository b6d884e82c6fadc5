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

    fn read(name: &str) -> String {
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name))
            .unwrap()
    }

    /// The first screen says what ddx is in one paragraph, then gives the
    /// two set-up commands (build and run the main job; run the tests),
    /// and nothing else in a code block; it names the Rust it needs, the
    /// one `Cargo.toml` declares.
    #[test]
    fn the_first_screen_says_what_ddx_is_then_gives_two_commands() {
        let readme = read("README.md");
        let screen: Vec<&str> = readme.lines().take(24).collect();
        let fence = screen
            .iter()
            .position(|l| l.starts_with("```"))
            .expect("a command block on the first screen");
        let before: Vec<&&str> = screen[1..fence]
            .iter()
            .filter(|l| !l.trim().is_empty())
            .collect();
        assert!(!before.is_empty(), "no paragraph before the commands");
        let paragraphs = screen[1..fence]
            .split(|l| l.trim().is_empty())
            .filter(|p| !p.is_empty())
            .count();
        assert_eq!(paragraphs, 1, "one paragraph before the commands");
        let close = fence
            + 1
            + screen[fence + 1..]
                .iter()
                .position(|l| l.starts_with("```"))
                .expect("the block ends on the first screen");
        let commands = &screen[fence + 1..close];
        assert_eq!(commands.len(), 2, "{commands:?}");
        assert!(commands[0].starts_with("cargo build --release && ./target/release/ddx "));
        assert_eq!(commands[1], "cargo test --release --all-targets");
        let manifest = read("Cargo.toml");
        let version = manifest
            .lines()
            .find_map(|l| l.strip_prefix("rust-version = "))
            .expect("Cargo.toml declares its Rust")
            .trim_matches('"');
        assert!(
            before
                .iter()
                .any(|l| l.contains(&format!("Rust {version}"))),
            "the first paragraph names Rust {version}"
        );
    }

    /// Every `cargo install` the README gives builds the locked
    /// dependencies.
    #[test]
    fn installs_are_locked() {
        for line in read("README.md").lines() {
            if let Some(at) = line.find("cargo install ") {
                assert!(line[at..].contains("--locked"), "{line}");
            }
        }
    }

    /// The speed table is of one measure (time over the peer's time, as
    /// its introduction says), and each figure is one BENCHMARKS.md gives
    /// in the section the row links to.
    #[test]
    fn every_figure_of_the_speed_table_is_a_time_ratio_in_benchmarks() {
        let readme = read("README.md");
        let benchmarks = read("BENCHMARKS.md");
        let section = |anchor: &str| -> String {
            let mut found = None;
            for (index, heading) in benchmarks.match_indices("\n## ") {
                let title = benchmarks[index + 4..].lines().next().unwrap_or_default();
                let slug: String = title
                    .to_lowercase()
                    .chars()
                    .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-')
                    .map(|c| if c == ' ' { '-' } else { c })
                    .collect();
                if slug == anchor {
                    let rest = &benchmarks[index + heading.len()..];
                    let end = rest.find("\n## ").unwrap_or(rest.len());
                    found = Some(rest[..end].to_owned());
                }
            }
            found.unwrap_or_else(|| panic!("BENCHMARKS.md has no section #{anchor}"))
        };
        let table = readme
            .split("## How fast")
            .nth(1)
            .expect("a speed section")
            .split("\n## ")
            .next()
            .unwrap();
        let rows: Vec<&str> = table
            .lines()
            .filter(|l| l.starts_with("| ") && l.contains("BENCHMARKS.md#"))
            .collect();
        assert!(rows.len() >= 10, "{table}");
        for row in rows {
            let cell = row.trim_end_matches('|').rsplit('|').next().unwrap().trim();
            // "[0.51×](BENCHMARKS.md#slow-devices)", and where the rounds
            // spread widely their range after it: "... (0.38–0.71)".
            let (figure, link) = cell
                .strip_prefix('[')
                .and_then(|c| c.split_once("](BENCHMARKS.md#"))
                .unwrap_or_else(|| panic!("{row}"));
            let (anchor, spread) = link.split_once(')').unwrap_or_else(|| panic!("{row}"));
            if let Some(range) = spread.trim().strip_prefix('(') {
                let (low, high) = range
                    .trim_end_matches(')')
                    .split_once('–')
                    .unwrap_or_else(|| panic!("a spread as low–high: {row}"));
                let ratio: f64 = figure.trim_end_matches('×').parse().unwrap();
                let (low, high): (f64, f64) = (low.parse().unwrap(), high.parse().unwrap());
                assert!(
                    low <= ratio && ratio <= high,
                    "{figure} outside its spread: {row}"
                );
            } else {
                assert!(spread.trim().is_empty(), "{row}");
            }
            assert!(
                figure.ends_with('×')
                    && figure[..figure.len() - '×'.len_utf8()]
                        .parse::<f64>()
                        .is_ok(),
                "one time ratio per row: {row}"
            );
            assert!(
                section(anchor).contains(figure),
                "{figure} is not in BENCHMARKS.md#{anchor}: {row}"
            );
        }
    }

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
