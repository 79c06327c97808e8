//! Call trees, kept speculatively (`trees => #{slower_than => Ns}`): for each root call, the
//! tree of the traced calls its process made until the root returned, built while it runs
//! and kept only if the root turned out slow (DTrace's `speculation()`, committed when the
//! request is interesting).
//!
//! Built here, on the aggregator's thread, from the calls and returns the aggregator pairs
//! (`Aggregator::record_call`, `record_return`): nothing runs on a scheduler, and the
//! callbacks are the same with trees or without. A node is a paired traced call: its
//! function, start, latency and own time (compensated as the function's figures are:
//! `probe.rs`), and whether it raised. Only the session's traced functions appear; loops
//! (counted without pairing) and calls refused by a bound do not.
//!
//! Roots: by default the outermost traced call of a process (no open traced call below it);
//! with `root => Spec`, a call of a function the spec matches, where the process builds no
//! tree yet. When the root returns after `slower_than` or longer, its tree is offered to the
//! root function's kept trees (the `keep` slowest); otherwise its buffer is reused for the
//! process's next root.
//!
//! Memory is bounded: a tree holds at most `max_nodes` nodes (the calls past it are counted
//! in `dropped`, on the nearest kept ancestor, and in [`TreeCounters::nodes_dropped`]); the
//! trees being built hold at most [`SESSION_NODES`] nodes over the aggregator (a root that
//! finds it full builds no tree: [`TreeCounters::not_built`]); kept trees are `keep` per root
//! function, and root functions are traced functions (`max_functions`).

use crate::memory::{copy_bytes, map_bytes, vec_bytes};
use super::MfaPattern;
use crate::event::Mfa;
use crate::hasher::WordMap;
use crate::term_format::TermCopy;

/// Default trees kept per root function.
pub const DEFAULT_KEEP: usize = 10;
/// Accepted `keep`, inclusive.
pub const KEEP_RANGE: (i64, i64) = (1, 100);
/// Default nodes kept per tree.
pub const DEFAULT_MAX_NODES: usize = 2_000;
/// Accepted `max_nodes`, inclusive.
pub const MAX_NODES_RANGE: (i64, i64) = (1, 100_000);
/// Accepted `slower_than` in ns, inclusive (0 keeps the slowest whatever their latency).
pub const SLOWER_THAN_RANGE: (i64, i64) = (0, super::histogram::MAX_LATENCY_NS as i64);
/// Nodes the trees being built may hold over one aggregator (56 bytes each: 14 MiB).
pub const SESSION_NODES: usize = 262_144;
/// Buffers kept for reuse when their tree is dropped, and the capacity past which one is
/// freed instead: a root call takes no allocation once the process's first tree was built.
const SPARE_BUFFERS: usize = 64;
const SPARE_MAX_NODES: usize = 4_096;
/// The index of a call past `max_nodes` on the open stack: not in the tree.
const NONE: u32 = u32::MAX;

/// What a session keeps of its call trees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreesConfig {
    /// A tree is kept when its root took this long or longer, ns.
    pub slower_than_ns: u64,
    /// Trees kept per root function, the slowest.
    pub keep: usize,
    /// Nodes kept per tree; the rest are counted.
    pub max_nodes: usize,
}

impl Default for TreesConfig {
    fn default() -> Self {
        TreesConfig { slower_than_ns: 0, keep: DEFAULT_KEEP, max_nodes: DEFAULT_MAX_NODES }
    }
}

/// One traced call of a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The function called.
    pub mfa: Mfa,
    /// When the call began, ns on the session's clock.
    pub start_ns: u64,
    /// Call to return (compensated), ns; for a call that never returned (unwound by an
    /// exception that was not traced, or its process's tree ended first) the time until its
    /// caller returned, with `exception` set.
    pub latency_ns: u64,
    /// Its latency less its traced callees' (compensated), ns.
    pub own_ns: u64,
    /// The caller's index in the tree; the root's is its own (0).
    pub parent: u32,
    /// Calls made under this one that the tree had no room for (`max_nodes`).
    pub dropped: u32,
    /// True if the call ended with an exception.
    pub exception: bool,
}

