//! Building the router's stages from its parameters ([`Pipeline::new`], and the classifier of
//! the driver's stream, [`classifier`]): the ingress queues, the
//! egress queues and their shaper ([`egress`]), the processors' allocation and the scheduler
//! within each service ([`processing`]), the queue memory and the link.

use super::*;
use crate::pipeline::IngressKind;

fn cfg(e: String) -> PipelineError {
    PipelineError::Config(e)
}

/// Stage 2: the services' match rules, a service's rule naming it by its place in the list.
pub fn classifier(p: &RouterParams) -> Result<Classifier, PipelineError> {
    let s_count = p.services.len();
    if s_count == 0 || s_count > u16::MAX as usize {
        return Err(cfg(format!("{s_count} services: from 1 to 65535")));
    }
    let rules = p
        .services
        .iter()
        .enumerate()
        .map(|(i, s)| crate::classify::Rule { service: ServiceId(i as u32), ..s.rule.clone() })
        .collect();
    Classifier::new(s_count, rules, p.inside.clone(), None).map_err(|e| cfg(e.to_string()))
}

impl Pipeline {
    /// Stages 3 to 7 for `p`, on traffic whose packets average `mean_len` bytes (each
    /// service's predicted time per packet), the hashed ingress hashing with `hash_seed`;
    /// `trace` keeps every packet's fate (the equivalence tests).
    pub fn new(p: Arc<RouterParams>, mean_len: f64, hash_seed: u64, trace: bool) -> Result<Self, PipelineError> {
        let s_count = p.services.len();
        if s_count == 0 || s_count > u16::MAX as usize {
            return Err(cfg(format!("{s_count} services: from 1 to 65535")));
        }
        let ingress = Ingress::new(p.ingress, &p.table, s_count, hash_seed).map_err(|e| cfg(e.to_string()))?;
        let nqi = ingress.queues();
        let direct = p.processing.policy == Allocation::None;
        // Processing none shapes dqs's shared queue by one bucket of its own.
        let shared_iq = ingress.dqs().and_then(crate::flowmap::Dqs::shared_queue).filter(|_| direct);
        let Egresses { eq_base, queues: nqe, shaped, shaping, cap } = egress(&p, nqi, shared_iq.is_some())?;
        if direct {
            direct_checks(&p, nqi)?;
        }
        // The link's round and the FIFOs are over the shaped queues: the output queues, or with
        // processing none the ingress queues.
        let round = if direct { nqi as usize } else { nqe };
        let processing = match direct {
            true => None,
            false => Some(Processing::new(&p, nqi, mean_len)?),
        };
        // A packet function looks at the packet's flow when a processor finishes it.
        let keep_flows = processing.as_ref().is_some_and(|pr| pr.functions().any());
        let qmem = Qmem::new(p.qmem, nqi + nqe as u32).map_err(|e| cfg(e.to_string()))?;
        let buckets = match eq_base.iter().any(|&b| b != 0) {
            true => Some(FlowBuckets::new(p.shaping.flow_queues).map_err(|e| cfg(e.to_string()))?),
            false => None,
        };
        let hist = || std::array::from_fn(|_| crate::pipeline::Latency::new());
        Ok(Pipeline {
            end: p.duration.as_nanos(),
            until: p.duration.as_nanos().saturating_add(p.drain.as_nanos()),
            ingress,
            qmem,
            nqi,
            processing,
            steps: Vec::new(),
            egress: {
                let e = Egress::new(
                    shaping,
                    p.shaping.conformance,
                    Drr::new(round as u32, p.quantum as u64).map_err(|e| cfg(e.to_string()))?,
                )
                .with_wire(p.shaping.overhead, p.shaping.mpu);
                // Processing none with a class's or a host's rate: one bucket over many ingress
                // queues.
                let hosts = p.services.iter().any(|s| s.per_flow && s.host.is_some() && s.rate.is_some());
                match direct && (shaped.iter().any(|&x| x) || hosts) {
                    true => e.with_shared_buckets(nqe),
                    false => e,
                }
            },
            shaper_wake: None,
            shaped,
            cap,
            flow_queues_shaped: !matches!(p.shaping.kind, ShaperKind::None),
            fifo: vec![Fifo::EMPTY; round],
            direct,
            shared_iq: shared_iq.map_or(NIL, |q| q.0),
            wakeups: 0,
            bucket_queue: if direct { vec![NIL; nqe] } else { Vec::new() },
            egress_backlog: 0,
            egress_pending: 0,
            egress_ports: Ports::default(),
            aqm: p.shaping.aqm.map(|c| Box::new(Aqm::new(c, round))),
            eq_base,
            buckets,
            flow_queue_shared: 0,
            egress_bytes: 0,
            link: Link::new(p.link_rate, p.link_ahead)?,
            pkts: Vec::new(),
            slot_flows: Vec::new(),
            keep_flows,
            held: Vec::new(),
            free: Vec::new(),
            offered: vec![0; s_count],
            delivered: vec![0; s_count],
            delivered_bytes: 0,
            last_delivery: 0,
            drops: [0; DROPS.len()],
            drops_by_service: vec![0; s_count],
            flows: Vec::new(),
            other_flows: Counts::default(),
            classes: vec![Counts::default(); s_count],
            hist: (0..s_count).map(|_| hist()).collect(),
            samples: Samples {
                processors: vec![Vec::new(); s_count],
                offered: vec![Vec::new(); s_count],
                late: vec![Vec::new(); s_count],
                ..Default::default()
            },
            error: None,
            trace: trace.then(Vec::new),
            trace_of: Vec::new(),
            taps: None,
            p,
        })
    }

