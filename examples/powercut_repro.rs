//! Does an acknowledged write survive a simulated power cut on ext4 when files are used the way
//! strata uses them (docs/POWER_LOSS.md has the answer)? No strata code: only the file pattern,
//! with raw syscalls, so the program can go into an upstream report as it is.
//!
//! The pattern (each step can be dropped with a flag, to find the one the loss needs):
//! - `fallocate`: the next segment `<n>.log.prealloc` (and its index) is created and fallocated
//!   by a background thread once the active one is half full (`--inline-fallocate`: at the roll,
//!   by the writer);
//! - `rename`: at the roll it is renamed to `<n>.log` and the directory fsynced (`--no-rename`:
//!   created under its final name);
//! - `reopen`: the writer opens the renamed file again (`--no-reopen`: it uses the allocator's
//!   descriptor);
//! - `mmap`: a read-only shared map over the whole file, through which each batch is read back
//!   after its fdatasync (`--no-mmap`);
//! - `index`: 8-byte pwrites into the fallocated index file every 1 KiB of data, never synced
//!   (`--no-index`);
//! - `trim`: the segment rolled away from is fdatasynced, cut to its length (ftruncate) and
//!   fdatasynced by another thread while the writer appends to the new one (`--trim inline`: by
//!   the writer at the roll; `--trim none`: fdatasync only).
//!
//! The writer appends batches of 100..1000 bytes with pwrite + fdatasync; a batch is acknowledged
//! when its fdatasync returned 0. Then the power is cut (`EXT4_IOC_SHUTDOWN` with `NOLOGFLUSH`:
//! what was not yet written or committed is gone), the file system remounted (journal replay), and
//! every acknowledged byte must be there; a loss prints `filefrag -v` of the file (are the lost
//! blocks an unwritten extent again?). When the cut comes:
//! - by default at a random moment 20..`--max-cut-ms` (1500) ms into the cycle, by `powercut cut`;
//! - `--cut-during-next US`: 0..US µs after the acknowledgement of batch 1..11 of segment 1..3 of
//!   the cycle, by the ioctl from another thread while the writer goes on with the next batch;
//! - `--cut-idle US`: the same, but the writer itself cuts and writes nothing more;
//! - `--cut-after-roll`: the writer runs `powercut cut` itself at that point (tens of ms later).
//!
//! Candidate fixes: `--fsync-new` (fsync a renamed segment before its first write), `--fsync`
//! (fsync instead of fdatasync), `--zero-fill` (zeros written over the whole fallocated file and
//! fdatasynced before it is used), `--zero-ahead BYTES` (the writer zeroes and fdatasyncs BYTES
//! ahead of its data, as strata now does). `--fiemap` counts batches whose range FIEMAP still
//! shows unwritten right after their fdatasync returned.
//!
//! The smallest form that loses (docs/POWER_LOSS.md has the counts):
//! ```text
//! cargo build --release --example powercut_repro
//! target/release/examples/powercut_repro --block-size 1024 --cuts 150 --cut-during-next 2000 \
//!     --inline-fallocate --no-rename --no-reopen --no-mmap --no-index --trim none
//! ```
//! Root only (loop devices, mkfs.ext4, losetup): the images are made by `tests/common/ext4.rs`.
#![allow(unsafe_code)] // a read-only map and three system calls, each with its SAFETY argument
#![allow(clippy::unwrap_used)] // a test program: a failed setup step ends it

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt as _;
use std::os::unix::io::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

const SEGMENT_BYTES: u64 = 64 << 10;
const INDEX_BYTES: u64 = 8 << 10;
const INDEX_INTERVAL: u64 = 1024;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Trim {
    Concurrent,
    Inline,
    None,
}

/// Which steps of the pattern run.
#[derive(Debug, Clone, Copy)]
struct Steps {
    background_fallocate: bool,
    rename: bool,
    reopen: bool,
    mmap: bool,
    index: bool,
    trim: Trim,
    fsync_new: bool,
    /// fsync instead of fdatasync for each batch.
    fsync: bool,
    /// After the fallocate, write zeros over the whole file and fdatasync it, so no extent is
    /// unwritten when data goes in (a candidate fix).
    zero_fill: bool,
    /// Before a batch goes past the zeroed part, zero this many bytes ahead with pwrite +
    /// fdatasync, so every batch lands in blocks whose extents were already made written (a
    /// candidate fix; 0: off).
    zero_ahead: u64,
    /// After each fdatasync, ask FIEMAP whether the batch's blocks still read as unwritten
    /// (their conversion not done yet when fdatasync returned); counted and printed.
    fiemap: bool,
}

