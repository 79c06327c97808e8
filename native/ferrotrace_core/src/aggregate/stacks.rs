//! Call stacks of the traced functions, for folded-stack exports (flame graphs).
//!
//! A trie of call paths fed by the aggregator from the per-process frames it already keeps:
//! a call [`enter`](StackPaths::enter)s the child of its caller's node (one hash lookup per
//! call, its id kept in the frame), and when the call returns its latency is added to that
//! node ([`record`](StackPaths::record): an index, no lookup). Exclusive (self) time is
//! derived when read: a node's inclusive time minus its children's, since every child call
//! ends inside its parent. Hashing whole paths at each return instead doubled the
//! collector's cost per event (31 to 71 ns in `make collector-ceiling`).
//!
//! Bounded: at most `max_paths` nodes, paths of at most `MAX_PATH_DEPTH` frames; calls under
//! a path beyond either bound are counted when they return (`overflow`, `too_deep`), not
//! kept. Exclusive times of a node whose children overflowed are then over-stated, which the
//! counters show.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::memory::{map_bytes, vec_bytes};
use crate::event::Mfa;
use crate::hasher::WordHasher;

/// Deepest path kept: deeper calls (long recursions) are counted in `too_deep`.
pub const MAX_PATH_DEPTH: usize = 64;
/// Distinct paths kept by default.
pub const DEFAULT_MAX_PATHS: usize = 10_000;

/// The node id of a frame with no traced caller's node: the parent of outermost calls.
pub const ROOT: u32 = u32::MAX;
/// The node id of a call whose path was not kept: `max_paths` reached.
const OVERFLOW: u32 = u32::MAX - 1;
/// The node id of a call whose path was not kept: deeper than `MAX_PATH_DEPTH`.
const TOO_DEEP: u32 = u32::MAX - 2;

/// One folded line: the path (outermost first) and its figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Folded {
    /// Outermost call first.
    pub path: Vec<Mfa>,
    /// Calls that ended on this path.
    pub count: u64,
    /// Time in these calls, ns.
    pub inclusive_ns: u64,
    /// Time in these calls minus the time in the traced calls they made, ns.
    pub exclusive_ns: u64,
}

struct Node {
    parent: u32,
    mfa: Mfa,
    depth: u32,
    count: u64,
    inclusive_ns: u64,
}

/// The trie of one session's call paths.
pub struct StackPaths {
    nodes: Vec<Node>,
    children: HashMap<(u32, Mfa), u32, BuildHasherDefault<WordHasher>>,
    /// The last `(parent, mfa)` entered and its node: a hot function called again and again
    /// from the same place skips the hash lookup.
    last: Option<((u32, Mfa), u32)>,
    max_paths: usize,
    overflow: u64,
    too_deep: u64,
}

impl StackPaths {
    /// Heap bytes: the trie's nodes and its index (estimated from its capacity).
    pub fn bytes(&self) -> usize {
        vec_bytes::<Node>(self.nodes.capacity()) + map_bytes(&self.children)
    }

    /// Keeps at most `max_paths` distinct paths.
    pub fn new(max_paths: usize) -> Self {
        StackPaths { nodes: Vec::new(), children: HashMap::default(), last: None, max_paths, overflow: 0, too_deep: 0 }
    }

    /// The node of a call of `mfa` made under `parent` (`ROOT` for an outermost call), to be
    /// kept in the call's frame and given to [`StackPaths::record`] when it returns.
    pub fn enter(&mut self, parent: u32, mfa: Mfa) -> u32 {
        if parent == OVERFLOW || parent == TOO_DEEP {
            return parent;
        }
        match self.last {
            Some((key, id)) if key == (parent, mfa) => return id,
            _ => {}
        }
        if let Some(&id) = self.children.get(&(parent, mfa)) {
            self.last = Some(((parent, mfa), id));
            return id;
        }
        let depth = if parent == ROOT { 1 } else { self.nodes[parent as usize].depth + 1 };
        if depth as usize > MAX_PATH_DEPTH {
            return TOO_DEEP;
        }
        if self.nodes.len() >= self.max_paths {
            return OVERFLOW;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(Node { parent, mfa, depth, count: 0, inclusive_ns: 0 });
        self.children.insert((parent, mfa), id);
        id
    }

    /// Adds a returned call of latency `ns` to its node (from [`StackPaths::enter`]).
    pub fn record(&mut self, node: u32, ns: u64) {
        match node {
            OVERFLOW => self.overflow += 1,
            TOO_DEEP => self.too_deep += 1,
            id => {
                if let Some(n) = self.nodes.get_mut(id as usize) {
                    n.count += 1;
                    n.inclusive_ns = n.inclusive_ns.saturating_add(ns);
                }
            }
        }
    }

    /// Adds `other`'s paths to these (`Aggregator::merged`), path by path (node ids differ
    /// between tries). The merged trie may hold up to both bounds summed: exact while
    /// neither part reached its own.
    pub fn merge_from(&mut self, other: &StackPaths) {
        self.max_paths = self.max_paths.saturating_add(other.max_paths);
        self.last = None;
        // A node's parent comes before it (ids are given in order), so it is mapped first.
        let mut ids = Vec::with_capacity(other.nodes.len());
        for node in &other.nodes {
            let parent = if node.parent == ROOT { ROOT } else { ids[node.parent as usize] };
            let id = match self.children.get(&(parent, node.mfa)) {
                Some(&id) => id,
                None => {
                    let id = self.nodes.len() as u32;
                    self.nodes.push(Node { parent, mfa: node.mfa, depth: node.depth, count: 0, inclusive_ns: 0 });
                    self.children.insert((parent, node.mfa), id);
                    id
                }
            };
            let into = &mut self.nodes[id as usize];
            into.count += node.count;
            into.inclusive_ns = into.inclusive_ns.saturating_add(node.inclusive_ns);
            ids.push(id);
        }
        self.overflow += other.overflow;
        self.too_deep += other.too_deep;
    }

    /// Calls not kept because `max_paths` paths were already kept.
    pub fn overflow(&self) -> u64 {
        self.overflow
    }

    /// Calls not kept because their path was deeper than `MAX_PATH_DEPTH`.
    pub fn too_deep(&self) -> u64 {
        self.too_deep
    }

    /// Distinct paths kept.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True if no path was kept.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every path with a returned call, with inclusive and exclusive time, sorted by path.
    pub fn folded(&self) -> Vec<Folded> {
        let mut children_ns = vec![0u64; self.nodes.len()];
        for node in &self.nodes {
            if node.parent != ROOT {
                let sum = &mut children_ns[node.parent as usize];
                *sum = sum.saturating_add(node.inclusive_ns);
            }
        }
        let mut out: Vec<Folded> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| node.count > 0)
            .map(|(id, node)| {
                let mut path = Vec::with_capacity(node.depth as usize);
                let mut at = id as u32;
                while at != ROOT {
                    let n = &self.nodes[at as usize];
                    path.push(n.mfa);
                    at = n.parent;
                }
                path.reverse();
                Folded {
                    path,
                    count: node.count,
                    inclusive_ns: node.inclusive_ns,
                    exclusive_ns: node.inclusive_ns.saturating_sub(children_ns[id]),
                }
            })
            .collect();
        out.sort_by(|a, b| a.path.iter().map(key).cmp(b.path.iter().map(key)));
        out
    }
}

