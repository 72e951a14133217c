//! Rendered output by what the render read: a key is a digest of the inputs (the files of
//! its closure, the tool, its version and arguments, the settings it took), so an
//! unchanged application is never rendered twice, and a commit that touches one
//! application renders that one only. With a directory, successful renders are also kept
//! on disk, so a daemon that restarts runs no tool for what it rendered before, and a
//! command line run (`validate`, `render`, `diff`, `apply`) runs none for what an earlier
//! one rendered: the CLI's directory is shared by every tree it reads, and bounded in
//! bytes, the least recently used renders going first.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use super::error::ToolError;

/// A digest of a render's inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key([u8; 32]);

/// Builds a [`Key`]: the word of the run it keys first (its own per kind of run:
/// "kustomize", "flux-kustomization", "helm", "helm-post-render", "argo-cmp",
/// "jsonnet"), then every part framed by its length, so no two sequences of parts give
/// the same bytes.
#[derive(Default)]
pub struct KeyBuilder(Sha256);

impl Key {
    fn file_name(&self) -> String {
        hex(&self.0)
    }

    /// The digest, to key a render made of another's output.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl KeyBuilder {
    pub fn new(run: &'static str) -> Self {
        let mut b = KeyBuilder(Sha256::new());
        b.part(run.as_bytes());
        b
    }

    pub fn part(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    pub fn finish(self) -> Key {
        Key(self.0.finalize().into())
    }
}

/// What a render gave: its output, or its error (an unchanged broken input fails the
/// same way without running the tool again).
pub type Entry = Result<Arc<Vec<u8>>, ToolError>;

/// The renders of the trees seen last. Entries not used by the latest tree are dropped
/// from memory once it is done ([`Cache::retain_used`]), so the cache holds one tree's
/// output, not every revision's.
#[derive(Debug, Default)]
pub struct Cache {
    entries: Mutex<HashMap<Key, (Entry, bool)>>,
    /// Where successful renders are kept across restarts. Errors stay in memory only: a
    /// timeout or a registry that was away must be tried again by the next process.
    dir: Option<PathBuf>,
    /// The directory is shared by every tree read (the CLI's): it keeps what any of them
    /// rendered, up to this many bytes. Without it the directory holds the latest tree's
    /// renders only (a daemon's, which follows one tree).
    shared_max: Option<u64>,
}

impl Cache {
    pub fn new(dir: Option<PathBuf>) -> Self {
        Cache {
            entries: Mutex::default(),
            dir,
            shared_max: None,
        }
    }

    /// A cache whose directory every tree shares, bounded to `max_bytes` on disk.
    pub fn shared(dir: PathBuf, max_bytes: u64) -> Self {
        Cache {
            entries: Mutex::default(),
            dir: Some(dir),
            shared_max: Some(max_bytes),
        }
    }

    pub fn get(&self, key: &Key) -> Option<Entry> {
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((e, used)) = map.get_mut(key) {
            *used = true;
            return Some(e.clone());
        }
        let path = self.dir.as_ref()?.join(key.file_name());
        let bytes = std::fs::read(&path).ok()?;
        if self.shared_max.is_some() {
            // Its use, as the bound counts it: the least recently used go first.
            touch(&path);
        }
        let entry: Entry = Ok(Arc::new(bytes));
        map.insert(*key, (entry.clone(), true));
        Some(entry)
    }

    pub fn put(&self, key: Key, entry: Entry) {
        if let (Some(dir), Ok(bytes)) = (&self.dir, &entry) {
            // Best effort: a cache that cannot be written costs a run after a restart.
            let _ = write_atomically(dir, &key.file_name(), bytes);
        }
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(key, (entry, true));
    }

