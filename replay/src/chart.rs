//! The chart (SVG, drawn with `plotters`): the trace's failure rate and mean latency over time,
//! with its outages shaded, and under it one lane per candidate showing when its circuit was
//! closed (green), open (red) or half-open (orange).

use plotters::prelude::*;

use crate::replay::{Outage, Run};
use crate::trace::{Call, Outcome};

const WIDTH: u32 = 1000;
const TOP: u32 = 300;
const LANE: u32 = 46;
const CLOSED: RGBColor = RGBColor(200, 230, 201);
const OPEN: RGBColor = RGBColor(229, 57, 53);
const HALF_OPEN: RGBColor = RGBColor(251, 140, 0);
const SHADE: RGBColor = RGBColor(225, 225, 225);

/// Per bucket of `width_ns`: (start in seconds, failure rate %, mean latency ms) of the buckets
/// that had calls.
fn buckets(calls: &[&Call], t0: u64, width_ns: u64) -> Vec<(f64, f64, Option<f64>)> {
    let mut acc: Vec<(u64, u64, u64, u64)> = Vec::new(); // calls, failures, latency sum, timed
    for c in calls {
        if !matches!(c.outcome, Outcome::Success | Outcome::Failure) {
            continue;
        }
        let b = ((c.at_ns - t0) / width_ns) as usize;
        if acc.len() <= b {
            acc.resize(b + 1, (0, 0, 0, 0));
        }
        let slot = &mut acc[b];
        slot.0 += 1;
        slot.1 += u64::from(c.outcome == Outcome::Failure);
        if let Some(l) = c.latency_ns {
            slot.2 += l;
            slot.3 += 1;
        }
    }
    acc.iter()
        .enumerate()
        .filter(|(_, a)| a.0 > 0)
        .map(|(i, a)| {
            let start = (i as u64 * width_ns) as f64 / 1e9;
            let rate = a.1 as f64 * 100.0 / a.0 as f64;
            let latency = (a.3 > 0).then(|| a.2 as f64 / a.3 as f64 / 1e6);
            (start, rate, latency)
        })
        .collect()
}

/// Draws the chart of `calls` (one key's calls) with one lane per run; returns the SVG text.
///
/// # Errors
///
/// The drawing backend's message when `plotters` fails to draw.
#[allow(clippy::too_many_lines)] // one chart drawn top to bottom; not on a call path
pub fn render(calls: &[&Call], runs: &[Run], outages: &[Outage]) -> Result<String, String> {
    let t0 = calls.first().map_or(0, |c| c.at_ns);
    let end_ns = calls
        .last()
        .map_or(0, |c| c.at_ns)
        .saturating_sub(t0)
        .max(1);
    let width_ns = (end_ns / 300).max(1_000_000_000);
    let points = buckets(calls, t0, width_ns);
    let end_s = end_ns as f64 / 1e9;
    let max_latency = points.iter().filter_map(|p| p.2).fold(1.0f64, f64::max) * 1.1;
    let mut svg = String::new();
    {
        let height = TOP + LANE * runs.len() as u32 + 10;
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        let err = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(err)?;
        let (top, bottom) = root.split_vertically(TOP);
        let mut chart = ChartBuilder::on(&top)
            .caption(
                "failure rate (red) and mean latency (blue); outages shaded",
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .right_y_label_area_size(60)
            .build_cartesian_2d(0f64..end_s, 0f64..100f64)
            .map_err(err)?
            .set_secondary_coord(0f64..end_s, 0f64..max_latency);
        chart
            .configure_mesh()
            .x_desc("seconds from the first call")
            .y_desc("failure rate %")
            .disable_x_mesh()
            .draw()
            .map_err(err)?;
        chart
            .configure_secondary_axes()
            .y_desc("latency ms")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(outages.iter().map(|o| {
                let a = (o.start_ns - t0) as f64 / 1e9;
                let b = (o.end_ns - t0) as f64 / 1e9;
                Rectangle::new([(a, 0.0), (b, 100.0)], SHADE.filled())
            }))
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                points.iter().map(|p| (p.0, p.1)),
                RED.stroke_width(2),
            ))
            .map_err(err)?;
        chart
            .draw_secondary_series(LineSeries::new(
                points.iter().filter_map(|p| p.2.map(|l| (p.0, l))),
                BLUE.stroke_width(1),
            ))
            .map_err(err)?;
        if !runs.is_empty() {
            let lanes = bottom.split_evenly((runs.len(), 1));
            for (lane, run) in lanes.iter().zip(runs) {
                let title = format!(
                    "{}: closed (green), open (red), half-open (orange)",
                    run.name
                );
                let area = lane.titled(&title, ("sans-serif", 13)).map_err(err)?;
                let mut strip = ChartBuilder::on(&area)
                    .margin_left(10)
                    .margin_right(10)
                    .y_label_area_size(60)
                    .right_y_label_area_size(60)
                    .build_cartesian_2d(0f64..end_s, 0f64..1f64)
                    .map_err(err)?;
                let mut spans = Vec::new();
                let mut from = 0f64;
                let mut state = fusebox::State::Closed;
                for c in &run.changes {
                    let at = c.at_ns.saturating_sub(t0) as f64 / 1e9;
                    spans.push((from, at, state));
                    from = at;
                    state = c.to;
                }
                spans.push((from, end_s, state));
                strip
                    .draw_series(spans.into_iter().filter(|s| s.1 > s.0).map(|(a, b, s)| {
                        let color = match s {
                            fusebox::State::Open | fusebox::State::ForcedOpen => OPEN,
                            fusebox::State::HalfOpen => HALF_OPEN,
                            _ => CLOSED,
                        };
                        // A half-open moment is short: give it a visible width.
                        let b = if s == fusebox::State::HalfOpen {
                            b.max(a + end_s / 400.0)
                        } else {
                            b
                        };
                        Rectangle::new([(a, 0.0), (b, 1.0)], color.filled())
                    }))
                    .map_err(err)?;
            }
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}
