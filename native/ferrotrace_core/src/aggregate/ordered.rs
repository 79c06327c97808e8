//! The ordered merge of two bounded lists kept in time order (recent events, calls over the
//! threshold), for reading several aggregators as one (`Aggregator::merged`).

/// `mine` and `theirs`, each in order of `key`, as one list in that order, `mine` first at
/// equal keys: how two aggregators' bounded lists in time order merge before their bound is
/// applied.
pub(super) fn in_order<'a, T: Clone + 'a, K: Ord>(
    mine: impl IntoIterator<Item = T>,
    theirs: impl IntoIterator<Item = &'a T>,
    key: impl Fn(&T) -> K,
) -> Vec<T> {
    let (mut mine, mut theirs) = (mine.into_iter().peekable(), theirs.into_iter().peekable());
    let mut merged = Vec::new();
    loop {
        let next = match (mine.peek(), theirs.peek()) {
            (Some(a), Some(b)) if key(a) <= key(b) => mine.next(),
            (_, Some(_)) => theirs.next().cloned(),
            (Some(_), None) => mine.next(),
            (None, None) => return merged,
        };
        merged.extend(next);
    }
}
