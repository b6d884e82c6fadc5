//! `ddx bench --html` as a person sees the page: headless Chromium lays it
//! out, and a script added to a copy of the page measures what was drawn
//! (the boxes of every word in the charts against the data lines and
//! points, and where the summary and the recommendation land on the first
//! screen). The pages are a real bench's and ones made from chosen
//! figures (`ddx::bench::testing`) that put the recommendation lines where
//! their labels crowd: at one size, at neighbouring sizes, at both ends.

use std::path::Path;

use serde_json::Value;

use crate::rigs;
use crate::rigs::browser::{chromium, Browser};
use ddx::bench::report::{html, Exporter};
use ddx::bench::results::Outcome;
use ddx::bench::testing;

/// The window: a laptop's screen, whose first 900 pixels are the first
/// screen a reader sees.
const WIDTH: u32 = 1280;
const FIRST_SCREEN: u32 = 900;

/// Run in the page after it is laid out: every problem a reader would
/// see, and the boxes it measured, as JSON in `<pre id="ddx-layout">`.
const MEASURE: &str = r#"<script>
(() => {
  const problems = [];
  const box = (e, grow = 0) => {
    const r = e.getBoundingClientRect();
    return { l: r.left - grow, t: r.top - grow, r: r.right + grow, b: r.bottom + grow };
  };
  const overlap = (a, b) => a.l < b.r && b.l < a.r && a.t < b.b && b.t < a.b;
  // Whether the segment p-q passes through rectangle r (Liang-Barsky).
  const crosses = (p, q, r) => {
    let t0 = 0, t1 = 1;
    const dx = q.x - p.x, dy = q.y - p.y;
    for (const [pp, qq] of [[-dx, p.x - r.l], [dx, r.r - p.x], [-dy, p.y - r.t], [dy, r.b - p.y]]) {
      if (pp === 0) { if (qq < 0) return false; continue; }
      const t = qq / pp;
      if (pp < 0) { if (t > t1) return false; if (t > t0) t0 = t; }
      else { if (t < t0) return false; if (t < t1) t1 = t; }
    }
    return true;
  };
  const name = t => `${t.getAttribute('class') || 'text'} "${t.textContent.trim()}"`;
  const charts = [];
  for (const svg of document.querySelectorAll('svg[data-chart]')) {
    const chart = svg.dataset.chart;
    const frame = box(svg);
    // The stroke is 2 px wide: a word within a pixel of a line is touched.
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim())
      .map(t => ({ t, b: box(t, 1) }));
    const segments = [];
    for (const line of svg.querySelectorAll('polyline')) {
      const m = line.getScreenCTM();
      const points = [...line.points].map(p => new DOMPoint(p.x, p.y).matrixTransform(m));
      for (let i = 1; i < points.length; i++) {
        segments.push([points[i - 1], points[i], line.dataset.series]);
      }
    }
    const dots = [...svg.querySelectorAll('circle')].map(c => box(c));
    for (const { t, b } of texts) {
      if (b.l < frame.l - 1 || b.r > frame.r + 1 || b.t < frame.t - 1 || b.b > frame.b + 1) {
        problems.push(`${chart}: ${name(t)} runs out of the chart`);
      }
      const line = segments.find(([p, q]) => crosses(p, q, b));
      if (line) problems.push(`${chart}: the ${line[2]} line crosses ${name(t)}`);
      if (dots.some(d => overlap(d, b))) problems.push(`${chart}: a point covers ${name(t)}`);
    }
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        if (overlap(box(texts[i].t), box(texts[j].t))) {
          problems.push(`${chart}: ${name(texts[i].t)} overlaps ${name(texts[j].t)}`);
        }
      }
    }
    const labels = [...svg.querySelectorAll('text.marker-label')].map(t => {
      const b = box(t);
      return { series: t.dataset.series, text: t.textContent, left: b.l, right: b.r, top: b.t,
               colour: getComputedStyle(t).fill };
    });
    const markers = [...svg.querySelectorAll('line.marker')].map(l => {
      const b = box(l);
      return { series: l.dataset.series, x: (b.l + b.r) / 2, top: b.t, bottom: b.b,
               colour: getComputedStyle(l).stroke };
    });
    for (const label of labels) {
      const line = markers.find(m => m.series === label.series);
      if (!line || line.colour !== label.colour) {
        problems.push(`${chart}: "${label.text}" is drawn in ${label.colour}, its line in ${line && line.colour}`);
      }
    }
    charts.push({ chart, texts: texts.length, segments: segments.length, labels, markers });
  }
  const place = selector => {
    const e = document.querySelector(selector);
    if (!e) return null;
    const b = e.getBoundingClientRect();
    return { top: b.top + window.scrollY, bottom: b.bottom + window.scrollY, height: b.height };
  };
  const order = ['table.summary', '#recommendation .answer', 'svg[data-chart]', 'ul.facts']
    .map(selector => ({ selector, place: place(selector) }));
  const cells = [...document.querySelectorAll('table.summary td.cell')]
    .map(c => ({ text: c.querySelector('.rate').textContent, height: c.getBoundingClientRect().height }));
  const out = document.createElement('pre');
  out.id = 'ddx-layout';
  out.textContent = JSON.stringify({ problems, charts, order, cells, screen: window.innerHeight });
  document.body.appendChild(out);
})();
</script>"#;