    /// The link as the caller's transmit ring ([`Pipeline::transmit`]) whose slots hold frames
    /// of at most `max_frame` bytes. With processing none a frame waits in its ingress queue
    /// until the ring takes it; with processors (Everest's prototype on real frames), a
    /// processor that takes a packet takes its frame out of the ingress buffer, and the frame
    /// waits with the packet's record (processing, then its output queue) until the ring takes it.
    ///
    /// Errors: processors with a queue memory other than ideal (its operations' times are a
    /// simulated chip's, not this machine's).
    pub fn with_ring_link(mut self, max_frame: u32) -> Result<Self, PipelineError> {
        if !self.direct && self.p.qmem.subsystem.is_some() {
            return Err(cfg(
                "a transmit ring as the link with processors is modelled with an ideal queue memory: set \
                 queue_memory.subsystem = \"ideal\""
                    .into(),
            ));
        }
        self.link.use_ring(max_frame);
        Ok(self)
    }

    /// Each service's first flow queue (0: it has none), as the stream's bucket hints need it.
    pub fn eq_base(&self) -> &[u32] {
        &self.eq_base
    }
}

/// A shaped bucket's cap at `rate`: `cap`, or with `wake_ns` at least `alpha` plus what the
/// rate brings in `wake_ns` (rounded up), so that a thread waking that late loses no rate (npqos
/// live's `wake_tolerance`), at most [`crate::shaper::MAX_BUCKET_BYTES`].
fn wake_cap(cap: u64, alpha: u64, rate: crate::rate::Rate, wake_ns: u64) -> u64 {
    if wake_ns == 0 {
        return cap;
    }
    let brought = (rate.bits_per_sec() as u128 * wake_ns as u128).div_ceil(8_000_000_000);
    let need = (alpha as u128 + brought).min(crate::shaper::MAX_BUCKET_BYTES as u128) as u64;
    cap.max(need)
}

/// The egress queues as [`egress`] lays them out.
struct Egresses {
    /// Each service's first flow queue (0 if it has none).
    eq_base: Vec<u32>,
    /// Their number.
    queues: usize,
    /// Whether each service's own queue is shaped.
    shaped: Vec<bool>,
    /// The shaper over all of them.
    shaping: Shaping,
    /// Each service's buckets' cap, bytes: the configured cap raised by [`wake_cap`].
    cap: Vec<u64>,
}

