//! The `git-conference` binary: parses the command line and hands over to the library.

#![deny(unsafe_code)]

fn main() {
    std::process::exit(git_conference::cli::main());
}
