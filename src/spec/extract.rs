//! From one file's spanned TOML to typed specs, collecting every error with its exact
//! position rather than stopping at the first (which serde deserialization would do).

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::model::{
    AccessMode, ElasticWeb, LocalService, Manifest, ManifestMetadata, Protocol, ServicePort,
    ServiceType, TargetPort, Workspace, WorkspaceState, defaults,
};
use super::{Kind, Location, SpecBody, SpecError, names, quantity};

type Value<'i> = Spanned<DeValue<'i>>;

/// Error collection and offset → line:column for one file.
pub(super) struct FileCtx<'a> {
    file: &'a str,
    text: &'a str,
    line_starts: Vec<usize>,
    pub errors: Vec<SpecError>,
    /// Errors past [`super::MAX_ERRORS_PER_FILE`]: counted, not kept.
    pub dropped_errors: usize,
}

impl<'a> FileCtx<'a> {
    pub fn new(file: &'a str, text: &'a str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        FileCtx {
            file,
            text,
            line_starts,
            errors: Vec::new(),
            dropped_errors: 0,
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn loc(&self, offset: usize) -> Location {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset).max(1);
        let start = self.line_starts[line - 1];
        let column = self
            .text
            .get(start..offset)
            .map(|s| s.chars().count())
            .unwrap_or(0)
            + 1;
        Location {
            file: self.file.to_string(),
            line,
            column,
        }
    }

    /// Every error found so far, kept or not.
    pub fn count(&self) -> usize {
        self.errors.len() + self.dropped_errors
    }

    pub fn err(&mut self, span: &Range<usize>, message: impl Into<String>) {
        if self.errors.len() >= super::MAX_ERRORS_PER_FILE {
            self.dropped_errors += 1;
            return;
        }
        let at = self.loc(span.start);
        self.errors.push(SpecError {
            at,
            message: message.into(),
        });
    }
}

/// A spec as found in one file; a manifest's namespace and identity are settled once
/// the whole tree is known (a CRD elsewhere in it may say the kind is cluster-scoped).
pub(super) struct Found {
    pub kind: Kind,
    pub name: String,
    /// Resolved for the three workload kinds; for a manifest, the file's default.
    pub namespace: Option<String>,
    pub at: Location,
    pub body: SpecBody,
}

fn type_name(v: &DeValue) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// An image reference's longest form is about 530 bytes (a 255-byte name, a 128-byte tag
/// and a sha512 digest); anything longer is not an image.
pub(super) const MAX_IMAGE: usize = 1024;

/// etcd's default request limit (`--max-request-bytes`, 1.5 MiB): the apiserver cannot
/// store a larger object.
pub(super) const MAX_OBJECT_BYTES: usize = 1536 << 10;

/// Linux's PATH_MAX: the longest `mount-path` a container runtime takes.
pub(super) const MAX_PATH: usize = 4096;

/// Per-node Service names are `<name>-<node>`, or `<name>-<hash>` at the least (a 9-byte
/// suffix) when the node's name does not fit: a localservice name leaves room for that.
pub(super) const MAX_LOCALSERVICE_NAME: usize = 63 - 9;

/// How much of a user's string a message shows: a multi-megabyte value must still give a
/// one-line error.
const SHOWN_CHARS: usize = 64;

/// A user's string in a message: quoted (escapes as Rust's `{:?}`), and cut after
/// [`SHOWN_CHARS`] characters with its full length in bytes.
pub(super) fn q(s: &str) -> String {
    if s.chars().nth(SHOWN_CHARS).is_none() {
        return format!("{s:?}");
    }
    let head: String = s.chars().take(SHOWN_CHARS).collect();
    format!("{head:?}… ({} bytes)", s.len())
}

/// A user's key in a message (between backticks, unquoted), cut like [`q`].
fn short(s: &str) -> String {
    if s.chars().nth(SHOWN_CHARS).is_none() {
        return s.to_string();
    }
    let head: String = s.chars().take(SHOWN_CHARS).collect();
    format!("{head}… ({} bytes)", s.len())
}

fn suggest<'k>(key: &str, known: impl IntoIterator<Item = &'k str>) -> Option<&'k str> {
    // Known keys are short: a long key is no near miss (and similarity is quadratic).
    if key.len() > SHOWN_CHARS {
        return None;
    }
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(key, k), k))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// An integer's value; `Some(Err(()))` for one too large even for 128 bits.
fn integer(v: &DeValue) -> Option<Result<i128, ()>> {
    match v {
        DeValue::Integer(i) => Some(i128::from_str_radix(i.as_str(), i.radix()).map_err(|_| ())),
        _ => None,
    }
}

