//! The html export's flame graph: folded stacks (`a;b;c Ns` per line, as the `collapsed`
//! export writes them, or a cluster's merged lines) drawn as an SVG by the `inferno` crate,
//! flamegraph.pl's Rust port. Its SVG carries its own script: click a frame to zoom, Ctrl-F
//! to search, the frames' own time in their titles. Drawing it here, rather than with a
//! JavaScript library in the page, keeps one well-known drawing of folded stacks (the one
//! the export suite already checks the `collapsed` export with) and no second copy of the
//! stack merging in JavaScript.

use rustler::{Binary, Encoder, Env, NewBinary, Term};

use inferno::flamegraph::{self, Options};

use super::reply::error;

mod atoms {
    rustler::atoms! { ok, no_stacks, not_utf8 }
}

/// The SVG's width in pixels (flamegraph.pl's default).
const IMAGE_WIDTH: usize = 1200;

/// The widest SVG drawn, in frames' text bytes: past it the page says so instead.
const MAX_FOLDED_BYTES: usize = 64 << 20;

/// `flamegraph_svg(Folded, Title) -> {ok, Svg} | {error, no_stacks | not_utf8 | Reason}`:
/// `Folded` one `a;b;c Count` line per path (counts in ns), `Title` the graph's title.
#[rustler::nif(schedule = "DirtyCpu")]
fn flamegraph_svg<'a>(env: Env<'a>, folded: Binary<'a>, title: Binary<'a>) -> Term<'a> {
    let (Ok(text), Ok(title)) = (std::str::from_utf8(folded.as_slice()), std::str::from_utf8(title.as_slice())) else {
        return error(env, atoms::not_utf8());
    };
    if text.trim().is_empty() || text.len() > MAX_FOLDED_BYTES {
        return error(env, atoms::no_stacks());
    }
    let mut options = Options::default();
    options.title = title.to_string();
    options.count_name = "ns".to_string();
    options.name_type = "Function:".to_string();
    // Colours by the function's name, the same in every graph and on every run.
    options.hash = true;
    options.deterministic = true;
    // A fixed width: inferno's fluid drawing reads its frame's width as it loads, which a
    // page's frame may not have yet (it drew nothing, with a console error, in Chromium).
    options.image_width = Some(IMAGE_WIDTH);
    let mut svg = Vec::new();
    match flamegraph::from_lines(&mut options, text.lines(), &mut svg) {
        Ok(()) => {
            let mut out = NewBinary::new(env, svg.len());
            out.as_mut_slice().copy_from_slice(&svg);
            (atoms::ok(), Binary::from(out)).encode(env)
        }
        Err(_) => error(env, atoms::no_stacks()),
    }
}
