//! The dqs paper's analysis of the AFM table: Lemma 1, Theorems 1 and 2 (eqs 1-4), and the
//! memory of eq 5, computed exactly; plus the exact expectations the theorems approximate.
//!
//! Under simple uniform hashing, the number of the `l` active flows in one slot is binomial
//! (eq 2). Theorem 1 as printed averages the successful search length over *slots*
//! (`sum_k P_k SL_k`, empty slots counting 0); a search for a uniformly chosen active flow sees
//! its own slot, which holds it plus Binomial(l - 1, 1/M) others
//! ([`successful_search_flow_weighted`]). Theorem 2 bounds the unsuccessful search by the
//! expected height of a random BST (eq 12); [`unsuccessful_search_exact`] uses the exact
//! expected unsuccessful search length of a random BST, `2 (H_{k+1} - 1)`.

/// Harmonic number `H_k`.
pub fn harmonic(k: u64) -> f64 {
    if k < 64 {
        (1..=k).map(|i| 1.0 / i as f64).sum()
    } else {
        let x = k as f64;
        x.ln() + 0.577_215_664_901_532_9 + 1.0 / (2.0 * x) - 1.0 / (12.0 * x * x) + 1.0 / (120.0 * x.powi(4))
    }
}

/// dqs Lemma 1 (eq 1): mean successful search length (nodes compared) in a randomly built BST
/// of `k` nodes. Equal to `2 (1 + 1/k) H_k - 3`.
pub fn sl(k: u64) -> f64 {
    match k {
        0 => 0.0,
        1 => 1.0,
        _ => {
            let kf = k as f64;
            2.0 / kf - 1.0 + 2.0 * (1.0 + 1.0 / kf) * (harmonic(k) - 1.0)
        }
    }
}

/// Exact mean unsuccessful search length (nodes compared) in a randomly built BST of `k` nodes:
/// `2 (H_{k+1} - 1)` (the mean depth of an external node).
pub fn ul(k: u64) -> f64 {
    2.0 * (harmonic(k + 1) - 1.0)
}

/// dqs eq 12 (from Cormen et al.): the bound `log2 C(k + 3, 3) - 1` on the expected height of a
/// random BST of `k` nodes.
pub fn height_bound(k: u64) -> f64 {
    let k = k as f64;
    ((k + 3.0) * (k + 2.0) * (k + 1.0) / 6.0).log2() - 1.0
}

fn ln_factorial(n: u64) -> f64 {
    if n < 32 {
        (2..=n).map(|i| (i as f64).ln()).sum()
    } else {
        // Stirling series; error below 1e-12 for n >= 32.
        let x = n as f64;
        x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x) - 1.0 / (360.0 * x.powi(3))
            + 1.0 / (1260.0 * x.powi(5))
    }
}

/// Sum over `k` of `Binomial(n, p)(k) * f(k)`, skipping terms below 1e-18 of the mass.
fn binomial_expectation(n: u64, p: f64, f: impl Fn(u64) -> f64) -> f64 {
    if n == 0 || p <= 0.0 {
        return f(0);
    }
    if p >= 1.0 {
        return f(n);
    }
    let mean = n as f64 * p;
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    let lo = (mean - 40.0 * sd - 10.0).max(0.0) as u64;
    let hi = ((mean + 40.0 * sd + 10.0) as u64).min(n);
    let (lp, lq, lnf) = (p.ln(), (-p).ln_1p(), ln_factorial(n));
    (lo..=hi)
        .map(|k| {
            let lnp = lnf - ln_factorial(k) - ln_factorial(n - k) + k as f64 * lp + (n - k) as f64 * lq;
            lnp.exp() * f(k)
        })
        .sum()
}

/// dqs eq 2: `P_k`, the probability that `k` of `l` flows hash to a given one of `m` slots.
pub fn p_k(l: u64, m: u64, k: u64) -> f64 {
    if k > l {
        return 0.0;
    }
    let p = 1.0 / m as f64;
    if m == 1 {
        return (k == l) as u8 as f64;
    }
    (ln_factorial(l) - ln_factorial(k) - ln_factorial(l - k) + k as f64 * p.ln() + (l - k) as f64 * (-p).ln_1p()).exp()
}

/// dqs Theorem 1 (eq 3) as printed: `sum_k P_k SL_k` for `l` active flows in `m` slots.
pub fn theorem1(l: u64, m: u64) -> f64 {
    binomial_expectation(l, 1.0 / m as f64, sl)
}

/// Exact mean successful search length for a uniformly chosen one of `l` active flows (random
/// BSTs): its slot holds it and Binomial(l - 1, 1/m) others.
pub fn successful_search_flow_weighted(l: u64, m: u64) -> f64 {
    if l == 0 {
        return 0.0;
    }
    binomial_expectation(l - 1, 1.0 / m as f64, |j| sl(j + 1))
}

/// dqs Theorem 2 (eq 4): the bound on the expected comparisons to identify a new flow when `l`
/// flows are active in `m` slots.
pub fn theorem2(l: u64, m: u64) -> f64 {
    binomial_expectation(l, 1.0 / m as f64, |k| if k == 0 { 0.0 } else { height_bound(k) })
}

