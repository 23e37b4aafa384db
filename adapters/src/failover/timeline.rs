//! `switchyard drill --timeline FILE.svg`: each run of a scene as one panel, every panel on the
//! same time axis in milliseconds against its own fault, so runs read side by side.
//!
//! A panel has six lanes: host A's and host B's relay (green up, red down), the client's
//! channel on each of the three candidate URLs (a blue bar while it is the current one), and a
//! lane of marks (orange crosses: `[relay-skip]`; blue lines across the channel lanes:
//! `[relay-switch]`). A black line is the fault, a dashed red line FO-X1's switch deadline.
//!
//! The file is written atomically (a temporary file in the same folder, then a rename), and a
//! path that cannot be written is refused by name before any scene runs (SEC-4).

use std::io::Write as _;
use std::path::Path;

use plotters::prelude::*;
use switchyard_core::failover::{ATTACH_PREFIX, SKIP_PREFIX, SWITCH_PREFIX};

use super::drill::{Host, SceneTimeline};

const WIDTH: u32 = 1200;
const PANEL_HEIGHT: u32 = 240;
const HEADER_HEIGHT: u32 = 50;
/// Room either side of the earliest and latest event.
const MARGIN_MS: f64 = 250.0;

const UP: RGBColor = RGBColor(76, 175, 80);
const DOWN: RGBColor = RGBColor(229, 115, 115);
const CHANNEL: RGBColor = RGBColor(30, 90, 200);
const SKIP: RGBColor = RGBColor(240, 140, 0);
const DEADLINE: RGBColor = RGBColor(200, 0, 0);

/// Lanes from the bottom: marks, then the channel on B, A's second URL, A's first, then the
/// relays B and A. Each lane is one unit high, centred on `n + 0.5`.
const LANE_MARKS: f64 = 0.5;
const LANE_HOST_B: f64 = 4.5;
const LANE_HOST_A: f64 = 5.5;

fn channel_lane(url_index: usize) -> f64 {
    // urls[0] (A first) on top of the channel lanes, urls[2] (B) at the bottom.
    3.5 - url_index.min(2) as f64
}

fn lane_name(y: f64) -> String {
    if (y - y.floor() - 0.5).abs() > 1e-6 {
        return String::new();
    }
    let names = [
        "skip / switch",
        "on B /dshs-relay",
        "on A /relay-direct",
        "on A /dshs-relay",
        "relay host B",
        "relay host A",
    ];
    let index = y.floor();
    if (0.0..names.len() as f64).contains(&index) {
        names[index as usize].to_owned()
    } else {
        String::new()
    }
}

/// The shared axis: from the earliest event of any run to the latest, against each one's fault.
fn time_range(timelines: &[&SceneTimeline]) -> (f64, f64) {
    let mut low = 0i64;
    let mut high = 0i64;
    for t in timelines {
        let times = t
            .relays
            .iter()
            .map(|m| m.at_ms)
            .chain(t.lines.iter().map(|l| l.at_ms))
            .chain(t.deadlines_ms.iter().copied())
            .chain([t.end_ms]);
        for at in times {
            let rel = t.relative_ms(at);
            low = low.min(rel);
            high = high.max(rel);
        }
    }
    (low as f64 - MARGIN_MS, high as f64 + MARGIN_MS)
}

/// The URL a `[relay-attach]` or `[relay-switch]` line puts the client on.
fn target_url(line: &str) -> Option<&str> {
    let mut words = line.split_whitespace();
    match words.next()? {
        ATTACH_PREFIX => words.next(),
        // `[relay-switch] #N FROM -> TO (reason: …`
        SWITCH_PREFIX => words.nth(3),
        _ => None,
    }
}

/// Draws every run, one panel each, as an SVG document.
pub fn render_svg(timelines: &[&SceneTimeline]) -> Result<String, String> {
    let mut svg = String::new();
    let panels = u32::try_from(timelines.len().max(1)).unwrap_or(u32::MAX);
    let height = HEADER_HEIGHT.saturating_add(PANEL_HEIGHT.saturating_mul(panels));
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        draw(&root, timelines).map_err(|e| format!("drawing the timeline: {e}"))?;
        root.present()
            .map_err(|e| format!("drawing the timeline: {e}"))?;
    }
    Ok(svg)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type DrawResult =
    Result<(), DrawingAreaErrorKind<<SVGBackend<'static> as DrawingBackend>::ErrorType>>;

fn draw(root: &Area<'_>, timelines: &[&SceneTimeline]) -> DrawResult {
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(HEADER_HEIGHT);
    header.draw(&Text::new(
        "switchyard drill: each run against its fault (ms); relays green up / red down, the client's channel in blue, skips orange x, switches blue |, fault black, DEADLINE_MS dashed red",
        (10, 10),
        ("sans-serif", 14).into_font(),
    ))?;
    let (low, high) = time_range(timelines);
    let panels = body.split_evenly((timelines.len().max(1), 1));
    for (panel, timeline) in panels.iter().zip(timelines) {
        draw_panel(panel, timeline, low, high)?;
    }
    Ok(())
}

