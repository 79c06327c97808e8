//! Bounded copies of terms (`args => true`): a call's arguments, a return value or an
//! exception, encoded on the scheduler into at most `max_term_bytes` bytes and decoded into a
//! term again only when a kept call is read back.
//!
//! The encoding follows the external term format's shapes (a tag, then sizes and elements
//! in order) with two differences that make it cheap on the hot path and faithful:
//! - an *immediate* (atom, small integer, local pid or port, `[]`) is written as its 8 raw
//!   bytes: immediates are valid in any environment for as long as the VM runs, so only
//!   this VM's NIF can decode a copy, and it does so without copying an atom's text;
//! - a term that does not fit is written *cut*, never walked whole. A binary keeps a prefix;
//!   a list, tuple or map keeps its first elements; a container past [`MAX_DEPTH`] keeps
//!   none. Each cut term decodes as `{ferrotrace_truncated, OriginalSize, Partial}` where it
//!   stood. `OriginalSize` is the binary's `byte_size` (exact), a tuple's arity or a map's
//!   size (exact), or for a list a lower bound of its length: the elements kept plus one
//!   (the rest of the list is not walked).
//!
//! The walk is depth-first with a recursion bounded by `MAX_DEPTH`, and writes only into the
//! caller's buffer: no allocation, and the work is bounded by the buffer's size (every
//! element visited writes at least one byte) plus a tuple's or map's header.
//!
//! Terms the NIF API cannot take apart without copying them whole (funs, integers beyond 64
//! bits, bitstrings that are not binaries) are written as `{ferrotrace_opaque, Kind}`;
//! references and remote pids and ports (small and bounded) as their external format.

/// A copy as the aggregator keeps it: the encoded term, shared by a slow call and the
/// flight recorder.
pub type TermCopy = std::sync::Arc<[u8]>;

/// The copies that came with one event: its arguments or result (`args`), and for a call
/// its key (`key`: the match spec's `{message, Key}`, or the caller).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventCopies {
    /// The argument list of a call, or the value of a return or exception.
    pub args: Option<TermCopy>,
    /// The call's key.
    pub key: Option<TermCopy>,
}

impl From<Option<TermCopy>> for EventCopies {
    /// Arguments or a result alone.
    fn from(args: Option<TermCopy>) -> Self {
        EventCopies { args, key: None }
    }
}

/// What a session copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgsConfig {
    /// Copy arguments and results (`args`).
    pub enabled: bool,
    /// Bound of one copy (`max_term_bytes`).
    pub max_term_bytes: usize,
}

impl Default for ArgsConfig {
    fn default() -> Self {
        ArgsConfig { enabled: false, max_term_bytes: DEFAULT_MAX_TERM_BYTES }
    }
}

/// Containers nested deeper than this are cut (kept with no elements).
pub const MAX_DEPTH: usize = 48;
/// Default `max_term_bytes`.
pub const DEFAULT_MAX_TERM_BYTES: usize = 1024;
/// Accepted `max_term_bytes`, inclusive.
pub const MAX_TERM_BYTES_RANGE: (i64, i64) = (64, 65_536);

const IMMEDIATE: u8 = 1;
const INT: u8 = 2;
const UINT: u8 = 3;
const FLOAT: u8 = 4;
const BINARY: u8 = 5;
const CUT_BINARY: u8 = 6;
const LIST: u8 = 7;
const CUT_LIST: u8 = 8;
const TUPLE: u8 = 9;
const CUT_TUPLE: u8 = 10;
const MAP: u8 = 11;
const CUT_MAP: u8 = 12;
const EXTERNAL: u8 = 13;
const OPAQUE: u8 = 14;

/// Bytes an open container keeps back for its end: a cut one's original size (8), or a
/// list's tail (an immediate, 9).
const RESERVE: usize = 9;

