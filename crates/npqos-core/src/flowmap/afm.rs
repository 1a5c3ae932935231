//! The active flow mapping (AFM) table (dqs section 4): `M` slots, each the root of a binary
//! search tree of the active flows hashed to it, keyed by flow id, mapping each flow to a `u32`
//! value (its physical queue).
//!
//! Nodes live in one arena (`Vec`) with a free list, linked by `u32` indices with parent
//! pointers, so after warm-up no operation allocates. Every operation reports its cost in the
//! paper's unit: one cycle per node compared (section 6; the hash is one more cycle, counted by
//! the caller).
//!
//! Deletion follows the paper's three cases (section 4.2 (3)), including its two-children rule:
//! `x`'s right subtree is hung below the largest node of `x`'s left subtree, and `x`'s left child
//! takes `x`'s place. That rule keeps every other node where it was, but it can make the tree
//! deeper than the usual successor splice would ([`DeleteRule::Splice`], offered for comparison).

use crate::flow::FlowKey;
use core::cmp::Ordering;

/// Index of "no node".
pub const NIL: u32 = u32::MAX;

/// How a node with two children is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeleteRule {
    /// dqs section 4.2 (3): the right subtree goes below the maximum of the left subtree; the
    /// left child replaces the deleted node.
    #[default]
    Paper,
    /// The textbook rule: the maximum of the left subtree (in-order predecessor) is spliced out
    /// and takes the deleted node's place.
    Splice,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    key: FlowKey,
    value: u32,
    left: u32,
    right: u32,
    parent: u32,
    slot: u32,
}

/// Result of [`AfmTable::find`]: the node if found, else where the key would be inserted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Find {
    Found { node: u32, value: u32, compares: u32 },
    Vacant(Vacancy),
}

/// Where an unsuccessful search ended: insertion there needs no second search (the paper's
/// combined search-then-insert).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vacancy {
    pub slot: u32,
    parent: u32,
    go_left: bool,
    /// Nodes compared by the unsuccessful search.
    pub compares: u32,
    /// Generation of the table when the search ran; insertion checks it.
    generation: u64,
}

/// Occupancy of the slots, maintained in O(1) per insert and delete.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotStats {
    /// Slots holding at least one flow.
    pub nonempty: u32,
    /// Slots holding more than one flow (dqs Table 2's P(1) counts these).
    pub multi: u32,
    /// Largest number of flows ever held by one slot.
    pub worst: u32,
}

/// One slot: the root of its tree and the flows in it, side by side so that one cache line
/// brings both (a search reads the root, an insert or delete writes both).
#[derive(Clone, Copy, Debug)]
struct Slot {
    root: u32,
    len: u32,
}

/// The AFM table. See the module documentation.
#[derive(Clone)]
pub struct AfmTable {
    slots: Vec<Slot>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    len: usize,
    stats: SlotStats,
    rule: DeleteRule,
    generation: u64,
}

impl AfmTable {
    /// A table of `slots` slots with room for `capacity` flows before the arena grows.
    pub fn new(slots: u32, capacity: usize, rule: DeleteRule) -> Result<Self, crate::Error> {
        if slots == 0 {
            return Err(crate::Error::BadParameter {
                parameter: "AFM slots",
                value: "0".into(),
                expected: "at least 1",
            });
        }
        Ok(AfmTable {
            slots: vec![Slot { root: NIL, len: 0 }; slots as usize],
            nodes: Vec::with_capacity(capacity),
            free: Vec::new(),
            len: 0,
            stats: SlotStats::default(),
            rule,
            generation: 0,
        })
    }

