//! The verdict on a status: converged, or why not, one line each (`driftless status`'s
//! exit status and its closing lines).

use k8s_openapi::jiff::Timestamp;

use serde::Serialize;

use super::{MESSAGE_WIDTH, StatusFile, one_line};

/// A status file older than this is stale: its daemon has stopped or hangs.
pub(crate) const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

impl StatusFile {
    /// Whether the daemon's last sync reached its cluster: not when its specs say
    /// `ClusterUnreachable` or `ClusterUnauthorized`, or its watches cannot reach the API.
    pub fn reached(&self) -> bool {
        let away = self.specs.iter().any(|s| {
            matches!(
                s.reason.as_deref(),
                Some("ClusterUnreachable" | "ClusterUnauthorized")
            )
        }) || self
            .errors
            .iter()
            .any(|e| e.message.starts_with("cannot reach the Kubernetes API"));
        !away
    }

    /// Everything is as it should be: the newest revision is valid and synced and every
    /// spec is ready.
    pub fn converged(&self) -> bool {
        self.errors.is_empty()
            && self
                .last_sync
                .as_ref()
                .is_some_and(|s| s.result == "success")
            && self.specs.iter().all(|s| s.ready)
    }

    /// Why the cluster is not (known to be) as the newest revision says, one line each;
    /// empty when it is: the file is fresh, the newest revision valid, applied and its
    /// last sync a success, every spec ready, and nothing held back.
    pub fn not_converged(&self, now: Timestamp) -> Vec<String> {
        let mut why = Vec::new();
        match self.written.as_deref().map(|w| w.parse::<Timestamp>()) {
            Some(Ok(written)) => {
                let age = now.duration_since(written);
                let age = std::time::Duration::try_from(age).unwrap_or_default();
                if age > STALE_AFTER {
                    why.push(format!(
                        "stale: the file was written {} ago (the daemon rewrites it every 10s): is the daemon running?",
                        humantime::format_duration(std::time::Duration::from_secs(age.as_secs()))
                    ));
                }
            }
            _ => why.push(
                "stale: the file does not say when it was written (an older driftless, or not a daemon's)"
                    .to_string(),
            ),
        }
        // While a sync runs, that is the news: what follows may be its unfinished work.
        if self.syncing {
            match &self.sync_progress {
                Some(p) => why.push(format!(
                    "sync in progress: {}",
                    one_line(&p.message, MESSAGE_WIDTH + 40)
                )),
                None => why.push("sync in progress".to_string()),
            }
        }
        let (held, errors): (Vec<_>, Vec<_>) = self.errors.iter().partition(|e| e.app.is_some());
        if let Some(first) = errors.first() {
            why.push(format!(
                "{} error{}: {}",
                errors.len(),
                if errors.len() == 1 { "" } else { "s" },
                one_line(&first.message, MESSAGE_WIDTH)
            ));
        }
        let mut apps: Vec<&str> = held.iter().filter_map(|e| e.app.as_deref()).collect();
        apps.dedup();
        for app in apps {
            let first = held.iter().find(|e| e.app.as_deref() == Some(app));
            why.push(format!(
                "app {app} held, neither applied nor pruned: {}",
                one_line(first.map_or("-", |e| e.message.as_str()), MESSAGE_WIDTH)
            ));
        }
        if self.revision_seen.is_some() && self.revision_seen != self.revision_applied {
            why.push(format!(
                "revision {} is not applied (applied: {})",
                self.revision_seen.as_deref().unwrap_or("-"),
                self.revision_applied.as_deref().unwrap_or("none")
            ));
        }
        match &self.last_sync {
            None => why.push("no sync yet".to_string()),
            Some(s) if s.result == "refused" => why.push(format!(
                "prune refused: {}",
                one_line(s.message.as_deref().unwrap_or("-"), MESSAGE_WIDTH)
            )),
            Some(s) if s.result != "success" => why.push(format!(
                "last sync {}: {}",
                s.result,
                one_line(s.message.as_deref().unwrap_or("-"), MESSAGE_WIDTH)
            )),
            Some(_) => {}
        }
        let held: Vec<&str> = self
            .specs
            .iter()
            .filter(|s| s.suspended.is_some() && !s.ready)
            .map(|s| s.id.as_str())
            .collect();
        if !held.is_empty() {
            why.push(format!(
                "suspended with a change held back: {}",
                held.join(", ")
            ));
        }
        let not_ready: Vec<&str> = self
            .specs
            .iter()
            .filter(|s| !s.ready && s.suspended.is_none())
            .map(|s| s.id.as_str())
            .collect();
        if !not_ready.is_empty() {
            let shown: Vec<&str> = not_ready.iter().take(5).copied().collect();
            let more = match not_ready.len() {
                n if n > 5 => format!(", and {} more", n - 5),
                _ => String::new(),
            };
            why.push(format!(
                "{} of {} specs not ready: {}{more}",
                not_ready.len(),
                self.specs.len(),
                shown.join(", ")
            ));
        }
        why
    }
}

