//! The pipeline's own unit tests (the tests that drive it as the router and live do are in
//! `npqos-sim`, `models/router/`).

use super::*;
use crate::alloc::Policy;
use crate::flowmap::DqsConfig;
use crate::pipeline::stats::StatsParams;
use crate::pipeline::{IngressKind, QmemParams};
use crate::shaper::Timer;
use crate::Rate;

/// One service `all` of per-flow-shaped, zero-cost packets on 4 processors, an ideal queue
/// memory, a 10 Gbps link.
fn per_flow_shaped() -> RouterParams {
    RouterParams {
        services: vec![ServiceParams {
            name: "all".into(),
            rule: Default::default(),
            tolerance: Duration::from_secs(1),
            cost_alpha_ns: 0.0,
            cost_beta_ns: 0.0,
            variation: 0.0,
            guarantee: 1.0,
            rate: Some(Rate::from_bits_per_sec(100_000_000)),
            per_flow: true,
            host: None,
            ecn: false,
            function: None,
        }],
        inside: Vec::new(),
        ingress: IngressKind::PerFlow,
        table: DqsConfig { queues: 1 << 10, blocks: 1 << 16, block_size: 64, ..Default::default() },
        processing: ProcessingParams {
            processors: 4,
            policy: Allocation::Policy(Policy::Static),
            t_sw: Duration::from_micros(1),
            delta: Duration::from_micros(1),
            scheduler: Scheduler::Fcfs,
            late_drop: false,
        },
        qmem: QmemParams::ideal(),
        shaping: ShapingParams {
            kind: ShaperKind::Event {
                alpha_bytes: 1_500,
                locked_bytes: 0,
                tick_shift: 6,
                adaptive: None,
                timer: Timer::Heap,
            },
            conformance: Conformance::SendThenPay,
            cap_bytes: 16_000,
            flow_queues: 1024,
            buffer_bytes: u64::MAX / 2,
            overhead: 0,
            mpu: 0,
            aqm: None,
        },
        link_rate: Rate::gbps(10),
        quantum: 1536,
        link_ahead: 1,
        duration: Duration::from_millis(50),
        drain: Duration::from_secs(1),
        sample_every: Duration::from_millis(10),
        stats: StatsParams::default(),
    }
}

/// A mechanism's refusal ends the run with `PipelineError::Mechanism` naming the stage; none is
/// dropped on the floor. The link's DRR is swapped for one with fewer queues, so re-enabling a
/// shaped queue that holds a packet names a queue the DRR does not have.
#[test]
fn a_refused_drr_call_is_reported() {
    let mut pipe = Pipeline::new(Arc::new(per_flow_shaped()), 500.0, 1, false).expect("a valid router");
    let mut fx = Effects::default();
    let q = pipe.fifo.len() as u32 - 1;
    let id = pipe.new_pkt(Pkt { eq: q, ..Pkt::default() });
    pipe.set_link_round(Drr::new(1, 1500).expect("one queue"));
    // As the egress admits a processed packet: its queue-memory enqueue is in flight.
    (pipe.egress_pending, pipe.egress_ports.input) = (1, 1);
    pipe.egress_visible(5, id, &mut fx);
    match pipe.error() {
        Some(PipelineError::Mechanism { at: 5, stage: EGRESS, msg }) => assert!(msg.contains("queue"), "{msg}"),
        other => panic!("the DRR's refusal was not reported: {other:?}"),
    }
}

/// A packet lost inside an element is named at that element: the egress's FIFOs lose a packet
/// (unlinked behind the element's back) and `check_elements` says "egress", the other
/// elements adding up.
#[test]
fn a_packet_lost_in_the_egress_is_named_there() {
    let mut p = per_flow_shaped();
    p.services[0].rate = None;
    let mut pipe = Pipeline::new(Arc::new(p), 500.0, 1, false).expect("a valid router");
    let id = pipe.new_pkt(Pkt { eq: 0, len: 100, ..Pkt::default() });
    (pipe.egress_pending, pipe.egress_ports.input) = (1, 1);
    pipe.fifo_push(0, id);
    pipe.egress_pending -= 1;
    assert_eq!(pipe.check_elements(), Ok(()));
    pipe.fifo[0] = Fifo::EMPTY;
    let e = pipe.check_elements().expect_err("the FIFO lost its packet");
    assert_eq!((e.element, e.input, e.held), ("egress", 1, 0), "{e}");
}
