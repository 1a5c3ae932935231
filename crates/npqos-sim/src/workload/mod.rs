//! Synthetic workload generators: packet sizes, inter-arrival times, per-queue input rate from
//! an overload factor, and flow populations.
//!
//! Every generator is a plain value plus an injected RNG (`&mut impl Rng`); none keeps global
//! state, so one RNG stream per component (see [`crate::rng`]) makes the whole workload
//! reproducible.

pub mod flows;

use crate::rng::Exp1Fast;
use npqos_core::{Duration, Rate};
use rand::Rng;
use rand_distr::{weighted::WeightedAliasIndex, Distribution, Exp, Pareto};

/// kim Table I: the IMIX packet-size distribution as (size in bytes, ratio in tenths of a
/// percent). The ratios sum to 1000 (100.0 %). Source: `kim` Table I (after Agilent 2007).
pub const KIM_IMIX: [(u32, u32); 11] = [
    (28, 12),
    (40, 355),
    (44, 20),
    (48, 20),
    (52, 35),
    (552, 8),
    (576, 115),
    (628, 10),
    (770, 295),
    (1420, 30),
    (1500, 100),
];

/// A packet-size distribution (bytes on the wire).
#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    /// Every packet has this size.
    Constant(u32),
    /// Uniform over the integers `min..=max`.
    Uniform { min: u32, max: u32 },
    /// A discrete distribution: sizes with integer weights (the IMIX table, or a histogram
    /// measured from a trace).
    Empirical(Empirical),
}

/// A discrete size distribution sampled by binary search over cumulative integer weights
/// (exact: no floating-point rounding in the probabilities). When the weights add up to at most
/// [`Empirical::TABLE_MAX`] (kim's IMIX: 1000), a table gives each unit of weight its entry, so
/// a draw is one load instead of a search (same draws, same sizes).
#[derive(Clone, Debug, PartialEq)]
pub struct Empirical {
    sizes: Vec<u32>,
    cumulative: Vec<u64>,
    /// Entry index per unit of weight (empty when the total or the entries are too many).
    by_unit: Vec<u8>,
}

impl Empirical {
    /// `None` if the table is empty or all weights are zero.
    pub fn new(table: impl IntoIterator<Item = (u32, u64)>) -> Option<Self> {
        let mut sizes = Vec::new();
        let mut cumulative = Vec::new();
        let mut acc = 0u64;
        for (s, w) in table {
            if w == 0 {
                continue;
            }
            acc = acc.checked_add(w)?;
            sizes.push(s);
            cumulative.push(acc);
        }
        if acc == 0 {
            return None;
        }
        let mut by_unit = Vec::new();
        if acc <= Self::TABLE_MAX && sizes.len() <= 256 {
            let mut from = 0;
            for (i, &c) in cumulative.iter().enumerate() {
                by_unit.extend(std::iter::repeat_n(i as u8, (c - from) as usize));
                from = c;
            }
        }
        Some(Empirical { sizes, cumulative, by_unit })
    }
    /// The largest total weight sampled through a table (4 KiB of it).
    pub const TABLE_MAX: u64 = 4096;
    /// Entry `i` such that `cumulative[i - 1] <= u < cumulative[i]` (`u` below the total).
    #[inline(always)]
    fn entry(&self, u: u64) -> usize {
        match self.by_unit.get(u as usize) {
            Some(&i) => i as usize,
            None => self.cumulative.partition_point(|&c| c <= u),
        }
    }
    pub fn total_weight(&self) -> u64 {
        *self.cumulative.last().expect("non-empty")
    }
    /// (size, weight) pairs.
    pub fn table(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let mut prev = 0;
        self.sizes.iter().zip(&self.cumulative).map(move |(&s, &c)| {
            let w = c - prev;
            prev = c;
            (s, w)
        })
    }
}

