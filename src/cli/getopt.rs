//! GNU getopt_long's rules for finding a long option, over any table of
//! [`OptionSpec`]s: the copy's (`options::OPTIONS`) and `ddx bench`'s
//! (`bench::args`), so both say "unrecognized option '--x'" and "option
//! '--x' is ambiguous; possibilities: ..." in getopt's words and accept
//! the same abbreviations. Written by hand, as the copy's scanner is (see
//! `cli`): what follows a match (values, operands) is each caller's.

/// One long option of a table (ddx's `--options`, `ddx bench`'s): the
/// single source of its scanner, `--help`, and anything generated from
/// them (man page, completions).
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    pub name: &'static str,
    /// The value's placeholder in help (`N`, `NAME`); None for a switch.
    pub value: Option<&'static str>,
    /// What its value can be, for completions and the man page.
    pub values: Values,
    /// One or more lines of help text.
    pub help: &'static str,
}

/// What an option's value can be, as far as a shell can offer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Values {
    /// Anything of its kind (a number, a size): nothing to offer.
    Free,
    /// One word of a closed set.
    OneOf(&'static [&'static str]),
    /// A comma-separated list of words of a closed set.
    ListOf(&'static [&'static str]),
    /// A file name.
    File,
    /// The value may be left out (`--decompress` or `--decompress=auto`):
    /// without it the option is a switch; with it, one word of this set,
    /// or, where the set is empty, a file name or URL (`--store[=STORE]`).
    Optional(&'static [&'static str]),
}

impl OptionSpec {
    pub const fn switch(name: &'static str, help: &'static str) -> Self {
        OptionSpec {
            name,
            value: None,
            values: Values::Free,
            help,
        }
    }

    pub const fn valued(
        name: &'static str,
        value: &'static str,
        values: Values,
        help: &'static str,
    ) -> Self {
        OptionSpec {
            name,
            value: Some(value),
            values,
            help,
        }
    }

    /// The closed set its value (or each item of its list) comes from;
    /// empty where the set is open.
    pub fn choices(&self) -> &'static [&'static str] {
        match self.values {
            Values::OneOf(words) | Values::ListOf(words) | Values::Optional(words) => words,
            Values::Free | Values::File => &[],
        }
    }
}

/// `--help` and `--version` keep every abbreviation GNU accepts ("--v" is
/// --version), whatever ddx added beside them.
fn is_gnu_option(name: &str) -> bool {
    name == "help" || name == "version"
}

/// The row of `table` that the word `--text` names, and its value after
/// '=' if it has one: the exact name, else the one name it abbreviates,
/// else GNU's own option among several; otherwise getopt's message
/// (without the program name).
pub fn find<'t, 'w, T>(
    table: &'t [T],
    spec: impl Fn(&T) -> &OptionSpec,
    text: &'w str,
) -> Result<(&'t T, Option<&'w str>), String> {
    let (name, value) = match text.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (text, None),
    };
    if let Some(exact) = table.iter().find(|row| spec(row).name == name) {
        return Ok((exact, value));
    }
    let matches: Vec<&T> = table
        .iter()
        .filter(|row| spec(row).name.starts_with(name))
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one, value)),
        [] => Err(format!("unrecognized option '--{text}'")),
        several => {
            if let Some(gnu) = several.iter().find(|row| is_gnu_option(spec(row).name)) {
                return Ok((*gnu, value));
            }
            let list: Vec<String> = several
                .iter()
                .map(|row| format!("'--{}'", spec(row).name))
                .collect();
            Err(format!(
                "option '--{name}' is ambiguous; possibilities: {}",
                list.join(" ")
            ))
        }
    }
}

/// getopt's message for an option given without its value, and how to
/// give it: in the same word (`--map=FILE`), never in the next (which is
/// an operand or a target).
pub fn missing_argument(spec: &OptionSpec) -> String {
    let name = spec.name;
    let value = spec.value.unwrap_or("VALUE");
    format!("option '--{name}' requires an argument: give it in the same word, as --{name}={value}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::options::OPTIONS;

    fn name(word: &str) -> Result<&'static str, String> {
        find(OPTIONS, |o| o, word).map(|(o, _)| o.name)
    }

    #[test]
    fn exact_names_abbreviations_and_gnus_own() {
        assert_eq!(name("verify"), Ok("verify"));
        assert_eq!(name("veri"), Ok("verify"));
        assert_eq!(name("v"), Ok("version"));
        assert_eq!(
            name("nosuch=1"),
            Err("unrecognized option '--nosuch=1'".into())
        );
        assert_eq!(
            find(OPTIONS, |o| o, "back=sync").map(|(o, v)| (o.name, v)),
            Ok(("backend", Some("sync")))
        );
        assert_eq!(
            name("re"),
            Err(
                "option '--re' is ambiguous; possibilities: '--request-size' '--rescue' \
                 '--resume' '--retry-passes'"
                    .into()
            )
        );
    }
}
