//! The token-bucket settings every shaping configuration shares: kim's `[shaper]`, the router's
//! `[shaping]` and npqos live's `[shaper]`. One reader, one writer, one set of defaults
//! (docs/scenarios.md, "Shaping keys"); each file adds its own keys around them (kim's cores and
//! shards, the router's shaper kind and output queues, live's flow rate).
//!
//! ```toml
//! alpha = "3000B"                # reschedule threshold (kim's alpha_i)
//! cap = "3000B"                  # bucket cap (CBE); default alpha (live: 2 x alpha)
//! conformance = "send-then-pay"  # or "wait-for-tokens" (Linux tbf)
//! timer = "heap"                 # or "wheel" (where the file has it)
//! adaptive = false               # kim eq 14 (where the file has it); then:
//! gamma = 2.0
//! delta_th = 3
//! alpha_min = "1500B"            # default min(alpha, 1500B)
//! interval = "1s"
//! wake_tolerance = "1ms"         # live (1ms) and router (0s): caps >= alpha + rate x this
//! ```

use super::{Problem, Reader};
use crate::units::fmt_size;
use npqos_core::names::Named;
use npqos_core::pipeline::codel::CodelParams;
use npqos_core::pipeline::{FqCodelParams, IngressKind};
use npqos_core::shaper::{Adaptive, Conformance, Timer, MAX_BUCKET_BYTES};
use npqos_core::Duration;

/// kim's reschedule threshold by default, bytes (kim section 5: 3,000 B).
pub const DEFAULT_ALPHA: u64 = 3000;
/// npqos live's `wake_tolerance` by default: a forwarding thread may wake this late without a
/// bucket losing rate (htb's default burst is a timer tick's worth at its rate, 1-4 ms).
pub const DEFAULT_WAKE_TOLERANCE: Duration = Duration::from_nanos(1_000_000);
/// The largest `wake_tolerance` accepted.
const MAX_WAKE_TOLERANCE: Duration = Duration::from_nanos(1_000_000_000);

/// The bucket settings shared by every shaping configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct BucketConfig {
    /// Reschedule threshold alpha, bytes (event-driven shaping).
    pub alpha: u64,
    /// Bucket cap, bytes.
    pub cap: u64,
    pub conformance: Conformance,
    /// Where throttled queues wait (event-driven shaping).
    pub timer: Timer,
    /// kim eq 14, when adaptive.
    pub adaptive: Option<Adaptive>,
    /// tc's `overhead` (bytes added to every packet's length, may be negative) and `mpu` (the
    /// least a packet is charged): rates in wire terms. 0 and 0 where the file has no such keys.
    pub overhead: i64,
    pub mpu: u64,
    /// Each shaped bucket's cap is at least alpha plus its rate for this long, so that a
    /// forwarding thread that wakes up to this late loses no rate (docs/live.md): npqos live's
    /// key (1 ms by default), the router's (0 by default: its clock is never late), none in
    /// kim (zero).
    pub wake_tolerance: Duration,
}

/// Which of the shared keys a file has, and its cap default.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BucketKeys {
    /// `timer`.
    pub timer: bool,
    /// `adaptive` and its keys.
    pub adaptive: bool,
    /// The cap's default in multiples of alpha: 1 (kim's CBE = alpha) everywhere but npqos
    /// live, whose real clock wakes late: with cap = alpha every late nanosecond is lost to the
    /// cap under send-then-pay (docs/live.md), so live's default is 2.
    pub cap_per_alpha: u64,
    /// `overhead` and `mpu` (the router and npqos live; kim's model charges a packet's length).
    pub wire: bool,
    /// `wake_tolerance` and its default (npqos live 1 ms; the router 0, so that a live
    /// configuration's buckets can be simulated: `npqos live --as-scenario`).
    pub wake: Option<Duration>,
}

impl BucketKeys {
    /// kim's `[shaper]` and the router's `[shaping]`: every key, cap = alpha.
    pub(crate) const SIMULATED: BucketKeys =
        BucketKeys { timer: true, adaptive: true, cap_per_alpha: 1, wire: false, wake: None };
    /// npqos live's `[shaper]`: no adaptive threshold, cap = 2 x alpha.
    pub(crate) const LIVE: BucketKeys =
        BucketKeys { timer: true, adaptive: false, cap_per_alpha: 2, wire: true, wake: Some(DEFAULT_WAKE_TOLERANCE) };
}

