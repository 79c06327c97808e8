//! Reading terms: raw term words, and the decoder's [`TermReader`] over `enif_*` calls.

use std::ffi::c_int;

use rustler::sys::{enif_get_int64, enif_get_list_length, enif_get_tuple, enif_is_atom, ErlNifEnv, ErlNifTerm};

use ferrotrace_core::decode::TermReader;

/// The raw bits of a term (`ErlNifTerm` is a transparent word whose field is private).
#[inline]
pub fn term_bits(term: ErlNifTerm) -> u64 {
    // SAFETY: `ErlNifTerm` is `#[repr(transparent)]` over a `usize`; every bit pattern of a
    // term is a valid `usize`.
    unsafe { std::mem::transmute::<ErlNifTerm, usize>(term) as u64 }
}

/// A term from raw bits.
///
/// # Safety
/// `bits` must be the bits of an immediate term (an atom, a local pid, a small integer) taken
/// from a term of this VM by [`term_bits`]: immediates are valid in every environment for as
/// long as the VM runs. Any other term (a boxed or list term) would point into a heap that may
/// be gone, and the VM would read freed memory.
#[inline]
pub unsafe fn term_from_bits(bits: u64) -> ErlNifTerm {
    // SAFETY: `ErlNifTerm` is a transparent `usize`; validity as a term is the caller's
    // contract above.
    unsafe { std::mem::transmute::<usize, ErlNifTerm>(bits as usize) }
}

/// The decoder's view of terms in a NIF environment.
pub struct EnvReader(pub *mut ErlNifEnv);

impl TermReader for EnvReader {
    type Term = ErlNifTerm;
    #[inline]
    fn tuple3(&self, term: ErlNifTerm) -> Option<[ErlNifTerm; 3]> {
        let mut arity: c_int = 0;
        let mut elements: *const ErlNifTerm = std::ptr::null();
        // SAFETY: `self.0` is the current NIF call's env and `term` one of its terms; on
        // success `elements` points at `arity` terms, and we read three only if arity is 3.
        unsafe {
            if enif_get_tuple(self.0, term, &mut arity, &mut elements) == 0 || arity != 3 {
                return None;
            }
            Some([*elements, *elements.add(1), *elements.add(2)])
        }
    }
    #[inline]
    fn is_atom(&self, term: ErlNifTerm) -> bool {
        // SAFETY: a valid env and term, as above; the call only reads the term.
        unsafe { enif_is_atom(self.0, term) != 0 }
    }
    #[inline]
    fn list_length(&self, term: ErlNifTerm) -> Option<u32> {
        let mut length: std::ffi::c_uint = 0;
        // SAFETY: a valid env and term; `length` is a valid out-pointer.
        (unsafe { enif_get_list_length(self.0, term, &mut length) } != 0).then_some(length)
    }
    #[inline]
    fn integer(&self, term: ErlNifTerm) -> Option<i64> {
        let mut value: i64 = 0;
        // SAFETY: a valid env and term; `value` is a valid out-pointer.
        (unsafe { enif_get_int64(self.0, term, &mut value) } != 0).then_some(value)
    }
    #[inline]
    fn bits(&self, term: ErlNifTerm) -> u64 {
        term_bits(term)
    }
}
