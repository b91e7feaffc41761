//! The layout the code keeps (docs/development.md): functions short enough to read at once,
//! files that hold one concern, and layers that hold — no module below the engine imports it.
//! These read the sources, so a change that breaks any of them fails here, with the places named.

use std::path::{Path, PathBuf};

const MAX_FUNCTION_LINES: usize = 100;

/// A file longer than this has grown past one concern: it becomes a folder (issue #44). Only a
/// module's tests, in a `tests.rs` beside it, may be longer.
const MAX_FILE_LINES: usize = 800;

/// The modules below `engine/`: none of them may name it.
const BELOW_THE_ENGINE: &[&str] = &[
    "clock.rs",
    "os",
    "model",
    "protocol",
    "render",
    "config",
    "store",
    "git",
    "exec",
    "launch",
    "agents",
    "researchers",
    "remote",
    "tracker",
    "hooks.rs",
    "lock.rs",
    "failpoint.rs",
    "ui.rs",
    "trust.rs",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    if dir.is_file() {
        return vec![dir.to_path_buf()];
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found
}

/// A line without its string literals and comments, for counting braces.
fn code_of(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_string => {
                chars.next();
            }
            '"' => in_string = !in_string,
            '/' if !in_string && chars.peek() == Some(&'/') => break,
            '\'' if !in_string => {
                // A char literal ('{', '\n'): skip it; a lifetime has no closing quote nearby.
                let rest: String = chars.clone().take(3).collect();
                if let Some(end) = rest.find('\'') {
                    for _ in 0..=end {
                        chars.next();
                    }
                }
            }
            _ if !in_string => out.push(c),
            _ => {}
        }
    }
    out
}

/// Functions of `text` longer than the limit, as (first line, name, lines); tests excluded.
fn long_functions(text: &str) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let Some(name) = fn_name(lines[i]) else {
            i += 1;
            continue;
        };
        let (mut depth, mut opened, mut end) = (0i64, false, i);
        for (j, line) in lines.iter().enumerate().skip(i) {
            let code = code_of(line);
            depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
            opened |= code.contains('{');
            end = j;
            if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                break;
            }
        }
        if end - i + 1 > MAX_FUNCTION_LINES {
            long.push((i + 1, name, end - i + 1));
        }
        i += 1;
    }
    long
}

fn fn_name(line: &str) -> Option<String> {
    let code = code_of(line);
    let rest = code.trim_start();
    let rest = rest
        .strip_prefix("pub(crate) ")
        .or_else(|| rest.strip_prefix("pub(super) "))
        .or_else(|| rest.strip_prefix("pub "))
        .unwrap_or(rest);
    let rest = rest.strip_prefix("async ").unwrap_or(rest);
    let rest = rest.strip_prefix("const ").unwrap_or(rest);
    let rest = rest.strip_prefix("fn ")?;
    Some(rest.split(['(', '<']).next()?.trim().to_string())
}

#[test]
fn no_function_in_src_is_over_100_lines() {
    let mut long = Vec::new();
    for file in rust_files(&src()) {
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue; // a module's tests, moved beside it (as after its `#[cfg(test)]`)
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, name, count) in long_functions(&text) {
            let file = file.strip_prefix(src()).unwrap().display();
            long.push(format!("src/{file}:{line} {name} ({count} lines)"));
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn no_file_in_src_is_over_800_lines() {
    let mut long = Vec::new();
    for file in rust_files(&src()) {
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        if lines > MAX_FILE_LINES {
            let file = file.strip_prefix(src()).unwrap().display();
            long.push(format!("src/{file} ({lines} lines)"));
        }
    }
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines (make a folder; tests may go to a tests.rs):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_checker_finds_a_long_function() {
    let body = "    let x = 1;\n".repeat(MAX_FUNCTION_LINES);
    let text = format!("fn short() {{\n}}\n\npub async fn long(a: &str) -> u8 {{\n{body}}}\n");
    assert_eq!(
        long_functions(&text),
        [(4, "long".to_string(), MAX_FUNCTION_LINES + 2)]
    );
}

#[test]
fn no_module_below_the_engine_imports_it() {
    let mut found = Vec::new();
    for below in BELOW_THE_ENGINE {
        for file in rust_files(&src().join(below)) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                if code_of(line).contains("crate::engine") {
                    let file = file.strip_prefix(src()).unwrap().display();
                    found.push(format!("src/{file}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "lower modules that import the engine:\n{}",
        found.join("\n")
    );
}

/// The floors of the layout in docs/development.md, every one (not only the engine's): no import runs back up
/// to a higher layer, the engine's phases import none of each other, `cli/` reaches no store,
/// git or os module, no circle of more than two engine files. The floor table and the import
/// graph are `bench/import_graph.py`'s (one place, also what the closing notes count with).
#[test]
fn every_import_goes_down_a_floor() {
    let script = src().join("../bench/import_graph.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args(["--check", "--edges"])
        .output()
        .expect("python3 runs bench/import_graph.py (install python3)");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
