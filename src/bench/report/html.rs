//! One self-contained HTML page (inline CSS and SVG, no script, nothing
//! fetched) that a person opens in a browser, in the order of every
//! report: the summary (CrystalDiskMark's rows, the figures large) with
//! how it was measured, the recommended block size with how it was
//! decided, then the charts (the bs-sweep with its recommendation lines,
//! throughput vs offset, the latency distribution), the bs-sweep's table,
//! every other figure, and the facts. A chart keeps its words out of the
//! plotting area (the legend and the labels of the recommendation lines
//! sit above it, in rows where no line of data can cross them). Charts
//! carry `data-chart` and their points `data-x`/`data-y`, the summary its
//! rows and cells, so tests can read the page as drawn.

use std::fmt::Write;

use super::{
    details_table, fact_lines, interrupted_line, latency_text, percent_text, rate_text,
    recommendation_lines, round_rate_text, size_text, summary_notes, sweep_table, Exporter, Report,
    Table,
};
use crate::bench::summary::Cell;
use crate::bench::BenchError;

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 330.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 40.0;
/// Room above the plot: the legend's row, then two rows for the labels
/// of the recommendation lines.
const TOP: f64 = 62.0;
const BOTTOM: f64 = 50.0;
/// The legend's baseline, and the label rows' (the first nearest the
/// plot), each [`LABEL_ROW`] above the last.
const LEGEND_Y: f64 = 16.0;
const LABEL_Y: f64 = TOP - 12.0;
/// The x labels' baseline below the plot: clear of the lowest y label.
const X_LABEL_DROP: f64 = 20.0;
const LABEL_ROW: f64 = 14.0;
/// A generous width of one character of the charts' 11 px text, for
/// keeping labels apart (the browser test measures the real boxes).
const CHAR_WIDTH: f64 = 6.8;
/// Reads are blue and writes red in every chart, whichever is drawn.
const READ: &str = "#1f77b4";
const WRITE: &str = "#d62728";

pub struct Html;

impl Exporter for Html {
    fn export(&self, report: &Report) -> Result<String, BenchError> {
        Ok(render(report))
    }
}

/// The page for `report`.
pub fn render(report: &Report) -> String {
    let mut page = String::new();
    let title = format!("ddx bench: {}", report.target.path);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    if let Some(line) = interrupted_line(report) {
        let _ = writeln!(page, "<p class=\"interrupted\">{}</p>", escape(&line));
    }
    page.push_str(&summary_section(report));
    page.push_str(&recommendation_section(report));

    page.push_str(&sweep_chart(report));
    if let Some(sweep) = sweep_table(report) {
        page.push_str(&table("bs-sweep", "Block sizes", &sweep));
        for line in super::sweep_lines(report) {
            let _ = writeln!(page, "<p class=\"method\">{}</p>", escape(&line));
        }
    }
    page.push_str(&zones_chart(report));
    page.push_str(&latency_chart(report));
    let details = details_table(report);
    if !details.rows.is_empty() {
        page.push_str(&table("details", "Every other figure", &details));
        for line in super::zones_lines(report) {
            let _ = writeln!(page, "<p class=\"method\">{}</p>", escape(&line));
        }
    }
    page.push_str("<h2>About this run</h2>\n<ul class=\"facts\">\n");
    for line in fact_lines(report) {
        let _ = writeln!(page, "<li>{}</li>", escape(&line));
    }
    page.push_str("</ul>\n</body>\n</html>\n");
    page
}

