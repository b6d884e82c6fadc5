//! The bash, zsh and fish completions (`completions/`), one shell per
//! module, from the same tables as `--help`; what they share (the operands
//! by what completes their value, the symbol lists, a one-line description)
//! is here.

mod bash;
mod fish;
mod zsh;

pub use bash::bash;
pub use fish::fish;
pub use zsh::zsh;

use crate::cli::options::{Values, OPTIONS};
use crate::cli::reference::{Completes, OPERANDS, OPERAND_ALIASES};
use crate::operands::symbols;

/// A one-line description for a completion menu.
fn short(help: &str) -> String {
    let cut = help.find([';', '(']).unwrap_or(help.len()).min(70);
    let text: String = help[..cut].split_whitespace().collect::<Vec<_>>().join(" ");
    text.trim_end_matches([',', ':', ' ']).to_owned()
}

fn words(list: impl Iterator<Item = &'static str>) -> String {
    list.collect::<Vec<_>>().join(" ")
}

fn operands_with(kind: Completes) -> Vec<&'static str> {
    OPERANDS
        .iter()
        .filter(|o| o.completes == kind)
        .map(|o| o.name)
        .collect()
}

/// The operands that take symbols: conv=, the flags, status=.
const SYMBOL_OPERANDS: [Completes; 3] = [
    Completes::Conversions,
    Completes::Flags,
    Completes::StatusLevels,
];

/// The symbols each of [`SYMBOL_OPERANDS`] takes, as a word list.
fn symbol_words() -> [String; 3] {
    [
        words(symbols::conv_names()),
        words(symbols::flag_names()),
        words(symbols::status_names()),
    ]
}

/// The operands that complete as `kind`, each as "NAME=", joined by
/// `separator` (a shell's case pattern or word list).
fn operand_keys(kind: Completes, separator: &str) -> String {
    operands_with(kind)
        .iter()
        .map(|n| format!("{n}="))
        .collect::<Vec<_>>()
        .join(separator)
}

/// The operands with their own words (`Completes::Words`), each written
/// by `render(name, words)` in one shell's syntax.
fn own_words(render: impl Fn(&str, String) -> String) -> String {
    OPERANDS
        .iter()
        .filter_map(|o| match o.completes {
            Completes::Words(words) => Some(render(o.name, words.join(" "))),
            _ => None,
        })
        .collect()
}

/// The options whose value is a file name.
fn file_options() -> impl Iterator<Item = &'static str> {
    OPTIONS
        .iter()
        .filter(|o| matches!(o.values, Values::File | Values::Optional([])))
        .map(|o| o.name)
}

fn all_operand_words() -> String {
    OPERANDS
        .iter()
        .map(|o| o.name)
        .chain(OPERAND_ALIASES.iter().copied())
        .map(|n| format!("{n}="))
        .collect::<Vec<_>>()
        .join(" ")
}