/// What cannot be copied bounded; decoded as `{ferrotrace_opaque, Kind}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Opaque {
    /// A fun (its environment could be anything).
    Fun = 0,
    /// An integer that does not fit 64 bits.
    Bignum = 1,
    /// A bitstring whose size is not a whole number of bytes.
    Bitstring = 2,
    /// A reference, remote pid or port whose external format did not fit.
    Other = 3,
}

impl Opaque {
    fn from_u8(value: u8) -> Opaque {
        match value {
            0 => Opaque::Fun,
            1 => Opaque::Bignum,
            2 => Opaque::Bitstring,
            _ => Opaque::Other,
        }
    }
}

/// One term as the encoder sees it.
pub enum View<'a, T> {
    /// An immediate: its raw bits.
    Immediate(u64),
    /// A boxed integer that fits `i64`.
    Int(i64),
    /// A boxed integer that fits `u64` only.
    UInt(u64),
    /// A float.
    Float(f64),
    /// A binary's bytes.
    Binary(&'a [u8]),
    /// A list cell: head and tail.
    Cons(T, T),
    /// A tuple's elements.
    Tuple(&'a [T]),
    /// A map of this size (its pairs through [`TermSource::map_pairs`]).
    Map(usize),
    /// A reference, remote pid or port: through [`TermSource::external`].
    External,
    /// Something not copied.
    Opaque(Opaque),
}

/// Read access to terms, for the encoder.
pub trait TermSource {
    /// A term.
    type Term: Copy;
    /// What `term` is.
    fn view(&self, term: Self::Term) -> View<'_, Self::Term>;
    /// Calls `pair` with each key and value of a map until it returns false.
    fn map_pairs(&self, map: Self::Term, pair: &mut dyn FnMut(Self::Term, Self::Term) -> bool);
    /// Writes `term`'s external format into `out` if it fits; its length.
    fn external(&self, term: Self::Term, out: &mut [u8]) -> Option<usize>;
}

/// Encodes `term` into `out`, at most `out.len()` bytes (at least 32); returns the length.
pub fn encode<S: TermSource>(source: &S, term: S::Term, out: &mut [u8]) -> usize {
    let mut encoder = Encoder { source, out, pos: 0, reserved: 0 };
    if !encoder.term(term, 0) {
        encoder.opaque(Opaque::Other);
    }
    encoder.pos
}

struct Encoder<'s, 'o, S: TermSource> {
    source: &'s S,
    out: &'o mut [u8],
    pos: usize,
    /// Bytes kept back for the ends of the open containers.
    reserved: usize,
}

impl<S: TermSource> Encoder<'_, '_, S> {
    #[inline]
    fn room(&self) -> usize {
        self.out.len().saturating_sub(self.pos + self.reserved)
    }

    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.out[self.pos..self.pos + bytes.len()].copy_from_slice(bytes);
        self.pos += bytes.len();
    }

    #[inline]
    fn tagged_word(&mut self, tag: u8, word: u64) -> bool {
        if self.room() < 9 {
            return false;
        }
        self.put(&[tag]);
        self.put(&word.to_le_bytes());
        true
    }

    fn opaque(&mut self, kind: Opaque) -> bool {
        if self.out.len() - self.pos < 2 {
            return false;
        }
        self.put(&[OPAQUE, kind as u8]);
        true
    }

    /// Writes `term` (whole or cut) and returns true, or writes nothing and returns false
    /// when not even its cut form fits.
    fn term(&mut self, term: S::Term, depth: usize) -> bool {
        let source = self.source;
        match source.view(term) {
            View::Immediate(bits) => self.tagged_word(IMMEDIATE, bits),
            View::Int(i) => self.tagged_word(INT, i as u64),
            View::UInt(u) => self.tagged_word(UINT, u),
            View::Float(f) => self.tagged_word(FLOAT, f.to_bits()),
            View::Binary(bytes) => self.binary(bytes),
            View::Cons(head, tail) => self.list(head, tail, depth),
            View::Tuple(elements) => self.tuple(elements, depth),
            View::Map(size) => self.map(term, size, depth),
            View::External => {
                if self.room() < 5 + 16 {
                    return false;
                }
                let end = self.out.len() - self.reserved;
                match source.external(term, &mut self.out[self.pos + 5..end]) {
                    Some(n) => {
                        self.out[self.pos] = EXTERNAL;
                        self.out[self.pos + 1..self.pos + 5].copy_from_slice(&(n as u32).to_le_bytes());
                        self.pos += 5 + n;
                        true
                    }
                    None => self.room() >= 2 && self.opaque(Opaque::Other),
                }
            }
            View::Opaque(kind) => self.room() >= 2 && self.opaque(kind),
        }
    }

    fn binary(&mut self, bytes: &[u8]) -> bool {
        let room = self.room();
        if 5 + bytes.len() <= room {
            self.put(&[BINARY]);
            self.put(&(bytes.len() as u32).to_le_bytes());
            self.put(bytes);
            return true;
        }
        if room < 13 {
            return false;
        }
        // A quarter of the room is left to what follows (the next arguments).
        let kept = (room - 13) - (room - 13) / 4;
        self.put(&[CUT_BINARY]);
        self.put(&(bytes.len() as u64).to_le_bytes());
        self.put(&(kept as u32).to_le_bytes());
        self.put(&bytes[..kept]);
        true
    }

    /// Opens a container: its tag and a count to patch, and what it keeps back. `None` if
    /// it does not fit with its reserve. A container directly inside the root (an argument)
    /// keeps a quarter of the room back for what follows it (the next arguments), so one
    /// large argument does not crowd out the others.
    fn open(&mut self, tag: u8, depth: usize) -> Option<(usize, usize)> {
        let room = self.room();
        if room < 5 + RESERVE {
            return None;
        }
        let kept_back = RESERVE + if depth == 1 { (room - 5 - RESERVE) / 4 } else { 0 };
        let at = self.pos;
        self.put(&[tag, 0, 0, 0, 0]);
        self.reserved += kept_back;
        Some((at, kept_back))
    }

    /// Closes a container opened at `at` with `count` elements; `cut` gives it the cut tag
    /// and its original size.
    fn close(&mut self, (at, kept_back): (usize, usize), count: usize, cut: Option<(u8, u64)>) {
        self.reserved -= kept_back;
        self.out[at + 1..at + 5].copy_from_slice(&(count as u32).to_le_bytes());
        if let Some((tag, original)) = cut {
            self.out[at] = tag;
            self.put(&original.to_le_bytes());
        }
    }

    fn list(&mut self, head: S::Term, tail: S::Term, depth: usize) -> bool {
        let Some(at) = self.open(LIST, depth) else { return false };
        let mut count = 0;
        if depth >= MAX_DEPTH {
            self.close(at, 0, Some((CUT_LIST, 1)));
            return true;
        }
        let (mut head, mut rest) = (head, tail);
        loop {
            if !self.term(head, depth + 1) {
                self.close(at, count, Some((CUT_LIST, count as u64 + 1)));
                return true;
            }
            count += 1;
            match self.source.view(rest) {
                View::Cons(h, t) => (head, rest) = (h, t),
                _ => break,
            }
        }
        // The tail ([] or an improper one) may use the reserve.
        self.reserved -= RESERVE;
        let fitted = self.term(rest, depth + 1);
        self.reserved += RESERVE;
        self.close(at, count, (!fitted).then_some((CUT_LIST, count as u64)));
        true
    }

    fn tuple(&mut self, elements: &[S::Term], depth: usize) -> bool {
        let Some(at) = self.open(TUPLE, depth) else { return false };
        let arity = elements.len() as u64;
        if depth >= MAX_DEPTH && !elements.is_empty() {
            self.close(at, 0, Some((CUT_TUPLE, arity)));
            return true;
        }
        for (count, element) in elements.iter().enumerate() {
            if !self.term(*element, depth + 1) {
                self.close(at, count, Some((CUT_TUPLE, arity)));
                return true;
            }
        }
        self.close(at, elements.len(), None);
        true
    }

    fn map(&mut self, map: S::Term, size: usize, depth: usize) -> bool {
        let Some(at) = self.open(MAP, depth) else { return false };
        if depth >= MAX_DEPTH && size > 0 {
            self.close(at, 0, Some((CUT_MAP, size as u64)));
            return true;
        }
        let mut count = 0;
        let mut cut = false;
        let source = self.source;
        source.map_pairs(map, &mut |key, value| {
            let before = self.pos;
            if self.term(key, depth + 1) && self.term(value, depth + 1) {
                count += 1;
                true
            } else {
                self.pos = before;
                cut = true;
                false
            }
        });
        self.close(at, count, cut.then_some((CUT_MAP, size as u64)));
        true
    }
}