/// The summary: a row per CrystalDiskMark row, each cell's throughput
/// large and its IOPS under it, then how the cells were measured.
fn summary_section(report: &Report) -> String {
    let mut html = String::from(
        "<section id=\"summary\">\n<table class=\"summary\">\n\
         <tr><th></th><th>Read</th><th>Write</th></tr>\n",
    );
    let cell = |op: &str, cell: &Cell| -> String {
        match cell.throughput_bytes_per_sec {
            Some(rate) => format!(
                "<td class=\"cell\" data-op=\"{op}\" data-test=\"{test}\" data-y=\"{rate:.0}\" \
                 title=\"{title}\"><span class=\"rate\">{}</span><span class=\"iops\">{} \
                 IOPS</span></td>",
                escape(&rate_text(rate)),
                escape(&cell.iops.map(super::iops_text).unwrap_or_default()),
                test = cell.test,
                title = escape(&format!("{}; fio {}", cell.test, cell.fio)),
            ),
            None => format!(
                "<td class=\"cell missing\" data-op=\"{op}\" data-test=\"{}\">\
                 <span class=\"rate\">-</span><span class=\"iops\">{}</span></td>",
                cell.test,
                escape(cell.missing.as_deref().unwrap_or_default()),
            ),
        }
    };
    for row in &report.summary.rows {
        let _ = writeln!(
            html,
            "<tr data-row=\"{name}\"><th class=\"row\">{name}</th>{}{}</tr>",
            cell("read", &row.read),
            cell("write", &row.write),
            name = escape(&row.name),
        );
    }
    html.push_str("</table>\n");
    let mut notes = summary_notes(&report.summary).into_iter();
    if let Some(method) = notes.next() {
        let _ = writeln!(html, "<p class=\"method\">{}</p>", escape(&method));
    }
    for line in notes {
        let _ = writeln!(html, "<p class=\"method\">{}</p>", escape(&line));
    }
    html.push_str("</section>\n");
    html
}

/// The recommended block size in large type, how each answer was
/// decided under it, and the rule last.
fn recommendation_section(report: &Report) -> String {
    let mut lines = recommendation_lines(report).into_iter();
    let mut html = String::from("<section id=\"recommendation\">\n");
    if let Some(answer) = lines.next() {
        let _ = writeln!(html, "<p class=\"answer\">{}</p>", escape(&answer));
    }
    let rest: Vec<String> = lines.collect();
    if !rest.is_empty() {
        html.push_str("<ul class=\"verdicts\">\n");
        for line in rest {
            let _ = writeln!(html, "<li>{}</li>", escape(&line));
        }
        html.push_str("</ul>\n");
    }
    html.push_str("</section>\n");
    html
}

