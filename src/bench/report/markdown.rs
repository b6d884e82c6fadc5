//! Markdown for pasting into an issue or a forum post, in the order of
//! every report: the summary table (CrystalDiskMark's rows) with how it
//! was measured, the recommended block size, the bs-sweep and the other
//! figures as tables under a line saying what their figures are, then the
//! facts as a list.

use super::{
    details_table, fact_lines, interrupted_line, recommendation_lines, summary_notes,
    summary_table, sweep_lines, sweep_table, zones_lines, Exporter, Report, Table,
};
use crate::bench::BenchError;

pub struct Markdown;

impl Exporter for Markdown {
    fn export(&self, report: &Report) -> Result<String, BenchError> {
        Ok(render(report))
    }
}

fn render(report: &Report) -> String {
    let mut out = String::new();
    if let Some(line) = interrupted_line(report) {
        out.push_str(&format!("**{line}**\n\n"));
    }
    let summary = summary_table(report);
    out.push_str(&format!("### {}\n\n", escape(&summary.title)));
    out.push_str(&table(&summary));
    let mut notes = summary_notes(&report.summary).into_iter();
    if let Some(method) = notes.next() {
        out.push_str(&format!("\n{}\n", escape(&method)));
    }
    for line in notes {
        out.push_str(&format!("{}\n", escape(&line)));
    }
    let mut recommendation = recommendation_lines(report).into_iter();
    if let Some(first) = recommendation.next() {
        out.push_str(&format!("\n**{}**\n\n", escape(&first)));
    }
    for line in recommendation {
        out.push_str(&format!("- {}\n", escape(&line)));
    }
    if let Some(sweep) = sweep_table(report) {
        out.push_str(&format!("\n#### bs-sweep\n\n{}\n\n", escape(&sweep.title)));
        out.push_str(&table(&sweep));
        for line in sweep_lines(report) {
            out.push_str(&format!("\n{}\n", escape(&line)));
        }
    }
    let details = details_table(report);
    if !details.rows.is_empty() {
        out.push_str(&format!("\n#### Details\n\n{}\n\n", escape(&details.title)));
        out.push_str(&table(&details));
        for line in zones_lines(report) {
            out.push_str(&format!("\n{}\n", escape(&line)));
        }
    }
    out.push_str("\n#### About this run\n\n");
    for line in fact_lines(report) {
        out.push_str(&format!("- {}\n", escape(&line)));
    }
    out
}

fn table(table: &Table) -> String {
    let row = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let mut out = row(table.header.iter().map(|h| escape(h)).collect());
    let align: Vec<&str> = table
        .numeric
        .iter()
        .map(|&n| if n { "---:" } else { "---" })
        .collect();
    out.push_str(&format!("|{}|\n", align.join("|")));
    for cells in &table.rows {
        out.push_str(&row(cells.iter().map(|c| escape(c)).collect()));
    }
    out
}

/// A bar would end a table cell; nothing else in a report reads as
/// markup (GitHub's Markdown takes no emphasis inside O_DIRECT).
fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}
