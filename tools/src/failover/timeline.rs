//! `switchyard drill --timeline FILE.svg`: each run of a scene as one panel, each panel on its
//! own time axis in milliseconds against its own fault (a 2 s scene is not squeezed by a 30 s
//! one), its verdict in its caption.
//!
//! A panel has six lanes: host A's and host B's relay (green up, red down; FO-X4's silent
//! faults over it, labelled: dark grey `dark`, purple `one-way`, amber `lossy`), the client's
//! channel on each of the three candidate URLs while it is the current one (solid blue while
//! live, pale with a blue outline while in reconnect backoff), and a lane of marks (orange
//! crosses: `[relay-skip]`). A blue line across the channel lanes is a `[relay-switch]`,
//! labelled with its time; a black line is the fault; a dashed red line is what was due by then
//! (FO-X1's `DEADLINE_MS`, scene 5's FO-X3a bound), labelled with its time.
//!
//! The file is written atomically (a temporary file in the same folder, then a rename), and a
//! path that cannot be written is refused by name before any scene runs (SEC-4).

use std::io::Write as _;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use switchyard_core::failover::{ATTACH_PREFIX, SKIP_PREFIX, SWITCH_PREFIX};

use super::drill::{Host, SceneTimeline, Verdict};

const WIDTH: u32 = 1200;
const PANEL_HEIGHT: u32 = 240;
const HEADER_HEIGHT: u32 = 50;
/// Room either side of the earliest and latest event.
const MARGIN_MS: f64 = 250.0;

const UP: RGBColor = RGBColor(76, 175, 80);
const DOWN: RGBColor = RGBColor(229, 115, 115);
const CHANNEL: RGBColor = RGBColor(30, 90, 200);
const BACKOFF: RGBColor = RGBColor(205, 218, 240);
const SKIP: RGBColor = RGBColor(240, 140, 0);
const DEADLINE: RGBColor = RGBColor(200, 0, 0);
/// FO-X4: a host that fails without a word: dark grey (dark), purple (one-way), amber (lossy).
const DARK: RGBColor = RGBColor(60, 60, 60);
const ONE_WAY: RGBColor = RGBColor(120, 70, 160);
const LOSSY: RGBColor = RGBColor(230, 170, 40);

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

/// A panel's own axis: from its earliest event to its latest (deadlines included), against its
/// fault, with a margin either side proportional to the span.
fn time_range(t: &SceneTimeline) -> (f64, f64) {
    let mut low = 0i64;
    let mut high = 0i64;
    let times = t
        .relays
        .iter()
        .map(|m| m.at_ms)
        .chain(t.faults.iter().map(|f| f.at_ms))
        .chain(t.lines.iter().map(|l| l.at_ms))
        .chain(t.deadlines.iter().map(|d| d.at_ms))
        .chain([t.end_ms]);
    for at in times {
        let rel = t.relative_ms(at);
        low = low.min(rel);
        high = high.max(rel);
    }
    let margin = MARGIN_MS.max((high - low) as f64 * 0.03);
    (low as f64 - margin, high as f64 + margin)
}

/// A stretch of the client's channel on one URL, in ms against the fault.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Span {
    url_index: usize,
    from: f64,
    to: f64,
    /// Live (healthy) or in reconnect backoff.
    live: bool,
}

/// The client's channel: from each attach or switch to the next (or the run's end) on the URL
/// the line names, live from the move (a new channel is open) and then as its reports say.
fn channel_spans(t: &SceneTimeline) -> Vec<Span> {
    let end = t.relative_ms(t.end_ms) as f64;
    let moves: Vec<(u64, usize)> = t
        .lines
        .iter()
        .filter_map(|l| {
            let url = target_url(&l.line)?;
            let index = t.urls.iter().position(|u| u == url)?;
            Some((l.at_ms, index))
        })
        .collect();
    let mut spans = Vec::new();
    for (i, (from_ms, index)) in moves.iter().enumerate() {
        let to_ms = moves.get(i + 1).map(|next| next.0);
        let url = &t.urls[*index];
        let mut at = t.relative_ms(*from_ms) as f64;
        let mut live = true;
        let changes = t.channels.iter().filter(|c| {
            &c.url == url && c.at_ms >= *from_ms && to_ms.is_none_or(|to| c.at_ms < to)
        });
        for change in changes {
            if change.live == live {
                continue;
            }
            let x = t.relative_ms(change.at_ms) as f64;
            spans.push(Span {
                url_index: *index,
                from: at,
                to: x,
                live,
            });
            at = x;
            live = change.live;
        }
        let to = to_ms.map_or(end, |to| t.relative_ms(to) as f64);
        spans.push(Span {
            url_index: *index,
            from: at,
            to,
            live,
        });
    }
    spans.retain(|s| s.to > s.from);
    spans
}