struct Args {
    steps: Steps,
    block_size: u64,
    cuts: u32,
    seed: u64,
    max_cut_ms: u64,
    /// The writer cuts the power itself right after acknowledging the k-th batch of a segment it
    /// rolled to (k and the roll random), instead of a timer at a random moment.
    cut_after_roll: bool,
    /// As `cut_after_roll`, but the cut comes from another thread 0..`max_cut_us` µs after the
    /// acknowledgement, while the writer goes on with the next batch.
    cut_during_next: Option<u64>,
    /// The writer itself cuts (the ioctl, no further write) 0..this many µs after the ack.
    cut_idle: Option<u64>,
}

fn parse_args() -> Args {
    let mut steps = Steps {
        background_fallocate: true,
        rename: true,
        reopen: true,
        mmap: true,
        index: true,
        trim: Trim::Concurrent,
        fsync_new: false,
        fsync: false,
        zero_fill: false,
        zero_ahead: 0,
        fiemap: false,
    };
    let (mut block_size, mut cuts, mut seed, mut max_cut_ms) = (1024, 50, 1, 1500);
    let mut cut_after_roll = false;
    let mut cut_during_next = None;
    let mut cut_idle = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().expect("a value after the flag");
        match arg.as_str() {
            "--inline-fallocate" => steps.background_fallocate = false,
            "--no-rename" => steps.rename = false,
            "--no-reopen" => steps.reopen = false,
            "--no-mmap" => steps.mmap = false,
            "--no-index" => steps.index = false,
            "--fsync-new" => steps.fsync_new = true,
            "--fsync" => steps.fsync = true,
            "--zero-fill" => steps.zero_fill = true,
            "--zero-ahead" => steps.zero_ahead = value().parse().unwrap(),
            "--fiemap" => steps.fiemap = true,
            "--cut-after-roll" => cut_after_roll = true,
            "--cut-idle" => {
                cut_after_roll = true;
                cut_idle = Some(value().parse().unwrap());
            }
            "--cut-during-next" => {
                cut_after_roll = true;
                cut_during_next = Some(value().parse().unwrap());
            }
            "--trim" => {
                steps.trim = match value().as_str() {
                    "concurrent" => Trim::Concurrent,
                    "inline" => Trim::Inline,
                    "none" => Trim::None,
                    other => panic!("--trim concurrent|inline|none, not {other}"),
                }
            }
            "--block-size" => block_size = value().parse().unwrap(),
            "--cuts" => cuts = value().parse().unwrap(),
            "--seed" => seed = value().parse().unwrap(),
            "--max-cut-ms" => max_cut_ms = value().parse().unwrap(),
            other => panic!("unknown argument {other} (see the module documentation)"),
        }
    }
    Args { steps, block_size, cuts, seed, max_cut_ms, cut_after_roll, cut_during_next, cut_idle }
}

/// The throw-away ext4 images of the power-loss tests: `setup`, `cut`, `remount`, `teardown`.
#[path = "../tests/common/ext4.rs"]
mod ext4;

fn powercut(args: &[&str]) -> String {
    ext4::tool(args)
}

/// The byte at `position` of segment `n`: never zero, so a block that reads as zeros (an
/// unwritten extent, or a block never written) is told apart from data.
fn byte_at(n: u64, position: u64) -> u8 {
    let h = (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ position.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)) >> 32;
    1 + (h % 255) as u8
}

