//! Ordering marks on objects (docs/src/policies.md, "Waves and hooks"): sync waves, and hooks that run
//! before or after the rest of a revision.
//!
//! driftless's own annotations are checked strictly (a typo is a validation error). Argo
//! CD's `sync-wave`, its hook annotations and Helm's are read as their tools read them, so
//! rendered charts and bundles moving over work unchanged: a weight or wave that is not a
//! number counts as 0, and a hook kind the tool does not know is left out, as in Helm and
//! Argo CD.

/// `driftless.dev/wave: "N"`: wave N is applied and ready before wave N+1 starts.
pub(crate) const WAVE: &str = "driftless.dev/wave";
/// `driftless.dev/hook: pre | post`
pub(crate) const HOOK: &str = "driftless.dev/hook";
/// Argo CD's wave annotation, read as [`WAVE`].
pub(crate) const ARGO_WAVE: &str = "argocd.argoproj.io/sync-wave";
/// Argo CD's hook annotation: `PreSync`, `Sync`, `PostSync`, `SyncFail`, `Skip`, or
/// several of them, comma-separated.
pub(crate) const ARGO_HOOK: &str = "argocd.argoproj.io/hook";
/// `BeforeHookCreation`, `HookSucceeded`, `HookFailed`.
pub(crate) const ARGO_DELETE: &str = "argocd.argoproj.io/hook-delete-policy";
/// Helm's hook annotation: `pre-install,pre-upgrade`...
pub(crate) const HELM_HOOK: &str = "helm.sh/hook";
/// Orders the hooks of a phase, lowest first.
pub(crate) const HELM_WEIGHT: &str = "helm.sh/hook-weight";
/// `before-hook-creation`, `hook-succeeded`, `hook-failed`.
pub(crate) const HELM_DELETE: &str = "helm.sh/hook-delete-policy";

/// When a hook runs. Each tool's hooks keep that tool's order: Helm's post hooks follow
/// the release's objects once they are applied (`helm install` without `--wait`), Argo
/// CD's and driftless's once they are ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Before the revision's other objects, each waited for (`pre`, `PreSync`,
    /// `pre-install`, `pre-upgrade`).
    Pre,
    /// With the other objects of its sync wave, after they are applied; the wave is done
    /// once it succeeded (`Sync`).
    Sync,
    /// After the revision's other objects are applied, without waiting for them to be
    /// ready (Helm's `post-install`, `post-upgrade`).
    Applied,
    /// After the revision's other objects are ready (`post`, `PostSync`).
    Post,
    /// Only when the sync failed (`SyncFail`).
    Fail,
    /// A hook driftless does not run (Helm's `test`, `pre-delete`, ...; Argo CD's
    /// `Skip`): never applied.
    Skipped,
}

/// An object that is a hook rather than part of the desired state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// The phases it runs in, in order, each a run of its own (Helm and Argo CD both
    /// run a hook listed for two phases in each); `[Skipped]` when it never runs.
    pub phases: Vec<Phase>,
    /// Order within the phase, lowest first.
    pub weight: i32,
    /// Deleted once it succeeded (`hook-succeeded`, `HookSucceeded`).
    pub delete_succeeded: bool,
    /// Deleted once it failed (`hook-failed`, `HookFailed`).
    pub delete_failed: bool,
    /// Earlier runs deleted before a new one is created (`before-hook-creation`,
    /// `BeforeHookCreation`, and the default of both tools when no policy is given). A
    /// named hook's earlier run always goes (a Job cannot run again in place); this
    /// decides for runs made from `generateName`, which do not stand in each other's way.
    pub delete_before: bool,
    /// The annotation that made it a hook, as written (`helm.sh/hook: test`), for what
    /// is said about one that is skipped.
    pub written: String,
}

impl Hook {
    /// Whether it is never applied.
    pub fn skipped(&self) -> bool {
        self.phases.contains(&Phase::Skipped)
    }
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

/// Whether annotations (as `get` reads them) make an object a hook of any tool, run or
/// skipped: what may be created from `generateName`.
pub(crate) fn is_hook<'a>(get: impl Fn(&str) -> Option<&'a str>) -> bool {
    of_annotations(get).1.is_some()
}

