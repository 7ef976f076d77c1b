//! The markdown the run prints: per-phase medians over the rounds, and the median of the
//! per-round ratios (strata / rocketmq-store), then every round's figures.

use std::fmt::Write;

use crate::measure::{RoundResult, median};
use crate::workload::Workload;

/// One round: strata's figures, then the peer's.
pub type Round = (RoundResult, RoundResult);

/// How a figure reads, and how it is printed.
struct Row {
    label: String,
    unit: Unit,
    strata: Vec<Option<f64>>,
    peer: Vec<Option<f64>>,
    /// Why the peer has no figure, if it has none.
    peer_absent: Option<&'static str>,
    /// Whether strata / peer means anything for this figure.
    compare: bool,
}

#[derive(Clone, Copy)]
enum Unit {
    /// Big counts (per second): thousands separators.
    Rate,
    /// Small numbers, one decimal.
    Plain,
    /// A multiple, `×`, two decimals.
    Times,
    /// A percentage.
    Percent,
}

impl Unit {
    fn show(self, value: f64) -> String {
        match self {
            Unit::Rate => thousands(value.round() as u64),
            Unit::Plain => format!("{value:.1}"),
            Unit::Times => format!("{value:.2}×"),
            Unit::Percent => format!("{:.0} %", value * 100.0),
        }
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn med(values: &[Option<f64>]) -> Option<f64> {
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    if present.len() == values.len() { median(&present) } else { None }
}

fn rows(rounds: &[Round], work: &Workload) -> Vec<Row> {
    let col = |f: &dyn Fn(&RoundResult) -> Option<f64>| -> (Vec<Option<f64>>, Vec<Option<f64>>) {
        (rounds.iter().map(|(s, _)| f(s)).collect(), rounds.iter().map(|(_, p)| f(p)).collect())
    };
    let row = |label: String, unit: Unit, f: &dyn Fn(&RoundResult) -> Option<f64>| {
        let (strata, peer) = col(f);
        let compare = matches!(unit, Unit::Rate | Unit::Plain);
        Row { label, unit, strata, peer, peer_absent: None, compare }
    };
    let p = work.producers;
    let mut dispatch_wait = row("dispatch wait after the async put, ms".into(), Unit::Plain, &|r| {
        Some(r.dispatch_wait.as_secs_f64() * 1e3)
    });
    dispatch_wait.compare = false;
    let mut rows = vec![
        row(format!("put, async flush, 1 producer ({} msgs), msg/s", work.messages), Unit::Rate, &|r| {
            Some(r.put_async)
        }),
        row(format!("put, sync flush, 1 producer ({} msgs), msg/s", work.sync_messages), Unit::Rate, &|r| {
            Some(r.put_sync)
        }),
        row(format!("put, sync flush, {p} producers ({} msgs), msg/s", work.sync_messages), Unit::Rate, &|r| {
            r.put_sync_many
        }),
        row(format!("sync put: {p} producers ÷ 1 producer"), Unit::Times, &|r| {
            r.put_sync_many.map(|m| m / r.put_sync)
        }),
        row("consume, 32 per get, msg/s".into(), Unit::Rate, &|r| Some(r.consume)),
        row(format!("query by key ({} keys), q/s", work.queries), Unit::Rate, &|r| Some(r.query_rate)),
        row("query by key, p99 latency, µs".into(), Unit::Plain, &|r| Some(r.query_p99_us)),
        row("commit-log bytes per message".into(), Unit::Plain, &|r| Some(r.bytes_per_message)),
        dispatch_wait,
    ];
    let mut strata_only = |label: String, unit: Unit, f: &dyn Fn(&RoundResult) -> Option<f64>| {
        let mut r = row(label, unit, f);
        r.peer_absent = Some("n/a (strata's own log)");
        rows.push(r);
    };
    strata_only("sync put, 1 producer: mean fdatasync of strata's log, µs".into(), Unit::Plain, &|r| {
        r.sync_fsync_mean_us
    });
    strata_only(format!("sync put, {p} producers: puts per fsync round"), Unit::Plain, &|r| r.sync_many_puts_per_fsync);
    strata_only(format!("Log::append, 1 thread, same bytes ({} recs), rec/s", work.messages), Unit::Rate, &|r| {
        r.log_append
    });
    strata_only("store async put ÷ Log::append".into(), Unit::Percent, &|r| r.log_append.map(|l| r.put_async / l));
    rows
}

/// The summary table.
pub fn table(rounds: &[Round], work: &Workload) -> String {
    let mut out = String::new();
    let n = rounds.len();
    let _ = writeln!(
        out,
        "| phase | strata (median of {n}) | rocketmq-store 1.0.0 (median of {n}) | strata / rocketmq (median of per-round ratios) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|");
    for row in rows(rounds, work) {
        let strata = med(&row.strata).map_or("n/a".into(), |v| row.unit.show(v));
        let peer = match (row.peer_absent, med(&row.peer)) {
            (Some(why), _) => why.to_owned(),
            (None, Some(v)) => row.unit.show(v),
            (None, None) => "n/a".into(),
        };
        let ratios: Vec<f64> = row
            .strata
            .iter()
            .zip(&row.peer)
            .filter_map(|(s, p)| Some(s.as_ref()? / p.as_ref()?))
            .filter(|r| r.is_finite())
            .collect();
        let ratio = match median(&ratios) {
            Some(r) if row.compare => format!("{r:.2}×"),
            _ => "—".to_owned(),
        };
        let _ = writeln!(out, "| {} | {strata} | {peer} | {ratio} |", row.label);
    }
    out
}

/// Every round's figures, one line per store and round.
pub fn per_round(rounds: &[Round], work: &Workload) -> String {
    let mut out = String::new();
    let all = rows(rounds, work);
    let _ = write!(out, "| round | store |");
    for row in &all {
        let _ = write!(out, " {} |", row.label);
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "|---|---|{}", "---:|".repeat(all.len()));
    for i in 0..rounds.len() {
        for (name, pick) in [("strata", true), ("rocketmq", false)] {
            let _ = write!(out, "| {} | {name} |", i + 1);
            for row in &all {
                let value = if pick { row.strata[i] } else { row.peer[i] };
                let _ = write!(out, " {} |", value.map_or("n/a".into(), |v| row.unit.show(v)));
            }
            let _ = writeln!(out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(12), "12");
        assert_eq!(Unit::Percent.show(0.734), "73 %");
    }
}
