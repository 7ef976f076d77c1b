//! The text of `dump` for a message store's files.

use std::io::{self, Write};

use super::log::render_damage;
use crate::tools::text::{iso_ms, plural};
use strata_log::internals::inspect::store::{IndexFileDump, QueueFileDump, StoreDump, StoreRootDump};

/// `dump` of one store file: its contents, then its damage.
pub(super) fn render(out: &mut dyn Write, dump: &StoreDump) -> io::Result<()> {
    let path = match dump {
        StoreDump::ConsumeQueue(d) => {
            render_queue_file(out, d)?;
            &d.path
        }
        StoreDump::IndexFile(d) => {
            render_index_file(out, d)?;
            &d.path
        }
        StoreDump::ConsumerOffsets(d) => {
            writeln!(out, "{}: consumer offsets, {}", d.path.display(), d.offsets.len())?;
            for o in &d.offsets {
                writeln!(out, "  {}  {} queue {}  next offset {}", o.group, o.topic, o.queue_id, o.offset)?;
            }
            &d.path
        }
        StoreDump::StoreMeta(d) => {
            match &d.meta {
                Some(m) => writeln!(
                    out,
                    "{}: store format {}, features {:#x}: queue files of {} entries, index files of {} slots and {} entries",
                    d.path.display(),
                    m.version,
                    m.features,
                    m.parameters.queue_entries_per_file,
                    m.parameters.index_slots,
                    m.parameters.index_entries
                )?,
                None => writeln!(out, "{}: store.meta, unreadable", d.path.display())?,
            }
            &d.path
        }
        StoreDump::StoreCheckpoint(d) => {
            match d.dispatched_up_to {
                Some(x) => writeln!(out, "{}: store checkpoint: dispatched up to log offset {x}", d.path.display())?,
                None => writeln!(out, "{}: store checkpoint, unreadable", d.path.display())?,
            }
            &d.path
        }
    };
    dump.problems().iter().try_for_each(|d| render_damage(out, path, d))
}

/// A consume-queue file: its slots, a line per entry, and a partial entry at the end.
fn render_queue_file(out: &mut dyn Write, d: &QueueFileDump) -> io::Result<()> {
    let n = d.entries.len() as u64;
    writeln!(
        out,
        "{}: consume queue from queue offset {}, {n} {} of {} slots, then {} unused",
        d.path.display(),
        d.first_queue_offset,
        plural(n, "entry", "entries"),
        d.capacity,
        d.unused
    )?;
    for e in &d.entries {
        writeln!(
            out,
            "  queue offset {:>10}  log offset {:>12}  size {:>7}  tag hash {:#018x}",
            e.queue_offset, e.log_offset, e.size, e.tag_hash
        )?;
    }
    if d.partial_bytes > 0 {
        writeln!(out, "  {} bytes of a partial entry at the end (ignored)", d.partial_bytes)?;
    }
    Ok(())
}

/// An index file: its header, then a line per entry.
fn render_index_file(out: &mut dyn Write, d: &IndexFileDump) -> io::Result<()> {
    let Some(h) = &d.header else {
        return writeln!(out, "{}: index file, unreadable", d.path.display());
    };
    writeln!(
        out,
        "{}: index file, log offsets [{}, {}], {} to {}, {} of {} entries, {} of {} slots used",
        d.path.display(),
        h.begin_log_offset,
        h.end_log_offset,
        iso_ms(h.begin_timestamp_ms),
        iso_ms(h.end_timestamp_ms),
        h.index_count,
        d.capacity.saturating_sub(1),
        d.slots_used,
        h.hash_slot_count
    )?;
    for e in &d.entries {
        writeln!(
            out,
            "  entry {:>8}  key hash {:#010x}  slot {:>8}  log offset {:>12}  +{} s  prev {}",
            e.number, e.key_hash, e.slot, e.log_offset, e.time_diff_s, e.prev_entry
        )?;
    }
    Ok(())
}

/// `dump` of a store root: the commit log's files, then the store's.
pub(super) fn render_root(out: &mut dyn Write, d: &StoreRootDump) -> io::Result<()> {
    let state = if d.abort { "open, or not closed cleanly (abort present)" } else { "closed cleanly" };
    writeln!(out, "{}: message store, {state}", d.root.display())?;
    for log in &d.commit_log {
        super::log::render(out, log)?;
    }
    for file in &d.files {
        render(out, file)?;
    }
    Ok(())
}
