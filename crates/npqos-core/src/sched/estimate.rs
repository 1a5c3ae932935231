//! Processing-time prediction (predictive section 3): the linear estimate
//! `t_e(a, l) = alpha_a + beta_a * l` (eq 1), the Table 1 parameters, and the online least-squares
//! fit of eqs 2-3.

use crate::Duration;

/// One application's processing parameters (predictive Table 1), in the units of the
/// processor they were measured on.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AppParams {
    /// Application name.
    pub name: &'static str,
    /// alpha_a: per-packet cost, microseconds.
    pub alpha_us: f64,
    /// beta_a: per-byte cost, microseconds per byte.
    pub beta_us_per_byte: f64,
    /// pi_a: cold-cache penalty, microseconds per packet.
    pub cold_penalty_us: f64,
    /// gamma_a: expansion factor (output bytes / input bytes). Compression's 0.13-0.34 range
    /// is represented by its midpoint.
    pub expansion: f64,
}

impl AppParams {
    /// `t_e(a, l)` (eq 1) in microseconds.
    pub fn estimate_us(&self, len: u32) -> f64 {
        self.alpha_us + self.beta_us_per_byte * len as f64
    }

    /// The same parameters on a processor `speedup` times faster (section 4.2.1 scales the
    /// 167 MHz measurements to a 2 GHz processor: about 10x).
    pub fn scaled(&self, speedup: f64) -> AppParams {
        AppParams {
            alpha_us: self.alpha_us / speedup,
            beta_us_per_byte: self.beta_us_per_byte / speedup,
            cold_penalty_us: self.cold_penalty_us / speedup,
            ..*self
        }
    }
}

/// predictive Table 1, measured on a 167 MHz Pentium (the Smart Port Card).
pub const TABLE1: [AppParams; 4] = [
    AppParams { name: "ip-forwarding", alpha_us: 51.0, beta_us_per_byte: 0.0, cold_penalty_us: 70.0, expansion: 1.0 },
    AppParams { name: "encryption", alpha_us: 320.0, beta_us_per_byte: 1.3, cold_penalty_us: 170.0, expansion: 1.0 },
    AppParams { name: "compression", alpha_us: 970.0, beta_us_per_byte: 7.6, cold_penalty_us: 950.0, expansion: 0.235 },
    AppParams { name: "fec", alpha_us: 320.0, beta_us_per_byte: 9.2, cold_penalty_us: 175.0, expansion: 1.14 },
];

/// The speed-up section 4.2.1 applies to Table 1 ("2 GHz ... about 10 times the speed of the
/// processor on the Smart Port Card").
pub const SPC_TO_2GHZ: f64 = 10.0;

/// Online least-squares fit of `t = alpha + beta * l` for one application (eqs 2-3).
///
/// The paper keeps the raw sums `sum t`, `sum l`, `sum t^2`, `sum l^2`, `sum t l`; eq 2 then
/// subtracts two large, nearly equal numbers (`sum l^2 - (sum l)^2 / n`), which loses every
/// significant digit after a few million 1500-byte packets in `f64`. We keep the same
/// information as running means and centred co-moments (Welford's update), O(1) per sample,
/// from which eq 2's numerator and denominator are read directly. Eq 3 as printed omits the
/// division by `n`; the intercept is `mean(t) - beta * mean(l)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OnlineLsq {
    n: u64,
    mean_l: f64,
    mean_t: f64,
    /// sum (l - mean_l)^2: eq 2's denominator.
    m_ll: f64,
    /// sum (l - mean_l)(t - mean_t): eq 2's numerator.
    m_lt: f64,
}

impl OnlineLsq {
    /// An empty fit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one measured (packet length, processing time) pair.
    pub fn add(&mut self, len: u32, t_us: f64) {
        self.n += 1;
        let n = self.n as f64;
        let l = len as f64;
        let dl = l - self.mean_l;
        self.mean_l += dl / n;
        self.mean_t += (t_us - self.mean_t) / n;
        // Welford: the second factor uses the updated mean.
        self.m_ll += dl * (l - self.mean_l);
        self.m_lt += dl * (t_us - self.mean_t);
    }

    /// Samples seen.
    pub fn samples(&self) -> u64 {
        self.n
    }

    /// `(alpha, beta)`, or `None` before two distinct lengths were seen (beta undefined). With
    /// one length only, the caller can still use [`OnlineLsq::mean_time`] as alpha.
    pub fn fit(&self) -> Option<(f64, f64)> {
        if self.n < 2 || self.m_ll <= f64::EPSILON * self.mean_l * self.mean_l * self.n as f64 {
            return None;
        }
        let beta = self.m_lt / self.m_ll;
        Some((self.mean_t - beta * self.mean_l, beta))
    }

    /// Mean measured processing time.
    pub fn mean_time(&self) -> f64 {
        self.mean_t
    }
}

/// A per-application estimator: Table-1-style prior parameters, replaced by the online fit once
/// it has `min_samples` samples over at least two lengths.
#[derive(Clone, Debug)]
pub struct Estimator {
    prior: Vec<AppParams>,
    fits: Vec<OnlineLsq>,
    min_samples: u64,
}

impl Estimator {
    /// Estimator over `prior` (one entry per application), switching to the online fit after
    /// `min_samples` samples; `u64::MAX` keeps the prior for ever.
    pub fn new(prior: &[AppParams], min_samples: u64) -> Self {
        Estimator { prior: prior.to_vec(), fits: vec![OnlineLsq::new(); prior.len()], min_samples }
    }

    /// Number of applications.
    pub fn apps(&self) -> usize {
        self.prior.len()
    }

    /// The prior parameters of `app`.
    pub fn params(&self, app: usize) -> &AppParams {
        &self.prior[app]
    }

    /// `t_e(app, len)` in microseconds.
    pub fn estimate_us(&self, app: usize, len: u32) -> f64 {
        let f = &self.fits[app];
        if f.samples() >= self.min_samples {
            if let Some((a, b)) = f.fit() {
                return (a + b * len as f64).max(0.0);
            }
        }
        self.prior[app].estimate_us(len)
    }

    /// `t_e(app, len)` as a [`Duration`] (rounded to the nanosecond).
    pub fn estimate(&self, app: usize, len: u32) -> Duration {
        Duration::from_nanos((self.estimate_us(app, len) * 1e3).round() as u64)
    }

    /// Feeds back a measured warm-cache processing time.
    pub fn observe(&mut self, app: usize, len: u32, t_us: f64) {
        self.fits[app].add(len, t_us);
    }

    /// The online fit of `app`.
    pub fn fit(&self, app: usize) -> &OnlineLsq {
        &self.fits[app]
    }
}
