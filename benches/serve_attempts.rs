//! Grows a real conference by rounds of synthetic attempts (the store's own event commits, see
//! `tests/e2e/serve/grow.rs`, shared with the test of `serve` at 10,000 attempts). Driven by
//! bench/serve.py, which then measures `git conference serve` on it.
//!
//! Usage: serve_attempts <repo> <conference-name> <rounds> <attempts-per-round> [--own-commits]
//! (`--own-commits`: each attempt a commit of its own, so a node of the attempt tree)

#[path = "../tests/e2e/serve/grow.rs"]
mod grow;

fn main() {
    let mut args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let own_commits = args.iter().any(|a| a == "--own-commits");
    args.retain(|a| a != "--own-commits");
    if args.len() != 4 {
        eprintln!("usage: serve_attempts <repo> <conference-name> <rounds> <attempts-per-round> [--own-commits]");
        std::process::exit(2);
    }
    let number = |s: &str| s.parse::<u32>().expect("a number");
    let t = std::time::Instant::now();
    grow::grow(
        std::path::Path::new(&args[0]),
        &args[1],
        number(&args[2]),
        number(&args[3]),
        own_commits,
    );
    println!("{{\"seconds\": {:.3}}}", t.elapsed().as_secs_f64());
}
