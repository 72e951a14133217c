//! What a new revision does to the state: valid, it becomes current and the specs it
//! changed (or the whole tree) are queued; invalid, its errors are said and the last good
//! revision stays in force.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::{Now, State, SyncCount, Tally, changed_specs};
use crate::daemon::queue::Key;
use crate::report::status::SourceError;
use crate::spec::{Policy, SourceFile, SpecErrors, SpecId, SpecTree};

/// What the source produced: a revision's files, or why there is none.
#[derive(Debug)]
pub(crate) enum SourceUpdate {
    Revision {
        id: String,
        files: Vec<SourceFile>,
        rendered: Box<HydrateReport>,
    },
    Failed {
        message: String,
        /// The source's kind and why it failed, as the error metric labels them.
        source: &'static str,
        reason: &'static str,
        /// The revision it found and refused, if that is why (`Failure::revision`).
        revision: Option<String>,
    },
}

/// What the hydrate stage said of a revision, besides its files.
#[derive(Debug, Clone, Default)]
pub(crate) struct HydrateReport {
    /// Renders that failed: the revision is invalid.
    pub errors: Vec<crate::spec::SpecError>,
    /// Apps whose own render or app object failed: held, the rest goes on.
    pub held: Vec<crate::hydrate::held::AppError>,
    /// What rendered each rendered file.
    pub by: std::collections::BTreeMap<String, crate::spec::RenderedBy>,
    /// The error a tree without specs is, unless an emptied tree is allowed
    /// (`--allow-mass-prune`) or the revision holds no file at all.
    pub if_empty: Option<crate::spec::SpecError>,
    /// Health rules the rendered apps give their objects.
    pub health: Vec<Arc<crate::spec::settings::HealthRule>>,
    /// What the render left out on purpose (`validate` prints the same).
    pub notices: Vec<String>,
    /// What rendered each rendered file, where it is written: an error found in one
    /// when the specs are read is said there.
    pub made_by: BTreeMap<String, crate::spec::Location>,
    /// The apps that made each rendered file.
    pub rendered_apps: crate::spec::RenderedApps,
    /// A render read the live cluster (a chart's `lookup`): what the revision renders to
    /// may change with no new revision ([`State::render_again`]).
    pub read_cluster: bool,
    /// The apps that name their cluster, with where (`Hydrated::destinations`).
    pub destinations: BTreeMap<String, (crate::spec::clusters::Destination, crate::spec::Location)>,
}

/// A spec error as the status says it, with the app it holds (`None`: the tree's).
fn source_error(app: Option<String>, e: &crate::spec::SpecError) -> SourceError {
    SourceError {
        app,
        file: Some(e.at.file.clone()),
        line: Some(e.at.line),
        column: Some(e.at.column),
        message: e.message.clone(),
    }
}

/// How many apps `errors` hold.
fn held_apps(errors: &[SourceError]) -> usize {
    errors
        .iter()
        .filter_map(|e| e.app.as_deref())
        .collect::<BTreeSet<_>>()
        .len()
}

impl State {
    /// Takes a new revision: valid → it becomes current, and the keys to sync it are
    /// returned (the specs it changed, or the whole tree); invalid → its errors are
    /// reported, the last good revision stays in force, and nothing is returned.
    pub(crate) fn on_source(
        &mut self,
        update: SourceUpdate,
        policy: &Policy,
        now: Now,
    ) -> (Vec<Key>, Tally) {
        let mut tally = Tally::default();
        let (id, files, rendered) = match update {
            SourceUpdate::Failed {
                message,
                source,
                reason,
                revision,
            } => {
                tracing::warn!(error = %message, "source error; the last good revision stays in force");
                tally.source_failed = Some((source, reason));
                self.refused = revision.map(|r| (r, message.clone()));
                self.errors = vec![SourceError {
                    app: None,
                    file: None,
                    line: None,
                    column: None,
                    message,
                }];
                return (Vec::new(), tally);
            }
            SourceUpdate::Revision {
                id,
                files,
                rendered,
            } => (id, files, rendered),
        };
        self.refused = None;
        // Valid or not: a render whose lookups failed may pass once the cluster changes.
        self.read_cluster = rendered.read_cluster;
        // What the render left out on purpose (Flux's own install), once per revision.
        if self.revision_seen.as_ref() != Some(&id) {
            for notice in &rendered.notices {
                tracing::info!(revision = %id, "{notice}");
            }
        }
        self.revision_seen = Some(id.clone());
        self.seen_at = Some(now.at);
        let tree = match load(&files, &rendered, policy) {
            Ok(tree) => tree,
            Err(errors) => {
                tracing::warn!(revision = %id, errors = errors.0.len(), "invalid revision; nothing applied");
                self.errors = errors.0.iter().map(|e| source_error(None, e)).collect();
                tally.sync = Some(SyncCount {
                    result: "invalid",
                    elapsed: Duration::ZERO,
                    at: now.wall,
                });
                return (Vec::new(), tally);
            }
        };
        tracing::info!(revision = %id, specs = tree.specs.len(), "new revision");
        tally.apps_held = self.say_held(&id, &tree);
        let tree = self.share_of(tree);
        let (keys, changed) = self.keys_for(&tree);
        self.settling
            .on_revision(&id, tree.specs.iter().map(|s| &s.id), changed.as_ref());
        self.declare(&tree, Some(now.wall));
        if let Some(old) = &self.tree {
            self.judged.forget(&changed_specs(old, &tree));
        }
        self.tree = Some(Arc::new(tree));
        self.render_dirty = true;
        self.render_epoch += 1;
        self.revision_current = Some(id);
        self.latency_observed = false;
        if self.pending.as_ref().is_some_and(BTreeSet::is_empty) {
            // Nothing a spec says changed (a comment, a file moved).
            self.pending = None;
            tally.applied = self.mark_applied(now);
        }
        (keys, tally)
    }