/// The fields of one table (a spec, or an entry of `ports`). Every key asked for is
/// "known"; `finish` reports the rest as unknown, with a suggestion for near misses.
struct Fields<'t, 'i> {
    table: &'t DeTable<'i>,
    what: String,
    header: Range<usize>,
    known: Vec<&'static str>,
}

impl<'t, 'i> Fields<'t, 'i> {
    fn new(table: &'t DeTable<'i>, what: String, header: Range<usize>) -> Self {
        Fields {
            table,
            what,
            header,
            known: Vec::new(),
        }
    }

    fn get(&mut self, key: &'static str) -> Option<&'t Value<'i>> {
        self.known.push(key);
        self.table
            .iter()
            .find(|(k, _)| k.get_ref() == key)
            .map(|(_, v)| v)
    }

    fn missing(&self, ctx: &mut FileCtx, key: &str) {
        ctx.err(
            &self.header,
            format!("{}: missing required field `{key}`", self.what),
        );
    }

    fn type_error(ctx: &mut FileCtx, key: &str, expected: &str, v: &Value) {
        ctx.err(
            &v.span(),
            format!(
                "`{key}` must be {expected}, found {}",
                type_name(v.get_ref())
            ),
        );
    }

    fn string(&mut self, ctx: &mut FileCtx, key: &'static str) -> Option<Spanned<String>> {
        let v = self.get(key)?;
        match v.get_ref() {
            DeValue::String(s) => Some(Spanned::new(v.span(), s.to_string())),
            _ => {
                Self::type_error(ctx, key, "a string", v);
                None
            }
        }
    }

    fn req_string(&mut self, ctx: &mut FileCtx, key: &'static str) -> Option<Spanned<String>> {
        if self.table.iter().all(|(k, _)| k.get_ref() != key) {
            self.known.push(key);
            self.missing(ctx, key);
            return None;
        }
        self.string(ctx, key)
    }

    /// An integer within `min..=max`; `range_msg` explains a value outside it.
    fn int(
        &mut self,
        ctx: &mut FileCtx,
        key: &'static str,
        required: bool,
        (min, max): (i128, i128),
        range_msg: &str,
    ) -> Option<i128> {
        let Some(v) = self.get(key) else {
            if required {
                self.missing(ctx, key);
            }
            return None;
        };
        let n = match integer(v.get_ref()) {
            None => {
                Self::type_error(ctx, key, "an integer", v);
                return None;
            }
            Some(Ok(n)) if n < min => {
                ctx.err(&v.span(), format!("`{key}` {range_msg} (is {n})"));
                return None;
            }
            Some(Ok(n)) if n <= max => n,
            // Above the range, or beyond 128 bits: the literal as written.
            Some(_) => {
                let written = ctx.text.get(v.span()).unwrap_or_default();
                let msg = if max >= i128::from(i64::MAX) {
                    format!(
                        "`{key}` is too large (is {}; at most {max})",
                        short(written)
                    )
                } else {
                    format!("`{key}` {range_msg} (is {})", short(written))
                };
                ctx.err(&v.span(), msg);
                return None;
            }
        };
        Some(n)
    }

