//! Per-object policies: what driftless does with a spec's objects besides applying them
//! (README "Policies"). Written as `driftless.dev/*` annotations on a manifest, or as
//! keys of a TOML kind; read into an [`ObjectPolicy`] that render hands on with each
//! object.

/// How driftless treats one spec's objects. The default is what driftless always did:
/// apply every field, correct drift, prune on removal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectPolicy {
    /// JSON pointers (RFC 6901) of fields sent when the object is created, never after:
    /// someone else (an HPA, an operator, a person) owns them from then on.
    pub ignore_fields: Vec<String>,
    /// Created when missing, never updated or drift-corrected afterwards.
    pub create_only: bool,
    /// Left in the cluster (and dropped from the inventory) when its spec is removed.
    pub keep: bool,
    /// Decrypted from a SOPS file: its values are never shown.
    pub sealed: bool,
}
