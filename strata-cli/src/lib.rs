//! The `strata` command's work as functions returning values, so it is tested without a process:
//! the command line (`cmd`: every command's arguments, its `run` and the text it prints), the
//! commands' work on a log or a store (`tools`: produce, consume, offsets, the admin commands, the
//! store's put, get, query and stats, and the text rendering of every report) and `bench`. The
//! binary (`src/bin/strata.rs`) parses arguments, sets up logging, calls [`cmd::run`] and exits.
//! Built on the `strata-log` library's API plus its hidden `internals` (the format constants and
//! the inspection behind dump, verify and recover).

pub mod bench;
pub mod cmd;
pub mod tools;
