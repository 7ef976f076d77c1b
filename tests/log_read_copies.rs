//! `Log::read` copies whole batches into its chunks, through the map (`ReadPath::Mmap`) or with
//! `pread` straight into the chunk (`ReadPath::Pread`), and `Log::read_batches` reads them in
//! place (in the map, or in one reused `pread` buffer): batches of every size — small ones packed
//! into a chunk, one larger than a chunk, one larger than a `pread` window — come back whole and
//! in order from sealed and active segments, read in calls of any size, and a `.log` file cut
//! short under the reader is `Error::Corrupt`, never fewer records in silence.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Owned, read_all, rng};
use rand::RngExt;
use strata_log::{Error, Log, LogConfig, ReadPath, Record};

fn config(read_path: ReadPath) -> LogConfig {
    LogConfig { segment_bytes: 4 << 20, max_batch_bytes: 2 << 20, read_path, ..LogConfig::default() }
}

/// Appends batches of random sizes (1 to 300 records of 0 to 300 bytes), and batches of 100 KiB
/// and 1.5 MiB records, until the log has rolled a few segments; returns every record.
fn fill(log: &Log, rng: &mut impl RngExt) -> Vec<Owned> {
    let mut model = Vec::new();
    let mut n = 0u64;
    while log.metrics().segments < 4 {
        let batch: Vec<Vec<u8>> = match rng.random_range(0..20) {
            0 => vec![vec![(n % 251) as u8; 100 << 10]; 2],
            1 => vec![vec![(n % 241) as u8; 3 << 19]],
            _ => (0..rng.random_range(1..300)).map(|i| vec![((n + i) % 256) as u8; rng.random_range(0..300)]).collect(),
        };
        let records: Vec<Record<'_>> = batch.iter().map(|v| Record::new(v)).collect();
        log.append(&records).unwrap();
        n += batch.len() as u64;
        model.extend(batch.into_iter().map(Owned::value));
    }
    model
}

#[test]
fn every_batch_comes_back_whole_through_both_read_paths() {
    let mut rng = rng("every_batch_comes_back_whole_through_both_read_paths");
    let dir = tempfile::tempdir().unwrap();
    let model = {
        let log = Log::open(dir.path(), config(ReadPath::Mmap)).unwrap();
        let model = fill(&log, &mut rng);
        log.close().unwrap();
        model
    };
    for read_path in [ReadPath::Mmap, ReadPath::Pread] {
        let log = Log::open(dir.path(), config(read_path)).unwrap();
        // Appends after the reopen land in the active segment, read through its descriptor.
        log.append(&[Record::new(b"active")]).unwrap();
        let mut expected = model.clone();
        expected.push(Owned::value(b"active".to_vec()));
        for max_bytes in [1, 1000, 64 << 10, 1 << 20, 8 << 20] {
            let read = read_all(&log, 0, max_bytes);
            let offsets: Vec<u64> = read.iter().map(|(offset, _)| *offset).collect();
            assert!(offsets.iter().copied().eq(0..expected.len() as u64), "{read_path:?}, {max_bytes}: offsets");
            let records: Vec<Owned> = read.into_iter().map(|(_, record)| record).collect();
            assert!(records == expected, "{read_path:?}, reads of {max_bytes} bytes: records differ");
        }
        // In place too (`read_batches`: under `Pread`, each window read into one reused buffer).
        for max_bytes in [1, 64 << 10, 1 << 20] {
            let (mut next, mut seen) = (0, Vec::new());
            while next < log.visible_end() {
                next = log
                    .read_batches(next, max_bytes, |batch| {
                        for record in batch.records() {
                            seen.push((record.offset(), record.value().map(<[u8]>::to_vec)));
                        }
                        std::ops::ControlFlow::Continue(())
                    })
                    .unwrap();
            }
            assert!(seen.iter().map(|(offset, _)| *offset).eq(0..expected.len() as u64), "{read_path:?}: in place");
            assert!(
                seen.iter().map(|(_, value)| value).eq(expected.iter().map(|record| &record.value)),
                "{read_path:?}, in place, reads of {max_bytes} bytes: values differ"
            );
        }
        // From the middle of a batch too.
        let from = expected.len() as u64 / 2;
        let read = read_all(&log, from, 64 << 10);
        assert_eq!(read.first().map(|(offset, _)| *offset), Some(from));
        assert_eq!(read.len() as u64, expected.len() as u64 - from);
        log.append(&[Record::new(b"next")]).unwrap();
        log.close().unwrap();
        // Take the record back off for the next round.
        let log = Log::open(dir.path(), config(read_path)).unwrap();
        log.truncate_to(model.len() as u64).unwrap();
        log.close().unwrap();
    }
}

#[test]
fn a_log_file_cut_short_under_a_pread_reader_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), config(ReadPath::Pread)).unwrap();
    let value = vec![7u8; 1000];
    while log.metrics().segments < 2 {
        log.append(&vec![Record::new(&value); 100]).unwrap();
    }
    // The first segment is sealed: cut its file to half behind the log's back.
    let first = dir.path().join(format!("{:020}.log", 0));
    let len = std::fs::metadata(&first).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&first).unwrap().set_len(len / 2).unwrap();
    let mut reader = log.read(0, 8 << 20).unwrap();
    let outcome: Result<Vec<_>, Error> = reader.by_ref().collect();
    match outcome {
        Err(Error::Corrupt { .. }) => {}
        other => panic!("expected Corrupt, got {:?}", other.map(|records| records.len())),
    }
}

/// A read whose budget ends before a batch larger than a chunk returns the batches before it, and
/// the next read returns the large batch whole (at least one batch per read).
#[test]
fn a_read_stops_before_a_large_batch_its_budget_does_not_cover() {
    for read_path in [ReadPath::Mmap, ReadPath::Pread] {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), config(read_path)).unwrap();
        log.append(&[Record::new(&[1u8; 1000])]).unwrap();
        let large = vec![2u8; 900 << 10];
        log.append(&[Record::new(&large), Record::new(&large)]).unwrap();
        let first: Vec<u64> = log.read(0, 5000).unwrap().map(|r| r.unwrap().offset()).collect();
        assert_eq!(first, [0], "{read_path:?}");
        let rest: Vec<usize> = log.read(1, 5000).unwrap().map(|r| r.unwrap().value().unwrap().len()).collect();
        assert_eq!(rest, [900 << 10, 900 << 10], "{read_path:?}: the large batch whole");
    }
}
