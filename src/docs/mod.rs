//! Generated documentation, above both front doors (the copy's `cli` and
//! `bench`), whose tables it reads: the man page (`doc/ddx.1`, `man`), the
//! bash, zsh and fish completions (`completions/`, one module per shell
//! under `complete`) and the README's common jobs (`readme`), from the same
//! tables as `--help` (`cli::reference`, the parser's symbols,
//! `cli::options::OPTIONS`, and for `ddx bench` its own table,
//! `bench::args::OPTIONS`). A test fails when the committed files differ
//! from what this generates; `DDX_REGENERATE=1 cargo test --lib docs`
//! rewrites them.

mod complete;
mod man;
pub mod readme;

pub use complete::{bash, fish, zsh};
pub use man::man_page;

/// The generated files, by path from the repository's root.
pub fn generated() -> Vec<(&'static str, String)> {
    vec![
        ("doc/ddx.1", man_page()),
        ("completions/ddx.bash", bash()),
        ("completions/_ddx", zsh()),
        ("completions/ddx.fish", fish()),
    ]
}

pub(crate) const HEADER: &str = "generated from src/cli/reference.rs, src/cli/options.rs and \
src/bench/args.rs by `DDX_REGENERATE=1 cargo test --lib docs`: do not edit";

#[cfg(test)]
mod tests {
    use super::man::roff;
    use super::*;
    use crate::bench::args as bench;
    use crate::cli::options::OPTIONS;
    use crate::cli::reference::{Completes, OPERANDS};
    use crate::operands::symbols;
    use std::path::Path;

    /// The committed files are what the tables generate; with
    /// DDX_REGENERATE=1, rewrite them instead.
    #[test]
    fn committed_docs_and_completions_are_generated() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let regenerate = std::env::var_os("DDX_REGENERATE").is_some();
        let mut stale = Vec::new();
        for (path, text) in generated() {
            let file = root.join(path);
            if regenerate {
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, &text).unwrap();
            } else if std::fs::read_to_string(&file).ok().as_deref() != Some(text.as_str()) {
                stale.push(path);
            }
        }
        let readme_path = root.join("README.md");
        let readme = std::fs::read_to_string(&readme_path).unwrap();
        let Some(new) = readme::with_common_jobs(&readme) else {
            panic!(
                "README.md lacks the common jobs' markers:\n{}\n{}",
                readme::BEGIN,
                readme::END
            );
        };
        if regenerate {
            std::fs::write(&readme_path, new).unwrap();
        } else if new != readme {
            stale.push("README.md (common jobs)");
        }
        assert!(
            stale.is_empty(),
            "{stale:?} differ from the tables: run DDX_REGENERATE=1 cargo test --lib docs"
        );
    }

    #[test]
    fn everything_in_help_is_in_the_man_page_and_completions() {
        let man = man_page();
        let (bash, zsh, fish) = (bash(), zsh(), fish());
        for option in OPTIONS {
            assert!(
                man.contains(&roff(option.name)),
                "man lacks --{}",
                option.name
            );
            for completion in [&bash, &zsh, &fish] {
                assert!(completion.contains(option.name), "--{}", option.name);
            }
        }
        for operand in OPERANDS {
            assert!(man.contains(&format!("\\fB{}\\fR=", operand.name)));
            for completion in [&bash, &zsh, &fish] {
                assert!(completion.contains(&format!("{}=", operand.name)));
            }
        }
        // Every closed set of values, options' and operands' alike.
        let closed =
            OPTIONS
                .iter()
                .flat_map(|o| o.choices().iter())
                .chain(OPERANDS.iter().flat_map(|o| match o.completes {
                    Completes::Words(words) => words.iter(),
                    _ => [].iter(),
                }));
        for word in closed {
            for completion in [&bash, &zsh, &fish] {
                let mut tokens = completion.split(|c: char| !c.is_alphanumeric() && c != '-');
                assert!(tokens.any(|token| token == *word), "{word}");
            }
        }
        for symbol in symbols::conv_names().chain(symbols::flag_names()) {
            assert!(man.contains(&roff(symbol)), "man lacks {symbol}");
            assert!(bash.contains(symbol) && zsh.contains(symbol) && fish.contains(symbol));
        }
    }

    #[test]
    fn bench_options_and_tests_are_in_the_man_page_and_completions() {
        let man = man_page();
        let (bash, zsh, fish) = (bash(), zsh(), fish());
        assert!(man.contains(".SH BENCH\n"));
        for option in bench::OPTIONS {
            let name = option.spec.name;
            assert!(
                man.contains(&format!("\\fB\\-\\-{}\\fR", roff(name))),
                "man: {name}"
            );
            for completion in [&bash, &zsh, &fish] {
                assert!(
                    completion.contains(&format!("--{name}"))
                        || completion.contains(&format!("-l {name}")),
                    "{name}"
                );
            }
        }
        for test in bench::TestName::ALL {
            assert!(man.contains(&format!(".B {}\n", roff(test.name()))));
            for completion in [&bash, &zsh, &fish] {
                assert!(completion.contains(test.name()), "{}", test.name());
            }
        }
    }
}
