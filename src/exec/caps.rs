//! Size caps on what runs print and on what is stored about them.
//!
//! An agent in a loop or an evaluation printing every step can write gigabytes (four runs once
//! left 458 MB of logs), and a single enormous line would end up in a reason, an event and a
//! note. Logs are cut while the run goes on, keeping their tail (the end of an output says why
//! it ended) under a line saying how much was cut; stored texts keep their head and tail.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Bytes a run's stdout or stderr log keeps on disk, at most (plus the line saying what was
/// cut, and what the run writes between two checks).
pub const LOG_CAP: u64 = 8 << 20;
/// Bytes of a reason or description stored in an event or a note, at most (about).
pub const TEXT_CAP: usize = 4096;

/// Cuts the log at `path` to its last `cap / 2` bytes when it holds more than `cap`, under a
/// line naming `already + cut` bytes cut. Returns the bytes cut this time. The log must be
/// written in append mode, so that the writer goes on at the new end.
pub fn cap_log(path: &Path, cap: u64, already: u64) -> std::io::Result<u64> {
    let size = std::fs::metadata(path)?.len();
    if size <= cap {
        return Ok(0);
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let keep = cap / 2;
    file.seek(SeekFrom::Start(size - keep))?;
    let mut tail = Vec::with_capacity(keep as usize);
    Read::by_ref(&mut file).take(keep).read_to_end(&mut tail)?;
    // Start at a line boundary when one is near.
    if let Some(nl) = tail.iter().take(4096).position(|b| *b == b'\n') {
        tail.drain(..=nl);
    }
    let cut = size - tail.len() as u64;
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    let header = format!(
        "[git-conference: {} bytes of earlier output cut; the last {} kept]\n",
        already + cut,
        tail.len()
    );
    file.write_all(header.as_bytes())?;
    file.write_all(&tail)?;
    Ok(cut)
}

/// `text` when it is at most [`TEXT_CAP`] bytes, else its head and tail around a note of how
/// much was cut.
pub fn shorten(text: &str) -> String {
    if text.len() <= TEXT_CAP {
        return text.to_string();
    }
    let half = TEXT_CAP / 2;
    let head_end = floor_char(text, half);
    let tail_start = ceil_char(text, text.len() - half);
    format!(
        "{} […{} bytes cut…] {}",
        &text[..head_end],
        tail_start - head_end,
        &text[tail_start..]
    )
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_keep_their_tail_and_say_what_was_cut() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("out");
        let text: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, &text).unwrap();
        assert_eq!(cap_log(&path, 1 << 20, 0).unwrap(), 0, "small logs stay");
        let cut = cap_log(&path, 4000, 0).unwrap();
        let kept = std::fs::read_to_string(&path).unwrap();
        assert!(kept.ends_with("line 1999\n"), "{kept}");
        assert!(kept.starts_with(&format!("[git-conference: {cut} bytes")));
        assert!(kept.lines().nth(1).unwrap().starts_with("line "));
        assert!(kept.len() < 2100, "{}", kept.len());
        assert_eq!(
            cut as usize,
            text.len() - (kept.len() - kept.find('\n').unwrap() - 1)
        );
    }

    #[test]
    fn long_texts_keep_head_and_tail() {
        assert_eq!(shorten("short"), "short");
        let long = format!("start{}é{}end", "x".repeat(5000), "y".repeat(5000));
        let s = shorten(&long);
        assert!(s.starts_with("startx") && s.ends_with("yend"), "{s}");
        assert!(s.len() < TEXT_CAP + 100 && s.contains("bytes cut"));
    }
}
