//! Guaranteed shares G^i (everest eq 7) from trace analysis, and their rounding to whole
//! processors.
//!
//! everest section 5.1: "through trace analysis, we determine the maximum processor requirement
//! N_max^i of each service to process all the packets within their delay tolerance", then
//! `G^i = N_max^i / sum_k N_max^k` (eq 7). The paper does not say how N_max^i is found; we take
//! the smallest number of processors `j` such that the service's packets alone, served FIFO by
//! `j` dedicated processors with the fixed time `t_pkt` each, all finish within `D` of their
//! arrival (no context switches: the service owns its `j` processors).
//!
//! [`NmaxEstimator`] computes it in one pass over the arrivals, without storing them: for a FIFO
//! queue with `j` identical servers and a constant service time, packet `n` starts at
//! `max(a_n, start_{n-j} + t_pkt)` (the server that frees first is the one that took packet
//! `n - j`), so each candidate `j` needs a ring of its last `j` start times. The candidates
//! `start .. start + width` run side by side; one that sees a late packet is infeasible for
//! good, and a late packet with `j` servers is late with fewer, so the answer is the lowest
//! candidate never late. If every candidate fails ([`NmaxEstimator::exhausted`]) the caller
//! runs another pass starting at the next `width` candidates. Cost: O(width) per packet.

use crate::time::{Duration, Instant};

/// Streaming N_max^i of one service (see the module documentation).
#[derive(Clone, Debug)]
pub struct NmaxEstimator {
    t_pkt: u64,
    tolerance: u64,
    start: u32,
    /// Last candidate, `start + width - 1`.
    max_j: u32,
    /// Smallest candidate not yet proven infeasible.
    lower: u32,
    /// `rings[j - 1]` holds the last `j` start times of candidate `j` (ring, `heads[j - 1]`).
    rings: Vec<Vec<u64>>,
    heads: Vec<usize>,
    failed: Vec<bool>,
    packets: u64,
}

impl NmaxEstimator {
    /// Candidates `start .. start + width` (`start >= 1`, `width >= 1`).
    pub fn new(t_pkt: Duration, tolerance: Duration, start: u32, width: u32) -> Self {
        let start = start.max(1);
        let max_j = start + width.max(1) - 1;
        NmaxEstimator {
            t_pkt: t_pkt.as_nanos(),
            tolerance: tolerance.as_nanos(),
            start,
            max_j,
            lower: start,
            rings: (start..=max_j).map(|j| vec![0u64; j as usize]).collect(),
            heads: vec![0; (max_j - start + 1) as usize],
            failed: vec![false; (max_j - start + 1) as usize],
            packets: 0,
        }
    }

    /// One packet of the service arriving at `at` (arrivals in time order).
    #[inline]
    pub fn push(&mut self, at: Instant) {
        let a = at.as_nanos();
        self.packets += 1;
        for j in self.lower..=self.max_j {
            let idx = (j - self.start) as usize;
            if self.failed[idx] {
                continue;
            }
            let ring = &mut self.rings[idx];
            let h = self.heads[idx];
            // Until the ring has filled, a server is free: the packet starts on arrival.
            let start = if self.packets <= j as u64 { a } else { a.max(ring[h] + self.t_pkt) };
            ring[h] = start;
            self.heads[idx] = if h + 1 == j as usize { 0 } else { h + 1 };
            if start + self.t_pkt - a > self.tolerance {
                self.failed[idx] = true;
            }
        }
        // A packet late with `j` servers is late with fewer, so failures come from the bottom;
        // the lower bound moves past every failed candidate.
        while self.lower <= self.max_j && self.failed[(self.lower - self.start) as usize] {
            self.lower += 1;
        }
    }

    /// N_max: the smallest feasible number of processors (0 without packets); when
    /// [`NmaxEstimator::exhausted`], a lower bound (`start + width`).
    pub fn n_max(&self) -> u32 {
        if self.packets == 0 {
            0
        } else {
            self.lower
        }
    }

    /// Whether every candidate missed a deadline (run again from [`NmaxEstimator::n_max`]).
    pub fn exhausted(&self) -> bool {
        self.lower > self.max_j
    }

    pub fn packets(&self) -> u64 {
        self.packets
    }
}

