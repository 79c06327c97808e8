//! The size of a message in machine words, measured on the hot path by a bounded walk.
//!
//! The figure follows `erts_debug:flat_size/1` on a 64-bit VM for the terms that make up
//! nearly all messages (immediates, lists, tuples, floats, binaries, small and big integers).
//! The walk visits at most [`MAX_NODES`] terms and nests at most [`MAX_DEPTH`] deep, without
//! allocating (a fixed stack); past either bound, or on a term it does not descend into
//! (map contents, funs), it stops and reports the words counted so far with `capped` set: a
//! lower bound, counted as such by the aggregate.

/// What the walk needs to know about one term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape<T> {
    /// An atom, small integer, local pid or port, `[]`: no heap words.
    Immediate,
    /// A list cell: head and tail.
    Cons(T, T),
    /// A tuple of this arity (elements read with [`SizeReader::element`]).
    Tuple(u32),
    /// A float (a boxed double).
    Float,
    /// An integer that does not fit a small: a bignum of this many 64-bit digits.
    Big(u32),
    /// A binary of this many bytes (a heap binary up to 64 bytes, else a reference).
    Binary(u64),
    /// A map of this many pairs; its contents are not walked.
    Map(u64),
    /// A term of exactly this many words with nothing to walk inside (a local reference).
    Fixed(u64),
    /// Anything else (fun, reference, remote pid): this many words, contents not walked.
    Opaque(u64),
}

/// The term interface of the walk (the NIF implements it over `enif_*` calls).
pub trait SizeReader {
    /// A term handle.
    type Term: Copy;
    /// The shape of `term`.
    fn shape(&self, term: Self::Term) -> Shape<Self::Term>;
    /// Element `index` of a tuple that [`shape`](Self::shape) said has more elements.
    fn element(&self, tuple: Self::Term, index: u32) -> Self::Term;
}

/// Terms visited at most per message.
pub const MAX_NODES: u32 = 2048;
/// Nesting followed at most (tuples and list heads; list tails are iterated, not nested).
pub const MAX_DEPTH: usize = 32;
/// Largest binary kept on the process heap (`ERL_ONHEAP_BIN_LIMIT`).
const HEAP_BINARY_LIMIT: u64 = 64;
/// Words of an off-heap binary's reference (`ProcBin` on OTP 25).
const PROC_BIN_WORDS: u64 = 6;

/// Work left on the walk's stack: the rest of a list, or the next elements of a tuple.
#[derive(Clone, Copy)]
enum Pending<T> {
    Tail(T),
    Elements(T, u32, u32),
}

