//! Inline SVG: a line chart of per-second series and a bar for a table
//! cell. Long series are drawn in at most [`MAX_POINTS`] points (each the
//! mean of the seconds it stands for, or their lowest value for a limit);
//! the figures in the attributes are the whole series'.

use std::fmt::Write as _;

use super::{escape, int};

/// Points drawn per line, at most.
pub(crate) const MAX_POINTS: usize = 600;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 180.0;
const LEFT: f64 = 56.0;
const BOTTOM: f64 = 22.0;
const TOP: f64 = 10.0;

/// How the seconds of one drawn point are combined.
#[derive(Clone, Copy)]
pub(crate) enum Fold {
    /// Their mean (a rate).
    Mean,
    /// Their lowest value (a limit: a halving stays visible).
    Min,
}

/// One series of a line chart.
pub(crate) struct Line<'a> {
    /// What it is, for the legend.
    pub label: &'a str,
    /// One value per second.
    pub values: &'a [f64],
    /// How seconds fold into a drawn point.
    pub fold: Fold,
}

/// `values` in at most `MAX_POINTS` points.
pub(crate) fn fold(values: &[f64], how: Fold) -> Vec<f64> {
    if values.len() <= MAX_POINTS {
        return values.to_vec();
    }
    let width = values.len().div_ceil(MAX_POINTS);
    values
        .chunks(width)
        .map(|c| match how {
            Fold::Mean => c.iter().sum::<f64>() / c.len() as f64,
            Fold::Min => c.iter().copied().fold(f64::INFINITY, f64::min),
        })
        .collect()
}

/// A line chart over seconds, its `id` and a `data-seconds` attribute
/// on the `<svg>`.
pub(crate) fn lines(id: &str, title: &str, unit: &str, series: &[Line<'_>]) -> String {
    let seconds = series.iter().map(|s| s.values.len()).max().unwrap_or(0);
    let folded: Vec<Vec<f64>> = series.iter().map(|s| fold(s.values, s.fold)).collect();
    let top = folded
        .iter()
        .flatten()
        .copied()
        .fold(0.0_f64, f64::max)
        .max(1.0);
    let plot_w = WIDTH - LEFT - 8.0;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let mut svg = format!(
        "<svg id=\"{}\" data-seconds=\"{seconds}\" role=\"img\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\">\n<title>{}</title>\n",
        escape(id),
        escape(title)
    );
    let base = TOP + plot_h;
    let _ = writeln!(
        svg,
        "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\"/>\
         <line class=\"axis\" x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{base}\"/>",
        LEFT + plot_w
    );
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
         <text x=\"{}\" y=\"{base}\" text-anchor=\"end\">0</text>\
         <text x=\"{LEFT}\" y=\"{}\">0 s</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} s</text>",
        LEFT - 4.0,
        TOP + 9.0,
        escape(&format!("{} {unit}", short(top))),
        LEFT - 4.0,
        HEIGHT - 6.0,
        LEFT + plot_w,
        HEIGHT - 6.0,
        int(seconds as u64)
    );
    for (i, values) in folded.iter().enumerate() {
        let step = match values.len() {
            0 | 1 => 0.0,
            n => plot_w / (n - 1) as f64,
        };
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(j, v)| {
                let x = LEFT + step * j as f64;
                let y = base - v / top * plot_h;
                format!("{x:.1},{y:.1}")
            })
            .collect();
        let class = if i == 0 { "line" } else { "line2" };
        let _ = writeln!(
            svg,
            "<polyline class=\"{class}\" points=\"{}\"><title>{}</title></polyline>",
            points.join(" "),
            escape(series[i].label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// A horizontal bar `value / max` of a fixed width, for a table cell;
/// `hot` draws it in the warning colour.
pub(crate) fn bar(value: f64, max: f64, hot: bool) -> String {
    const W: f64 = 220.0;
    let w = match max > 0.0 {
        true => (value / max).clamp(0.0, 1.0) * W,
        false => 0.0,
    };
    let class = if hot { "hot" } else { "bar" };
    format!(
        "<svg width=\"{W}\" height=\"12\" viewBox=\"0 0 {W} 12\"><rect class=\"{class}\" x=\"0\" y=\"1\" width=\"{w:.1}\" height=\"10\"/></svg>"
    )
}

/// A number in a few characters: 950, 12.5k, 3.1M.
fn short(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{:.1}M", v / 1e6),
        v if v >= 1e4 => format!("{:.0}k", v / 1e3),
        v if v >= 1e3 => format!("{:.1}k", v / 1e3),
        v if v.fract() == 0.0 => format!("{v:.0}"),
        v => format!("{v:.1}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_series_is_drawn_in_few_points_without_losing_a_halving() {
        let mut limit = vec![8.0; 3600];
        limit[1234] = 1.0;
        let drawn = fold(&limit, Fold::Min);
        assert!(drawn.len() <= MAX_POINTS);
        assert_eq!(drawn.iter().copied().fold(f64::INFINITY, f64::min), 1.0);
        let rate = fold(&vec![10.0; 3600], Fold::Mean);
        assert!(rate.iter().all(|v| *v == 10.0));
        assert_eq!(fold(&[1.0, 2.0], Fold::Mean), vec![1.0, 2.0]);
    }

    #[test]
    fn a_chart_names_its_seconds_and_escapes_its_labels() {
        let svg = lines(
            "c",
            "<t>",
            "items/s",
            &[Line {
                label: "a&b",
                values: &[1.0, 3.0, 2.0],
                fold: Fold::Mean,
            }],
        );
        assert!(svg.contains("data-seconds=\"3\""));
        assert!(svg.contains("<title>&lt;t&gt;</title>"));
        assert!(svg.contains("a&amp;b"));
        assert_eq!(svg.matches("<polyline").count(), 1);
    }

    #[test]
    fn a_bar_is_as_long_as_its_share() {
        assert!(bar(50.0, 100.0, false).contains("width=\"110.0\""));
        assert!(bar(5.0, 0.0, true).contains("class=\"hot\""));
    }
}
