//! Every verdict and status word the conference stores, spelled once. Serde writes each variant
//! as exactly today's word (`"kept"`, `"no_change"`, `"budget_stop"`), so a value serialised
//! from these enums is byte for byte what older releases wrote.

/// A word enum's stored form: each variant is one fixed word.
pub trait StoredWord: Copy + 'static {
    fn as_str(self) -> &'static str;
    fn parse(word: &str) -> Option<Self>;
}

/// A stored word as read: one this release knows, or one it does not (written by a newer
/// release, or by hand), kept as written so that it is shown and written back unchanged. Serde
/// reads and writes the bare word, so a record's bytes do not change.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Word<T> {
    Known(T),
    Other(String),
}

impl<T: StoredWord> Word<T> {
    /// The word as stored.
    pub fn as_str(&self) -> &str {
        match self {
            Word::Known(w) => w.as_str(),
            Word::Other(w) => w,
        }
    }

    /// The variant, when this release knows the word.
    pub fn known(&self) -> Option<T> {
        match self {
            Word::Known(w) => Some(*w),
            Word::Other(_) => None,
        }
    }

    /// No word yet (stored as the empty string).
    pub fn unset() -> Word<T> {
        Word::Other(String::new())
    }

    pub fn is_unset(&self) -> bool {
        matches!(self, Word::Other(w) if w.is_empty())
    }

    /// Reads a stored word.
    pub fn read(word: &str) -> Word<T> {
        match T::parse(word) {
            Some(w) => Word::Known(w),
            None => Word::Other(word.to_string()),
        }
    }
}

impl<T: StoredWord> From<T> for Word<T> {
    fn from(word: T) -> Word<T> {
        Word::Known(word)
    }
}

impl<T: StoredWord> From<&str> for Word<T> {
    fn from(word: &str) -> Word<T> {
        Word::read(word)
    }
}

impl<T: StoredWord + PartialEq> PartialEq<T> for Word<T> {
    fn eq(&self, other: &T) -> bool {
        self.known() == Some(*other)
    }
}

impl<T: StoredWord> PartialEq<str> for Word<T> {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl<T: StoredWord> PartialEq<&str> for Word<T> {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl<T: StoredWord> std::fmt::Display for Word<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl<T: StoredWord> serde::Serialize for Word<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de, T: StoredWord> serde::Deserialize<'de> for Word<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Word<T>, D::Error> {
        let word = String::deserialize(d)?;
        Ok(Word::read(&word))
    }
}

/// Defines a word enum: variants with their stored word, `as_str`, `parse`, `ALL`, `Display`,
/// serde as the word, and comparisons with `str` and `String` (both ways).
macro_rules! words {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $word:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $word)] $variant,)+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The stored word.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }

            /// The variant a stored word names (None for a word this release does not know).
            pub fn parse(word: &str) -> Option<$name> {
                match word {
                    $($word => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl StoredWord for $name {
            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }
            fn parse(word: &str) -> Option<$name> {
                $name::parse(word)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                self.as_str()
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.as_str()
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.as_str()
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                self == other.as_str()
            }
        }

        impl From<$name> for String {
            fn from(word: $name) -> String {
                word.as_str().to_string()
            }
        }
    };
}

words! {
    /// What became of one attempt (`researcher.iteration`'s `status`, the note's `verdict`).
    Verdict {
        /// Measured strictly better than the researcher's best (and passed the guard).
        Kept = "kept",
        /// Measured, not better: reverted.
        Reverted = "reverted",
        /// The agent or the evaluation failed, or printed no readable metric.
        Crashed = "crashed",
        /// The agent or the evaluation ran past its timeout.
        Timeout = "timeout",
        /// Changed a frozen, forbidden or shared path, or failed the guard: never kept.
        Rejected = "rejected",
        /// The agent changed nothing.
        NoChange = "no_change",
        /// Stopped early (`prune: on`): an intermediate reading fell behind the researcher's
        /// best's curve by more than the noise margin. Not a measurement of the tree.
        Pruned = "pruned",
    }
}

words! {
    /// The peer review's verdict on a researcher's round-best finding.
    ReviewVerdict {
        /// The gain reproduces beyond the tolerance, consistently: it may go on best.
        Validated = "validated",
        /// Within the noise, inconsistent, or the hold-out disagrees: not merged.
        Challenged = "challenged",
        /// No gain, a crash, or a diff touching a frozen or forbidden path.
        Overturned = "overturned",
    }
}

words! {
    /// What knowledge transfer did with a validated finding (`transfer.pick`'s `result`).
    PickResult {
        /// On best: the combined best improved.
        Merged = "merged",
        /// Left out: not better, crashed, failed the guard, or nothing left to add.
        Dropped = "dropped",
    }
}

