//! Markdown for pasting into an issue or a forum post: one table of the
//! figures, then the facts as a list.

use super::{rows, summary_lines, Exporter, Report, COLUMNS, NUMERIC};
use crate::bench::BenchError;

pub struct Markdown;

impl Exporter for Markdown {
    fn export(&self, report: &Report) -> Result<String, BenchError> {
        Ok(render(report))
    }
}

fn render(report: &Report) -> String {
    let mut out = String::from("### ddx bench\n\n");
    out.push_str(&format!("| {} |\n", COLUMNS.join(" | ")));
    let align: Vec<&str> = NUMERIC
        .iter()
        .map(|&n| if n { "---:" } else { "---" })
        .collect();
    out.push_str(&format!("|{}|\n", align.join("|")));
    for row in rows(report) {
        let cells: Vec<String> = row.cells.iter().map(|c| c.replace('|', "\\|")).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out.push('\n');
    for line in summary_lines(report) {
        out.push_str(&format!("- {line}\n"));
    }
    out
}
