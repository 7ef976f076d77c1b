//! A lock-free latency histogram and its summary: used by the log's metrics and the event
//! thread's, so it sits below both.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A histogram of durations in power-of-two microsecond buckets (bucket `i` holds durations in
/// `[2^(i-1), 2^i)` µs; bucket 0 holds < 1 µs). Lock-free; quantiles are accurate to a factor of 2.
#[derive(Debug)]
pub(crate) struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    count: AtomicU64,
    sum_us: AtomicU64,
    max_us: AtomicU64,
}

const BUCKETS: usize = 40;

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
            max_us: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub(crate) fn record(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = (u64::BITS - us.leading_zeros()) as usize;
        self.buckets[bucket.min(BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> LatencySummary {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        let count = self.count.load(Ordering::Relaxed);
        let quantile = |q: f64| {
            let rank = ((count as f64 * q).ceil() as u64).max(1);
            let mut seen = 0;
            for (i, &n) in counts.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return if i == 0 { 1 } else { 1u64 << i };
                }
            }
            0
        };
        LatencySummary {
            count,
            mean_us: self.sum_us.load(Ordering::Relaxed).checked_div(count).unwrap_or(0),
            p50_us: if count == 0 { 0 } else { quantile(0.50) },
            p99_us: if count == 0 { 0 } else { quantile(0.99) },
            max_us: self.max_us.load(Ordering::Relaxed),
        }
    }
}

/// Summary of a latency histogram. Quantiles are bucket upper bounds (powers of two, in µs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LatencySummary {
    /// Samples recorded.
    pub count: u64,
    /// Mean, µs.
    pub mean_us: u64,
    /// Median, µs (upper bound of its power-of-two bucket).
    pub p50_us: u64,
    /// 99th percentile, µs (upper bound of its power-of-two bucket).
    pub p99_us: u64,
    /// Largest sample, µs (exact).
    pub max_us: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_land_in_power_of_two_buckets() {
        let h = Histogram::default();
        for us in [1u64, 3, 3, 3, 100, 5000] {
            h.record(Duration::from_micros(us));
        }
        let s = h.snapshot();
        assert_eq!(s.count, 6);
        assert_eq!(s.p50_us, 4, "3 µs is in the [2, 4) bucket");
        assert_eq!(s.p99_us, 8192, "5000 µs is in the [4096, 8192) bucket");
        assert_eq!(s.max_us, 5000);
        assert_eq!(Histogram::default().snapshot(), LatencySummary::default());
    }
}