    /// The required `image`: an image reference is one word of at most [`MAX_IMAGE`] bytes.
    fn image(&mut self, ctx: &mut FileCtx) -> Option<Spanned<String>> {
        let image = self.req_string(ctx, "image")?;
        let s = image.get_ref();
        let why = if s.is_empty() {
            "must not be empty".to_string()
        } else if s.len() > MAX_IMAGE {
            format!(
                "is {} bytes long; an image reference is at most {MAX_IMAGE}",
                s.len()
            )
        } else if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            "must not contain spaces or control characters".to_string()
        } else {
            return Some(image);
        };
        ctx.err(&image.span(), format!("invalid `image` {}: {why}", q(s)));
        None
    }

    fn port(&mut self, ctx: &mut FileCtx, key: &'static str, required: bool) -> Option<u16> {
        self.int(
            ctx,
            key,
            required,
            (1, 65535),
            "must be a port between 1 and 65535",
        )
        .and_then(|n| u16::try_from(n).ok())
    }

    fn quantity(
        &mut self,
        ctx: &mut FileCtx,
        key: &'static str,
        unit: quantity::Unit,
    ) -> Option<String> {
        let s = self.string(ctx, key)?;
        match quantity::check(s.get_ref(), unit) {
            Ok(()) => Some(s.into_inner()),
            Err(why) => {
                ctx.err(
                    &s.span(),
                    format!("invalid quantity for `{key}`: {} {why}", q(s.get_ref())),
                );
                None
            }
        }
    }

    fn boolean(&mut self, ctx: &mut FileCtx, key: &'static str) -> Option<bool> {
        let v = self.get(key)?;
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                Self::type_error(ctx, key, "a boolean", v);
                None
            }
        }
    }

    fn choice<T: Copy>(
        &mut self,
        ctx: &mut FileCtx,
        key: &'static str,
        options: &[(&str, T)],
    ) -> Option<T> {
        let s = self.string(ctx, key)?;
        if let Some((_, v)) = options.iter().find(|(name, _)| *name == s.get_ref()) {
            return Some(*v);
        }
        let list: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
        let mut msg = format!(
            "invalid `{key}` {}: expected one of {}",
            q(s.get_ref()),
            list.join(", ")
        );
        if let Some(near) = suggest(s.get_ref(), options.iter().map(|(n, _)| *n)) {
            msg.push_str(&format!(" (did you mean {near:?}?)"));
        }
        ctx.err(&s.span(), msg);
        None
    }

    /// A table of labels (or annotations) under `key`.
    fn labels(
        &mut self,
        ctx: &mut FileCtx,
        key: &'static str,
        kind: MetaMap,
    ) -> Option<Spanned<BTreeMap<String, String>>> {
        let v = self.get(key)?;
        meta_map(ctx, key, v, kind).map(|m| Spanned::new(v.span(), m))
    }

    fn finish(self, ctx: &mut FileCtx) {
        for (k, _) in self.table.iter() {
            let key = k.get_ref().as_ref();
            if self.known.contains(&key) {
                continue;
            }
            let near = suggest(key, self.known.iter().copied());
            let key = short(key);
            let msg = match near {
                Some(near) => format!(
                    "unknown field `{key}` in {} (did you mean `{near}`?)",
                    self.what
                ),
                None => format!(
                    "unknown field `{key}` in {}; known fields: {}",
                    self.what,
                    self.known.join(", ")
                ),
            };
            ctx.err(&k.span(), msg);
        }
    }
}

/// What a table of strings holds, for its key and value rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MetaMap {
    /// Labels an object is selected by (a node-selector): any valid label.
    Labels,
    /// Labels driftless writes itself, or selects Pods with: its own keys are refused.
    OwnLabels,
    /// Annotations driftless writes: its own keys are refused; values are free text.
    OwnAnnotations,
}

/// A table of string → string under `key`: label keys, and label values unless these are
/// annotations. Every bad entry is reported.
fn meta_map(
    ctx: &mut FileCtx,
    key: &str,
    v: &Value,
    kind: MetaMap,
) -> Option<BTreeMap<String, String>> {
    let noun = match kind {
        MetaMap::Labels | MetaMap::OwnLabels => "label",
        MetaMap::OwnAnnotations => "annotation",
    };
    let DeValue::Table(t) = v.get_ref() else {
        Fields::type_error(ctx, key, &format!("a table of {noun}s"), v);
        return None;
    };
    let mut out = BTreeMap::new();
    let mut ok = true;
    for (k, val) in t.iter() {
        let name = k.get_ref();
        let DeValue::String(s) = val.get_ref() else {
            Fields::type_error(ctx, &format!("{key}.{}", short(name)), "a string", val);
            ok = false;
            continue;
        };
        if let Err(why) = names::label_key(name) {
            ctx.err(
                &k.span(),
                format!("invalid {noun} key {} in `{key}`: {why}", q(name)),
            );
            ok = false;
        } else if kind != MetaMap::Labels && names::is_driftless_key(name) {
            ctx.err(
                &k.span(),
                format!("{noun} `{name}` in `{key}` is set by driftless; remove it"),
            );
            ok = false;
        }
        if kind != MetaMap::OwnAnnotations
            && let Err(why) = names::label_value(s)
        {
            ctx.err(
                &val.span(),
                format!("invalid {noun} value {} in `{key}`: {why}", q(s)),
            );
            ok = false;
        }
        out.insert(name.to_string(), s.to_string());
    }
    ok.then_some(out)
}

