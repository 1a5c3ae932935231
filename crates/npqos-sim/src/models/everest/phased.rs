//! A phased workload: each service's offered rate is constant within a phase and changes at
//! phase boundaries, as a traffic generator stepping through a schedule. Everest's prototype
//! (section 6, Figure 6) drives its two services this way with an IXIA generator; the paper
//! gives the shape (the mix changes over time; both high, an overload, from 2.2 to 4 s), not the
//! rates, which `everest-fig6` chooses (docs/everest.md, "Figure 6").
//!
//! Within a phase a service's packets are Poisson at the phase's rate. Each service has its own
//! random stream (`"everest.phased"`, service index), so a service's arrivals do not depend on
//! the other's rates; the streams are merged in time order ([`KMerge`]). At a boundary a
//! service's next gap is drawn afresh at the new rate from the boundary, which is exact for a
//! Poisson process (memoryless), so the rate steps exactly at the boundary.

use crate::merge::{KMerge, Source};
use crate::rng::{RngStreams, StreamRng};
use npqos_core::Duration;
use rand::Rng;
use rand_distr::Exp1;
use std::convert::Infallible;
use std::sync::Arc;

/// One phase: until when it lasts (from the end of the previous one, or 0) and each service's
/// packet rate in it, packets/s.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    pub name: String,
    pub until: Duration,
    pub rate_pps: Vec<f64>,
}

/// Services' rates by phase (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct PhasedTraffic {
    /// In time order, each ending after the previous one; every phase names a rate for every
    /// service (finite, at least 0).
    pub phases: Arc<[Phase]>,
}

impl PhasedTraffic {
    /// The schedule `phases`; `None` if it is empty, out of order, or a rate is missing,
    /// negative or not finite.
    pub fn new(phases: Vec<Phase>) -> Option<Self> {
        let n = phases.first()?.rate_pps.len();
        let ordered = phases.windows(2).all(|w| w[0].until < w[1].until) && !phases[0].until.is_zero();
        let rates_ok =
            phases.iter().all(|p| p.rate_pps.len() == n && p.rate_pps.iter().all(|r| r.is_finite() && *r >= 0.0));
        (n > 0 && ordered && rates_ok).then(|| PhasedTraffic { phases: phases.into() })
    }

    pub fn services(&self) -> usize {
        self.phases[0].rate_pps.len()
    }
    /// The end of the last phase: packets arrive before it.
    pub fn duration(&self) -> Duration {
        self.phases[self.phases.len() - 1].until
    }
    /// Start and end of phase `i`, ns.
    pub fn span_ns(&self, i: usize) -> (u64, u64) {
        let start = if i == 0 { 0 } else { self.phases[i - 1].until.as_nanos() };
        (start, self.phases[i].until.as_nanos())
    }
    /// Mean number of packets of the whole schedule.
    pub fn expected_packets(&self) -> f64 {
        (0..self.phases.len())
            .map(|i| {
                let (a, b) = self.span_ns(i);
                self.phases[i].rate_pps.iter().sum::<f64>() * (b - a) as f64 * 1e-9
            })
            .sum()
    }

    /// The arrival stream (time in ns, service), in time order; the same for the same seed.
    pub fn stream(&self, seed: u64) -> PhasedStream {
        let streams = RngStreams::new(seed);
        let sources = (0..self.services())
            .map(|s| PhasedSource {
                rng: streams.stream("everest.phased", s as u64),
                phases: self.phases.clone(),
                service: s as u8,
                phase: 0,
                t: 0,
            })
            .collect();
        PhasedStream { merged: KMerge::new(sources).unwrap_or_else(|e: Infallible| match e {}) }
    }
}

/// One service's packets: Poisson at its rate in the current phase.
pub struct PhasedSource {
    rng: StreamRng,
    phases: Arc<[Phase]>,
    service: u8,
    phase: usize,
    /// The last arrival, or the start of the current phase.
    t: u64,
}

impl Source for PhasedSource {
    type Item = u8;
    type Error = Infallible;
    fn next(&mut self) -> Result<Option<(u64, u8)>, Infallible> {
        while let Some(p) = self.phases.get(self.phase) {
            let (end, rate) = (p.until.as_nanos(), p.rate_pps[self.service as usize]);
            if rate > 0.0 {
                let gap: f64 = self.rng.sample(Exp1);
                let t = self.t + (gap * 1e9 / rate).round() as u64;
                if t < end {
                    self.t = t;
                    return Ok(Some((t, self.service)));
                }
            }
            // Past the phase: start again at its end with the next phase's rate.
            self.t = end;
            self.phase += 1;
        }
        Ok(None)
    }
}

/// Iterator over (arrival time in ns, service) of a [`PhasedTraffic`].
pub struct PhasedStream {
    merged: KMerge<PhasedSource>,
}

impl Iterator for PhasedStream {
    type Item = (u64, u8);
    fn next(&mut self) -> Option<(u64, u8)> {
        self.merged.next().map(|(t, _, s)| (t, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_phases() -> PhasedTraffic {
        PhasedTraffic::new(vec![
            Phase { name: "a".into(), until: Duration::from_secs(1), rate_pps: vec![100_000.0, 0.0] },
            Phase { name: "b".into(), until: Duration::from_secs(2), rate_pps: vec![10_000.0, 50_000.0] },
        ])
        .unwrap()
    }

    #[test]
    fn rates_step_at_the_boundaries_and_the_stream_is_deterministic() {
        let tr = two_phases();
        let v: Vec<(u64, u8)> = tr.stream(7).collect();
        assert_eq!(v, tr.stream(7).collect::<Vec<_>>());
        assert_ne!(v, tr.stream(8).collect::<Vec<_>>());
        assert!(v.windows(2).all(|w| w[0].0 <= w[1].0), "time order");
        let count = |s: u8, a: u64, b: u64| v.iter().filter(|x| x.1 == s && (a..b).contains(&x.0)).count() as f64;
        // Poisson counts: within 5 standard deviations of the means.
        for (s, a, b, mean) in [
            (0u8, 0, 1_000_000_000, 100_000.0),
            (0, 1_000_000_000, 2_000_000_000, 10_000.0),
            (1, 1_000_000_000, 2_000_000_000, 50_000.0),
        ] {
            let n = count(s, a, b);
            assert!((n - mean).abs() < 5.0 * mean.sqrt(), "service {s} in [{a}, {b}): {n}, expected {mean}");
        }
        assert_eq!(count(1, 0, 1_000_000_000), 0.0, "service 1 silent in phase a");
        assert!(v.last().unwrap().0 < 2_000_000_000);
        assert!((tr.expected_packets() - 160_000.0).abs() < 1e-6);
    }

    #[test]
    fn a_bad_schedule_is_refused() {
        let p = |until: u64, r: Vec<f64>| Phase { name: "p".into(), until: Duration::from_millis(until), rate_pps: r };
        assert!(PhasedTraffic::new(vec![]).is_none());
        assert!(PhasedTraffic::new(vec![p(2, vec![1.0]), p(1, vec![1.0])]).is_none());
        assert!(PhasedTraffic::new(vec![p(1, vec![1.0]), p(2, vec![1.0, 2.0])]).is_none());
        assert!(PhasedTraffic::new(vec![p(1, vec![-1.0])]).is_none());
        assert!(PhasedTraffic::new(vec![p(1, vec![f64::NAN])]).is_none());
        assert!(PhasedTraffic::new(vec![p(0, vec![1.0])]).is_none());
        assert!(PhasedTraffic::new(vec![p(1, vec![1.0])]).is_some());
    }
}
