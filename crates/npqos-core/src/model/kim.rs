//! The stochastic model of kim section 3.2: reschedules and heap size per core.
//!
//! For one queue with constant inter-arrival time `T_int` and i.i.d. packet sizes, after being
//! re-enabled with `TB = alpha` the bucket evolves per arrival as
//! `TB_k = min(TB_{k-1} + BW x T_int, cap) - S_k`; `N` is the first `k` with `TB_k < 0`
//! ("the number of packet arrivals making a token bucket negative"). The model then takes
//! (kim eqs 8-12):
//!
//! * `M = 1 / (N T_int + alpha / BW)` reschedules per second (eq 8),
//! * `R = N T_int / (N T_int + alpha / BW)`, the schedulable fraction (eq 9),
//! * `E(Y) = 1 - E(R)`, `Var(Y) = E(R) (1 - E(R))` for the indicator of being in the heap
//!   (eqs 10-12),
//!
//! and for `m` queues per core the heap size is normal with mean `sum E(Y_i)` and variance
//! `sum Var(Y_i)` (Lyapunov CLT, eq 13).
//!
//! **Renewal variant (ours, not the paper's).** Eq 11 averages a ratio, `E[U / (N T_int + U)]`
//! with `U = alpha / BW`, but the long-run fraction of time a queue spends in the heap is the
//! ratio of means `E[U] / (E[N] T_int + E[U])` (renewal-reward), and a queue is really disabled
//! for `U = (alpha - TB_N) / BW`, `TB_N < 0` being the level the last packet left. The same
//! dynamic program gives `E[TB_N]`, so [`QueueResult::renewal_y`] reports that variant beside the
//! paper's `mean_y`.
//!
//! `P(N = n)` is computed by a dynamic program over the token level on a 1-byte grid from
//! `-max_size` to `cap`: per arrival, the mass is shifted by `BW x T_int` (split linearly
//! between the two neighbouring bytes when that is fractional), capped, convolved with the size
//! distribution, and the mass below zero is `P(N = k)`. Sizes are given as runs of equally likely
//! sizes, so each convolution costs O(grid x runs) with prefix sums (IMIX: 11 runs; uniform
//! 40-1500 B: 1 run). The recursion stops when the surviving mass is below 1e-12 or after
//! `max_steps` arrivals (then `truncated` reports the mass left, and the moments are lower bounds).

/// A packet-size distribution as runs `(first, last, probability of each size in the run)`.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeRuns(pub Vec<(u32, u32, f64)>);

impl SizeRuns {
    /// Uniform over `min..=max` bytes.
    pub fn uniform(min: u32, max: u32) -> Self {
        SizeRuns(vec![(min, max, 1.0 / (max - min + 1) as f64)])
    }
    /// A discrete table of (size, weight); weights are normalised.
    pub fn table(t: &[(u32, f64)]) -> Self {
        let tot: f64 = t.iter().map(|x| x.1).sum();
        SizeRuns(t.iter().map(|&(s, w)| (s, s, w / tot)).collect())
    }
    pub fn max(&self) -> u32 {
        self.0.iter().map(|r| r.1).max().unwrap_or(0)
    }
    pub fn mean(&self) -> f64 {
        self.0.iter().map(|&(a, b, p)| p * (b - a + 1) as f64 * (a as f64 + b as f64) / 2.0).sum()
    }
}

/// Inter-arrival times of the single-queue model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gaps {
    /// Every gap is T_int (the paper's model).
    Constant,
    /// Exponential gaps with mean T_int (our extension: the tokens earned per gap are then
    /// exponential with mean BW x T_int).
    Exponential,
}

/// Inputs of the single-queue model.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueModel {
    pub sizes: SizeRuns,
    /// Mean inter-arrival time T_int, seconds.
    pub t_int_s: f64,
    pub gaps: Gaps,
    /// Shaped rate BW, bytes per second.
    pub bw_bytes_per_s: f64,
    /// Reschedule threshold alpha, bytes.
    pub alpha_bytes: f64,
    /// Bucket cap (TB-bar), bytes.
    pub cap_bytes: f64,
    /// Arrivals after which the recursion stops.
    pub max_steps: u32,
}

