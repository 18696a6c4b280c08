//! The parametric baselines of qbets.md §5, fitted by maximum likelihood on a window of
//! waits: log-normal on log(1 + wait) (bounds from the one-sided normal tolerance
//! factor), log-uniform on log(1 + wait) (model quantile) and Weibull on 1 + wait
//! (model quantile, shape by Newton's method).
//!
//! May import: std, statrs.

use statrs::function::erf::erfc_inv;

/// Φ⁻¹(p), the standard normal quantile.
pub fn normal_quantile(p: f64) -> f64 {
    -std::f64::consts::SQRT_2 * erfc_inv(2.0 * p)
}

/// Φ(x), the standard normal distribution function.
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * statrs::function::erf::erfc(-x / std::f64::consts::SQRT_2)
}

/// One-sided normal tolerance factor K: with n samples of mean m and standard deviation
/// s, m + K·s is an upper level-`c` confidence bound on the `q` quantile.
///
/// The exact factor is a noncentral-t quantile, t'_c(n − 1, z_q √n)/√n; this uses
/// Natrella's closed form (NIST/SEMATECH e-Handbook §7.2.6.3), accurate to about 1%
/// for n ≥ 10 — far inside the differences between methods that Table 4.1 shows.
pub fn tolerance_factor(n: usize, q: f64, c: f64) -> f64 {
    let n = n as f64;
    let zq = normal_quantile(q);
    let zc = normal_quantile(c);
    let a = 1.0 - zc * zc / (2.0 * (n - 1.0));
    let b = zq * zq - zc * zc / n;
    if a <= 0.0 {
        return f64::INFINITY;
    }
    (zq + (zq * zq - a * b).max(0.0).sqrt()) / a
}

/// Log-normal upper level-`c` bound on the `q` quantile of waits from the mean and
/// standard deviation of y = log(1 + wait) over n observations.
pub fn lognormal_upper(n: usize, mean: f64, sd: f64, q: f64, c: f64) -> f64 {
    (mean + tolerance_factor(n, q, c) * sd).exp() - 1.0
}

/// The mirror: log-normal lower level-`c` bound on the `p` quantile.
pub fn lognormal_lower(n: usize, mean: f64, sd: f64, p: f64, c: f64) -> f64 {
    ((mean - tolerance_factor(n, 1.0 - p, c) * sd).exp() - 1.0).max(0.0)
}

/// Log-normal model P(wait ≤ t).
pub fn lognormal_cdf(mean: f64, sd: f64, t: f64) -> f64 {
    let y = (1.0 + t).ln();
    if sd <= 0.0 {
        return if y >= mean { 1.0 } else { 0.0 };
    }
    normal_cdf((y - mean) / sd)
}

/// Log-uniform model q quantile of waits, from the least and largest log(1 + wait).
pub fn loguniform_quantile(lo: f64, hi: f64, q: f64) -> f64 {
    (lo + q * (hi - lo)).exp() - 1.0
}

/// Log-uniform model P(wait ≤ t).
pub fn loguniform_cdf(lo: f64, hi: f64, t: f64) -> f64 {
    let y = (1.0 + t).ln();
    if hi <= lo {
        return if y >= lo { 1.0 } else { 0.0 };
    }
    ((y - lo) / (hi - lo)).clamp(0.0, 1.0)
}

/// A Weibull fit to x = 1 + wait: P(X ≤ x) = 1 − exp(−(x/scale)^shape).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weibull {
    pub shape: f64,
    /// log of the scale (kept in logs: scales of heavy-tailed waits overflow easily).
    pub ln_scale: f64,
}