impl SizeDist {
    /// The distribution as runs of equally likely sizes, the input of kim's stochastic model.
    pub fn to_runs(&self) -> npqos_core::model::kim::SizeRuns {
        use npqos_core::model::kim::SizeRuns;
        match self {
            SizeDist::Constant(s) => SizeRuns::table(&[(*s, 1.0)]),
            SizeDist::Uniform { min, max } => SizeRuns::uniform(*min, *max),
            SizeDist::Empirical(e) => SizeRuns::table(&e.table().map(|(s, w)| (s, w as f64)).collect::<Vec<_>>()),
        }
    }

    /// The IMIX of kim Table I.
    pub fn kim_imix() -> Self {
        SizeDist::Empirical(Empirical::new(KIM_IMIX.iter().map(|&(s, w)| (s, w as u64))).expect("table is non-empty"))
    }

    /// The exact mean in bytes.
    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Constant(s) => *s as f64,
            SizeDist::Uniform { min, max } => (*min as f64 + *max as f64) / 2.0,
            SizeDist::Empirical(e) => {
                let tot = e.total_weight() as f64;
                e.table().map(|(s, w)| s as f64 * w as f64).sum::<f64>() / tot
            }
        }
    }
    /// The exact second moment E[S^2] in bytes^2 (for M/G/1 checks).
    pub fn second_moment(&self) -> f64 {
        match self {
            SizeDist::Constant(s) => (*s as f64).powi(2),
            SizeDist::Uniform { min, max } => {
                let (a, b) = (*min as f64, *max as f64);
                let n = b - a + 1.0;
                // discrete uniform: Var = (n^2 - 1) / 12
                let m = (a + b) / 2.0;
                m * m + (n * n - 1.0) / 12.0
            }
            SizeDist::Empirical(e) => {
                let tot = e.total_weight() as f64;
                e.table().map(|(s, w)| (s as f64).powi(2) * w as f64).sum::<f64>() / tot
            }
        }
    }
    pub fn min(&self) -> u32 {
        match self {
            SizeDist::Constant(s) => *s,
            SizeDist::Uniform { min, .. } => *min,
            SizeDist::Empirical(e) => *e.sizes.iter().min().expect("non-empty"),
        }
    }
    pub fn max(&self) -> u32 {
        match self {
            SizeDist::Constant(s) => *s,
            SizeDist::Uniform { max, .. } => *max,
            SizeDist::Empirical(e) => *e.sizes.iter().max().expect("non-empty"),
        }
    }

    /// A packet size. Inlined where it is called, as [`Arrivals::next_gap`] is.
    #[inline(always)]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        match self {
            SizeDist::Constant(s) => *s,
            SizeDist::Uniform { min, max } => rng.random_range(*min..=*max),
            SizeDist::Empirical(e) => {
                // rand's `random_range(0..total)`, inlined (the total is at least 1).
                let u = crate::rng::range_u64(rng, 0, e.total_weight() - 1);
                e.sizes[e.entry(u)]
            }
        }
    }
}

/// The empirical size distribution of captures: the exact histogram of the wire lengths of
/// their IP packets (non-IP frames are left out). An error if the files hold no IP packet.
pub fn empirical_sizes_from_trace(files: &[std::path::PathBuf]) -> Result<SizeDist, crate::trace::TraceError> {
    let mut hist: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    let mut m = crate::trace::Merge::open(files, false)?;
    while let Some(p) = m.next()? {
        if p.flow.is_ok() && p.wire_len > 0 {
            *hist.entry(p.wire_len).or_default() += 1;
        }
    }
    Empirical::new(hist).map(SizeDist::Empirical).ok_or_else(|| crate::trace::TraceError::Format {
        path: files.first().cloned().unwrap_or_default(),
        offset: 0,
        what: "no IP packets to take packet sizes from".into(),
    })
}

