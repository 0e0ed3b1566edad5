//! The facade's one error type: what the engine refused, or how a script
//! failed. Either way nothing the request did is visible.

/// Why a request did not commit. Nothing it did is visible.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The engine refused: a missing script or document, a conflicting
    /// write, a bad trigger choice, a storage failure.
    #[error(transparent)]
    Engine(#[from] engine::Error),
    /// A script failed: it threw, exhausted a budget, or did not compile.
    #[error("{}", .0.error)]
    Script(Box<ScriptFailure>),
}

/// A script's failure, with what it logged and did before it.
#[derive(Debug)]
pub struct ScriptFailure {
    /// What went wrong.
    pub error: runtime::Error,
    /// `console.log` output up to the failure (of every script that ran).
    pub logs: String,
    /// What the request did up to the failure.
    pub stats: crate::Statistics,
    /// The collection operation the failure came from, when the script
    /// failed with that operation's status (rethrew its error, or left it
    /// unhandled).
    pub operation: Option<crate::FailedOperation>,
}

impl Error {
    /// The HTTP status Cosmos DB would return.
    pub fn status(&self) -> u16 {
        match self {
            Error::Engine(e) => e.status(),
            Error::Script(failure) => failure.error.status(),
        }
    }

    /// The `x-ms-substatus` Cosmos DB would return, if any.
    pub fn substatus(&self) -> Option<u16> {
        match self {
            Error::Engine(e) => e.substatus(),
            Error::Script(failure) => failure.error.substatus(),
        }
    }

    /// `console.log` output of the scripts up to the failure.
    pub fn logs(&self) -> &str {
        match self {
            Error::Engine(_) => "",
            Error::Script(failure) => &failure.logs,
        }
    }

    /// The collection operation a script's failure came from, if known.
    pub fn failed_operation(&self) -> Option<&crate::FailedOperation> {
        match self {
            Error::Engine(_) => None,
            Error::Script(failure) => failure.operation.as_ref(),
        }
    }

    /// The engine's error, when the engine refused.
    pub fn engine(&self) -> Option<&engine::Error> {
        match self {
            Error::Engine(e) => Some(e),
            Error::Script(_) => None,
        }
    }
}

/// A 449 from the engine (another node committed to the partition first)
/// runs the request again ([`engine::Container::attempts`]); a script's
/// failure never does, whatever its status.
impl engine::RetryWith for Error {
    fn retry_with(self) -> Result<engine::PartitionKey, Error> {
        match self {
            Error::Engine(e) => e.retry_with().map_err(Error::Engine),
            script => Err(script),
        }
    }
}

/// A facade result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