/// The wave and hook an object's annotations give it: driftless's own mark first, then
/// Argo CD's, then Helm's (Argo CD ignores Helm's hook where its own is set).
pub(crate) fn of_annotations<'a>(get: impl Fn(&str) -> Option<&'a str>) -> (i32, Option<Hook>) {
    let number = |key: &str| get(key).and_then(|v| v.trim().parse::<i32>().ok());
    let wave = number(WAVE).or_else(|| number(ARGO_WAVE)).unwrap_or(0);
    let (phases, key) = match get(HOOK).map(str::trim) {
        Some("pre") => (vec![Phase::Pre], HOOK),
        Some("post") => (vec![Phase::Post], HOOK),
        _ => match (get(ARGO_HOOK), get(HELM_HOOK)) {
            (Some(v), _) => (argo_phases(v), ARGO_HOOK),
            (None, Some(v)) => (helm_phases(v), HELM_HOOK),
            (None, None) => return (wave, None),
        },
    };
    let delete: Vec<&str> = [HELM_DELETE, ARGO_DELETE]
        .into_iter()
        .filter_map(&get)
        .flat_map(items)
        .collect();
    let has = |helm: &str, argo: &str| delete.iter().any(|d| *d == helm || *d == argo);
    let hook = Hook {
        phases,
        weight: number(HELM_WEIGHT).unwrap_or(wave),
        delete_succeeded: has("hook-succeeded", "HookSucceeded"),
        delete_failed: has("hook-failed", "HookFailed"),
        delete_before: delete.is_empty() || has("before-hook-creation", "BeforeHookCreation"),
        written: format!("{key}: {}", get(key).unwrap_or_default().trim()),
    };
    (wave, Some(hook))
}

/// The items of a comma-separated annotation value, trimmed, empty ones skipped (policy
/// annotations are read the same way).
pub fn items(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// The phases of a list of hook kinds as `phase` reads each; `[Skipped]` when none runs.
fn phases<'v>(value: &'v str, phase: impl Fn(&'v str) -> Option<Phase>) -> Vec<Phase> {
    let mut out: Vec<Phase> = items(value).filter_map(phase).collect();
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        out.push(Phase::Skipped);
    }
    out
}

/// The phases of an Argo CD hook. `Skip` alone is never applied (beside other kinds,
/// Argo CD runs the others); an unknown kind is left out, as Argo CD leaves it, so a
/// hook of none it knows never runs rather than being applied as an ordinary object.
fn argo_phases(value: &str) -> Vec<Phase> {
    phases(value, |kind| match kind {
        "PreSync" => Some(Phase::Pre),
        "Sync" => Some(Phase::Sync),
        "PostSync" => Some(Phase::Post),
        "SyncFail" => Some(Phase::Fail),
        _ => None,
    })
}