/// The egress queues: one per service, then each per-flow service's `shaping.flow_queues`
/// flow queues, and with `shared_bucket` one more for dqs's shared queue.
fn egress(p: &RouterParams, nqi: u32, shared_bucket: bool) -> Result<Egresses, PipelineError> {
    let s_count = p.services.len();
    // Egress queues: one per service, then each per-flow service's flow queues.
    let mut eq_base = Vec::with_capacity(s_count);
    let mut next = s_count as u64;
    for s in &p.services {
        if s.per_flow && s.rate.is_some() {
            eq_base.push(next as u32);
            next += p.shaping.flow_queues as u64 + shared_bucket as u64;
        } else {
            eq_base.push(0);
        }
    }
    if next + nqi as u64 >= u32::MAX as u64 {
        return Err(cfg(format!("{next} output queues and {nqi} ingress queues: too many")));
    }
    let nqe = next as usize;
    // The scenario reader refuses alpha > cap; parameters built in code are held to the same.
    if let ShaperKind::Event { alpha_bytes, .. } = p.shaping.kind {
        if alpha_bytes > p.shaping.cap_bytes {
            return Err(cfg(format!(
                "shaping alpha = {alpha_bytes} B: expected at most the cap ({} B)",
                p.shaping.cap_bytes
            )));
        }
    }
    // The buckets' parameters as runs of alike queues (queue order): each service's queue,
    // then each per-flow service's flow queues, one run (a million of them cost one entry).
    let alpha = match p.shaping.kind {
        ShaperKind::Event { alpha_bytes, .. } => alpha_bytes,
        _ => 0,
    };
    let shaper_on = !matches!(p.shaping.kind, ShaperKind::None);
    let params = |s: usize| {
        let rate = p.services[s].rate.filter(|_| shaper_on);
        let cap = rate.map_or(p.shaping.cap_bytes, |r| wake_cap(p.shaping.cap_bytes, alpha, r, p.shaping.cap_wake_ns));
        BucketParams { cir: rate.unwrap_or(p.link_rate), cap_bytes: cap, alpha_bytes: alpha }
    };
    let mut runs: Vec<(BucketParams, u32)> = (0..s_count).map(|s| (params(s), 1)).collect();
    let cap = runs.iter().map(|r| r.0.cap_bytes).collect();
    // A service's own queue is shaped when it has a rate and its flows are not shaped apart.
    let shaped: Vec<bool> = p.services.iter().map(|s| s.rate.is_some() && shaper_on && !s.per_flow).collect();
    for (s, &base) in eq_base.iter().enumerate().filter(|(_, &b)| b != 0) {
        debug_assert_eq!(base as usize, runs.iter().map(|r| r.1 as usize).sum::<usize>());
        runs.push((params(s), p.shaping.flow_queues + shared_bucket as u32));
    }
    let shaper = match p.shaping.kind {
        ShaperKind::None => Shaping::None,
        ShaperKind::Event { locked_bytes, tick_shift, adaptive, timer, .. } => {
            let mut e =
                EventShaper::from_runs(&runs, p.processing.processors.max(1) as usize, locked_bytes, tick_shift)
                    .and_then(|e| e.with_timer(timer))
                    .map_err(|e| cfg(e.to_string()))?;
            if let Some(a) = adaptive {
                e = e.with_adaptive(a).map_err(|e| cfg(e.to_string()))?;
            }
            Shaping::Event(e)
        }
        ShaperKind::Periodic { period } => {
            let buckets: Vec<BucketParams> =
                runs.iter().flat_map(|&(b, n)| std::iter::repeat_n(b, n as usize)).collect();
            Shaping::Periodic(PeriodicShaper::new(&buckets, period).map_err(|e| cfg(e.to_string()))?)
        }
    };
    Ok(Egresses { eq_base, queues: nqe, shaped, shaping: shaper, cap })
}

/// What processing none asks of the rest (docs/router.md, "Processing none"): a shaped queue
/// holds one flow, so an ingress queue has one bucket at a time.
fn direct_checks(p: &RouterParams, nqi: u32) -> Result<(), PipelineError> {
    if p.ingress == IngressKind::FqCodel {
        return Err(cfg(
            "ingress.kind = \"fq-codel\" is served by the processors (its round is the scheduler within a service): \
             not with processing.policy = \"none\"; for CoDel on the shaped ingress queues use shaping.aqm = \"codel\""
                .into(),
        ));
    }
    if p.ingress == IngressKind::Hashed {
        return Err(cfg(
            "processing.policy = \"none\" shapes the ingress queues, so a queue must hold one flow: ingress.kind = \"hashed\" \
             mixes flows in a queue; use \"dqs\" or \"per-flow\""
                .into(),
        ));
    }
    if p.qmem.subsystem.is_some() {
        return Err(cfg(
            "processing.policy = \"none\" is modelled with an ideal queue memory: set queue_memory.subsystem = \"ideal\"".into(),
        ));
    }
    let shaping = !matches!(p.shaping.kind, ShaperKind::None);
    let periodic = matches!(p.shaping.kind, ShaperKind::Periodic { .. });
    if let Some(s) = p.services.iter().find(|s| s.rate.is_some() && !s.per_flow && periodic) {
        return Err(cfg(format!(
            "processing.policy = \"none\" shapes each flow's ingress queue: service {:?} has a rate for the whole service \
             (per_flow = false), one bucket over many queues, which needs shaping.shaper = \"event\"",
            s.name
        )));
    }
    if p.services.iter().any(|s| s.rate.is_some() && s.per_flow && shaping) && p.shaping.flow_queues < nqi {
        return Err(cfg(format!(
            "processing.policy = \"none\": shaping.flow_queues = {} is below the {nqi} ingress queues, so two queues could \
             share a bucket; give it at least {nqi}",
            p.shaping.flow_queues
        )));
    }
    Ok(())
}