/// A kept tree: its nodes in the order the calls began (a node's caller comes before it).
#[derive(Clone, Debug)]
pub struct Tree {
    /// The calls; the root first.
    pub nodes: Vec<Node>,
    /// The root's process, raw term bits.
    pub pid: u64,
    /// The root's arguments (`args => true`).
    pub args: Option<TermCopy>,
}

impl Tree {
    /// The root's latency, ns.
    pub fn latency_ns(&self) -> u64 {
        self.nodes.first().map_or(0, |n| n.latency_ns)
    }

    /// The calls the tree had no room for.
    pub fn dropped(&self) -> u64 {
        self.nodes.iter().map(|n| u64::from(n.dropped)).sum()
    }

    /// The children of each node, in the order they began.
    pub fn children(&self) -> Vec<Vec<u32>> {
        let mut children = vec![Vec::new(); self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate().skip(1) {
            children[node.parent as usize].push(i as u32);
        }
        children
    }
}

/// What the trees saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeCounters {
    /// Root calls whose tree was built to the end (kept or not).
    pub built: u64,
    /// Trees kept when their root returned (some pushed out later by slower ones).
    pub kept: u64,
    /// Root calls that built no tree: the session's bound of nodes was reached.
    pub not_built: u64,
    /// Trees given up: the root never returned (its process exited, or an untraced
    /// exception unwound it).
    pub abandoned: u64,
    /// Calls left out of trees: past `max_nodes`, or past the aggregator's bound of nodes
    /// being built ([`SESSION_NODES`]).
    pub nodes_dropped: u64,
}

/// One process's tree while its root runs.
#[derive(Default)]
struct Building {
    nodes: Vec<Node>,
    /// The open calls since the root, its own first: (function, index in `nodes` or NONE).
    open: Vec<(Mfa, u32)>,
}

/// The trees of one aggregator: being built per process, and kept per root function.
pub struct Trees {
    config: TreesConfig,
    /// Functions whose calls are roots; empty: the outermost traced call of a process.
    roots: Vec<MfaPattern>,
    building: WordMap<u64, Building>,
    spare: Vec<Building>,
    /// Nodes held by the trees being built.
    held: usize,
    /// Per root function, the kept trees, slowest first.
    kept: WordMap<Mfa, Vec<Tree>>,
    /// What the trees saw.
    pub counters: TreeCounters,
}

impl Trees {
    /// No tree yet; keeping what `config` says.
    pub fn new(config: TreesConfig) -> Self {
        Trees { config, roots: Vec::new(), building: WordMap::default(), spare: Vec::new(), held: 0,
                kept: WordMap::default(), counters: TreeCounters::default() }
    }

    /// What this keeps.
    pub fn config(&self) -> TreesConfig {
        self.config
    }

    /// Roots are the calls of the functions `patterns` match from now on (empty: the
    /// outermost traced call of a process).
    pub fn set_roots(&mut self, patterns: Vec<MfaPattern>) {
        self.roots = patterns;
    }

    /// A call of `mfa` at `ts` opened a frame in `pid`, `depth` deep (1: no traced call
    /// open below it).
    #[inline]
    pub fn call(&mut self, pid: u64, mfa: Mfa, ts: u64, depth: usize) {
        if let Some(tree) = self.building.get_mut(&pid) {
            let room = tree.nodes.len() < self.config.max_nodes && self.held < SESSION_NODES;
            let index = if room {
                let parent = tree.open.iter().rev().find(|(_, i)| *i != NONE).map_or(0, |(_, i)| *i);
                tree.nodes.push(node(mfa, ts, parent));
                self.held += 1;
                (tree.nodes.len() - 1) as u32
            } else {
                // Counted on the nearest ancestor in the tree (the root is always in it).
                if let Some(&(_, at)) = tree.open.iter().rev().find(|(_, i)| *i != NONE) {
                    let n = &mut tree.nodes[at as usize];
                    n.dropped = n.dropped.saturating_add(1);
                }
                self.counters.nodes_dropped += 1;
                NONE
            };
            tree.open.push((mfa, index));
            return;
        }
        let root = if self.roots.is_empty() { depth == 1 } else { self.roots.iter().any(|p| p.matches(&mfa)) };
        if !root {
            return;
        }
        if self.held >= SESSION_NODES {
            self.counters.not_built += 1;
            return;
        }
        let mut tree = self.spare.pop().unwrap_or_default();
        tree.nodes.push(node(mfa, ts, 0));
        tree.open.push((mfa, 0));
        self.held += 1;
        self.building.insert(pid, tree);
    }

