//! Call stacks of the traced functions, for folded-stack exports (flame graphs).
//!
//! Fed by the aggregator from the per-process frame stacks it already keeps: when a call pairs
//! with its return, the path from the process's outermost open traced call down to that call
//! gets the call's latency added (inclusive time). Exclusive (self) time is derived when
//! read: a path's inclusive time minus its children's, since a child path is its parent plus
//! one frame and every child call ends inside its parent. No per-frame state is added.
//!
//! Bounded: at most `max_paths` distinct paths of at most `MAX_PATH_DEPTH` frames; a call
//! on a path beyond either bound is counted (`overflow`, `too_deep`), not kept. Exclusive
//! times of a path whose children overflowed are then over-stated, which the counters show.

use std::collections::HashMap;

use crate::event::Mfa;

/// Deepest path kept: deeper calls (long recursions) are counted in `too_deep`.
pub const MAX_PATH_DEPTH: usize = 64;
/// Distinct paths kept by default.
pub const DEFAULT_MAX_PATHS: usize = 10_000;

/// The figures of one path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathStats {
    /// Calls that ended on this path.
    pub count: u64,
    /// Sum of their latencies, ns (saturating).
    pub inclusive_ns: u64,
}

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

/// Per-path aggregation for one session.
pub struct StackPaths {
    paths: HashMap<Vec<Mfa>, PathStats>,
    /// Reused to look paths up without allocating.
    scratch: Vec<Mfa>,
    max_paths: usize,
    overflow: u64,
    too_deep: u64,
}

impl StackPaths {
    /// Keeps at most `max_paths` distinct paths.
    pub fn new(max_paths: usize) -> Self {
        StackPaths { paths: HashMap::new(), scratch: Vec::new(), max_paths, overflow: 0, too_deep: 0 }
    }

    /// Adds one call of latency `ns` that ended on `path` (outermost first).
    pub fn record(&mut self, path: impl ExactSizeIterator<Item = Mfa>, ns: u64) {
        if path.len() > MAX_PATH_DEPTH {
            self.too_deep += 1;
            return;
        }
        self.scratch.clear();
        self.scratch.extend(path);
        if let Some(stats) = self.paths.get_mut(self.scratch.as_slice()) {
            stats.count += 1;
            stats.inclusive_ns = stats.inclusive_ns.saturating_add(ns);
        } else if self.paths.len() < self.max_paths {
            self.paths.insert(self.scratch.clone(), PathStats { count: 1, inclusive_ns: ns });
        } else {
            self.overflow += 1;
        }
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
        self.paths.len()
    }

    /// True if no path was kept.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Every path with inclusive and exclusive time, sorted by path.
    pub fn folded(&self) -> Vec<Folded> {
        let mut children: HashMap<&[Mfa], u64> = HashMap::new();
        for (path, stats) in &self.paths {
            if let Some((_, parent)) = path.split_last() {
                if !parent.is_empty() {
                    let sum = children.entry(parent).or_default();
                    *sum = sum.saturating_add(stats.inclusive_ns);
                }
            }
        }
        let mut out: Vec<Folded> = self
            .paths
            .iter()
            .map(|(path, stats)| Folded {
                path: path.clone(),
                count: stats.count,
                inclusive_ns: stats.inclusive_ns,
                exclusive_ns: stats.inclusive_ns.saturating_sub(children.get(path.as_slice()).copied().unwrap_or(0)),
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
        s.record([A, B, C].into_iter(), 10);
        s.record([A, B].into_iter(), 30);
        s.record([A, B].into_iter(), 20);
        s.record([A].into_iter(), 100);
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
    fn bounded_paths_and_depth() {
        let mut s = StackPaths::new(1);
        s.record([A].into_iter(), 1);
        s.record([B].into_iter(), 1);
        s.record(std::iter::repeat_n(A, MAX_PATH_DEPTH + 1), 1);
        assert_eq!((s.len(), s.overflow(), s.too_deep()), (1, 1, 1));
    }
}
