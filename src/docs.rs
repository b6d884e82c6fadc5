//! Generated documentation, above both front doors (the copy's `cli` and
//! `bench`), whose tables it reads: the man page (`doc/ddx.1`) and the
//! bash, zsh and fish completions (`completions/`), from the same tables as
//! `--help` (`cli::reference::OPERANDS`, the parser's symbols,
//! `cli::options::OPTIONS`, and for `ddx bench` its own table,
//! `bench::args::OPTIONS`). A test fails when the committed files differ from
//! what this generates; `DDX_REGENERATE=1 cargo test --lib docs` rewrites
//! them.

use crate::bench::args as bench;
use crate::cli::options::{OptionSpec, Values, OPTIONS, VALUE_RULE};
use crate::cli::reference::{
    Completes, CONV_HELP, EXAMPLES, FLAG_HELP, GUARD, MULTIPLIERS, OPERANDS, OPERAND_ALIASES,
    PAGE_CACHE, SIGNALS, SUMMARY,
};
use crate::operands::symbols;

/// The generated files, by path from the repository's root.
pub fn generated() -> Vec<(&'static str, String)> {
    vec![
        ("doc/ddx.1", man_page()),
        ("completions/ddx.bash", bash()),
        ("completions/_ddx", zsh()),
        ("completions/ddx.fish", fish()),
    ]
}

const HEADER: &str = "generated from src/cli/reference.rs, src/cli/options.rs and \
src/bench/args.rs by `DDX_REGENERATE=1 cargo test --lib docs`: do not edit";

/// roff text: backslashes and hyphens escaped, no line starting with a
/// control character.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

pub fn man_page() -> String {
    let mut out = format!(".\\\" {HEADER}\n");
    out.push_str(&format!(
        ".TH DDX 1 \"\" \"ddx {}\" \"User Commands\"\n",
        env!("CARGO_PKG_VERSION")
    ));
    out.push_str(".SH NAME\nddx \\- dd rebuilt for today's disks\n");
    out.push_str(".SH SYNOPSIS\n.B ddx\n[\\fIOPERAND\\fR]...\n.br\n.B ddx\n\\fIOPTION\\fR\n");
    out.push_str(".br\n.B ddx bench\n\\fITARGET\\fR [\\fIOPTION\\fR]...\n");
    out.push_str(&format!(".SH DESCRIPTION\n{}\n", roff(SUMMARY)));
    out.push_str(".SS Operands\n");
    for operand in OPERANDS {
        out.push_str(&format!(
            ".TP\n\\fB{}\\fR=\\fI{}\\fR\n{}\n",
            operand.name,
            operand.value,
            roff(operand.help)
        ));
    }
    out.push_str(&format!(".PP\n{}\n", roff(MULTIPLIERS)));
    out.push_str(".SS CONV symbols\n");
    for (name, help) in CONV_HELP {
        out.push_str(&format!(".TP\n.B {name}\n{}\n", roff(help)));
    }
    out.push_str(".SS FLAG symbols\n");
    for (name, help) in FLAG_HELP {
        out.push_str(&format!(".TP\n.B {}\n{}\n", roff(name), roff(help)));
    }
    out.push_str(&format!(
        ".SH OPTIONS\nGNU operands stay key=value; ddx's own options are long options, so \
         they never collide with them. {}\n",
        roff(VALUE_RULE)
    ));
    for option in OPTIONS {
        out.push_str(&man_option(option));
    }
    out.push_str(&format!(".SH PAGE CACHE\n{}\n", roff(PAGE_CACHE)));
    out.push_str(&bench_man_section());
    out.push_str(&format!(".SH SIGNALS\n{}\n", roff(SIGNALS)));
    out.push_str(&format!(".SH SAFETY\n{}\n", roff(GUARD)));
    out.push_str(
        ".SH EXIT STATUS\n0 on success, 1 on any failure (as GNU dd); after SIGINT or SIGTERM, \
         death by that signal.\n",
    );
    out.push_str(".SH EXAMPLES\n");
    for (what, command) in EXAMPLES {
        if !what.is_empty() {
            out.push_str(&format!(".PP\n{}\n", roff(what)));
        }
        let lines: Vec<String> = command.lines().map(roff).collect();
        out.push_str(&format!(
            ".RS 4\n.EX\n{}\n.EE\n.RE\n",
            lines.join(" \\e\n    ")
        ));
    }
    out.push_str(".SH SEE ALSO\n\\fBdd\\fR(1), \\fBddrescue\\fR(1), \\fBsha256sum\\fR(1)\n");
    out
}

