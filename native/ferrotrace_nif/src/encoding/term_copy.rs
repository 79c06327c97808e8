//! Terms copied with `args => true`: walking a term through the `enif_*` API for the encoder
//! (on the scheduler, in `trace/5`), and building it again for Erlang (in the management NIFs).
//! The format and its bounds are `ferrotrace_core::term_format`'.

use std::ffi::{c_int, c_uint};

use rustler::sys::{
    enif_binary_to_term, enif_get_double, enif_get_int64, enif_get_list_cell, enif_get_map_size, enif_get_tuple,
    enif_get_uint64, enif_inspect_binary, enif_is_empty_list, enif_make_atom, enif_make_double, enif_make_int64,
    enif_make_list_cell, enif_make_list_from_array, enif_make_map_from_arrays, enif_make_new_binary,
    enif_make_tuple_from_array, enif_make_uint64, enif_map_iterator_create, enif_map_iterator_destroy,
    enif_map_iterator_get_pair, enif_map_iterator_next, enif_release_binary, enif_term_to_binary, enif_term_type,
    ErlNifBinary, ErlNifEnv, ErlNifMapIterator, ErlNifMapIteratorEntry, ErlNifTerm, ErlNifTermType,
};

use ferrotrace_core::term_format::{self, Opaque, TermSink, TermSource, View};

use super::immediate::Immediate;

/// The encoder's view of terms in a NIF environment (the trace callback's).
pub struct EnvSource(pub *mut ErlNifEnv);

impl TermSource for EnvSource {
    type Term = ErlNifTerm;

    fn view(&self, term: ErlNifTerm) -> View<'_, ErlNifTerm> {
        let env = self.0;
        if let Some(word) = Immediate::of(term) {
            return View::Immediate(word.bits());
        }
        // SAFETY: `env` is the current NIF call's env and `term` one of its terms (or a part
        // of one); every out-pointer below is valid, and what the calls give back (a tuple's
        // elements, a binary's bytes) lives as long as the term, which outlives this copy.
        unsafe {
            match enif_term_type(env, term) {
                ErlNifTermType::ERL_NIF_TERM_TYPE_LIST => {
                    let (mut head, mut tail) = (term, term);
                    if enif_get_list_cell(env, term, &mut head, &mut tail) != 0 {
                        View::Cons(head, tail)
                    } else {
                        View::Opaque(Opaque::Other)
                    }
                }
                ErlNifTermType::ERL_NIF_TERM_TYPE_TUPLE => {
                    let mut arity: c_int = 0;
                    let mut elements: *const ErlNifTerm = std::ptr::null();
                    if enif_get_tuple(env, term, &mut arity, &mut elements) == 0 || elements.is_null() {
                        return View::Tuple(&[]);
                    }
                    View::Tuple(std::slice::from_raw_parts(elements, arity as usize))
                }
                ErlNifTermType::ERL_NIF_TERM_TYPE_BITSTRING => {
                    let mut binary: ErlNifBinary = std::mem::zeroed();
                    if enif_inspect_binary(env, term, &mut binary) == 0 {
                        return View::Opaque(Opaque::Bitstring);
                    }
                    if binary.size == 0 {
                        return View::Binary(&[]);
                    }
                    View::Binary(std::slice::from_raw_parts(binary.data, binary.size))
                }
                ErlNifTermType::ERL_NIF_TERM_TYPE_INTEGER => {
                    let (mut i, mut u) = (0i64, 0u64);
                    if enif_get_int64(env, term, &mut i) != 0 {
                        View::Int(i)
                    } else if enif_get_uint64(env, term, &mut u) != 0 {
                        View::UInt(u)
                    } else {
                        View::Opaque(Opaque::Bignum)
                    }
                }
                ErlNifTermType::ERL_NIF_TERM_TYPE_FLOAT => {
                    let mut f = 0.0;
                    enif_get_double(env, term, &mut f);
                    View::Float(f)
                }
                ErlNifTermType::ERL_NIF_TERM_TYPE_MAP => {
                    let mut size: usize = 0;
                    enif_get_map_size(env, term, &mut size);
                    View::Map(size)
                }
                ErlNifTermType::ERL_NIF_TERM_TYPE_REFERENCE
                | ErlNifTermType::ERL_NIF_TERM_TYPE_PID
                | ErlNifTermType::ERL_NIF_TERM_TYPE_PORT => View::External,
                ErlNifTermType::ERL_NIF_TERM_TYPE_FUN => View::Opaque(Opaque::Fun),
                _ => View::Opaque(Opaque::Other),
            }
        }
    }

    fn map_pairs(&self, map: ErlNifTerm, pair: &mut dyn FnMut(ErlNifTerm, ErlNifTerm) -> bool) {
        let env = self.0;
        // SAFETY: `map` is a map term of this env; the iterator lives on this stack frame and
        // is destroyed before returning; key and value are valid out-pointers.
        unsafe {
            let mut iter: ErlNifMapIterator = std::mem::zeroed();
            if enif_map_iterator_create(env, map, &mut iter, ErlNifMapIteratorEntry::ERL_NIF_MAP_ITERATOR_HEAD) == 0 {
                return;
            }
            let (mut key, mut value) = (map, map);
            while enif_map_iterator_get_pair(env, &mut iter, &mut key, &mut value) != 0 {
                if !pair(key, value) {
                    break;
                }
                enif_map_iterator_next(env, &mut iter);
            }
            enif_map_iterator_destroy(env, &mut iter);
        }
    }

    fn external(&self, term: ErlNifTerm, out: &mut [u8]) -> Option<usize> {
        // Only references, remote pids and ports get here: a few dozen bytes, so the VM's
        // copy is small and bounded.
        // SAFETY: a valid env and term; the binary is released on every path.
        unsafe {
            let mut binary: ErlNifBinary = std::mem::zeroed();
            if enif_term_to_binary(self.0, term, &mut binary) == 0 {
                return None;
            }
            let n = binary.size;
            let fits = n <= out.len();
            if fits {
                out[..n].copy_from_slice(std::slice::from_raw_parts(binary.data, n));
            }
            enif_release_binary(&mut binary);
            fits.then_some(n)
        }
    }
}