impl BucketConfig {
    /// Reads the shared keys `keys` names from `r`, recording every problem.
    pub(crate) fn read(r: &mut Reader<'_>, keys: BucketKeys, probs: &mut Vec<Problem>) -> BucketConfig {
        let alpha = r.size("alpha", DEFAULT_ALPHA, probs);
        let cap = r.size("cap", alpha.saturating_mul(keys.cap_per_alpha), probs);
        if alpha > cap {
            probs.push(Problem {
                key: r.path("alpha"),
                value: Some(format!("\"{alpha}B\"")),
                message: format!("expected at most {} ({cap}B)", r.path("cap")),
            });
        }
        if cap == 0 || cap > MAX_BUCKET_BYTES {
            probs.push(Problem {
                key: r.path("cap"),
                value: Some(format!("\"{cap}B\"")),
                message: format!("expected a positive size of at most {MAX_BUCKET_BYTES}B"),
            });
        }
        let conformance = r.named("conformance", Conformance::SendThenPay, probs);
        let timer = if keys.timer { r.named("timer", Timer::Heap, probs) } else { Timer::Heap };
        let adaptive = keys.adaptive && r.boolean("adaptive", false, probs);
        let adaptive = if adaptive {
            let gamma = r.float("gamma", 2.0, probs, |v| v > 1.0 && v <= 1e6, "greater than 1 and at most 1e6");
            let delta_th = r.int("delta_th", 3, 0, u32::MAX as i64, probs) as u32;
            let alpha_min = r.size("alpha_min", alpha.min(1500), probs);
            if alpha_min > alpha {
                probs.push(Problem {
                    key: r.path("alpha_min"),
                    value: Some(format!("\"{alpha_min}B\"")),
                    message: format!("expected at most {} ({alpha}B)", r.path("alpha")),
                });
            }
            let interval = r.positive_duration("interval", Duration::from_secs(1), probs);
            Some(Adaptive { gamma, delta_th, alpha_min_bytes: alpha_min, interval })
        } else {
            // A file without the adaptive threshold leaves these keys unread: unknown keys.
            for k in ADAPTIVE_KEYS.iter().filter(|_| keys.adaptive) {
                r.consume(k);
                if r.present(k) {
                    probs.push(Problem {
                        key: r.path(k),
                        value: None,
                        message: "only applies with adaptive = true".into(),
                    });
                }
            }
            None
        };
        let (overhead, mpu) = match keys.wire {
            true => (r.int("overhead", 0, -1500, 1500, probs), r.size("mpu", 0, probs)),
            false => (0, 0),
        };
        if mpu > 65_535 {
            probs.push(Problem {
                key: r.path("mpu"),
                value: Some(format!("\"{mpu}B\"")),
                message: "expected at most 65535B".into(),
            });
        }
        let wake_tolerance = keys.wake.map_or(Duration::ZERO, |d| r.duration("wake_tolerance", d, probs));
        if wake_tolerance > MAX_WAKE_TOLERANCE {
            probs.push(Problem {
                key: r.path("wake_tolerance"),
                value: Some(format!("\"{wake_tolerance}\"")),
                message: format!("expected at most {MAX_WAKE_TOLERANCE}"),
            });
        }
        BucketConfig { alpha, cap, conformance, timer, adaptive, overhead, mpu, wake_tolerance }
    }

    /// Writes the shared keys `keys` names into `t`, every default filled in.
    pub(crate) fn write(&self, keys: BucketKeys, t: &mut toml::Table) {
        t.insert("alpha".into(), fmt_size(self.alpha).into());
        t.insert("cap".into(), fmt_size(self.cap).into());
        t.insert("conformance".into(), self.conformance.name().into());
        if keys.timer {
            t.insert("timer".into(), self.timer.name().into());
        }
        if keys.wire {
            t.insert("overhead".into(), self.overhead.into());
            t.insert("mpu".into(), fmt_size(self.mpu).into());
        }
        if keys.wake.is_some() {
            t.insert("wake_tolerance".into(), self.wake_tolerance.to_string().into());
        }
        if keys.adaptive {
            t.insert("adaptive".into(), self.adaptive.is_some().into());
            if let Some(a) = self.adaptive {
                t.insert("gamma".into(), a.gamma.into());
                t.insert("delta_th".into(), i64::from(a.delta_th).into());
                t.insert("alpha_min".into(), fmt_size(a.alpha_min_bytes).into());
                t.insert("interval".into(), a.interval.to_string().into());
            }
        }
    }
}

/// The keys of the adaptive threshold (kim eq 14) besides `adaptive` itself.
const ADAPTIVE_KEYS: [&str; 4] = ["gamma", "delta_th", "alpha_min", "interval"];

