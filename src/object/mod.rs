//! The names every stage gives Kubernetes objects: keys and their order, the ownership
//! marks, and the compact views readiness reads. The lowest module: it imports nothing
//! from the rest of the crate, so every stage can depend on it without a cycle.

mod key;
pub mod ownership;
pub mod pointer;
mod view;

pub use key::{GroupKind, ObjKey, apply_phase, group_of, split_api_version};
pub use ownership::{Claim, Owner, Refusal, claim, owner_of};
pub use view::{Observed, Packed, Seen};