/// A cluster's line of a fleet's summary (`/api/v1/fleet`, the fleet's page, `driftless
/// status` of several clusters): the same figures in the same words.
#[derive(Debug, Serialize, PartialEq)]
pub struct ClusterSummary {
    pub cluster: String,
    /// Whether its last sync reached it.
    pub reachable: bool,
    pub kubernetes: Option<String>,
    pub ready: usize,
    pub not_ready: usize,
    pub last_sync: Option<super::LastSync>,
    pub converged: bool,
    /// Why it has not converged, one line each.
    pub not_converged: Vec<String>,
}

impl ClusterSummary {
    pub fn of(cluster: &str, file: &StatusFile, now: Timestamp) -> ClusterSummary {
        let ready = file.specs.iter().filter(|s| s.ready).count();
        let not_converged = file.not_converged(now);
        ClusterSummary {
            cluster: cluster.to_string(),
            reachable: file.reached(),
            kubernetes: file.kubernetes.clone(),
            ready,
            not_ready: file.specs.len() - ready,
            last_sync: file.last_sync.clone(),
            converged: not_converged.is_empty(),
            not_converged,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::SyncProgress;
    use super::super::tests::sample;
    use super::*;
    use crate::apply::suspensions::Suspension;

    #[test]
    fn converged_needs_success_no_errors_and_all_ready() {
        let mut s = sample();
        assert!(!s.converged());
        s.errors.clear();
        assert!(!s.converged());
        for spec in &mut s.specs {
            spec.ready = true;
        }
        assert!(s.converged());
        if let Some(sync) = &mut s.last_sync {
            sync.result = "failed".into();
        }
        assert!(!s.converged());
    }

    /// The sample as a converged daemon writes it: no errors, the newest revision
    /// applied, every spec ready.
    fn converged_sample() -> StatusFile {
        let mut s = sample();
        s.errors.clear();
        s.revision_applied = s.revision_seen.clone();
        for spec in &mut s.specs {
            spec.ready = true;
        }
        s
    }

    #[test]
    fn not_converged_says_why_each_way_it_is_not() {
        let now: Timestamp = "2025-03-01T12:00:20Z".parse().unwrap();
        let mut s = converged_sample();
        assert_eq!(s.not_converged(now), Vec::<String>::new());
        let late: Timestamp = "2025-03-01T12:01:05Z".parse().unwrap();
        assert_eq!(
            s.not_converged(late),
            [
                "stale: the file was written 1m ago (the daemon rewrites it every 10s): is the daemon running?"
            ]
        );
        s.specs[0].ready = false;
        s.specs[0].suspended = Some(Suspension {
            reason: "incident".into(),
            since: "2025-03-01T11:00:00Z".into(),
            declared: false,
        });
        s.specs[1].ready = false;
        if let Some(sync) = &mut s.last_sync {
            sync.result = "refused".into();
            sync.message = Some("the revision would prune 4 of 6".into());
        }
        s.revision_applied = Some("aaaaaaa".into());
        let why = s.not_converged(now);
        assert_eq!(why[0], "revision bbbbbbb is not applied (applied: aaaaaaa)");
        assert_eq!(why[1], "prune refused: the revision would prune 4 of 6");
        assert_eq!(
            why[2],
            format!("suspended with a change held back: {}", s.specs[0].id)
        );
        assert!(
            why[3].starts_with(&format!("1 of 4 specs not ready: {}", s.specs[1].id)),
            "{why:?}"
        );
        s.written = None;
        assert!(s.not_converged(now)[0].starts_with("stale: the file does not say"));
    }

    #[test]
    fn a_running_sync_is_said_first_with_what_it_does() {
        let now: Timestamp = "2025-03-01T12:00:20Z".parse().unwrap();
        let mut s = converged_sample();
        s.syncing = true;
        assert_eq!(s.not_converged(now), ["sync in progress"]);
        let mut p = SyncProgress {
            revision: Some("0123456789abcdef0123456789abcdef01234567".into()),
            phase: "waiting".into(),
            waiting_for: Some("hook Deployment.apps n/pre to succeed".into()),
            waiting_on: Some("Deployment.apps n/pre [Progressing]: 0 of 1 ready".into()),
            waiting_seconds: 12,
            ..SyncProgress::default()
        };
        assert_eq!(
            p.describe(),
            "revision 0123456789ab: waiting for hook Deployment.apps n/pre to succeed (12s): \
             Deployment.apps n/pre [Progressing]: 0 of 1 ready"
        );
        p.message = p.describe();
        s.sync_progress = Some(p.clone());
        assert!(s.not_converged(now)[0].starts_with("sync in progress: revision 0123456789ab"));
        p.phase = "applying".into();
        p.applied = 3;
        p.total = 10;
        assert_eq!(
            p.describe(),
            "revision 0123456789ab: applying 3 of 10 objects"
        );
        p.stopping = Some("superseded by revision r2".into());
        assert_eq!(
            p.describe(),
            "revision 0123456789ab: stopping (superseded by revision r2)"
        );
    }
}
