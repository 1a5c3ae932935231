//! Taps on the pipeline's ports (docs/router.md, "Packet captures"): with
//! [`Pipeline::set_taps`], every packet at a tapped port leaves a [`Tapped`] record in a
//! buffer the driver empties after each call ([`Pipeline::tapped`]) and writes where it likes
//! (the router's driver and live's forwarder: pcapng files). The ports: the ingress (every
//! arrival, at its time, classified or not), the egress (every delivered packet, at the start
//! of its transmission, or with the caller's ring as the link when the ring takes it) and the
//! drops (every dropped packet, at its drop, with the reason). The pipeline itself writes
//! nothing and keeps nothing past the call.

use super::*;

/// A tapped port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    Ingress,
    Egress,
    Drops,
}

impl Port {
    pub const ALL: [Port; 3] = [Port::Ingress, Port::Egress, Port::Drops];
    /// Its name in configuration files and file names.
    pub fn name(self) -> &'static str {
        match self {
            Port::Ingress => "ingress",
            Port::Egress => "egress",
            Port::Drops => "drops",
        }
    }
}

/// One packet at a tapped port: when (ns, the pipeline's time), its length, its flow, and at
/// the drops the reason (a name of [`DROPS`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tapped {
    pub port: Port,
    pub t: u64,
    pub len: u32,
    pub key: FlowKey,
    pub reason: Option<&'static str>,
}

/// The taps' state: which ports, the arrival being handled (drops before it has a record;
/// later, a packet's flow is the pipeline's per-slot table), and the records not yet taken.
#[derive(Default)]
pub(super) struct Taps {
    on: [bool; 3],
    current: FlowKey,
    out: Vec<Tapped>,
}

impl Pipeline {
    /// Taps the ports `ports` (docs/router.md, "Packet captures"), before the first packet.
    pub fn set_taps(&mut self, ports: &[Port]) {
        let mut t = Taps::default();
        for p in ports {
            t.on[*p as usize] = true;
        }
        self.taps = t.on.iter().any(|&x| x).then_some(Box::new(t));
        self.keep_flows |= self.taps.is_some();
    }

    /// The records of the tapped ports since the last time they were taken, in the order the
    /// packets passed (for the caller to empty); `None`: no tap.
    #[inline]
    pub fn tapped(&mut self) -> Option<&mut Vec<Tapped>> {
        self.taps.as_mut().map(|t| &mut t.out)
    }

    /// An arrival reaches the ingress.
    #[inline]
    pub(super) fn tap_arrival(&mut self, a: &Arrival) {
        let Some(t) = self.taps.as_mut() else { return };
        t.current = a.key;
        if t.on[Port::Ingress as usize] {
            t.out.push(Tapped { port: Port::Ingress, t: a.t, len: a.len, key: a.key, reason: None });
        }
    }

    /// A packet of `len` bytes (slot `id`, or the arrival being handled) dropped at `now`.
    #[inline]
    pub(super) fn tap_drop(&mut self, now: u64, id: Option<u32>, reason: usize, len: u32) {
        let Some(t) = self.taps.as_mut().filter(|t| t.on[Port::Drops as usize]) else { return };
        let key = id.map_or(t.current, |i| self.slot_flows[i as usize].0);
        t.out.push(Tapped { port: Port::Drops, t: now, len, key, reason: Some(DROPS[reason]) });
    }

    /// Packet `id` starts its transmission (or is handed to the caller's ring) at `now`.
    #[inline]
    pub(super) fn tap_egress(&mut self, now: u64, id: u32) {
        let Some(t) = self.taps.as_mut().filter(|t| t.on[Port::Egress as usize]) else { return };
        let len = self.pkts[id as usize].len;
        t.out.push(Tapped { port: Port::Egress, t: now, len, key: self.slot_flows[id as usize].0, reason: None });
    }
}