/// G^i = N_max^i / sum N_max (everest eq 7). All zero requirements give equal shares.
pub fn shares(n_max: &[u32]) -> Vec<f64> {
    let total: u64 = n_max.iter().map(|&n| n as u64).sum();
    if total == 0 {
        return vec![1.0 / n_max.len().max(1) as f64; n_max.len()];
    }
    n_max.iter().map(|&n| n as f64 / total as f64).collect()
}

/// Whole processors per service from shares: every service first gets one processor when
/// `processors >= services` (a service with none could never be served), then the rest by the
/// largest remainder of `G^i x N_p` (ties: lower index). Sums to `processors`.
pub fn round_shares(shares: &[f64], processors: u32) -> Vec<u32> {
    let s = shares.len();
    let mut out = vec![0u32; s];
    if s == 0 {
        return out;
    }
    let floor_one = processors as usize >= s;
    let base = if floor_one { 1 } else { 0 };
    let rest = processors - (base * s) as u32;
    let total: f64 = shares.iter().sum::<f64>().max(f64::MIN_POSITIVE);
    // Ideal counts: shares of the whole, minus the floor already given (never below zero).
    let ideal: Vec<f64> = shares.iter().map(|g| (g / total * processors as f64 - base as f64).max(0.0)).collect();
    let ideal_sum: f64 = ideal.iter().sum();
    let scaled: Vec<f64> = if ideal_sum > 0.0 {
        ideal.iter().map(|x| x / ideal_sum * rest as f64).collect()
    } else {
        vec![rest as f64 / s as f64; s]
    };
    let mut given = 0u32;
    for i in 0..s {
        let f = scaled[i].floor() as u32;
        out[i] = base as u32 + f;
        given += f;
    }
    let mut order: Vec<usize> = (0..s).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (scaled[a] - scaled[a].floor(), scaled[b] - scaled[b].floor());
        rb.partial_cmp(&ra).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
    });
    for &i in order.iter().cycle().take((rest - given) as usize) {
        out[i] += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Brute force: FIFO with `j` servers by explicit earliest-free-server choice.
    fn late_with(arr: &[u64], t: u64, d: u64, j: usize) -> bool {
        let mut free = vec![0u64; j];
        for &a in arr {
            let (k, &f) = free.iter().enumerate().min_by_key(|&(_, f)| *f).unwrap();
            let start = a.max(f);
            free[k] = start + t;
            if start + t - a > d {
                return true;
            }
        }
        false
    }

    #[test]
    fn nmax_matches_brute_force_fifo() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for case in 0..200 {
            let t = rng.random_range(1_000..20_000u64);
            let d = rng.random_range(t..t * 20);
            let n = rng.random_range(1..400);
            let mut a = 0u64;
            let mut arr = Vec::new();
            let burst = rng.random_range(1..t * 2);
            for _ in 0..n {
                a += rng.random_range(0..burst);
                arr.push(a);
            }
            let want = (1..=12).find(|&j| !late_with(&arr, t, d, j)).unwrap_or(13) as u32;
            // Passes of 3 candidates, as a caller would run them.
            let mut start = 1;
            let got = loop {
                let mut est = NmaxEstimator::new(Duration::from_nanos(t), Duration::from_nanos(d), start, 3);
                for &x in &arr {
                    est.push(Instant::from_nanos(x));
                }
                if !est.exhausted() || est.n_max() > 12 {
                    break est.n_max();
                }
                start = est.n_max();
            };
            assert_eq!(got.min(13), want, "case {case}: t {t} d {d} n {n}");
        }
    }

    #[test]
    fn shares_and_rounding() {
        assert_eq!(shares(&[2, 2, 4]), vec![0.25, 0.25, 0.5]);
        assert_eq!(shares(&[0, 0]), vec![0.5, 0.5]);
        let r = round_shares(&[0.25, 0.25, 0.5], 16);
        assert_eq!(r, vec![4, 4, 8]);
        // Floor of one per service, the rest by largest remainder; always sums to N_p.
        let r = round_shares(&[0.9, 0.05, 0.05], 16);
        assert_eq!(r.iter().sum::<u32>(), 16);
        assert!(r.iter().all(|&x| x >= 1));
        assert_eq!(r, vec![14, 1, 1]);
        let r = round_shares(&[0.5, 0.5, 0.0], 2);
        assert_eq!(r.iter().sum::<u32>(), 2);
        for np in 6..40 {
            let r = round_shares(&[0.31, 0.2, 0.05, 0.24, 0.15, 0.05], np);
            assert_eq!(r.iter().sum::<u32>(), np);
        }
    }
}