/// Builds terms from a copy, for the decoder.
pub trait TermSink {
    /// A term.
    type Term: Copy;
    /// An immediate from its bits (taken by the encoder from an immediate of this VM).
    fn immediate(&mut self, bits: u64) -> Self::Term;
    /// An integer.
    fn int(&mut self, value: i64) -> Self::Term;
    /// An unsigned integer.
    fn uint(&mut self, value: u64) -> Self::Term;
    /// A float.
    fn float(&mut self, value: f64) -> Self::Term;
    /// A binary.
    fn binary(&mut self, bytes: &[u8]) -> Self::Term;
    /// A list of `elements` ending in `tail`.
    fn list(&mut self, elements: &[Self::Term], tail: Option<Self::Term>) -> Self::Term;
    /// A tuple.
    fn tuple(&mut self, elements: &[Self::Term]) -> Self::Term;
    /// A map (keys and values alternate).
    fn map(&mut self, pairs: &[Self::Term]) -> Self::Term;
    /// A term from its external format.
    fn external(&mut self, bytes: &[u8]) -> Option<Self::Term>;
    /// `{ferrotrace_opaque, Kind}`.
    fn opaque(&mut self, kind: Opaque) -> Self::Term;
    /// `{ferrotrace_truncated, OriginalSize, Partial}`.
    fn truncated(&mut self, original: u64, partial: Self::Term) -> Self::Term;
}