impl Weibull {
    /// Maximum-likelihood fit to the values `ys` = log(1 + wait). The shape solves
    /// Σ x^k ln x / Σ x^k − 1/k − mean(ln x) = 0 by Newton's method (bisection
    /// safeguard), starting from `start` (the previous fit's shape, when refitting).
    /// `None` for fewer than two values; a constant sample gives a degenerate fit with
    /// infinite shape (all mass at that value).
    pub fn fit(ys: &[f64], start: Option<f64>) -> Option<Self> {
        let n = ys.len();
        if n < 2 {
            return None;
        }
        let ymax = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let ymin = ys.iter().copied().fold(f64::INFINITY, f64::min);
        let ybar = ys.iter().sum::<f64>() / n as f64;
        if ymax - ymin < 1e-12 {
            return Some(Self {
                shape: f64::INFINITY,
                ln_scale: ymax,
            });
        }
        // g(k) and g'(k), with x^k scaled by x_max^k to stay finite.
        let eval = |k: f64| -> (f64, f64) {
            let (mut s0, mut s1, mut s2) = (0.0, 0.0, 0.0);
            for &y in ys {
                let e = (k * (y - ymax)).exp();
                s0 += e;
                s1 += e * y;
                s2 += e * y * y;
            }
            let m1 = s1 / s0;
            let g = m1 - 1.0 / k - ybar;
            let dg = s2 / s0 - m1 * m1 + 1.0 / (k * k);
            (g, dg)
        };
        // g is increasing in k; bracket the root.
        let (mut lo, mut hi) = (1e-3, 1.0);
        while eval(hi).0 < 0.0 && hi < 1e6 {
            lo = hi;
            hi *= 4.0;
        }
        let mut k = start
            .filter(|k| k.is_finite() && *k > lo && *k < hi)
            .unwrap_or((lo * hi).sqrt());
        for _ in 0..100 {
            let (g, dg) = eval(k);
            if g.abs() < 1e-10 {
                break;
            }
            if g < 0.0 {
                lo = k;
            } else {
                hi = k;
            }
            let newton = k - g / dg;
            k = if newton > lo && newton < hi && dg > 0.0 {
                newton
            } else {
                0.5 * (lo + hi)
            };
            if hi - lo < 1e-12 * hi {
                break;
            }
        }
        let s0: f64 = ys.iter().map(|&y| (k * (y - ymax)).exp()).sum();
        let ln_scale = ymax + (s0 / n as f64).ln() / k;
        Some(Self { shape: k, ln_scale })
    }

    /// The model q quantile of the wait (x − 1).
    pub fn quantile(&self, q: f64) -> f64 {
        if self.shape.is_infinite() {
            return self.ln_scale.exp() - 1.0;
        }
        (self.ln_scale + (-(1.0 - q).ln()).ln() / self.shape).exp() - 1.0
    }

    /// The model P(wait ≤ t).
    pub fn cdf(&self, t: f64) -> f64 {
        let y = (1.0 + t).ln();
        if self.shape.is_infinite() {
            return if y >= self.ln_scale { 1.0 } else { 0.0 };
        }
        -(-(self.shape * (y - self.ln_scale)).exp()).exp_m1()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rare::Rng;

    #[test]
    fn normal_quantile_and_cdf() {
        assert!((normal_quantile(0.95) - 1.644_853_626_951).abs() < 1e-9);
        assert!((normal_cdf(1.959_963_984_54) - 0.975).abs() < 1e-9);
    }

    #[test]
    fn tolerance_factor_matches_published_values() {
        // Exact one-sided factors (noncentral t), p = 0.95, confidence 0.95:
        // n = 20 → 2.396, n = 59 → 2.035, n = 100 → 1.927 (NIST tables).
        for (n, k) in [(20, 2.396), (59, 2.035), (100, 1.927)] {
            let got = tolerance_factor(n, 0.95, 0.95);
            assert!((got - k).abs() / k < 0.01, "n={n}: {got} vs {k}");
        }
        // Large n tends to z_q.
        assert!((tolerance_factor(1_000_000, 0.95, 0.95) - 1.6449).abs() < 0.01);
    }

    #[test]
    fn weibull_recovers_its_parameters() {
        let mut rng = Rng::new(11);
        let (shape, scale) = (0.6f64, 3000.0f64);
        let ys: Vec<f64> = (0..20_000)
            .map(|_| {
                let u = rng.uniform();
                let x = scale * (-(1.0 - u).ln()).powf(1.0 / shape);
                x.ln()
            })
            .collect();
        let w = Weibull::fit(&ys, None).unwrap();
        assert!((w.shape - shape).abs() < 0.02, "{w:?}");
        assert!((w.ln_scale.exp() - scale).abs() / scale < 0.05, "{w:?}");
        // Warm start converges to the same root.
        let w2 = Weibull::fit(&ys, Some(2.0)).unwrap();
        assert!((w2.shape - w.shape).abs() < 1e-8);
        let q = w.quantile(0.95);
        assert!((w.cdf(q) - 0.95).abs() < 1e-9);
    }

    #[test]
    fn degenerate_samples_do_not_panic() {
        assert!(Weibull::fit(&[1.0], None).is_none());
        let w = Weibull::fit(&[2.0, 2.0, 2.0], None).unwrap();
        assert!((w.quantile(0.95) - (2f64.exp() - 1.0)).abs() < 1e-9);
        assert_eq!(loguniform_quantile(1.0, 1.0, 0.95), 1f64.exp() - 1.0);
        assert_eq!(lognormal_cdf(1.0, 0.0, 10.0), 1.0);
    }
}
