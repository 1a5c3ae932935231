//! The dqs flow table's keys (`[table]` of the dqs model and of npqos live): one reader and one
//! writer, one set of defaults (docs/scenarios.md, the dqs model's keys).
//!
//! ```toml
//! slots = 256            # AFM slots M
//! hash = "h3"            # or "foldhash"
//! queues = 65536         # physical queues N
//! blocks = 1048576       # buffer blocks
//! block_size = "64B"
//! quantum = "1536B"      # DRR quantum
//! on_exhausted = "drop"  # or "shared" (one overflow queue)
//! ```

use super::{Problem, Reader};
use crate::units::fmt_size;
use npqos_core::flowmap::{DqsConfig, Exhausted, HashKind};

/// Reads the flow table's keys from `t`: the configuration with hash seed 0 (a run sets its
/// own, [`with_seed`]), everything else at the `Dqs` defaults.
pub(crate) fn read(t: &mut Reader<'_>, probs: &mut Vec<Problem>) -> DqsConfig {
    let slots = t.int("slots", 256, 1, 1 << 24, probs) as u32;
    let hash = t.choice("hash", "h3", &["h3", "foldhash"], probs);
    let queues = t.int("queues", 1 << 16, 1, 1 << 26, probs) as u32;
    let blocks = t.int("blocks", 1 << 20, 1, 1 << 30, probs) as u32;
    let block_size = t.size("block_size", 64, probs);
    let quantum = t.size("quantum", 1536, probs);
    for (k, v, lo, hi) in [("block_size", block_size, 16, 65_536), ("quantum", quantum, 1, 1 << 24)] {
        if !(lo..=hi).contains(&v) {
            probs.push(Problem {
                key: t.path(k),
                value: Some(format!("\"{v}B\"")),
                message: format!("expected a size from {lo}B to {hi}B"),
            });
        }
    }
    let exhausted = t.choice("on_exhausted", "drop", &["drop", "shared"], probs);
    DqsConfig {
        slots,
        hash: if hash == "foldhash" { HashKind::Fast { seed: 0 } } else { HashKind::H3 { seed: 0 } },
        queues,
        blocks,
        block_size: block_size.clamp(16, 65_536) as u32,
        quantum: quantum.clamp(1, 1 << 24) as u32,
        on_exhausted: if exhausted == "shared" { Exhausted::SharedQueue } else { Exhausted::Drop },
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
pub(crate) fn write(cfg: &DqsConfig, t: &mut toml::Table) {
    t.insert("slots".into(), i64::from(cfg.slots).into());
    t.insert("hash".into(), if matches!(cfg.hash, HashKind::Fast { .. }) { "foldhash" } else { "h3" }.into());
    t.insert("queues".into(), i64::from(cfg.queues).into());
    t.insert("blocks".into(), i64::from(cfg.blocks).into());
    t.insert("block_size".into(), fmt_size(u64::from(cfg.block_size)).into());
    t.insert("quantum".into(), fmt_size(u64::from(cfg.quantum)).into());
    let ex = if cfg.on_exhausted == Exhausted::SharedQueue { "shared" } else { "drop" };
    t.insert("on_exhausted".into(), ex.into());
}
