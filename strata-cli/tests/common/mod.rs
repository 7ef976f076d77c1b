//! The library's test helpers (the root package's `tests/common`), shared by path so they exist
//! once. The `strata` binary's own helpers are in `cli.rs` beside this file.

#[path = "../../../tests/common/mod.rs"]
mod library;

pub use library::*;
