//! One k-way merge of time-ordered sources: trace files and the overlaid copies of a trace
//! (`trace::Merge`, `trace::TraceSource`), the overlaid copies of a corpus (`trace::corpus`),
//! everest's ON/OFF sources, the efq-lap switch's flows. Items come out by (time, source index): equal times are taken from the lower index
//! first, and the keys are unique (one head per source), so the order is fixed whatever the
//! heap does inside.
//!
//! A source need not be monotone (a capture under absolute alignment can go back in time): the
//! merge only orders across sources, and a source's items keep their own order. Structures that
//! are not merges of independent sources keep their own queue: the link model's arrival
//! streams (ties FIFO through the engine's queue, shared RNGs) and `workload::flows::FlowGen`
//! (1e6 slots refilled after every packet from one RNG, a monotone radix queue: the
//! `radix_heap` crate, whose ties by slot this order matches, rather than a third radix
//! structure beside the engine's queue and the shaper's wheel).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::convert::Infallible;

/// A source of timed items for [`KMerge`].
pub trait Source {
    type Item;
    type Error;
    /// The next item and its time (ns), or `None` when the source is done.
    fn next(&mut self) -> Result<Option<(u64, Self::Item)>, Self::Error>;
}

/// What [`KMerge::next_from`] hands out: the item's time, its source's index and the item.
pub type Merged<S> = (u64, usize, <S as Source>::Item);

/// Sources merged by (time, source index).
pub struct KMerge<S: Source> {
    sources: Vec<S>,
    heads: Vec<Option<S::Item>>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
}

impl<S: Source> KMerge<S> {
    /// The merge of `sources`, each asked for its first item in index order.
    pub fn new(sources: Vec<S>) -> Result<Self, S::Error> {
        assert!(sources.len() <= u32::MAX as usize, "at most 2^32 - 1 sources");
        let mut m = KMerge {
            heads: (0..sources.len()).map(|_| None).collect(),
            heap: BinaryHeap::with_capacity(sources.len()),
            sources,
        };
        for i in 0..m.sources.len() {
            m.refill(i)?;
        }
        Ok(m)
    }

    fn refill(&mut self, i: usize) -> Result<(), S::Error> {
        if let Some((t, item)) = self.sources[i].next()? {
            self.heap.push(Reverse((t, i as u32)));
            self.heads[i] = Some(item);
        }
        Ok(())
    }

    /// The earliest item, its time and its source's index. The source is then asked for its
    /// next item; if that fails, the error is returned and the item taken is lost (the source
    /// drops out of the merge).
    pub fn next_from(&mut self) -> Result<Option<Merged<S>>, S::Error> {
        let Some(Reverse((t, i))) = self.heap.pop() else {
            return Ok(None);
        };
        let i = i as usize;
        let item = self.heads[i].take().expect("a heap entry has a head");
        self.refill(i)?;
        Ok(Some((t, i, item)))
    }

    /// The time and source index of the item [`KMerge::next_from`] would hand out next.
    pub fn peek(&self) -> Option<(u64, usize)> {
        self.heap.peek().map(|Reverse((t, i))| (*t, *i as usize))
    }

    /// The sources, in index order.
    pub fn sources(&self) -> &[S] {
        &self.sources
    }

    /// Ends the merge: nothing more comes out.
    pub fn clear(&mut self) {
        self.heap.clear();
        self.heads.iter_mut().for_each(|h| *h = None);
    }
}

impl<S: Source<Error = Infallible>> Iterator for KMerge<S> {
    type Item = Merged<S>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_from() {
            Ok(x) => x,
            Err(e) => match e {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct List(std::vec::IntoIter<(u64, char)>);
    impl Source for List {
        type Item = char;
        type Error = Infallible;
        fn next(&mut self) -> Result<Option<(u64, char)>, Infallible> {
            Ok(self.0.next())
        }
    }

    fn list(v: &[(u64, char)]) -> List {
        List(Vec::from(v).into_iter())
    }

    /// Time order across sources, the lower index first at equal times, a source's own order
    /// kept even when it goes back in time.
    #[test]
    fn order_is_time_then_index() {
        let m =
            KMerge::new(vec![list(&[(5, 'a'), (5, 'b'), (9, 'c')]), list(&[(1, 'x'), (5, 'y'), (3, 'z')])]).unwrap();
        let got: Vec<(u64, usize, char)> = m.collect();
        assert_eq!(got, [(1, 1, 'x'), (5, 0, 'a'), (5, 0, 'b'), (5, 1, 'y'), (3, 1, 'z'), (9, 0, 'c')]);
    }

    /// Against a stable sort of every item by (time, source), on random monotone sources.
    #[test]
    fn equals_a_stable_sort_of_monotone_sources() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..200 {
            let k = rng.random_range(1..8);
            let lists: Vec<Vec<(u64, char)>> = (0..k)
                .map(|_| {
                    let mut t = 0;
                    (0..rng.random_range(0..20))
                        .map(|_| {
                            t += rng.random_range(0..3);
                            (t, char::from(b'a' + rng.random_range(0..26u8)))
                        })
                        .collect()
                })
                .collect();
            let mut want: Vec<(u64, usize, char)> =
                lists.iter().enumerate().flat_map(|(i, l)| l.iter().map(move |&(t, c)| (t, i, c))).collect();
            want.sort_by_key(|&(t, i, _)| (t, i));
            let got: Vec<_> = KMerge::new(lists.iter().map(|l| list(l)).collect()).unwrap().collect();
            assert_eq!(got, want);
        }
    }

    /// A failing source: the error comes out of the call that asked it, and the merge goes on
    /// with the others.
    #[test]
    fn a_source_error_is_returned() {
        struct Failing(u32);
        impl Source for Failing {
            type Item = u32;
            type Error = &'static str;
            fn next(&mut self) -> Result<Option<(u64, u32)>, &'static str> {
                self.0 += 1;
                if self.0 == 2 {
                    Err("broken")
                } else {
                    Ok((self.0 < 4).then_some((u64::from(self.0), self.0)))
                }
            }
        }
        let mut m = KMerge::new(vec![Failing(0)]).unwrap();
        assert_eq!(m.next_from(), Err("broken"));
        assert_eq!(m.next_from(), Ok(None));
    }
}