fn namespace_field(
    ctx: &mut FileCtx,
    f: &mut Fields,
    default: Option<&str>,
    kind_default: &str,
) -> (Option<String>, String) {
    match f.string(ctx, "namespace") {
        Some(ns) => {
            if let Err(why) = names::dns1123_label(ns.get_ref()) {
                ctx.err(
                    &ns.span(),
                    format!("invalid namespace {}: {why}", q(ns.get_ref())),
                );
            }
            let ns = ns.into_inner();
            (Some(ns.clone()), ns)
        }
        None => (None, default.unwrap_or(kind_default).to_string()),
    }
}

/// Reads one file. Syntax errors stop that file (anything read past them would only add
/// confusing follow-on errors); every other error is collected and reading goes on.
pub(super) fn file(ctx: &mut FileCtx, text: &str) -> Vec<Found> {
    let (root, syntax) = DeTable::parse_recoverable(text);
    if !syntax.is_empty() {
        // A file of garbage gives an error per token: only those shown are formatted.
        let shown = super::MAX_ERRORS_PER_FILE.saturating_sub(ctx.count());
        ctx.dropped_errors += syntax.len().saturating_sub(shown);
        for e in syntax.into_iter().take(shown) {
            let span = e.span().unwrap_or(0..0);
            let msg = e.message().trim().replace('\n', "; ");
            // The parser's own words for its nesting limit say little to a user.
            let msg = if msg.contains("recursion") {
                "nested too deeply (arrays, inline tables or dotted keys)".to_string()
            } else {
                msg
            };
            ctx.err(&span, format!("invalid TOML: {msg}"));
        }
        return Vec::new();
    }
    let root = root.into_inner();

    let mut file_ns = None;
    for (k, v) in root.iter() {
        if k.get_ref() != "namespace" {
            continue;
        }
        match v.get_ref() {
            DeValue::String(s) => match names::dns1123_label(s) {
                Ok(()) => file_ns = Some(s.to_string()),
                Err(why) => ctx.err(&v.span(), format!("invalid namespace {}: {why}", q(s))),
            },
            other => ctx.err(
                &v.span(),
                format!("`namespace` must be a string, found {}", type_name(other)),
            ),
        }
    }

    let mut found = Vec::new();
    for (k, v) in root.iter() {
        let key = k.get_ref().as_ref();
        if key == "namespace" {
            continue;
        }
        match Kind::parse(key) {
            Some(Kind::Manifest) => manifests(ctx, v, file_ns.as_deref(), &mut found),
            Some(kind) => {
                let DeValue::Table(specs) = v.get_ref() else {
                    ctx.err(
                        &v.span(),
                        format!(
                            "`{key}` must be a table of {key} specs ([{key}.NAME]), found {}",
                            type_name(v.get_ref())
                        ),
                    );
                    continue;
                };
                for (name, body) in specs.iter() {
                    if let Some(f) = spec(ctx, kind, name, body, file_ns.as_deref()) {
                        found.push(f);
                    }
                }
            }
            None => {
                let known = Kind::ALL.iter().map(|k| k.as_str()).chain(["namespace"]);
                let near = suggest(key, known);
                let key = short(key);
                let msg = match near {
                    Some(near) => format!("unknown kind `{key}` (did you mean `{near}`?)"),
                    None => format!(
                        "unknown kind `{key}`; a file holds `namespace` and tables of workspace, elasticweb, localservice or manifest"
                    ),
                };
                ctx.err(&k.span(), msg);
            }
        }
    }
    found
}

