//! An order-statistic multiset of wait times: insert, remove, k-th smallest and rank
//! queries in O(log U) for U distinct values.
//!
//! A treap over distinct values, each node carrying a multiplicity and its subtree's
//! total count, stored in an arena (indices, not pointers). A node's priority is a hash
//! of its value, so the tree's shape depends only on the set of values it holds: the
//! structure is deterministic and `Clone` is a plain vector copy.
//!
//! May import: std only.

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Node {
    key: u64,
    prio: u64,
    /// Copies of `key` held.
    cnt: u32,
    /// Total count in this subtree (with multiplicities).
    size: u32,
    left: u32,
    right: u32,
}

/// A multiset of `u64` with order statistics.
#[derive(Debug, Clone)]
pub struct OsTree {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
}

impl Default for OsTree {
    fn default() -> Self {
        Self::new()
    }
}

fn mix(x: u64) -> u64 {
    // splitmix64's finaliser: a bijection, so distinct keys get distinct priorities.
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl OsTree {
    /// An empty multiset.
    pub fn new() -> Self {
        Self {
            nodes: Vec::new(),
            free: Vec::new(),
            root: NIL,
        }
    }

    /// Number of values held (with multiplicity).
    pub fn len(&self) -> usize {
        self.size(self.root) as usize
    }

    /// Whether the multiset is empty.
    pub fn is_empty(&self) -> bool {
        self.root == NIL
    }

    /// Removes every value (keeps the allocation).
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.free.clear();
        self.root = NIL;
    }

    fn size(&self, i: u32) -> u32 {
        if i == NIL {
            0
        } else {
            self.nodes[i as usize].size
        }
    }

    fn fix(&mut self, i: u32) {
        let n = self.nodes[i as usize];
        self.nodes[i as usize].size = n.cnt + self.size(n.left) + self.size(n.right);
    }

    fn rotate_right(&mut self, i: u32) -> u32 {
        let l = self.nodes[i as usize].left;
        self.nodes[i as usize].left = self.nodes[l as usize].right;
        self.nodes[l as usize].right = i;
        self.fix(i);
        self.fix(l);
        l
    }

    fn rotate_left(&mut self, i: u32) -> u32 {
        let r = self.nodes[i as usize].right;
        self.nodes[i as usize].right = self.nodes[r as usize].left;
        self.nodes[r as usize].left = i;
        self.fix(i);
        self.fix(r);
        r
    }

    fn alloc(&mut self, key: u64) -> u32 {
        let node = Node {
            key,
            prio: mix(key),
            cnt: 1,
            size: 1,
            left: NIL,
            right: NIL,
        };
        if let Some(i) = self.free.pop() {
            self.nodes[i as usize] = node;
            i
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        }
    }

    /// Adds one copy of `key`.
    pub fn insert(&mut self, key: u64) {
        self.root = self.insert_at(self.root, key);
    }

    fn insert_at(&mut self, i: u32, key: u64) -> u32 {
        if i == NIL {
            return self.alloc(key);
        }
        let node = self.nodes[i as usize];
        if key == node.key {
            self.nodes[i as usize].cnt += 1;
            self.nodes[i as usize].size += 1;
            return i;
        }
        if key < node.key {
            let l = self.insert_at(node.left, key);
            self.nodes[i as usize].left = l;
            self.nodes[i as usize].size += 1;
            if self.nodes[l as usize].prio > self.nodes[i as usize].prio {
                return self.rotate_right(i);
            }
        } else {
            let r = self.insert_at(node.right, key);
            self.nodes[i as usize].right = r;
            self.nodes[i as usize].size += 1;
            if self.nodes[r as usize].prio > self.nodes[i as usize].prio {
                return self.rotate_left(i);
            }
        }
        i
    }

    /// Removes one copy of `key`; returns whether it was present.
    pub fn remove(&mut self, key: u64) -> bool {
        if !self.contains(key) {
            return false;
        }
        self.root = self.remove_at(self.root, key);
        true
    }

    /// Whether at least one copy of `key` is held.
    pub fn contains(&self, key: u64) -> bool {
        let mut i = self.root;
        while i != NIL {
            let n = &self.nodes[i as usize];
            if key == n.key {
                return true;
            }
            i = if key < n.key { n.left } else { n.right };
        }
        false
    }

    /// Removes one copy of a key known to be present.
    fn remove_at(&mut self, i: u32, key: u64) -> u32 {
        let node = self.nodes[i as usize];
        if key < node.key {
            let l = self.remove_at(node.left, key);
            self.nodes[i as usize].left = l;
            self.nodes[i as usize].size -= 1;
            return i;
        }
        if key > node.key {
            let r = self.remove_at(node.right, key);
            self.nodes[i as usize].right = r;
            self.nodes[i as usize].size -= 1;
            return i;
        }
        if node.cnt > 1 {
            self.nodes[i as usize].cnt -= 1;
            self.nodes[i as usize].size -= 1;
            return i;
        }
        // Last copy: rotate the node down until it is a leaf or has one child.
        match (node.left, node.right) {
            (NIL, NIL) => {
                self.free.push(i);
                NIL
            }
            (NIL, r) => {
                self.free.push(i);
                r
            }
            (l, NIL) => {
                self.free.push(i);
                l
            }
            (l, r) => {
                if self.nodes[l as usize].prio > self.nodes[r as usize].prio {
                    let top = self.rotate_right(i);
                    let sub = self.remove_at(i, key);
                    self.nodes[top as usize].right = sub;
                    self.fix(top);
                    top
                } else {
                    let top = self.rotate_left(i);
                    let sub = self.remove_at(i, key);
                    self.nodes[top as usize].left = sub;
                    self.fix(top);
                    top
                }
            }
        }
    }

    /// The k-th smallest value, 1-based (`select(1)` is the minimum); `None` when
    /// k is 0 or exceeds the count.
    pub fn select(&self, k: usize) -> Option<u64> {
        if k == 0 || k > self.len() {
            return None;
        }
        let mut k = k as u32;
        let mut i = self.root;
        loop {
            let n = &self.nodes[i as usize];
            let ls = self.size(n.left);
            if k <= ls {
                i = n.left;
            } else if k <= ls + n.cnt {
                return Some(n.key);
            } else {
                k -= ls + n.cnt;
                i = n.right;
            }
        }
    }

    /// How many values are ≤ `t`.
    pub fn count_le(&self, t: u64) -> usize {
        let mut acc = 0u32;
        let mut i = self.root;
        while i != NIL {
            let n = &self.nodes[i as usize];
            if t < n.key {
                i = n.left;
            } else {
                acc += self.size(n.left) + n.cnt;
                i = n.right;
            }
        }
        acc as usize
    }

    /// The smallest value held.
    pub fn min(&self) -> Option<u64> {
        self.select(1)
    }

    /// The largest value held.
    pub fn max(&self) -> Option<u64> {
        self.select(self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64),
        Remove(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        // A small key range forces duplicates and removals of present keys.
        prop_oneof![
            3 => (0u64..50).prop_map(Op::Insert),
            1 => (0u64..50).prop_map(Op::Remove),
            1 => any::<u64>().prop_map(Op::Insert),
        ]
    }

    proptest! {
        #[test]
        fn agrees_with_a_sorted_vector(ops in proptest::collection::vec(op(), 0..400), probes in proptest::collection::vec(0u64..60, 0..20)) {
            let mut tree = OsTree::new();
            let mut naive: Vec<u64> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(k) => { tree.insert(k); naive.push(k); naive.sort_unstable(); }
                    Op::Remove(k) => {
                        let had = naive.iter().position(|&x| x == k);
                        if let Some(p) = had { naive.remove(p); }
                        prop_assert_eq!(tree.remove(k), had.is_some());
                    }
                }
                prop_assert_eq!(tree.len(), naive.len());
            }
            for k in 0..=naive.len() + 1 {
                let expect = if k == 0 { None } else { naive.get(k - 1).copied() };
                prop_assert_eq!(tree.select(k), expect);
            }
            for t in probes {
                prop_assert_eq!(tree.count_le(t), naive.iter().filter(|&&x| x <= t).count());
            }
            prop_assert_eq!(tree.min(), naive.first().copied());
            prop_assert_eq!(tree.max(), naive.last().copied());
        }
    }

    #[test]
    fn large_sequence_stays_consistent() {
        let mut tree = OsTree::new();
        let mut window = std::collections::VecDeque::new();
        let mut x = 1u64;
        for i in 0..100_000u64 {
            x = mix(x ^ i) % 100_000;
            tree.insert(x);
            window.push_back(x);
            if window.len() > 5_000 {
                let old = window.pop_front().unwrap();
                assert!(tree.remove(old));
            }
        }
        let mut sorted: Vec<_> = window.iter().copied().collect();
        sorted.sort_unstable();
        for k in [1, 2, 100, 2_500, 4_999, 5_000] {
            assert_eq!(tree.select(k), Some(sorted[k - 1]));
        }
    }
}