/// FO-X4: a stretch of a host's silent fault, in ms against the run's fault.
#[derive(Debug, Clone, PartialEq)]
struct FaultSpan {
    name: String,
    from: f64,
    to: f64,
    color: RGBColor,
}

/// The spans of `host`'s faults (dark, one-way, lossy): each from its mark to the host's next
/// fault mark or the run's end; `none` ends one.
fn fault_spans(t: &SceneTimeline, host: Host) -> Vec<FaultSpan> {
    let end = t.relative_ms(t.end_ms) as f64;
    let marks: Vec<_> = t.faults.iter().filter(|m| m.host == host).collect();
    marks
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let color = match m.fault.as_str() {
                "dark" => DARK,
                "one-way" => ONE_WAY,
                "lossy" => LOSSY,
                _ => return None,
            };
            let to = marks
                .get(i + 1)
                .map_or(end, |next| t.relative_ms(next.at_ms) as f64);
            Some(FaultSpan {
                name: m.fault.clone(),
                from: t.relative_ms(m.at_ms) as f64,
                to,
                color,
            })
        })
        .collect()
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
        "switchyard drill: each run on its own axis, ms against its fault (black); relays green up / red down;",
        (10, 8),
        ("sans-serif", 14).into_font(),
    ))?;
    header.draw(&Text::new(
        "the client's channel solid blue while live, pale outlined while in backoff; skips orange x; switches blue | with their time; what was due dashed red",
        (10, 28),
        ("sans-serif", 14).into_font(),
    ))?;
    let panels = body.split_evenly((timelines.len().max(1), 1));
    for (panel, timeline) in panels.iter().zip(timelines) {
        draw_panel(panel, timeline)?;
    }
    Ok(())
}

/// A panel's caption: the run, its verdict, what the scene shows.
fn caption(t: &SceneTimeline) -> String {
    let verdict = t.verdict.map_or("no verdict", Verdict::as_str);
    format!("scene {} {verdict}: {}", t.label, t.title)
}