fn fallocate(file: &File, len: u64) -> std::io::Result<()> {
    loop {
        // SAFETY: a plain system call on a descriptor this function borrows; no memory is passed.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as libc::off_t) };
        if rc == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A prepared segment: its number, its files and the descriptors the allocator used.
struct Prepared {
    n: u64,
    log: File,
    index: File,
}

fn names(dir: &Path, n: u64, steps: Steps) -> [PathBuf; 4] {
    let log = dir.join(format!("{n:020}.log"));
    let index = dir.join(format!("{n:020}.index"));
    let tmp =
        |p: &Path| if steps.rename { PathBuf::from(format!("{}.prealloc", p.display())) } else { p.to_path_buf() };
    [tmp(&log), tmp(&index), log, index]
}

fn prepare(dir: &Path, n: u64, steps: Steps) -> std::io::Result<Prepared> {
    let [log_tmp, index_tmp, ..] = names(dir, n, steps);
    let create = |p: &Path| OpenOptions::new().read(true).write(true).create_new(true).open(p);
    let (log, index) = (create(&log_tmp)?, create(&index_tmp)?);
    fallocate(&log, SEGMENT_BYTES)?;
    fallocate(&index, INDEX_BYTES)?;
    if steps.zero_fill {
        log.write_all_at(&vec![0; SEGMENT_BYTES as usize], 0)?;
        log.sync_data()?;
    }
    Ok(Prepared { n, log, index })
}

/// The active segment of the writer.
struct Active {
    n: u64,
    log: File,
    index: File,
    map: Option<memmap2::Mmap>,
    len: u64,
    index_slots: u64,
    last_indexed: u64,
    batches: u64,
    /// Bytes from 0 known to be in written extents (zeroed ahead and synced).
    zeroed: u64,
}

/// Makes a prepared segment the active one: rename, directory fsync, reopen, map.
fn activate(dir: &Path, prepared: Prepared, steps: Steps) -> std::io::Result<Active> {
    let [log_tmp, index_tmp, log_path, index_path] = names(dir, prepared.n, steps);
    if steps.rename {
        std::fs::rename(&log_tmp, &log_path)?;
        std::fs::rename(&index_tmp, &index_path)?;
    }
    fsync_dir(dir)?;
    let (log, index) = if steps.reopen {
        let open = |p: &Path| OpenOptions::new().read(true).write(true).open(p);
        (open(&log_path)?, open(&index_path)?)
    } else {
        (prepared.log, prepared.index)
    };
    if steps.fsync_new {
        log.sync_all()?;
    }
    let map = if steps.mmap {
        // SAFETY: the map is read-only and only read below the length the writer has written and
        // fdatasynced; nobody shrinks the file while the map lives (the trim runs after it is
        // dropped, as in strata).
        Some(unsafe { memmap2::MmapOptions::new().len(SEGMENT_BYTES as usize).map(&log)? })
    } else {
        None
    };
    Ok(Active { n: prepared.n, log, index, map, len: 0, index_slots: 0, last_indexed: 0, batches: 0, zeroed: 0 })
}

/// Seals a segment rolled away from: fdatasync, trim to its length, fdatasync (strata's seal).
fn seal(active: Active, trim: Trim) -> std::io::Result<()> {
    let Active { log, index, map, len, index_slots, .. } = active;
    drop(map);
    log.sync_data()?;
    if trim != Trim::None {
        log.set_len(len)?;
        log.sync_data()?;
        index.set_len(index_slots * 8)?;
        index.sync_data()?;
    }
    Ok(())
}

/// What one cycle acknowledged: per segment number, the durable length.
type Acked = Vec<(u64, u64)>;

/// An acknowledged batch, for the report of a loss.
#[derive(Debug)]
#[allow(dead_code)] // read through Debug
struct Batch {
    segment: u64,
    start: u64,
    end: u64,
    /// FIEMAP still showed part of it unwritten right after its fdatasync (`--fiemap`).
    unwritten_after_sync: bool,
    /// When its fdatasync was called and returned.
    synced: (Instant, Instant),
}

/// The last batches acknowledged.
type Recent = std::collections::VecDeque<Batch>;

/// When the cut's ioctl was entered and returned (the in-process cuts only).
static CUT: std::sync::Mutex<Option<(Instant, Instant)>> = std::sync::Mutex::new(None);

/// Microseconds from `b` to `a` (negative if `a` is earlier).
fn micros(a: Instant, b: Instant) -> i128 {
    if a >= b { (a - b).as_micros() as i128 } else { -((b - a).as_micros() as i128) }
}

/// Where the writer cuts the power itself: after the `batch`-th acknowledged batch of segment
/// `segment`.
struct CutAt<'a> {
    mount: &'a str,
    segment: u64,
    batch: u64,
    /// Cut from another thread this long after the acknowledgement (the writer goes on).
    delay: Option<Duration>,
    /// The writer cuts itself after this long, without writing on.
    idle: Option<Duration>,
}

/// Writes until the first error (the cut); returns what was acknowledged.
fn write_until_cut(
    dir: &Path,
    steps: Steps,
    rng: &mut StdRng,
    first: u64,
    cut_at: Option<CutAt<'_>>,
    recent: &mut Recent,
) -> Acked {
    let mut acked: Acked = Vec::new();
    let mut background: Vec<JoinHandle<std::io::Result<()>>> = Vec::new();
    let result = (|| -> std::io::Result<()> {
        let mut active = activate(dir, prepare(dir, first, steps)?, steps)?;
        acked.push((first, 0));
        let mut next: Option<mpsc::Receiver<std::io::Result<Prepared>>> = None;
        loop {
            let size = rng.random_range(100..1000u64);
            if active.len + size > SEGMENT_BYTES {
                active = roll(dir, active, steps, &mut next, &mut background)?;
                acked.push((active.n, 0));
            }
            let (unwritten_after_sync, synced) = append(&mut active, size, steps)?;
            acked.last_mut().unwrap().1 = active.len;
            if recent.len() == 3 {
                recent.pop_front();
            }
            let (segment, start, end) = (active.n, active.len - size, active.len);
            recent.push_back(Batch { segment, start, end, unwritten_after_sync, synced });
            active.batches += 1;
            if let Some(cut) = cut_at.as_ref().filter(|c| c.segment == active.n && c.batch == active.batches) {
                match cut.delay {
                    None if cut.idle.is_some() => {
                        spin_sleep(cut.idle.unwrap_or_default());
                        shutdown(&File::open(cut.mount)?)?;
                    }
                    None => drop(powercut(&["cut", cut.mount])),
                    Some(delay) => {
                        // The tool is a Python script (tens of ms to start): the ioctl itself,
                        // from a thread already running, lands the cut where it is meant to.
                        let mount = File::open(cut.mount)?;
                        background.push(std::thread::spawn(move || {
                            spin_sleep(delay);
                            shutdown(&mount)
                        }));
                    }
                }
            }
            if steps.background_fallocate && next.is_none() && active.len > SEGMENT_BYTES / 2 {
                let (tx, rx) = mpsc::channel();
                let (dir, n) = (dir.to_path_buf(), active.n + 1);
                background.push(std::thread::spawn(move || {
                    let _ = tx.send(prepare(&dir, n, steps));
                    Ok(())
                }));
                next = Some(rx);
            }
        }
    })();
    let _ = result; // the cut ends every cycle with an error
    for handle in background {
        let _ = handle.join().unwrap();
    }
    acked
}

/// Batches whose range FIEMAP still showed unwritten right after their fdatasync returned.
static UNWRITTEN_AFTER_SYNC: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Whether FIEMAP (without `FIEMAP_FLAG_SYNC`) reports an unwritten extent in `[start, start + len)`.
fn unwritten_in(file: &File, start: u64, len: u64) -> std::io::Result<bool> {
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
    const EXTENTS: usize = 8;
    // struct fiemap (32 bytes) then EXTENTS struct fiemap_extent (56 bytes each), as u64 words.
    let mut buf = [0u64; 4 + EXTENTS * 7];
    buf[0] = start;
    buf[1] = len;
    buf[3] = EXTENTS as u64; // fm_extent_count (low half of the fourth word), fm_reserved 0
    // SAFETY: `buf` is a live, 8-byte aligned buffer as large as the header plus the number of
    // extents announced in it; the kernel writes no further.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, buf.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mapped = (buf[2] >> 32) as usize; // fm_mapped_extents: high half of the third word
    Ok((0..mapped.min(EXTENTS)).any(|i| {
        let flags = buf[4 + i * 7 + 5] as u32; // fe_flags: low half of the sixth word
        flags & FIEMAP_EXTENT_UNWRITTEN != 0
    }))
}

/// `EXT4_IOC_SHUTDOWN` with `EXT4_GOING_FLAGS_NOLOGFLUSH` on the file system holding `dir`, as
/// `powercut cut` does: what was not yet written or committed is gone.
fn shutdown(dir: &File) -> std::io::Result<()> {
    const EXT4_IOC_SHUTDOWN: libc::c_ulong = 0x8004_587D;
    const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;
    let flags = EXT4_GOING_FLAGS_NOLOGFLUSH;
    let entered = Instant::now();
    // SAFETY: the ioctl reads one u32 through the pointer, which points at a live local.
    let rc = unsafe { libc::ioctl(dir.as_raw_fd(), EXT4_IOC_SHUTDOWN, &flags as *const u32) };
    *CUT.lock().unwrap() = Some((entered, Instant::now()));
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// Sleeps `delay` without giving the CPU away (a thread sleep rounds small delays up).
fn spin_sleep(delay: Duration) {
    let until = Instant::now() + delay;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Appends one batch and fdatasyncs it; returns whether FIEMAP (`--fiemap`) then still showed part
/// of it unwritten, and when the fdatasync was called and returned.
fn append(active: &mut Active, size: u64, steps: Steps) -> std::io::Result<(bool, (Instant, Instant))> {
    let start = active.len;
    if steps.zero_ahead > 0 && start + size > active.zeroed {
        let end = (start + size).max(active.zeroed + steps.zero_ahead).min(SEGMENT_BYTES);
        active.log.write_all_at(&vec![0; (end - active.zeroed) as usize], active.zeroed)?;
        active.log.sync_data()?;
        active.zeroed = end;
    }
    let bytes: Vec<u8> = (start..start + size).map(|p| byte_at(active.n, p)).collect();
    active.log.write_all_at(&bytes, start)?;
    if steps.index && start - active.last_indexed >= INDEX_INTERVAL && (active.index_slots + 1) * 8 <= INDEX_BYTES {
        let entry = [(start as u32).to_le_bytes(), (active.index_slots as u32).to_le_bytes()].concat();
        active.index.write_all_at(&entry, active.index_slots * 8)?;
        active.index_slots += 1;
        active.last_indexed = start;
    }
    let sync_called = Instant::now();
    if steps.fsync {
        active.log.sync_all()?;
    } else {
        active.log.sync_data()?;
    }
    let synced = (sync_called, Instant::now());
    active.len = start + size;
    let unwritten = steps.fiemap && unwritten_in(&active.log, start, size)?;
    if unwritten {
        UNWRITTEN_AFTER_SYNC.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    if let Some(map) = &active.map {
        // A reader of the batch just made durable (strata's readers use the map).
        let read = &map[start as usize..active.len as usize];
        assert_eq!(read, &bytes[..], "the map shows what was written");
    }
    Ok((unwritten, synced))
}

fn roll(
    dir: &Path,
    old: Active,
    steps: Steps,
    next: &mut Option<mpsc::Receiver<std::io::Result<Prepared>>>,
    background: &mut Vec<JoinHandle<std::io::Result<()>>>,
) -> std::io::Result<Active> {
    let n = old.n + 1;
    let prepared = match next.take() {
        Some(rx) => rx.recv().unwrap()?,
        None => prepare(dir, n, steps)?,
    };
    let active = activate(dir, prepared, steps)?;
    match steps.trim {
        Trim::Concurrent => background.push(std::thread::spawn(move || seal(old, Trim::Concurrent))),
        trim => seal(old, trim)?,
    }
    Ok(active)
}

/// After the remount: the first acknowledged byte that is not there, as (segment, position,
/// what was read instead), if any.
fn check(dir: &Path, acked: &Acked) -> Option<(u64, u64, String)> {
    for &(n, len) in acked {
        let path = dir.join(format!("{n:020}.log"));
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if len == 0 => {
                let _ = e;
                continue;
            }
            Err(e) => return Some((n, 0, format!("{}: {e}", path.display()))),
        };
        for position in 0..len {
            let got = bytes.get(position as usize).copied();
            if got != Some(byte_at(n, position)) {
                let zeros = bytes.get(position as usize..len as usize).is_some_and(|b| b.iter().all(|&x| x == 0));
                let what = match got {
                    None => format!("file ends at {}", bytes.len()),
                    Some(_) if zeros => format!("zeros up to the acknowledged end {len}"),
                    Some(b) => format!("byte {b:#x}"),
                };
                return Some((n, position, what));
            }
        }
    }
    None
}

fn main() {
    let args = parse_args();
    let mount = powercut(&["setup", "256", &args.block_size.to_string()]);
    let dir = Path::new(&mount).join("log");
    std::fs::create_dir(&dir).unwrap();
    fsync_dir(&dir).unwrap();
    fsync_dir(Path::new(&mount)).unwrap();
    let mut rng = StdRng::seed_from_u64(args.seed);
    let (mut losses, mut overlapped_losses) = (0, 0);
    let mut first = 0;
    let started = Instant::now();
    for cycle in 0..args.cuts {
        let delay = Duration::from_millis(rng.random_range(20..args.max_cut_ms));
        let cut_mount = mount.clone();
        let cutter = (!args.cut_after_roll).then(|| {
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                powercut(&["cut", &cut_mount]);
            })
        });
        let cut_delay = args.cut_during_next.map(|max| Duration::from_micros(rng.random_range(0..=max)));
        let cut_at = args.cut_after_roll.then(|| CutAt {
            mount: &mount,
            segment: first + rng.random_range(1..4),
            batch: rng.random_range(1..12),
            delay: cut_delay,
            idle: args.cut_idle.map(|max| Duration::from_micros(rng.random_range(0..=max))),
        });
        let mut recent = Recent::new();
        *CUT.lock().unwrap() = None;
        let acked = write_until_cut(&dir, args.steps, &mut rng, first, cut_at, &mut recent);
        if let Some(cutter) = cutter {
            cutter.join().unwrap();
        }
        powercut(&["remount", &mount]);
        let bytes: u64 = acked.iter().map(|(_, len)| len).sum();
        if let Some((n, position, what)) = check(&dir, &acked) {
            // A batch whose fdatasync returned after the cut's ioctl was entered was acknowledged
            // by a call the cut overlapped: after a real power cut that call never returns.
            let cut = *CUT.lock().unwrap();
            let batch = recent.iter().find(|b| b.segment == n && (b.start..b.end).contains(&position));
            let overlapped = matches!((cut, batch), (Some((entered, _)), Some(b)) if b.synced.1 > entered);
            let kind = if overlapped {
                overlapped_losses += 1;
                "lost, but its fdatasync returned after the cut began"
            } else {
                losses += 1;
                "LOST"
            };
            let block = position / args.block_size;
            eprintln!(
                "cut {cycle}: {kind}: segment {n} from position {position} (block {block}): {what}; acknowledged {acked:?}; last batches {recent:?}; cut {cut_delay:?} after the acknowledgement"
            );
            if let (Some((entered, returned)), Some(batch)) = (cut, batch) {
                let (called, done) = batch.synced;
                eprintln!(
                    "  the batch's fdatasync was called {} µs and returned {} µs after the cut's ioctl was \
                     entered (the ioctl returned {} µs after it was entered)",
                    micros(called, entered),
                    micros(done, entered),
                    micros(returned, entered)
                );
            }
            // Whether the extent reads as unwritten (its conversion was not durable) or holds zeros.
            let path = dir.join(format!("{n:020}.log"));
            let frag = Command::new("filefrag").arg("-v").arg(&path).output().unwrap();
            eprintln!("{}", String::from_utf8_lossy(&frag.stdout));
        } else {
            eprintln!("cut {cycle}: ok, {} segments, {bytes} bytes acknowledged", acked.len());
        }
        // A fresh directory per cycle keeps the 256 MB image from filling.
        for entry in std::fs::read_dir(&dir).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        first = acked.last().map_or(first, |&(n, _)| n) + 2;
    }
    powercut(&["teardown", &mount]);
    if args.steps.fiemap {
        let n = UNWRITTEN_AFTER_SYNC.load(std::sync::atomic::Ordering::Relaxed);
        println!("FIEMAP: {n} batches still had unwritten blocks right after their fdatasync returned");
    }
    println!(
        "block size {} steps {:?}: {} cuts, {losses} lost, {overlapped_losses} more lost whose fdatasync returned after the cut began ({:.0} s)",
        args.block_size,
        args.steps,
        args.cuts,
        started.elapsed().as_secs_f64()
    );
}
