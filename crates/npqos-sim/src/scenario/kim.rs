//! The `[shaper]` table of a `model = "kim"` scenario: the shared bucket keys
//! ([`BucketConfig`], `scenario/shaper.rs`) and kim's own (fill, cores, shards, link mode, cache,
//! what a throttled queue does with its packets).

use super::shaper::{BucketConfig, BucketKeys};
use super::{Problem, Reader, SizeSpec, Traffic};
use npqos_core::shaper::{Conformance, Timer};
use npqos_core::Duration;

/// The `[shaper]` table of a `model = "kim"` scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct ShaperSpec {
    /// `None`: event-driven; `Some(period)`: periodic fill.
    pub fill_period: Option<Duration>,
    pub cores: u32,
    /// alpha, cap, conformance, timer and the adaptive threshold (the keys every shaping file
    /// shares).
    pub bucket: BucketConfig,
    pub queue_while_disabled: bool,
    pub shared_link: bool,
    pub cache: bool,
    /// Independent groups of queues and cores, simulated in parallel (docs/kim.md "Shards").
    pub shards: u32,
}

/// Reads `[shaper]` for `queues` queues fed by `traffic`, recording every problem.
pub(crate) fn read(root: &toml::Table, queues: u32, traffic: &Traffic, probs: &mut Vec<Problem>) -> ShaperSpec {
    if matches!(traffic, Traffic::Trace { .. }) {
        probs.push(Problem {
            key: "traffic.source".into(),
            value: Some("\"trace\"".into()),
            message: "model = \"kim\" needs synthetic traffic (the overload factor sets each queue's input)".into(),
        });
    }
    let mut sh = Reader::new(root, "shaper", probs);
    let fill = sh.choice("fill", "event", &["event", "periodic"], probs);
    let period = sh.duration("fill_period", Duration::from_millis(1), probs);
    if fill == "periodic" && period.is_zero() {
        probs.push(Problem {
            key: "shaper.fill_period".into(),
            value: Some("\"0s\"".into()),
            message: "expected a positive duration".into(),
        });
    }
    if fill != "periodic" && sh.present("fill_period") {
        probs.push(Problem {
            key: "shaper.fill_period".into(),
            value: None,
            message: "only applies to fill = \"periodic\"".into(),
        });
    }
    let cores = sh.int("cores", 100, 1, 65_536, probs) as u32;
    if fill == "periodic" {
        sh.not_applicable(["timer"], "fill = \"periodic\"", probs);
    }
    let keys = BucketKeys { timer: fill == "event", ..BucketKeys::SIMULATED };
    let bucket = BucketConfig::read(&mut sh, keys, probs);
    let wd = sh.choice("while_disabled", "drop", &["drop", "queue"], probs);
    if bucket.conformance == Conformance::WaitForTokens {
        if wd != "queue" {
            probs.push(Problem {
                key: "shaper.conformance".into(),
                value: Some("\"wait-for-tokens\"".into()),
                message: "a packet waiting for tokens waits in its queue: it needs while_disabled = \"queue\"".into(),
            });
        }
        let largest = match traffic {
            Traffic::Synthetic { sizes: SizeSpec::Dist(d), .. } => d.max() as u64,
            _ => 0, // trace sizes: a packet larger than the cap is dropped, as tbf does
        };
        if bucket.cap < largest {
            probs.push(Problem {
                key: "shaper.cap".into(),
                value: Some(format!("\"{}B\"", bucket.cap)),
                message: format!(
                    "expected at least the largest packet ({largest}B): under wait-for-tokens a packet must fit the bucket"
                ),
            });
        }
    }
    let lm = sh.choice("link_mode", "ideal", &["ideal", "shared"], probs);
    let cache = sh.boolean("cache", false, probs);
    let shards = sh.int("shards", 1, 1, 65_536, probs) as u32;
    let bound = if fill == "periodic" { queues.max(1) } else { cores.min(queues.max(1)) };
    if shards > bound {
        probs.push(Problem {
            key: "shaper.shards".into(),
            value: Some(shards.to_string()),
            message: format!("expected at most {bound} (one shard per core and per queue at most)"),
        });
    }
    if shards > 1 && lm == "shared" {
        probs.push(Problem {
            key: "shaper.shards".into(),
            value: Some(shards.to_string()),
            message: "the shared link couples every queue: link_mode = \"shared\" needs shards = 1".into(),
        });
    }
    if bucket.timer == Timer::Wheel && cache {
        probs.push(Problem {
            key: "shaper.cache".into(),
            value: Some("true".into()),
            message: "the cache model follows the heap's array accesses: it needs timer = \"heap\"".into(),
        });
    }
    if fill == "periodic" && (bucket.adaptive.is_some() || cache) {
        probs.push(Problem {
            key: "shaper.fill".into(),
            value: Some("\"periodic\"".into()),
            message: "adaptive and cache apply to the event-driven shaper only".into(),
        });
    }
    sh.finish(probs);
    ShaperSpec {
        fill_period: (fill == "periodic").then_some(period),
        cores: cores.min(queues.max(1)),
        bucket,
        queue_while_disabled: wd == "queue",
        shared_link: lm == "shared",
        cache,
        shards,
    }
}

/// The resolved `[shaper]` (every default filled in).
pub(crate) fn write(sh: &ShaperSpec, root: &mut toml::Table) {
    let mut k = toml::Table::new();
    match sh.fill_period {
        Some(p) => {
            k.insert("fill".into(), "periodic".into());
            k.insert("fill_period".into(), p.to_string().into());
        }
        None => {
            k.insert("fill".into(), "event".into());
        }
    }
    let keys = BucketKeys { timer: sh.fill_period.is_none(), ..BucketKeys::SIMULATED };
    sh.bucket.write(keys, &mut k);
    k.insert("cores".into(), (sh.cores as i64).into());
    k.insert("while_disabled".into(), if sh.queue_while_disabled { "queue" } else { "drop" }.into());
    k.insert("link_mode".into(), if sh.shared_link { "shared" } else { "ideal" }.into());
    k.insert("cache".into(), sh.cache.into());
    k.insert("shards".into(), (sh.shards as i64).into());
    root.insert("shaper".into(), k.into());
}
