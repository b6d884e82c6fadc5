//! The terminal table: columns padded to their widest cell, numbers
//! right-aligned, the facts and the recommendation underneath.

use super::{rows, summary_lines, Exporter, Report, COLUMNS, NUMERIC};
use crate::bench::BenchError;

pub struct Table;

impl Exporter for Table {
    fn export(&self, report: &Report) -> Result<String, BenchError> {
        Ok(render(report))
    }
}

fn render(report: &Report) -> String {
    let rows = rows(report);
    let mut widths: Vec<usize> = COLUMNS.iter().map(|c| c.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(&row.cells) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .zip(NUMERIC)
            .map(|((cell, &w), numeric)| {
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
    let header: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    let mut out = line(&header);
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    out.push_str(&line(&rule));
    for row in &rows {
        out.push_str(&line(&row.cells));
    }
    out.push('\n');
    for l in summary_lines(report) {
        out.push_str(&l);
        out.push('\n');
    }
    out
}