/// kim eq 16 solved for the inter-packet delay: the mean gap between packets that makes a queue
/// whose scheduling bandwidth is `rate` see `overload` = input rate / output rate (eq 15),
/// given the mean packet size in bytes. `None` for a non-positive overload or zero rate.
///
/// `overload = mean_size * 8 / (mean_gap * rate)`  (kim eq 16)
pub fn mean_gap_for_overload(mean_size_bytes: f64, rate: Rate, overload: f64) -> Option<Duration> {
    if overload.is_nan() || overload <= 0.0 || rate.is_zero() {
        return None;
    }
    Duration::try_from_secs_f64(mean_size_bytes * 8.0 / (overload * rate.bits_per_sec() as f64))
}

/// kim eq 16: the overload factor a queue of scheduling bandwidth `rate` sees from packets of
/// mean size `mean_size_bytes` arriving every `mean_gap` on average.
pub fn overload_factor(mean_size_bytes: f64, mean_gap: Duration, rate: Rate) -> f64 {
    mean_size_bytes * 8.0 / (mean_gap.as_secs_f64() * rate.bits_per_sec() as f64)
}

/// An inter-arrival law. `mean` is the long-run mean gap between packets.
#[derive(Clone, Debug, PartialEq)]
pub enum GapDist {
    Constant,
    Exponential,
    /// Bursty ON/OFF source: ON and OFF period lengths are Pareto with shape `shape` (> 1) and
    /// the given means; during ON, gaps are exponential with the mean that makes the long-run
    /// mean gap equal `mean`; during OFF nothing is sent.
    OnOff {
        on_mean: Duration,
        off_mean: Duration,
        shape: f64,
    },
}

/// A stateful arrival process for one source.
#[derive(Clone, Debug)]
pub struct Arrivals {
    kind: ArrivalKind,
}

#[derive(Clone, Debug)]
enum ArrivalKind {
    Constant(u64),
    /// rand_distr's exponential, and the same draws through [`Exp1Fast`] with `Exp`'s scale
    /// (`1 / lambda`, as `Exp::new` computes it).
    Exponential {
        exp: Exp<f64>,
        fast: Option<(Exp1Fast, f64)>,
    },
    OnOff {
        gap: Exp<f64>,
        on: Pareto<f64>,
        off: Pareto<f64>,
        on_left_ns: f64,
    },
}

/// Why an arrival process could not be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ArrivalError {
    #[error("mean inter-arrival time must be positive")]
    ZeroMean,
    #[error("Pareto shape must be greater than 1 (finite mean), got {0}")]
    BadShape(f64),
    #[error("ON and OFF mean periods must be positive")]
    ZeroPeriod,
}

impl Arrivals {
    /// Whether the process keeps no state between gaps (constant and exponential), so one
    /// instance can serve every queue.
    pub fn is_stateless(&self) -> bool {
        !matches!(self.kind, ArrivalKind::OnOff { .. })
    }

    pub fn new(dist: &GapDist, mean: Duration) -> Result<Self, ArrivalError> {
        if mean.is_zero() {
            return Err(ArrivalError::ZeroMean);
        }
        let m = mean.as_nanos() as f64;
        let kind = match dist {
            GapDist::Constant => ArrivalKind::Constant(mean.as_nanos()),
            GapDist::Exponential => {
                let lambda = 1.0 / m;
                ArrivalKind::Exponential {
                    exp: Exp::new(lambda).expect("positive"),
                    fast: Exp1Fast::new().map(|f| (f, 1.0 / lambda)),
                }
            }
            GapDist::OnOff { on_mean, off_mean, shape } => {
                if shape.is_nan() || *shape <= 1.0 || !shape.is_finite() {
                    return Err(ArrivalError::BadShape(*shape));
                }
                if on_mean.is_zero() || off_mean.is_zero() {
                    return Err(ArrivalError::ZeroPeriod);
                }
                let (on, off) = (on_mean.as_nanos() as f64, off_mean.as_nanos() as f64);
                let on_gap = m * on / (on + off);
                let pareto = |mean: f64| Pareto::new(mean * (shape - 1.0) / shape, *shape).expect("valid");
                ArrivalKind::OnOff {
                    gap: Exp::new(1.0 / on_gap).expect("positive"),
                    on: pareto(on),
                    off: pareto(off),
                    on_left_ns: 0.0,
                }
            }
        };
        Ok(Arrivals { kind })
    }