fn spec(
    ctx: &mut FileCtx,
    kind: Kind,
    name: &Spanned<std::borrow::Cow<str>>,
    body: &Value,
    file_ns: Option<&str>,
) -> Option<Found> {
    let what = format!("{kind} `{}`", short(name.get_ref()));
    let DeValue::Table(table) = body.get_ref() else {
        ctx.err(
            &body.span(),
            format!(
                "{what} must be a table, found {}",
                type_name(body.get_ref())
            ),
        );
        return None;
    };
    let errors_before = ctx.count();
    // Every workload kind names a Service after the spec, hence DNS-1035 (starts with a letter).
    if let Err(why) = names::dns1035_label(name.get_ref()) {
        ctx.err(
            &name.span(),
            format!("invalid {kind} name {}: {why}", q(name.get_ref())),
        );
    } else if kind == Kind::LocalService && name.get_ref().len() > MAX_LOCALSERVICE_NAME {
        ctx.err(
            &name.span(),
            format!(
                "invalid localservice name {}: must be at most {MAX_LOCALSERVICE_NAME} characters (is {}), leaving room for the node in each Service's name",
                q(name.get_ref()),
                name.get_ref().len()
            ),
        );
    }
    let mut f = Fields::new(table, what, name.span());
    let (namespace, body) = match kind {
        Kind::Workspace => {
            let (_, ns) = namespace_field(ctx, &mut f, file_ns, defaults::WORKSPACE_NAMESPACE);
            (ns, workspace(ctx, &mut f).map(SpecBody::Workspace))
        }
        Kind::ElasticWeb => {
            let (_, ns) = namespace_field(ctx, &mut f, file_ns, defaults::NAMESPACE);
            (ns, elasticweb(ctx, &mut f).map(SpecBody::ElasticWeb))
        }
        Kind::LocalService => {
            let (_, ns) = namespace_field(ctx, &mut f, file_ns, defaults::NAMESPACE);
            (ns, localservice(ctx, &mut f).map(SpecBody::LocalService))
        }
        Kind::Manifest => return None,
    };
    f.finish(ctx);
    let body = body?;
    (ctx.count() == errors_before).then(|| Found {
        kind,
        name: name.get_ref().to_string(),
        namespace: Some(namespace),
        at: ctx.loc(name.span().start),
        body,
    })
}

fn workspace(ctx: &mut FileCtx, f: &mut Fields) -> Option<Workspace> {
    let image = f.image(ctx);
    let port = f
        .port(ctx, "port", false)
        .unwrap_or_else(defaults::workspace_port);
    let cpu = f.quantity(ctx, "cpu", quantity::Unit::Cpu);
    let memory = f.quantity(ctx, "memory", quantity::Unit::Bytes);
    let storage = f.quantity(ctx, "storage", quantity::Unit::Bytes);
    let storage_class = f.string(ctx, "storage-class");
    if let Some(sc) = &storage_class
        && let Err(why) = names::dns1123_subdomain(sc.get_ref())
    {
        ctx.err(
            &sc.span(),
            format!("invalid `storage-class` {}: {why}", q(sc.get_ref())),
        );
    }
    let storage_class = storage_class.map(Spanned::into_inner);
    let access_mode = f
        .choice(ctx, "access-mode", &AccessMode::ALL)
        .unwrap_or_default();
    let mount_path = match f.string(ctx, "mount-path") {
        Some(p) if p.get_ref().len() > MAX_PATH => {
            ctx.err(
                &p.span(),
                format!(
                    "`mount-path` is {} bytes long; a path is at most {MAX_PATH}",
                    p.get_ref().len()
                ),
            );
            None
        }
        Some(p) if !p.get_ref().starts_with('/') => {
            ctx.err(
                &p.span(),
                format!(
                    "`mount-path` must be an absolute path, found {}",
                    q(p.get_ref())
                ),
            );
            None
        }
        Some(p) => Some(p.into_inner()),
        None => Some(defaults::mount_path()),
    };
    let state = f
        .choice(
            ctx,
            "state",
            &[
                ("running", WorkspaceState::Running),
                ("stopped", WorkspaceState::Stopped),
            ],
        )
        .unwrap_or_default();
    // Every field is read before any early return, so none is misreported as unknown.
    let adopt = f.boolean(ctx, "adopt").unwrap_or(false);
    Some(Workspace {
        namespace: None,
        image: image?.into_inner(),
        port,
        cpu,
        memory,
        storage,
        storage_class,
        access_mode,
        mount_path: mount_path?,
        state,
        adopt,
    })
}

