//! Decoding *activity*, the trace tags other than calls (messages, procs, GC, running,
//! ports), into fixed-size events, on the hot path: a few `enif_*` reads per event, a bounded
//! walk for a message's size, nothing kept. `tracer.rs` calls it; their `enabled_<tag>/3`
//! callbacks are there, with the others.

use std::ffi::c_int;

use rustler::sys::{
    enif_get_int64, enif_get_list_cell, enif_get_local_pid, enif_get_local_port, enif_get_map_size,
    enif_get_map_value, enif_get_tuple, enif_get_uint64, enif_inspect_binary,
    enif_term_type, ErlNifBinary, ErlNifEnv, ErlNifPid, ErlNifPort, ErlNifTerm, ErlNifTermType,
};

use ferrotrace_core::decode::decode_mfa;
use ferrotrace_core::event::{EventKind, Mfa, ProcTag, NO_MFA};
use ferrotrace_core::msgsize::{size_words, Shape, SizeReader};

use super::atoms::atoms;
use crate::encoding::immediate::Immediate;
use crate::encoding::term_reader::EnvReader;

/// The size walk's view of terms in a NIF environment.
struct SizeEnv(*mut ErlNifEnv);

impl SizeReader for SizeEnv {
    type Term = ErlNifTerm;
    #[inline]
    fn shape(&self, term: ErlNifTerm) -> Shape<ErlNifTerm> {
        let env = self.0;
        // SAFETY: for the whole block, `env` is the current callback's env and `term` one of its
        // terms (or an element read from one); every out-pointer is a local of the right type.
        unsafe {
            match enif_term_type(env, term) {
                ErlNifTermType::ERL_NIF_TERM_TYPE_ATOM => Shape::Immediate,
                ErlNifTermType::ERL_NIF_TERM_TYPE_LIST => {
                    let (mut head, mut tail) = (term, term);
                    if enif_get_list_cell(env, term, &mut head, &mut tail) != 0 {
                        Shape::Cons(head, tail)
                    } else {
                        Shape::Immediate // []
                    }
                }
                ErlNifTermType::ERL_NIF_TERM_TYPE_TUPLE => {
                    let mut arity: c_int = 0;
                    let mut elements: *const ErlNifTerm = std::ptr::null();
                    enif_get_tuple(env, term, &mut arity, &mut elements);
                    Shape::Tuple(arity.max(0) as u32)
                }
                ErlNifTermType::ERL_NIF_TERM_TYPE_INTEGER => {
                    let mut value: i64 = 0;
                    let mut unsigned: u64 = 0;
                    if enif_get_int64(env, term, &mut value) != 0 {
                        // Small integers are 60-bit signed immediates.
                        if (-(1i64 << 59)..(1i64 << 59)).contains(&value) { Shape::Immediate } else { Shape::Big(1) }
                    } else if enif_get_uint64(env, term, &mut unsigned) != 0 {
                        Shape::Big(1)
                    } else {
                        Shape::Opaque(3)
                    }
                }
                ErlNifTermType::ERL_NIF_TERM_TYPE_FLOAT => Shape::Float,
                ErlNifTermType::ERL_NIF_TERM_TYPE_BITSTRING => {
                    let mut bin = std::mem::MaybeUninit::<ErlNifBinary>::uninit();
                    if enif_inspect_binary(env, term, bin.as_mut_ptr()) != 0 {
                        Shape::Binary(bin.assume_init().size as u64)
                    } else {
                        Shape::Opaque(6)
                    }
                }
                ErlNifTermType::ERL_NIF_TERM_TYPE_MAP => {
                    let mut size: usize = 0;
                    enif_get_map_size(env, term, &mut size);
                    Shape::Map(size as u64)
                }
                ErlNifTermType::ERL_NIF_TERM_TYPE_PID => {
                    let mut pid = std::mem::MaybeUninit::<ErlNifPid>::uninit();
                    if enif_get_local_pid(env, term, pid.as_mut_ptr()) != 0 { Shape::Immediate } else { Shape::Opaque(5) }
                }
                ErlNifTermType::ERL_NIF_TERM_TYPE_PORT => {
                    let mut port = std::mem::MaybeUninit::<ErlNifPort>::uninit();
                    if enif_get_local_port(env, term, port.as_mut_ptr()) != 0 { Shape::Immediate } else { Shape::Opaque(5) }
                }
                ErlNifTermType::ERL_NIF_TERM_TYPE_REFERENCE => Shape::Fixed(3),
                _ => Shape::Opaque(0), // funs and anything newer
            }
        }
    }
    #[inline]
    fn element(&self, tuple: ErlNifTerm, index: u32) -> ErlNifTerm {
        let mut arity: c_int = 0;
        let mut elements: *const ErlNifTerm = std::ptr::null();
        // SAFETY: `tuple` is a tuple of more than `index` elements (the walk's contract);
        // `elements` then points at `arity` terms.
        unsafe {
            enif_get_tuple(self.0, tuple, &mut arity, &mut elements);
            *elements.add(index as usize)
        }
    }
}