/// Outputs of the single-queue model.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueResult {
    /// E(N), arrivals per schedulable period.
    pub mean_n: f64,
    /// E(R) (eq 9).
    pub mean_r: f64,
    /// E(Y) = 1 - E(R) (eq 11): probability of being in the heap.
    pub mean_y: f64,
    /// Var(Y) = E(R)(1 - E(R)) (eq 12).
    pub var_y: f64,
    /// E(M), reschedules per second (eq 8).
    pub reschedules_per_s: f64,
    /// Probability mass of N beyond `max_steps` (0 when the recursion converged).
    pub truncated: f64,
    /// E(TB_N): the (negative) level the packet that empties the bucket leaves, bytes.
    pub mean_overshoot_level: f64,
    /// Renewal-reward fraction of time in the heap, E[U] / (E[N] T_int + E[U]) with
    /// U = (alpha - TB_N) / BW (ours; see the module documentation).
    pub renewal_y: f64,
    /// Renewal-reward reschedules per second, 1 / (E[N] T_int + E[U]) (ours).
    pub renewal_reschedules_per_s: f64,
}

/// Solves the single-queue model.
pub fn solve_queue(q: &QueueModel) -> QueueResult {
    let max_size = q.sizes.max() as usize;
    let cap = q.cap_bytes.max(0.0).floor() as usize;
    let off = max_size; // grid index of token level 0
    let len = off + cap + 1; // levels -max_size ..= cap
    let gain = q.bw_bytes_per_s * q.t_int_s;
    let (g_int, g_frac) = (gain.floor() as usize, gain - gain.floor());
    let mut p = vec![0.0f64; len];
    p[off + (q.alpha_bytes.max(0.0).round() as usize).min(cap)] = 1.0;
    let mut shifted = vec![0.0f64; len];
    let mut prefix = vec![0.0f64; len + 1];
    let (mut mean_n, mut mean_r, mut mean_m, mut alive, mut level_sum) = (0.0, 0.0, 0.0, 1.0, 0.0);
    let unsched = q.alpha_bytes / q.bw_bytes_per_s;
    let mut steps = 0u32;
    while alive > 1e-12 && steps < q.max_steps {
        steps += 1;
        shifted.iter_mut().for_each(|x| *x = 0.0);
        match q.gaps {
            // Gain BW x T_int (split over two bytes), capped at cap. Only levels >= 0 hold mass.
            Gaps::Constant => {
                for lvl in 0..=cap {
                    let m = p[off + lvl];
                    if m == 0.0 {
                        continue;
                    }
                    let lo = (lvl + g_int).min(cap);
                    let hi = (lvl + g_int + 1).min(cap);
                    shifted[off + lo] += m * (1.0 - g_frac);
                    shifted[off + hi] += m * g_frac;
                }
            }
            // Gain ~ Exp(mean g) rounded to whole bytes: P(0) = 1 - r^(1/2),
            // P(k) = r^(k - 1/2) (1 - r) for k >= 1, r = e^(-1/g). The convolution is a
            // first-order recursive filter, O(grid); mass beyond the cap stays at the cap.
            Gaps::Exponential => {
                let r = (-1.0 / gain.max(1e-9)).exp();
                let (p0, step) = (1.0 - r.sqrt(), r.sqrt() * (1.0 - r));
                let (mut carry, mut below) = (0.0, 0.0);
                for lvl in 0..=cap {
                    let m = p[off + lvl];
                    carry = carry * r + if lvl > 0 { p[off + lvl - 1] * step } else { 0.0 };
                    let v = m * p0 + carry;
                    shifted[off + lvl] = v;
                    below += v;
                }
                let total: f64 = p[off..].iter().sum();
                shifted[off + cap] += (total - below).max(0.0);
            }
        }
        // Subtract the size: new[x] = sum over runs of p_run * sum_{s=a..b} shifted[x + s].
        prefix[0] = 0.0;
        for i in 0..len {
            prefix[i + 1] = prefix[i] + shifted[i];
        }
        let window = |from: isize, to: isize| -> f64 {
            let (f, t) = (from.max(0) as usize, (to.min(len as isize - 1)).max(-1));
            if t < f as isize {
                0.0
            } else {
                prefix[t as usize + 1] - prefix[f]
            }
        };
        let mut neg = 0.0;
        for (i, slot) in p.iter_mut().enumerate() {
            let mut v = 0.0;
            for &(a, b, pr) in &q.sizes.0 {
                v += pr * window(i as isize + a as isize, i as isize + b as isize);
            }
            if i < off {
                neg += v;
                level_sum += v * (i as f64 - off as f64);
                *slot = 0.0;
            } else {
                *slot = v;
            }
        }
        // neg = P(N = steps)
        let n = steps as f64;
        let sched = n * q.t_int_s;
        mean_n += neg * n;
        mean_r += neg * sched / (sched + unsched);
        mean_m += neg / (sched + unsched);
        alive -= neg;
    }
    let truncated = alive.max(0.0);
    let absorbed = (1.0 - truncated).max(1e-300);
    let mean_overshoot_level = level_sum / absorbed;
    let u = (q.alpha_bytes - mean_overshoot_level) / q.bw_bytes_per_s;
    let cycle = mean_n / absorbed * q.t_int_s + u;
    let renewal_y = u / cycle;
    QueueResult {
        renewal_reschedules_per_s: 1.0 / cycle,
        mean_overshoot_level,
        renewal_y,
        mean_n,
        mean_r,
        mean_y: 1.0 - mean_r,
        var_y: mean_r * (1.0 - mean_r),
        reschedules_per_s: mean_m,
        truncated,
    }
}

