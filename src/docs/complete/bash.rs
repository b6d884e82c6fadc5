//! The bash completion (`completions/ddx.bash`): readline splits words at
//! '=', so the reply completes what follows it.

use crate::bench::args as bench;
use crate::cli::options::{OptionSpec, Values, OPTIONS};
use crate::cli::reference::Completes;

use super::{
    all_operand_words, file_options, operand_keys, own_words, symbol_words, SYMBOL_OPERANDS,
};
use crate::docs::HEADER;

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
            Values::Optional([]) => continue,
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
    # After "ddx bench" or "ddx gc": its options, and files for its
    # TARGET or INDEX operands.
    local bench=0 gc=0
    [[ ${{COMP_WORDS[1]}} == bench ]] && (( COMP_CWORD > 1 )) && bench=1
    [[ ${{COMP_WORDS[1]}} == gc ]] && (( COMP_CWORD > 1 )) && gc=1
    if [[ $word != *=* ]]; then
        local IFS=$' \t\n'
        if (( bench || gc )) && [[ $word != -* ]]; then
            IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$word"))
            compopt -o filenames
            return
        elif (( bench )); then
            COMPREPLY=($(compgen -W "{bench_options}" -- "$word"))
        elif (( gc )); then
            COMPREPLY=($(compgen -W "{gc_options}" -- "$word"))
        else
            COMPREPLY=($(compgen -W "{all} {options}" -- "$word"))
            (( COMP_CWORD == 1 )) && COMPREPLY+=($(compgen -W "bench gc" -- "$word"))
        fi
        [[ ${{COMPREPLY[0]}} == *= ]] && compopt -o nospace
        return
    fi
    (( bench )) && key="bench $key"
    (( gc )) && key="gc $key"
    case "$key=" in
        {files}|{file_options}|"bench --html="|"gc --store=") 
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
        gc_options = bash_option_words(crate::cli::gc::OPTIONS.iter()),
        files = operand_keys(Completes::Files, "|"),
        file_options = file_options()
            .map(|n| format!("--{n}="))
            .collect::<Vec<_>>()
            .join("|"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
