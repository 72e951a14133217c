//! The pure parts of driftless's benchmark harness (`scripts/bench`): statistics and
//! the generated spec trees. They are unit-tested with the rest of the workspace; the
//! harness itself (`src/main.rs`) needs a cluster and runs only on demand.

pub mod generate;
pub mod stats;