/// Exact mean comparisons of the unsuccessful search for a new flow (random BSTs): its slot
/// holds Binomial(l, 1/m) of the `l` active flows.
pub fn unsuccessful_search_exact(l: u64, m: u64) -> f64 {
    binomial_expectation(l, 1.0 / m as f64, ul)
}

fn log2_ceil(x: u64) -> u64 {
    if x <= 1 {
        0
    } else {
        64 - (x - 1).leading_zeros() as u64
    }
}

/// dqs eq 5: bits of memory of the mapping scheme, `W = M + l (3 log2 l + log2 N + B)`, with
/// `m` slots, `l` active flows, `n` physical queues and `b`-bit flow ids. Logarithms are rounded
/// up (a pointer has a whole number of bits); the paper's example (256, 256, 256, 32) gives
/// 16,640 bits, its "16 K bits".
pub fn afm_memory_bits(m: u64, l: u64, n: u64, b: u64) -> u64 {
    m + l * (3 * log2_ceil(l) + log2_ceil(n) + b)
}

/// The brute-force per-flow queue table of dqs section 1: a head and a tail pointer for every
/// in-progress flow, `2 F log2 F` bits (40 Mbit for `F = 2^20`).
pub fn brute_force_bits(flows: u64) -> u64 {
    2 * flows * log2_ceil(flows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lemma1_matches_its_recurrence() {
        // Eq 7: SL_k = 1 + 2/k^2 sum_{i<k} i SL_i.
        for k in 2..200u64 {
            let rec = 1.0 + 2.0 / (k * k) as f64 * (1..k).map(|i| i as f64 * sl(i)).sum::<f64>();
            assert!((rec - sl(k)).abs() < 1e-9, "k={k}: {rec} vs {}", sl(k));
        }
        assert_eq!(sl(2), 1.5);
        assert!((ul(2) - 5.0 / 3.0).abs() < 1e-12);
        // Asymptotic harmonic agrees with the sum at the switch-over.
        let direct: f64 = (1..=100u64).map(|i| 1.0 / i as f64).sum();
        assert!((harmonic(100) - direct).abs() < 1e-12);
    }

    #[test]
    fn random_bsts_agree_with_lemma1_and_ul() {
        // Build random BSTs by inserting a random permutation; average depths.
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let k = 12usize;
        let (mut succ, mut unsucc, trials) = (0.0, 0.0, 20_000);
        for _ in 0..trials {
            let mut keys: Vec<u32> = (0..k as u32).map(|i| 2 * i + 1).collect();
            keys.shuffle(&mut rng);
            let mut t = crate::flowmap::afm::AfmTable::new(1, k, Default::default()).unwrap();
            let fk = |v: u32| crate::flow::FlowKey { src_port: v as u16, ..Default::default() };
            for &v in &keys {
                t.get_or_insert_with(0, fk(v), || 0);
            }
            for v in 0..=(2 * k as u32) {
                match t.find(0, &fk(v)) {
                    crate::flowmap::afm::Find::Found { compares, .. } => succ += compares as f64,
                    crate::flowmap::afm::Find::Vacant(vac) => unsucc += vac.compares as f64,
                }
            }
        }
        let succ = succ / (trials * k) as f64;
        let unsucc = unsucc / (trials * (k + 1)) as f64;
        assert!((succ - sl(k as u64)).abs() < 0.02, "{succ} vs {}", sl(k as u64));
        assert!((unsucc - ul(k as u64)).abs() < 0.02, "{unsucc} vs {}", ul(k as u64));
        assert!(height_bound(k as u64) > unsucc);
    }

    #[test]
    fn binomial_sums_to_one_and_theorems_behave() {
        for (l, m) in [(0u64, 64u64), (10, 64), (300, 64), (300, 1024), (1_000_000, 256)] {
            let total = binomial_expectation(l, 1.0 / m as f64, |_| 1.0);
            assert!((total - 1.0).abs() < 1e-9, "l={l} m={m}: {total}");
        }
        let pk: f64 = (0..=50).map(|k| p_k(50, 8, k)).sum();
        assert!((pk - 1.0).abs() < 1e-10);
        // Per-flow search is longer than the slot average, which counts empty slots as 0.
        assert!(successful_search_flow_weighted(150, 64) > theorem1(150, 64));
        // More slots, shorter searches.
        assert!(theorem1(150, 256) < theorem1(150, 64), "{} vs {}", theorem1(150, 256), theorem1(150, 64));
        assert!(successful_search_flow_weighted(150, 256) < successful_search_flow_weighted(150, 64));
        assert!(unsuccessful_search_exact(150, 256) < theorem2(150, 256));
        // One flow in one slot: a single comparison.
        assert_eq!(successful_search_flow_weighted(1, 64), 1.0);
    }

    #[test]
    fn eq5_reproduces_the_papers_example() {
        assert_eq!(afm_memory_bits(256, 256, 256, 32), 16_640);
        assert_eq!(brute_force_bits(1 << 20), 40 * (1 << 20));
    }
}