/// Encodes `term` into `out` (the producer's buffer); its length.
pub fn encode(env: *mut ErlNifEnv, term: ErlNifTerm, out: &mut [u8]) -> usize {
    term_format::encode(&EnvSource(env), term, out)
}

/// Builds terms in `env` from a copy.
struct EnvSink(*mut ErlNifEnv);

impl EnvSink {
    fn atom(&self, name: &std::ffi::CStr) -> ErlNifTerm {
        // SAFETY: a valid env and a NUL-terminated name.
        unsafe { enif_make_atom(self.0, name.as_ptr()) }
    }
}

impl TermSink for EnvSink {
    type Term = ErlNifTerm;
    fn immediate(&mut self, bits: u64) -> ErlNifTerm {
        // The encoder writes only the words of immediates (`view`); any other word would be
        // a broken copy, rebuilt as `undefined` rather than as a term.
        Immediate::kept(bits).map_or_else(|| self.atom(c"undefined"), Immediate::raw)
    }
    fn int(&mut self, value: i64) -> ErlNifTerm {
        // SAFETY: a valid env.
        unsafe { enif_make_int64(self.0, value) }
    }
    fn uint(&mut self, value: u64) -> ErlNifTerm {
        // SAFETY: a valid env.
        unsafe { enif_make_uint64(self.0, value) }
    }
    fn float(&mut self, value: f64) -> ErlNifTerm {
        // SAFETY: a valid env.
        unsafe { enif_make_double(self.0, value) }
    }
    fn binary(&mut self, bytes: &[u8]) -> ErlNifTerm {
        let mut term = self.atom(c"undefined");
        // SAFETY: a valid env; the VM gives `bytes.len()` writable bytes, or null.
        unsafe {
            let data = enif_make_new_binary(self.0, bytes.len(), &mut term);
            if !data.is_null() {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
            }
        }
        term
    }
    fn list(&mut self, elements: &[ErlNifTerm], tail: Option<ErlNifTerm>) -> ErlNifTerm {
        // SAFETY: a valid env and terms of it.
        unsafe {
            match tail {
                Some(tail) if enif_is_empty_list(self.0, tail) == 0 => {
                    elements.iter().rev().fold(tail, |rest, head| enif_make_list_cell(self.0, *head, rest))
                }
                _ => enif_make_list_from_array(self.0, elements.as_ptr(), elements.len() as c_uint),
            }
        }
    }
    fn tuple(&mut self, elements: &[ErlNifTerm]) -> ErlNifTerm {
        // SAFETY: a valid env and terms of it.
        unsafe { enif_make_tuple_from_array(self.0, elements.as_ptr(), elements.len() as c_uint) }
    }
    fn map(&mut self, pairs: &[ErlNifTerm]) -> ErlNifTerm {
        let keys: Vec<ErlNifTerm> = pairs.iter().step_by(2).copied().collect();
        let values: Vec<ErlNifTerm> = pairs.iter().skip(1).step_by(2).copied().collect();
        let mut map = self.atom(c"undefined");
        // SAFETY: a valid env; keys and values have the same length (distinct keys: they
        // were a map's).
        unsafe { enif_make_map_from_arrays(self.0, keys.as_ptr(), values.as_ptr(), keys.len(), &mut map) };
        map
    }
    fn external(&mut self, bytes: &[u8]) -> Option<ErlNifTerm> {
        let mut term = self.atom(c"undefined");
        // SAFETY: a valid env; `bytes` is external term format made by this VM.
        (unsafe { enif_binary_to_term(self.0, bytes.as_ptr(), bytes.len(), &mut term, 0) } != 0).then_some(term)
    }
    fn opaque(&mut self, kind: Opaque) -> ErlNifTerm {
        let name = match kind {
            Opaque::Fun => c"fun",
            Opaque::Bignum => c"bignum",
            Opaque::Bitstring => c"bitstring",
            Opaque::Other => c"other",
        };
        let elements = [self.atom(c"ferrotrace_opaque"), self.atom(name)];
        self.tuple(&elements)
    }
    fn truncated(&mut self, original: u64, partial: ErlNifTerm) -> ErlNifTerm {
        let elements = [self.atom(c"ferrotrace_truncated"), self.uint(original), partial];
        self.tuple(&elements)
    }
}

