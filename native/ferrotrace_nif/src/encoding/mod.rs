//! Between Erlang terms and the engine's words and bytes, for the callbacks and the NIFs:
//!
//! - [`term_reader`]: the decoder's `TermReader` over `enif_*` calls (trace messages);
//! - [`immediate`]: the one checked way a term's word outlives its NIF call;
//! - `term_copy`: a term walked with `enif_*` into the bounded format of
//!   `ferrotrace_core::term_format` (`args`, keys), and built back from it when read.

pub mod immediate;
pub(crate) mod term_copy;
pub mod term_reader;