fn elasticweb(ctx: &mut FileCtx, f: &mut Fields) -> Option<ElasticWeb> {
    let image = f.image(ctx);
    let port = f
        .int(
            ctx,
            "port",
            false,
            (30000, 32767),
            "is a NodePort and must be between 30000 and 32767",
        )
        .and_then(|n| u16::try_from(n).ok());
    let container_port = f
        .port(ctx, "container-port", false)
        .unwrap_or_else(defaults::container_port);
    let single = f.int(
        ctx,
        "single-pod-qps",
        true,
        (1, i64::MAX as i128),
        "must be at least 1",
    );
    let total = f.int(
        ctx,
        "total-qps",
        true,
        (0, i64::MAX as i128),
        "must be at least 0",
    );
    let cpu = f
        .quantity(ctx, "cpu", quantity::Unit::Cpu)
        .unwrap_or_else(defaults::elasticweb_cpu);
    let memory = f
        .quantity(ctx, "memory", quantity::Unit::Bytes)
        .unwrap_or_else(defaults::elasticweb_memory);
    let adopt = f.boolean(ctx, "adopt").unwrap_or(false);
    let web = ElasticWeb {
        namespace: None,
        image: image?.into_inner(),
        port,
        container_port,
        single_pod_qps: u64::try_from(single?).ok()?,
        total_qps: u64::try_from(total?).ok()?,
        cpu,
        memory,
        adopt,
    };
    if web.replicas() > i32::MAX as u64 {
        let span = f.get("total-qps").map(|v| v.span()).unwrap_or_default();
        ctx.err(
            &span,
            format!(
                "`total-qps` / `single-pod-qps` needs {} replicas, more than a Deployment can have",
                web.replicas()
            ),
        );
        return None;
    }
    Some(web)
}

fn localservice(ctx: &mut FileCtx, f: &mut Fields) -> Option<LocalService> {
    let header = f.header.clone();
    let selector = match f.labels(ctx, "selector", MetaMap::OwnLabels) {
        Some(s) if s.get_ref().is_empty() => {
            ctx.err(
                &s.span(),
                "`selector` must not be empty: it would select every Pod of the namespace",
            );
            None
        }
        Some(s) => Some(s.into_inner()),
        None => {
            if f.table.iter().all(|(k, _)| k.get_ref() != "selector") {
                ctx.err(
                    &header,
                    format!("{}: missing required field `selector`", f.what),
                );
            }
            None
        }
    };
    let node_selector = f
        .labels(ctx, "node-selector", MetaMap::Labels)
        .map(Spanned::into_inner)
        .unwrap_or_default();
    let type_ = f.choice(ctx, "type", &ServiceType::ALL).unwrap_or_default();
    let ports = match f.get("ports") {
        None => {
            f.missing(ctx, "ports");
            None
        }
        Some(v) => ports(ctx, &f.what, v),
    };
    let adopt = f.boolean(ctx, "adopt").unwrap_or(false);
    Some(LocalService {
        namespace: None,
        selector: selector?,
        node_selector,
        type_,
        ports: ports?,
        adopt,
    })
}