/// The words of `term` and whether the figure is a lower bound (the walk was cut short, or
/// met a term whose contents it does not walk).
#[inline]
pub fn size_words<R: SizeReader>(reader: &R, term: R::Term) -> (u64, bool) {
    let mut stack: [Option<Pending<R::Term>>; MAX_DEPTH] = [None; MAX_DEPTH];
    let mut depth = 0usize;
    let mut words = 0u64;
    let mut nodes = 0u32;
    let mut capped = false;
    let mut current = term;
    loop {
        nodes += 1;
        if nodes > MAX_NODES {
            return (words, true);
        }
        let mut descend = None;
        match reader.shape(current) {
            Shape::Immediate => {}
            Shape::Float => words += 2,
            Shape::Big(digits) => words += 1 + digits as u64,
            Shape::Binary(bytes) if bytes <= HEAP_BINARY_LIMIT => words += 2 + bytes.div_ceil(8),
            Shape::Binary(_) => words += PROC_BIN_WORDS,
            Shape::Map(0) => words += 3,
            Shape::Map(pairs) => {
                words += 4 + 2 * pairs;
                capped = true;
            }
            Shape::Fixed(fixed) => words += fixed,
            Shape::Opaque(opaque) => {
                words += opaque;
                capped = true;
            }
            Shape::Cons(head, tail) => {
                words += 2;
                descend = Some((head, Pending::Tail(tail)));
            }
            Shape::Tuple(0) => words += 1,
            Shape::Tuple(arity) => {
                words += 1 + arity as u64;
                descend = Some((reader.element(current, 0), Pending::Elements(current, 1, arity)));
            }
        }
        match descend {
            Some((first, rest)) => {
                if depth == MAX_DEPTH {
                    return (words, true);
                }
                stack[depth] = Some(rest);
                depth += 1;
                current = first;
            }
            None => loop {
                if depth == 0 {
                    return (words, capped);
                }
                match stack[depth - 1] {
                    Some(Pending::Tail(tail)) => {
                        depth -= 1;
                        current = tail;
                        break;
                    }
                    Some(Pending::Elements(tuple, index, arity)) if index < arity => {
                        stack[depth - 1] = Some(Pending::Elements(tuple, index + 1, arity));
                        current = reader.element(tuple, index);
                        break;
                    }
                    _ => depth -= 1,
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum T {
        Imm,
        Float,
        Big(u32),
        Bin(u64),
        List(Vec<T>),
        Tuple(Vec<T>),
        Map(u64),
    }

    struct Reader;

    // A list is modelled by index into its cells: (list, from).
    #[derive(Clone, Copy)]
    enum H<'a> {
        Term(&'a T),
        Tail(&'a [T]),
    }

    impl<'a> SizeReader for &'a Reader {
        type Term = H<'a>;
        fn shape(&self, term: H<'a>) -> Shape<H<'a>> {
            match term {
                H::Tail([]) => Shape::Immediate,
                H::Tail(cells) => Shape::Cons(H::Term(&cells[0]), H::Tail(&cells[1..])),
                H::Term(t) => match t {
                    T::Imm => Shape::Immediate,
                    T::Float => Shape::Float,
                    T::Big(d) => Shape::Big(*d),
                    T::Bin(b) => Shape::Binary(*b),
                    T::Map(n) => Shape::Map(*n),
                    T::List(cells) if cells.is_empty() => Shape::Immediate,
                    T::List(cells) => Shape::Cons(H::Term(&cells[0]), H::Tail(&cells[1..])),
                    T::Tuple(items) => Shape::Tuple(items.len() as u32),
                },
            }
        }
        fn element(&self, tuple: H<'a>, index: u32) -> H<'a> {
            match tuple {
                H::Term(T::Tuple(items)) => H::Term(&items[index as usize]),
                _ => panic!("element of a non-tuple"),
            }
        }
    }

    /// `erts_debug:flat_size/1`, stated independently (and the node count, for the cap).
    fn flat(t: &T, depth: usize, nodes: &mut u32, deep: &mut bool) -> u64 {
        *nodes += 1;
        if depth > MAX_DEPTH {
            *deep = true;
        }
        match t {
            T::Imm | T::Map(_) => 0,
            T::Float => 2,
            T::Big(d) => 1 + *d as u64,
            T::Bin(b) if *b <= 64 => 2 + b.div_ceil(8),
            T::Bin(_) => 6,
            T::List(cells) => {
                *nodes += cells.len() as u32; // the cells, plus the final []
                cells.iter().map(|c| 2 + flat(c, depth + 1, nodes, deep)).sum()
            }
            T::Tuple(items) => 1 + items.len() as u64 + items.iter().map(|c| flat(c, depth + 1, nodes, deep)).sum::<u64>(),
        }
    }

    fn has_map(t: &T) -> bool {
        match t {
            T::Map(_) => true,
            T::List(c) | T::Tuple(c) => c.iter().any(has_map),
            _ => false,
        }
    }

    fn term() -> impl Strategy<Value = T> {
        let leaf = prop_oneof![Just(T::Imm), Just(T::Float), (1u32..4).prop_map(T::Big), (0u64..200).prop_map(T::Bin)];
        leaf.prop_recursive(6, 200, 10, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..10).prop_map(T::List),
                prop::collection::vec(inner, 0..10).prop_map(T::Tuple),
            ]
        })
    }

    fn size(t: &T) -> (u64, bool) {
        size_words(&&Reader, H::Term(t))
    }

    #[test]
    fn known_sizes() {
        let ints = T::List((0..100).map(|_| T::Imm).collect());
        assert_eq!(size(&ints), (200, false));
        assert_eq!(size(&T::Tuple(vec![T::Imm, T::Float, T::Bin(10)])), (4 + 2 + 4, false));
        assert_eq!(size(&T::Bin(1000)), (6, false));
        let nested = T::List(vec![T::List(vec![T::Imm, T::Imm]), T::Tuple(vec![T::Imm])]);
        assert_eq!(size(&nested), (4 + 4 + 2, false));
        assert_eq!(size(&T::Map(3)), (10, true));
        assert_eq!(size(&T::Tuple(vec![T::Map(1), T::Float])), (3 + 6 + 2, true));
        assert_eq!(size(&T::Map(0)), (3, false));
    }

    #[test]
    fn large_and_deep_terms_are_capped() {
        let long = T::List((0..5000).map(|_| T::Imm).collect());
        let (words, capped) = size(&long);
        assert!(capped && words < 10_000);
        let mut deep = T::Imm;
        for _ in 0..100 {
            deep = T::Tuple(vec![deep, T::Imm]);
        }
        assert!(size(&deep).1);
    }

    proptest! {
        /// Within the bounds the walk is exact; beyond them it is a capped lower bound.
        #[test]
        fn matches_flat_size_or_caps(t in term()) {
            let (mut nodes, mut deep) = (0, false);
            let exact = flat(&t, 0, &mut nodes, &mut deep);
            let (words, capped) = size(&t);
            if !has_map(&t) {
                if capped {
                    prop_assert!(words <= exact);
                } else {
                    prop_assert_eq!(words, exact);
                }
            }
            if !has_map(&t) && nodes <= MAX_NODES / 2 && !deep {
                prop_assert!(!capped, "small shallow terms are walked fully");
            }
        }
    }
}
