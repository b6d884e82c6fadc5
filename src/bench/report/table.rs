//! The terminal report: the summary first (CrystalDiskMark's rows) and
//! the recommended block size, then the bs-sweep and the other figures,
//! each table under a line saying what its figures are, columns padded to
//! their widest cell and numbers right-aligned, then the facts.

use super::{
    details_table, fact_lines, interrupted_line, recommendation_lines, summary_notes,
    summary_table, sweep_lines, sweep_table, zones_lines, Exporter, Report,
};
use crate::bench::BenchError;

pub struct Table;

impl Exporter for Table {
    fn export(&self, report: &Report) -> Result<String, BenchError> {
        Ok(render(report))
    }
}

fn render(report: &Report) -> String {
    let mut out = String::new();
    if let Some(line) = interrupted_line(report) {
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(&layout(&summary_table(report)));
    push_lines(&mut out, &summary_notes(&report.summary));
    out.push('\n');
    push_lines(&mut out, &recommendation_lines(report));
    if let Some(sweep) = sweep_table(report) {
        out.push('\n');
        out.push_str(&layout(&sweep));
        push_lines(&mut out, &sweep_lines(report));
    }
    let details = details_table(report);
    if !details.rows.is_empty() {
        out.push('\n');
        out.push_str(&layout(&details));
        push_lines(&mut out, &zones_lines(report));
    }
    out.push('\n');
    push_lines(&mut out, &fact_lines(report));
    out
}

fn push_lines(out: &mut String, lines: &[String]) {
    for line in lines {
        out.push_str(line);
        out.push('\n');
    }
}

/// The title, the header, a rule of dashes and the rows.
fn layout(table: &super::Table) -> String {
    let mut widths: Vec<usize> = table.header.iter().map(|c| c.chars().count()).collect();
    for row in &table.rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .zip(&table.numeric)
            .map(|((cell, &w), &numeric)| {
                let pad = " ".repeat(w - cell.chars().count());
                if numeric {
                    format!("{pad}{cell}")
                } else {
                    format!("{cell}{pad}")
                }
            })
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = format!("{}\n", table.title);
    let header: Vec<String> = table.header.iter().map(|c| c.to_string()).collect();
    out.push_str(&line(&header));
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    out.push_str(&line(&rule));
    for row in &table.rows {
        out.push_str(&line(row));
    }
    out
}