/// What Chromium laid out for `page`: the measuring script's JSON.
fn laid_out(browser: &Browser, dir: &Path, name: &str, page: &str) -> Value {
    let measured = page.replace("</body>", &format!("{MEASURE}\n</body>"));
    assert_ne!(measured, page, "no </body> in the page");
    let path = dir.join(format!("{name}.html"));
    std::fs::write(&path, measured).unwrap();
    let dom = browser.dump_dom(&path, WIDTH, FIRST_SCREEN);
    let start = dom
        .find("<pre id=\"ddx-layout\">")
        .unwrap_or_else(|| panic!("{name}: the script left nothing: {dom}"))
        + "<pre id=\"ddx-layout\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let json = dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{name}: {e}: {json}"))
}

fn number(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

/// What a reader must see on `page`: no word of a chart crossed by a
/// line of data, covered by a point, on another word or out of the
/// chart; the summary and the recommendation on the first screen, before
/// the charts and the facts; each recommendation line's label above the
/// plot, at the top of its line.
fn reads_right(browser: &Browser, dir: &Path, name: &str, page: &str, lines: usize) {
    let layout = laid_out(browser, dir, name, page);
    let problems = layout["problems"].as_array().unwrap();
    assert!(
        problems.is_empty(),
        "{name}: {problems:#?}\n(open {} in a browser)",
        dir.join(format!("{name}.html")).display()
    );
    let charts = layout["charts"].as_array().unwrap();
    assert!(!charts.is_empty(), "{name}: no chart drawn");
    let sweep = charts
        .iter()
        .find(|c| c["chart"] == "bs-sweep")
        .unwrap_or_else(|| panic!("{name}: no bs-sweep chart"));
    assert!(number(&sweep["segments"]) > 0.0, "{name}: {sweep}");
    let labels = sweep["labels"].as_array().unwrap();
    let markers = sweep["markers"].as_array().unwrap();
    assert_eq!(
        (labels.len(), markers.len()),
        (lines, lines),
        "{name}: {sweep}"
    );
    for label in labels {
        let marker = markers
            .iter()
            .find(|m| m["series"] == label["series"])
            .unwrap();
        let x = number(&marker["x"]);
        let (left, right) = (number(&label["left"]), number(&label["right"]));
        // Beside its own line's top, on one side of it.
        let gap = (left - x).max(x - right);
        assert!((0.0..=8.0).contains(&gap), "{name}: {label} vs {marker}");
        assert!(
            (number(&label["top"]) - number(&marker["top"])).abs() <= 4.0,
            "{name}: {label} vs {marker}"
        );
    }
    let order = layout["order"].as_array().unwrap();
    let tops: Vec<f64> = order.iter().map(|o| number(&o["place"]["top"])).collect();
    assert!(
        tops.windows(2).all(|w| w[0] < w[1]),
        "{name}: out of order: {order:#?}"
    );
    for first in &order[..2] {
        let bottom = number(&first["place"]["bottom"]);
        assert!(
            bottom <= f64::from(FIRST_SCREEN),
            "{name}: {} ends at {bottom} px, below the first screen",
            first["selector"]
        );
    }
    let cells = layout["cells"].as_array().unwrap();
    assert!(!cells.is_empty(), "{name}: an empty summary");
    for cell in cells {
        assert!(number(&cell["height"]) > 10.0, "{name}: {cell}");
    }
}

/// A report of every test from chosen figures, with its bs-sweep's
/// reads levelling off from `read_knee` and its writes from
/// `write_knee` (whose recommendation lines are drawn there).
fn chosen(read_knee: u64, write_knee: u64) -> String {
    let mut out = testing::outcome();
    out.results.retain(|r| r.figure.test != "bs-sweep");
    let mut sweep = Outcome::default();
    for (op, knee, top) in [("read", read_knee, 1.2e9), ("write", write_knee, 2e9)] {
        let curve = move |bs: u64| top * (bs as f64 / knee as f64).min(1.0);
        testing::sweep(&mut sweep, op, curve, 1.3);
    }
    out.results.extend(sweep.results);
    let report = testing::report(out, testing::all_tests());
    assert_eq!(report.recommendation.read_block_size, Some(read_knee));
    assert_eq!(report.recommendation.write_block_size, Some(write_knee));
    html::Html.export(&report).unwrap()
}

#[test]
fn the_html_page_reads_right_in_a_browser() {
    let Some(browser) = rigs::or_skip(chromium()) else {
        return;
    };
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    const MIB: u64 = 1 << 20;
    for (name, read_knee, write_knee) in [
        ("one-size", MIB, MIB),
        ("neighbours", MIB / 2, MIB),
        ("both-ends", 4096, 16 * MIB),
        ("apart", 64 << 10, 4 * MIB),
    ] {
        reads_right(
            &browser,
            dir.path(),
            name,
            &chosen(read_knee, write_knee),
            2,
        );
    }
    // A real bench's page, with whatever its figures are.
    let target = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let page = dir.path().join("bench.html");
    let out = rigs::cmd::ddx()
        .arg("bench")
        .arg(target.path())
        .args(["--size=8M", "--runs=2", "--time-per-run=0.02"])
        .args(["--latency-count=40", "--zones=4"])
        .arg(format!("--html={}", page.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let html = std::fs::read_to_string(&page).unwrap();
    reads_right(&browser, dir.path(), "measured", &html, 2);
}
