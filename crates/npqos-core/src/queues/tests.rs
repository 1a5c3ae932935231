//! Queue memory against a `VecDeque` model, and the timing plans against hand arithmetic.

use super::memory::{QueueMemory, NIL};
use super::timing::{plan, traffic, Op, Step, Subsystem, TABLE1};
use crate::{BufferId, Error, QueueId};
use proptest::prelude::*;
use std::collections::VecDeque;

#[test]
fn three_references_per_operation_and_lists_stay_well_formed() {
    let mut m = QueueMemory::new(2, 8).unwrap();
    let q0 = QueueId(0);
    for p in [3, 5, 7] {
        m.enqueue(q0, BufferId(p)).unwrap();
    }
    assert_eq!(m.refs().total(), 9);
    let d = m.descriptor(q0).unwrap();
    assert_eq!((d.head, d.tail, d.len), (3, 7, 3));
    assert_eq!(m.dequeue(q0).unwrap(), Some(BufferId(3)));
    assert_eq!(m.refs().total(), 12);
    assert_eq!(m.dequeue(q0).unwrap(), Some(BufferId(5)));
    assert_eq!(m.dequeue(q0).unwrap(), Some(BufferId(7)));
    let d = m.descriptor(q0).unwrap();
    assert_eq!((d.head, d.tail, d.len), (NIL, NIL, 0));
    // An empty dequeue reads the descriptor only.
    assert_eq!(m.dequeue(q0).unwrap(), None);
    let r = m.refs();
    assert_eq!((r.desc_reads, r.desc_writes, r.link_reads, r.link_writes), (7, 6, 3, 3));
    assert!(matches!(m.enqueue(QueueId(2), BufferId(0)), Err(Error::UnknownId { kind: "queue", .. })));
    assert!(matches!(m.enqueue(q0, BufferId(8)), Err(Error::UnknownId { kind: "buffer", .. })));
    assert!(matches!(m.dequeue(QueueId(9)), Err(Error::UnknownId { .. })));
    m.enqueue(QueueId(1), BufferId(0)).unwrap();
    let before = m.refs();
    assert!(matches!(m.enqueue(q0, BufferId(0)), Err(Error::NotAllowed(_))));
    assert_eq!(m.refs(), before, "a refused call changes nothing");
    assert!(QueueMemory::new(0, 1).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Any interleaving of enqueues and dequeues over several queues behaves as one FIFO per
    /// queue, and the reference counts are three per successful operation.
    #[test]
    fn queue_memory_is_a_fifo_per_queue(ops in proptest::collection::vec((0u32..4, any::<bool>()), 1..400)) {
        let mut m = QueueMemory::new(4, 512).unwrap();
        let mut model: Vec<VecDeque<BufferId>> = vec![VecDeque::new(); 4];
        let mut free: Vec<u32> = (0..512).rev().collect();
        let mut ok_ops = 0u64;
        let mut empty_deq = 0u64;
        for (q, enq) in ops {
            if enq {
                let p = free.pop().unwrap();
                m.enqueue(QueueId(q), BufferId(p)).unwrap();
                model[q as usize].push_back(BufferId(p));
                ok_ops += 1;
            } else {
                let got = m.dequeue(QueueId(q)).unwrap();
                prop_assert_eq!(got, model[q as usize].pop_front());
                match got {
                    Some(p) => { free.push(p.0); ok_ops += 1; }
                    None => empty_deq += 1,
                }
            }
            let d = m.descriptor(QueueId(q)).unwrap();
            prop_assert_eq!(d.len as usize, model[q as usize].len());
        }
        prop_assert_eq!(m.refs().total(), 3 * ok_ops + empty_deq);
    }
}

#[test]
fn unloaded_latencies_follow_from_table1() {
    let t = TABLE1;
    let l = |s, o, h| t.latency_ns(s, o, h);
    // nc: 10 + 80 + 80 (two parallel writes) and 10 + 3 x 80: the paper's 170 / 250 exactly.
    assert_eq!(l(Subsystem::Nc, Op::Enqueue, false), 170.0);
    assert_eq!(l(Subsystem::Nc, Op::Dequeue, false), 250.0);
    // dc: a descriptor hit costs the interconnect and the 2.5 ns cache, a miss adds memory.
    assert_eq!(l(Subsystem::Dc, Op::Enqueue, true), 10.0 + 42.5 + 80.0);
    assert_eq!(l(Subsystem::Dc, Op::Enqueue, false), 10.0 + 82.5 + 80.0);
    assert_eq!(l(Subsystem::Dc, Op::Dequeue, true), 10.0 + 42.5 + 80.0 + 42.5);
    assert_eq!(l(Subsystem::Dc, Op::Dequeue, false), 10.0 + 82.5 + 80.0 + 42.5);
    // sqc: 35 ns of instructions, one command (+ an evict-and-load command on a miss).
    assert_eq!(l(Subsystem::Sqc, Op::Enqueue, true), 35.0 + 40.0 + 5.0 + 40.0 + 2.5);
    assert_eq!(l(Subsystem::Sqc, Op::Dequeue, false), 35.0 + 85.0 + 87.5);
    // qc: one command; a miss adds the descriptor load.
    assert_eq!(l(Subsystem::Qc, Op::Enqueue, true), 5.0 + 87.5);
    assert_eq!(l(Subsystem::Qc, Op::Dequeue, false), 5.0 + 127.5);
    // The ordering the paper's Table 5 shows: qc < sqc < dc < nc on hits.
    for op in [Op::Enqueue, Op::Dequeue] {
        let h: Vec<f64> = Subsystem::ALL.iter().map(|&s| l(s, op, true)).collect();
        assert!(h[3] < h[2] && h[2] < h[1] && h[1] < h[0], "{op:?} {h:?}");
    }
    let cp = t.critical_path(Subsystem::Nc, Op::Enqueue, false);
    assert_eq!(cp, vec![(Step::Instr, 1), (Step::Interconnect, 2), (Step::Memory, 2)]);
}

#[test]
fn interconnect_and_off_chip_traffic_is_table3() {
    // (interconnect transactions, off-chip references)
    assert_eq!(traffic(Subsystem::Nc, Op::Enqueue, false, false), (3, 3));
    assert_eq!(traffic(Subsystem::Dc, Op::Dequeue, true, false), (3, 1));
    assert_eq!(traffic(Subsystem::Dc, Op::Dequeue, false, true), (3, 3));
    assert_eq!(traffic(Subsystem::Sqc, Op::Enqueue, true, false), (1, 1));
    assert_eq!(traffic(Subsystem::Sqc, Op::Enqueue, false, true), (2, 3));
    assert_eq!(traffic(Subsystem::Qc, Op::Dequeue, false, false), (1, 2));
    assert_eq!(plan(Subsystem::Qc, Op::Enqueue, true).len(), 2);
}

/// Every program pairs each interconnect request with a response in the same branch, and
/// requests carry 1 or 2 words, responses 1: the rule [`plan`] relies on.
#[test]
fn programs_pair_requests_and_responses() {
    use super::timing::{program, Action};
    for sub in Subsystem::ALL {
        for op in [Op::Enqueue, Op::Dequeue] {
            for hit in [true, false] {
                for branch in program(sub, op, hit).iter().flat_map(|s| s.iter()) {
                    let sends: Vec<u8> =
                        branch.iter().filter_map(|a| if let Action::Send(w) = a { Some(*w) } else { None }).collect();
                    assert!(sends.len().is_multiple_of(2), "{sub:?} {op:?} {hit}: {branch:?}");
                    for pair in sends.chunks(2) {
                        assert!((1..=2).contains(&pair[0]) && pair[1] == 1, "{sub:?} {op:?}: {branch:?}");
                    }
                }
            }
        }
    }
}
