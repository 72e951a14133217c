//! Apps that render apps, one mechanism for every app format (Flux's Kustomizations and
//! HelmReleases, Argo CD's Applications): a format finds its objects in the tree's YAML,
//! takes them out of what is applied and says, in one [`Found`], what they render with
//! which tool and what each app puts on its objects (its `AppMarks`, beside each item);
//! the stage renders that, putting each item's marks on once it renders
//! (`Hydrator::carry_out_apps`), and hands the pass back to the format for what waits for
//! a failed app. Formats are found one after another in a pass, rendered in the same order, and a
//! pass follows another while one renders more apps.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::app_yaml::normalise_url;
use super::argo::part::{Part, PluginPart};
use super::flux::model::Kustomization;
use super::held::AppError;
use super::helm::ReleaseAt;
use super::stage::Hydrated;
use crate::spec::clusters::Destination;
use crate::spec::{Location, SourceFile, SpecError};

/// An app format as the stage knows it (one entry of `hydrate::FORMATS`): what a file of
/// its apps needs before any rendering, and how a revision's value of it is made.
pub(crate) struct Registered {
    /// Told from a file's bytes, no YAML read: every revision's files are asked, and
    /// most hold no app.
    pub needs: fn(&[u8]) -> Needs,
    /// For a revision whose files, before any app rendered, are those given (which tells
    /// whether the tree holds the format's app objects: its own install is then left out).
    pub new: for<'a> fn(&[SourceFile], &Setting<'a>) -> Box<dyn AppFormat + 'a>,
}

/// What a file of a format's apps needs before it is rendered.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Needs {
    /// The tree on disk (a git commit checked out): a tool reads files itself.
    pub checkout: bool,
    /// Charts rendered: helm is then told of the cluster.
    pub charts: bool,
}

/// What every format of a revision is made with.
pub(crate) struct Setting<'a> {
    pub signatures: &'a crate::source::Signatures,
    pub fleet: &'a crate::spec::clusters::Clusters,
}

/// An app format: Flux's objects, Argo CD's. One value per revision rendered, which
/// keeps what a format needs from one pass to the next (the waves found so far, the
/// apps met) and from a pass's reading to its render (what its apps say of their output).
pub(crate) trait AppFormat {
    /// One pass over `files` (YAML, written or rendered): its objects found and taken out
    /// (their lines blanked, so every other document keeps its place), and what they
    /// render. `repo`: this repository; a format that learns another name of it (Flux's
    /// bootstrap GitRepository) adds it, for the formats and passes after it. `apps`: the
    /// apps that made each rendered file so far.
    fn find(
        &mut self,
        files: &mut [SourceFile],
        apps: &crate::spec::RenderedApps,
        repo: &mut Repository,
    ) -> Found;

    /// After the pass's renders (`renders`, as its `find` gave them, marked): what waits
    /// for an app that failed, held; where its apps go.
    fn rendered(&mut self, renders: &Renders, out: &mut Hydrated);

    /// The notice said when `objects` ("3 objects") of the format's own install were left
    /// out of what is applied.
    fn install_left_out(&self, objects: &str) -> String;
}

/// What one pass of a format found.
#[derive(Debug, Default)]
pub struct Found {
    pub renders: Renders,
    pub errors: Vec<SpecError>,
    /// Apps read but not carried out, each held with its reason.
    pub held: Vec<AppError>,
    /// Objects of the format's own install left out.
    pub install_left_out: usize,
    /// What is read otherwise than the format's controller would, said by `validate` and
    /// the daemon.
    pub notices: Vec<String>,
    /// The apps whose destination is a cluster named, by app, with where they say so.
    pub destinations: BTreeMap<String, (Destination, Location)>,
    /// Directories of the spec root (relative to it) an app renders: their files are its,
    /// not the tree's own.
    pub consumed: Vec<String>,
}

/// What a pass renders, by the tool that renders it.
#[derive(Debug, Default)]
pub struct Renders {
    /// Flux Kustomizations, built as Flux builds them.
    pub kustomizations: Vec<Kustomization>,
    /// Directories and Kustomize directories of this repository.
    pub parts: Vec<Part>,
    /// Sources a config management plugin renders.
    pub plugins: Vec<PluginPart>,
    /// Chart releases.
    pub releases: Vec<ReleaseAt>,
}

impl Renders {
    pub fn is_empty(&self) -> bool {
        self.kustomizations.is_empty()
            && self.parts.is_empty()
            && self.plugins.is_empty()
            && self.releases.is_empty()
    }

    /// Where each app that renders is written.
    pub(crate) fn places(&self) -> impl Iterator<Item = &Location> {
        self.kustomizations
            .iter()
            .map(|k| &k.at)
            .chain(self.parts.iter().map(|p| &p.at))
            .chain(self.plugins.iter().map(|p| &p.at))
            .chain(self.releases.iter().map(|r| &r.release.at))
    }
}

/// What the formats know of this repository: where it lies, the spec root within it,
/// and the URLs it is named by.
pub struct Repository<'a> {
    pub repo: Option<&'a Path>,
    /// The spec root, relative to the repository.
    pub root: Option<&'a str>,
    /// Normalised.
    pub urls: BTreeSet<String>,
    /// The names the revision being read goes by (`source::Checkout::revisions`).
    pub revisions: &'a [String],
}

impl Repository<'_> {
    /// Whether `url` names this repository.
    pub(crate) fn names(&self, url: &str) -> bool {
        self.urls.contains(&normalise_url(url))
    }
}