/// The phases of a Helm hook: install and upgrade hooks run, post ones once the objects
/// are applied (as `helm install` without `--wait`); any other kind (`test`,
/// `pre-delete`, `pre-rollback`...) is not run.
fn helm_phases(value: &str) -> Vec<Phase> {
    phases(value, |kind| match kind {
        "pre-install" | "pre-upgrade" => Some(Phase::Pre),
        "post-install" | "post-upgrade" => Some(Phase::Applied),
        _ => None,
    })
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
        assert_eq!(hook.phases, [Phase::Pre]);
        assert_eq!(hook.weight, -5);
        assert!(hook.delete_succeeded && !hook.delete_failed && hook.delete_before);
        // Helm's post hooks follow the objects once applied, not once ready.
        let post = read(&[(HELM_HOOK, "post-upgrade")]).1.unwrap();
        assert_eq!(post.phases, [Phase::Applied]);
        assert_eq!(post.weight, 0);
        // Without a delete policy, Helm deletes the earlier run first.
        assert!(post.delete_before && !post.delete_succeeded);
        // Listed for both, it runs in both (ingress-nginx's admission ServiceAccount).
        let both = read(&[(
            HELM_HOOK,
            "pre-install,pre-upgrade,post-install,post-upgrade",
        )]);
        assert_eq!(both.1.unwrap().phases, [Phase::Pre, Phase::Applied]);
        for skipped in [
            "test",
            "pre-delete",
            "post-delete,pre-rollback",
            "crd-install",
        ] {
            let hook = read(&[(HELM_HOOK, skipped)]).1.unwrap();
            assert_eq!(hook.phases, [Phase::Skipped], "{skipped}");
            assert!(hook.skipped());
        }
        // driftless's own mark wins, and a hook without a weight is ordered by its wave.
        let ours = read(&[(HOOK, "post"), (HELM_HOOK, "pre-install"), (WAVE, "4")])
            .1
            .unwrap();
        assert_eq!(
            (ours.phases.as_slice(), ours.weight),
            ([Phase::Post].as_slice(), 4)
        );
        assert_eq!(read(&[(WAVE, "1")]).1, None);
    }

    #[test]
    fn argo_cd_hooks_map_to_their_phases_ordered_by_wave() {
        let hook = |v: &str| read(&[(ARGO_HOOK, v), (ARGO_WAVE, "2")]).1.unwrap();
        assert_eq!(hook("PreSync").phases, [Phase::Pre]);
        assert_eq!(hook(" Sync ").phases, [Phase::Sync]);
        assert_eq!(hook("PostSync").phases, [Phase::Post]);
        assert_eq!(hook("SyncFail").phases, [Phase::Fail]);
        assert_eq!(hook("PostSync, PreSync").phases, [Phase::Pre, Phase::Post]);
        assert_eq!(hook("PreSync").weight, 2);
        // `Skip` alone is never applied; beside another kind, the other runs (Argo CD).
        assert!(hook("Skip").skipped());
        assert_eq!(hook("Skip,PostSync").phases, [Phase::Post]);
        // A kind Argo CD does not know runs nowhere: not an ordinary object either.
        assert!(hook("Presync").skipped());
        assert_eq!(hook("Skip").written, "argocd.argoproj.io/hook: Skip");
        // Argo CD's mark wins over Helm's, as in Argo CD; driftless's over both.
        let argo = read(&[(ARGO_HOOK, "PostSync"), (HELM_HOOK, "pre-install")]);
        assert_eq!(argo.1.unwrap().phases, [Phase::Post]);
        let ours = read(&[(HOOK, "pre"), (ARGO_HOOK, "PostSync")]);
        assert_eq!(ours.1.unwrap().phases, [Phase::Pre]);
        assert!(is_hook(|k| (k == ARGO_HOOK).then_some("Skip")));
        assert!(!is_hook(|k| (k == ARGO_WAVE).then_some("1")));
    }

    #[test]
    fn delete_policies_are_either_tools_and_default_to_before_creation() {
        let hook = |pairs: &[(&str, &str)]| {
            let mut all = vec![(ARGO_HOOK, "PreSync")];
            all.extend_from_slice(pairs);
            read(&all).1.unwrap()
        };
        let none = hook(&[]);
        assert!(none.delete_before && !none.delete_succeeded && !none.delete_failed);
        let succeeded = hook(&[(ARGO_DELETE, "HookSucceeded")]);
        assert!(succeeded.delete_succeeded && !succeeded.delete_before);
        let all = hook(&[(ARGO_DELETE, "HookFailed, BeforeHookCreation")]);
        assert!(all.delete_failed && all.delete_before && !all.delete_succeeded);
        // Each tool's words in its own annotation; both are read, as Argo CD reads them.
        let mixed = hook(&[(ARGO_DELETE, "HookSucceeded"), (HELM_DELETE, "hook-failed")]);
        assert!(mixed.delete_succeeded && mixed.delete_failed && !mixed.delete_before);
    }
}
