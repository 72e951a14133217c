//! The status as the API serves it: the newest document the daemon wrote, kept as its
//! JSON text, made in a buffer sized by the last one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::report::status::StatusFile;

/// The newest status, as the daemon last wrote it, kept as compact JSON text only: the
/// document as values (a map per spec's figures) was several times its size, held for
/// as long as the daemon runs.
#[derive(Debug, PartialEq, Eq)]
pub struct Published {
    json: String,
}

impl Published {
    pub fn new(doc: &StatusFile) -> Published {
        Published::sized(doc, 0)
    }

    /// `doc`, made in a buffer of about `hint` bytes (the last status's length) and kept
    /// in no more than it needs. Grown by doubling from nothing, a 10,000-spec status
    /// (7 MB) passed through buffers of 8 and 16 MiB at once and was kept in the 16. A
    /// status that outgrows the hint is measured first and made in a buffer of its size:
    /// grown from the hint, the first after a 10,000-spec tree's first sync stood in
    /// 11 MiB of buffers at the daemon's peak (bench/results/2026-11-30-scale-noop-window.md).
    pub(crate) fn sized(doc: &impl Serialize, hint: usize) -> Published {
        let mut buf = Vec::with_capacity(hint + hint / 8);
        // Strings, numbers and maps with string keys: serialising fails only when the
        // buffer is full, and serde_json writes UTF-8.
        if serde_json::to_writer(Bounded(&mut buf), doc).is_err() {
            drop(buf);
            let mut length = Length(0);
            let _ = serde_json::to_writer(&mut length, doc);
            buf = Vec::with_capacity(length.0);
            if serde_json::to_writer(&mut buf, doc).is_err() {
                buf.clear();
            }
        }
        let mut json = String::from_utf8(buf).unwrap_or_default();
        json.shrink_to_fit();
        Published { json }
    }

    pub fn json(&self) -> &str {
        &self.json
    }

    /// One spec's entry, by id.
    pub fn spec(&self, id: &str) -> Option<Value> {
        self.specs().into_iter().find(|s| s["id"] == id)
    }

    /// Every spec's entry.
    pub fn specs(&self) -> Vec<Value> {
        #[derive(Deserialize)]
        struct Specs {
            specs: Vec<Value>,
        }
        serde_json::from_str::<Specs>(&self.json)
            .map(|d| d.specs)
            .unwrap_or_default()
    }
}

/// Writes into a buffer until its capacity is reached, then refuses: the status did not
/// fit the room its last length gave it.
struct Bounded<'a>(&'a mut Vec<u8>);

impl std::io::Write for Bounded<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if bytes.len() > self.0.capacity() - self.0.len() {
            return Err(std::io::Error::other("the status outgrew its buffer"));
        }
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Counts what is written to it.
struct Length(usize);

impl std::io::Write for Length {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_status_is_the_same_text_whatever_room_its_hint_gave_it() {
        let doc = json!({"specs": (0..500).map(|i| json!({"id": format!("s{i}"), "message": "a \"quoted\" line\n"})).collect::<Vec<_>>()});
        let whole = serde_json::to_string(&doc).unwrap();
        for hint in [
            0,
            10,
            whole.len() / 2,
            whole.len() - 1,
            whole.len(),
            whole.len() * 4,
        ] {
            let made = Published::sized(&doc, hint);
            assert_eq!(made.json(), whole, "hint {hint}");
            assert_eq!(
                made.json.capacity(),
                whole.len(),
                "hint {hint}: kept in no more than it needs"
            );
        }
    }
}
