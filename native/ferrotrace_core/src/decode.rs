//! Reading trace messages, written against a small term interface so that the rules can be
//! property-tested without a VM. The NIF implements [`TermReader`] over `enif_*` calls.
//!
//! Nothing in a trace message is trusted: a message of an unexpected shape decodes to `None`
//! and the caller counts it as ignored.

use crate::event::Mfa;

/// The few questions the decoder asks about a term.
pub trait TermReader {
    /// A term handle (a raw term word in the NIF).
    type Term: Copy;
    /// The elements of a tuple of exactly three elements.
    fn tuple3(&self, term: Self::Term) -> Option<[Self::Term; 3]>;
    /// The raw word of an atom, kept past the callback; `None` for any other term. One call
    /// checks and takes the word, so a word is never taken from a term not checked.
    fn atom_bits(&self, term: Self::Term) -> Option<u64>;
    /// The length of a proper list.
    fn list_length(&self, term: Self::Term) -> Option<u32>;
    /// The value of an integer that fits 64 bits.
    fn integer(&self, term: Self::Term) -> Option<i64>;
}

/// Largest arity the VM allows.
pub const MAX_ARITY: i64 = 255;

/// Reads `{Module, Function, Args}` (a call) or `{Module, Function, Arity}` (a return, an
/// exception, or a call traced with the `arity` flag).
#[inline]
pub fn decode_mfa<R: TermReader>(reader: &R, message: R::Term) -> Option<Mfa> {
    let [module, function, args] = reader.tuple3(message)?;
    let (module, function) = (reader.atom_bits(module)?, reader.atom_bits(function)?);
    let arity = match reader.list_length(args) {
        Some(length) => length,
        None => match reader.integer(args) {
            Some(arity) if (0..=MAX_ARITY).contains(&arity) => arity as u32,
            _ => return None,
        },
    };
    if arity as i64 > MAX_ARITY {
        return None;
    }
    Some(Mfa { module, function, arity })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A model of Erlang terms, enough to exercise every branch of the decoder.
    #[derive(Clone, Debug)]
    enum Model {
        Atom(u32),
        Integer(i64),
        Float,
        Binary,
        List(Vec<Model>),
        /// A list whose tail is not `[]`.
        ImproperList,
        Tuple(Vec<Model>),
    }

    struct ModelReader;

    impl<'a> TermReader for &'a ModelReader {
        type Term = &'a Model;
        fn tuple3(&self, term: &'a Model) -> Option<[&'a Model; 3]> {
            match term {
                Model::Tuple(items) if items.len() == 3 => Some([&items[0], &items[1], &items[2]]),
                _ => None,
            }
        }
        fn atom_bits(&self, term: &'a Model) -> Option<u64> {
            match term {
                Model::Atom(a) => Some(*a as u64),
                _ => None,
            }
        }
        fn list_length(&self, term: &'a Model) -> Option<u32> {
            match term {
                Model::List(items) => Some(items.len() as u32),
                _ => None,
            }
        }
        fn integer(&self, term: &'a Model) -> Option<i64> {
            match term {
                Model::Integer(i) => Some(*i),
                _ => None,
            }
        }
    }

    fn model() -> impl Strategy<Value = Model> {
        let leaf = prop_oneof![
            (0u32..4).prop_map(Model::Atom),
            prop_oneof![any::<i64>(), -2i64..300].prop_map(Model::Integer),
            Just(Model::Float),
            Just(Model::Binary),
            Just(Model::ImproperList),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Model::List),
                prop::collection::vec(inner, 0..5).prop_map(Model::Tuple),
            ]
        })
    }

    /// The decoder's contract, stated independently.
    fn expected(term: &Model) -> Option<(u32, u32, u32)> {
        let Model::Tuple(items) = term else { return None };
        let [Model::Atom(m), Model::Atom(f), args] = items.as_slice() else { return None };
        let arity = match args {
            Model::List(list) if list.len() <= 255 => list.len() as u32,
            Model::Integer(i) if (0..=255).contains(i) => *i as u32,
            _ => return None,
        };
        Some((*m, *f, arity))
    }

    #[test]
    fn decodes_call_and_return_shapes() {
        let call = Model::Tuple(vec![Model::Atom(1), Model::Atom(2), Model::List(vec![Model::Float, Model::Binary])]);
        let ret = Model::Tuple(vec![Model::Atom(1), Model::Atom(2), Model::Integer(2)]);
        for message in [&call, &ret] {
            assert_eq!(decode_mfa(&&ModelReader, message), Some(Mfa { module: 1, function: 2, arity: 2 }));
        }
        let bad_arity = Model::Tuple(vec![Model::Atom(1), Model::Atom(2), Model::Integer(256)]);
        assert_eq!(decode_mfa(&&ModelReader, &bad_arity), None);
        let improper = Model::Tuple(vec![Model::Atom(1), Model::Atom(2), Model::ImproperList]);
        assert_eq!(decode_mfa(&&ModelReader, &improper), None);
    }

    proptest! {
        /// Any term decodes exactly as the contract says, and never panics.
        #[test]
        fn decoder_follows_the_contract(term in model()) {
            let got = decode_mfa(&&ModelReader, &term).map(|m| (m.module as u32, m.function as u32, m.arity));
            prop_assert_eq!(got, expected(&term));
        }

        /// Well-formed messages always decode, whatever the arguments hold.
        #[test]
        fn well_formed_messages_decode(m in 0u32..4, f in 0u32..4, args in prop::collection::vec(model(), 0..8)) {
            let n = args.len() as u32;
            let term = Model::Tuple(vec![Model::Atom(m), Model::Atom(f), Model::List(args)]);
            prop_assert_eq!(decode_mfa(&&ModelReader, &term), Some(Mfa { module: m as u64, function: f as u64, arity: n }));
        }
    }
}
