//! The charts (SVG, drawn with `plotters`).
//!
//! [`render`]: the trace's failure rate and the mean latency of its successful calls over time,
//! with its outages shaded, and under it one lane per candidate showing when its circuit was
//! closed (green), open (red) or half-open (orange), how long it took to detect each outage (a
//! black bar from the outage's start to the opening, labelled with the delay, or `missed`) and
//! where it rejected calls that succeeded in the recording (purple ticks, taller for more).
//! A bucket with no successful call leaves a gap in the latency line rather than a drop to zero.
//!
//! [`scatter`]: `--search`'s every candidate as a point (total time to detect against calls
//! wrongly rejected), the Pareto front in red and joined.

use plotters::prelude::*;

use crate::replay::{Outage, Run, SLICES};
use crate::search::Score;
use crate::trace::{Event, Outcome};

const WIDTH: u32 = 1000;
const TOP: u32 = 300;
const LANE: u32 = 56;
const CLOSED: RGBColor = RGBColor(200, 230, 201);
const OPEN: RGBColor = RGBColor(229, 57, 53);
const HALF_OPEN: RGBColor = RGBColor(251, 140, 0);
const SHADE: RGBColor = RGBColor(225, 225, 225);
const WRONG: RGBColor = RGBColor(123, 31, 162);
const GREY: RGBColor = RGBColor(150, 150, 150);

/// The most buckets the top panel draws.
const MAX_POINTS: u64 = 300;

/// One bucket of the top panel: its start in seconds, its failure rate (%) when it had successes
/// or failures, and the mean latency (ms) of its successes that recorded one.
type Point = (f64, Option<f64>, Option<f64>);

/// Per bucket of `width_ns`: (start in seconds, failure rate %, mean success latency ms), for
/// events reported from `t0` to `last`.
fn buckets(
    events: impl IntoIterator<Item = Event>,
    t0: u64,
    last: u64,
    width_ns: u64,
) -> Vec<Point> {
    let last = ((last - t0) / width_ns) as usize;
    // calls, failures, latency sum of successes, timed successes
    let mut acc: Vec<(u64, u64, u128, u64)> = vec![(0, 0, 0, 0); last + 1];
    for c in events.into_iter().filter(Event::is_known) {
        let slot = &mut acc[((c.at_ns() - t0) / width_ns) as usize];
        slot.0 += 1;
        slot.1 += u64::from(c.outcome() == Outcome::Failure);
        if let (Outcome::Success, Some(l)) = (c.outcome(), c.latency_ns()) {
            slot.2 += u128::from(l);
            slot.3 += 1;
        }
    }
    acc.iter()
        .enumerate()
        .map(|(i, a)| {
            let start = (i as u128 * u128::from(width_ns)) as f64 / 1e9;
            let rate = (a.0 > 0).then(|| a.1 as f64 * 100.0 / a.0 as f64);
            let latency = (a.3 > 0).then(|| a.2 as f64 / a.3 as f64 / 1e6);
            (start, rate, latency)
        })
        .collect()
}

