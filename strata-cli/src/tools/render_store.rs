//! Text for people for the message store: `store put` and `store stats`, and the `dump` and
//! `verify` of store files (same conventions as `render`: ISO times, no `Debug`).

use std::io::{self, Write};

use super::render::{self, finding, plural};
use super::store::{PutSummary, StoreStats};
use super::text::iso_ms;
use strata_log::internals::inspect::Damage;
use strata_log::internals::inspect::store::{StoreDump, StoreRootDump, StoreVerifyReport};

/// `store put`: what was stored.
pub fn put(out: &mut dyn Write, s: &PutSummary) -> io::Result<()> {
    let prefix = if s.interrupted { "interrupted; " } else { "" };
    let what = plural(s.messages, "message", "messages");
    match (s.first_log_offset, s.last_log_offset, s.first_queue_offset, s.last_queue_offset) {
        (Some(lf), Some(ll), Some(qf), Some(ql)) => writeln!(
            out,
            "{prefix}stored {} {what} in {} queue {}: queue offsets {qf}–{ql}, log offsets {lf}–{ll}",
            s.messages, s.topic, s.queue_id
        ),
        _ => writeln!(out, "{prefix}stored no message (no input)"),
    }
}

/// `store stats`: the log, queues, index files and consumer groups.
pub fn stats(out: &mut dyn Write, s: &StoreStats) -> io::Result<()> {
    writeln!(out, "commit log  offsets [{}, {})", s.log_start_offset, s.log_next_offset)?;
    writeln!(out, "queues ({})", s.queues.len())?;
    for q in &s.queues {
        let n = q.max_offset - q.min_offset;
        writeln!(
            out,
            "  {} queue {}  offsets [{}, {})  {n} {}",
            q.topic,
            q.queue_id,
            q.min_offset,
            q.max_offset,
            plural(n, "message", "messages")
        )?;
    }
    writeln!(out, "index files ({})", s.index_files.len())?;
    for f in &s.index_files {
        let h = &f.header;
        let name = f.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        writeln!(
            out,
            "  {name}  log offsets [{}, {}]  {} of {} entries  {} to {}",
            h.begin_log_offset,
            h.end_log_offset,
            h.index_count,
            f.capacity.saturating_sub(1),
            iso_ms(h.begin_timestamp_ms),
            iso_ms(h.end_timestamp_ms)
        )?;
    }
    writeln!(out, "consumer groups ({})", s.groups.len())?;
    for g in &s.groups {
        writeln!(
            out,
            "  {}  {} queue {}  committed {}  max {}  lag {}",
            g.group, g.topic, g.queue_id, g.committed, g.max_offset, g.lag
        )?;
    }
    Ok(())
}

fn problems(out: &mut dyn Write, file: &std::path::Path, problems: &[Damage]) -> io::Result<()> {
    for d in problems {
        writeln!(out, "  DAMAGE in {} at position {}: {}", file.display(), d.position, d.reason)?;
    }
    Ok(())
}

/// `dump` of one store file.
pub fn dump(out: &mut dyn Write, dump: &StoreDump) -> io::Result<()> {
    match dump {
        StoreDump::ConsumeQueue(d) => {
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
            problems(out, &d.path, &d.problems)
        }
        StoreDump::IndexFile(d) => {
            match &d.header {
                Some(h) => {
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
                }
                None => writeln!(out, "{}: index file, unreadable", d.path.display())?,
            }
            problems(out, &d.path, &d.problems)
        }
        StoreDump::ConsumerOffsets(d) => {
            writeln!(out, "{}: consumer offsets, {}", d.path.display(), d.offsets.len())?;
            for o in &d.offsets {
                writeln!(out, "  {}  {} queue {}  next offset {}", o.group, o.topic, o.queue_id, o.offset)?;
            }
            problems(out, &d.path, &d.problems)
        }
        StoreDump::StoreCheckpoint(d) => {
            match d.dispatched_up_to {
                Some(x) => writeln!(out, "{}: store checkpoint: dispatched up to log offset {x}", d.path.display())?,
                None => writeln!(out, "{}: store checkpoint, unreadable", d.path.display())?,
            }
            problems(out, &d.path, &d.problems)
        }
    }
}

/// `dump` of a store root: the commit log's files, then the store's.
pub fn dump_root(out: &mut dyn Write, d: &StoreRootDump) -> io::Result<()> {
    let state = if d.abort { "open, or not closed cleanly (abort present)" } else { "closed cleanly" };
    writeln!(out, "{}: message store, {state}", d.root.display())?;
    for log in &d.commit_log {
        render::dump(out, log)?;
    }
    for file in &d.files {
        dump(out, file)?;
    }
    Ok(())
}

/// `verify` of a store root: the commit log's totals, the store's, every finding, a verdict.
pub fn verify(out: &mut dyn Write, r: &StoreVerifyReport) -> io::Result<()> {
    let log = &r.commit_log;
    writeln!(
        out,
        "commit log: {} {}, {} {}; offsets [{}, {})",
        log.segments,
        plural(log.segments, "segment", "segments"),
        log.records,
        plural(log.records, "record", "records"),
        log.start_offset,
        log.next_offset
    )?;
    let checkpoint = r.dispatched_up_to.map_or_else(|| "none".to_owned(), |x| x.to_string());
    writeln!(
        out,
        "store: {} {} with {} {}, {} index {} with {} {}, {} messages read, {} consumer {}; dispatched up to {checkpoint}",
        r.queues,
        plural(r.queues, "queue", "queues"),
        r.queue_entries,
        plural(r.queue_entries, "entry", "entries"),
        r.index_files,
        plural(r.index_files, "file", "files"),
        r.index_entries,
        plural(r.index_entries, "entry", "entries"),
        r.messages_checked,
        r.consumer_offsets,
        plural(r.consumer_offsets, "offset", "offsets"),
    )?;
    let all: Vec<_> = log.findings.iter().chain(&r.findings).collect();
    for f in &all {
        finding(out, f)?;
    }
    let errors = all.iter().filter(|f| f.severity == strata_log::internals::inspect::Severity::Error).count() as u64;
    let notes = all.len() as u64 - errors;
    let notes_text = format!("{notes} {}", plural(notes, "note", "notes"));
    if errors == 0 {
        writeln!(out, "clean{}", if notes > 0 { format!(" ({notes_text})") } else { String::new() })
    } else {
        writeln!(out, "damage found: {errors} {}, {notes_text}", plural(errors, "error", "errors"))
    }
}