    /// The call of `mfa` that `pid` made last returned (or raised: `exception`) at `ts`, after
    /// `latency_ns` with `own_ns` of its own (both compensated); `args` are its arguments, if
    /// copied (kept with the tree if it is the root's).
    #[inline]
    pub fn returned(&mut self, pid: u64, mfa: Mfa, ts: u64, (latency_ns, own_ns): (u64, u64), exception: bool, args: Option<&TermCopy>) {
        let Some(tree) = self.building.get_mut(&pid) else { return };
        let Some(position) = tree.open.iter().rposition(|(m, _)| *m == mfa) else {
            // The root's frame is gone (the frame closed lies below it): unwound.
            self.counters.abandoned += 1;
            self.finish(pid, None);
            return;
        };
        // Calls above it never returned: unwound with it.
        for &(_, i) in &tree.open[position + 1..] {
            if i != NONE {
                let n = &mut tree.nodes[i as usize];
                n.latency_ns = ts.saturating_sub(n.start_ns);
                n.exception = true;
            }
        }
        let index = tree.open[position].1;
        tree.open.truncate(position);
        if index != NONE {
            let n = &mut tree.nodes[index as usize];
            (n.latency_ns, n.own_ns, n.exception) = (latency_ns, own_ns, exception);
        }
        if position == 0 {
            self.counters.built += 1;
            let keep = latency_ns >= self.config.slower_than_ns && self.would_keep(&mfa, latency_ns);
            self.finish(pid, keep.then(|| (mfa, args.cloned())));
        }
    }

    /// `pid` exited: a tree it was building is abandoned.
    pub fn exited(&mut self, pid: u64) {
        if self.building.contains_key(&pid) {
            self.counters.abandoned += 1;
            self.finish(pid, None);
        }
    }

    /// True if a tree of root `mfa` taking `latency_ns` is among the `keep` slowest.
    fn would_keep(&self, mfa: &Mfa, latency_ns: u64) -> bool {
        self.kept.get(mfa).is_none_or(|trees| trees.len() < self.config.keep || trees.last().is_some_and(|t| t.latency_ns() < latency_ns))
    }

    /// Ends `pid`'s tree: kept as root `mfa`'s (with the root's arguments) if given, its
    /// buffer kept for reuse otherwise.
    fn finish(&mut self, pid: u64, keep: Option<(Mfa, Option<TermCopy>)>) {
        let Some(mut tree) = self.building.remove(&pid) else { return };
        self.held -= tree.nodes.len();
        if let Some((mfa, args)) = keep {
            // A copy of the size it needs: the buffer goes on being reused.
            self.counters.kept += 1;
            self.offer(mfa, Tree { nodes: tree.nodes.as_slice().to_vec(), pid, args });
        }
        if self.spare.len() < SPARE_BUFFERS && tree.nodes.capacity() <= SPARE_MAX_NODES {
            tree.nodes.clear();
            tree.open.clear();
            self.spare.push(tree);
        }
    }

    /// Keeps `tree` among root `mfa`'s `keep` slowest, slowest first.
    fn offer(&mut self, mfa: Mfa, tree: Tree) {
        let keep = self.config.keep;
        let trees = self.kept.entry(mfa).or_default();
        let at = trees.partition_point(|t| t.latency_ns() >= tree.latency_ns());
        if at < keep {
            trees.insert(at, tree);
            trees.truncate(keep);
        }
    }

    /// The kept trees of root `mfa`, slowest first.
    pub fn kept(&self, mfa: &Mfa) -> &[Tree] {
        self.kept.get(mfa).map_or(&[], Vec::as_slice)
    }

    /// The root functions with kept trees, and how many each.
    pub fn kept_counts(&self) -> impl Iterator<Item = (&Mfa, usize)> {
        self.kept.iter().map(|(mfa, trees)| (mfa, trees.len()))
    }

    /// Trees held now, over all root functions.
    pub fn kept_total(&self) -> usize {
        self.kept.values().map(Vec::len).sum()
    }