/// The active queue management keys of a shaping table (the router's `[shaping]`, npqos live's
/// `[shaper]`; docs/codel.md): `aqm = "codel"` turns CoDel (RFC 8289) on over the shaped
/// queues, `codel_target` (5 ms) and `codel_interval` (100 ms) are its two parameters (named
/// apart from `interval`, the adaptive alpha's), `ecn` marks ECN-capable packets instead of
/// dropping them. `None`: `aqm = "none"`, the default (tail drop at the buffer and the queue
/// limits only).
pub(crate) fn read_aqm(
    r: &mut Reader<'_>,
    probs: &mut Vec<Problem>,
) -> Option<npqos_core::pipeline::codel::CodelParams> {
    let kind = r.choice("aqm", "none", &["none", "codel"], probs);
    let target = r.positive_duration("codel_target", Duration::from_millis(5), probs);
    let interval = r.positive_duration("codel_interval", Duration::from_millis(100), probs);
    let ecn = r.boolean("ecn", false, probs);
    if kind == "none" {
        for k in ["codel_target", "codel_interval", "ecn"] {
            if r.present(k) {
                probs.push(Problem {
                    key: r.path(k),
                    value: None,
                    message: "applies to aqm = \"codel\" (aqm is \"none\")".into(),
                });
            }
        }
        return None;
    }
    if target >= interval {
        probs.push(Problem {
            key: r.path("codel_target"),
            value: Some(format!("\"{target}\"")),
            message: format!("expected less than codel_interval ({interval})"),
        });
    }
    Some(npqos_core::pipeline::codel::CodelParams {
        target_ns: target.as_nanos(),
        interval_ns: interval.as_nanos(),
        mtu: npqos_core::pipeline::codel::CodelParams::default().mtu,
        ecn,
    })
}

/// Writes [`read_aqm`]'s keys (`aqm = "none"` alone without CoDel).
pub(crate) fn write_aqm(aqm: Option<&npqos_core::pipeline::codel::CodelParams>, t: &mut toml::Table) {
    let Some(c) = aqm else {
        t.insert("aqm".into(), "none".into());
        return;
    };
    t.insert("aqm".into(), "codel".into());
    t.insert("codel_target".into(), Duration::from_nanos(c.target_ns).to_string().into());
    t.insert("codel_interval".into(), Duration::from_nanos(c.interval_ns).to_string().into());
    t.insert("ecn".into(), c.ecn.into());
}

/// FQ-CoDel's keys of `[ingress]` (docs/codel.md, "fq_codel"): CoDel's target and interval per
/// queue, ECN marking (on, as in Linux), the round's quantum and the overflow's drop batch;
/// each a problem with another ingress kind.
pub(crate) fn read_fq_codel(g: &mut Reader<'_>, kind: IngressKind, probs: &mut Vec<Problem>) -> FqCodelParams {
    let d = FqCodelParams::default();
    let target = g.positive_duration("codel_target", Duration::from_nanos(d.codel.target_ns), probs);
    let interval = g.positive_duration("codel_interval", Duration::from_nanos(d.codel.interval_ns), probs);
    let ecn = g.boolean("ecn", d.codel.ecn, probs);
    let quantum = g.size("quantum", d.quantum as u64, probs);
    let drop_batch = g.int("drop_batch", d.drop_batch as i64, 1, 1 << 20, probs) as u32;
    if kind != IngressKind::FqCodel {
        for k in ["codel_target", "codel_interval", "ecn", "quantum", "drop_batch"] {
            if g.present(k) {
                problem(
                    probs,
                    &g.path(k),
                    None,
                    &format!("applies to ingress.kind = \"fq-codel\" (kind is \"{kind}\")"),
                );
            }
        }
        return d;
    }
    if !(64..=1 << 24).contains(&quantum) {
        problem(probs, &g.path("quantum"), Some(format!("\"{quantum}B\"")), "expected a size from 64B to 16MB");
    }
    if target >= interval {
        problem(
            probs,
            &g.path("codel_target"),
            Some(format!("\"{target}\"")),
            &format!("expected less than codel_interval ({interval})"),
        );
    }
    FqCodelParams {
        codel: CodelParams { target_ns: target.as_nanos(), interval_ns: interval.as_nanos(), ecn, ..d.codel },
        quantum: quantum.clamp(64, 1 << 24) as u32,
        drop_batch,
    }
}

/// Writes [`read_fq_codel`]'s keys.
pub(crate) fn write_fq_codel(f: &FqCodelParams, g: &mut toml::Table) {
    g.insert("codel_target".into(), Duration::from_nanos(f.codel.target_ns).to_string().into());
    g.insert("codel_interval".into(), Duration::from_nanos(f.codel.interval_ns).to_string().into());
    g.insert("ecn".into(), f.codel.ecn.into());
    g.insert("quantum".into(), format!("{}B", f.quantum).into());
    g.insert("drop_batch".into(), (f.drop_batch as i64).into());
}

