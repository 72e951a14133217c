//! What an Application says of its objects, put on them once rendered (whichever tool
//! rendered them, by the stage's one pass): `destination.namespace` where they name none,
//! and driftless's marks for its sync wave, `prune`, `selfHeal`, `Replace=true` and
//! `ignoreDifferences`; `CreateNamespace=true` adds its namespace to one of its renders.

use super::App;
use crate::hydrate::marks::{AppMarks, Put, Words};
use crate::spec::order::WAVE;
use crate::spec::policy::{DRIFT, PRUNE, REPLACE};

/// What `app` puts on each object it renders.
pub(crate) fn marks(app: &App) -> AppMarks {
    let mut annotations = Vec::new();
    // An object's own wave orders it within its app; the app's orders the rest.
    if app.wave != 0 {
        annotations.push((WAVE.to_string(), app.wave.to_string()));
    }
    if !app.prune {
        annotations.push((PRUNE.to_string(), "disabled".to_string()));
    }
    if app.replace {
        annotations.push((REPLACE.to_string(), "on-immutable".to_string()));
    }
    if !app.self_heal {
        annotations.push((DRIFT.to_string(), "report".to_string()));
    }
    AppMarks {
        namespace: app.namespace.clone(),
        ignore: app.ignore.clone(),
        annotations,
        ..AppMarks::new(
            format!("Application {}", app.name),
            Put::WhereMissing,
            Words::Argo,
        )
    }
}