    /// Says the apps `tree` holds; returns how many there are when the number of held
    /// apps changed (the metric's news).
    fn say_held(&mut self, id: &str, tree: &SpecTree) -> Option<usize> {
        let held_before = held_apps(&self.errors);
        // A held app's errors stay said while the rest of the revision is applied.
        self.errors = tree
            .held
            .iter()
            .flat_map(|(app, errors)| errors.iter().map(|e| source_error(Some(app.clone()), e)))
            .collect();
        let news = (held_apps(&self.errors) != held_before).then_some(tree.held.len());
        for (app, errors) in tree.held.iter() {
            tracing::warn!(revision = %id, app = %app, errors = errors.len(), "app held: neither applied nor pruned");
        }
        news
    }

    /// The keys that sync `tree`, with the specs it changed when only those are synced
    /// (pending from now on); `None` when the whole tree is.
    fn keys_for(&mut self, tree: &SpecTree) -> (Vec<Key>, Option<BTreeSet<SpecId>>) {
        // Only what changed is synced when the tree before this one was applied (or is
        // being applied spec by spec): the other specs' objects are as last applied, and
        // drift on them is a watch's to report. Otherwise (no revision applied yet: the
        // first, or any that follows while the whole syncs fail outright) the whole tree.
        // A tree with hooks syncs whole: its hooks run when anything in the revision
        // changed, which only a sync that holds them (and every object) can tell.
        // A revision that holds other apps than the last one syncs whole too: what an app
        // released left behind (objects of a held app's render that left the tree
        // meanwhile) is in no changed spec, and only a whole sync prunes it.
        let incremental = self.tree.is_some()
            && self.revision_applied.is_some()
            && (self.pending.is_some() || self.revision_applied == self.revision_current)
            && !tree.has_hooks()
            && self
                .tree
                .as_deref()
                .is_some_and(|old| old.held.keys().eq(tree.held.keys()));
        match self.tree.as_deref().filter(|_| incremental) {
            Some(old) => {
                let changed = changed_specs(old, tree);
                let pending = self.pending.get_or_insert_with(BTreeSet::new);
                pending.extend(changed.iter().cloned());
                let keys = changed.iter().cloned().map(Key::Spec).collect();
                (
                    keys,
                    Some(changed.into_iter().collect::<BTreeSet<SpecId>>()),
                )
            }
            None => {
                self.pending = None;
                (vec![Key::Full], None)
            }
        }
    }
}

/// The tree a revision's files load into, with what its render said of them; an emptied
/// tree is an error unless the render allows it.
fn load(
    files: &[SourceFile],
    rendered: &HydrateReport,
    policy: &Policy,
) -> Result<SpecTree, SpecErrors> {
    crate::hydrate::held::load(
        files,
        &rendered.errors,
        &rendered.held,
        &rendered.made_by,
        &rendered.rendered_apps,
        &rendered.destinations,
        policy,
    )
    .and_then(|mut tree| match &rendered.if_empty {
        Some(empty) if tree.specs.is_empty() && tree.held.is_empty() => {
            Err(SpecErrors(vec![empty.clone()]))
        }
        _ => {
            tree.rendered = Arc::new(rendered.by.clone());
            tree.add_health(&rendered.health);
            Ok(tree)
        }
    })
}
