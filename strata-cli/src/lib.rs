//! The `strata` command as a library, so it is tested without a process: the command line (`cmd`:
//! one module per command with its arguments, its `run` and the text it prints), the commands'
//! work as functions returning values (`tools`: produce, consume, offsets, the admin commands, the
//! store's put, get, query and stats) and `bench`. The binary (`src/bin/strata.rs`) parses
//! arguments, sets up logging, calls [`cmd::run`] and exits.
//! Built on the `strata-log` library's API plus its hidden `internals` (the format constants and
//! the inspection behind dump, verify and recover).

pub mod bench;
pub mod cmd;
pub mod tools;
