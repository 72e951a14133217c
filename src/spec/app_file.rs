//! Apps beside files: what an app renders is handed on as a file of its own, and the apps
//! that made it (the app whose render it is, and each app above it) are carried beside
//! that file as [`AppId`] values ([`RenderedApps`]), never read back from its name. The
//! name (`FILE#flux.NS.NAME`, `FILE#argo.NAME`, `FILE#helm.NAME`) only says where a
//! rendered file's errors are and keeps two renders' files apart.

use std::collections::BTreeMap;
use std::fmt;

/// An app: what is held alone when its render or validation fails (DESIGN 1.12), and
/// what its objects are recorded as (`flux/NS/NAME`, `flux-helm/NS/NAME`, `argo/NAME`,
/// `helm/NAME`, as it is said everywhere).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AppId {
    /// A Flux Kustomization.
    Flux { namespace: String, name: String },
    /// A Flux HelmRelease.
    FluxHelm { namespace: String, name: String },
    /// An Argo CD Application.
    Argo { name: String },
    /// A `[helm.NAME]` release of the tree.
    Helm { name: String },
}

impl fmt::Display for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppId::Flux { namespace, name } => write!(f, "flux/{namespace}/{name}"),
            AppId::FluxHelm { namespace, name } => write!(f, "flux-helm/{namespace}/{name}"),
            AppId::Argo { name } => write!(f, "argo/{name}"),
            AppId::Helm { name } => write!(f, "helm/{name}"),
        }
    }
}

impl AppId {
    /// Whether `app` (as said: `argo/web`) is this one.
    pub fn is(&self, app: &str) -> bool {
        self.to_string() == app
    }

    /// Where `render --out` writes what this app rendered, handed on as `file`: a file
    /// per app by its name (`argo/NAME.yaml`, `argo/NAME.I.yaml` for its source I,
    /// `flux/NS/NAME.yaml`, `flux/NS/NAME.helm.yaml`; a `[helm.NAME]` release beside
    /// the file that names it).
    pub fn out_file(&self, file: &str) -> String {
        match self {
            AppId::Argo { name } => {
                // An Application's sources after its first are numbered where it is
                // handed on (`argo_output_file`).
                match file
                    .rsplit_once('#')
                    .and_then(|(_, i)| i.parse::<usize>().ok())
                {
                    Some(i) => format!("argo/{name}.{i}.yaml"),
                    None => format!("argo/{name}.yaml"),
                }
            }
            AppId::Flux { namespace, name } => format!("flux/{namespace}/{name}.yaml"),
            AppId::FluxHelm { namespace, name } => format!("flux/{namespace}/{name}.helm.yaml"),
            AppId::Helm { name } => {
                let written = file.split('#').next().unwrap_or(file);
                format!("{}.helm-{name}.yaml", written.trim_end_matches(".toml"))
            }
        }
    }
}

/// The apps that made each rendered file, by the file's path, the outermost first: for
/// an app of apps' Application `web`, `[argo/root, argo/web]`. A file no app made (the
/// tree's own, or what a tool rendered of it) has none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderedApps(BTreeMap<String, Vec<AppId>>);

impl RenderedApps {
    /// None yet.
    pub const fn new() -> RenderedApps {
        RenderedApps(BTreeMap::new())
    }

    /// Every app that made `file`, the outermost first.
    pub fn of(&self, file: &str) -> &[AppId] {
        self.0.get(file).map_or(&[], Vec::as_slice)
    }

    /// The app `file` is the render of: the innermost that made it.
    pub fn app_of(&self, file: &str) -> Option<&AppId> {
        self.of(file).last()
    }

    /// Whether `file` is rendered by `app` (as said), or by an app that `app` rendered in
    /// turn.
    pub fn rendered_by(&self, file: &str, app: &str) -> bool {
        self.of(file).iter().any(|a| a.is(app))
    }

    /// Records the apps that made `file`; none is not recorded.
    pub(crate) fn insert(&mut self, file: String, apps: Vec<AppId>) {
        if !apps.is_empty() {
            self.0.insert(file, apps);
        }
    }

    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.0.retain(|f, _| keep(f));
    }

    /// Each file an app made, with its apps.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[AppId])> {
        self.0.iter().map(|(f, a)| (f.as_str(), a.as_slice()))
    }
}

/// The file a Flux Kustomization's objects are handed on as, written in `file`.
pub(crate) fn flux_output_file(file: &str, namespace: &str, name: &str) -> String {
    format!("{file}#flux.{namespace}.{name}")
}

/// Whether an app's own objects are guarded against a mass prune by their own share
/// (DESIGN 2): a Flux Kustomization or an Argo CD Application pointed at an emptied or
/// wrong path looks so. A chart release renders a chart, not a path: a release whose
/// values drop most of its objects is judged with the tree, as Helm and Flux judge none.
pub(crate) fn guards_own_prune(app: &str) -> bool {
    app.starts_with("flux/") || app.starts_with("argo/")
}

/// The file source `index` of Argo CD Application `name`, written at `file`, is handed on
/// as.
pub(crate) fn argo_output_file(file: &str, name: &str, index: usize) -> String {
    match index {
        0 => format!("{file}#argo.{name}"),
        i => format!("{file}#argo.{name}#{i}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_is_said_and_recognised_as_it_is_said() {
        let flux = AppId::Flux {
            namespace: "flux-system".into(),
            name: "apps".into(),
        };
        assert_eq!(flux.to_string(), "flux/flux-system/apps");
        assert!(flux.is("flux/flux-system/apps"));
        assert!(!flux.is("flux/flux-system/app"));
        assert!(!flux.is("flux-helm/flux-system/apps"));
        let helm = AppId::FluxHelm {
            namespace: "shop".into(),
            name: "db".into(),
        };
        assert_eq!(helm.to_string(), "flux-helm/shop/db");
        assert!(helm.is("flux-helm/shop/db"));
        assert!(!helm.is("flux/shop/db"));
        let argo = AppId::Argo { name: "web".into() };
        assert!(argo.is("argo/web") && !argo.is("argo/we") && !argo.is("helm/web"));
        assert!(AppId::Helm { name: "web".into() }.is("helm/web"));
    }

    #[test]
    fn a_file_is_the_render_of_its_innermost_app_and_of_every_app_above_it() {
        let mut apps = RenderedApps::default();
        let root = AppId::Argo {
            name: "root".into(),
        };
        let web = AppId::Argo { name: "web".into() };
        // Named as a file is, whatever its apps: the name is never read for them.
        apps.insert("a.yaml#x".into(), vec![root.clone(), web.clone()]);
        apps.insert("b.yaml".into(), Vec::new());
        assert_eq!(apps.app_of("a.yaml#x"), Some(&web));
        assert!(apps.rendered_by("a.yaml#x", "argo/root"));
        assert!(apps.rendered_by("a.yaml#x", "argo/web"));
        assert!(!apps.rendered_by("a.yaml#x", "argo/we"));
        assert_eq!(apps.app_of("b.yaml"), None);
        assert_eq!(apps.iter().count(), 1);
    }
}
