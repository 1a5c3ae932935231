//! A loser tree: the earliest of `n` keys, one per member, where the member that wins is the one
//! whose key changes next (a model's per-queue arrival stream as an engine source).
//!
//! Each member (a leaf) has one key. The tree is the implicit complete binary tree of `2n - 1`
//! positions (leaf `j` at position `n + j`, the parent of `p` at `p / 2`); each inner node holds
//! the member that *lost* the match played there, and node 0 the overall winner (Knuth's
//! replacement selection, TAOCP 5.4.1). Giving the winner a new key ([`Tournament::replace_top`])
//! replays the matches on its path to the root only: `ceil(log2 n)` steps, each a comparison of
//! the carried key with the node's loser's, and no branch on their outcome (both members are
//! read, the larger stays, the smaller goes on), so the steps' loads, whose addresses the
//! path fixes in advance, overlap. That is what a per-member stream needs, where a general event
//! queue pays a push and a pop and its entries move between levels.
//!
//! Keys are `u128` and distinct (the engine's `(time, sequence)` as one integer, see
//! [`super::EventKey::packed`]), so the order, and with it every result, is exact.

use std::hint::select_unpredictable;

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct Tournament {
    /// Member `j`'s key.
    keys: Vec<u128>,
    /// Position `p` in `1..n`: the member that lost the match there; position 0: the winner.
    nodes: Vec<u32>,
}

impl Tournament {
    /// A tournament over `keys.len()` members (at least one, fewer than 2^31), member `j` with
    /// key `keys[j]`.
    pub fn new(keys: Vec<u128>) -> Self {
        let n = keys.len();
        assert!((1..1 << 31).contains(&n), "a tournament has 1 to 2^31 - 1 members, not {n}");
        // winners[p]: the member that won at position p (leaves: themselves).
        let mut winners = vec![0u32; 2 * n];
        for j in 0..n {
            winners[n + j] = j as u32;
        }
        let mut nodes = vec![0u32; n];
        for p in (1..n).rev() {
            let (a, b) = (winners[2 * p], winners[2 * p + 1]);
            let (w, l) = if keys[a as usize] < keys[b as usize] { (a, b) } else { (b, a) };
            winners[p] = w;
            nodes[p] = l;
        }
        // Position 1 is the root, or with one member that member's leaf.
        nodes[0] = winners[1];
        Tournament { keys, nodes }
    }

    /// Members.
    pub fn len(&self) -> usize {
        self.keys.len()
    }
    /// Always false: a tournament has at least one member.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The member with the least key.
    #[inline(always)]
    pub fn top(&self) -> u32 {
        self.nodes[0]
    }
    /// The least key.
    #[inline(always)]
    pub fn top_key(&self) -> u128 {
        self.keys[self.nodes[0] as usize]
    }

    /// Gives the winner the key `key` and plays its matches again.
    #[inline]
    pub fn replace_top(&mut self, key: u128) {
        let n = self.keys.len();
        let (nodes, keys) = (&mut self.nodes[..n], &mut self.keys[..n]);
        let mut cur = nodes[0];
        keys[cur as usize] = key;
        let mut k = key;
        let mut p = (n + cur as usize) / 2;
        // (p only falls from here: the compiler checks it against n once.)
        assert!(p < n);
        while p > 0 {
            let other = nodes[p];
            let ko = keys[other as usize];
            // The larger stays, the smaller goes on. Which one wins is as good as random, so
            // these should be selects, not a branch; the hint asks for that. (Written as `if`,
            // the compiler made a branch of it in one build out of two: 9 mispredictions an
            // arrival, kim's row 1.5 times slower. A profile shows whether the hint held.)
            let up = ko < k;
            nodes[p] = select_unpredictable(up, cur, other);
            cur = select_unpredictable(up, other, cur);
            k = select_unpredictable(up, ko, k);
            p /= 2;
        }
        nodes[0] = cur;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// Members pop in key order, each coming back with a later key, exactly as from an ordered
    /// set, for sizes around powers of two (the leaves then sit on two levels).
    #[test]
    fn pops_in_key_order_like_an_ordered_set() {
        for n in [1usize, 2, 3, 5, 7, 8, 9, 63, 64, 65, 1000] {
            // Times in the high bits, a counter below (distinct keys, as the engine's are).
            let keys: Vec<u128> = (0..n as u128).map(|j| ((j * 7919) % 1009) << 32 | j).collect();
            let mut t = Tournament::new(keys.clone());
            let mut set: BTreeSet<(u128, u32)> = keys.iter().enumerate().map(|(j, &k)| (k, j as u32)).collect();
            for step in 0..5 * n as u128 {
                let &(k, j) = set.first().unwrap();
                assert_eq!((t.top_key(), t.top()), (k, j), "n {n}, step {step}");
                set.pop_first();
                let next = ((k >> 32) + 1 + (step * 104_729) % 5003) << 32 | (n as u128 + step);
                set.insert((next, j));
                t.replace_top(next);
            }
        }
    }

    proptest! {
        /// Random sizes and random later keys (distinct: the step number breaks ties, as the
        /// engine's sequence does): the same member and key as an ordered set, every time.
        #[test]
        fn matches_an_ordered_set(n in 1usize..300, gaps in prop::collection::vec(0u64..50, 1..2000), seed in 0u64..1000) {
            let keys: Vec<u128> = (0..n as u128).map(|j| ((j * 31 + seed as u128) % 97) << 64 | j).collect();
            let mut t = Tournament::new(keys.clone());
            let mut set: BTreeSet<(u128, u32)> = keys.iter().enumerate().map(|(j, &k)| (k, j as u32)).collect();
            for (step, g) in gaps.into_iter().enumerate() {
                let &(k, j) = set.first().unwrap();
                prop_assert_eq!((t.top_key(), t.top()), (k, j));
                set.pop_first();
                let next = (((k >> 64) + g as u128) << 64) | (n + step) as u128;
                set.insert((next, j));
                t.replace_top(next);
            }
        }
    }
}