/// A size event's fields: words in `function`, capped in `arity`, `to` in `module`.
#[inline]
fn sized(env: *mut ErlNifEnv, message: ErlNifTerm, to: u64) -> Mfa {
    let (words, capped) = size_words(&SizeEnv(env), message);
    Mfa { module: to, function: words.min((1 << 47) - 1), arity: u32::from(capped) }
}

/// The local pid bits of `term`, else 0.
///
/// # Safety
/// `env` is the callback's env and `term` one of its terms.
#[inline]
unsafe fn local_pid_bits(env: *mut ErlNifEnv, term: ErlNifTerm) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { Immediate::local_pid(env, term) }.map_or(0, Immediate::bits)
}

/// The words in use in a GC info list (`heap_size + old_heap_size + mbuf_size`); at most
/// 64 items are read.
///
/// # Safety
/// `env` is the callback's env and `list` one of its terms.
unsafe fn gc_words(env: *mut ErlNifEnv, list: ErlNifTerm) -> u64 {
    let a = atoms();
    let (mut rest, mut head, mut tail) = (list, list, list);
    let mut words = 0u64;
    for _ in 0..64 {
        // SAFETY: the caller's contract; out-pointers are locals.
        if unsafe { enif_get_list_cell(env, rest, &mut head, &mut tail) } == 0 {
            break;
        }
        rest = tail;
        let mut arity: c_int = 0;
        let mut pair: *const ErlNifTerm = std::ptr::null();
        // SAFETY: as above; two elements are read only from a 2-tuple.
        unsafe {
            if enif_get_tuple(env, head, &mut arity, &mut pair) == 0 || arity != 2 {
                continue;
            }
            let (key, value) = (*pair, *pair.add(1));
            if key == a.heap_size || key == a.old_heap_size || key == a.mbuf_size {
                let mut v: u64 = 0;
                if enif_get_uint64(env, value, &mut v) != 0 {
                    words = words.saturating_add(v);
                }
            }
        }
    }
    words
}