    /// Forgets what the last tree did not use, and starts counting anew; on disk too, so
    /// the directory holds one tree's renders, not every revision's (or, shared, no more
    /// than its bound).
    pub(crate) fn retain_used(&self) {
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, (_, used)| std::mem::take(used));
        let Some(dir) = &self.dir else { return };
        if let Some(max) = self.shared_max {
            drop(map);
            trim(dir, max);
            return;
        }
        let kept: std::collections::HashSet<String> = map.keys().map(Key::file_name).collect();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !kept.contains(&name) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    pub fn len(&self) -> usize {
        self.entries.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Lower-case hex, as digests are shown and named on disk.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Marks a render on disk as just used (its modification time).
fn touch(path: &std::path::Path) {
    if let Ok(f) = std::fs::File::options().append(true).open(path) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

/// Removes the least recently used renders in `dir` until it holds at most `max` bytes.
/// Best effort: another process may be writing or trimming the same directory, and a
/// render it removes is a run again, never a wrong answer.
fn trim(dir: &std::path::Path, max: u64) {
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            let used = meta.modified().ok()?;
            meta.is_file().then(|| (used, meta.len(), e.path()))
        })
        .collect();
    let mut total: u64 = files.iter().map(|(_, len, _)| len).sum();
    files.sort();
    for (_, len, path) in files {
        if total <= max {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total = total.saturating_sub(len);
        }
    }
}

fn write_atomically(dir: &std::path::Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::Builder::new().prefix(".put-").tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.persist(dir.join(name)).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_frame_their_parts_and_unused_entries_go() {
        let k = |parts: &[&str]| {
            let mut b = KeyBuilder::new("t");
            for p in parts {
                b.part(p.as_bytes());
            }
            b.finish()
        };
        assert_eq!(k(&["a", "b"]), k(&["a", "b"]));
        assert_ne!(k(&["ab", ""]), k(&["a", "b"]));
        let c = Cache::default();
        c.put(k(&["1"]), Ok(Arc::new(b"x".to_vec())));
        c.put(k(&["2"]), Err(ToolError::from("no".to_string())));
        c.retain_used();
        assert_eq!(c.len(), 2);
        assert!(c.get(&k(&["1"])).is_some());
        c.retain_used();
        assert_eq!(c.len(), 1, "the entry not used since is dropped");
    }

    #[test]
    fn renders_on_disk_outlive_the_process_and_errors_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let k = |s: &str| {
            let mut b = KeyBuilder::new("t");
            b.part(s.as_bytes());
            b.finish()
        };
        let first = Cache::new(Some(dir.path().to_path_buf()));
        first.put(k("ok"), Ok(Arc::new(b"rendered".to_vec())));
        first.put(k("bad"), Err(ToolError::from("timed out".to_string())));
        first.put(k("old"), Ok(Arc::new(b"old".to_vec())));
        drop(first);
        let second = Cache::new(Some(dir.path().to_path_buf()));
        assert_eq!(
            second.get(&k("ok")).unwrap().unwrap().as_slice(),
            b"rendered"
        );
        assert!(second.get(&k("bad")).is_none(), "an error is tried again");
        second.retain_used();
        let third = Cache::new(Some(dir.path().to_path_buf()));
        assert!(third.get(&k("ok")).is_some());
        assert!(
            third.get(&k("old")).is_none(),
            "what the tree no longer uses is gone"
        );
    }

    #[test]
    fn a_shared_directory_keeps_every_tree_s_renders_within_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let k = |s: &str| {
            let mut b = KeyBuilder::new("t");
            b.part(s.as_bytes());
            b.finish()
        };
        let kib = |n: usize| Ok(Arc::new(vec![b'x'; n * 1024]));
        let at = |key: &str| dir.path().join(k(key).file_name());
        let aged = |key: &str, secs: u64| {
            let f = std::fs::File::options().append(true).open(at(key)).unwrap();
            f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(secs))
                .unwrap();
        };
        // One tree renders a and b; another, read later by another process, c.
        let first = Cache::shared(dir.path().to_path_buf(), 10 * 1024);
        first.put(k("a"), kib(4));
        first.put(k("b"), kib(4));
        first.retain_used();
        aged("a", 300);
        aged("b", 200);
        let second = Cache::shared(dir.path().to_path_buf(), 10 * 1024);
        second.put(k("c"), kib(1));
        second.retain_used();
        assert!(
            at("a").is_file() && at("b").is_file(),
            "another tree's renders stay"
        );
        // A third uses a (now the most recent) and adds d: over the bound, b goes, the
        // least recently used.
        let third = Cache::shared(dir.path().to_path_buf(), 10 * 1024);
        assert!(third.get(&k("a")).is_some());
        third.put(k("d"), kib(4));
        third.retain_used();
        assert!(!at("b").exists(), "the least recently used went");
        assert!(at("a").is_file() && at("c").is_file() && at("d").is_file());
        let total: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.metadata().unwrap().len())
            .sum();
        assert!(total <= 10 * 1024, "{total}");
    }
}