fn draw_panel(area: &Area<'_>, t: &SceneTimeline, low: f64, high: f64) -> DrawResult {
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("scene {}: {}", t.label, t.title),
            ("sans-serif", 13).into_font(),
        )
        .margin(6)
        .x_label_area_size(28)
        .y_label_area_size(130)
        .build_cartesian_2d(low..high, 0f64..6f64)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        // Ticks every half unit; only the lane centres (n + 0.5) are named.
        .y_labels(13)
        .x_desc("ms since the fault")
        .x_label_formatter(&|x| format!("{x:+.0}"))
        .y_label_formatter(&|y| lane_name(*y))
        .draw()?;
    let end = t.relative_ms(t.end_ms) as f64;
    let bar = |lane: f64, from: f64, to: f64, color: RGBColor, half: f64| {
        Rectangle::new([(from, lane - half), (to, lane + half)], color.filled())
    };

    // Relays: each state from its mark to the next mark of the same host, or the run's end.
    for (host, lane) in [(Host::A, LANE_HOST_A), (Host::B, LANE_HOST_B)] {
        let marks: Vec<_> = t.relays.iter().filter(|m| m.host == host).collect();
        let spans = marks.iter().enumerate().map(|(i, m)| {
            let from = t.relative_ms(m.at_ms) as f64;
            let to = marks
                .get(i + 1)
                .map_or(end, |next| t.relative_ms(next.at_ms) as f64);
            bar(lane, from, to, if m.up { UP } else { DOWN }, 0.3)
        });
        chart.draw_series(spans)?;
    }

    // The client's channel: from each attach or switch to the next, or the run's end.
    let moves: Vec<(f64, usize)> = t
        .lines
        .iter()
        .filter_map(|l| {
            let url = target_url(&l.line)?;
            let index = t.urls.iter().position(|u| u == url)?;
            Some((t.relative_ms(l.at_ms) as f64, index))
        })
        .collect();
    let spans = moves.iter().enumerate().map(|(i, (from, index))| {
        let to = moves.get(i + 1).map_or(end, |next| next.0);
        bar(channel_lane(*index), *from, to, CHANNEL, 0.2)
    });
    chart.draw_series(spans)?;

    // Switches across the channel lanes, skips in the marks lane.
    for line in &t.lines {
        let x = t.relative_ms(line.at_ms) as f64;
        if line.line.starts_with(SWITCH_PREFIX) {
            chart.draw_series([PathElement::new(
                vec![(x, 0.1), (x, 3.9)],
                CHANNEL.stroke_width(2),
            )])?;
        } else if line.line.starts_with(SKIP_PREFIX) {
            chart.draw_series([Cross::new((x, LANE_MARKS), 5, SKIP.stroke_width(2))])?;
        }
    }

    // The fault, and each deadline as a dashed line.
    if t.fault_ms.is_some() {
        chart.draw_series([PathElement::new(
            vec![(0.0, 0.0), (0.0, 6.0)],
            BLACK.stroke_width(2),
        )])?;
        chart.draw_series([Text::new(
            "fault",
            (0.0, 5.95),
            ("sans-serif", 11).into_font(),
        )])?;
    }
    for due in &t.deadlines_ms {
        let x = t.relative_ms(*due) as f64;
        let dashes = (0..12).map(|i| {
            let y = f64::from(i) * 0.5;
            PathElement::new(vec![(x, y), (x, y + 0.3)], DEADLINE.stroke_width(2))
        });
        chart.draw_series(dashes)?;
        chart.draw_series([Text::new(
            "deadline",
            (x, 5.95),
            ("sans-serif", 11).into_font().color(&DEADLINE),
        )])?;
    }
    Ok(())
}

/// Refuses a `--timeline` path before the drill runs: a folder, or a folder that does not
/// exist or cannot take a new file.
pub fn check_writable(path: &Path) -> Result<(), String> {
    if path.is_dir() {
        return Err("is a folder, not a file".to_owned());
    }
    let folder = parent(path);
    tempfile::Builder::new()
        .prefix(".switchyard-timeline-check")
        .tempfile_in(folder)
        .map(drop)
        .map_err(|e| format!("cannot create a file in {}: {e}", folder.display()))
}

