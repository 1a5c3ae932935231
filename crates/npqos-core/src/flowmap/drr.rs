//! Deficit round robin (Shreedhar and Varghese, dqs ref. [18]) over the active physical
//! queues: the output scheduler of every dqs experiment ("output bandwidth is shared among all
//! the active physical queues in a DRR manner", dqs section 6).
//!
//! Packet at a time: [`Drr::select`] names the queue whose head packet goes next; the caller
//! pops it and reports with [`Drr::dequeued`]. O(1) amortised per packet when the quantum is at
//! least the largest packet.

use std::collections::VecDeque;

#[derive(Clone, Debug)]
pub struct Drr {
    quantum: u32,
    ring: VecDeque<u32>,
    deficit: Vec<u64>,
    active: Vec<bool>,
    /// The queue at the front of the ring has received its quantum for this visit.
    granted: bool,
}

impl Drr {
    /// DRR over queue ids `0..queues`, `quantum` bytes per round (> 0).
    pub fn new(queues: u32, quantum: u32) -> Self {
        assert!(quantum > 0, "DRR quantum must be positive");
        Drr {
            quantum,
            ring: VecDeque::with_capacity(queues as usize),
            deficit: vec![0; queues as usize],
            active: vec![false; queues as usize],
            granted: false,
        }
    }

    pub fn active_queues(&self) -> usize {
        self.ring.len()
    }

    /// Queue `q` received a packet; it joins the round if it was idle.
    pub fn enqueued(&mut self, q: u32) {
        if !self.active[q as usize] {
            self.active[q as usize] = true;
            self.deficit[q as usize] = 0;
            self.ring.push_back(q);
        }
    }

    /// The queue whose head packet is sent next. `head_len(q)` gives the length of `q`'s head
    /// packet (every queue in the round is non-empty).
    pub fn select(&mut self, head_len: impl Fn(u32) -> u32) -> Option<u32> {
        loop {
            let &q = self.ring.front()?;
            if !self.granted {
                self.deficit[q as usize] += self.quantum as u64;
                self.granted = true;
            }
            let len = head_len(q) as u64;
            if len <= self.deficit[q as usize] {
                self.deficit[q as usize] -= len;
                return Some(q);
            }
            self.ring.rotate_left(1);
            self.granted = false;
        }
    }

    /// The head packet of `q` (just selected) was taken; `now_empty` if `q` has no more.
    pub fn dequeued(&mut self, q: u32, now_empty: bool) {
        debug_assert_eq!(self.ring.front(), Some(&q));
        if now_empty {
            self.ring.pop_front();
            self.active[q as usize] = false;
            self.deficit[q as usize] = 0;
            self.granted = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_bytes_equally_between_backlogged_queues() {
        // Queue 0 sends 1500 B packets, queue 1 sends 100 B packets, both always backlogged:
        // DRR gives them equal bytes over many rounds.
        let mut d = Drr::new(2, 1500);
        d.enqueued(0);
        d.enqueued(1);
        let len = |q: u32| if q == 0 { 1500 } else { 100 };
        let mut bytes = [0u64; 2];
        for _ in 0..16_000 {
            let q = d.select(len).unwrap();
            bytes[q as usize] += len(q) as u64;
            d.dequeued(q, false);
        }
        let ratio = bytes[0] as f64 / bytes[1] as f64;
        assert!((ratio - 1.0).abs() < 0.01, "{bytes:?}");
    }

    #[test]
    fn packets_larger_than_the_quantum_still_go() {
        let mut d = Drr::new(1, 100);
        d.enqueued(0);
        assert_eq!(d.select(|_| 1000), Some(0));
        d.dequeued(0, true);
        assert_eq!(d.select(|_| 1000), None);
    }
}