/// The runs of consecutive `Some` values: a line per run, so a bucket without a value is a gap.
fn segments(points: &[Point], pick: fn(&Point) -> Option<f64>) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut current = Vec::new();
    for p in points {
        match pick(p) {
            Some(v) => current.push((p.0, v)),
            None if !current.is_empty() => out.push(std::mem::take(&mut current)),
            None => {}
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Draws the chart of `events` (one key's calls) with one lane per run; returns the SVG text.
///
/// # Errors
///
/// The drawing backend's message when `plotters` fails to draw.
pub fn render(events: &[Event], runs: &[Run], outages: &[Outage]) -> Result<String, String> {
    let t0 = events.first().map_or(0, Event::at_ns);
    let last = events.last().map_or(0, Event::at_ns);
    render_in(events.iter().copied(), (t0, last), runs, outages)
}

/// [`render`] of events read once from `events`, reported from `bounds.0` to `bounds.1`.
///
/// # Errors
///
/// The drawing backend's message when `plotters` fails to draw.
pub fn render_in(
    events: impl IntoIterator<Item = Event>,
    bounds: (u64, u64),
    runs: &[Run],
    outages: &[Outage],
) -> Result<String, String> {
    let (t0, last) = bounds;
    let end_ns = last.saturating_sub(t0).max(1);
    let width_ns = (end_ns / MAX_POINTS + 1).max(1_000_000_000);
    let points = buckets(events, t0, last.max(t0), width_ns);
    let end_s = seconds(end_ns);
    let mut svg = String::new();
    {
        let height = TOP + LANE * runs.len() as u32 + 10;
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(drawn)?;
        let (top, bottom) = root.split_vertically(TOP);
        draw_rates(&top, &points, outages, t0, end_s)?;
        if !runs.is_empty() {
            let lanes = bottom.split_evenly((runs.len(), 1));
            for (lane, run) in lanes.iter().zip(runs) {
                draw_lane(lane, run, outages, t0, end_s)?;
            }
        }
        root.present().map_err(drawn)?;
    }
    Ok(svg)
}

/// A part of the SVG chart.
type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// A run's strip: seconds from the first call across, 0 to 1.6 up.
type Strip<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    plotters::coord::cartesian::Cartesian2d<
        plotters::coord::types::RangedCoordf64,
        plotters::coord::types::RangedCoordf64,
    >,
>;

/// The drawing backend's message.
fn drawn<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    e.to_string()
}

/// The top panel: failure rate and mean latency of successes per bucket, outages shaded.
fn draw_rates(
    top: &Area<'_>,
    points: &[Point],
    outages: &[Outage],
    t0: u64,
    end_s: f64,
) -> Result<(), String> {
    let max_latency = points.iter().filter_map(|p| p.2).fold(1.0f64, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(top)
        .caption(
            "failure rate (red) and mean latency of successes (blue); outages shaded",
            ("sans-serif", 16),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .right_y_label_area_size(60)
        .build_cartesian_2d(0f64..end_s, 0f64..100f64)
        .map_err(drawn)?
        .set_secondary_coord(0f64..end_s, 0f64..max_latency);
    chart
        .configure_mesh()
        .x_desc("seconds from the first call")
        .y_desc("failure rate %")
        .disable_x_mesh()
        .draw()
        .map_err(drawn)?;
    chart
        .configure_secondary_axes()
        .y_desc("latency ms")
        .draw()
        .map_err(drawn)?;
    chart
        .draw_series(outages.iter().map(|o| {
            let a = seconds(o.start_ns - t0);
            let b = seconds(o.end_ns - t0);
            Rectangle::new([(a, 0.0), (b, 100.0)], SHADE.filled())
        }))
        .map_err(drawn)?;
    for line in segments(points, |p| p.1) {
        chart
            .draw_series(LineSeries::new(line, RED.stroke_width(2)))
            .map_err(drawn)?;
    }
    for line in segments(points, |p| p.2) {
        chart
            .draw_secondary_series(LineSeries::new(line, BLUE.stroke_width(1)))
            .map_err(drawn)?;
    }
    Ok(())
}

/// One run's lane: its states over time, its detections and its wrongly rejected calls.
fn draw_lane(
    lane: &Area<'_>,
    run: &Run,
    outages: &[Outage],
    t0: u64,
    end_s: f64,
) -> Result<(), String> {
    let title = format!(
        "{}: closed (green), open (red), half-open (orange); detection (black), wrongly rejected (purple)",
        run.name
    );
    let area = lane.titled(&title, ("sans-serif", 13)).map_err(drawn)?;
    let mut strip = ChartBuilder::on(&area)
        .margin_left(10)
        .margin_right(10)
        .y_label_area_size(60)
        .right_y_label_area_size(60)
        .build_cartesian_2d(0f64..end_s, 0f64..1.6f64)
        .map_err(drawn)?;
    let mut spans = Vec::new();
    let mut from = 0f64;
    let mut state = fusebox::State::Closed;
    for c in &run.changes {
        let at = seconds(c.at_ns.saturating_sub(t0));
        spans.push((from, at, state));
        from = at;
        state = c.to;
    }
    spans.push((from, end_s, state));
    let color = |s: fusebox::State| match s {
        fusebox::State::Open | fusebox::State::ForcedOpen => OPEN,
        fusebox::State::HalfOpen => HALF_OPEN,
        _ => CLOSED,
    };
    let half_open = |s: &(f64, f64, fusebox::State)| s.2 == fusebox::State::HalfOpen;
    // Closed and open first; half-open on top, at least 1/400 of the width wide, as a
    // probe often settles in the same instant it was admitted.
    strip
        .draw_series(
            spans
                .iter()
                .filter(|s| s.1 > s.0 && !half_open(s))
                .map(|&(a, b, s)| Rectangle::new([(a, 0.0), (b, 1.0)], color(s).filled())),
        )
        .map_err(drawn)?;
    strip
        .draw_series(spans.iter().filter(|s| half_open(s)).map(|&(a, b, s)| {
            let b = b.max(a + end_s / 400.0);
            Rectangle::new([(a, 0.0), (b, 1.0)], color(s).filled())
        }))
        .map_err(drawn)?;
    draw_detection(&mut strip, run, outages, t0, end_s)?;
    draw_wrong(&mut strip, run, end_s)
}

/// Detection: a bar from each outage's start to the opening, with the delay.
fn draw_detection(
    strip: &mut Strip<'_, '_>,
    run: &Run,
    outages: &[Outage],
    t0: u64,
    end_s: f64,
) -> Result<(), String> {
    for (o, d) in outages.iter().zip(&run.detection) {
        let a = seconds(o.start_ns - t0);
        let (b, label) = match d {
            Some(d) => (seconds(o.start_ns - t0 + d), crate::report::secs(*d)),
            None => (seconds(o.end_ns - t0), "missed".to_owned()),
        };
        let style = if d.is_some() {
            BLACK.stroke_width(3)
        } else {
            BLACK.stroke_width(1)
        };
        strip
            .draw_series(std::iter::once(PathElement::new(
                vec![(a, 1.15), (b.max(a + end_s / 500.0), 1.15)],
                style,
            )))
            .map_err(drawn)?;
        strip
            .draw_series(std::iter::once(Text::new(
                label,
                (a, 1.55),
                ("sans-serif", 11).into_font().color(&BLACK),
            )))
            .map_err(drawn)?;
    }
    Ok(())
}

/// Wrongly rejected calls: a tick per slice that has any, taller for more.
fn draw_wrong(strip: &mut Strip<'_, '_>, run: &Run, end_s: f64) -> Result<(), String> {
    let most = run.wrong_by_slice.iter().copied().max().unwrap_or(0).max(1) as f64;
    strip
        .draw_series(
            run.wrong_by_slice
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| {
                    let x = end_s * (i as f64 + 0.5) / SLICES as f64;
                    let h = 0.3 + 0.7 * (*n as f64 / most);
                    PathElement::new(vec![(x, 0.0), (x, h)], WRONG.stroke_width(2))
                }),
        )
        .map_err(drawn)?;
    Ok(())
}

/// Draws `--search`'s scatter: one grey point per candidate (total time to detect, calls wrongly
/// rejected), the Pareto front's points in red, joined in order; returns the SVG text.
///
/// # Errors
///
/// The drawing backend's message when `plotters` fails to draw.
pub fn scatter(scores: &[Score], front: &[usize]) -> Result<String, String> {
    let max_x = scores.iter().map(|s| seconds(s.0)).fold(1.0f64, f64::max) * 1.05;
    let max_y = scores.iter().map(|s| s.1 as f64).fold(1.0f64, f64::max) * 1.05;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 520)).into_drawing_area();
        let err = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "{} candidates (grey): time to detect against calls wrongly rejected; the Pareto front (red)",
                    scores.len()
                ),
                ("sans-serif", 16),
            )
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..max_x, 0f64..max_y)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time to detect, total (s; a missed outage counts as its length)")
            .y_desc("calls wrongly rejected")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                scores
                    .iter()
                    .map(|s| Circle::new((seconds(s.0), s.1 as f64), 3, GREY.filled())),
            )
            .map_err(err)?;
        let line: Vec<(f64, f64)> = front
            .iter()
            .map(|&i| (seconds(scores[i].0), scores[i].1 as f64))
            .collect();
        chart
            .draw_series(LineSeries::new(line.clone(), RED.stroke_width(1)))
            .map_err(err)?;
        chart
            .draw_series(line.into_iter().map(|p| Circle::new(p, 5, RED.filled())))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}
