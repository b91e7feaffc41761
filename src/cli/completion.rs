//! `completion bash|zsh|fish`: the shell completion script, generated from the same definitions
//! as `-h` (clap_complete). Under git's own bash completion, `git conference <TAB>` calls
//! `_git_conference`, which the bash script defines on top of clap's `_gitconference`.

use anyhow::Result;
use clap::{Args, CommandFactory, ValueEnum};

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// Print the shell completion script for bash, zsh or fish.
///
/// bash: `git conference completion bash > ~/.local/share/bash-completion/completions/git-conference`
/// (then both `git conference <TAB>`, through git's own completion, and `git-conference <TAB>`
/// complete). zsh: `git conference completion zsh > ~/.zfunc/_git-conference` with
/// `fpath+=~/.zfunc` before `compinit`. fish: `git conference completion fish >
/// ~/.config/fish/completions/git-conference.fish`.
#[derive(Args, Debug)]
pub struct CompletionArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The name the bash script is generated for (see `run`).
const BASH_NAME: &str = "gitconference";

/// The bash function git's completion calls for `git conference …`: it hands clap's function
/// the words as if `git-conference` had been typed, and adds the space git's `nospace`
/// completion leaves out.
const GIT_BASH_BRIDGE: &str = r#"
# `git conference <TAB>`: git's bash completion calls _git_conference.
_git_conference() {
    local i start=-1
    for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
        if [[ "${COMP_WORDS[i]}" == conference ]]; then start=$i; break; fi
    done
    [[ $start -lt 0 || $COMP_CWORD -le $start ]] && return
    local -a words_after=("${COMP_WORDS[@]:start+1}")
    local cword_after=$((COMP_CWORD - start))
    local -a COMP_WORDS=(git-conference "${words_after[@]}")
    local COMP_CWORD=$cword_after
    local COMP_LINE="${COMP_WORDS[*]}"
    local COMP_POINT=${#COMP_LINE}
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    _gitconference git-conference "$cur" "$prev"
    local j
    for ((j = 0; j < ${#COMPREPLY[@]}; j++)); do
        [[ "${COMPREPLY[j]}" == */ ]] || COMPREPLY[j]="${COMPREPLY[j]} "
    done
}
"#;

pub fn run(args: CompletionArgs) -> Result<i32> {
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    // clap_complete's bash script mixes up its function names when the program's name has a
    // `-`: it is generated for a name without one, then bound to `git-conference`.
    let generated_as = match args.shell {
        Shell::Bash => BASH_NAME,
        Shell::Zsh | Shell::Fish => "git-conference",
    };
    let mut script = Vec::new();
    let mut cmd = super::Cli::command().bin_name(generated_as);
    clap_complete::generate(shell, &mut cmd, generated_as, &mut script);
    // The hidden `__man` (the man page generator) is no command to offer.
    let script = String::from_utf8_lossy(&script)
        .replace(" __man help", " help")
        .replace(
            &format!("-o default {BASH_NAME}\n"),
            "-o default git-conference\n",
        );
    crate::outln!("{}", script.trim_end());
    if args.shell == Shell::Bash {
        crate::outln!("{GIT_BASH_BRIDGE}");
    }
    Ok(0)
}
