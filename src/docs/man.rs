//! The man page (`doc/ddx.1`), in roff, from the tables `--help` is made
//! of and `ddx bench`'s own.

use crate::bench::args as bench;
use crate::cli::options::{OptionSpec, Values, VALUE_RULE};
use crate::cli::reference::{
    group_options, shell_lines, ungrouped_options, CONV_HELP, DESCRIPTION, ENDS, ENVIRONMENT,
    EXAMPLES, EXIT_SIGNALS, EXIT_STATUS, FLAG_HELP, GUARD, MULTIPLIERS, OPERANDS, OPTION_GROUPS,
    PAGE_CACHE, REMOTE_ENDS, SIGNALS, SUMMARY, URI_RULE,
};

use super::HEADER;

/// roff text: backslashes and hyphens escaped, no line starting with a
/// control character.
pub(super) fn roff(text: &str) -> String {
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
    out.push_str(
        ".br\n.B ddx gc\n\\-\\-store=\\fISTORE\\fR [\\fIOPTION\\fR]... \\fIINDEX\\fR...\n",
    );
    out.push_str(&format!(
        ".SH DESCRIPTION\n{}\n.PP\n{}\n",
        roff(SUMMARY),
        roff(DESCRIPTION)
    ));
    out.push_str(".SS Operands\n");
    for operand in OPERANDS {
        let more = match operand.more {
            "" => String::new(),
            more => format!("\n.br\n{}", roff(more)),
        };
        out.push_str(&format!(
            ".TP\n\\fB{}\\fR=\\fI{}\\fR\n{}{more}\n",
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
    out.push_str(".SH ENDS\nif= and of= each name one end of the copy:\n");
    for end in ENDS {
        out.push_str(&format!(".TP\n.B {}\n{}\n", roff(end.form), roff(end.help)));
    }
    out.push_str(&format!(".PP\n{}\n", roff(URI_RULE)));
    for text in REMOTE_ENDS {
        out.push_str(&format!(".PP\n{}\n", roff(text)));
    }
    out.push_str(&format!(
        ".SH OPTIONS\nGNU operands stay key=value; ddx's own options are long options, so \
         they never collide with them. {}\n",
        roff(VALUE_RULE)
    ));
    for group in OPTION_GROUPS {
        out.push_str(&format!(".SS {}\n", group.title));
        for option in group_options(group) {
            out.push_str(&man_option(option));
        }
    }
    if ungrouped_options().next().is_some() {
        out.push_str(".SS Other\n");
        for option in ungrouped_options() {
            out.push_str(&man_option(option));
        }
    }
    out.push_str(&format!(".SH PAGE CACHE\n{}\n", roff(PAGE_CACHE)));
    out.push_str(&bench_man_section());
    out.push_str(&gc_man_section());
    out.push_str(&format!(".SH SIGNALS\n{}\n", roff(SIGNALS)));
    out.push_str(&format!(".SH SAFETY\n{}\n", roff(GUARD)));
    out.push_str(".SH ENVIRONMENT\n");
    for var in ENVIRONMENT {
        let names: Vec<String> = var.names.iter().map(|n| format!("\\fB{n}\\fR")).collect();
        out.push_str(&format!(".TP\n{}\n{}\n", names.join(", "), roff(var.help)));
    }
    out.push_str(".SH EXIT STATUS\n");
    for (status, help) in EXIT_STATUS {
        out.push_str(&format!(".TP\n.B {status}\n{}\n", roff(help)));
    }
    out.push_str(&format!(".PP\n{}\n", roff(EXIT_SIGNALS)));
    out.push_str(".SH EXAMPLES\n");
    for example in EXAMPLES {
        let lines: Vec<String> = shell_lines(example.command, 72)
            .iter()
            .map(|line| roff(line))
            .collect();
        out.push_str(&format!(
            ".PP\n{}\n.RS 4\n.EX\n{}\n.EE\n.RE\n",
            roff(example.about),
            lines.join("\n")
        ));
    }
    out.push_str(
        ".SH SEE ALSO\n\\fBdd\\fR(1), \\fBddrescue\\fR(1), \\fBbmaptool\\fR(1), \\fBnbdcopy\\fR(1), \\fBsha256sum\\fR(1)\n",
    );
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
        Values::OneOf(words) | Values::Optional(words) if !words.is_empty() => {
            help.push_str(&format!(" ({})", words.join(", ")))
        }
        Values::OneOf(_) | Values::Optional(_) => {}
        Values::ListOf(words) => {
            help.push_str(&format!(" (comma\\-separated: {})", words.join(", ")))
        }
        Values::Free | Values::File => {}
    }
    format!(".TP\n{head}\n{help}\n")
}

/// The man page's GC section, from `ddx gc`'s own table and texts.
fn gc_man_section() -> String {
    use crate::cli::gc;
    let mut out = String::from(
        ".SH GC\n.B ddx gc\n\\-\\-store=\\fISTORE\\fR [\\fIOPTION\\fR]... \\fIINDEX\\fR...\n",
    );
    out.push_str(&format!(".PP\n{}\n", roff(gc::SUMMARY)));
    for option in gc::OPTIONS {
        out.push_str(&man_option(option));
    }
    out.push_str(&format!(".PP\n{}\n", roff(gc::EXIT)));
    out
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