    /// The gap to the next packet, in whole nanoseconds (rounded to nearest, at least 0).
    /// Inlined where it is called: an exponential gap is a handful of instructions
    /// ([`Exp1Fast`]), which a call's entry and exit would double.
    #[inline(always)]
    pub fn next_gap<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Duration {
        match &mut self.kind {
            ArrivalKind::Constant(ns) => Duration::from_nanos(*ns),
            ArrivalKind::Exponential { exp, fast } => Duration::from_nanos(round_ns(match fast {
                Some((f, scale)) => f.sample(rng) * *scale,
                None => exp.sample(rng),
            })),
            ArrivalKind::OnOff { .. } => self.on_off_gap(rng),
        }
    }

    #[inline(never)]
    fn on_off_gap<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Duration {
        let ArrivalKind::OnOff { gap, on, off, on_left_ns } = &mut self.kind else { unreachable!("an on-off process") };
        // Gap drawn inside the current ON period; if it overruns the period, the rest of the
        // period is lost, an OFF period follows and a new ON period starts.
        let mut total = 0.0;
        loop {
            let g = gap.sample(rng);
            if g <= *on_left_ns {
                *on_left_ns -= g;
                total += g;
                return Duration::from_nanos(round_ns(total));
            }
            total += *on_left_ns + off.sample(rng);
            *on_left_ns = on.sample(rng);
        }
    }
}

/// `x.round() as u64` (half away from zero, saturating, NaN as 0) without the C library's
/// `round`: the portable x86-64 target has no rounding instruction, and kim's 1e6 row spent 1.5%
/// of its time in that call. The truncation `x as u64` is one instruction, and for `x` below
/// 2^53 the fraction `x - trunc(x)` is exact, so the comparison with 0.5 decides as `round`
/// does; above 2^52 every double is an integer and the fraction is 0.
#[inline(always)]
pub fn round_ns(x: f64) -> u64 {
    // Below 2^52 and not negative (every gap): a signed truncation and conversion, one
    // instruction each; Rust's unsigned ones take a dozen.
    if (0.0..4_503_599_627_370_496.0).contains(&x) {
        let t = x as i64;
        return if x - t as f64 >= 0.5 { t as u64 + 1 } else { t as u64 };
    }
    let t = x as u64;
    if x - t as f64 >= 0.5 {
        t.saturating_add(1)
    } else {
        t
    }
}

/// How traffic is spread over the flows of a population.
#[derive(Clone, Debug, PartialEq)]
pub enum FlowWeights {
    Equal,
    /// Flow `i` has weight `ratio^i` (0 < ratio <= 1): a few heavy flows and a long tail.
    ExpDecay {
        ratio: f64,
    },
}

