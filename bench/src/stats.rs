//! Statistics for the benchmark: median and spread of a few runs, percentiles of many
//! samples, and the scaling exponent of a measurement against N.

use serde::Serialize;

/// A measurement taken several times.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub samples: Vec<f64>,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// (max - min) / median, in percent: how far apart the runs were.
    pub spread_pct: f64,
}

impl Summary {
    /// `None` for no samples (a skipped measurement).
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let median = median_sorted(&sorted);
        let (min, max) = (sorted[0], sorted[sorted.len() - 1]);
        let spread_pct = if median.abs() > f64::EPSILON {
            (max - min) / median.abs() * 100.0
        } else {
            0.0
        };
        Some(Summary {
            samples: samples.to_vec(),
            median,
            min,
            max,
            spread_pct,
        })
    }
}

fn median_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// The median of `samples` (NaN for none).
pub fn median(samples: &[f64]) -> f64 {
    Summary::of(samples).map_or(f64::NAN, |s| s.median)
}

/// The `p`-th percentile (0..=100) by linear interpolation between closest ranks, as
/// numpy's default: p50 of [1, 2, 3, 4] is 2.5, p95 of 1..=20 is 19.05.
pub fn percentile(samples: &[f64], p: f64) -> f64 {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted.sort_by(f64::total_cmp);
    let rank = (p.clamp(0.0, 100.0) / 100.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

/// How `y` grows with `x`: the slope `k` of the least-squares line through
/// (ln x, ln y), so y ≈ c·x^k. 1 is linear, 2 quadratic, below 1 sub-linear (a fixed
/// cost dominates). `None` with fewer than two distinct positive x.
pub fn scaling_exponent(points: &[(f64, f64)]) -> Option<f64> {
    let logs: Vec<(f64, f64)> = points
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0 && x.is_finite() && y.is_finite())
        .map(|(x, y)| (x.ln(), y.ln()))
        .collect();
    let n = logs.len() as f64;
    if logs.len() < 2 {
        return None;
    }
    let mx = logs.iter().map(|(x, _)| x).sum::<f64>() / n;
    let my = logs.iter().map(|(_, y)| y).sum::<f64>() / n;
    let sxx: f64 = logs.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    if sxx <= f64::EPSILON {
        return None;
    }
    let sxy: f64 = logs.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    Some(sxy / sxx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert!((s.spread_pct - 100.0).abs() < 1e-9);
        assert_eq!(s.samples, vec![3.0, 1.0, 2.0], "kept in run order");
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(Summary::of(&[5.0]).unwrap().spread_pct, 0.0);
        assert!(Summary::of(&[]).is_none());
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn percentiles_interpolate() {
        let xs: Vec<f64> = (1..=20).map(f64::from).collect();
        assert!((percentile(&xs, 50.0) - 10.5).abs() < 1e-9);
        assert!((percentile(&xs, 95.0) - 19.05).abs() < 1e-9);
        assert_eq!(percentile(&xs, 0.0), 1.0);
        assert_eq!(percentile(&xs, 100.0), 20.0);
        assert_eq!(percentile(&[7.0], 95.0), 7.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn scaling_exponent_recovers_power_laws() {
        let pts = |k: f64| -> Vec<(f64, f64)> {
            [100.0, 1000.0, 5000.0]
                .iter()
                .map(|&x: &f64| (x, 3.0 * x.powf(k)))
                .collect()
        };
        for k in [0.5, 1.0, 2.0] {
            let got = scaling_exponent(&pts(k)).unwrap();
            assert!((got - k).abs() < 1e-9, "{k}: {got}");
        }
        // A fixed cost plus a linear part reads as sub-linear over this range.
        let affine: Vec<(f64, f64)> = [100.0, 1000.0, 5000.0]
            .iter()
            .map(|&x| (x, 1000.0 + x))
            .collect();
        assert!(scaling_exponent(&affine).unwrap() < 1.0);
        assert!(scaling_exponent(&[(100.0, 1.0)]).is_none());
        assert!(scaling_exponent(&[(100.0, 1.0), (100.0, 2.0)]).is_none());
    }
}
