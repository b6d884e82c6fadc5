//! ddx's integration tests, as one binary (as ripgrep keeps its own): the
//! crate and the rigs compile once, not once per file, and a helper
//! nothing calls is reported as dead code instead of being allowed.
//!
//! Each module is one family of behaviour run through the real binary,
//! most of it side by side with GNU dd, the reference (`rigs::fixture`:
//! `Compare` for both, `Ddx` for ddx alone). Tests that need root, a tool,
//! a device or a server build it with `rigs` and skip through `rigs::skip`
//! where they cannot: one line each past the output capture, a list by
//! name at the end of the run, and a failure under `DDX_REQUIRE_RIGS=1`.

mod rigs;

mod auto_block;
mod bench;
mod bench_page;
mod cache;
mod cli;
#[cfg(feature = "object")]
mod cluster_faults;
mod compressed_input;
mod corpora;
mod differential;
mod direct_io;
mod filesystems;
mod guard;
#[cfg(all(feature = "nbd", feature = "object"))]
mod guide;
mod image;
mod image_copy;
#[cfg(all(feature = "nbd", feature = "object"))]
mod latency;
mod layers;
#[cfg(feature = "nbd")]
mod nbd;
#[cfg(feature = "nbd")]
mod nbd_cli;
#[cfg(feature = "nbd")]
mod nbd_faults;
#[cfg(feature = "object")]
mod object;
#[cfg(feature = "object")]
mod object_copy;
#[cfg(feature = "object")]
mod object_faults;
mod passthrough;
#[cfg(feature = "nbd")]
mod power_cut;
mod probe;
mod progress;
mod refusals;
mod rescue;
mod rescue_phases;
mod splice;
mod tcp;
mod trim;
mod used_only;
