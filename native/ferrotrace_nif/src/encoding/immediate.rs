//! [`Immediate`]: the one way a term outlives the NIF call that saw it as raw bits.
//!
//! The hot path keeps no term, only words: a tracee's pid, the atoms of an MFA, a receiver's
//! pid, an exit reason's atom. They are read back later, in another NIF call and another env,
//! and rebuilt into terms there. That is sound only for *immediates* (atoms, local pids and
//! ports, small integers, `[]`): their word is the whole term, valid in any env for as long as
//! the VM runs. The word of any other term (a binary, a tuple, a remote pid, a reference)
//! points into a heap that may be gone by then; rebuilt, it corrupts the VM (found by
//! fuzzing: `trace/5` called from Erlang with a binary as the tracee).
//!
//! So a word is kept only as an [`Immediate`], which is built only after a check of the term
//! (`enif_get_local_pid`, `enif_is_atom`, ...), and rebuilt only through [`Immediate::term`],
//! which holds the one `SAFETY` argument. Words come back from `ferrotrace_core` as plain
//! `u64`s; [`Immediate::kept`] checks their tag again, so that even a word that did not come
//! from here (a zero for "none", a bug) can never become a term.

use rustler::sys::{enif_get_local_pid, enif_get_local_port, enif_is_atom, ErlNifEnv, ErlNifPid, ErlNifPort, ErlNifTerm};
use rustler::{Env, LocalPid, Term};

/// The primary tag of an immediate term, in its two low bits (`TAG_PRIMARY_IMMED1`, the same
/// in every 64-bit VM this library loads in).
const PRIMARY_MASK: u64 = 0x3;
const PRIMARY_IMMEDIATE: u64 = 0x3;

/// The tag of a local pid in its low four bits (`_TAG_IMMED1_PID`: an immediate, subtag 0).
const LOCAL_PID_MASK: u64 = 0xF;
const LOCAL_PID_TAG: u64 = 0x3;

/// The word of an immediate term of this VM, checked to be one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Immediate(u64);

/// The raw bits of a term (`ErlNifTerm` is a transparent word whose field is private).
#[inline]
fn bits(term: ErlNifTerm) -> u64 {
    // SAFETY: `ErlNifTerm` is `#[repr(transparent)]` over a `usize`; every bit pattern of a
    // term is a valid `usize`.
    unsafe { std::mem::transmute::<ErlNifTerm, usize>(term) as u64 }
}

impl Immediate {
    /// A word with an immediate's tag, else `None`.
    #[inline]
    fn tagged(word: u64) -> Option<Immediate> {
        (word & PRIMARY_MASK == PRIMARY_IMMEDIATE).then_some(Immediate(word))
    }

    /// A local pid (the tracee of a process event, a message's receiver).
    ///
    /// # Safety
    /// `env` is the current NIF call's env and `term` one of its terms.
    #[inline]
    pub unsafe fn local_pid(env: *mut ErlNifEnv, term: ErlNifTerm) -> Option<Immediate> {
        let mut pid = std::mem::MaybeUninit::<ErlNifPid>::uninit();
        // SAFETY: the caller's contract; `pid` is a valid out-pointer.
        if unsafe { enif_get_local_pid(env, term, pid.as_mut_ptr()) } != 0 { Self::tagged(bits(term)) } else { None }
    }

    /// A tracee: a local pid, or a local port for the port events. On the hot path: a word
    /// with the VM's tag of a local pid is taken as one without a call into the VM (the
    /// test is erts's own `is_internal_pid`: the low four bits `0b0011`, the same in every
    /// 64-bit VM this library loads in); any other word is asked of the VM.
    ///
    /// # Safety
    /// As [`Immediate::local_pid`].
    #[inline]
    pub unsafe fn tracee(env: *mut ErlNifEnv, term: ErlNifTerm) -> Option<Immediate> {
        let word = bits(term);
        if word & LOCAL_PID_MASK == LOCAL_PID_TAG {
            return Some(Immediate(word));
        }
        // SAFETY: the caller's contract.
        if let Some(pid) = unsafe { Self::local_pid(env, term) } {
            return Some(pid);
        }
        let mut port = std::mem::MaybeUninit::<ErlNifPort>::uninit();
        // SAFETY: the caller's contract; `port` is a valid out-pointer.
        if unsafe { enif_get_local_port(env, term, port.as_mut_ptr()) } != 0 { Self::tagged(bits(term)) } else { None }
    }

