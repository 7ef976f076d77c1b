//! The `strata` command's work as functions returning values, so it is tested without a process:
//! the commands that act on a log (`tools`: produce, consume, offsets, the admin commands, and the
//! text rendering of every report) and `bench`. The binary (`src/bin/strata.rs`) parses arguments,
//! calls these and prints. Built on the `strata-log` library's API plus its hidden `internals`
//! (the format constants and the inspection behind dump, verify and recover).

pub mod bench;
pub mod tools;
