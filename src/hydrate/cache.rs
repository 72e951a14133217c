//! Rendered output by what the render read: a key is a digest of the inputs (the files of
//! its closure, the tool, its version and arguments, the settings it took), so an
//! unchanged application is never rendered twice, and a commit that touches one
//! application renders that one only. With a directory, successful renders are also kept
//! on disk, so a daemon that restarts runs no tool for what it rendered before.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use super::tool::ToolError;

/// A digest of a render's inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key([u8; 32]);

/// Builds a [`Key`]: every part is framed by its length, so no two sequences of parts
/// give the same bytes.
#[derive(Default)]
pub struct KeyBuilder(Sha256);

impl Key {
    fn file_name(&self) -> String {
        hex(&self.0)
    }
}

impl KeyBuilder {
    pub fn new(what: &str) -> Self {
        let mut b = KeyBuilder(Sha256::new());
        b.part(what.as_bytes());
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
/// once it is done ([`Cache::retain_used`]), so the cache holds one tree's output, not
/// every revision's.
#[derive(Debug, Default)]
pub struct Cache {
    entries: Mutex<HashMap<Key, (Entry, bool)>>,
    /// Where successful renders are kept across restarts. Errors stay in memory only: a
    /// timeout or a registry that was away must be tried again by the next process.
    dir: Option<PathBuf>,
}

impl Cache {
    pub fn new(dir: Option<PathBuf>) -> Self {
        Cache {
            entries: Mutex::default(),
            dir,
        }
    }

    pub fn get(&self, key: &Key) -> Option<Entry> {
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((e, used)) = map.get_mut(key) {
            *used = true;
            return Some(e.clone());
        }
        let bytes = std::fs::read(self.dir.as_ref()?.join(key.file_name())).ok()?;
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
    /// the directory holds one tree's renders, not every revision's.
    pub fn retain_used(&self) {
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, (_, used)| std::mem::take(used));
        let Some(dir) = &self.dir else { return };
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
}
