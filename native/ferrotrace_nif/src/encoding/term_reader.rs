//! Reading terms: the decoder's [`TermReader`] over `enif_*` calls.

use std::ffi::c_int;

use rustler::sys::{enif_get_int64, enif_get_list_length, enif_get_tuple, ErlNifEnv, ErlNifTerm};

use ferrotrace_core::decode::TermReader;

use super::immediate::Immediate;

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
    fn atom_bits(&self, term: ErlNifTerm) -> Option<u64> {
        // SAFETY: a valid env and term, as above.
        unsafe { Immediate::atom(self.0, term) }.map(Immediate::bits)
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
}