/// One option as a man page paragraph.
fn man_option(option: &OptionSpec) -> String {
    let head = match (option.value, option.values) {
        (Some(value), Values::Optional(_)) => {
            format!("\\fB\\-\\-{}\\fR[=\\fI{value}\\fR]", roff(option.name))
        }
        (Some(value), _) => format!("\\fB\\-\\-{}\\fR=\\fI{value}\\fR", roff(option.name)),
        (None, _) => format!("\\fB\\-\\-{}\\fR", roff(option.name)),
    };
    let mut help = roff(option.help);
    match option.values {
        Values::OneOf(words) | Values::Optional(words) => {
            help.push_str(&format!(" ({})", words.join(", ")))
        }
        Values::ListOf(words) => {
            help.push_str(&format!(" (comma\\-separated: {})", words.join(", ")))
        }
        Values::Free | Values::File => {}
    }
    format!(".TP\n{head}\n{help}\n")
}

/// The man page's BENCH section, from `ddx bench`'s own table and texts.
fn bench_man_section() -> String {
    let mut out = String::from(".SH BENCH\n.B ddx bench\n\\fITARGET\\fR [\\fIOPTION\\fR]...\n");
    for text in [bench::SUMMARY, bench::TARGET] {
        out.push_str(&format!(".PP\n{}\n", roff(text)));
    }
    out.push_str(".SS Bench tests\n");
    for test in bench::TestName::ALL {
        out.push_str(&format!(
            ".TP\n.B {}\n{}\n",
            roff(test.name()),
            roff(test.help())
        ));
    }
    out.push_str(".SS Bench options\nA value is given as \\fB\\-\\-option\\fR=\\fIVALUE\\fR.\n");
    for option in bench::OPTIONS {
        out.push_str(&man_option(&option.spec));
    }
    for text in [
        bench::REPORT,
        bench::RECOMMENDATION,
        bench::SIGNALS,
        bench::EXIT,
    ] {
        out.push_str(&format!(".PP\n{}\n", roff(text)));
    }
    out
}

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
        .filter(|o| o.values == Values::File)
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