/// The term a copy holds, built in `env`; `undefined` if the bytes are not a copy.
pub fn decode(env: *mut ErlNifEnv, bytes: &[u8]) -> ErlNifTerm {
    let mut sink = EnvSink(env);
    term_format::decode(&mut sink, bytes).unwrap_or_else(|| sink.atom(c"undefined"))
}

/// A copy as a rustler term of `env`.
pub fn copy_term_in<'a>(env: rustler::Env<'a>, copy: &[u8]) -> rustler::Term<'a> {
    // SAFETY: built in `env`.
    unsafe { rustler::Term::new(env, decode(env.as_c_arg(), copy)) }
}

/// A result's copy as `{return, Value}` or, for an exception's `{Class, Reason}`, as
/// `{exception, Class, Reason}`.
pub fn result_term<'a>(env: rustler::Env<'a>, kind: rustler::Atom, exception: bool, copy: &[u8]) -> rustler::Term<'a> {
    use rustler::Encoder;
    let value = copy_term_in(env, copy);
    if exception {
        if let Ok((class, reason)) = value.decode::<(rustler::Term, rustler::Term)>() {
            return (kind, class, reason).encode(env);
        }
    }
    (kind, value).encode(env)
}

/// `copy_term(Term, MaxBytes)`, for tests: `Term` copied as a session would, and decoded.
#[rustler::nif]
fn copy_term<'a>(env: rustler::Env<'a>, term: rustler::Term<'a>, max_bytes: usize) -> rustler::Term<'a> {
    let mut out = vec![0u8; max_bytes.clamp(32, 1 << 20)];
    let raw = env.as_c_arg();
    let n = encode(raw, term.as_c_arg(), &mut out);
    // SAFETY: built in this env.
    unsafe { rustler::Term::new(env, decode(raw, &out[..n])) }
}
