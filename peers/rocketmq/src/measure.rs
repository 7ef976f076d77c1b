//! What one round of one store measured, and the few statistics the report needs.

use std::time::Duration;

/// One store's figures for one round. `None` is a phase the store did not run; the report
/// says why.
#[derive(Debug, Clone, Default)]
pub struct RoundResult {
    /// Async-flush put, one producer: messages per second.
    pub put_async: f64,
    /// Sync-flush put, one producer: messages per second.
    pub put_sync: f64,
    /// Sync-flush put, several producer threads: messages per second.
    pub put_sync_many: Option<f64>,
    /// Consuming every message back through the consume queues: messages per second.
    pub consume: f64,
    /// Key queries per second (one thread).
    pub query_rate: f64,
    /// The 99th percentile of one key query's latency, in microseconds.
    pub query_p99_us: f64,
    /// Commit-log bytes per stored message (the log's used bytes over the messages put).
    pub bytes_per_message: f64,
    /// `strata_log::Log::append` of records of the store's size per message: records per
    /// second (strata only).
    pub log_append: Option<f64>,
    /// strata only: the commit log's mean fdatasync during the one-producer sync put, µs (its
    /// `LogMetrics::fsync_latency`): what a put waits for at least.
    pub sync_fsync_mean_us: Option<f64>,
    /// strata only: puts per sync round during the several-producer sync put (its
    /// `LogMetrics::appends_per_sync`): how well concurrent puts share an fsync.
    pub sync_many_puts_per_fsync: Option<f64>,
    /// How long the store took, after the async put returned, until every message was in its
    /// consume queue and the index (strata's put returns after that: 0).
    pub dispatch_wait: Duration,
}

/// `count` events over `elapsed`, per second.
pub fn per_second(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

/// The median of `values` (the mean of the middle two for an even count); `None` if empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) { (sorted[mid - 1] + sorted[mid]) / 2.0 } else { sorted[mid] })
}

/// The `q` quantile (0..=1) of `samples`, nearest rank, in microseconds; 0 if empty.
pub fn quantile_us(samples: &mut [Duration], q: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
    samples[rank - 1].as_secs_f64() * 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_quantiles() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        let mut samples: Vec<Duration> = (1..=100).rev().map(Duration::from_micros).collect();
        assert_eq!(quantile_us(&mut samples, 0.99), 99.0);
        assert_eq!(quantile_us(&mut samples, 1.0), 100.0);
    }
}