/// Decodes a copy made by [`encode`]; `None` if the bytes are not one.
pub fn decode<K: TermSink>(sink: &mut K, bytes: &[u8]) -> Option<K::Term> {
    let mut decoder = Decoder { bytes, pos: 0 };
    let term = decoder.term(sink)?;
    (decoder.pos == bytes.len()).then_some(term)
}

struct Decoder<'b> {
    bytes: &'b [u8],
    pos: usize,
}

impl Decoder<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let slice = self.bytes.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(slice)
    }

    fn u32(&mut self) -> Option<usize> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?) as usize)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn elements<K: TermSink>(&mut self, sink: &mut K, count: usize) -> Option<Vec<K::Term>> {
        // Each element takes at least two bytes: a corrupt count cannot allocate much.
        let mut elements = Vec::with_capacity(count.min(self.bytes.len() / 2));
        for _ in 0..count {
            elements.push(self.term(sink)?);
        }
        Some(elements)
    }

    fn term<K: TermSink>(&mut self, sink: &mut K) -> Option<K::Term> {
        let tag = *self.take(1)?.first()?;
        Some(match tag {
            IMMEDIATE => {
                let bits = self.u64()?;
                sink.immediate(bits)
            }
            INT => {
                let value = self.u64()? as i64;
                sink.int(value)
            }
            UINT => {
                let value = self.u64()?;
                sink.uint(value)
            }
            FLOAT => {
                let value = f64::from_bits(self.u64()?);
                sink.float(value)
            }
            BINARY => {
                let n = self.u32()?;
                sink.binary(self.take(n)?)
            }
            CUT_BINARY => {
                let original = self.u64()?;
                let n = self.u32()?;
                let partial = sink.binary(self.take(n)?);
                sink.truncated(original, partial)
            }
            LIST | CUT_LIST => {
                let count = self.u32()?;
                let elements = self.elements(sink, count)?;
                if tag == LIST {
                    let tail = self.term(sink)?;
                    sink.list(&elements, Some(tail))
                } else {
                    let original = self.u64()?;
                    let partial = sink.list(&elements, None);
                    sink.truncated(original, partial)
                }
            }
            TUPLE | CUT_TUPLE => {
                let count = self.u32()?;
                let elements = self.elements(sink, count)?;
                let tuple = sink.tuple(&elements);
                if tag == TUPLE { tuple } else { sink.truncated(self.u64()?, tuple) }
            }
            MAP | CUT_MAP => {
                let count = self.u32()?;
                let pairs = self.elements(sink, count.checked_mul(2)?)?;
                let map = sink.map(&pairs);
                if tag == MAP { map } else { sink.truncated(self.u64()?, map) }
            }
            EXTERNAL => {
                let n = self.u32()?;
                let bytes = self.take(n)?;
                match sink.external(bytes) {
                    Some(term) => term,
                    None => sink.opaque(Opaque::Other),
                }
            }
            OPAQUE => {
                let kind = Opaque::from_u8(*self.take(1)?.first()?);
                sink.opaque(kind)
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A term model: what the encoder is tested against.
    #[derive(Clone, Debug, PartialEq)]
    enum T {
        Atom(u64),
        Int(i64),
        Big(u64),
        Float(f64),
        Bin(Vec<u8>),
        List(Vec<T>, Box<T>),
        Nil,
        Tuple(Vec<T>),
        Map(Vec<(T, T)>),
        Ref(Vec<u8>),
        Fun,
        Truncated(u64, Box<T>),
        Opaque(Opaque),
    }

    const NIL_BITS: u64 = 0x3b;

    /// Terms live in an arena, referred to by index (the source's `Term` is `Copy`).
    struct Arena(Vec<T>, Vec<Vec<usize>>);

    impl Arena {
        fn add(&mut self, t: &T) -> usize {
            let children: Vec<usize> = match t {
                T::List(elements, tail) => {
                    // Cells: a cons is [head, tail].
                    let tail = self.add(tail);
                    let mut rest = tail;
                    for e in elements.iter().rev() {
                        let head = self.add(e);
                        self.0.push(T::Nil);
                        self.1.push(vec![head, rest]);
                        rest = self.0.len() - 1;
                        // Mark as a cons cell.
                        self.0[rest] = T::List(vec![], Box::new(T::Nil));
                    }
                    return rest;
                }
                T::Tuple(elements) => elements.iter().map(|e| self.add(e)).collect(),
                T::Map(pairs) => pairs.iter().flat_map(|(k, v)| [k, v]).map(|e| self.add(e)).collect::<Vec<_>>(),
                _ => vec![],
            };
            self.0.push(t.clone());
            self.1.push(children);
            self.0.len() - 1
        }
    }

    impl TermSource for Arena {
        type Term = usize;
        fn view(&self, term: usize) -> View<'_, usize> {
            match &self.0[term] {
                T::Atom(bits) => View::Immediate(*bits),
                T::Nil => View::Immediate(NIL_BITS),
                T::Int(i) => View::Int(*i),
                T::Big(u) => View::UInt(*u),
                T::Float(f) => View::Float(*f),
                T::Bin(b) => View::Binary(b),
                T::List(..) => View::Cons(self.1[term][0], self.1[term][1]),
                T::Tuple(_) => View::Tuple(&self.1[term]),
                T::Map(pairs) => View::Map(pairs.len()),
                T::Ref(_) => View::External,
                T::Fun => View::Opaque(Opaque::Fun),
                T::Truncated(..) | T::Opaque(_) => unreachable!("not a source term"),
            }
        }
        fn map_pairs(&self, map: usize, pair: &mut dyn FnMut(usize, usize) -> bool) {
            for kv in self.1[map].chunks(2) {
                if !pair(kv[0], kv[1]) {
                    return;
                }
            }
        }
        fn external(&self, term: usize, out: &mut [u8]) -> Option<usize> {
            let T::Ref(bytes) = &self.0[term] else { return None };
            out.get_mut(..bytes.len())?.copy_from_slice(bytes);
            Some(bytes.len())
        }
    }

    struct Build;

    impl TermSink for Build {
        type Term = usize;
        fn immediate(&mut self, bits: u64) -> usize {
            push(if bits == NIL_BITS { T::Nil } else { T::Atom(bits) })
        }
        fn int(&mut self, value: i64) -> usize {
            push(T::Int(value))
        }
        fn uint(&mut self, value: u64) -> usize {
            push(T::Big(value))
        }
        fn float(&mut self, value: f64) -> usize {
            push(T::Float(value))
        }
        fn binary(&mut self, bytes: &[u8]) -> usize {
            push(T::Bin(bytes.to_vec()))
        }
        fn list(&mut self, elements: &[usize], tail: Option<usize>) -> usize {
            let tail = tail.map_or(T::Nil, get);
            // A proper list's model has a Nil tail; an improper one's tail is its last.
            push(T::List(elements.iter().map(|e| get(*e)).collect(), Box::new(tail)))
        }
        fn tuple(&mut self, elements: &[usize]) -> usize {
            push(T::Tuple(elements.iter().map(|e| get(*e)).collect()))
        }
        fn map(&mut self, pairs: &[usize]) -> usize {
            push(T::Map(pairs.chunks(2).map(|kv| (get(kv[0]), get(kv[1]))).collect()))
        }
        fn external(&mut self, bytes: &[u8]) -> Option<usize> {
            Some(push(T::Ref(bytes.to_vec())))
        }
        fn opaque(&mut self, kind: Opaque) -> usize {
            push(T::Opaque(kind))
        }
        fn truncated(&mut self, original: u64, partial: usize) -> usize {
            push(T::Truncated(original, Box::new(get(partial))))
        }
    }

    thread_local! {
        static BUILT: std::cell::RefCell<Vec<T>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    fn push(t: T) -> usize {
        BUILT.with(|b| {
            b.borrow_mut().push(t);
            b.borrow().len() - 1
        })
    }
    fn get(i: usize) -> T {
        BUILT.with(|b| b.borrow()[i].clone())
    }

    /// Encodes in `max` bytes and decodes; also checks the bound.
    fn copy(t: &T, max: usize) -> T {
        let mut arena = Arena(vec![], vec![]);
        let root = arena.add(t);
        let mut out = vec![0u8; max];
        let n = encode(&arena, root, &mut out);
        assert!(n <= max);
        let i = decode(&mut Build, &out[..n]).expect("decodes");
        get(i)
    }

    /// `[]` as the model of a list's end: a list with no elements decodes to Nil.
    fn normal(t: T) -> T {
        match t {
            T::List(elements, tail) if elements.is_empty() => normal(*tail),
            T::List(elements, tail) => {
                let tail = normal(*tail);
                let mut elements: Vec<T> = elements.into_iter().map(normal).collect();
                match tail {
                    T::List(more, rest) => {
                        elements.extend(more);
                        T::List(elements, rest)
                    }
                    tail => T::List(elements, Box::new(tail)),
                }
            }
            T::Tuple(e) => T::Tuple(e.into_iter().map(normal).collect()),
            T::Map(p) => T::Map(p.into_iter().map(|(k, v)| (normal(k), normal(v))).collect()),
            T::Truncated(n, p) => T::Truncated(n, Box::new(normal(*p))),
            t => t,
        }
    }

    fn term() -> impl Strategy<Value = T> {
        let leaf = prop_oneof![
            (0u64..1 << 40).prop_map(|a| T::Atom(a << 6 | 0xb)),
            any::<i64>().prop_map(T::Int),
            any::<u64>().prop_map(T::Big),
            any::<f64>().prop_filter("NaN is not a term", |f| !f.is_nan()).prop_map(T::Float),
            prop::collection::vec(any::<u8>(), 0..40).prop_map(T::Bin),
            Just(T::Nil),
            prop::collection::vec(any::<u8>(), 1..30).prop_map(T::Ref),
        ];
        leaf.prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                (prop::collection::vec(inner.clone(), 1..6), inner.clone())
                    .prop_map(|(e, tail)| T::List(e, Box::new(tail))),
                prop::collection::vec(inner.clone(), 0..6).prop_map(T::Tuple),
                prop::collection::vec((inner.clone(), inner), 0..4).prop_map(T::Map),
            ]
        })
    }

    proptest! {
        /// Small terms come back exactly.
        #[test]
        fn small_terms_round_trip(t in term()) {
            prop_assert_eq!(normal(copy(&t, 65_536)), normal(t));
        }

        /// Any term under any budget: the copy fits the budget and decodes.
        #[test]
        fn any_budget_is_kept(t in term(), max in 32usize..400) {
            copy(&t, max);
        }
    }

    #[test]
    fn a_large_binary_keeps_a_prefix_and_its_size() {
        let big = T::Bin(vec![7; 1 << 20]);
        let T::Truncated(size, partial) = copy(&big, 1024) else { panic!("not cut") };
        assert_eq!(size, 1 << 20);
        let T::Bin(prefix) = *partial else { panic!() };
        assert!(!prefix.is_empty() && prefix.len() < 1024 && prefix.iter().all(|b| *b == 7));
    }

    #[test]
    fn a_long_list_is_cut_with_a_lower_bound() {
        let long = T::List((0..100_000).map(T::Int).collect(), Box::new(T::Nil));
        let args = T::List(vec![long, T::Atom(0xb)], Box::new(T::Nil));
        let T::List(args, _) = copy(&args, 1024) else { panic!() };
        let T::Truncated(bound, partial) = &args[0] else { panic!("{:?}", args[0]) };
        let T::List(kept, _) = &**partial else { panic!() };
        assert_eq!(*bound, kept.len() as u64 + 1);
        assert!(kept.len() > 50 && kept.len() < 120, "{}", kept.len());
        assert_eq!(kept[..3], [T::Int(0), T::Int(1), T::Int(2)]);
    }

    #[test]
    fn deep_nesting_is_cut_at_max_depth() {
        let mut deep = T::Atom(0xb);
        for _ in 0..500 {
            deep = T::Tuple(vec![deep]);
        }
        let mut copied = copy(&deep, 4096);
        let mut depth = 0;
        loop {
            match copied {
                T::Tuple(mut e) => copied = e.remove(0),
                T::Truncated(1, inner) => {
                    assert_eq!(*inner, T::Tuple(vec![]));
                    break;
                }
                other => panic!("{other:?}"),
            }
            depth += 1;
        }
        assert_eq!(depth, MAX_DEPTH);
    }

    #[test]
    fn a_fun_and_what_does_not_fit_are_marked() {
        assert_eq!(copy(&T::Fun, 64), T::Opaque(Opaque::Fun));
        assert_eq!(copy(&T::Ref(vec![1; 100]), 64), T::Opaque(Opaque::Other));
        let map = T::Map((0..20).map(|i| (T::Int(i), T::Int(i))).collect());
        let T::Truncated(20, partial) = copy(&map, 100) else { panic!() };
        let T::Map(kept) = *partial else { panic!() };
        assert!(!kept.is_empty() && kept.len() < 20);
    }
}
