//! What one everest run did over time, window by window: packets offered and late per service
//! (a packet counts in the window it arrived in), the processors each service held (time-weighted
//! over the window) and the switches toward each service. Everest's Figure 6 (section 6) plots
//! the offered rate and the processors per service over time; this is the series behind our
//! version of it (`everest-fig6`).
//!
//! Recorded only when [`super::EverestParams::timeline`] names a window, so runs without it do
//! the same work and give the same results as before it existed.

use npqos_core::alloc::Allocator;
use npqos_core::{Duration, ServiceId};

/// A run's series by window of `window_ns` (see the module documentation). Counts are kept per
/// (window, service) in flat arrays that grow as the run goes on.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    pub window_ns: u64,
    services: usize,
    /// Packets arrived, per window x service.
    arrivals: Vec<u64>,
    /// Packets later than their service's D, by arrival window, per window x service.
    late: Vec<u64>,
    /// Processor-nanoseconds held (allocated: serving, idle, marked or switching toward the
    /// service), per window x service.
    held_ns: Vec<u128>,
    /// Context switches started toward the service, per window x service.
    switches: Vec<u64>,
    /// Processors each service holds since `since_ns`.
    held: Vec<u32>,
    since_ns: u64,
}

impl Timeline {
    /// An empty series by windows of `window` (at least 1 ns) with the allocator's starting
    /// allocation.
    pub(super) fn new(window: Duration, alloc: &Allocator) -> Self {
        let services = alloc.services();
        let mut t = Timeline { window_ns: window.as_nanos().max(1), services, ..Default::default() };
        t.held = vec![0; services];
        t.hold(alloc);
        t
    }

    fn slot(&mut self, at_ns: u64, s: usize) -> usize {
        let w = (at_ns / self.window_ns) as usize;
        let need = (w + 1) * self.services;
        if self.arrivals.len() < need {
            self.arrivals.resize(need, 0);
            self.late.resize(need, 0);
            self.held_ns.resize(need, 0);
            self.switches.resize(need, 0);
        }
        w * self.services + s
    }

    /// Adds the processors held from the last call to `now` to the windows they were held in.
    pub(super) fn advance(&mut self, now: u64) {
        let mut t = self.since_ns;
        while t < now {
            let end = ((t / self.window_ns + 1) * self.window_ns).min(now);
            for s in 0..self.services {
                let i = self.slot(t, s);
                self.held_ns[i] += self.held[s] as u128 * (end - t) as u128;
            }
            t = end;
        }
        self.since_ns = self.since_ns.max(now);
    }

    /// Reads the allocation after the allocator decided (call [`Timeline::advance`] first).
    pub(super) fn hold(&mut self, alloc: &Allocator) {
        for (s, h) in self.held.iter_mut().enumerate() {
            *h = alloc.allocated(ServiceId::from_index(s));
        }
    }

    pub(super) fn arrival(&mut self, now: u64, s: usize) {
        let i = self.slot(now, s);
        self.arrivals[i] += 1;
    }

    /// A packet of service `s` that arrived at `arrived` finished, late or not.
    pub(super) fn completed(&mut self, arrived: u64, s: usize, late: bool) {
        let i = self.slot(arrived, s);
        self.late[i] += late as u64;
    }

    pub(super) fn switch(&mut self, now: u64, to: usize) {
        let i = self.slot(now, to);
        self.switches[i] += 1;
    }

    /// Windows recorded (the last may be partial: it ends at the run's last event).
    pub fn windows(&self) -> usize {
        self.arrivals.len() / self.services.max(1)
    }
    pub fn services(&self) -> usize {
        self.services
    }
    /// Start of window `w`, ns.
    pub fn start_ns(&self, w: usize) -> u64 {
        w as u64 * self.window_ns
    }
    pub fn arrivals(&self, w: usize, s: usize) -> u64 {
        self.arrivals.get(w * self.services + s).copied().unwrap_or(0)
    }
    pub fn late(&self, w: usize, s: usize) -> u64 {
        self.late.get(w * self.services + s).copied().unwrap_or(0)
    }
    pub fn switches(&self, w: usize, s: usize) -> u64 {
        self.switches.get(w * self.services + s).copied().unwrap_or(0)
    }
    /// The time covered by window `w`: the window, or up to the last event in the last one.
    fn covered_ns(&self, w: usize) -> u64 {
        let start = self.start_ns(w);
        (start + self.window_ns).min(self.since_ns).saturating_sub(start)
    }
    /// Mean processors service `s` held over window `w` (a window the run reached only at its
    /// last instant: the processors held then).
    pub fn processors(&self, w: usize, s: usize) -> f64 {
        let held = self.held_ns.get(w * self.services + s).copied().unwrap_or(0);
        match self.covered_ns(w) {
            0 => self.held.get(s).copied().unwrap_or(0) as f64,
            span => held as f64 / span as f64,
        }
    }

    /// The windows that start in `[from_ns, to_ns)`.
    fn range(&self, from_ns: u64, to_ns: u64) -> std::ops::Range<usize> {
        let a = from_ns.div_ceil(self.window_ns) as usize;
        let b = (to_ns.div_ceil(self.window_ns) as usize).min(self.windows());
        a.min(b)..b
    }
    /// Mean processors service `s` held over the windows that start in `[from_ns, to_ns)`
    /// (time-weighted; a span on window boundaries is exact).
    pub fn mean_processors(&self, from_ns: u64, to_ns: u64, s: usize) -> f64 {
        let r = self.range(from_ns, to_ns);
        let held: u128 = r.clone().map(|w| self.held_ns[w * self.services + s]).sum();
        let span: u64 = r.map(|w| self.covered_ns(w)).sum();
        held as f64 / span.max(1) as f64
    }
    /// Sum of `f(window, s)` over the windows that start in `[from_ns, to_ns)`.
    pub fn sum(&self, from_ns: u64, to_ns: u64, s: usize, f: impl Fn(&Self, usize, usize) -> u64) -> u64 {
        self.range(from_ns, to_ns).map(|w| f(self, w, s)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use npqos_core::alloc::{AllocConfig, Policy, ServiceSpec};

    fn alloc() -> Allocator {
        let svc = |name: &str| ServiceSpec {
            name: name.into(),
            t_pkt: Duration::from_micros(10),
            tolerance: Duration::from_millis(2),
            guarantee: 0.5,
        };
        Allocator::new(&AllocConfig {
            processors: 4,
            t_sw: Duration::from_millis(2),
            delta: Duration::from_millis(2),
            services: vec![svc("a"), svc("b")],
            policy: Policy::Static,
        })
        .unwrap()
    }

    #[test]
    fn processors_are_time_weighted_across_window_boundaries() {
        let a = alloc();
        let mut t = Timeline::new(Duration::from_micros(10), &a);
        t.advance(25_000);
        // Static: 2 and 2 throughout, in full windows and in the partial last one.
        assert_eq!(t.windows(), 3);
        for w in 0..3 {
            assert_eq!((t.processors(w, 0), t.processors(w, 1)), (2.0, 2.0), "window {w}");
        }
        assert_eq!(t.mean_processors(0, 30_000, 0), 2.0);
        t.arrival(12_000, 1);
        t.completed(12_000, 1, true);
        t.switch(21_000, 0);
        assert_eq!((t.arrivals(1, 1), t.late(1, 1), t.switches(2, 0)), (1, 1, 1));
        assert_eq!(t.sum(10_000, 20_000, 1, Timeline::late), 1);
        assert_eq!(t.sum(20_000, 30_000, 1, Timeline::late), 0);
    }
}
