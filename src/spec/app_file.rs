//! Apps in file paths: what an app renders is handed on as a file named after the file
//! that holds the app and a marker with the app's name (`FILE#flux.NS.NAME`,
//! `FILE#argo.NAME`, `FILE#helm.NAME`), nested for an app an app rendered; the app a file
//! is the render of, every app above it, and where `render --out` writes it are read back
//! from that name here, and only here.

/// The file a Flux Kustomization's objects are handed on as, written in `file`: an app of
/// their own ([`super::SpecTree::apps`]).
pub(crate) fn flux_output_file(file: &str, namespace: &str, name: &str) -> String {
    format!("{file}#flux.{namespace}.{name}")
}

/// The innermost of `markers` in `file` (the app an app rendered last), and what follows
/// it.
fn innermost<'f>(file: &'f str, markers: &[&'static str]) -> Option<(&'static str, &'f str)> {
    let (i, marker) = markers
        .iter()
        .filter_map(|&m| file.rfind(m).map(|i| (i, m)))
        .max()?;
    Some((marker, &file[i + marker.len()..]))
}

/// The app a file is the render of: `flux/NAMESPACE/NAME` for a Flux Kustomization's
/// ([`flux_output_file`]), `flux-helm/NAMESPACE/NAME` for a Flux HelmRelease's
/// (`#flux-helm.NS.NAME`), `argo/NAME` for an Argo CD Application's
/// ([`argo_output_file`]), `helm/NAME` for a `[helm.NAME]` release's; the innermost, for
/// an app an app rendered. A chart directory no spec names is the tree's own (DESIGN 1.12:
/// the tree is the app of what is plain).
pub fn app_of(file: &str) -> Option<String> {
    let (marker, rest) = innermost(file, &APP_MARKERS)?;
    let name = rest.split('#').next().unwrap_or(rest);
    match marker {
        "#argo." => Some(format!("argo/{name}")),
        "#helm." => Some(format!("helm/{name}")),
        flux => {
            let (ns, name) = name.split_once('.')?;
            Some(format!("{}/{ns}/{name}", flux.trim_matches(['#', '.'])))
        }
    }
}

/// Where `render --out` writes what an app of a format (Flux's, Argo CD's) rendered, a
/// file per app by its name: `argo/NAME.yaml` (`argo/NAME.I.yaml` for its source I),
/// `flux/NS/NAME.yaml`, `flux/NS/NAME.helm.yaml` for a HelmRelease's; the innermost app,
/// for an app an app rendered. None for a file no such app rendered.
pub fn app_out_path(file: &str) -> Option<String> {
    let (marker, rest) = innermost(file, &["#argo.", "#flux.", "#flux-helm."])?;
    Some(match marker {
        "#argo." => match rest.split_once('#') {
            Some((name, index)) => format!("argo/{name}.{index}.yaml"),
            None => format!("argo/{rest}.yaml"),
        },
        flux => {
            let (ns, name) = rest.split_once('.').unwrap_or(("", rest));
            let what = if flux == "#flux-helm." { ".helm" } else { "" };
            format!("flux/{ns}/{name}{what}.yaml")
        }
    })
}

/// Every app that rendered the file at `file`, the outermost first (`app_of` is the
/// last).
pub(crate) fn apps_of(file: &str) -> Vec<String> {
    file.split('#')
        .skip(1)
        .filter_map(|part| {
            let (kind, rest) = part.split_once('.')?;
            match kind {
                "argo" | "helm" => Some(format!("{kind}/{rest}")),
                "flux" | "flux-helm" => {
                    let (ns, name) = rest.split_once('.')?;
                    Some(format!("{kind}/{ns}/{name}"))
                }
                _ => None,
            }
        })
        .collect()
}

/// What follows a file's name where an app rendered it: `#argo.NAME`, `#flux.NS.NAME`,
/// `#flux-helm.NS.NAME`, `#helm.NAME`.
const APP_MARKERS: [&str; 4] = ["#argo.", "#flux.", "#flux-helm.", "#helm."];

/// Whether an app's own objects are guarded against a mass prune by their own share
/// (DESIGN 2): a Flux Kustomization or an Argo CD Application pointed at an emptied or
/// wrong path looks so. A chart release renders a chart, not a path: a release whose
/// values drop most of its objects is judged with the tree, as Helm and Flux judge none.
pub(crate) fn guards_own_prune(app: &str) -> bool {
    app.starts_with("flux/") || app.starts_with("argo/")
}

/// Whether `file` is rendered by `app` (`flux/NS/NAME`, `flux-helm/NS/NAME`, `argo/NAME`,
/// `helm/NAME`) or by an app that `app` rendered in turn.
pub fn rendered_by(file: &str, app: &str) -> bool {
    let marker = match app.split_once('/') {
        Some(("argo", name)) => format!("#argo.{name}"),
        Some(("helm", name)) => format!("#helm.{name}"),
        // An `[apps]` directory: every file under it, and whatever they render.
        Some(("dir", dir)) => {
            let base = file.split('#').next().unwrap_or(file);
            return base
                .strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/'));
        }
        Some((kind @ ("flux" | "flux-helm"), rest)) => match rest.split_once('/') {
            Some((ns, name)) => format!("#{kind}.{ns}.{name}"),
            None => return false,
        },
        _ => return false,
    };
    file.match_indices(&marker).any(|(i, m)| {
        let after = &file[i + m.len()..];
        after.is_empty() || after.starts_with('#')
    })
}

/// The file source `index` of Argo CD Application `name`, written at `file`, is handed on
/// as.
pub(crate) fn argo_output_file(file: &str, name: &str, index: usize) -> String {
    match index {
        0 => format!("{file}#argo.{name}"),
        i => format!("{file}#argo.{name}#{i}"),
    }
}
