//! CoDel on the shaped queues (docs/codel.md, `shaping.aqm = "codel"`): per queue the state of
//! [`crate::pipeline::codel`], run by the egress element when its DRR round looks at a queue's
//! head, before the shaper is asked (a packet CoDel drops costs its queue no quantum and its
//! bucket no tokens, as in Linux's fq_codel and cake). The packets it drops leave their FIFO
//! at once and are accounted right after the pick ([`Pipeline::aqm_dropped`]); a packet it
//! marks carries the mark to the wire (a frame's ECN field set to CE, [`set_ce`]).

use super::*;
use crate::pipeline::codel::{Codel, CodelParams, CodelQueue};

/// The drop reason of CoDel ([`DROPS`]).
pub(super) const D_CODEL: usize = 8;

/// The active queue management's state.
#[derive(Clone, Debug)]
pub(super) struct Aqm {
    pub p: CodelParams,
    /// Per shaped queue (a FIFO), its CoDel state.
    pub q: Vec<Codel>,
    /// Per packet slot: 0 not ECN-capable, 1 ECN-capable, 2 marked CE.
    pub ect: Vec<u8>,
    /// (queue, packet) CoDel dropped during the pick under way, in order.
    pub dropped: Vec<(u32, u32)>,
    /// Packets marked CE.
    pub marked: u64,
}

impl Aqm {
    pub(super) fn new(p: CodelParams, queues: usize) -> Aqm {
        Aqm { p, q: vec![Codel::default(); queues], ect: Vec::new(), dropped: Vec::new(), marked: 0 }
    }

    /// Packet slot `id` holds a new packet, ECN-capable or not.
    #[inline]
    pub(super) fn arrived(&mut self, id: u32, ect: bool) {
        let i = id as usize;
        if self.ect.len() <= i {
            self.ect.resize(i + 1, 0);
        }
        self.ect[i] = ect as u8;
    }
}

/// One shaped queue's FIFO as CoDel sees it.
pub(super) struct Head<'a> {
    pub pkts: &'a [Pkt],
    pub fifo: &'a mut Fifo,
    pub q: u32,
    /// Processing none: a packet's time in the queue runs from its arrival; with processing,
    /// from the end of its processing (its egress enqueue).
    pub direct: bool,
    pub mtu: u64,
    pub ect: &'a mut Vec<u8>,
    pub dropped: &'a mut Vec<(u32, u32)>,
    pub marked: &'a mut u64,
}

impl CodelQueue for Head<'_> {
    #[inline]
    fn head(&self, now: u64) -> Option<(u64, bool)> {
        let id = self.fifo.head;
        if id == NIL {
            return None;
        }
        let pk = &self.pkts[id as usize];
        let since = if self.direct { pk.arrival } else { pk.done };
        Some((now.saturating_sub(since), self.ect.get(id as usize).is_some_and(|&e| e != 0)))
    }
    /// The bytes behind the head, counted only as far as CoDel looks (past one MTU).
    fn bytes(&self) -> u64 {
        let mut b = 0;
        let mut id = self.pkts[self.fifo.head as usize].next;
        while id != NIL && b <= self.mtu {
            b += self.pkts[id as usize].len as u64;
            id = self.pkts[id as usize].next;
        }
        b
    }
    fn drop_head(&mut self, _now: u64) {
        let id = self.fifo.head;
        self.fifo.head = self.pkts[id as usize].next;
        if self.fifo.head == NIL {
            self.fifo.tail = NIL;
        }
        self.dropped.push((self.q, id));
    }
    fn mark_head(&mut self, _now: u64) {
        let i = self.fifo.head as usize;
        if self.ect[i] == 1 {
            self.ect[i] = 2;
            *self.marked += 1;
        }
    }
}

impl Aqm {
    /// CoDel's dequeue on queue `q` at `now`: the surviving head's length, `None` when it
    /// dropped every packet of the queue.
    #[inline]
    pub(super) fn head_len(
        &mut self,
        pkts: &[Pkt],
        fifo: &mut [Fifo],
        q: QueueId,
        now: u64,
        direct: bool,
    ) -> Option<u64> {
        let Aqm { p, q: states, ect, dropped, marked } = self;
        let mut h = Head { pkts, fifo: &mut fifo[q.index()], q: q.0, direct, mtu: p.mtu, ect, dropped, marked };
        let d = states[q.index()].dequeue(p, now, &mut h);
        d.head.then(|| pkts[fifo[q.index()].head as usize].len as u64)
    }
}

