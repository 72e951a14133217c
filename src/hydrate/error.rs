//! Why a render tool did not render: an item's failure, which the render cache keeps as
//! it keeps an output, and a tool that cannot run at all. Apart from the tool's trait so
//! that the cache, which the stage holds, needs nothing of the stage.

use crate::spec::Location;

/// Why an item did not render, in one line. Said at the item's own place unless the
/// tool knows a closer one (Jsonnet's error inside a file it imports).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    pub at: Option<Location>,
    pub message: String,
    /// The failed render read the live cluster (a chart's `lookup` under a server dry
    /// run): it may render once the cluster changes, with no change of the revision.
    pub read_cluster: bool,
}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        ToolError {
            at: None,
            message,
            read_cluster: false,
        }
    }
}

/// Why a tool cannot run at all: every item of the revision says so.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FindError {
    #[error("{0} is not on PATH")]
    NotOnPath(String),
    /// Nothing named and nothing found; what to install, in the tool's words.
    #[error("{0}")]
    NotInstalled(&'static str),
    #[error("{program} does not run: {message}")]
    DoesNotRun { program: String, message: String },
    #[error("{program} printed no {tool} version; driftless needs {need}")]
    NoVersion {
        program: String,
        tool: &'static str,
        need: &'static str,
    },
    #[error("{program} is {tool} {version}; driftless needs {need}")]
    TooOld {
        program: String,
        tool: &'static str,
        version: String,
        need: &'static str,
    },
}
