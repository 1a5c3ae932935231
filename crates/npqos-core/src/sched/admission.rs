//! Admission control (predictive section 3.3.2, eq 4): a flow of incoming bandwidth `B_j`,
//! mean packet length `l_j` and application `a` needs `P_j = B_j / l_j * t_e(a, l_j)` of
//! processing (as a fraction of one processor) and `gamma_a * B_j` of outgoing bandwidth.

use super::estimate::AppParams;
use thiserror::Error;

/// A flow asking to be admitted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowRequest {
    /// B_j, bits per second.
    pub bandwidth_bps: f64,
    /// l_j, mean packet length in bytes.
    pub mean_len: u32,
    /// The application that processes it.
    pub app: AppParams,
}

impl FlowRequest {
    /// P_j (eq 4): processors' worth of processing (1.0 = one processor fully busy).
    pub fn processing(&self) -> f64 {
        let pps = self.bandwidth_bps / (8.0 * self.mean_len.max(1) as f64);
        pps * self.app.estimate_us(self.mean_len) * 1e-6
    }

    /// gamma_a * B_j, bits per second on the outgoing link.
    pub fn out_bandwidth_bps(&self) -> f64 {
        self.app.expansion * self.bandwidth_bps
    }
}

/// Why a flow was refused.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum Refusal {
    /// Not enough processing left.
    #[error("needs {need:.4} processors of processing, {left:.4} left")]
    Processing { need: f64, left: f64 },
    /// Not enough outgoing bandwidth left.
    #[error("needs {need:.0} bit/s outgoing (expansion applied), {left:.0} left")]
    Bandwidth { need: f64, left: f64 },
    /// The request itself is malformed.
    #[error("invalid request: {0}")]
    Invalid(&'static str),
}

/// The reservations of one router: processing (in processors) and outgoing bandwidth.
#[derive(Clone, Debug, PartialEq)]
pub struct Admission {
    processors: f64,
    link_bps: f64,
    used_processing: f64,
    used_bps: f64,
    admitted: u64,
}

impl Admission {
    /// A router with `processors` processors and `link_bps` of outgoing bandwidth.
    pub fn new(processors: f64, link_bps: f64) -> Self {
        Admission { processors, link_bps, used_processing: 0.0, used_bps: 0.0, admitted: 0 }
    }

    /// Admits `req` (reserving its share) or refuses it with the reason; processing is checked
    /// first. Returns the reserved processing share `P_j`.
    pub fn admit(&mut self, req: &FlowRequest) -> Result<f64, Refusal> {
        if !(req.bandwidth_bps.is_finite() && req.bandwidth_bps > 0.0) {
            return Err(Refusal::Invalid("bandwidth must be positive and finite"));
        }
        if req.mean_len == 0 {
            return Err(Refusal::Invalid("mean packet length must be positive"));
        }
        let need = req.processing();
        let left = self.processors - self.used_processing;
        if need > left + 1e-12 {
            return Err(Refusal::Processing { need, left });
        }
        let out = req.out_bandwidth_bps();
        let left_bps = self.link_bps - self.used_bps;
        if out > left_bps * (1.0 + 1e-12) {
            return Err(Refusal::Bandwidth { need: out, left: left_bps });
        }
        self.used_processing += need;
        self.used_bps += out;
        self.admitted += 1;
        Ok(need)
    }

    /// Releases an admitted flow's reservation.
    pub fn release(&mut self, req: &FlowRequest) {
        self.used_processing = (self.used_processing - req.processing()).max(0.0);
        self.used_bps = (self.used_bps - req.out_bandwidth_bps()).max(0.0);
        self.admitted = self.admitted.saturating_sub(1);
    }

    /// (processing reserved, outgoing bandwidth reserved, flows admitted).
    pub fn usage(&self) -> (f64, f64, u64) {
        (self.used_processing, self.used_bps, self.admitted)
    }
}