    pub fn slots(&self) -> u32 {
        self.slots.len() as u32
    }
    /// A hint: slot `slot` is searched soon, so its root starts loading now (no effect on
    /// results; an out-of-range slot is ignored).
    #[inline]
    pub fn prefetch(&self, slot: u32) {
        crate::hint::prefetch(&self.slots, slot as usize);
    }
    /// A hint one step on from [`Self::prefetch`]: slot `slot` (loaded by then) is searched
    /// soon, so its tree's root node starts loading now (no effect on results).
    #[inline]
    pub fn prefetch_root(&self, slot: u32) {
        if let Some(s) = self.slots.get(slot as usize) {
            crate::hint::prefetch_whole(&self.nodes, s.root as usize);
        }
    }
    /// Active flows (`l` of eq 5).
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn slot_len(&self, slot: u32) -> u32 {
        self.slots[slot as usize].len
    }
    pub fn stats(&self) -> SlotStats {
        self.stats
    }
    /// Nodes the arena holds (in use + free): the table's high-water mark.
    pub fn arena_nodes(&self) -> usize {
        self.nodes.len()
    }
    pub fn key(&self, node: u32) -> &FlowKey {
        &self.nodes[node as usize].key
    }
    pub fn value(&self, node: u32) -> u32 {
        self.nodes[node as usize].value
    }
    pub fn set_value(&mut self, node: u32, value: u32) {
        self.nodes[node as usize].value = value;
    }
    /// Bytes the table has used at its high-water mark: slots (root and length, 8 bytes each)
    /// and every node the arena has handed out (in use or free). Reserved but never used
    /// arena capacity is not counted.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * core::mem::size_of::<Slot>() + self.nodes.len() * (core::mem::size_of::<Node>() + 4)
    }

    /// Searches slot `slot` for `key` (dqs section 4.2 (1)).
    pub fn find(&self, slot: u32, key: &FlowKey) -> Find {
        let mut cur = self.slots[slot as usize].root;
        let mut parent = NIL;
        let mut go_left = false;
        let mut compares = 0;
        while cur != NIL {
            let n = &self.nodes[cur as usize];
            compares += 1;
            match key.cmp(&n.key) {
                Ordering::Equal => return Find::Found { node: cur, value: n.value, compares },
                Ordering::Less => {
                    parent = cur;
                    go_left = true;
                    cur = n.left;
                }
                Ordering::Greater => {
                    parent = cur;
                    go_left = false;
                    cur = n.right;
                }
            }
        }
        Find::Vacant(Vacancy { slot, parent, go_left, compares, generation: self.generation })
    }

    /// Inserts `key -> value` where an unsuccessful [`find`](Self::find) ended (the new node is a
    /// leaf: section 4.2 (2)). Panics if the table changed since that search.
    pub fn insert_at(&mut self, v: Vacancy, key: FlowKey, value: u32) -> u32 {
        assert_eq!(v.generation, self.generation, "AFM table changed between find and insert_at");
        let node = Node { key, value, left: NIL, right: NIL, parent: v.parent, slot: v.slot };
        let id = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                assert!(self.nodes.len() < NIL as usize, "AFM arena full");
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        if v.parent == NIL {
            self.slots[v.slot as usize].root = id;
        } else if v.go_left {
            self.nodes[v.parent as usize].left = id;
        } else {
            self.nodes[v.parent as usize].right = id;
        }
        self.len += 1;
        self.generation += 1;
        let l = &mut self.slots[v.slot as usize].len;
        *l += 1;
        match *l {
            1 => self.stats.nonempty += 1,
            2 => self.stats.multi += 1,
            _ => {}
        }
        self.stats.worst = self.stats.worst.max(*l);
        id
    }

    /// Search-then-insert: the value of `key`, inserting `value()` if absent. Returns
    /// (node, found, compares).
    pub fn get_or_insert_with(&mut self, slot: u32, key: FlowKey, value: impl FnOnce() -> u32) -> (u32, bool, u32) {
        match self.find(slot, &key) {
            Find::Found { node, compares, .. } => (node, true, compares),
            Find::Vacant(v) => (self.insert_at(v, key, value()), false, v.compares),
        }
    }

    /// Deletes `node` (dqs section 4.2 (3)); returns the pointer steps taken to find the
    /// maximum of the left subtree (0 unless the node had two children).
    pub fn remove(&mut self, node: u32) -> u32 {
        let x = self.nodes[node as usize];
        let mut steps = 0;
        let replacement = match (x.left, x.right) {
            (NIL, NIL) => NIL,
            (c, NIL) | (NIL, c) => c,
            (l, r) => {
                let mut m = l;
                while self.nodes[m as usize].right != NIL {
                    m = self.nodes[m as usize].right;
                    steps += 1;
                }
                match self.rule {
                    DeleteRule::Paper => {
                        self.nodes[m as usize].right = r;
                        self.nodes[r as usize].parent = m;
                        l
                    }
                    DeleteRule::Splice => {
                        if m != l {
                            // Splice m out: its left child takes its place under its parent.
                            let (mp, ml) = (self.nodes[m as usize].parent, self.nodes[m as usize].left);
                            self.nodes[mp as usize].right = ml;
                            if ml != NIL {
                                self.nodes[ml as usize].parent = mp;
                            }
                            self.nodes[m as usize].left = l;
                            self.nodes[l as usize].parent = m;
                        }
                        self.nodes[m as usize].right = r;
                        self.nodes[r as usize].parent = m;
                        m
                    }
                }
            }
        };
        if replacement != NIL {
            self.nodes[replacement as usize].parent = x.parent;
        }
        if x.parent == NIL {
            self.slots[x.slot as usize].root = replacement;
        } else if self.nodes[x.parent as usize].left == node {
            self.nodes[x.parent as usize].left = replacement;
        } else {
            self.nodes[x.parent as usize].right = replacement;
        }
        self.free.push(node);
        self.len -= 1;
        self.generation += 1;
        let l = &mut self.slots[x.slot as usize].len;
        *l -= 1;
        match *l {
            0 => self.stats.nonempty -= 1,
            1 => self.stats.multi -= 1,
            _ => {}
        }
        steps
    }

    /// Height (nodes on the longest root-leaf path) of slot `slot`'s tree.
    pub fn height(&self, slot: u32) -> u32 {
        let mut stack = vec![(self.slots[slot as usize].root, 1u32)];
        let mut h = 0;
        while let Some((n, d)) = stack.pop() {
            if n == NIL {
                continue;
            }
            h = h.max(d);
            let nd = &self.nodes[n as usize];
            stack.push((nd.left, d + 1));
            stack.push((nd.right, d + 1));
        }
        h
    }

    /// Checks every invariant (BST order, parent pointers, slot membership, counts); returns a
    /// description of the first violation. O(size); for tests and debug modes.
    pub fn check(&self) -> Result<(), String> {
        let mut total = 0usize;
        let mut stats = SlotStats { worst: self.stats.worst, ..Default::default() };
        for (s, &Slot { root, len }) in self.slots.iter().enumerate() {
            let mut count = 0u32;
            if root != NIL && self.nodes[root as usize].parent != NIL {
                return Err(format!("slot {s}: root {root} has a parent"));
            }
            // (node, lower bound, upper bound)
            let mut stack: Vec<(u32, Option<FlowKey>, Option<FlowKey>)> = vec![(root, None, None)];
            while let Some((n, lo, hi)) = stack.pop() {
                if n == NIL {
                    continue;
                }
                let nd = &self.nodes[n as usize];
                count += 1;
                if count as usize > self.nodes.len() {
                    return Err(format!("slot {s}: cycle"));
                }
                if nd.slot as usize != s {
                    return Err(format!("node {n} in slot {s} says slot {}", nd.slot));
                }
                if lo.is_some_and(|lo| nd.key <= lo) || hi.is_some_and(|hi| nd.key >= hi) {
                    return Err(format!("slot {s}: node {n} breaks the BST order"));
                }
                for c in [nd.left, nd.right] {
                    if c != NIL && self.nodes[c as usize].parent != n {
                        return Err(format!("node {c}: parent pointer is not {n}"));
                    }
                }
                stack.push((nd.left, lo, Some(nd.key)));
                stack.push((nd.right, Some(nd.key), hi));
            }
            if count != len {
                return Err(format!("slot {s}: {count} nodes, length says {len}"));
            }
            stats.nonempty += (count > 0) as u32;
            stats.multi += (count > 1) as u32;
            if count > self.stats.worst {
                return Err(format!("slot {s}: {count} nodes above the recorded worst {}", self.stats.worst));
            }
            total += count as usize;
        }
        if total != self.len || total + self.free.len() != self.nodes.len() {
            return Err(format!(
                "{total} reachable, len {}, {} free of {}",
                self.len,
                self.free.len(),
                self.nodes.len()
            ));
        }
        if stats != self.stats {
            return Err(format!("slot statistics {:?}, recount {:?}", self.stats, stats));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    fn key(i: u32) -> FlowKey {
        FlowKey { src_port: (i >> 16) as u16, dst_port: i as u16, proto: 6, ..Default::default() }
    }

    #[test]
    fn paper_delete_cases() {
        // One slot; keys inserted 50, 30, 70, 20, 40, 35, 45.
        let mut t = AfmTable::new(1, 8, DeleteRule::Paper).unwrap();
        let mut ids = BTreeMap::new();
        for k in [50, 30, 70, 20, 40, 35, 45] {
            let (n, found, _) = t.get_or_insert_with(0, key(k), || k);
            assert!(!found);
            ids.insert(k, n);
        }
        assert_eq!(t.height(0), 4);
        // Leaf.
        assert_eq!(t.remove(ids[&20]), 0);
        t.check().unwrap();
        // Two children (30 has only 40 now; 40 has 35 and 45): delete 40: 45 goes below
        // max(left of 40) = 35, 35 replaces 40 under 30.
        assert_eq!(t.remove(ids[&40]), 0);
        t.check().unwrap();
        assert!(matches!(t.find(0, &key(45)), Find::Found { compares: 4, .. })); // 50, 30, 35, 45
                                                                                 // One child: 30 now has only the right child 35.
        t.remove(ids[&30]);
        t.check().unwrap();
        assert!(matches!(t.find(0, &key(35)), Find::Found { compares: 2, .. }));
        // Root with two children: 50 (left 35, right 70): max of left subtree is 45.
        assert_eq!(t.remove(ids[&50]), 1);
        t.check().unwrap();
        assert!(matches!(t.find(0, &key(70)), Find::Found { compares: 3, .. })); // 35, 45, 70
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn compares_count_nodes_on_the_path() {
        let mut t = AfmTable::new(2, 8, DeleteRule::Paper).unwrap();
        assert!(matches!(t.find(1, &key(5)), Find::Vacant(Vacancy { compares: 0, .. })));
        t.get_or_insert_with(1, key(5), || 0);
        t.get_or_insert_with(1, key(3), || 0);
        assert_eq!(t.get_or_insert_with(1, key(4), || 0).2, 2);
        assert!(matches!(t.find(1, &key(4)), Find::Found { compares: 3, .. }));
        assert!(matches!(t.find(0, &key(4)), Find::Vacant(Vacancy { compares: 0, .. })));
        assert_eq!(t.stats(), SlotStats { nonempty: 1, multi: 1, worst: 3 });
    }

    #[test]
    #[should_panic(expected = "changed between find")]
    fn stale_vacancy_is_refused() {
        let mut t = AfmTable::new(1, 4, DeleteRule::Paper).unwrap();
        let Find::Vacant(v) = t.find(0, &key(1)) else { unreachable!() };
        t.get_or_insert_with(0, key(2), || 0);
        t.insert_at(v, key(1), 0);
    }

    /// The table against a BTreeMap model over many random operations: same contents, same
    /// answers, invariants intact. Keys from a small universe so deletes and re-inserts are common.
    fn differential(rule: DeleteRule, slots: u32, ops: usize, universe: u32, seed: u64, check_every: usize) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut t = AfmTable::new(slots, 64, rule).unwrap();
        let mut model: BTreeMap<FlowKey, (u32, u32)> = BTreeMap::new(); // key -> (node, value)
        for i in 0..ops {
            let k = key(rng.random_range(0..universe));
            let slot = ((k.dst_port as u32).wrapping_mul(2654435761) >> 7) % slots;
            if rng.random_bool(0.5) {
                let v = i as u32;
                let (node, found, _) = t.get_or_insert_with(slot, k, || v);
                match model.get(&k) {
                    Some(&(n, val)) => {
                        assert!(found);
                        assert_eq!((node, t.value(node)), (n, val));
                    }
                    None => {
                        assert!(!found);
                        model.insert(k, (node, v));
                    }
                }
            } else if let Some((n, _)) = model.remove(&k) {
                t.remove(n);
                assert!(matches!(t.find(slot, &k), Find::Vacant(_)));
            }
            assert_eq!(t.len(), model.len());
            if check_every > 0 && i % check_every == 0 {
                t.check().unwrap();
            }
        }
        t.check().unwrap();
        for (k, (n, v)) in &model {
            assert_eq!(t.key(*n), k);
            assert_eq!(t.value(*n), *v);
        }
    }

    #[test]
    fn matches_btreemap_over_two_million_operations() {
        differential(DeleteRule::Paper, 16, 2_000_000, 4000, 1, 50_000);
        differential(DeleteRule::Splice, 16, 1_000_000, 4000, 2, 50_000);
    }

    proptest! {
        #[test]
        fn invariants_hold_after_every_operation(seed in any::<u64>(), slots in 1u32..5, universe in 2u32..60) {
            differential(DeleteRule::Paper, slots, 400, universe, seed, 1);
            differential(DeleteRule::Splice, slots, 400, universe, seed, 1);
        }
    }
}