fn key(mfa: &Mfa) -> (u64, u64, u32) {
    (mfa.module, mfa.function, mfa.arity)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Mfa = Mfa { module: 1, function: 1, arity: 0 };
    const B: Mfa = Mfa { module: 1, function: 2, arity: 0 };
    const C: Mfa = Mfa { module: 1, function: 3, arity: 0 };

    #[test]
    fn exclusive_is_inclusive_minus_children() {
        let mut s = StackPaths::new(100);
        // a(100) calls b(30) which calls c(10), then b(20) again.
        let a = s.enter(ROOT, A);
        let b = s.enter(a, B);
        let c = s.enter(b, C);
        assert_eq!(s.enter(a, B), b, "the same path is the same node");
        s.record(c, 10);
        s.record(b, 30);
        s.record(b, 20);
        s.record(a, 100);
        let f = s.folded();
        let get = |p: &[Mfa]| f.iter().find(|x| x.path == p).unwrap().clone();
        assert_eq!(get(&[A]).exclusive_ns, 50);
        assert_eq!(get(&[A, B]).exclusive_ns, 40);
        assert_eq!(get(&[A, B]).count, 2);
        assert_eq!(get(&[A, B, C]).exclusive_ns, 10);
        // Exclusive times add up to the roots' inclusive time.
        assert_eq!(f.iter().map(|x| x.exclusive_ns).sum::<u64>(), 100);
    }

    #[test]
    fn the_last_path_cache_answers_only_its_own_path() {
        let mut s = StackPaths::new(100);
        let a = s.enter(ROOT, A);
        let b = s.enter(ROOT, B);
        let ab = s.enter(a, B);
        assert_eq!([s.enter(ROOT, A), s.enter(ROOT, A), s.enter(ROOT, B), s.enter(a, B), s.enter(ROOT, B)], [a, a, b, ab, b]);
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn bounded_paths_and_depth() {
        let mut s = StackPaths::new(1);
        let a = s.enter(ROOT, A);
        s.record(a, 1);
        let b = s.enter(ROOT, B);
        s.record(b, 1);
        assert_eq!((s.len(), s.overflow(), s.too_deep()), (1, 1, 0));
        let mut s = StackPaths::new(1000);
        let mut node = ROOT;
        for _ in 0..=MAX_PATH_DEPTH {
            node = s.enter(node, A);
        }
        s.record(node, 1);
        assert_eq!((s.len(), s.too_deep()), (MAX_PATH_DEPTH, 1));
    }

    #[test]
    fn the_aggregator_feeds_paths_from_its_frames() {
        use crate::aggregate::Aggregator;
        use crate::event::{Event, EventKind};
        let ev = |kind, pid, mfa, ts| Event { ts, pid, mfa, kind };
        let mut agg = Aggregator::new(100, 1000);
        // pid 1: a(0..100) { b(10..40) { c(20..30) } ; b(50..70) }; pid 2: b(0..5).
        for (kind, pid, mfa, ts) in [
            (EventKind::Call, 1, A, 0), (EventKind::Call, 1, B, 10), (EventKind::Call, 1, C, 20),
            (EventKind::Call, 2, B, 0), (EventKind::Return, 2, B, 5),
            (EventKind::Return, 1, C, 30), (EventKind::Return, 1, B, 40),
            (EventKind::Call, 1, B, 50), (EventKind::Return, 1, B, 70), (EventKind::Return, 1, A, 100),
        ] {
            agg.record(&ev(kind, pid, mfa, ts));
        }
        let got: Vec<(Vec<Mfa>, u64, u64, u64)> =
            agg.stack_paths().folded().into_iter().map(|f| (f.path, f.count, f.inclusive_ns, f.exclusive_ns)).collect();
        assert_eq!(got, vec![
            (vec![A], 1, 100, 50),
            (vec![A, B], 2, 50, 40),
            (vec![A, B, C], 1, 10, 10),
            (vec![B], 1, 5, 5),
        ]);
        // Exclusive times add up to the outermost calls' time.
        assert_eq!(got.iter().map(|g| g.3).sum::<u64>(), 105);
    }
}
