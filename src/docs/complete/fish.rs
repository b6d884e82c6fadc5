//! The fish completion (`completions/ddx.fish`): `complete` lines for
//! the options, a function for the operands and their values.

use crate::bench::args as bench;
use crate::cli::options::{OptionSpec, Values, OPTIONS};
use crate::cli::reference::{Completes, OPERANDS};

use super::{operand_keys, own_words, short, symbol_words, SYMBOL_OPERANDS};
use crate::docs::HEADER;

fn fish_text(text: &str) -> String {
    short(text).replace('\\', "\\\\").replace('\'', "\\'")
}

/// One option's `complete` line, offered where `condition` holds.
fn fish_option(option: &OptionSpec, condition: &str) -> String {
    let mut line = format!("complete -c ddx -n '{condition}' -l {}", option.name);
    match (option.value, option.values) {
        (None, _) => {}
        (Some(_), Values::Free) => line.push_str(" -x"),
        (Some(_), Values::OneOf(words)) => line.push_str(&format!(" -x -a '{}'", words.join(" "))),
        (Some(_), Values::ListOf(words)) => {
            line.push_str(&format!(" -x -a '(__ddx_list {})'", words.join(" ")))
        }
        (Some(_), Values::File) => line.push_str(" -r -F"),
        // No -x: the option stands alone as well.
        (Some(_), Values::Optional([])) => line.push_str(" -F"),
        (Some(_), Values::Optional(words)) => line.push_str(&format!(" -a '{}'", words.join(" "))),
    }
    line.push_str(&format!(" -d '{}'\n", fish_text(option.help)));
    line
}

/// `ddx bench`'s part of the fish completion: the subcommand, its
/// options, files for its TARGET.
fn fish_bench() -> String {
    const IN_BENCH: &str = "__fish_seen_subcommand_from bench";
    let mut out =
        String::from("\ncomplete -c ddx -n '__fish_use_subcommand' -a bench -d 'measure a disk'\n");
    for option in bench::OPTIONS {
        out.push_str(&fish_option(&option.spec, IN_BENCH));
    }
    out.push_str(&format!(
        "complete -c ddx -n '{IN_BENCH}; and not string match -q -- \"-*\" (commandline -ct)' -F\n"
    ));
    out
}

/// `ddx gc`'s part of the fish completion: the subcommand, its options,
/// files for its INDEX operands.
fn fish_gc() -> String {
    const IN_GC: &str = "__fish_seen_subcommand_from gc";
    let mut out = String::from(
        "\ncomplete -c ddx -n '__fish_use_subcommand' -a gc -d 'remove the chunks no index names'\n",
    );
    for option in crate::cli::gc::OPTIONS {
        out.push_str(&fish_option(option, IN_GC));
    }
    out.push_str(&format!(
        "complete -c ddx -n '{IN_GC}; and not string match -q -- \"-*\" (commandline -ct)' -F\n"
    ));
    out
}

pub fn fish() -> String {
    let mut out = format!(
        r#"# fish completion for ddx: {HEADER}

complete -c ddx -f

# A comma-separated list after --option= or operand=: complete its last item.
function __ddx_list
    set -l value (string replace -r '^[^=]*=' '' -- (commandline -ct))
    set -l done (string replace -r '[^,]*$' '' -- $value)
    for word in $argv
        echo $done$word
    end
end
"#
    );
    for option in OPTIONS {
        out.push_str(&fish_option(
            option,
            "not __fish_seen_subcommand_from bench gc",
        ));
    }
    out.push_str(&fish_bench());
    out.push_str(&fish_gc());
    let operand_lines: Vec<String> = OPERANDS
        .iter()
        .map(|o| {
            format!(
                "            printf '%s\\t%s\\n' {}= '{}'",
                o.name,
                fish_text(o.help)
            )
        })
        .collect();
    let [conv, flags, status] = SYMBOL_OPERANDS.map(|kind| operand_keys(kind, " "));
    let [conv_symbols, flag_symbols, status_symbols] = symbol_words();
    out.push_str(&format!(
        r#"
function __ddx_operand
    set -l token (commandline -ct)
    set -l key (string split -m 1 = -- $token)[1]
    set -l value (string replace -r '^[^=]*=' '' -- $token)
    switch "$key="
        case {files}
            for path in (__fish_complete_path $value)
                echo $key=$path
            end
            return
        case {conv}
            set symbols {conv_symbols}
        case {flags}
            set symbols {flag_symbols}
        case {status}
            for level in {status_symbols}
                echo $key=$level
            end
            return
{own_words}        case '*'
            if string match -q -- '*=*' $token
                return
            end
{operand_lines}
            return
    end
    # A comma-separated list: complete its last item.
    set -l done (string replace -r '[^,]*$' '' -- $value)
    for symbol in $symbols
        echo $key=$done$symbol
    end
end

complete -c ddx -n 'not __fish_seen_subcommand_from bench gc; and not string match -q -- "-*" (commandline -ct)' -a '(__ddx_operand)'
"#,
        files = operand_keys(Completes::Files, " "),
        operand_lines = operand_lines.join("\n"),
        own_words = own_words(|name, words| format!(
            "        case {name}=\n            for word in {words}\n                echo $key=$word\n            end\n            return\n"
        )),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ask fish what it completes on `line`, with the generated script.
    fn fish_completes(line: &str) -> Option<Vec<String>> {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("ddx.fish");
        std::fs::write(&script, fish()).unwrap();
        let out = std::process::Command::new("fish")
            .arg("--no-config")
            .arg("-c")
            .arg(format!("source {}; complete -C '{line}'", script.display()))
            .current_dir(dir.path())
            .output();
        let out = match out {
            Ok(out) => out,
            Err(e) => {
                crate::sys::skips::skip(&format!("no fish ({e})"));
                return None;
            }
        };
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| l.split('\t').next().unwrap_or(l).to_owned())
                .collect(),
        )
    }

    #[test]
    fn fish_completes_bench_apart_from_the_copy() {
        let Some(bench_options) = fish_completes("ddx bench --") else {
            return;
        };
        for option in bench::OPTIONS {
            let name = format!("--{}", option.spec.name);
            assert!(bench_options.contains(&name), "{name}: {bench_options:?}");
        }
        assert!(!bench_options.contains(&"--backend".to_owned()));
        let copy_options = fish_completes("ddx --").unwrap();
        assert!(copy_options.contains(&"--backend".to_owned()));
        assert!(!copy_options.contains(&"--destructive".to_owned()));
        assert!(fish_completes("ddx ")
            .unwrap()
            .contains(&"bench".to_owned()));
        assert_eq!(
            fish_completes("ddx bench --tests=zones,qd").unwrap(),
            ["--tests=zones,qd-sweep"]
        );
    }
}
