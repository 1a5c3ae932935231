//! The dqs flow table's keys (`[table]` of the dqs model and of npqos live, `[ingress]` of the
//! router): one reader and one writer, one set of defaults (docs/scenarios.md, "Flow table
//! keys").
//!
//! ```toml
//! slots = 256            # AFM slots M (npqos live: the queues', at most 2^20)
//! hash = "h3"            # or "foldhash"
//! queues = 65536         # physical queues N
//! blocks = 1048576       # buffer blocks
//! block_size = "64B"
//! quantum = "1536B"      # DRR quantum
//! on_exhausted = "drop"  # or "shared" (one overflow queue)
//! queue_limit = "32KiB"  # bytes one physical queue may hold (npqos live, router; no default)
//! ```

use super::{Problem, Reader};
use crate::units::fmt_size;
use npqos_core::flowmap::{DqsConfig, Exhausted, HashKind};

/// Which of the keys a file has: the router's services schedule its ingress queues and drop a
/// flow that finds none, so its `[ingress]` has neither `quantum` nor `on_exhausted`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TableKeys {
    /// `quantum` and `on_exhausted`: the table runs its own DRR round.
    pub drr: bool,
    /// `queue_limit`: a per-queue limit, beyond the paper (the dqs model reproduces the
    /// paper's table without it).
    pub queue_limit: bool,
    /// `slots` defaults to `queues` (at most [`SLOTS_FOLLOWING_QUEUES_MAX`]) rather than the
    /// paper's 256: npqos live, a data plane whose active flows are its queues' flows, where
    /// 1e5 active flows in 256 slots make trees of ~390 flows to search per frame.
    pub slots_follow_queues: bool,
}

/// The largest `slots` that follows `queues` by default (8 MiB of slots).
pub const SLOTS_FOLLOWING_QUEUES_MAX: u32 = 1 << 20;

impl TableKeys {
    /// The dqs model's `[table]`.
    pub const DQS: TableKeys = TableKeys { drr: true, queue_limit: false, slots_follow_queues: false };
    /// npqos live's `[table]`.
    pub const LIVE: TableKeys = TableKeys { drr: true, queue_limit: true, slots_follow_queues: true };
    /// The router's `[ingress]` (so that it can run a live configuration: `npqos live
    /// --as-scenario`).
    pub const ROUTER: TableKeys = TableKeys { drr: false, queue_limit: true, slots_follow_queues: false };
}

/// Reads the flow table's keys from `t`: the configuration with hash seed 0 (a run sets its
/// own, [`with_seed`]), everything else at the `Dqs` defaults (`slots` at `queues` with
/// [`TableKeys::slots_follow_queues`]).
pub(crate) fn read(t: &mut Reader<'_>, keys: TableKeys, probs: &mut Vec<Problem>) -> DqsConfig {
    let queues = t.int("queues", 1 << 16, 1, 1 << 26, probs) as u32;
    let slots_default = if keys.slots_follow_queues { queues.min(SLOTS_FOLLOWING_QUEUES_MAX) } else { 256 };
    let slots = t.int("slots", i64::from(slots_default), 1, 1 << 24, probs) as u32;
    let hash = t.choice("hash", "h3", &["h3", "foldhash"], probs);
    let blocks = t.int("blocks", 1 << 20, 1, 1 << 30, probs) as u32;
    let block_size = t.size("block_size", 64, probs);
    let quantum = if keys.drr { t.size("quantum", 1536, probs) } else { 1536 };
    for (k, v, lo, hi) in [("block_size", block_size, 16, 65_536), ("quantum", quantum, 1, 1 << 24)] {
        if !(lo..=hi).contains(&v) {
            probs.push(Problem {
                key: t.path(k),
                value: Some(format!("\"{v}B\"")),
                message: format!("expected a size from {lo}B to {hi}B"),
            });
        }
    }
    let exhausted = if keys.drr { t.choice("on_exhausted", "drop", &["drop", "shared"], probs) } else { "drop".into() };
    let queue_limit = (keys.queue_limit && t.present("queue_limit")).then(|| t.size("queue_limit", 0, probs));
    if queue_limit == Some(0) {
        probs.push(Problem {
            key: t.path("queue_limit"),
            value: Some("\"0B\"".into()),
            message: "expected a positive size (leave it out for no per-queue limit)".into(),
        });
    }
    DqsConfig {
        slots,
        hash: if hash == "foldhash" { HashKind::Fast { seed: 0 } } else { HashKind::H3 { seed: 0 } },
        queues,
        blocks,
        block_size: block_size.clamp(16, 65_536) as u32,
        quantum: quantum.clamp(1, 1 << 24) as u32,
        on_exhausted: if exhausted == "shared" { Exhausted::SharedQueue } else { Exhausted::Drop },
        queue_limit,
        ..Default::default()
    }
}

/// `cfg` with its hash seeded by `seed`.
pub(crate) fn with_seed(cfg: &DqsConfig, seed: u64) -> DqsConfig {
    let hash = match cfg.hash {
        HashKind::Fast { .. } => HashKind::Fast { seed },
        HashKind::H3 { .. } => HashKind::H3 { seed },
    };
    DqsConfig { hash, ..*cfg }
}

/// Writes the keys [`read`] reads into `t`, every default filled in.
pub(crate) fn write(cfg: &DqsConfig, keys: TableKeys, t: &mut toml::Table) {
    t.insert("slots".into(), i64::from(cfg.slots).into());
    t.insert("hash".into(), if matches!(cfg.hash, HashKind::Fast { .. }) { "foldhash" } else { "h3" }.into());
    t.insert("queues".into(), i64::from(cfg.queues).into());
    t.insert("blocks".into(), i64::from(cfg.blocks).into());
    t.insert("block_size".into(), fmt_size(u64::from(cfg.block_size)).into());
    if keys.drr {
        t.insert("quantum".into(), fmt_size(u64::from(cfg.quantum)).into());
        let ex = if cfg.on_exhausted == Exhausted::SharedQueue { "shared" } else { "drop" };
        t.insert("on_exhausted".into(), ex.into());
    }
    if let Some(l) = cfg.queue_limit.filter(|_| keys.queue_limit) {
        t.insert("queue_limit".into(), fmt_size(l).into());
    }
}