/// A table under its heading and the line saying what its figures are.
fn table(id: &str, heading: &str, table: &Table) -> String {
    let mut html = format!(
        "<h2>{}</h2>\n<p class=\"method\">{}</p>\n<table id=\"{id}\">\n<tr>",
        escape(heading),
        escape(&table.title)
    );
    for c in &table.header {
        let _ = write!(html, "<th>{}</th>", escape(c));
    }
    html.push_str("</tr>\n");
    for row in &table.rows {
        html.push_str("<tr>");
        for (cell, &numeric) in row.iter().zip(&table.numeric) {
            let class = if numeric { " class=\"n\"" } else { "" };
            let _ = write!(html, "<td{class}>{}</td>", escape(cell));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table>\n");
    html
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:64em;\
color:#222}h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}ul.facts{font-size:.9em;\
line-height:1.5}table{border-collapse:collapse;font-size:.85em}th,td{padding:.2em .6em;\
border-bottom:1px solid #ddd;text-align:left}td.n{text-align:right;\
font-variant-numeric:tabular-nums}table.summary{font-size:1em}table.summary th.row{\
font-size:1.1em;padding-right:1.5em}table.summary td.cell{text-align:right;\
min-width:9em;padding:.4em 1em}table.summary .rate{display:block;font-size:1.6em;\
font-weight:600;font-variant-numeric:tabular-nums}table.summary .iops{display:block;\
font-size:.8em;color:#666}table.summary td.missing .iops{max-width:14em;margin-left:auto}\
p.method{font-size:.85em;color:#555;max-width:56em}p.answer{font-size:1.3em;\
font-weight:600;margin:.3em 0}#recommendation{background:#f3f7fb;border-left:4px solid \
#1f77b4;padding:.6em 1em;margin:1.2em 0}ul.verdicts{font-size:.85em;margin:.3em 0}\
p.interrupted{color:#a00;font-weight:600}svg{background:#fafafa;border:1px solid #e4e4e4}\
svg text{font-size:11px;fill:#444}.axis{stroke:#888}.grid{stroke:#e0e0e0}\
.none{color:#888;font-style:italic}";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Scale {
    Linear,
    /// Log scale with ticks at powers of two (block sizes).
    Log2,
    /// Log scale with ticks at 1, 2, 5 × 10^k (latencies).
    Log10,
}

/// A round step near `span / 4`: 1, 2 or 5 times a power of ten.
fn nice_step(span: f64) -> f64 {
    let raw = (span / 4.0).max(f64::MIN_POSITIVE);
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// One line of a chart: its name, colour and (x, y) points.
struct Series {
    name: String,
    color: &'static str,
    points: Vec<(f64, f64)>,
}

/// A vertical line at `x` that belongs to a series (a recommended size),
/// drawn and labelled in the series' colour, and a horizontal one at `y`
/// (the bar the sizes had to reach), unlabelled but titled.
struct Marker {
    series: String,
    color: &'static str,
    x: f64,
    label: String,
    bar: Option<(f64, String)>,
}

struct Chart<'a> {
    id: &'a str,
    title: &'a str,
    x_label: &'a str,
    y_label: &'a str,
    x_scale: Scale,
    x_text: &'a dyn Fn(f64) -> String,
    y_text: &'a dyn Fn(f64) -> String,
    /// The recommended sizes, one per series that has one.
    markers: Vec<Marker>,
    /// Draw points as circles (measurements) or not (a histogram's steps).
    dots: bool,
    /// Linear ticks fall on round multiples of this unit (1 MiB for
    /// offsets, so labels read "64 MiB", not "61 MiB").
    x_unit: f64,
}

fn sweep_chart(report: &Report) -> String {
    let series: Vec<Series> = [("read", READ), ("write", WRITE)]
        .iter()
        .map(|&(op, color)| Series {
            name: op.to_owned(),
            color,
            points: report
                .results
                .iter()
                .filter(|r| r.figure.test == "bs-sweep" && r.figure.op == op)
                .map(|r| (r.figure.block_size as f64, r.throughput_bytes_per_sec))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let markers = series
        .iter()
        .filter_map(|s| {
            let judgement = report.recommendation.judgement(&s.name)?;
            let bar = judgement.bar_bytes_per_sec;
            Some(Marker {
                series: s.name.clone(),
                color: s.color,
                x: judgement.block_size as f64,
                label: format!(
                    "{} {} ({} of best)",
                    s.name,
                    size_text(judgement.block_size),
                    percent_text(judgement.of_best)
                ),
                bar: Some((
                    bar,
                    format!(
                        "{}: the bar, {} of the best ({}): {}",
                        s.name,
                        percent_text(judgement.bar),
                        rate_text(judgement.best_bytes_per_sec),
                        rate_text(bar)
                    ),
                )),
            })
        })
        .collect();
    draw(
        &Chart {
            id: "bs-sweep",
            title: "bs-sweep: block size over the median request time, per block size \
                    (O_DIRECT, sequential, one at a time; the median of the rounds)",
            x_label: "block size",
            y_label: "block size / median request time",
            x_scale: Scale::Log2,
            x_text: &|x| size_text(x.round() as u64),
            y_text: &round_rate_text,
            markers,
            dots: true,
            x_unit: 1.0,
        },
        &series,
    )
}

fn zones_chart(report: &Report) -> String {
    let points: Vec<(f64, f64)> = report
        .results
        .iter()
        .filter(|r| r.figure.test == "zones")
        .map(|r| {
            (
                r.figure.offset.unwrap_or(0) as f64,
                r.throughput_bytes_per_sec,
            )
        })
        .collect();
    let series: Vec<Series> = if points.is_empty() {
        Vec::new()
    } else {
        vec![Series {
            name: "read".to_owned(),
            color: READ,
            points,
        }]
    };
    draw(
        &Chart {
            id: "zones",
            title: "Throughput vs offset (zones, O_DIRECT read)",
            x_label: "offset",
            y_label: "throughput",
            x_scale: Scale::Linear,
            x_text: &|x| {
                crate::text::human::human(x.round() as u64, crate::text::human::Base::Iec, 1, 1)
            },
            y_text: &round_rate_text,
            markers: Vec::new(),
            dots: true,
            x_unit: (1 << 20) as f64,
        },
        &series,
    )
}

/// Share of requests per latency bin, bins evenly spaced on a log scale.
pub fn histogram(samples: &[u64], bins: usize) -> Vec<(f64, f64)> {
    let (Some(&lo), Some(&hi)) = (samples.iter().min(), samples.iter().max()) else {
        return Vec::new();
    };
    let (lo, hi) = ((lo.max(1) as f64).ln(), (hi.max(1) as f64).ln());
    let width = ((hi - lo) / bins as f64).max(1e-9);
    let mut counts = vec![0usize; bins];
    for &s in samples {
        let at = (((s.max(1) as f64).ln() - lo) / width) as usize;
        counts[at.min(bins - 1)] += 1;
    }
    counts
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let center = (lo + width * (i as f64 + 0.5)).exp();
            (center, 100.0 * c as f64 / samples.len() as f64)
        })
        .collect()
}

fn latency_chart(report: &Report) -> String {
    let series: Vec<Series> = report
        .results
        .iter()
        .filter(|r| r.figure.test == "latency" && !r.latency_samples_ns.is_empty())
        .map(|r| Series {
            name: format!(
                "{} {} {}",
                r.figure.op,
                r.figure.mode,
                size_text(r.figure.block_size)
            ),
            color: if r.figure.op == "write" { WRITE } else { READ },
            points: histogram(&r.latency_samples_ns, 40),
        })
        .collect();
    draw(
        &Chart {
            id: "latency",
            title: "Latency distribution (share of requests per bin)",
            x_label: "latency",
            y_label: "requests",
            x_scale: Scale::Log10,
            x_text: &latency_text,
            y_text: &|y| format!("{y:.0}%"),
            markers: Vec::new(),
            dots: false,
            x_unit: 1.0,
        },
        &series,
    )
}

fn draw(chart: &Chart<'_>, series: &[Series]) -> String {
    let mut svg = format!("<h2>{}</h2>\n", escape(chart.title));
    let all: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    if all.is_empty() {
        let _ = writeln!(
            svg,
            "<p class=\"none\" data-chart=\"{}\">not measured in this run</p>",
            chart.id
        );
        return svg;
    }
    let fx = |x: f64| match chart.x_scale {
        Scale::Linear => x,
        Scale::Log2 | Scale::Log10 => x.max(1e-9).log2(),
    };
    let (mut x0, mut x1) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(fx(p.0)), b.max(fx(p.0)))
        });
    if x1 - x0 < 1e-9 {
        x0 -= 1.0;
        x1 += 1.0;
    }
    let y_max = all.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-9);
    let y_step = nice_step(y_max);
    let y1 = (y_max / y_step).ceil() * y_step;
    let (pw, ph) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let px = |x: f64| LEFT + (fx(x) - x0) / (x1 - x0) * pw;
    let py = |y: f64| TOP + ph - y / y1 * ph;

    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" data-chart=\"{}\" \
         width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\">",
        chart.id
    );
    // Horizontal grid with y labels at round values, each centred on its
    // line (the lowest one then ends above the x labels' row).
    let y_ticks = (y1 / y_step).round() as u32;
    for i in 0..=y_ticks {
        let y = y_step * f64::from(i);
        let _ = writeln!(
            svg,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" dominant-baseline=\"central\">{}</text>",
            LEFT + pw,
            py(y),
            py(y),
            LEFT - 8.0,
            py(y),
            escape(&(chart.y_text)(y))
        );
    }
    // X ticks: powers of two (block sizes), 1-2-5 decades (latency) or
    // round steps (offsets).
    let ticks: Vec<f64> = match chart.x_scale {
        Scale::Log2 => {
            let (a, b) = (x0.ceil() as i64, x1.floor() as i64);
            // At most about nine labels: 16 sizes' labels would overlap.
            let step = ((b - a + 7) / 8).max(1);
            (a..=b)
                .step_by(step as usize)
                .map(|e| 2f64.powi(e as i32))
                .collect()
        }
        Scale::Log10 => {
            let (lo, hi) = (2f64.powf(x0), 2f64.powf(x1));
            let mut ticks = Vec::new();
            let mut decade = 10f64.powf(lo.log10().floor());
            while decade <= hi {
                for m in [1.0, 2.0, 5.0] {
                    let t = decade * m;
                    if t >= lo && t <= hi {
                        ticks.push(t);
                    }
                }
                decade *= 10.0;
            }
            // Across many decades, the 2s and 5s would crowd the labels.
            if ticks.len() > 9 {
                ticks.retain(|t| {
                    let mantissa = t / 10f64.powf(t.log10().floor());
                    (mantissa - 1.0).abs() < 1e-6
                });
            }
            ticks
        }
        Scale::Linear => {
            let step = nice_step((x1 - x0) / chart.x_unit) * chart.x_unit;
            let first = (x0 / step).ceil() as i64;
            let last = (x1 / step).floor() as i64;
            (first..=last).map(|i| i as f64 * step).collect()
        }
    };
    for t in ticks {
        let _ = writeln!(
            svg,
            "<line class=\"grid\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{TOP}\" y2=\"{1:.1}\"/>\
             <text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\">{3}</text>",
            px(t),
            TOP + ph,
            TOP + ph + X_LABEL_DROP,
            escape(&(chart.x_text)(t))
        );
    }
    let _ = writeln!(
        svg,
        "<line class=\"axis\" x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{0:.1}\"/>\
         <line class=\"axis\" x1=\"{LEFT}\" x2=\"{1:.1}\" y1=\"{0:.1}\" y2=\"{0:.1}\"/>\
         <text x=\"{2:.1}\" y=\"{3:.1}\" text-anchor=\"middle\">{4}</text>\
         <text x=\"14\" y=\"{5:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {5:.1})\">{6}</text>",
        TOP + ph,
        LEFT + pw,
        LEFT + pw / 2.0,
        HEIGHT - 8.0,
        escape(chart.x_label),
        TOP + ph / 2.0,
        escape(chart.y_label)
    );
    let xs: Vec<f64> = chart.markers.iter().map(|m| px(m.x)).collect();
    let widths: Vec<f64> = chart.markers.iter().map(|m| text_width(&m.label)).collect();
    let places = place_labels(&xs, &widths);
    for ((marker, &x), place) in chart.markers.iter().zip(&xs).zip(&places) {
        // The line rises from the plot's foot through the plot to its
        // label, which sits above the plot beside the line's top, in the
        // line's colour (a style, which the sheet's grey for text cannot
        // override as it would the fill attribute).
        let label_y = LABEL_Y - LABEL_ROW * place.row as f64;
        let (label_x, anchor) = match place.side {
            Side::Right => (x + LABEL_GAP, "start"),
            Side::Left => (x - LABEL_GAP, "end"),
        };
        let _ = writeln!(
            svg,
            "<line class=\"marker\" data-series=\"{series}\" data-x=\"{data_x}\" \
             x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{top:.1}\" y2=\"{bottom:.1}\" stroke=\"{color}\" \
             stroke-width=\"1.5\" stroke-dasharray=\"4 3\"/>\
             <text class=\"marker-label\" data-series=\"{series}\" x=\"{label_x:.1}\" \
             y=\"{label_y:.1}\" text-anchor=\"{anchor}\" fill=\"{color}\" \
             style=\"fill:{color}\">{label}</text>",
            series = escape(&marker.series),
            data_x = marker.x,
            top = label_y - 9.0,
            bottom = TOP + ph,
            color = marker.color,
            label = escape(&marker.label),
        );
        if let Some((y, title)) = &marker.bar {
            let _ = writeln!(
                svg,
                "<line class=\"bar\" data-series=\"{series}\" data-y=\"{y:.0}\" \
                 x1=\"{LEFT}\" x2=\"{right:.1}\" y1=\"{py:.1}\" y2=\"{py:.1}\" \
                 stroke=\"{color}\" stroke-width=\"1\" stroke-dasharray=\"2 4\">\
                 <title>{title}</title></line>",
                series = escape(&marker.series),
                right = LEFT + pw,
                py = py(*y),
                color = marker.color,
                title = escape(title),
            );
        }
    }
    let mut legend_x = LEFT;
    for s in series {
        let color = s.color;
        let points: Vec<String> = s
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline class=\"series\" data-series=\"{}\" fill=\"none\" stroke=\"{color}\" \
             stroke-width=\"2\" points=\"{}\"/>",
            escape(&s.name),
            points.join(" ")
        );
        if chart.dots {
            for &(x, y) in &s.points {
                let _ = writeln!(
                    svg,
                    "<circle class=\"point\" data-series=\"{}\" data-x=\"{x}\" data-y=\"{y:.0}\" \
                     cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{color}\"><title>{}: {}</title></circle>",
                    escape(&s.name),
                    px(x),
                    py(y),
                    escape(&(chart.x_text)(x)),
                    escape(&(chart.y_text)(y))
                );
            }
        }
        // Legend, in the top row, above the labels and the plot.
        let _ = writeln!(
            svg,
            "<rect class=\"legend\" x=\"{0:.1}\" y=\"{1:.1}\" width=\"12\" height=\"4\" \
             fill=\"{color}\"/><text class=\"legend\" x=\"{2:.1}\" y=\"{LEGEND_Y}\">{3}</text>",
            legend_x,
            LEGEND_Y - 6.0,
            legend_x + 18.0,
            escape(&s.name)
        );
        legend_x += 18.0 + text_width(&s.name) + 24.0;
    }
    svg.push_str("</svg>\n");
    svg
}

