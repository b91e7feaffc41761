//! `serve`: parses the command line, prints the address with its token, and hands over to
//! `crate::serve`, which does the serving.

use std::net::{IpAddr, SocketAddr};

use anyhow::Result;
use clap::Args;

use crate::error::usage;

/// Serve a live page of the repository's conferences (or of one), with JSON endpoints and a
/// stream of events, on 127.0.0.1 by default. Prints the address with a token: every action
/// from the page needs it, and on any other address than 127.0.0.1 every request does.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Conference to open (default: the index of the repository's conferences).
    pub name: Option<String>,
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 8765)]
    pub port: u16,
    /// Address to listen on; anything but 127.0.0.1 requires the token for every request.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Open the page (with its token) in the browser (`$BROWSER`, else xdg-open).
    #[arg(long)]
    pub open: bool,
    /// Fetch the shared remote on this interval (`10s`, `1m`), to follow a conference running
    /// on other machines.
    #[arg(long, value_name = "INTERVAL")]
    pub fetch: Option<String>,
    /// The remote `--fetch` fetches from.
    #[arg(long, default_value = "origin")]
    pub remote: String,
}

pub fn run(args: ServeArgs) -> Result<i32> {
    let repo = super::discover()?;
    let name = match args.name {
        Some(n) => Some(super::resolve_name_for(&repo, Some(n), "serve")?),
        None => None,
    };
    let fetch = match &args.fetch {
        None => None,
        Some(text) => Some(crate::serve::watch::Fetch {
            every: crate::config::duration::parse_duration(text)
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    usage(format!(
                        "--fetch {text}: write an interval such as 10s or 1m"
                    ))
                })?,
            remote: args.remote.clone(),
        }),
    };
    let token = crate::serve::auth::new_token()?;
    let options = crate::serve::Options {
        git_dir: repo.commondir().to_path_buf(),
        addr: SocketAddr::new(args.bind, args.port),
        token: token.clone(),
        fetch,
        first: name.clone(),
    };
    let open = args.open;
    crate::serve::run(options, move |addr| {
        let host = match addr.ip() {
            ip if ip.is_unspecified() => "127.0.0.1".to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        };
        let path = name.map(|n| format!("c/{n}")).unwrap_or_default();
        let url = format!("http://{host}:{}/{path}?token={token}", addr.port());
        crate::outln!("Serving {url}");
        crate::outln!("(the token is needed for steer, answer and stop; Ctrl-C stops the server)");
        if open {
            open_browser(&url);
        }
    })?;
    Ok(0)
}

/// Opens `url` in the user's browser, without waiting for it.
fn open_browser(url: &str) {
    let browser = std::env::var("BROWSER").unwrap_or_else(|_| "xdg-open".into());
    let started = std::process::Command::new(&browser)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = started {
        crate::errln!(
            "git-conference serve: cannot start {browser} ({e}); open the address above yourself"
        );
    }
}