/// Option words as bash completes them: a valued one with its '='.
fn bash_option_words<'a>(options: impl Iterator<Item = &'a OptionSpec>) -> String {
    options
        .map(|o| match (o.value, o.values) {
            (Some(_), Values::Optional(_)) => format!("--{} --{}=", o.name, o.name),
            (Some(_), _) => format!("--{}=", o.name),
            (None, _) => format!("--{}", o.name),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `case` arms for `ddx bench`'s options with a closed set of values
/// (the comma-separated `--tests=` list).
fn bash_bench_choices() -> String {
    bench::OPTIONS
        .iter()
        .filter_map(|o| match o.spec.values {
            Values::OneOf(words) | Values::Optional(words) => Some((o, words, 0)),
            Values::ListOf(words) => Some((o, words, 1)),
            Values::Free | Values::File => None,
        })
        .map(|(o, words, list)| {
            format!(
                "        \"bench --{}=\") values=\"{}\"; list={list} ;;\n",
                o.spec.name,
                words.join(" ")
            )
        })
        .collect()
}

pub fn bash() -> String {
    let mut choices = String::new();
    for option in OPTIONS {
        let (words, list) = match option.values {
            Values::OneOf(words) | Values::Optional(words) => (words, 0),
            Values::ListOf(words) => (words, 1),
            Values::Free | Values::File => continue,
        };
        choices.push_str(&format!(
            "        --{}=) values=\"{}\"; list={list} ;;\n",
            option.name,
            words.join(" ")
        ));
    }
    choices.push_str(&own_words(|name, words| {
        format!("        {name}=) values=\"{words}\" ;;\n")
    }));
    let [conv, flags, status] = SYMBOL_OPERANDS.map(|kind| operand_keys(kind, "|"));
    let [conv_symbols, flag_symbols, status_symbols] = symbol_words();
    format!(
        r#"# bash completion for ddx: {HEADER}
_ddx() {{
    local word=${{COMP_LINE:0:$COMP_POINT}}
    word=${{word##*[[:space:]]}}
    # '=' splits words for readline: the reply replaces only what follows
    # it (or the '=' itself when nothing follows yet).
    local lead=""
    [[ ${{COMP_WORDS[COMP_CWORD]}} == "=" ]] && lead="="
    local key=${{word%%=*}} value=${{word#*=}} values="" list=0
    COMPREPLY=()
    # After "ddx bench": its options, and files for its TARGET.
    local bench=0
    [[ ${{COMP_WORDS[1]}} == bench ]] && (( COMP_CWORD > 1 )) && bench=1
    if [[ $word != *=* ]]; then
        local IFS=$' \t\n'
        if (( bench )) && [[ $word != -* ]]; then
            IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$word"))
            compopt -o filenames
            return
        elif (( bench )); then
            COMPREPLY=($(compgen -W "{bench_options}" -- "$word"))
        else
            COMPREPLY=($(compgen -W "{all} {options}" -- "$word"))
            (( COMP_CWORD == 1 )) && COMPREPLY+=($(compgen -W "bench" -- "$word"))
        fi
        [[ ${{COMPREPLY[0]}} == *= ]] && compopt -o nospace
        return
    fi
    (( bench )) && key="bench $key"
    case "$key=" in
        {files}|{file_options}|"bench --html=") 
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$value"))
            COMPREPLY=("${{COMPREPLY[@]/#/$lead}}")
            compopt -o filenames
            return ;;
        {conv}) values="{conv_symbols}"; list=1 ;;
        {flags}) values="{flag_symbols}"; list=1 ;;
        {status}) values="{status_symbols}" ;;
{choices}{bench_choices}        *) return ;;
    esac
    local done=""
    if (( list )) && [[ $value == *,* ]]; then
        done=${{value%,*}},
        value=${{value##*,}}
    fi
    local IFS=$' \t\n' symbol
    for symbol in $(compgen -W "$values" -- "$value"); do
        COMPREPLY+=("$lead$done$symbol")
    done
    (( list )) && compopt -o nospace
}}
complete -F _ddx ddx
"#,
        all = all_operand_words(),
        options = bash_option_words(OPTIONS.iter()),
        bench_options = bash_option_words(bench::OPTIONS.iter().map(|o| &o.spec)),
        bench_choices = bash_bench_choices(),
        files = operand_keys(Completes::Files, "|"),
        file_options = file_options()
            .map(|n| format!("--{n}="))
            .collect::<Vec<_>>()
            .join("|"),
    )
}

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
      commands=('bench:measure a disk')
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
            "not __fish_seen_subcommand_from bench",
        ));
    }
    out.push_str(&fish_bench());
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

complete -c ddx -n 'not __fish_seen_subcommand_from bench; and not string match -q -- "-*" (commandline -ct)' -a '(__ddx_operand)'
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
        assert!(
            stale.is_empty(),
            "{stale:?} differ from the tables: run DDX_REGENERATE=1 cargo test --lib docs"
        );
    }

    /// Drive the bash completion as readline would (words split at '=').
    #[test]
    fn bash_completion_completes_operands_symbols_and_options() {
        let script = format!(
            r#"{}
t() {{ COMP_LINE="$1"; COMP_POINT=${{#1}}
  read -ra COMP_WORDS <<< "$(sed 's/=/ = /g' <<< "$1")"
  COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); _ddx 2>/dev/null; echo "${{COMPREPLY[*]}}"; }}
t "ddx con"; t "ddx conv=uc"; t "ddx conv=ucase,not"; t "ddx status=p"; t "ddx --back"; t "ddx --backend=th"
t "ddx ben"; t "ddx bench --te"; t "ddx bench --tests=zones,qd"; t "ddx bench --js"; t "ddx bench /tmp --back"; t "ddx --hash=sha256,bl"; t "ddx --hash=x"; t "ddx bs=a"; t "ddx --sector-size=40"; t "ddx --hash-f"
"#,
            bash()
        );
        let out = match std::process::Command::new("bash")
            .arg("-c")
            .arg(&script)
            .output()
        {
            Ok(out) => out,
            Err(e) => return crate::sys::skips::skip(&format!("no bash ({e})")),
        };
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "conv=\nucase\nucase,notrunc\nprogress\n--backend=\nthreads\n\
             bench\n--tests=\nzones,qd-sweep\n--json\n\n\
             sha256,blake3\nxxh3\nauto\n4096\n--hash-file=\n",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

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

    /// zsh reads the script without a syntax error.
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
}
