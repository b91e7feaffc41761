//! `git conference completion`: the bash script completes `git conference <TAB>` under git's own
//! bash completion (which calls `_git_conference`) and `git-conference <TAB>`, in a real bash.

use crate::common::TestRepo;

/// Git's bash completion as Debian installs it (bash-completion loads it for `git`).
const GIT_COMPLETION: &str = "/usr/share/bash-completion/completions/git";

/// What bash offers for `line` (its words split on spaces, the cursor at the end), through the
/// completion function `complete -p <first word>` names, once `setup` ran.
fn completions(repo: &TestRepo, setup: &str, line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split(' ').collect();
    let script = format!(
        "{setup}\n\
         source <(git-conference completion bash) || exit 9\n\
         COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}\n\
         COMP_WORDS=({words}); COMP_CWORD={cword}\n\
         func=$(complete -p {first} | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p')\n\
         \"$func\" {first} \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s|\\n' \"${{COMPREPLY[@]}}\"\n",
        words = words
            .iter()
            .map(|w| format!("'{w}'"))
            .collect::<Vec<_>>()
            .join(" "),
        cword = words.len() - 1,
        first = words[0],
    );
    let out = repo
        .command("bash")
        .args(["--norc", "--noprofile", "-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bash failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut found: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim_end_matches('|').to_string())
        .filter(|l| !l.is_empty())
        .collect();
    found.sort();
    found
}

#[test]
fn git_conference_tab_completes_through_gits_own_bash_completion() {
    let repo = TestRepo::new();
    if std::path::Path::new(GIT_COMPLETION).exists() {
        let git = format!("source {GIT_COMPLETION} || exit 8");
        assert_eq!(
            completions(&repo, &git, "git conference st"),
            ["start ", "status ", "steer ", "stop "]
        );
        assert_eq!(
            completions(&repo, &git, "git conference status --fo"),
            ["--format "]
        );
        let shells = completions(&repo, &git, "git conference completion ");
        for shell in ["bash ", "fish ", "zsh "] {
            assert!(shells.iter().any(|s| s == shell), "{shells:?}");
        }
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{GIT_COMPLETION} is missing: install bash-completion's git completion (Debian's git package ships it)"
        );
    }
    assert_eq!(
        completions(&repo, "", "git-conference st"),
        ["start", "status", "steer", "stop"]
    );
}

#[test]
fn zsh_and_fish_scripts_name_every_command() {
    let repo = TestRepo::new();
    for shell in ["zsh", "fish", "bash"] {
        let run = repo.conference(&["completion", shell]).ok();
        for command in ["steer", "answer", "stop", "approve", "status"] {
            assert!(run.stdout.contains(command), "{shell}: {command}");
        }
        assert!(!run.stdout.contains("watchdog"), "{shell}");
    }
    let bad = repo.conference(&["completion", "tcsh"]);
    assert_eq!(bad.code, 2);
}