fn problem(probs: &mut Vec<Problem>, key: &str, value: Option<String>, message: &str) {
    probs.push(Problem { key: key.into(), value, message: message.into() });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::router::scenario::RouterSpec;
    use crate::scenario::testing::{assert_names, parse};

    fn live(shaper: &str) -> Result<crate::live::spec::LiveSpec, String> {
        let text = format!("[live]\ninput = \"a\"\noutput = \"b\"\n[shaper]\nflow_rate = \"10Mbps\"\n{shaper}");
        crate::live::spec::read(&toml::from_str(&text).unwrap(), "live.toml").map_err(|e| e.to_string())
    }

    /// kim, the router and live read the shared keys with the same defaults; live's cap is its
    /// one documented override.
    #[test]
    fn one_set_of_defaults() {
        let expected = BucketConfig {
            alpha: DEFAULT_ALPHA,
            cap: DEFAULT_ALPHA,
            conformance: Conformance::SendThenPay,
            timer: Timer::Heap,
            adaptive: None,
            overhead: 0,
            mpu: 0,
            wake_tolerance: Duration::ZERO,
        };
        assert_eq!(parse("model = \"kim\"\n").unwrap().shaper().unwrap().bucket, expected);
        let router = parse("model = \"router\"\n").unwrap();
        let router = router.spec_as::<RouterSpec>().unwrap();
        assert_eq!(router.bucket, expected);
        assert_eq!(router.params.shaping.cap_bytes, DEFAULT_ALPHA);
        let wake_tolerance = DEFAULT_WAKE_TOLERANCE;
        assert_eq!(live("").unwrap().bucket, BucketConfig { cap: 2 * DEFAULT_ALPHA, wake_tolerance, ..expected });
    }

    /// The same problem gets the same message in every file, under its own key path.
    #[test]
    fn one_set_of_checks() {
        for (text, key) in [
            ("model = \"kim\"\n[shaper]\nalpha = \"4000B\"\ncap = \"3000B\"\n", "shaper.alpha"),
            ("model = \"router\"\n[shaping]\nalpha = \"4000B\"\ncap = \"3000B\"\n", "shaping.alpha"),
        ] {
            let e = parse(text).unwrap_err();
            let cap = key.replace("alpha", "cap");
            assert!(e.contains(&format!("key `{key}` = \"4000B\": expected at most {cap} (3000B)")), "{e}");
        }
        let e = live("alpha = \"4000B\"\ncap = \"3000B\"\n").unwrap_err();
        assert!(e.contains("key `shaper.alpha` = \"4000B\": expected at most shaper.cap (3000B)"), "{e}");
        // The adaptive keys without adaptive = true: refused by kim and the router alike.
        assert_names("model = \"kim\"\n[shaper]\ngamma = 3.0\n", &["shaper.gamma"]);
        assert_names("model = \"router\"\n[shaping]\ngamma = 3.0\n", &["shaping.gamma"]);
        // live has no adaptive threshold: its keys are unknown there.
        let e = live("adaptive = true\n").unwrap_err();
        assert!(e.contains("shaper.adaptive") && e.contains("unknown key"), "{e}");
        // wake_tolerance: live's and the router's (0 there, its clock is never late; a live
        // configuration simulated keeps live's), not kim's; at most 1 s.
        let r = parse("model = \"router\"\n[shaping]\nwake_tolerance = \"1ms\"\n").unwrap();
        assert_eq!(r.spec_as::<RouterSpec>().unwrap().params.shaping.cap_wake_ns, 1_000_000);
        let r = parse("model = \"router\"\n").unwrap();
        assert_eq!(r.spec_as::<RouterSpec>().unwrap().params.shaping.cap_wake_ns, 0);
        assert_names("model = \"kim\"\n[shaper]\nwake_tolerance = \"1ms\"\n", &["shaper.wake_tolerance"]);
        let e = live("wake_tolerance = \"2s\"\n").unwrap_err();
        assert!(e.contains("key `shaper.wake_tolerance` = \"2s\": expected at most 1s"), "{e}");
        assert_eq!(live("wake_tolerance = \"0s\"\n").unwrap().bucket.wake_tolerance, Duration::ZERO);
        // Names come from the core's `Named`: the message lists them.
        let e = parse("model = \"router\"\n[shaping]\nconformance = \"tbf\"\n").unwrap_err();
        assert!(e.contains("expected one of \"send-then-pay\", \"wait-for-tokens\""), "{e}");
    }

    /// The resolved form round-trips, adaptive settings included, in kim and the router.
    #[test]
    fn the_resolved_form_round_trips() {
        crate::scenario::testing::assert_round_trips([
            "model = \"kim\"\n[shaper]\nadaptive = true\ngamma = 3.0\nalpha_min = \"1000B\"\ntimer = \"wheel\"\n"
                .into(),
            "model = \"router\"\n[shaping]\nadaptive = true\ninterval = \"10ms\"\ncap = \"16KB\"\n".into(),
            "model = \"router\"\n[shaping]\nshaper = \"periodic\"\nalpha = \"1500B\"\ncap = \"2000B\"\n".into(),
        ]);
    }
}