    /// Adds `other`'s kept trees and counts to these (`Aggregator::merged`): the `keep`
    /// slowest of both per root function.
    pub fn merge_from(&mut self, other: &Trees) {
        for (mfa, trees) in &other.kept {
            for tree in trees {
                self.offer(*mfa, tree.clone());
            }
        }
        let (c, o) = (&mut self.counters, other.counters);
        c.built += o.built;
        c.kept += o.kept;
        c.not_built += o.not_built;
        c.abandoned += o.abandoned;
        c.nodes_dropped += o.nodes_dropped;
        self.held += other.held;
    }

    /// Heap bytes: the trees being built, the spare buffers and the kept trees.
    pub fn bytes(&self) -> usize {
        let building = |b: &Building| vec_bytes::<Node>(b.nodes.capacity()) + vec_bytes::<(Mfa, u32)>(b.open.capacity());
        let kept = |t: &Tree| vec_bytes::<Node>(t.nodes.capacity()) + t.args.as_ref().map_or(0, copy_bytes);
        map_bytes(&self.building)
            + self.building.values().map(building).sum::<usize>()
            + self.spare.iter().map(building).sum::<usize>()
            + vec_bytes::<Building>(self.spare.capacity())
            + map_bytes(&self.kept)
            + self.kept.values().map(|trees| vec_bytes::<Tree>(trees.capacity()) + trees.iter().map(kept).sum::<usize>()).sum::<usize>()
    }

    /// Frees the trees being built (a stopped session); kept trees stay.
    pub fn free(&mut self) {
        self.building = WordMap::default();
        self.spare = Vec::new();
        self.held = 0;
    }
}