/// Heap size on one core holding `m` identical queues (eq 13).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeapSize {
    pub mean: f64,
    pub sd: f64,
}

impl HeapSize {
    /// The paper's eq 13 with eqs 11-12.
    pub fn for_queues(q: &QueueResult, m: f64) -> HeapSize {
        HeapSize { mean: m * q.mean_y, sd: (m * q.var_y).sqrt() }
    }
    /// Eq 13 with the renewal variant of Y (ours).
    pub fn for_queues_renewal(q: &QueueResult, m: f64) -> HeapSize {
        HeapSize { mean: m * q.renewal_y, sd: (m * q.renewal_y * (1.0 - q.renewal_y)).sqrt() }
    }
    /// The quantile `p` of the normal approximation (e.g. 0.999).
    pub fn quantile(&self, p: f64) -> f64 {
        self.mean + self.sd * normal_quantile(p)
    }
}

/// Standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9).
/// Expected off-chip accesses of one insert and one delete on a heap of `h` nodes whose first
/// `locked_nodes` array indices are on chip, for the access pattern of our heap code
/// (`shaper::heap::ReschedHeap`):
///
/// * insert: read and write the size (index 0), read the new leaf's parent, write the leaf (a new
///   reschedule time is nearly always the latest, so it rarely moves up: measured 0.02 moves per
///   insert in kim-table4-5);
/// * delete: read the root, the size and the last node, write the size, then sift the last node
///   down **to the bottom** (kim section 5.1.3: it "traverses a heap all the way to the leaf"):
///   per level read both children and write one node, and write the last node at the bottom.
///
/// At a depth that is only partly beyond the locked region, the fraction of its indices beyond
/// it is used. An upper estimate: a sift-down that stops early touches fewer levels.
pub fn offchip_per_op(h: f64, locked_nodes: f64) -> (f64, f64) {
    let n = h.max(1.0).round() as u64;
    let k = locked_nodes.max(0.0) as u64;
    let beyond = |i: u64| if i >= k { 1.0 } else { 0.0 };
    // Fraction of the indices at depth d (up to the last index `last`) that are off chip.
    let frac = |d: u32, last: u64| -> f64 {
        let lo = 1u64 << d;
        let hi = ((1u64 << (d + 1)) - 1).min(last);
        if hi < lo {
            return 0.0;
        }
        let off = hi + 1 - lo.max(k).min(hi + 1);
        off as f64 / (hi + 1 - lo) as f64
    };
    let leaf = n + 1; // the new node's index; its parent is leaf / 2
    let insert = beyond(leaf / 2) + beyond(leaf);
    let rest = n - 1; // heap size during the sift-down
    let mut delete = frac(0, n) + beyond(n);
    if rest > 0 {
        let depth = 63 - rest.leading_zeros(); // floor(log2(rest))
        for d in 0..depth {
            delete += 2.0 * frac(d + 1, rest) + frac(d, rest);
        }
        delete += frac(depth, rest);
    }
    (insert, delete)
}