impl Pipeline {
    /// The packets CoDel dropped during the last pick, accounted at `now` (reason `codel`):
    /// each out of its FIFO already, and here out of the egress (and, with processing none,
    /// out of its ingress queue, whose head it was), its bucket released as a sent packet's
    /// would be.
    pub(super) fn aqm_dropped(&mut self, now: u64) {
        let Some(a) = self.aqm.as_mut().filter(|a| !a.dropped.is_empty()) else { return };
        let dropped = std::mem::take(&mut a.dropped);
        for &(q, id) in &dropped {
            let pk = self.pkts[id as usize];
            let (s, len) = (pk.service as usize, pk.len);
            self.egress_backlog -= 1;
            self.egress_ports.dropped[2] += 1;
            self.egress_bytes -= len as u64;
            if self.direct {
                match self.ingress.dequeue(QueueId(q)) {
                    Ok(Some(l)) if l == len => {}
                    Ok(_) => self.fail(now, "ingress", "the packet CoDel dropped is not its queue's head"),
                    Err(e) => self.fail(now, "ingress", e),
                }
            }
            let empty = self.fifo[q as usize].head == NIL;
            self.drops[D_CODEL] += 1;
            self.tap_drop(now, Some(id), D_CODEL, len);
            self.flow_counts(pk.row).drop(D_CODEL, len).expect("a reason of DROPS");
            self.drops_by_service[s] += 1;
            self.classes[s].drop(D_CODEL, len).expect("a reason of DROPS");
            // With processing none a flow holds its bucket while its ingress queue holds
            // packets; with processing, each packet holds it.
            if !self.direct || empty {
                self.release_bucket(now, id);
            }
            if empty {
                self.egress.emptied(QueueId(q), QueueId(pk.eq));
            }
            self.free.push(id);
            if let Some(t) = &mut self.trace {
                t[self.trace_of[id as usize] as usize].drop = Some(DROPS[D_CODEL]);
            }
        }
        if let Some(a) = self.aqm.as_mut() {
            a.dropped = dropped;
            a.dropped.clear();
        }
    }

    /// Whether packet slot `id` was marked CE by CoDel.
    #[inline]
    pub(super) fn aqm_marked(&self, id: u32) -> bool {
        self.aqm.as_ref().is_some_and(|a| a.ect.get(id as usize) == Some(&2))
    }
}

/// Whether `frame` (Ethernet, 802.1Q or 802.1ad tags, then IPv4 or IPv6) is ECN-capable: its
/// ECN field ECT(0), ECT(1) or CE.
pub fn ect(frame: &[u8]) -> bool {
    ip_of(frame).is_some_and(|(off, v6)| {
        let tos = if v6 { (frame[off] << 4) | (frame[off + 1] >> 4) } else { frame[off + 1] };
        tos & 3 != 0
    })
}

/// Sets `frame`'s ECN field to CE (an IPv4 header's checksum updated, RFC 1624); false when it
/// is not an ECN-capable IP packet (left as it is).
pub fn set_ce(frame: &mut [u8]) -> bool {
    let Some((off, v6)) = ip_of(frame).filter(|_| ect(frame)) else { return false };
    if v6 {
        frame[off + 1] |= 0x30;
        return true;
    }
    let old = u16::from_be_bytes([frame[off], frame[off + 1]]);
    frame[off + 1] |= 3;
    let new = u16::from_be_bytes([frame[off], frame[off + 1]]);
    // HC' = ~(~HC + ~m + m')
    let hc = u16::from_be_bytes([frame[off + 10], frame[off + 11]]);
    let mut sum = (!hc) as u32 + (!old) as u32 + new as u32;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    frame[off + 10..off + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    true
}

/// Where `frame`'s IP header starts, and whether it is IPv6.
fn ip_of(frame: &[u8]) -> Option<(usize, bool)> {
    let mut off = 12;
    loop {
        let t = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
        match t {
            0x8100 | 0x88a8 => off += 4,
            0x0800 if frame.len() >= off + 22 => return Some((off + 2, false)),
            0x86dd if frame.len() >= off + 42 => return Some((off + 2, true)),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 header with TOS `tos` and a valid header checksum.
    fn v4(tos: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[8, 0]);
        f.extend_from_slice(&[0x45, tos, 0, 40, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2]);
        let sum = checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        f
    }

    fn checksum(h: &[u8]) -> u16 {
        let mut s: u32 = h.chunks(2).map(|w| u16::from_be_bytes([w[0], w[1]]) as u32).sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn ce_is_set_in_ecn_capable_ipv4_and_ipv6_frames_with_the_checksum_right() {
        for tos in [0x01u8, 0x02, 0xba, 0xfe] {
            let mut f = v4(tos);
            assert!(ect(&f), "TOS {tos:#x}");
            assert!(set_ce(&mut f));
            assert_eq!(f[15] & 3, 3);
            assert_eq!(f[15] & !3, tos & !3, "the DSCP kept");
            assert_eq!(checksum(&f[14..34]), 0, "the header's checksum still sums right");
        }
        let mut f = v4(0xb8);
        assert!(!ect(&f) && !set_ce(&mut f), "Not-ECT is left alone");
        assert_eq!(f, v4(0xb8));
        // IPv6 behind a VLAN tag, traffic class 0x02 (ECT(0)).
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0, 0, 7, 0x86, 0xdd, 0x60, 0x20, 0, 0]);
        f.resize(18 + 40, 0);
        assert!(ect(&f));
        assert!(set_ce(&mut f));
        assert_eq!((f[18] << 4 | f[19] >> 4) & 3, 3);
        assert_eq!(f[18] & 0x0f, 0, "the version and the rest of the class kept");
        assert!(!ect(&[0u8; 60]), "not IP");
    }
}
