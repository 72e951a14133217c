//! Flux's `GitRepository.spec.verify` on this repository, read as a request the daemon's
//! own setting must satisfy: the keys are the operator's (`run --verify-commits`), never
//! the Secret a commit names, so a tree can ask for verification but never turn it off or
//! choose whom it trusts. A request the revision's signatures do not meet holds the whole
//! revision, as an unverified commit is held.

use serde_json::Value;

use super::model::err;
use crate::source::Signatures;
use crate::spec::{Location, SpecError};

/// What a GitRepository asks to be verified (Flux's `spec.verify.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Head,
    Tag,
    TagAndHead,
}

/// A GitRepository's request, where it was made.
pub(super) struct Asked {
    at: Location,
    /// `GitRepository NS/NAME`.
    what: String,
    mode: Result<Mode, NoMode>,
}

/// A `verify.mode` Flux does not take, as written.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0} is no verify mode (HEAD, Tag, TagAndHEAD)")]
struct NoMode(String);

/// The request of GitRepository `ns/name` (`v`), if it makes one; `at`: its `verify` line.
pub(super) fn asked(v: &Value, at: Location, ns: &str, name: &str) -> Option<Asked> {
    let verify = v["spec"].get("verify")?;
    // Flux's API takes `HEAD`, `Tag` and `TagAndHEAD`; `head` is the v1beta2 spelling.
    let mode = match verify.get("mode").map(|m| m.as_str()) {
        None | Some(Some("HEAD" | "head")) => Ok(Mode::Head),
        Some(Some("Tag")) => Ok(Mode::Tag),
        Some(Some("TagAndHEAD")) => Ok(Mode::TagAndHead),
        Some(other) => Err(NoMode(
            other.map_or_else(|| verify["mode"].to_string(), |m| format!("{m:?}")),
        )),
    };
    Some(Asked {
        at,
        what: format!("GitRepository {ns}/{name}"),
        mode,
    })
}

/// Whether `signatures` meet the request: an error holds the revision; a notice says
/// the request was not checked (a directory or an artifact has no commit to check).
pub(super) fn check(asked: &Asked, signatures: &Signatures) -> Result<Option<String>, SpecError> {
    let Asked { at, what, mode } = asked;
    let refused = |why: String| {
        Err(err(
            at.clone(),
            format!("{what} asks for signed commits (spec.verify): {why}; nothing is applied"),
        ))
    };
    let mode = match mode {
        Ok(m) => *m,
        Err(e) => return refused(e.to_string()),
    };
    let (commit, tag) = match signatures {
        Signatures::NoCommit => {
            return Ok(Some(format!(
                "{what} asks for signed commits (spec.verify): a directory or an artifact has \
                 no commit to check; `run --git --verify-commits` checks them"
            )));
        }
        Signatures::Unchecked => {
            return refused(
                "this daemon checks no signatures; start it with --verify-commits and the \
                 keys the request trusts"
                    .to_string(),
            );
        }
        Signatures::Verified { commit, tag } => (commit.is_some(), tag.is_some()),
    };
    match mode {
        Mode::Head | Mode::TagAndHead if !commit => refused(
            "the daemon follows a tag and checked the tag's signature, not the commit's, \
             which does not pass"
                .to_string(),
        ),
        Mode::Tag | Mode::TagAndHead if !tag => refused(format!(
            "mode {} checks a tag's signature, and the daemon follows no tag (run it with --tag)",
            if mode == Mode::Tag {
                "Tag"
            } else {
                "TagAndHEAD"
            }
        )),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at() -> Location {
        Location {
            file: "flux-system/gotk-sync.yaml".into(),
            line: 7,
            column: 3,
        }
    }

    fn ask(verify: Value) -> Asked {
        asked(
            &json!({"spec": {"url": "x", "verify": verify}}),
            at(),
            "flux-system",
            "repo",
        )
        .unwrap()
    }

    fn verified(commit: bool, tag: bool) -> Signatures {
        Signatures::Verified {
            commit: commit.then(|| "alice".to_string()),
            tag: tag.then(|| "alice".to_string()),
        }
    }

    #[test]
    fn a_request_is_met_only_by_what_the_daemon_checked() {
        assert!(asked(&json!({"spec": {"url": "x"}}), at(), "a", "b").is_none());
        let head = ask(json!({"mode": "HEAD", "secretRef": {"name": "keys"}}));
        assert_eq!(check(&head, &verified(true, false)).unwrap(), None);
        assert_eq!(
            check(
                &ask(json!({"secretRef": {"name": "k"}})),
                &verified(true, true)
            )
            .unwrap(),
            None
        );
        let e = check(&head, &Signatures::Unchecked)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "flux-system/gotk-sync.yaml:7:3: GitRepository flux-system/repo asks for signed commits \
             (spec.verify): this daemon checks no signatures; start it with --verify-commits and \
             the keys the request trusts; nothing is applied"
        );
        assert!(
            check(&head, &verified(false, true))
                .unwrap_err()
                .to_string()
                .contains("not the commit's")
        );
        let tag = ask(json!({"mode": "Tag"}));
        assert_eq!(check(&tag, &verified(false, true)).unwrap(), None);
        assert!(
            check(&tag, &verified(true, false))
                .unwrap_err()
                .to_string()
                .contains("mode Tag checks a tag's signature")
        );
        let both = ask(json!({"mode": "TagAndHEAD"}));
        assert_eq!(check(&both, &verified(true, true)).unwrap(), None);
        assert!(check(&both, &verified(false, true)).is_err());
        assert!(check(&both, &verified(true, false)).is_err());
        let notice = check(&head, &Signatures::NoCommit).unwrap().unwrap();
        assert!(notice.contains("no commit to check"), "{notice}");
        let bad = check(&ask(json!({"mode": 3})), &verified(true, true))
            .unwrap_err()
            .to_string();
        assert!(bad.contains("3 is no verify mode"), "{bad}");
        let bad = check(&ask(json!({"mode": "Commit"})), &verified(true, true))
            .unwrap_err()
            .to_string();
        assert!(bad.contains("\"Commit\" is no verify mode"), "{bad}");
    }
}
