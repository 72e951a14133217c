//! Ordering marks on objects (docs/src/policies.md, "Waves and hooks"): sync waves, and hooks that run
//! before or after the rest of a revision.
//!
//! driftless's own annotations are checked strictly (a typo is a validation error). Argo
//! CD's `sync-wave` and Helm's hook annotations are read the same way, as their tools read
//! them, so rendered charts and bundles moving over work unchanged: a weight or wave that
//! is not a number counts as 0, as in Helm and Argo CD.

/// `driftless.dev/wave: "N"`: wave N is applied and ready before wave N+1 starts.
pub const WAVE: &str = "driftless.dev/wave";
/// `driftless.dev/hook: pre | post`
pub const HOOK: &str = "driftless.dev/hook";
/// Argo CD's wave annotation, read as [`WAVE`].
pub const ARGO_WAVE: &str = "argocd.argoproj.io/sync-wave";
/// Helm's hook annotation: `pre-install,pre-upgrade`...
pub const HELM_HOOK: &str = "helm.sh/hook";
/// Orders the hooks of a phase, lowest first.
pub const HELM_WEIGHT: &str = "helm.sh/hook-weight";
/// `before-hook-creation` (always, in driftless), `hook-succeeded`, `hook-failed`.
pub const HELM_DELETE: &str = "helm.sh/hook-delete-policy";

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Before the revision's other objects, each waited for.
    Pre,
    /// After the revision's other objects are ready.
    Post,
    /// A Helm hook of a kind driftless does not run (`test`, `pre-delete`,
    /// `post-delete`, `pre-rollback`, ...): never applied.
    Skipped,
}

/// An object that is a hook rather than part of the desired state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub phase: Phase,
    /// Order within the phase, lowest first.
    pub weight: i32,
    /// Deleted once it succeeded (`hook-succeeded`).
    pub delete_succeeded: bool,
    /// Deleted once it failed (`hook-failed`).
    pub delete_failed: bool,
    /// The Helm hook kinds as written, for what is said about a skipped one.
    pub written: String,
}

/// Why the value of ordering annotation `key` (one of driftless's) is wrong, if it is.
pub fn check(key: &str, value: &str) -> Result<(), String> {
    match key {
        WAVE => value.trim().parse::<i32>().map(drop).map_err(|_| {
            format!("invalid value {value:?} for annotation `{key}`: a whole number such as \"1\" or \"-2\"")
        }),
        HOOK => match value.trim() {
            "pre" | "post" => Ok(()),
            v => Err(format!(
                "invalid value {v:?} for annotation `{key}`: \"pre\" or \"post\""
            )),
        },
        _ => Err(format!("`{key}` is not an ordering annotation")),
    }
}

/// The wave and hook an object's annotations give it (driftless's own first, then Argo
/// CD's and Helm's).
pub fn of_annotations<'a>(get: impl Fn(&str) -> Option<&'a str>) -> (i32, Option<Hook>) {
    let number = |key: &str| get(key).and_then(|v| v.trim().parse::<i32>().ok());
    let wave = number(WAVE).or_else(|| number(ARGO_WAVE)).unwrap_or(0);
    let phase = match get(HOOK).map(str::trim) {
        Some("pre") => Some(Phase::Pre),
        Some("post") => Some(Phase::Post),
        _ => get(HELM_HOOK).map(helm_phase),
    };
    let hook = phase.map(|phase| {
        let delete: Vec<&str> = get(HELM_DELETE)
            .map(|v| super::policy::items(v).collect())
            .unwrap_or_default();
        Hook {
            phase,
            weight: number(HELM_WEIGHT).unwrap_or(wave),
            delete_succeeded: delete.contains(&"hook-succeeded"),
            delete_failed: delete.contains(&"hook-failed"),
            written: get(HELM_HOOK)
                .or(get(HOOK))
                .unwrap_or_default()
                .trim()
                .to_string(),
        }
    });
    (wave, hook)
}

/// The phase of a Helm hook: install and upgrade hooks run (Argo CD maps them to PreSync
/// and PostSync the same way); any other kind is skipped.
fn helm_phase(value: &str) -> Phase {
    let kinds: Vec<&str> = super::policy::items(value).collect();
    if kinds
        .iter()
        .any(|k| matches!(*k, "pre-install" | "pre-upgrade"))
    {
        Phase::Pre
    } else if kinds
        .iter()
        .any(|k| matches!(*k, "post-install" | "post-upgrade"))
    {
        Phase::Post
    } else {
        Phase::Skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn read(pairs: &[(&str, &str)]) -> (i32, Option<Hook>) {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        of_annotations(|k| map.get(k).map(String::as_str))
    }

    #[test]
    fn waves_are_ours_then_argo_cds_and_0_without() {
        assert_eq!(read(&[]).0, 0);
        assert_eq!(read(&[(ARGO_WAVE, "-2")]).0, -2);
        assert_eq!(read(&[(WAVE, "3"), (ARGO_WAVE, "1")]).0, 3);
        // As Argo CD reads it: not a number is wave 0.
        assert_eq!(read(&[(ARGO_WAVE, "soon")]).0, 0);
        assert!(check(WAVE, " 2 ").is_ok());
        assert!(check(WAVE, "two").unwrap_err().contains("a whole number"));
        assert!(check(HOOK, "pre").is_ok());
        assert!(
            check(HOOK, "pre-install")
                .unwrap_err()
                .contains("\"pre\" or \"post\"")
        );
    }

    #[test]
    fn helm_hooks_map_to_pre_post_or_skipped() {
        let (_, hook) = read(&[
            (HELM_HOOK, "pre-install,pre-upgrade"),
            (HELM_WEIGHT, "-5"),
            (HELM_DELETE, "before-hook-creation, hook-succeeded"),
        ]);
        let hook = hook.unwrap();
        assert_eq!(hook.phase, Phase::Pre);
        assert_eq!(hook.weight, -5);
        assert!(hook.delete_succeeded && !hook.delete_failed);
        let post = read(&[(HELM_HOOK, "post-upgrade")]).1.unwrap();
        assert_eq!(post.phase, Phase::Post);
        assert_eq!(post.weight, 0);
        for skipped in [
            "test",
            "pre-delete",
            "post-delete,pre-rollback",
            "crd-install",
        ] {
            assert_eq!(
                read(&[(HELM_HOOK, skipped)]).1.unwrap().phase,
                Phase::Skipped,
                "{skipped}"
            );
        }
        // driftless's own mark wins, and a hook without a weight is ordered by its wave.
        let ours = read(&[(HOOK, "post"), (HELM_HOOK, "pre-install"), (WAVE, "4")])
            .1
            .unwrap();
        assert_eq!((ours.phase, ours.weight), (Phase::Post, 4));
        assert_eq!(read(&[(WAVE, "1")]).1, None);
    }
}