fn ports(ctx: &mut FileCtx, what: &str, v: &Value) -> Option<Vec<ServicePort>> {
    let DeValue::Array(items) = v.get_ref() else {
        ctx.err(
            &v.span(),
            format!(
                "`ports` must be an array of tables, found {}",
                type_name(v.get_ref())
            ),
        );
        return None;
    };
    if items.is_empty() {
        ctx.err(&v.span(), "`ports` must list at least one port");
        return None;
    }
    let errors_before = ctx.count();
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let DeValue::Table(t) = item.get_ref() else {
            ctx.err(
                &item.span(),
                format!(
                    "`ports[{i}]` must be a table, found {}",
                    type_name(item.get_ref())
                ),
            );
            continue;
        };
        let mut f = Fields::new(t, format!("{what} ports[{i}]"), item.span());
        let name = f.string(ctx, "name");
        if let Some(n) = &name
            && let Err(why) = names::dns1123_label(n.get_ref())
        {
            ctx.err(
                &n.span(),
                format!("invalid port name {}: {why}", q(n.get_ref())),
            );
        }
        let port = f.port(ctx, "port", true);
        let target_port = match f.get("target-port") {
            None => None,
            Some(tv) => match tv.get_ref() {
                DeValue::String(s) => match names::dns1123_label(s) {
                    Ok(()) if s.len() <= 15 => Some(TargetPort::Name(s.to_string())),
                    _ => {
                        ctx.err(&tv.span(), format!("invalid `target-port` name {}: must be a port name of at most 15 lowercase letters, digits and '-'", q(s)));
                        None
                    }
                },
                other => match integer(other) {
                    Some(Ok(n)) if (1..=65535).contains(&n) => {
                        u16::try_from(n).ok().map(TargetPort::Number)
                    }
                    Some(_) => {
                        let written = ctx.text.get(tv.span()).unwrap_or_default();
                        ctx.err(
                            &tv.span(),
                            format!(
                                "`target-port` must be a port between 1 and 65535 (is {})",
                                short(written)
                            ),
                        );
                        None
                    }
                    None => {
                        Fields::type_error(ctx, "target-port", "a port number or name", tv);
                        None
                    }
                },
            },
        };
        let protocol = f
            .choice(ctx, "protocol", &Protocol::ALL)
            .unwrap_or_default();
        f.finish(ctx);
        if let Some(port) = port {
            out.push(Spanned::new(
                item.span(),
                ServicePort {
                    name: name.map(Spanned::into_inner),
                    port,
                    target_port,
                    protocol,
                },
            ));
        }
    }
    if out.len() > 1 {
        let mut seen_names = BTreeMap::new();
        let mut seen_ports = BTreeMap::new();
        for p in &out {
            match &p.get_ref().name {
                None => ctx.err(
                    &p.span(),
                    "every port needs a `name` when a Service has several ports",
                ),
                Some(n) => {
                    if seen_names.insert(n.clone(), ()).is_some() {
                        ctx.err(&p.span(), format!("port name {n:?} is used twice"));
                    }
                }
            }
            let key = (p.get_ref().port, p.get_ref().protocol.as_str());
            if seen_ports.insert(key, ()).is_some() {
                ctx.err(
                    &p.span(),
                    format!("port {}/{} is listed twice", key.0, key.1),
                );
            }
        }
    }
    (ctx.count() == errors_before).then(|| out.into_iter().map(Spanned::into_inner).collect())
}

fn manifests(ctx: &mut FileCtx, v: &Value, file_ns: Option<&str>, found: &mut Vec<Found>) {
    let DeValue::Array(items) = v.get_ref() else {
        ctx.err(
            &v.span(),
            format!(
                "`manifest` must be an array of tables ([[manifest]]), found {}",
                type_name(v.get_ref())
            ),
        );
        return;
    };
    for item in items.iter() {
        if let Some(m) = manifest(ctx, item) {
            found.push(Found {
                kind: Kind::Manifest,
                name: String::new(),
                namespace: file_ns.map(str::to_string),
                at: ctx.loc(item.span().start),
                body: SpecBody::Manifest(m),
            });
        }
    }
}