words! {
    /// How one evaluation ended (`EvalResult::status`).
    EvalStatus {
        /// It ran and printed the metric.
        Ok = "ok",
        /// It failed or printed no readable metric.
        Crashed = "crashed",
        /// It ran past its timeout.
        Timeout = "timeout",
        /// The conference was stopped while it ran: nothing is recorded.
        Interrupted = "interrupted",
        /// Stopped early by pruning: no metric, and never cached.
        Pruned = "pruned",
    }
}

impl EvalStatus {
    /// Whether an evaluation that ended so measured its tree, and is kept in the evaluation
    /// cache (the status parsed from a record; `None`, a word this version does not know: no).
    pub fn is_cached(status: &str) -> bool {
        matches!(
            Self::parse(status),
            Some(Self::Ok | Self::Crashed | Self::Timeout)
        )
    }
}

words! {
    /// Why a conference ended (`state.json`'s `final_status`, the final report's status).
    FinalStatus {
        /// The target was reached, the metric plateaued, or the scores are high enough.
        Converged = "converged",
        /// A budget (rounds, iterations, time, tokens, cost) ran out.
        BudgetStop = "budget_stop",
        /// Every researcher was stalled for `Stall rounds` consecutive rounds.
        Stalled = "stalled",
    }
}

words! {
    /// Where a conference stands (`state.json`'s `status`).
    RunStatus {
        Running = "running",
        Paused = "paused",
        Completed = "completed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stored words, pinned: changing one breaks every existing conference.
    #[test]
    fn every_word_is_todays_stored_word() {
        fn check<
            T: serde::Serialize + for<'a> serde::Deserialize<'a> + PartialEq + std::fmt::Debug + Copy,
        >(
            all: &[T],
            words: &[&str],
            as_str: fn(T) -> &'static str,
            parse: fn(&str) -> Option<T>,
        ) {
            assert_eq!(all.len(), words.len());
            for (&v, &w) in all.iter().zip(words) {
                assert_eq!(as_str(v), w);
                assert_eq!(parse(w), Some(v));
                assert_eq!(serde_json::to_string(&v).unwrap(), format!("\"{w}\""));
                assert_eq!(serde_json::from_str::<T>(&format!("\"{w}\"")).unwrap(), v);
            }
            assert_eq!(parse("Kept "), None);
            assert_eq!(parse(""), None);
        }
        check(
            Verdict::ALL,
            &[
                "kept",
                "reverted",
                "crashed",
                "timeout",
                "rejected",
                "no_change",
                "pruned",
            ],
            Verdict::as_str,
            Verdict::parse,
        );
        check(
            ReviewVerdict::ALL,
            &["validated", "challenged", "overturned"],
            ReviewVerdict::as_str,
            ReviewVerdict::parse,
        );
        check(
            PickResult::ALL,
            &["merged", "dropped"],
            PickResult::as_str,
            PickResult::parse,
        );
        check(
            EvalStatus::ALL,
            &["ok", "crashed", "timeout", "interrupted", "pruned"],
            EvalStatus::as_str,
            EvalStatus::parse,
        );
        check(
            FinalStatus::ALL,
            &["converged", "budget_stop", "stalled"],
            FinalStatus::as_str,
            FinalStatus::parse,
        );
        check(
            RunStatus::ALL,
            &["running", "paused", "completed"],
            RunStatus::as_str,
            RunStatus::parse,
        );
    }

    #[test]
    fn words_compare_with_stored_strings_both_ways() {
        let stored = String::from("kept");
        assert!(stored == Verdict::Kept);
        assert!(Verdict::Kept == stored);
        assert!(stored != Verdict::Reverted);
        assert!("no_change" == Verdict::NoChange);
        assert_eq!(format!("{:<9}|", Verdict::Kept), "kept     |");
        assert_eq!(String::from(FinalStatus::BudgetStop), "budget_stop");
    }

    /// A word a newer release wrote is read, shown and written back as it was.
    #[test]
    fn an_unknown_word_stays_readable_and_is_written_back_unchanged() {
        let word: Word<Verdict> = serde_json::from_str("\"quarantined\"").unwrap();
        assert_eq!(word, Word::Other("quarantined".into()));
        assert_eq!(word.known(), None);
        assert!(word != Verdict::Kept);
        assert_eq!(format!("{word}"), "quarantined");
        assert_eq!(serde_json::to_string(&word).unwrap(), "\"quarantined\"");
        let kept: Word<Verdict> = serde_json::from_str("\"kept\"").unwrap();
        assert_eq!(kept, Word::Known(Verdict::Kept));
        assert!(kept == Verdict::Kept && kept == "kept");
        assert_eq!(serde_json::to_string(&kept).unwrap(), "\"kept\"");
        let record = r#"{"round":1,"researcher":"A","iteration":1,"commit":"","tree":"","metric":null,"delta":null,"verdict":"quarantined","description":"d","timestamp":"t"}"#;
        let a: crate::model::AttemptRecord = serde_json::from_str(record).unwrap();
        assert_eq!(a.verdict.as_str(), "quarantined");
        assert!(Word::<ReviewVerdict>::unset().is_unset());
    }
}
