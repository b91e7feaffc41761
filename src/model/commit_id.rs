//! A commit id as the protocol stores it: the full hexadecimal id (40 digits for SHA-1, 64 for
//! SHA-256), never an abbreviation or a ref name. Events carry these; reading one back from a
//! log checks it, so an abbreviated or crafted value is refused where it is read.

use std::fmt;

use serde::{Deserialize, Serialize};

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

impl CommitId {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn oid(&self) -> git2::Oid {
        git2::Oid::from_str(&self.0).expect("a checked commit id")
    }
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
