//! What writing one 20-byte consume-queue entry costs, three ways, into a file preallocated as the
//! store preallocates a `.cq` (fallocate, full size): a `pwrite` per entry (what the store does), a
//! store into a writable shared mapping of the fallocated file, and the same store after the file
//! was zeroed with writes (its blocks no longer unwritten extents). Each way also times the
//! `fdatasync` after the last entry. The measurement a mapped `.cq` write needs before it replaces
//! `pwrite` (docs/DESIGN.md §5 measured mapped stores into the log's segments at a fraction of
//! `pwrite`'s speed; a queue entry is 13 times smaller than the store's records).
//!
//! ```text
//! cargo run --release --example cq_entry_write -- [DIR] [ENTRIES] [ROUNDS]
//! ```
//! `DIR` defaults to a temporary directory (on the file system under test: the default temporary
//! directory may be tmpfs), `ENTRIES` to 300,000 (one default `.cq` file), `ROUNDS` to 3.
#![allow(unsafe_code)]

use std::error::Error;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

const ENTRY: usize = 20;

fn entry(i: u64) -> [u8; ENTRY] {
    let mut bytes = [0u8; ENTRY];
    bytes[..8].copy_from_slice(&(i * 4 + 1).to_be_bytes());
    bytes[8..12].copy_from_slice(&260u32.to_be_bytes());
    bytes[12..].copy_from_slice(&(i ^ 0x5555).to_be_bytes());
    bytes
}

/// A new file of `entries` slots, fallocated (and zeroed with writes if `written`).
fn create(path: &Path, entries: u64, written: bool) -> Result<File, Box<dyn Error>> {
    let _ = std::fs::remove_file(path);
    let file = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
    let len = entries * ENTRY as u64;
    rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, len)?;
    if written {
        file.write_all_at(&vec![0u8; len as usize], 0)?;
    }
    file.sync_all()?;
    Ok(file)
}

/// Per entry (mean and slowest), and the fdatasync after the last.
struct Timing {
    per_entry: Duration,
    slowest: Duration,
    sync: Duration,
}

/// Runs `write` for every entry: the mean and the slowest.
fn timed(entries: u64, mut write: impl FnMut(u64) -> std::io::Result<()>) -> std::io::Result<(Duration, Duration)> {
    let mut slowest = Duration::ZERO;
    let started = Instant::now();
    for i in 0..entries {
        let one = Instant::now();
        write(i)?;
        slowest = slowest.max(one.elapsed());
    }
    Ok((started.elapsed() / entries as u32, slowest))
}

/// One way of writing the entries.
type Way = fn(&File, u64) -> Result<Timing, Box<dyn Error>>;

fn pwrite(file: &File, entries: u64) -> Result<Timing, Box<dyn Error>> {
    let (per_entry, slowest) = timed(entries, |i| file.write_all_at(&entry(i), i * ENTRY as u64))?;
    let started = Instant::now();
    file.sync_data()?;
    Ok(Timing { per_entry, slowest, sync: started.elapsed() })
}

fn mapped(file: &File, entries: u64) -> Result<Timing, Box<dyn Error>> {
    // SAFETY: the file is this program's alone (created above, never truncated while mapped), so
    // nothing changes its length or its bytes behind the mapping.
    let mut map = unsafe { memmap2::MmapMut::map_mut(file)? };
    let (per_entry, slowest) = timed(entries, |i| {
        let at = (i as usize) * ENTRY;
        map[at..at + ENTRY].copy_from_slice(&entry(i));
        Ok(())
    })?;
    let started = Instant::now();
    // What makes mapped stores durable: msync of the dirty range, then the file's data.
    map.flush()?;
    file.sync_data()?;
    Ok(Timing { per_entry, slowest, sync: started.elapsed() })
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let temp = tempfile::tempdir()?;
    let dir = args.next().map(std::path::PathBuf::from).unwrap_or_else(|| temp.path().to_path_buf());
    let entries: u64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(300_000);
    let rounds: u32 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(3);
    let path = dir.join("measure.cq");
    println!("{entries} entries of {ENTRY} bytes into {}, {rounds} rounds", path.display());
    for round in 1..=rounds {
        let ways: [(&str, bool, Way); 3] = [
            ("pwrite, fallocated", false, pwrite),
            ("mapped store, fallocated", false, mapped),
            ("mapped store, zeroed by writes", true, mapped),
        ];
        for (name, written, way) in ways {
            let file = create(&path, entries, written)?;
            let timing = way(&file, entries)?;
            println!(
                "round {round}: {name:32} {:>6} ns/entry (slowest {:>9.2?}), fdatasync after {:>8.2?}",
                timing.per_entry.as_nanos(),
                timing.slowest,
                timing.sync
            );
        }
    }
    let _ = std::fs::remove_file(&path);
    Ok(())
}