fn draw_panel(area: &Area<'_>, t: &SceneTimeline) -> DrawResult {
    let (low, high) = time_range(t);
    let verdict_color = match t.verdict {
        Some(Verdict::Pass) => RGBColor(27, 120, 40),
        Some(Verdict::Fail) => DEADLINE,
        _ => RGBColor(90, 90, 90),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(
            caption(t),
            ("sans-serif", 13).into_font().color(&verdict_color),
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

    // FO-X4: a host's silent fault over its relay bar, from its mark to the next mark of the
    // same host (or the run's end), labelled with its kind.
    for (host, lane) in [(Host::A, LANE_HOST_A), (Host::B, LANE_HOST_B)] {
        for span in fault_spans(t, host) {
            chart.draw_series([bar(lane, span.from, span.to, span.color, 0.3)])?;
            chart.draw_series([Text::new(
                format!("{} {:+.0} ms", span.name, span.from),
                (span.from, lane + 0.45),
                label_style(span.color, span.from, low, high),
            )])?;
        }
    }

    // The client's channel: live solid, backoff pale and outlined.
    for span in channel_spans(t) {
        let lane = channel_lane(span.url_index);
        if span.live {
            chart.draw_series([bar(lane, span.from, span.to, CHANNEL, 0.2)])?;
        } else {
            chart.draw_series([bar(lane, span.from, span.to, BACKOFF, 0.2)])?;
            chart.draw_series([Rectangle::new(
                [(span.from, lane - 0.2), (span.to, lane + 0.2)],
                CHANNEL.stroke_width(1),
            )])?;
        }
    }

    // Switches across the channel lanes with their time, skips in the marks lane.
    for line in &t.lines {
        let x = t.relative_ms(line.at_ms) as f64;
        if line.line.starts_with(SWITCH_PREFIX) {
            chart.draw_series([PathElement::new(
                vec![(x, 0.1), (x, 3.9)],
                CHANNEL.stroke_width(2),
            )])?;
            chart.draw_series([Text::new(
                format!("switch {x:+.0} ms"),
                (x, 0.95),
                label_style(CHANNEL, x, low, high),
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
    for due in &t.deadlines {
        let x = t.relative_ms(due.at_ms) as f64;
        let dashes = (0..12).map(|i| {
            let y = f64::from(i) * 0.5;
            PathElement::new(vec![(x, y), (x, y + 0.3)], DEADLINE.stroke_width(2))
        });
        chart.draw_series(dashes)?;
        chart.draw_series([Text::new(
            format!("{} {x:+.0} ms", due.label),
            (x, 5.95),
            label_style(DEADLINE, x, low, high),
        )])?;
    }
    Ok(())
}

/// A label at `x`: to the right of its line in the left half of the panel, to the left of it in
/// the right half, so it never runs off the panel's edge.
fn label_style(color: RGBColor, x: f64, low: f64, high: f64) -> TextStyle<'static> {
    let side = if x > (low + high) / 2.0 {
        HPos::Right
    } else {
        HPos::Left
    };
    ("sans-serif", 11)
        .into_font()
        .color(&color)
        .pos(Pos::new(side, VPos::Top))
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
    use crate::failover::drill::{ChannelStateMark, Due, FaultMark, RelayMark, Scene, TimedLine};

    /// A run like scene 1's, on its own clock: attach at 40, A down at 100 (the fault), the
    /// channel in backoff from 105, a skip, the switch to B at 1,700, the end at 1,900.
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
            faults: Vec::new(),
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
            channels: vec![
                ChannelStateMark {
                    at_ms: 30,
                    url: urls[0].to_owned(),
                    live: true,
                },
                ChannelStateMark {
                    at_ms: 105,
                    url: urls[0].to_owned(),
                    live: false,
                },
                ChannelStateMark {
                    at_ms: 1_701,
                    url: urls[2].to_owned(),
                    live: true,
                },
            ],
            deadlines: vec![Due {
                at_ms: 3_100,
                label: "deadline".to_owned(),
            }],
            verdict: Some(Verdict::Pass),
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
            let caption = format!("scene {} PASS: {}", run.label, run.title).replace('>', "&gt;");
            assert_eq!(svg.matches(&caption).count(), 1, "{caption}");
        }
        // plotters puts a text element's text on a line of its own.
        let labels = |text: &str| svg.lines().filter(|l| *l == text).count();
        assert_eq!(labels("fault"), runs.len());
        // Each panel names its deadline's and its switch's time against the fault.
        assert_eq!(labels("deadline +3000 ms"), runs.len());
        assert_eq!(labels("switch +1600 ms"), runs.len());
    }

    #[test]
    fn fo_x4_timeline_marks_the_dark_span_on_the_host_lane() {
        let mut run = recorded("dark", "dark");
        run.relays.truncate(2);
        run.faults = vec![
            FaultMark {
                at_ms: 100,
                host: Host::A,
                fault: "dark".to_owned(),
            },
            FaultMark {
                at_ms: 1_500,
                host: Host::A,
                fault: "none".to_owned(),
            },
        ];
        let spans = fault_spans(&run, Host::A);
        assert_eq!(spans.len(), 1, "{spans:?}");
        assert_eq!((spans[0].from, spans[0].to), (0.0, 1_400.0));
        assert_eq!(spans[0].color, DARK);
        assert!(fault_spans(&run, Host::B).is_empty());
        let svg = render_svg(&[&run]).expect("renders");
        assert_eq!(svg.lines().filter(|l| *l == "dark +0 ms").count(), 1);
    }

    #[test]
    fn timeline_caption_carries_the_verdict() {
        let mut run = recorded("2", "two");
        assert_eq!(caption(&run), "scene 2 PASS: two");
        run.verdict = Some(Verdict::Fail);
        assert_eq!(caption(&run), "scene 2 FAIL: two");
        run.verdict = None;
        assert_eq!(caption(&run), "scene 2 no verdict: two");
    }

    #[test]
    fn timeline_draws_backoff_apart_from_live_and_the_channel_the_client_ends_on() {
        let run = recorded("1", "one");
        assert_eq!(
            channel_spans(&run),
            [
                // On A's first URL from the attach, live until the report of backoff.
                Span {
                    url_index: 0,
                    from: -60.0,
                    to: 5.0,
                    live: true
                },
                Span {
                    url_index: 0,
                    from: 5.0,
                    to: 1_600.0,
                    live: false
                },
                // On B from the switch to the end of the run: the channel it ends on.
                Span {
                    url_index: 2,
                    from: 1_600.0,
                    to: 1_800.0,
                    live: true
                },
            ]
        );
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
    fn timeline_axis_is_each_panels_own_and_relative_to_its_fault() {
        let short = recorded("1", "one");
        // Relays came up 99 ms before the fault; the deadline is the latest event.
        assert_eq!(time_range(&short), (-99.0 - MARGIN_MS, 3_000.0 + MARGIN_MS));
        // A 35 s run beside it does not stretch the short one's axis.
        let mut long = recorded("5", "five");
        long.end_ms = 35_100;
        let (low, high) = time_range(&long);
        assert!(low < -99.0 && high > 35_000.0, "{low}..{high}");
        assert_eq!(time_range(&short), (-99.0 - MARGIN_MS, 3_000.0 + MARGIN_MS));
        // The same run 5 s later on its own clock: the same axis against its fault.
        let mut late = recorded("2", "two");
        late.fault_ms = Some(5_100);
        for m in &mut late.relays {
            m.at_ms += 5_000;
        }
        for l in &mut late.lines {
            l.at_ms += 5_000;
        }
        late.deadlines[0].at_ms += 5_000;
        late.end_ms += 5_000;
        assert_eq!(time_range(&late), time_range(&short));
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