    /// An atom.
    ///
    /// # Safety
    /// As [`Immediate::local_pid`].
    #[inline]
    pub unsafe fn atom(env: *mut ErlNifEnv, term: ErlNifTerm) -> Option<Immediate> {
        // SAFETY: the caller's contract.
        if unsafe { enif_is_atom(env, term) } != 0 { Self::tagged(bits(term)) } else { None }
    }

    /// Any immediate term (for the term copies of `args => true`: atoms, local pids and
    /// ports, small integers, `[]`).
    #[inline]
    pub fn of(term: ErlNifTerm) -> Option<Immediate> {
        Self::tagged(bits(term))
    }

    /// A local pid term: rustler decoded it as one.
    #[inline]
    pub fn of_pid(env: Env, pid: &LocalPid) -> Immediate {
        use rustler::Encoder;
        Immediate(bits(pid.encode(env).as_c_arg()))
    }

    /// A word kept by the engine, if it has an immediate's tag (the zero the engine keeps for
    /// "none" has not).
    #[inline]
    pub fn kept(word: u64) -> Option<Immediate> {
        Self::tagged(word)
    }

    /// A word kept by the engine as a local pid's (a process the fuse untraced), if it has a
    /// local pid's tag: it is given back as a pid, so it must not read as anything else.
    #[inline]
    pub fn kept_pid(word: u64) -> Option<Immediate> {
        (word & LOCAL_PID_MASK == LOCAL_PID_TAG).then_some(Immediate(word))
    }

    /// The word, for the engine to keep.
    #[inline]
    pub fn bits(self) -> u64 {
        self.0
    }

    /// The term again, in any env.
    #[inline]
    pub fn raw(self) -> ErlNifTerm {
        // SAFETY: `ErlNifTerm` is a transparent `usize`. The word is an immediate's: every
        // constructor checks the tag, and all but `kept` and `of` check the term's type with
        // the VM's own test first. An immediate holds its whole value in the word, so it is
        // valid in every env for as long as the VM runs (an atom is never freed; a dead
        // process's pid is still a pid).
        unsafe { std::mem::transmute::<usize, ErlNifTerm>(self.0 as usize) }
    }

    /// The term again, in `env`.
    #[inline]
    pub fn term(self, env: Env) -> Term {
        // SAFETY: `raw` is a valid term in any env (see there).
        unsafe { Term::new(env, self.raw()) }
    }
}

/// The term of a kept word, or `undefined` when the word is not an immediate's.
pub fn kept_term<'a>(env: Env<'a>, word: u64) -> Term<'a> {
    match Immediate::kept(word) {
        Some(immediate) => immediate.term(env),
        None => rustler::types::atom::undefined().to_term(env),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_words_with_an_immediate_tag_are_kept() {
        // 0b..11: atoms (0x0B low bits), pids (0x03), small integers (0x0F), [] (0x3B).
        for word in [0x0B_u64, 0x1234_0003, 0xFFFF_000F, 0x3B] {
            assert_eq!(Immediate::kept(word).map(Immediate::bits), Some(word));
        }
        // A boxed term (0b10), a list cell (0b01), a header (0b00), and the "none" zero.
        for word in [0x7f00_1232_u64, 0x7f00_1231, 0x7f00_1230, 0] {
            assert_eq!(Immediate::kept(word), None);
        }
    }

    #[test]
    fn only_local_pid_words_are_kept_as_pids() {
        assert_eq!(Immediate::kept_pid(0x1234_0003).map(Immediate::bits), Some(0x1234_0003));
        // An atom, a port (0x07), a small integer, [], a boxed term, zero.
        for word in [0x0B_u64, 0x1234_0007, 0xFFFF_000F, 0x3B, 0x7f00_1232, 0] {
            assert_eq!(Immediate::kept_pid(word), None, "{word:#x}");
        }
    }
}
