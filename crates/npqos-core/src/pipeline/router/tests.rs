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
        fq_codel: Default::default(),
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
            cap_wake_ns: 0,
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

/// FQ-CoDel's overflow (RFC 8290 section 4.1): with the buffer full, a packet of a new flow is
/// admitted and the fattest queue (the heavy flow's) loses packets from its head; hashed
/// queues with tail drop drop the newcomer instead.
#[test]
fn a_full_fq_codel_buffer_drops_from_the_fattest_queue() {
    let run = |kind: IngressKind| {
        let mut p = per_flow_shaped();
        p.services[0].rate = None;
        p.ingress = kind;
        // 100 blocks of 64 B: twelve 500 B packets fill it. One processor, 1 ms per packet.
        p.table = DqsConfig { queues: 1024, blocks: 100, block_size: 64, ..Default::default() };
        p.processing.processors = 1;
        let mut pipe = Pipeline::new(Arc::new(p), 500.0, 1, false).expect("a valid router");
        let flow = |i: u8| FlowKey::new([198, 18, 0, i].into(), [198, 18, 1, 1].into(), 17, 1000, 2000);
        let arrival = |t: u64, i: u8| Arrival {
            t,
            len: 500,
            service: 0,
            eq: 0,
            hint: NO_HINT,
            actual: 1e6,
            key: flow(i),
            row: i as u32,
            tcp_flags: None,
            slot: NO_SLOT,
        };
        let mut fx = Effects::default();
        let batch: Vec<Arrival> = (0..20).map(|t| arrival(t * 1000, 0)).chain([arrival(20_000, 1)]).collect();
        pipe.receive(&batch, &mut fx);
        assert_eq!(pipe.error(), None);
        assert_eq!(pipe.check_elements(), Ok(()));
        (pipe.flow_row(0), pipe.flow_row(1))
    };
    let (heavy, sparse) = run(IngressKind::FqCodel);
    assert_eq!(sparse.dropped_packets(), 0, "the new flow's packet is admitted");
    assert_eq!(heavy.dropped[D_BUFFER], heavy.dropped_packets());
    // The first packet is on the processor and 12 fit; the 14th finds the buffer full and the
    // fattest queue (12 packets, 6,000 B) loses half its bytes from its head (6 packets); the
    // 20th does the same again.
    assert_eq!(heavy.dropped_packets(), 12, "{heavy:?}");
    let (heavy, sparse) = run(IngressKind::Hashed);
    assert_eq!((heavy.dropped[D_BUFFER], sparse.dropped[D_BUFFER]), (7, 1), "tail drop");
}
