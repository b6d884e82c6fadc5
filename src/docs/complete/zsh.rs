//! The zsh completion (`completions/_ddx`): `_arguments` specs for the
//! options, `compset` for the operands' values.

use crate::bench::args as bench;
use crate::cli::options::{OptionSpec, Values, OPTIONS};
use crate::cli::reference::{Completes, OPERANDS, OPERAND_ALIASES};

use super::{operands_with, own_words, short, symbol_words, SYMBOL_OPERANDS};
use crate::docs::HEADER;

/// Text safe inside a zsh single-quoted `_arguments`/`_describe` spec.
fn zsh_text(text: &str) -> String {
    short(text)
        .replace('\'', "'\\''")
        .replace(':', "\\:")
        .replace('[', "\\[")
        .replace(']', "\\]")
}

/// An option's `_arguments` spec line, ending in a backslash.
fn zsh_spec(option: &OptionSpec) -> String {
    let help = zsh_text(option.help);
    let spec = match option.value {
        None => format!("'--{}[{help}]'", option.name),
        Some(value) => {
            let action = match option.values {
                Values::Free => " ".to_owned(),
                Values::Optional([]) => "_files".to_owned(),
                Values::OneOf(words) | Values::Optional(words) => format!("({})", words.join(" ")),
                Values::ListOf(words) => {
                    format!("_values -s , {} {}", option.name, words.join(" "))
                }
                Values::File => "_files".to_owned(),
            };
            // zsh's "=-": the value may be left out.
            let equals = match option.values {
                Values::Optional(_) => "=-",
                _ => "=",
            };
            format!("'--{}{equals}[{help}]:{value}:{action}'", option.name)
        }
    };
    format!("    {spec} \\\n")
}

pub fn zsh() -> String {
    let specs: String = OPTIONS.iter().map(zsh_spec).collect();
    let bench_specs: String = bench::OPTIONS.iter().map(|o| zsh_spec(&o.spec)).collect();
    let gc_specs: String = crate::cli::gc::OPTIONS.iter().map(zsh_spec).collect();
    let described: Vec<String> = OPERANDS
        .iter()
        .map(|o| format!("    '{}=:{}'", o.name, zsh_text(o.help)))
        .chain(OPERAND_ALIASES.iter().map(|a| {
            format!(
                "    '{a}=:same as {}'",
                if *a == "iseek" { "skip" } else { "seek" }
            )
        }))
        .collect();
    let [conv, flags, status] = SYMBOL_OPERANDS.map(|kind| operands_with(kind).join("|"));
    let [conv_symbols, flag_symbols, status_symbols] = symbol_words();
    format!(
        r#"#compdef ddx
# zsh completion for ddx: {HEADER}

_ddx_operand() {{
  if compset -P '({files})='; then
    _files
  elif compset -P '({conv})='; then
    _values -s , 'conversion' {conv_symbols}
  elif compset -P '({flags})='; then
    _values -s , 'flag' {flag_symbols}
  elif compset -P '({status})='; then
    _values 'level' {status_symbols}
{own_words}  else
    local -a operands
    operands=(
{described}
    )
    _describe -t operands 'operand' operands -S ''
    if (( CURRENT == 2 )); then
      local -a commands
      commands=('bench:measure a disk' 'gc:remove the chunks no index names from a store')
      _describe -t commands 'command' commands
    fi
  fi
}}

# After "ddx bench": its own options, and files for its TARGET.
if (( CURRENT > 2 )) && [[ $words[2] == bench ]]; then
  shift words
  (( CURRENT-- ))
  _arguments -S \
{bench_specs}    '1:target:_files'
  return
fi

# After "ddx gc": its own options, and files for its INDEX operands.
if (( CURRENT > 2 )) && [[ $words[2] == gc ]]; then
  shift words
  (( CURRENT-- ))
  _arguments -S \
{gc_specs}    '*:index:_files'
  return
fi

_arguments -S \
{specs}    '*:operand:_ddx_operand'
"#,
        files = operands_with(Completes::Files).join("|"),
        described = described.join("\n"),
        own_words = own_words(|name, words| {
            format!("  elif compset -P '{name}='; then\n    compadd {words}\n")
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zsh_script_parses() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("_ddx");
        std::fs::write(&script, zsh()).unwrap();
        match std::process::Command::new("zsh")
            .arg("-n")
            .arg(&script)
            .output()
        {
            Ok(out) => assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => crate::sys::skips::skip(&format!("no zsh ({e})")),
        }
    }
}