/// A population of `n` concurrent flow slots. Each packet picks a slot by weight; the slot's
/// current flow sends it. Each flow lives for a heavy-tailed number of packets (Pareto with
/// `shape`, at least `min_packets`), after which the slot starts a fresh flow with a new id.
/// This gives both a weighted mix and flow churn, like real traces.
#[derive(Clone, Debug)]
pub struct FlowPopulation {
    pick: WeightedAliasIndex<f64>,
    size: Option<Pareto<f64>>,
    slot_flow: Vec<u64>,
    slot_left: Vec<u64>,
    next_id: u64,
    /// Flows that have sent a packet so far.
    started: u64,
    /// Flows that never end: whether each slot's flow has sent a packet.
    used: Vec<bool>,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PopulationError {
    #[error("a flow population needs at least one flow")]
    NoFlows,
    #[error("exponential decay ratio must be in (0, 1], got {0}")]
    BadRatio(f64),
    #[error("flow-size Pareto shape must be > 0 and min_packets >= 1")]
    BadSize,
}

impl FlowPopulation {
    /// `sizes`: `None` for flows that never end, or `Some((shape, min_packets))`.
    pub fn new(n: usize, weights: &FlowWeights, sizes: Option<(f64, u64)>) -> Result<Self, PopulationError> {
        if n == 0 {
            return Err(PopulationError::NoFlows);
        }
        let w: Vec<f64> = match weights {
            FlowWeights::Equal => vec![1.0; n],
            FlowWeights::ExpDecay { ratio } => {
                if !(*ratio > 0.0 && *ratio <= 1.0) {
                    return Err(PopulationError::BadRatio(*ratio));
                }
                // Clamp to a floor so that far-tail flows keep a representable weight.
                (0..n).map(|i| ratio.powi(i as i32).max(1e-300)).collect()
            }
        };
        let size = match sizes {
            None => None,
            Some((shape, min)) if shape > 0.0 && shape.is_finite() && min >= 1 => {
                Some(Pareto::new(min as f64, shape).map_err(|_| PopulationError::BadSize)?)
            }
            Some(_) => return Err(PopulationError::BadSize),
        };
        Ok(FlowPopulation {
            pick: WeightedAliasIndex::new(w).map_err(|_| PopulationError::BadRatio(0.0))?,
            size,
            slot_flow: if sizes.is_some() { vec![UNSTARTED; n] } else { (0..n as u64).collect() },
            slot_left: vec![0; n],
            next_id: n as u64,
            started: 0,
            used: if sizes.is_some() { Vec::new() } else { vec![false; n] },
        })
    }

    /// The flow id of the next packet. Slot `i`'s first flow has id `i`; later flows get ids
    /// from `n` upwards in the order they start.
    pub fn next_flow<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        let s = self.pick.sample(rng);
        if let Some(p) = &self.size {
            if self.slot_left[s] == 0 {
                self.slot_flow[s] = if self.slot_flow[s] == UNSTARTED {
                    s as u64
                } else {
                    self.next_id += 1;
                    self.next_id - 1
                };
                self.slot_left[s] = (p.sample(rng).floor().min(1e18) as u64).max(1);
                self.started += 1;
            }
            self.slot_left[s] -= 1;
        } else if !self.used[s] {
            self.used[s] = true;
            self.started += 1;
        }
        self.slot_flow[s]
    }

    /// Flows that have sent at least one packet.
    pub fn started(&self) -> u64 {
        self.started
    }
}