fn node(mfa: Mfa, ts: u64, parent: u32) -> Node {
    Node { mfa, start_ns: ts, latency_ns: 0, own_ns: 0, parent, dropped: 0, exception: false }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Aggregator;
    use crate::event::{Event, EventKind};
    use proptest::prelude::*;

    const fn f(function: u64) -> Mfa {
        Mfa { module: 1, function, arity: 0 }
    }
    const ROOT: Mfa = f(1);
    const FAST: Mfa = f(2);
    const SLOW: Mfa = f(3);

    fn aggregator(slower_than_ns: u64, keep: usize, max_nodes: usize) -> Aggregator {
        Aggregator::new(100, 100_000).with_trees(Some(TreesConfig { slower_than_ns, keep, max_nodes }))
    }

    fn ev(agg: &mut Aggregator, kind: EventKind, pid: u64, mfa: Mfa, ts: u64) {
        agg.record(&Event { ts, pid, mfa, kind });
    }

    /// One root call at `t`: `fast` calls of FAST (10 ns each), then SLOW for `slow_ns`.
    fn request(agg: &mut Aggregator, pid: u64, t: u64, fast: u64, slow_ns: u64) -> u64 {
        ev(agg, EventKind::Call, pid, ROOT, t);
        let mut now = t + 1;
        for _ in 0..fast {
            ev(agg, EventKind::Call, pid, FAST, now);
            ev(agg, EventKind::Return, pid, FAST, now + 10);
            now += 11;
        }
        ev(agg, EventKind::Call, pid, SLOW, now);
        ev(agg, EventKind::Return, pid, SLOW, now + slow_ns);
        now += slow_ns + 1;
        ev(agg, EventKind::Return, pid, ROOT, now);
        now + 1
    }

    #[test]
    fn a_slow_root_keeps_its_tree_and_a_fast_one_does_not() {
        let mut agg = aggregator(1_000, 10, 100);
        let mut t = request(&mut agg, 7, 0, 3, 50);
        t = request(&mut agg, 7, t, 3, 5_000);
        let trees = agg.trees().unwrap();
        assert_eq!(trees.counters.built, 2);
        assert_eq!(trees.counters.kept, 1);
        let [tree] = trees.kept(&ROOT) else { panic!("{:?}", trees.kept(&ROOT)) };
        assert!(t > tree.nodes[0].start_ns);
        let mfas: Vec<Mfa> = tree.nodes.iter().map(|n| n.mfa).collect();
        assert_eq!(mfas, vec![ROOT, FAST, FAST, FAST, SLOW]);
        assert_eq!(tree.children(), vec![vec![1, 2, 3, 4], vec![], vec![], vec![], vec![]]);
        let root = &tree.nodes[0];
        assert_eq!(root.latency_ns, 1 + 33 + 5_000 + 1);
        assert_eq!(root.own_ns, root.latency_ns - 30 - 5_000);
        assert_eq!((tree.nodes[4].latency_ns, tree.nodes[4].own_ns), (5_000, 5_000));
        assert_eq!(tree.dropped(), 0);
        assert!(trees.bytes() > 0);
    }

    #[test]
    fn latencies_are_compensated_as_the_functions_figures() {
        use crate::aggregate::probe::Compensation;
        let mut agg = aggregator(0, 10, 100).with_compensation(Some(Compensation { call_ns: 3, return_ns: 2 }));
        request(&mut agg, 5, 0, 4, 1_000);
        let tree = &agg.trees().unwrap().kept(&ROOT)[0];
        // The slow calls keep each call's compensated latency exactly.
        for (i, mfa) in [(0, ROOT), (5, SLOW)] {
            let kept = agg.function(&mfa).unwrap().slow.slowest()[0].duration_ns;
            assert_eq!(tree.nodes[i].latency_ns, kept, "{mfa:?}");
        }
        let raw = 1 + 4 * 11 + 1_000 + 1;
        assert!(tree.nodes[0].latency_ns < raw, "the root's 5 callees' events taken out");
        assert!(tree.nodes[0].own_ns <= tree.nodes[0].latency_ns);
    }

    #[test]
    fn the_trees_being_built_are_bounded_and_what_does_not_fit_is_counted() {
        let mut agg = Aggregator::new(100, 2 * SESSION_NODES).with_trees(Some(TreesConfig { slower_than_ns: 0, keep: 1, max_nodes: 10 }));
        // SESSION_NODES processes each in a root call: the bound is full.
        for pid in 0..SESSION_NODES as u64 {
            ev(&mut agg, EventKind::Call, pid, ROOT, pid);
        }
        let late = SESSION_NODES as u64;
        // A new root builds no tree, a call inside a tree is counted on its root.
        ev(&mut agg, EventKind::Call, late, ROOT, late);
        ev(&mut agg, EventKind::Call, 0, FAST, late);
        let trees = agg.trees().unwrap();
        assert_eq!((trees.counters.not_built, trees.counters.nodes_dropped), (1, 1));
        assert_eq!(trees.held, SESSION_NODES);
        ev(&mut agg, EventKind::Return, 0, FAST, late + 1);
        ev(&mut agg, EventKind::Return, 0, ROOT, late + 2);
        let trees = agg.trees().unwrap();
        assert_eq!(trees.kept(&ROOT)[0].dropped(), 1);
        assert_eq!(trees.held, SESSION_NODES - 1);
    }

    #[test]
    fn nested_calls_hang_under_their_caller() {
        let mut agg = aggregator(0, 10, 100);
        for (kind, mfa, ts) in [(EventKind::Call, ROOT, 0), (EventKind::Call, FAST, 1), (EventKind::Call, SLOW, 2),
                                (EventKind::Exception, SLOW, 5), (EventKind::Return, FAST, 6),
                                (EventKind::Call, SLOW, 7), (EventKind::Return, SLOW, 8), (EventKind::Return, ROOT, 9)] {
            ev(&mut agg, kind, 1, mfa, ts);
        }
        let tree = &agg.trees().unwrap().kept(&ROOT)[0];
        let parents: Vec<u32> = tree.nodes.iter().map(|n| n.parent).collect();
        assert_eq!(parents, vec![0, 0, 1, 0]);
        assert!(tree.nodes[2].exception && !tree.nodes[1].exception);
    }

    #[test]
    fn a_tree_past_max_nodes_keeps_its_first_nodes_and_counts_the_rest() {
        let mut agg = aggregator(0, 10, 4);
        request(&mut agg, 1, 0, 9, 100);
        let trees = agg.trees().unwrap();
        let tree = &trees.kept(&ROOT)[0];
        assert_eq!(tree.nodes.len(), 4);
        assert_eq!(tree.nodes[0].dropped, 7, "6 FAST and SLOW past the bound");
        assert_eq!(tree.dropped(), 7);
        assert_eq!(trees.counters.nodes_dropped, 7);
    }

    #[test]
    fn keep_bounds_the_trees_per_root_slowest_first() {
        let mut agg = aggregator(0, 3, 100);
        let mut t = 0;
        for slow in [50, 900, 10, 700, 800, 20, 600] {
            t = request(&mut agg, 2, t, 1, slow);
        }
        let slow: Vec<u64> = agg.trees().unwrap().kept(&ROOT).iter().map(|t| t.nodes[2].latency_ns).collect();
        assert_eq!(slow, vec![900, 800, 700]);
    }

    #[test]
    fn an_exit_abandons_the_tree_and_roots_follow_the_spec() {
        let mut agg = aggregator(0, 10, 100);
        ev(&mut agg, EventKind::Call, 3, ROOT, 0);
        ev(&mut agg, EventKind::Call, 3, FAST, 1);
        agg.record(&Event { ts: 2, pid: 3, mfa: f(0), kind: EventKind::Exit });
        assert_eq!(agg.trees().unwrap().counters.abandoned, 1);
        assert_eq!(agg.trees().unwrap().kept_total(), 0);
        // With a root spec, the calls of SLOW are the roots, wherever they are.
        agg.set_tree_roots(vec![MfaPattern { module: Some(1), function: Some(3), arity: None }]);
        request(&mut agg, 4, 10, 2, 100);
        let trees = agg.trees().unwrap();
        assert!(trees.kept(&ROOT).is_empty());
        assert_eq!(trees.kept(&SLOW).len(), 1);
        assert_eq!(trees.kept(&SLOW)[0].nodes.len(), 1);
    }

    #[test]
    fn merged_parts_keep_the_slowest_of_both() {
        let mut a = aggregator(0, 2, 100);
        let mut b = aggregator(0, 2, 100);
        request(&mut a, 1, 0, 0, 100);
        request(&mut a, 1, 1_000, 0, 300);
        request(&mut b, 2, 0, 0, 200);
        let merged = Aggregator::merged(&[&a, &b]);
        let slow: Vec<u64> = merged.trees().unwrap().kept(&ROOT).iter().map(|t| t.nodes[1].latency_ns).collect();
        assert_eq!(slow, vec![300, 200]);
        assert_eq!(merged.trees().unwrap().counters.built, 3);
    }

    proptest! {
        /// Whatever the nesting: kept trees are at most `keep` per root, slowest first, each
        /// at most `max_nodes` nodes, and nodes plus dropped are the calls of the root call;
        /// a node's caller comes before it; no node is held once every root returned.
        #[test]
        fn bounds_hold_and_nothing_is_lost(ops in prop::collection::vec((0u64..4, 1u64..50), 1..400),
                                           keep in 1usize..4, max_nodes in 1usize..12) {
            let mut agg = aggregator(0, keep, max_nodes);
            let (mut t, mut stack, mut calls_in_root, mut expected) = (0u64, Vec::<Mfa>::new(), 0u64, Vec::new());
            for (op, dt) in ops {
                t += dt;
                if op == 0 && !stack.is_empty() || stack.len() > 6 {
                    let mfa = stack.pop().unwrap();
                    ev(&mut agg, EventKind::Return, 9, mfa, t);
                    if stack.is_empty() {
                        expected.push(calls_in_root);
                    }
                } else {
                    let mfa = f(op + 1);
                    if stack.is_empty() {
                        calls_in_root = 0;
                    }
                    calls_in_root += 1;
                    stack.push(mfa);
                    ev(&mut agg, EventKind::Call, 9, mfa, t);
                }
            }
            let trees = agg.trees().unwrap();
            prop_assert_eq!(trees.counters.built, expected.len() as u64);
            let mut kept = 0;
            for (mfa, n) in trees.kept_counts() {
                prop_assert!(n <= keep);
                kept += n;
                let list = trees.kept(mfa);
                prop_assert!(list.windows(2).all(|w| w[0].latency_ns() >= w[1].latency_ns()));
                for tree in list {
                    prop_assert!(tree.nodes.len() <= max_nodes);
                    prop_assert!(expected.contains(&(tree.nodes.len() as u64 + tree.dropped())));
                    prop_assert!(tree.nodes.iter().enumerate().skip(1).all(|(i, n)| (n.parent as usize) < i));
                }
            }
            prop_assert_eq!(kept, trees.kept_total());
            if stack.is_empty() {
                prop_assert_eq!(trees.held, 0);
            }
        }
    }
}
