//! Draws the scale bench's picture (`docs/scale.svg`) from its own output: every
//! `summary-<label>.tsv` in a folder (one line per figure and N, written by
//! `benches/benches/scale.rs`) and, for the page panel, `sweep-<label>-<N>.csv` of the largest
//! N of each label.
//!
//! `cargo run -p switchyard-benches --example scale_plot -- benches/scale docs/scale.svg`
//!
//! Five panels of cost against N on log-log axes (per-host enrolment, the slowest and the
//! first page of a sweep, the whole sweep, resolve p99, the re-registration rate), one line
//! per label; the sixth is every page's time at its position in the sweep at the largest N.
#![allow(clippy::print_stdout)] // A command: it says what it wrote.

use std::collections::BTreeMap;
use std::error::Error;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

/// label -> figure -> [(N, value)]
type Summaries = BTreeMap<String, BTreeMap<String, Vec<(f64, f64)>>>;

const COLOURS: [RGBColor; 4] = [
    RGBColor(200, 40, 40),
    RGBColor(30, 90, 200),
    RGBColor(40, 150, 60),
    RGBColor(140, 60, 170),
];

fn read_summaries(dir: &Path) -> Result<Summaries, Box<dyn Error>> {
    let mut out = Summaries::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("summary-") && n.ends_with(".tsv"))
        })
        .collect();
    files.sort();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        for (k, line) in text.lines().enumerate().skip(1) {
            let cols: Vec<&str> = line.split('\t').collect();
            let [label, n, figure, value, ..] = cols[..] else {
                return Err(format!("{}:{}: expected 5 columns", file.display(), k + 1).into());
            };
            let (Ok(n), Ok(value)) = (n.parse::<f64>(), value.parse::<f64>()) else {
                continue; // no value (a phase that did not finish)
            };
            out.entry(label.to_owned())
                .or_default()
                .entry(figure.to_owned())
                .or_default()
                .push((n, value));
        }
    }
    Ok(out)
}

/// (position, ms) of every page of the largest N's sweep of `label`.
fn read_pages(dir: &Path, label: &str, n: f64) -> Vec<(f64, f64)> {
    let path = dir.join(format!("sweep-{label}-{n:.0}.csv"));
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split(',').collect();
            Some((cols.get(2)?.parse().ok()?, cols.get(4)?.parse().ok()?))
        })
        .collect()
}