/// The event for a tag other than `call`, `return_from`, `exception_from`, or `None` for a
/// tag or message that is not aggregated (counted as ignored by the caller).
///
/// # Safety
/// `env` is the `trace/5` callback's env and `argv` its five arguments.
#[inline]
pub unsafe fn decode(env: *mut ErlNifEnv, argv: &[ErlNifTerm; 5]) -> Option<(EventKind, Mfa)> {
    let a = atoms();
    let (tag, tracee, message, opts) = (argv[0], argv[2], argv[3], argv[4]);
    // Asked only by the tags ports share with processes (a VM call: not on the message path).
    let is_port = || {
        let mut port = std::mem::MaybeUninit::<ErlNifPort>::uninit();
        // SAFETY: `env` and `tracee` are the callback's (the caller's contract).
        unsafe { enif_get_local_port(env, tracee, port.as_mut_ptr()) != 0 }
    };
    let zero = NO_MFA;
    let event = if tag == a.send || tag == a.send_to_non_existing_process {
        let mut to = message;
        // SAFETY: as above; `to` is a valid out-pointer.
        let to = if unsafe { enif_get_map_value(env, opts, a.extra, &mut to) } != 0 {
            // SAFETY: as above.
            unsafe { local_pid_bits(env, to) }
        } else {
            0
        };
        let kind = if tag == a.send { EventKind::Send } else { EventKind::SendDead };
        (kind, sized(env, message, to))
    } else if tag == a.receive {
        if message == a.timeout {
            (EventKind::ReceiveTimeout, zero)
        } else {
            (EventKind::Receive, sized(env, message, 0))
        }
    } else if tag == a.in_ || tag == a.in_exiting {
        let kind = if is_port() { EventKind::PortIn } else { EventKind::In };
        (kind, decode_mfa(&EnvReader(env), message).unwrap_or(zero))
    } else if tag == a.out || tag == a.out_exiting || tag == a.out_exited {
        let kind = match (is_port(), tag == a.out_exited) {
            (true, _) => EventKind::PortOut,
            (false, true) => EventKind::OutExited,
            (false, false) => EventKind::Out,
        };
        (kind, decode_mfa(&EnvReader(env), message).unwrap_or(zero))
    } else if tag == a.gc_minor_start || tag == a.gc_major_start || tag == a.gc_minor_end || tag == a.gc_major_end {
        let start = tag == a.gc_minor_start || tag == a.gc_major_start;
        let major = tag == a.gc_major_start || tag == a.gc_major_end;
        // SAFETY: as above.
        let words = unsafe { gc_words(env, message) }.min((1 << 47) - 1);
        let kind = if start { EventKind::GcStart } else { EventKind::GcEnd };
        (kind, Mfa { module: 0, function: words, arity: u32::from(major) })
    } else if is_port() {
        if tag == a.open {
            (EventKind::PortOpen, zero)
        } else if tag == a.closed {
            (EventKind::PortClosed, zero)
        } else {
            return None; // port link/unlink/register: counted as ignored
        }
    } else if tag == a.spawn {
        // SAFETY: as above.
        (EventKind::Spawn, Mfa { module: unsafe { local_pid_bits(env, message) }, ..zero })
    } else if tag == a.spawned {
        // SAFETY: as above.
        (EventKind::Spawned, Mfa { module: unsafe { local_pid_bits(env, message) }, ..zero })
    } else if tag == a.exit {
        (EventKind::Exit, Mfa { module: exit_reason(env, message), ..zero })
    } else {
        let which = [
            (a.link, ProcTag::Link),
            (a.unlink, ProcTag::Unlink),
            (a.getting_linked, ProcTag::GettingLinked),
            (a.getting_unlinked, ProcTag::GettingUnlinked),
            (a.register, ProcTag::Register),
            (a.unregister, ProcTag::Unregister),
        ]
        .iter()
        .find(|(atom, _)| *atom == tag)?
        .1;
        (EventKind::ProcOther, Mfa { arity: which as u32, ..zero })
    };
    Some(event)
}

/// An exit reason as atom bits: the reason, or the first element of a tuple reason
/// (`{shutdown, _}` counts as `shutdown`); 0 for any other reason.
#[inline]
fn exit_reason(env: *mut ErlNifEnv, reason: ErlNifTerm) -> u64 {
    // SAFETY: `env` is the callback's env and `reason` one of its terms; the tuple's first
    // element is read only when it has one.
    unsafe {
        if let Some(atom) = Immediate::atom(env, reason) {
            return atom.bits();
        }
        let mut arity: c_int = 0;
        let mut elements: *const ErlNifTerm = std::ptr::null();
        if enif_get_tuple(env, reason, &mut arity, &mut elements) != 0 && arity > 0 {
            return Immediate::atom(env, *elements).map_or(0, Immediate::bits);
        }
    }
    0
}
