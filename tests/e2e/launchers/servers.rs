//! Real servers for the launcher tests, each started with a private config on free loopback
//! ports and state under the test's tempdir, and stopped by pid when dropped; a watchdog also
//! kills each one when the test process dies, so that none outlives it.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child that is killed when dropped, and by its watchdog when the test process dies (with
/// its whole process group when started by [`Server::spawn_group`]).
pub struct Server(Option<(Child, Child)>, bool);

impl Server {
    pub fn spawn(cmd: &mut Command) -> Server {
        let child = cmd.spawn().expect("cannot start a test server");
        let watchdog = watchdog(&child.id().to_string());
        Server(Some((child, watchdog)), false)
    }

    /// As [`Server::spawn`], for a server that forks workers (MLflow's uvicorn): it runs in a
    /// process group of its own, and stopping kills the whole group, so no worker keeps the port.
    pub fn spawn_group(cmd: &mut Command) -> Server {
        let child = cmd
            .process_group(0)
            .spawn()
            .expect("cannot start a test server");
        let watchdog = watchdog(&format!("-{}", child.id()));
        Server(Some((child, watchdog)), true)
    }

    pub fn stop(&mut self) {
        if let Some((mut child, mut watchdog)) = self.0.take() {
            if self.1 {
                // `--` first: procps-ng 4.0's kill reads `-KILL -1234` as signalling every
                // process (pid -1), not the group.
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{}", child.id())])
                    .status();
            }
            for process in [&mut child, &mut watchdog] {
                let _ = process.kill();
                let _ = process.wait();
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A process in a session of its own that sends SIGKILL to `target` (a pid, or `-pgid` for a
/// whole process group) once the test process is gone.
fn watchdog(target: &str) -> Child {
    let script = format!(
        "while kill -0 {} 2>/dev/null; do sleep 1; done; kill -KILL {target} 2>/dev/null",
        std::process::id()
    );
    Command::new("setsid")
        .args(["sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start a watchdog")
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `count` OpenSSH servers on loopback, named `gc-host-<i>` in a private ssh_config, each with
/// a staging folder of its own.
pub struct SshHosts {
    dir: PathBuf,
    servers: Vec<Server>,
}

impl SshHosts {
    pub fn start(parent: &Path, count: usize) -> SshHosts {
        SshHosts::start_with(parent, count, &|_| String::new())
    }

    /// As [`SshHosts::start`], host `i`'s sshd_config starting with `extra(i)` (sshd takes a
    /// keyword's first value: `AuthorizedKeysFile` of its own, to give it an environment).
    pub fn start_with(parent: &Path, count: usize, extra: &dyn Fn(usize) -> String) -> SshHosts {
        let dir = parent.join("ssh");
        std::fs::create_dir_all(&dir).unwrap();
        // sshd refuses to start without its privilege separation folder.
        let _ = std::fs::create_dir_all("/run/sshd");
        let keygen = |file: &str| {
            let ok = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(file))
                .status()
                .unwrap()
                .success();
            assert!(ok, "ssh-keygen failed");
        };
        keygen("host_key");
        keygen("id");
        std::fs::copy(dir.join("id.pub"), dir.join("authorized_keys")).unwrap();
        let mut client = String::new();
        let mut servers = Vec::new();
        for i in 0..count {
            let port = free_port();
            let config = dir.join(format!("sshd_config-{i}"));
            std::fs::write(
                &config,
                format!(
                    "{}Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd-{i}.pid\nAuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nMaxStartups 100\nMaxSessions 100\n",
                    extra(i),
                    d = dir.display()
                ),
            )
            .unwrap();
            servers.push(Server::spawn(
                Command::new("/usr/sbin/sshd")
                    .args(["-D", "-e", "-f"])
                    .arg(&config)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
            ));
            wait_for_port(port);
            client.push_str(&format!(
                "Host gc-host-{i}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  IdentityFile {d}/id\n  IdentitiesOnly yes\n  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n  LogLevel ERROR\n",
                d = dir.display(),
                user = std::env::var("USER").unwrap_or_else(|_| "root".into())
            ));
            std::fs::create_dir_all(dir.join(format!("staging-{i}"))).unwrap();
        }
        std::fs::write(dir.join("ssh_config"), client).unwrap();
        SshHosts { dir, servers }
    }

    /// The client's public key (for authorized_keys files of a host's own).
    pub fn public_key(&self) -> String {
        std::fs::read_to_string(self.dir.join("id.pub")).unwrap()
    }

    /// The staging folder of host `i`.
    pub fn staging(&self, i: usize) -> PathBuf {
        self.dir.join(format!("staging-{i}"))
    }

    /// `## Environment` lines for these hosts, then `extra`.
    pub fn environment(&self, extra: &str) -> String {
        let hosts: Vec<String> = (0..self.servers.len())
            .map(|i| format!("gc-host-{i}:{}", self.staging(i).display()))
            .collect();
        format!(
            "- launcher: ssh\n- hosts: {}\n- ssh command: ssh -F {}\n{extra}",
            hosts.join(", "),
            self.dir.join("ssh_config").display()
        )
    }

    /// Stops host `i`'s listener: new connections are refused.
    pub fn stop(&mut self, i: usize) {
        self.servers[i].stop();
    }
}

/// A single-node Slurm cluster: munged (as user munge, private key and socket), slurmctld and
/// slurmd (as root) with a private slurm.conf on free ports; partition `debug` is up and the
/// default, `down` is down (a job there waits forever). Clients find it through `SLURM_CONF`.
pub struct Slurm {
    pub conf: PathBuf,
    dir: PathBuf,
    /// Stopped when the cluster is dropped.
    _servers: Vec<Server>,
}

impl Slurm {
    pub fn start(parent: &Path) -> Slurm {
        let dir = parent.join("slurm");
        let munge = dir.join("munge");
        for sub in ["state", "spool", "munge"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let key: Vec<u8> = (0..1024).map(|i| (i * 7919 % 251) as u8).collect();
        std::fs::write(munge.join("munge.key"), key).unwrap();
        let sh = |script: String| {
            assert!(
                Command::new("sh")
                    .args(["-c", &script])
                    .status()
                    .unwrap()
                    .success(),
                "{script}"
            );
        };
        sh(format!(
            "chown -R munge:munge {m} && chmod 755 {m} && chmod 400 {m}/munge.key",
            m = munge.display()
        ));
        let mut servers = vec![Server::spawn(
            Command::new("setpriv")
                .args([
                    "--reuid",
                    "munge",
                    "--regid",
                    "munge",
                    "--clear-groups",
                    "munged",
                    "-F",
                ])
                .arg(format!("--socket={}/sock", munge.display()))
                .arg(format!("--key-file={}/munge.key", munge.display()))
                .arg(format!("--pid-file={}/pid", munge.display()))
                .arg(format!("--log-file={}/log", munge.display()))
                .arg(format!("--seed-file={}/seed", munge.display()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )];
        let deadline = Instant::now() + Duration::from_secs(20);
        while !munge.join("sock").exists() {
            assert!(Instant::now() < deadline, "munged did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let conf = dir.join("slurm.conf");
        std::fs::write(&conf, slurm_conf(&dir, free_port(), free_port())).unwrap();
        for daemon in ["slurmctld", "slurmd"] {
            servers.push(Server::spawn(
                Command::new(daemon)
                    .args(["-D", "-f"])
                    .arg(&conf)
                    .env("SLURM_CONF", &conf)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
            ));
        }
        let slurm = Slurm {
            conf,
            dir,
            _servers: servers,
        };
        slurm.wait_until_idle();
        slurm
    }

    fn wait_until_idle(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = self
                .client("sinfo")
                .args(["-h", "-p", "debug", "-o", "%t"])
                .output();
            if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "slurm never came up: {}",
                self.dir.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A Slurm client command for this cluster.
    pub fn client(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("SLURM_CONF", &self.conf);
        cmd
    }

    /// The jobs Slurm lists (any state).
    pub fn jobs(&self) -> String {
        let out = self
            .client("squeue")
            .args(["-h", "-o", "%i %j %T"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// `## Environment` lines for this cluster, then `extra`.
    pub fn environment(&self, staging: &Path, extra: &str) -> String {
        format!(
            "- launcher: slurm\n- staging: {}\n{extra}",
            staging.display()
        )
    }
}

fn slurm_conf(dir: &Path, ctld_port: u16, slurmd_port: u16) -> String {
    let d = dir.display();
    format!(
        "ClusterName=gctest\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={ctld_port}\nSlurmdPort={slurmd_port}\n\
         AuthType=auth/munge\nAuthInfo=socket={d}/munge/sock\nCredType=cred/munge\nSlurmUser=root\nSlurmdUser=root\n\
         StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\nSlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
         SlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
         SwitchType=switch/none\nMpiDefault=none\nReturnToService=2\nSchedulerType=sched/backfill\n\
         SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\nJobAcctGatherType=jobacct_gather/none\n\
         AccountingStorageType=accounting_storage/none\nMinJobAge=2\n\
         SchedulerParameters=sched_min_interval=50000\n\
         NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n\
         PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP\n\
         PartitionName=down Nodes=localhost State=DOWN\n"
    )
}

/// A single-node Ray cluster: `ray start --head --block` from `.ci/ray-venv` in a session of its
/// own, every port it opens chosen free on loopback, its state under a short private temp dir
/// (Ray's unix sockets live there, and their paths are limited in length), 2 GPUs declared so
/// that Ray places GPU jobs (`CUDA_VISIBLE_DEVICES`) on a machine without any. Stopped by
/// signalling its whole process group: when dropped, and by a watchdog when the test process
/// dies (`ray stop` would stop every Ray of the machine, other tests' too).
pub struct RayHead {
    pub address: String,
    pub dashboard_port: u16,
    group: u32,
    child: Child,
    _dir: tempfile::TempDir,
    watchdog: Child,
}

/// The Ray command line the tests use.
pub fn ray_bin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/ray-venv/bin/ray")
}

impl RayHead {
    /// A Ray head up and answering. The free ports it is given are free when chosen, not
    /// reserved: another test's server may take one before Ray binds it, and Ray then never
    /// comes up; such a head is stopped and another started on other ports (three tries).
    pub fn start() -> RayHead {
        let mut why = String::new();
        for _ in 0..3 {
            let mut head = RayHead::spawn();
            match head.wait_until_up() {
                Ok(()) => return head,
                Err(log) => why = log,
            }
        }
        panic!("Ray never came up, three times; the last: {why}");
    }

    fn spawn() -> RayHead {
        let dir = tempfile::Builder::new()
            .prefix("gcr")
            .tempdir_in("/tmp")
            .unwrap();
        // Distinct ports (the system may hand out the same free port twice in a row).
        let mut ports = std::collections::BTreeSet::new();
        while ports.len() < 57 {
            ports.insert(free_port());
        }
        let mut ports = ports.into_iter();
        let mut port = || ports.next().unwrap();
        let dashboard_port = port();
        let mut cmd = Command::new(ray_bin());
        cmd.args(["start", "--head", "--block", "--disable-usage-stats"])
            .args([
                "--node-ip-address",
                "127.0.0.1",
                "--dashboard-host",
                "127.0.0.1",
            ])
            .args(["--num-gpus", "2", "--num-cpus", "4"])
            .arg("--temp-dir")
            .arg(dir.path())
            .arg(format!("--dashboard-port={dashboard_port}"));
        for flag in [
            "--port",
            "--ray-client-server-port",
            "--dashboard-agent-listen-port",
            "--dashboard-agent-grpc-port",
            "--runtime-env-agent-port",
            "--node-manager-port",
            "--object-manager-port",
            "--metrics-export-port",
        ] {
            cmd.arg(format!("{flag}={}", port()));
        }
        let workers: Vec<String> = (0..48).map(|_| port().to_string()).collect();
        cmd.arg(format!("--worker-port-list={}", workers.join(",")))
            .env("RAY_USAGE_STATS_ENABLED", "0")
            .env_remove("RAY_ADDRESS")
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::from(
                std::fs::File::create(dir.path().join("start.log")).unwrap(),
            ))
            .stderr(Stdio::from(
                std::fs::File::create(dir.path().join("start.err")).unwrap(),
            ));
        let child = cmd.spawn().expect("cannot run ray start");
        let group = child.id();
        let watchdog = watchdog(&format!("-{group}"));
        RayHead {
            address: format!("http://127.0.0.1:{dashboard_port}"),
            dashboard_port,
            group,
            child,
            _dir: dir,
            watchdog,
        }
    }

    /// Until the Jobs API answers and the node's resources are known (up to 3 minutes: Ray
    /// takes tens of seconds to start on a loaded box); `ray start` ending first is a failure
    /// at once. The error is Ray's own log.
    fn wait_until_up(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let nodes: serde_json::Value =
                serde_json::from_str(&self.get("/api/v0/nodes").unwrap_or_default())
                    .unwrap_or_default();
            let nodes = nodes["data"]["result"]["result"].as_array().cloned();
            if nodes.is_some_and(|n| n.iter().any(|n| n["resources_total"]["GPU"] == 2.0)) {
                return Ok(());
            }
            let ended = self.child.try_wait().ok().flatten();
            if ended.is_some() || Instant::now() > deadline {
                let log = std::fs::read_to_string(self._dir.path().join("start.err"));
                return Err(format!("{ended:?}: {}", log.unwrap_or_default()));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The body of a GET of the dashboard's `path` (HTTP/1.0 over loopback), when it answers 200.
    pub fn get(&self, path: &str) -> Option<String> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.dashboard_port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        let (head, body) = text.split_once("\r\n\r\n")?;
        (head.split_whitespace().nth(1) == Some("200")).then(|| body.to_string())
    }

    /// The jobs Ray lists whose submission id starts with `prefix`: (id, status).
    pub fn jobs(&self, prefix: &str) -> Vec<(String, String)> {
        let list: serde_json::Value =
            serde_json::from_str(&self.get("/api/jobs/").unwrap_or_default()).unwrap_or_default();
        (list.as_array().into_iter().flatten())
            .filter_map(|j| {
                let id = j["submission_id"].as_str()?;
                id.starts_with(prefix).then(|| {
                    (
                        id.to_string(),
                        j["status"].as_str().unwrap_or("").to_string(),
                    )
                })
            })
            .collect()
    }

    /// `## Environment` lines for this head, then `extra`.
    pub fn environment(&self, extra: &str) -> String {
        format!("- launcher: ray\n- ray address: {}\n{extra}", self.address)
    }

    /// Kills the head and everything it started (as a crash would).
    pub fn kill(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.group)])
            .status();
        let _ = Command::new("sh")
            .args([
                "-c",
                &format!("sleep 0.5; kill -KILL -{} 2>/dev/null", self.group),
            ])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for RayHead {
    fn drop(&mut self) {
        // `--` first: procps-ng 4.0's kill reads `-TERM -1234` as signalling every process.
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.group)])
            .status();
        std::thread::sleep(Duration::from_secs(2));
        self.kill();
        let _ = self.watchdog.kill();
        let _ = self.watchdog.wait();
    }
}

/// One Ray head shared by the tests of this process that do not kill theirs (Ray takes seconds
/// to start): started by the first, stopped by its watchdog when the test process ends.
pub fn shared_ray() -> &'static RayHead {
    static HEAD: std::sync::OnceLock<RayHead> = std::sync::OnceLock::new();
    HEAD.get_or_init(RayHead::start)
}
