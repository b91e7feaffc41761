//! A commit id as the protocol stores it: the full hexadecimal id (40 digits for SHA-1, 64 for
//! SHA-256), never an abbreviation or a ref name. Events, `state.json`, the state tree's records
//! and the notes carry these; reading one back checks it, so an abbreviated or crafted value is
//! refused where it is read (a record's field by its name: [`read_field`]).

use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CommitId(String);

/// A value that is not a full commit id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotACommitId(pub String);

impl fmt::Display for NotACommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` is not a full commit id", self.0)
    }
}

impl std::error::Error for NotACommitId {}

/// How many digits of a commit id people read (in status, the log, the reports).
const SHORT: usize = 10;

/// The first digits of a full commit id, as people read it (all of it when shorter).
pub fn short_id(full: &str) -> &str {
    full.get(..SHORT).unwrap_or(full)
}

/// [`short_id`] of `oid`.
pub fn short_oid(oid: git2::Oid) -> String {
    short_id(&oid.to_string()).to_string()
}

/// The object id a git command printed on a line of its own (`git rev-parse`).
pub fn printed_id(printed: &str) -> anyhow::Result<git2::Oid> {
    git2::Oid::from_str(printed.trim())
        .map_err(|_| anyhow::anyhow!("git printed `{}`, not an object id", printed.trim()))
}

impl CommitId {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn oid(&self) -> git2::Oid {
        git2::Oid::from_str(&self.0).expect("a checked commit id")
    }

    /// `text` as the commit id field `field` of a record; a value that is not a full id is
    /// refused naming the field (`commit is `abc`, not a full commit id`).
    pub fn of_field(text: String, field: &str) -> Result<CommitId, String> {
        CommitId::try_from(text).map_err(|NotACommitId(text)| {
            format!("{field} is `{}`, not a full commit id", text.escape_debug())
        })
    }
}

/// Reads the commit id field `field` of a record with [`CommitId::of_field`], so that a parse
/// error names the field, which a bare `CommitId` field would not (`records.rs` uses it).
pub fn read_field<'de, D: Deserializer<'de>>(d: D, field: &str) -> Result<CommitId, D::Error> {
    CommitId::of_field(String::deserialize(d)?, field).map_err(D::Error::custom)
}

/// [`read_field`] of a field stored as `""` when there is no commit (an imported attempt): the
/// empty string reads as `None`, which [`write_or_empty`] writes back as `""`.
pub fn read_field_or_empty<'de, D: Deserializer<'de>>(
    d: D,
    field: &str,
) -> Result<Option<CommitId>, D::Error> {
    let text = String::deserialize(d)?;
    if text.is_empty() {
        return Ok(None);
    }
    CommitId::of_field(text, field)
        .map(Some)
        .map_err(D::Error::custom)
}

/// Writes an optional commit id as its field was always stored: the id, or `""` for none.
pub fn write_or_empty<S: Serializer>(id: &Option<CommitId>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(id.as_deref().unwrap_or(""))
}

impl TryFrom<String> for CommitId {
    type Error = NotACommitId;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        let full = matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit());
        if full && !s.bytes().any(|b| b.is_ascii_uppercase()) {
            Ok(CommitId(s))
        } else {
            Err(NotACommitId(s))
        }
    }
}

impl TryFrom<&str> for CommitId {
    type Error = NotACommitId;

    fn try_from(s: &str) -> Result<Self, Self::Error> {
        CommitId::try_from(s.to_string())
    }
}

impl From<git2::Oid> for CommitId {
    fn from(oid: git2::Oid) -> Self {
        CommitId(oid.to_string())
    }
}

impl From<CommitId> for String {
    fn from(id: CommitId) -> String {
        id.0
    }
}

/// A commit id reads as the hexadecimal text it holds wherever text is wanted (a ref's value, a
/// message, a comparison with an id git printed).
impl std::ops::Deref for CommitId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_full_lowercase_hex_ids_are_commit_ids() {
        let sha1 = "0123456789abcdef0123456789abcdef01234567";
        let sha256 = "a".repeat(64);
        for good in [sha1, sha256.as_str()] {
            assert_eq!(CommitId::try_from(good).unwrap().as_str(), good);
        }
        for bad in [
            "",
            "0123456789",
            "main",
            &sha1.to_uppercase(),
            &format!("{sha1}0"),
            "../x",
        ] {
            assert!(CommitId::try_from(bad).is_err(), "{bad}");
        }
        let read: Result<CommitId, _> = serde_json::from_str("\"0123abc\"");
        assert!(read.is_err(), "an abbreviated id is refused when read");
        let id = CommitId::try_from(sha1).unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{sha1}\""));
    }
}
