//! The man page (`doc/ddx.1`), in roff, from the tables `--help` is made
//! of and `ddx bench`'s own.

use crate::bench::args as bench;
use crate::cli::options::{OptionSpec, Values, OPTIONS, VALUE_RULE};
use crate::cli::reference::{
    CONV_HELP, EXAMPLES, FLAG_HELP, GUARD, MULTIPLIERS, OPERANDS, PAGE_CACHE, SIGNALS, SUMMARY,
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
    for text in [bench::RECOMMENDATION, bench::SIGNALS, bench::EXIT] {
        out.push_str(&format!(".PP\n{}\n", roff(text)));
    }
    out
}