fn manifest(ctx: &mut FileCtx, item: &Value) -> Option<Manifest> {
    let DeValue::Table(t) = item.get_ref() else {
        ctx.err(
            &item.span(),
            format!(
                "a `manifest` entry must be a table, found {}",
                type_name(item.get_ref())
            ),
        );
        return None;
    };
    let errors_before = ctx.count();
    let mut f = Fields::new(t, "manifest".to_string(), item.span());
    let api_version = f.req_string(ctx, "apiVersion");
    let kind = f.req_string(ctx, "kind");
    let mut name = None;
    let mut namespace = None;
    let mut meta_rest = BTreeMap::new();
    match f.get("metadata") {
        None => f.missing(ctx, "metadata.name"),
        Some(mv) => match mv.get_ref() {
            DeValue::Table(mt) => {
                for (k, val) in mt.iter() {
                    match (k.get_ref().as_ref(), val.get_ref()) {
                        ("name", DeValue::String(s)) => {
                            if let Err(why) = names::dns1123_subdomain(s) {
                                ctx.err(
                                    &val.span(),
                                    format!("invalid metadata.name {}: {why}", q(s)),
                                );
                            }
                            name = Some(s.to_string());
                        }
                        ("namespace", DeValue::String(s)) => {
                            if let Err(why) = names::dns1123_label(s) {
                                ctx.err(
                                    &val.span(),
                                    format!("invalid metadata.namespace {}: {why}", q(s)),
                                );
                            }
                            namespace = Some(s.to_string());
                        }
                        ("name" | "namespace", other) => ctx.err(
                            &val.span(),
                            format!(
                                "`metadata.{}` must be a string, found {}",
                                k.get_ref(),
                                type_name(other)
                            ),
                        ),
                        (map @ ("labels" | "annotations"), _) => {
                            let kind = if map == "labels" {
                                MetaMap::OwnLabels
                            } else {
                                MetaMap::OwnAnnotations
                            };
                            if let Some(m) = meta_map(ctx, &format!("metadata.{map}"), val, kind) {
                                meta_rest.insert(map.to_string(), serde_json::json!(m));
                            }
                        }
                        (other, _) => {
                            if let Some(j) = to_json(ctx, val) {
                                meta_rest.insert(other.to_string(), j);
                            }
                        }
                    }
                }
                if name.is_none() && mt.iter().all(|(k, _)| k.get_ref() != "name") {
                    ctx.err(
                        &mv.span(),
                        "manifest: missing required field `metadata.name`",
                    );
                }
            }
            other => ctx.err(
                &mv.span(),
                format!("`metadata` must be a table, found {}", type_name(other)),
            ),
        },
    }
    let mut rest = BTreeMap::new();
    for (k, val) in t.iter() {
        let key = k.get_ref().as_ref();
        if matches!(key, "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(j) = to_json(ctx, val) {
            rest.insert(key.to_string(), j);
        }
    }
    // Other keys are the object's own (spec, data, rules...): nothing is unknown here.
    let (api_version, kind, name) = (api_version?, kind?, name?);
    if api_version.get_ref().is_empty() || api_version.get_ref().split('/').count() > 2 {
        ctx.err(
            &api_version.span(),
            format!(
                "invalid apiVersion {}: expected VERSION or GROUP/VERSION",
                q(api_version.get_ref())
            ),
        );
    }
    if kind.get_ref().is_empty() || !kind.get_ref().chars().all(|c| c.is_ascii_alphanumeric()) {
        ctx.err(&kind.span(), format!("invalid kind {}", q(kind.get_ref())));
    }
    if ctx.count() != errors_before {
        return None;
    }
    let m = Manifest {
        api_version: api_version.into_inner(),
        kind: kind.into_inner(),
        metadata: ManifestMetadata {
            name,
            namespace,
            rest: meta_rest,
        },
        rest,
    };
    let size = serde_json::to_vec(&m.to_json()).map_or(usize::MAX, |v| v.len());
    if size > MAX_OBJECT_BYTES {
        ctx.err(
            &item.span(),
            format!(
                "manifest {}/{} is {size} bytes as JSON, more than the {} KiB the apiserver stores for one object",
                m.kind,
                m.metadata.name,
                MAX_OBJECT_BYTES >> 10
            ),
        );
        return None;
    }
    Some(m)
}

fn to_json(ctx: &mut FileCtx, v: &Value) -> Option<serde_json::Value> {
    use serde_json::Value as J;
    Some(match v.get_ref() {
        DeValue::String(s) => J::String(s.to_string()),
        DeValue::Boolean(b) => J::Bool(*b),
        DeValue::Datetime(d) => J::String(d.to_string()),
        DeValue::Integer(_) => match integer(v.get_ref()).and_then(|n| i64::try_from(n.ok()?).ok())
        {
            Some(n) => J::from(n),
            None => {
                ctx.err(
                    &v.span(),
                    "integer out of range for a Kubernetes object (64-bit)",
                );
                return None;
            }
        },
        DeValue::Float(x) => {
            let parsed = x.as_str().replace('_', "").parse::<f64>().ok();
            match parsed.and_then(serde_json::Number::from_f64) {
                Some(n) => J::Number(n),
                None => {
                    ctx.err(
                        &v.span(),
                        format!("float {} cannot be represented in JSON", x.as_str()),
                    );
                    return None;
                }
            }
        }
        DeValue::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items.iter() {
                out.push(to_json(ctx, item)?);
            }
            J::Array(out)
        }
        DeValue::Table(t) => {
            let mut out = serde_json::Map::new();
            for (k, item) in t.iter() {
                out.insert(k.get_ref().to_string(), to_json(ctx, item)?);
            }
            J::Object(out)
        }
    })
}