const UNSTARTED: u64 = u64::MAX;

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn imix_table_sums_to_100_percent_and_sampling_matches() {
        assert_eq!(KIM_IMIX.iter().map(|x| x.1).sum::<u32>(), 1000);
        let d = SizeDist::kim_imix();
        assert!((d.mean() - 514.882).abs() < 1e-9, "mean {}", d.mean());
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let n = 1_000_000;
        let mut count40 = 0;
        let mut sum = 0u64;
        for _ in 0..n {
            let s = d.sample(&mut rng);
            sum += s as u64;
            count40 += (s == 40) as u32;
        }
        let frac40 = count40 as f64 / n as f64;
        assert!((frac40 - 0.355).abs() < 0.002, "{frac40}");
        assert!((sum as f64 / n as f64 - 514.882).abs() < 2.0);
    }

    #[test]
    fn uniform_moments() {
        let d = SizeDist::Uniform { min: 40, max: 1500 };
        assert_eq!(d.mean(), 770.0);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let n = 400_000;
        let m2: f64 = (0..n).map(|_| (d.sample(&mut rng) as f64).powi(2)).sum::<f64>() / n as f64;
        assert!((m2 / d.second_moment() - 1.0).abs() < 0.01);
    }

    #[test]
    fn overload_round_trips_and_matches_kim_example() {
        // kim section 5: 500 B mean, 1 ms mean gap, 1 Mbps -> overload 4.
        let o = overload_factor(500.0, Duration::from_millis(1), Rate::from_bits_per_sec(1_000_000));
        assert!((o - 4.0).abs() < 1e-12);
        let g = mean_gap_for_overload(500.0, Rate::from_bits_per_sec(1_000_000), 4.0).unwrap();
        assert_eq!(g, Duration::from_millis(1));
        assert_eq!(mean_gap_for_overload(500.0, Rate::from_bits_per_sec(1), 0.0), None);
    }

    #[test]
    fn arrival_means_are_right() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mean = Duration::from_micros(10);
        for dist in [
            GapDist::Constant,
            GapDist::Exponential,
            GapDist::OnOff { on_mean: Duration::from_millis(1), off_mean: Duration::from_millis(1), shape: 2.5 },
        ] {
            let mut a = Arrivals::new(&dist, mean).unwrap();
            let n = 2_000_000u64;
            let total: u64 = (0..n).map(|_| a.next_gap(&mut rng).as_nanos()).sum();
            let got = total as f64 / n as f64;
            assert!((got / 10_000.0 - 1.0).abs() < 0.05, "{dist:?}: mean gap {got} ns");
        }
        assert_eq!(
            Arrivals::new(&GapDist::OnOff { on_mean: Duration::SECOND, off_mean: Duration::SECOND, shape: 1.0 }, mean)
                .err(),
            Some(ArrivalError::BadShape(1.0))
        );
    }

    #[test]
    fn flow_population_weights_and_churn() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut p = FlowPopulation::new(10, &FlowWeights::ExpDecay { ratio: 0.5 }, None).unwrap();
        let mut c = [0u32; 10];
        for _ in 0..100_000 {
            c[p.next_flow(&mut rng) as usize] += 1;
        }
        assert!(c[0] > c[1] && c[1] > c[2], "{c:?}");
        assert!((c[0] as f64 / c[1] as f64 - 2.0).abs() < 0.1);
        let mut p = FlowPopulation::new(4, &FlowWeights::Equal, Some((1.2, 1))).unwrap();
        let ids: std::collections::HashSet<u64> = (0..10_000).map(|_| p.next_flow(&mut rng)).collect();
        assert!(ids.len() > 100, "flows end and new ones start: {} distinct", ids.len());
    }

    #[test]
    fn the_table_picks_the_entry_the_search_picks_for_every_unit_of_weight() {
        let imix = Empirical::new(KIM_IMIX.iter().map(|&(s, w)| (s, w as u64))).unwrap();
        let zeros = Empirical::new([(40, 3), (41, 0), (1500, 1), (9000, 0), (64, 2)]).unwrap();
        let big = Empirical::new([(40, 4000), (1500, 97)]).unwrap();
        assert!(!imix.by_unit.is_empty() && !zeros.by_unit.is_empty(), "small totals use the table");
        assert!(big.by_unit.is_empty(), "a total above TABLE_MAX searches");
        for e in [&imix, &zeros, &big] {
            for u in 0..e.total_weight() {
                assert_eq!(e.entry(u), e.cumulative.partition_point(|&c| c <= u), "unit {u}");
            }
        }
    }

    #[test]
    fn round_ns_rounds_as_round_does() {
        let edges = [
            0.0,
            -0.0,
            0.49999999999999994,
            0.5,
            1.5,
            2.5,
            -0.5,
            -3.7,
            4503599627370495.5, // 2^52 - 0.5
            4503599627370496.0,
            9007199254740993.0,
            1.8446744073709552e19,
            1e30,
            f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
        ];
        for x in edges {
            assert_eq!(round_ns(x), x.round() as u64, "{x:e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn round_ns_agrees_with_round(bits in proptest::prelude::any::<u64>(), small in 0.0f64..1e12) {
            let x = f64::from_bits(bits);
            proptest::prop_assert_eq!(round_ns(x), x.round() as u64);
            proptest::prop_assert_eq!(round_ns(small), small.round() as u64);
        }
    }
}