/// [`offchip_per_op`] summed for one insert and one delete, averaged over a normal heap-size
/// distribution (the per-core heap of eq 13).
pub fn offchip_per_reschedule(heap: &HeapSize, locked_nodes: f64) -> f64 {
    let points = 41;
    let (mut sum, mut wsum) = (0.0, 0.0);
    for j in 0..points {
        let z = -4.0 + 8.0 * j as f64 / (points - 1) as f64;
        let w = (-0.5 * z * z).exp();
        let h = (heap.mean + z * heap.sd).max(1.0);
        let (i, d) = offchip_per_op(h, locked_nodes);
        sum += w * (i + d);
        wsum += w;
    }
    sum / wsum
}

pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.38357751867269e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] =
        [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let pl = 0.02425;
    if p < pl {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - pl {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -normal_quantile(1.0 - p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Constant 100-byte packets, gain 50 bytes per arrival, alpha = cap = 300: the level goes
    /// 300 -> min(350, 300) - 100 = 200 -> 150 -> 100 -> 50 -> 0 -> -50: negative at arrival 6.
    #[test]
    fn deterministic_walk() {
        let q = QueueModel {
            sizes: SizeRuns::table(&[(100, 1.0)]),
            t_int_s: 0.5,
            bw_bytes_per_s: 100.0,
            gaps: Gaps::Constant,
            alpha_bytes: 300.0,
            cap_bytes: 300.0,
            max_steps: 1000,
        };
        let r = solve_queue(&q);
        assert!((r.mean_n - 6.0).abs() < 1e-9, "{r:?}");
        // R = 6 x 0.5 / (3 + 300 / 100) = 0.5; M = 1 / 6
        assert!((r.mean_r - 0.5).abs() < 1e-12);
        assert!((r.reschedules_per_s - 1.0 / 6.0).abs() < 1e-12);
        // The last packet leaves -50: U = (300 + 50) / 100 = 3.5 s; renewal Y = 3.5 / (3 + 3.5).
        assert!((r.mean_overshoot_level + 50.0).abs() < 1e-9);
        assert!((r.renewal_y - 3.5 / 6.5).abs() < 1e-12);
        assert_eq!(r.truncated, 0.0);
    }

    /// Against a Monte Carlo of the same recursion (uniform sizes, fractional gain).
    #[test]
    fn matches_monte_carlo() {
        use rand::{Rng, SeedableRng};
        let q = QueueModel {
            sizes: SizeRuns::uniform(40, 1500),
            t_int_s: 1e-3,
            bw_bytes_per_s: 770.0 / 1.28 / 1e-3, // overload 1.28
            gaps: Gaps::Constant,
            alpha_bytes: 3000.0,
            cap_bytes: 3000.0,
            max_steps: 100_000,
        };
        let r = solve_queue(&q);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let gain = q.bw_bytes_per_s * q.t_int_s;
        let (mut sum_n, trials) = (0.0, 200_000);
        for _ in 0..trials {
            let (mut tb, mut n) = (3000.0f64, 0);
            loop {
                n += 1;
                tb = (tb + gain).min(3000.0) - rng.random_range(40..=1500) as f64;
                if tb < 0.0 {
                    break;
                }
            }
            sum_n += n as f64;
        }
        let mc = sum_n / trials as f64;
        assert!((r.mean_n / mc - 1.0).abs() < 0.01, "DP {} vs MC {mc}", r.mean_n);
    }

    /// Exponential gaps: against a Monte Carlo with exponential gains (overload 1.29, IMIX-like
    /// table sizes), E(N) and the overshoot level.
    #[test]
    fn exponential_gaps_match_monte_carlo() {
        use rand::{Rng, SeedableRng};
        use rand_distr::{Distribution, Exp};
        let table = [(40u32, 7.0), (576, 4.0), (1500, 1.0)];
        let q = QueueModel {
            sizes: SizeRuns::table(&table),
            t_int_s: 1e-3,
            bw_bytes_per_s: 340.33 / 1.29 / 1e-3,
            gaps: Gaps::Exponential,
            alpha_bytes: 3000.0,
            cap_bytes: 3000.0,
            max_steps: 100_000,
        };
        let r = solve_queue(&q);
        assert!(r.truncated < 1e-9);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let exp = Exp::new(1.0 / (q.bw_bytes_per_s * q.t_int_s)).unwrap();
        let (mut sum_n, mut sum_lvl, trials) = (0.0, 0.0, 200_000);
        for _ in 0..trials {
            let (mut tb, mut n) = (3000.0f64, 0);
            loop {
                n += 1;
                let u = rng.random_range(0..12);
                let size = if u < 7 {
                    40.0
                } else if u < 11 {
                    576.0
                } else {
                    1500.0
                };
                tb = (tb + exp.sample(&mut rng)).min(3000.0) - size;
                if tb < 0.0 {
                    break;
                }
            }
            sum_n += n as f64;
            sum_lvl += tb;
        }
        let (mc_n, mc_lvl) = (sum_n / trials as f64, sum_lvl / trials as f64);
        assert!((r.mean_n / mc_n - 1.0).abs() < 0.01, "DP {} vs MC {mc_n}", r.mean_n);
        assert!((r.mean_overshoot_level / mc_lvl - 1.0).abs() < 0.02, "DP {} vs MC {mc_lvl}", r.mean_overshoot_level);
        // Exponential gaps make N more variable than constant ones, so the bucket empties sooner.
        let c = solve_queue(&QueueModel { gaps: Gaps::Constant, ..q });
        assert!(r.mean_n < c.mean_n, "exponential {} constant {}", r.mean_n, c.mean_n);
    }

    /// Off-chip accesses per operation: none while the heap fits the locked region; beyond it,
    /// an insert costs 2 and a delete 3 per off-chip level plus the last-node read.
    #[test]
    fn offchip_per_op_counts_levels_beyond_the_lock() {
        assert_eq!(offchip_per_op(100.0, 256.0), (0.0, 0.0));
        // 1023 nodes, 256 locked (depths 0-7 on chip): the sift-down over 1022 nodes reaches
        // depth 9; reads at depths 8, 9 (2 each) + writes at depth 8 and 9 (the final one),
        // + the last-node read (index 1023).
        let (i, d) = offchip_per_op(1023.0, 256.0);
        assert_eq!(i, 2.0);
        assert!((d - 7.0).abs() < 1e-9, "{d}");
        // A partly locked depth counts its off-chip fraction.
        let (_, d2) = offchip_per_op(1023.0, 384.0);
        assert!(d2 < d && d2 > d - 2.0, "{d2}");
    }

    #[test]
    fn normal_quantiles() {
        assert!((normal_quantile(0.5)).abs() < 1e-9);
        assert!((normal_quantile(0.999) - 3.090232306).abs() < 1e-6);
        assert!((normal_quantile(0.001) + 3.090232306).abs() < 1e-6);
    }
}
