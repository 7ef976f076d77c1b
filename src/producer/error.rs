//! What a producer's calls fail with: the log's errors, and the two only a producer has.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;

/// An error of the [`Producer`](crate::Producer) or its [`BufferPool`](crate::BufferPool).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerError {
    /// The log refused or failed (bad input, a closed or poisoned log, an I/O error).
    #[error(transparent)]
    Log(#[from] Error),
    /// The pool could not lend a buffer before the deadline.
    #[error("no buffer of {requested} bytes became available within {waited:?}")]
    BufferExhausted {
        /// Bytes asked for.
        requested: usize,
        /// How long the caller waited.
        waited: Duration,
    },
    /// A record sent through the producer was not appended; the cause is shared by its whole
    /// batch.
    #[error("send failed: {0}")]
    SendFailed(#[source] Arc<Error>),
}

impl ProducerError {
    /// The log's error behind this one, if any (`SendFailed`'s cause, or `Log`'s).
    pub fn log_error(&self) -> Option<&Error> {
        match self {
            ProducerError::Log(error) => Some(error),
            ProducerError::SendFailed(error) => Some(error),
            ProducerError::BufferExhausted { .. } => None,
        }
    }
}

/// A producer's result.
pub type ProducerResult<T> = std::result::Result<T, ProducerError>;