/// Between a recommendation line and its label.
const LABEL_GAP: f64 = 4.0;

/// How wide `text` is drawn, at most.
fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * CHAR_WIDTH
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Left,
    Right,
}

/// Where a label goes: its row above the plot (0 nearest) and its side
/// of its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    row: usize,
    side: Side,
}

/// The rows above the plot that labels may take.
const LABEL_ROWS: usize = 2;

/// A place for the label of each line at `xs` (of `widths`): inside the
/// drawing, no two labels overlapping, and no line crossing another's
/// label on its way up to its own (a line rises through every row below
/// its label's). The first arrangement that works, preferring low rows
/// and the right side; every label on the first row, right side, where
/// nothing works (more lines than rows can hold).
fn place_labels(xs: &[f64], widths: &[f64]) -> Vec<Place> {
    let choices: Vec<Place> = (0..LABEL_ROWS)
        .flat_map(|row| [Side::Right, Side::Left].map(|side| Place { row, side }))
        .collect();
    let span = |x: f64, width: f64, place: Place| match place.side {
        Side::Right => (x + LABEL_GAP, x + LABEL_GAP + width),
        Side::Left => (x - LABEL_GAP - width, x - LABEL_GAP),
    };
    let fits = |places: &[Place]| {
        let spans: Vec<(f64, f64)> = places
            .iter()
            .enumerate()
            .map(|(i, &p)| span(xs[i], widths[i], p))
            .collect();
        spans.iter().all(|&(a, b)| a >= 2.0 && b <= WIDTH - 2.0)
            && (0..places.len()).all(|i| {
                (0..places.len()).filter(|&j| j != i).all(|j| {
                    let (a, b) = spans[i];
                    let overlap =
                        places[i].row == places[j].row && a < spans[j].1 && spans[j].0 < b;
                    // Line j rises through (or beside) label i's row.
                    let crossed = places[i].row <= places[j].row && a <= xs[j] && xs[j] <= b;
                    !overlap && !crossed
                })
            })
    };
    let count = xs.len();
    let total = choices.len().pow(count.min(4) as u32);
    (0..total)
        .map(|mut n| {
            (0..count)
                .map(|_| {
                    let place = choices[n % choices.len()];
                    n /= choices.len();
                    place
                })
                .collect::<Vec<Place>>()
        })
        .filter(|places| fits(places))
        .min_by_key(|places| {
            let rows: usize = places.iter().map(|p| p.row).sum();
            let lefts = places.iter().filter(|p| p.side == Side::Left).count();
            (rows, lefts)
        })
        .unwrap_or_else(|| {
            vec![
                Place {
                    row: 0,
                    side: Side::Right
                };
                count
            ]
        })
}

