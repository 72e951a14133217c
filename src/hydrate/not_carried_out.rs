//! Why an app format's object is refused (`Refusal`), and the most common why: what it
//! asks that driftless does not carry out yet (`NotCarriedOut`), said one way by every
//! reader (Flux's Kustomizations and HelmReleases, Argo CD's Applications and
//! ApplicationSets): the field or the thing named, and, where it helps the user choose,
//! what is carried out instead. The reader's own refusal ("Application a: ...; nothing is
//! applied") wraps it with the object and the place.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NotCarriedOut {
    what: What,
    /// What is carried out instead, or why the field is not needed, in parentheses after.
    instead: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum What {
    /// A field by its path in the object, e.g. `spec.kubeConfig`.
    Field(String),
    /// One thing the object names: a sync option, a generator, a kind of source.
    One(String),
    /// A kind of thing: list indexes, template functions.
    Many(String),
}

impl NotCarriedOut {
    /// A field by its path in the object: `spec.kubeConfig`, `helm.fileParameters`.
    pub fn field(path: impl Into<String>) -> Self {
        NotCarriedOut {
            what: What::Field(path.into()),
            instead: None,
        }
    }

    /// One thing the object names: `sync option "FailOnSharedResource=true"`.
    pub fn named(what: impl Into<String>) -> Self {
        NotCarriedOut {
            what: What::One(what.into()),
            instead: None,
        }
    }

    /// A kind of thing, said in the plural: `list indexes`.
    pub fn kind(what: impl Into<String>) -> Self {
        NotCarriedOut {
            what: What::Many(what.into()),
            instead: None,
        }
    }

    /// What is carried out instead: `list and git are`.
    pub fn instead(mut self, note: &'static str) -> Self {
        self.instead = Some(note);
        self
    }
}

impl fmt::Display for NotCarriedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.what {
            What::Field(path) => write!(f, "`{path}` is")?,
            What::One(what) => write!(f, "{what} is")?,
            What::Many(what) => write!(f, "{what} are")?,
        }
        f.write_str(" not carried out by driftless yet")?;
        if let Some(instead) = self.instead {
            write!(f, " ({instead})")?;
        }
        Ok(())
    }
}

impl std::error::Error for NotCarriedOut {}

/// Why an app format's object is refused, one type for every reader (Flux's Kustomizations
/// and HelmReleases, Argo CD's Applications): the reader says it after the object and
/// before what follows (`Application a: ...; nothing is applied`), at the field's place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error(transparent)]
    NotCarriedOut(#[from] NotCarriedOut),
    /// A field of another type than its CRD's.
    #[error(transparent)]
    WrongType(#[from] crate::hydrate::shape::WrongType),
    /// A path the object names, by what it is (`path`, `chart`), that leads out of the
    /// repository.
    #[error("{what} {path:?} leads out of the repository")]
    LeadsOut { what: &'static str, path: String },
    /// A source the object reads (`source https://...`, `GitRepository NS/NAME`) that is
    /// not the repository being read; `hint`, how to make it so, in parentheses after.
    #[error("its {named} is not the repository being read{}", hint.map(|h| format!(" ({h})")).unwrap_or_default())]
    OtherRepository {
        named: String,
        hint: Option<&'static str>,
    },
    /// What the object says that its own controller would refuse too: two fields of which
    /// it takes one, a value it does not take.
    #[error("{0}")]
    Invalid(String),
}

impl From<String> for Refusal {
    fn from(why: String) -> Self {
        Refusal::Invalid(why)
    }
}

impl From<&str> for Refusal {
    fn from(why: &str) -> Self {
        Refusal::Invalid(why.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::{NotCarriedOut, Refusal};

    #[test]
    fn every_refusal_says_the_same_words() {
        assert_eq!(
            NotCarriedOut::field("spec.kubeConfig").to_string(),
            "`spec.kubeConfig` is not carried out by driftless yet"
        );
        assert_eq!(
            NotCarriedOut::named("the clusters generator")
                .instead("list and git are")
                .to_string(),
            "the clusters generator is not carried out by driftless yet (list and git are)"
        );
        assert_eq!(
            NotCarriedOut::kind("list indexes").to_string(),
            "list indexes are not carried out by driftless yet"
        );
        assert_eq!(
            Refusal::LeadsOut {
                what: "path",
                path: "../etc".into()
            }
            .to_string(),
            "path \"../etc\" leads out of the repository"
        );
        assert_eq!(
            Refusal::OtherRepository {
                named: "GitRepository flux-system/tenant".into(),
                hint: None
            }
            .to_string(),
            "its GitRepository flux-system/tenant is not the repository being read"
        );
        assert_eq!(
            Refusal::OtherRepository {
                named: "source https://example.com/x".into(),
                hint: Some("name it in [repository] urls")
            }
            .to_string(),
            "its source https://example.com/x is not the repository being read (name it in [repository] urls)"
        );
        assert_eq!(
            Refusal::from(NotCarriedOut::field("spec.x")).to_string(),
            "`spec.x` is not carried out by driftless yet"
        );
    }
}