/// Writes `contents` to `path` through a temporary file in the same folder and a rename, so a
/// reader never sees half a file and a failed run leaves the old one.
pub fn write_atomically(path: &Path, contents: &str) -> Result<(), String> {
    let folder = parent(path);
    let mut file = tempfile::Builder::new()
        .prefix(".switchyard-timeline")
        .suffix(".tmp")
        .tempfile_in(folder)
        .map_err(|e| format!("cannot create a file in {}: {e}", folder.display()))?;
    file.write_all(contents.as_bytes())
        .and_then(|()| file.as_file().sync_all())
        .map_err(|e| format!("cannot write: {e}"))?;
    // A temporary file is private (0600); the drawing is not.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .map_err(|e| format!("cannot set permissions: {e}"))?;
    }
    file.persist(path)
        .map(drop)
        .map_err(|e| format!("cannot rename into place: {}", e.error))
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failover::drill::{RelayMark, Scene, TimedLine};

    /// A run like scene 1's, on its own clock: attach at 40, A down at 100 (the fault), a skip,
    /// the switch to B at 1,700, the end at 1,900.
    fn recorded(label: &str, title: &str) -> SceneTimeline {
        let urls = [
            "ws://a/dshs-relay",
            "ws://a/relay-direct",
            "ws://b/dshs-relay",
        ];
        SceneTimeline {
            label: label.to_owned(),
            title: title.to_owned(),
            urls: urls.iter().map(|u| (*u).to_owned()).collect(),
            fault_ms: Some(100),
            end_ms: 1_900,
            relays: vec![
                RelayMark {
                    at_ms: 1,
                    host: Host::A,
                    up: true,
                },
                RelayMark {
                    at_ms: 2,
                    host: Host::B,
                    up: true,
                },
                RelayMark {
                    at_ms: 100,
                    host: Host::A,
                    up: false,
                },
            ],
            lines: vec![
                TimedLine {
                    at_ms: 40,
                    line: format!(
                        "{ATTACH_PREFIX} {} (first channel, directory path)",
                        urls[0]
                    ),
                },
                TimedLine {
                    at_ms: 120,
                    line: format!("{SKIP_PREFIX} new channel did not come up"),
                },
                TimedLine {
                    at_ms: 1_700,
                    line: format!(
                        "{SWITCH_PREFIX} #1 {} -> {} (reason: current channel unhealthy)",
                        urls[0], urls[2]
                    ),
                },
            ],
            deadlines_ms: vec![3_100],
        }
    }

    #[test]
    fn timeline_has_one_panel_per_run_with_its_title() {
        let mut runs: Vec<SceneTimeline> = Scene::ALL
            .iter()
            .map(|s| recorded(s.name(), s.title()))
            .collect();
        runs.push(recorded("5 (probing off)", Scene::S5.title()));
        let refs: Vec<&SceneTimeline> = runs.iter().collect();
        let svg = render_svg(&refs).expect("renders");
        assert!(svg.starts_with("<svg"), "{}", &svg[..200.min(svg.len())]);
        assert!(svg.trim_end().ends_with("</svg>"));
        for run in &runs {
            let caption = format!("scene {}: {}", run.label, run.title).replace('>', "&gt;");
            assert_eq!(svg.matches(&caption).count(), 1, "{caption}");
        }
        // plotters puts a text element's text on a line of its own.
        let labels = |text: &str| svg.lines().filter(|l| *l == text).count();
        assert_eq!(labels("fault"), runs.len());
        assert_eq!(labels("deadline"), runs.len());
    }

    #[test]
    fn timeline_puts_the_client_on_the_url_each_line_names() {
        assert_eq!(
            target_url("[relay-switch] #1 ws://a/x -> ws://b/y (reason: no channel)"),
            Some("ws://b/y")
        );
        assert_eq!(
            target_url("[relay-attach] ws://a/x (first channel, directory path)"),
            Some("ws://a/x")
        );
        assert_eq!(target_url("[relay-skip] ws://a/x still cooling"), None);
        assert_eq!(target_url(""), None);
    }

    #[test]
    fn timeline_axis_is_shared_and_relative_to_each_fault() {
        let early = recorded("1", "one");
        let mut late = recorded("2", "two");
        // The same run, everything 5 s later on its own clock: the same place on the axis.
        late.fault_ms = Some(5_100);
        for m in &mut late.relays {
            m.at_ms += 5_000;
        }
        for l in &mut late.lines {
            l.at_ms += 5_000;
        }
        late.deadlines_ms = vec![8_100];
        late.end_ms += 5_000;
        assert_eq!(time_range(&[&early]), time_range(&[&early, &late]));
        // Relays came up 99 ms before the fault; the deadline is the latest event.
        assert_eq!(
            time_range(&[&early]),
            (-99.0 - MARGIN_MS, 3_000.0 + MARGIN_MS)
        );
    }

    #[test]
    fn timeline_refuses_a_folder_or_a_missing_folder_and_writes_atomically() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(check_writable(dir.path()).is_err());
        let missing = dir.path().join("nope").join("t.svg");
        assert!(check_writable(&missing).is_err());
        assert!(write_atomically(&missing, "<svg/>").is_err());
        let path = dir.path().join("t.svg");
        check_writable(&path).expect("writable");
        write_atomically(&path, "<svg>one</svg>").expect("written");
        write_atomically(&path, "<svg>two</svg>").expect("replaced");
        assert_eq!(
            std::fs::read_to_string(&path).ok().as_deref(),
            Some("<svg>two</svg>")
        );
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("t.svg")]);
    }
}