/// Text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::measure::{CacheDrop, Sample};
    use crate::bench::results::{Figure, Measure, Outcome, Parameters, TargetReport};

    /// A report of a bs-sweep whose reads level off from `read_knee` and
    /// whose writes level off from `write_knee`, measured without noise.
    fn sweep(read_knee: u64, write_knee: u64) -> Report {
        let mut out = Outcome::default();
        for (op, knee, top) in [("read", read_knee, 1e9), ("write", write_knee, 2e9)] {
            for k in 12..=24 {
                let bs = 1u64 << k;
                let rate = top * (bs as f64 / knee as f64).min(1.0);
                let ns = (bs as f64 * 1e9 / rate) as u64;
                let run = Sample {
                    bytes: bs * 4,
                    ios: 4,
                    elapsed: std::time::Duration::from_nanos(ns * 4),
                    cpu: std::time::Duration::ZERO,
                    latencies_ns: vec![ns; 4],
                };
                let figure = Figure::new("bs-sweep", "direct", op, "sequential", bs)
                    .measured_as(Measure::MedianRequest);
                out.push(figure, &[run.clone(), run.clone(), run]);
            }
        }
        let target = TargetReport {
            path: "/dev/sdz".into(),
            kind: "block device",
            bench_file: None,
            working_set_bytes: 1 << 30,
            target_bytes: 1 << 30,
            device: Default::default(),
            writable: true,
            served: false,
            passthrough: None,
            backing: crate::bench::backing::Backing::Own,
        };
        let settings = Parameters {
            tests: vec!["bs-sweep"],
            runs: 3,
            sweep_rounds: 3,
            warmup_runs: 1,
            size: 1 << 30,
            time_per_run_sec: 0.25,
        };
        let cache = CacheDrop {
            method: "none".into(),
            dropped: true,
            note: None,
        };
        Report::assemble(std::time::UNIX_EPOCH, target, settings, cache, out, None)
    }

    /// A recommendation line or its label: series, x and colour.
    type Drawn = (String, f64, String);

    /// Each recommendation line, and each label.
    fn markers(page: &str) -> (Vec<Drawn>, Vec<Drawn>) {
        let attribute = |element: &str, name: &str| -> String {
            let at = element.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
            element[at..at + element[at..].find('"').unwrap()].to_owned()
        };
        let of_class = |class: &str, colour: &str| -> Vec<Drawn> {
            page.split('<')
                .filter(|e| e.contains(&format!("class=\"{class}\"")))
                .map(|e| {
                    let x = if class == "marker" { "x1" } else { "x" };
                    (
                        attribute(e, "data-series"),
                        attribute(e, x).parse().unwrap(),
                        attribute(e, colour),
                    )
                })
                .collect()
        };
        (
            of_class("marker", "stroke"),
            of_class("marker-label", "fill"),
        )
    }

    /// The report that put "recommended 1 MiB (write)" beside the 512 KiB
    /// line: reads recommend 512 KiB, writes 1 MiB, the lines a size apart.
    #[test]
    fn each_label_sits_beside_its_own_line_in_its_colour() {
        let report = sweep(512 << 10, 1 << 20);
        assert_eq!(report.recommendation.read_block_size, Some(512 << 10));
        assert_eq!(report.recommendation.write_block_size, Some(1 << 20));
        let (lines, labels) = markers(&render(&report));
        assert_eq!(lines.len(), 2);
        assert_eq!(labels.len(), 2);
        for (series, x, colour) in &lines {
            let expected = if series == "read" { READ } else { WRITE };
            assert_eq!(colour, expected);
            let (_, label_x, label_colour) = labels.iter().find(|l| &l.0 == series).unwrap();
            assert_eq!(label_colour, colour, "{series}");
            let own = (label_x - x).abs();
            assert!(own <= 14.0, "{series}: {own} px from its line");
            for (_, other_x, _) in lines.iter().filter(|l| &l.0 != series) {
                assert!(
                    own < (label_x - other_x).abs(),
                    "{series} nearer another line"
                );
            }
        }
    }

    /// Both directions at one size: two lines in two colours at one x, the
    /// labels on either side of it.
    #[test]
    fn one_size_for_both_directions_is_labelled_on_both_sides() {
        let report = sweep(1 << 20, 1 << 20);
        let (lines, labels) = markers(&render(&report));
        assert_eq!(lines[0].1, lines[1].1);
        assert_ne!(lines[0].2, lines[1].2);
        let sides: Vec<f64> = labels.iter().map(|l| l.1 - lines[0].1).collect();
        assert!(sides.iter().all(|d| d.abs() <= 14.0), "{sides:?}");
        assert!(
            sides[0] * sides[1] < 0.0,
            "one label on each side: {sides:?}"
        );
    }

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(2.5e9), 1e9);
        assert_eq!(nice_step(800.0), 200.0);
        assert_eq!(nice_step(100.0), 50.0);
    }

    #[test]
    fn escaping() {
        assert_eq!(escape("<a & 'b\">"), "&lt;a &amp; &#39;b&quot;&gt;");
    }

    #[test]
    fn histogram_shares_add_up() {
        let samples: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let h = histogram(&samples, 40);
        assert_eq!(h.len(), 40);
        let total: f64 = h.iter().map(|p| p.1).sum();
        assert!((total - 100.0).abs() < 1e-6);
        assert!(h.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(histogram(&[], 10).is_empty());
        // All samples equal: one bin holds them all.
        let h = histogram(&[5, 5, 5], 4);
        assert_eq!(h.iter().map(|p| p.1).sum::<f64>(), 100.0);
    }
}
