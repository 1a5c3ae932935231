//! `live.io` and `live.rx_wait`: the sockets npqos live forwards on (docs/live.md, "AF_XDP").

use crate::scenario::{Problem, Reader};
use npqos_core::Duration;

/// The sockets `npqos live` forwards on (`live.io`; docs/live.md, "AF_XDP").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Io {
    /// AF_PACKET with TPACKET_V3 rings: any interface, any MTU, beside the kernel's stack.
    Ring,
    /// AF_XDP sockets fed by an XDP program on each interface it receives on (it takes every
    /// frame from the kernel's stack), letting frames gather on a receive ring after the first
    /// as `rx_wait` says (a packet ring's block waits up to 1 ms).
    Xdp { rx_wait: RxWait },
}

/// How long an AF_XDP thread woken by a first frame waits for more (`live.rx_wait`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxWait {
    /// Up to [`RxWait::AUTO_HOLD`] while the thread is busy (it took at least
    /// [`RxWait::AUTO_FROM`] frames per second over the last sample interval), none otherwise:
    /// a NIC's adaptive interrupt moderation, batching under load and the latency of taking
    /// each frame as it comes when frames come slowly.
    Auto,
    /// Always this long (0: never).
    Fixed(Duration),
}

impl RxWait {
    /// The hold of `"auto"` while busy: a packet ring's block timeout.
    pub const AUTO_HOLD: Duration = Duration::from_millis(1);
    /// Frames per second of one thread from which `"auto"` holds.
    pub const AUTO_FROM: u64 = 50_000;
}

/// `live.io` and `live.rx_wait` (only with AF_XDP; `"auto"` unless set).
pub(crate) fn read(l: &mut Reader<'_>, probs: &mut Vec<Problem>) -> Io {
    let rx_wait = match l.value("rx_wait") {
        None => None,
        Some(toml::Value::String(s)) if s == "auto" => {
            l.consume("rx_wait");
            Some(RxWait::Auto)
        }
        Some(_) => Some(RxWait::Fixed(l.duration("rx_wait", Duration::ZERO, probs))),
    };
    let io = match l.choice("io", "ring", &["ring", "xdp"], probs).as_str() {
        "xdp" => Io::Xdp { rx_wait: rx_wait.unwrap_or(RxWait::Auto) },
        _ => Io::Ring,
    };
    if rx_wait.is_some() && io == Io::Ring {
        let value = l.value("rx_wait").map(crate::scenario::show);
        let message = "expected no rx_wait with io = \"ring\" (a packet ring's block waits 1 ms)".into();
        probs.push(Problem { key: "live.rx_wait".into(), value, message });
    }
    io
}

/// `io` (and its `rx_wait`) into a resolved `[live]` table.
pub(crate) fn insert(io: Io, l: &mut toml::Table) {
    l.insert("io".into(), if io == Io::Ring { "ring" } else { "xdp" }.into());
    match io {
        Io::Xdp { rx_wait: RxWait::Auto } => l.insert("rx_wait".into(), "auto".into()),
        Io::Xdp { rx_wait: RxWait::Fixed(d) } => l.insert("rx_wait".into(), d.to_string().into()),
        Io::Ring => None,
    };
}
