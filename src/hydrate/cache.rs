//! Rendered output by what the render read: a key is a digest of the inputs (the files of
//! its closure, the tool, its version and arguments, the settings it took), so an
//! unchanged application is never rendered twice, and a commit that touches one
//! application renders that one only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

/// A digest of a render's inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key([u8; 32]);

/// Builds a [`Key`]: every part is framed by its length, so no two sequences of parts
/// give the same bytes.
#[derive(Default)]
pub struct KeyBuilder(Sha256);

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
pub type Entry = Result<Arc<Vec<u8>>, String>;

/// The renders of the trees seen last. Entries not used by the latest tree are dropped
/// once it is done ([`Cache::retain_used`]), so the cache holds one tree's output, not
/// every revision's.
#[derive(Debug, Default)]
pub struct Cache {
    entries: Mutex<HashMap<Key, (Entry, bool)>>,
}

impl Cache {
    pub fn get(&self, key: &Key) -> Option<Entry> {
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        map.get_mut(key).map(|(e, used)| {
            *used = true;
            e.clone()
        })
    }

    pub fn put(&self, key: Key, entry: Entry) {
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(key, (entry, true));
    }

    /// Forgets what the last tree did not use, and starts counting anew.
    pub fn retain_used(&self) {
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, (_, used)| std::mem::take(used));
    }

    pub fn len(&self) -> usize {
        self.entries.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
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
        c.put(k(&["2"]), Err("no".into()));
        c.retain_used();
        assert_eq!(c.len(), 2);
        assert!(c.get(&k(&["1"])).is_some());
        c.retain_used();
        assert_eq!(c.len(), 1, "the entry not used since is dropped");
    }
}