fn hosts(x: f64) -> String {
    if x >= 999_999.0 {
        format!("{:.0}M", x / 1e6)
    } else if x >= 999.0 {
        format!("{:.0}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// The range of `values` widened to whole decades (log axes).
fn decades(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return (0.1, 10.0);
    }
    let lo = 10f64.powf(lo.log10().floor());
    let hi = 10f64.powf(hi.log10().ceil());
    if hi <= lo {
        (lo, lo * 10.0)
    } else {
        (lo, hi)
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// One line of a panel: its label, the figure's name, (N, value) points, the label's colour.
type Series<'a> = (String, &'a str, Vec<(f64, f64)>, usize);

/// One log-log panel: each (label, figure) series against N.
fn panel(
    area: &Area<'_>,
    title: &str,
    unit: &str,
    series: &[Series<'_>],
) -> Result<(), Box<dyn Error>> {
    let (xlo, xhi) = decades(series.iter().flat_map(|s| s.2.iter().map(|p| p.0)));
    let (ylo, yhi) = decades(series.iter().flat_map(|s| s.2.iter().map(|p| p.1)));
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 15))
        .margin(8)
        .x_label_area_size(32)
        .y_label_area_size(56)
        .build_cartesian_2d((xlo..xhi).log_scale(), (ylo..yhi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("hosts N")
        .y_desc(unit)
        .x_label_formatter(&|x| hosts(*x))
        .y_label_formatter(&|y| format!("{y}"))
        .draw()?;
    for (label, name, points, colour) in series {
        let colour = COLOURS[*colour % COLOURS.len()];
        let dashed = name.contains("first");
        let style = if dashed {
            colour.mix(0.5).stroke_width(1)
        } else {
            colour.stroke_width(2)
        };
        chart
            .draw_series(LineSeries::new(points.iter().copied(), style))?
            .label(format!("{label} {name}").trim().to_owned())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
        chart.draw_series(
            points
                .iter()
                .map(|p| Circle::new(*p, 3, colour.mix(if dashed { 0.5 } else { 1.0 }).filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 11))
        .draw()?;
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, out] = &args[..] else {
        return Err("usage: scale_plot <folder with summary-*.tsv> <out.svg>".into());
    };
    let dir = Path::new(dir);
    let summaries = read_summaries(dir)?;
    if summaries.is_empty() {
        return Err(format!("no summary-*.tsv in {}", dir.display()).into());
    }
    // "before" first (red), then the others in name order.
    let mut labels: Vec<&String> = summaries.keys().collect();
    labels.sort_by_key(|l| (l.as_str() != "before", l.as_str()));
    let of = |figures: &[(&'static str, &'static str)]| {
        let mut s = Vec::new();
        for (k, label) in labels.iter().enumerate() {
            for (key, name) in figures {
                if let Some(points) = summaries[*label].get(*key) {
                    s.push(((*label).clone(), *name, points.clone(), k));
                }
            }
        }
        s
    };
    let root = SVGBackend::new(out, (1320, 820)).into_drawing_area();
    root.fill(&WHITE)?;
    let (head, body) = root.split_vertically(36);
    head.draw(&Text::new(
        format!(
            "Switchyard at scale: cost against hosts N (log-log), 100 cells, one PostgreSQL, 2 cores \
             ({})",
            labels
                .iter()
                .enumerate()
                .map(|(k, l)| format!("{l}: {}", ["red", "blue", "green", "purple"][k % 4]))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (12, 10),
        ("sans-serif", 17),
    ))?;
    let areas = body.split_evenly((2, 3));
    panel(
        &areas[0],
        "enrolment, per host (mean)",
        "ms",
        &of(&[("enrol_mean_ms", "")]),
    )?;
    panel(
        &areas[1],
        "director sweep: slowest page (first dashed)",
        "ms",
        &of(&[("page_slowest_ms", "slowest"), ("page_first_ms", "first")]),
    )?;
    panel(
        &areas[2],
        "director sweep: every host once",
        "s",
        &of(&[("sweep_total_s", "")]),
    )?;
    panel(
        &areas[3],
        "resolve p99",
        "ms",
        &of(&[("resolve_p99_ms", "")]),
    )?;
    panel(
        &areas[4],
        "cell restart: 10,000 re-registrations (higher is better)",
        "per s",
        &of(&[("rereg_per_s", "")]),
    )?;
    // Every page at its position, at each label's largest N.
    let mut pages = Vec::new();
    for (k, label) in labels.iter().enumerate() {
        let largest = summaries[*label]
            .get("page_first_ms")
            .and_then(|p| p.iter().map(|p| p.0).reduce(f64::max));
        if let Some(n) = largest {
            let points = read_pages(dir, label, n);
            if !points.is_empty() {
                pages.push(((*label).clone(), n, points, k));
            }
        }
    }
    let xhi = pages
        .iter()
        .flat_map(|p| p.2.iter().map(|q| q.0))
        .fold(1.0, f64::max);
    let (ylo, yhi) = decades(pages.iter().flat_map(|p| p.2.iter().map(|q| q.1)));
    let mut chart = ChartBuilder::on(&areas[5])
        .caption("every page at its position (largest N)", ("sans-serif", 15))
        .margin(8)
        .x_label_area_size(32)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..xhi * 1.02, (ylo..yhi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("position in the sweep (hosts before the page)")
        .y_desc("ms")
        .x_label_formatter(&|x| hosts(*x))
        .y_label_formatter(&|y| format!("{y}"))
        .draw()?;
    for (label, n, points, k) in &pages {
        let colour = COLOURS[*k % COLOURS.len()];
        chart
            .draw_series(
                points
                    .iter()
                    .map(|p| Circle::new(*p, 1, colour.mix(0.7).filled())),
            )?
            .label(format!("{label}, N = {}", hosts(*n)))
            .legend(move |(x, y)| Circle::new((x + 8, y), 3, colour.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 11))
        .draw()?;
    root.present()?;
    println!(
        "wrote {out} from {} ({} labels)",
        dir.display(),
        labels.len()
    );
    Ok(())
}
