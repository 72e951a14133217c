//! The names every stage gives Kubernetes objects: keys and their order, the ownership
//! marks, and the compact views readiness reads. The lowest module: it imports nothing
//! from the rest of the crate, so every stage can depend on it without a cycle.

mod key;
pub mod ownership;
pub mod pointer;
mod view;

pub(crate) use key::{GroupKind, group_of, split_api_version};
pub use key::{ObjKey, apply_phase};
pub use ownership::claim;
pub(crate) use ownership::{Claim, Refusal};
pub use view::{Observed, Packed, Seen};
