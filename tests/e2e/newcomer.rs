//! End-to-end tests of the newcomer's traps (issue 22): the interactive `init` that asks what
//! researchers may change, a `start` that will not spend a night on a frozen train.py, the
//! Pre-Flight Gate's repeated settings edited once, a `program.md` brief in every prompt, an
//! unknown Evaluation key, the failed-baseline advice followed literally, the man pages
//! installed without sudo, and the karpathy walkthrough on a real terminal with the defaults.
//! The real binary runs as `git conference …` through the real `git`; results are read with git.

use crate::common;

use common::{line_of, TestRepo};
use serde_json::Value;

fn iterations(repo: &TestRepo, name: &str) -> Vec<Value> {
    repo.events_named(name, "researcher.iteration")
}

/// An unknown key under `## Evaluation` below `- frozen:` (`- early stop: on`) is an unknown key with
/// its line and the known keys, not a frozen path that matches no file.
#[test]
fn an_unknown_evaluation_key_is_named_as_one() {
    let repo = TestRepo::from_fixture("autoresearch");
    let text = repo.read("conference.md").replace(
        "- frozen: prepare.py\n",
        "- frozen: prepare.py\n- early stop: on\n",
    );
    let run = repo.start("unknown", &text);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let line = line_of(&text, "- early stop: on");
    assert!(
        run.stderr.contains(&format!(
            "conference.md:{line}: unknown key `early stop` in `## Evaluation`"
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(
            "fix: valid keys here: command, timeout, repeats, frozen, holdout, judge, metric from, \
             prune, prune warmup"
        ),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("matches no file"), "{}", run.stderr);
    // A path on its own bullet under `- frozen:` is still a frozen path.
    let listed = repo.read("conference.md").replace(
        "- frozen: prepare.py\n",
        "- frozen: prepare.py\n- train.py\n",
    );
    let run = repo.start("listed", &listed.replace("Autoresearch", "Listed"));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("`train.py` is both frozen"),
        "{}",
        run.stderr
    );
}

/// Runs `git conference ARGS` with a terminal as its standard input, output and error (as a
/// user's shell runs it: questions, progress lines and results all on the screen), typing
/// `answers`; returns its exit code and the screen (what it printed, and the echoed answers).
fn on_a_terminal(repo: &TestRepo, args: &[&str], answers: &[u8]) -> (Option<i32>, String) {
    use std::io::{Read, Write};
    let (mut master, slave) = common::open_terminal();
    let mut child = {
        let mut command = repo.command("git");
        command
            .arg("conference")
            .args(args)
            .env("TERM", "xterm")
            .stdin(std::process::Stdio::from(slave.try_clone().unwrap()))
            .stdout(std::process::Stdio::from(slave.try_clone().unwrap()))
            .stderr(std::process::Stdio::from(slave));
        command.spawn().unwrap()
        // The command, and with it this process's copies of the terminal's end, is dropped here,
        // so reading the screen ends when the child exits.
    };
    master.write_all(answers).unwrap();
    let reader = std::thread::spawn(move || {
        let mut screen = Vec::new();
        // The read ends with an error (EIO) once the child closed the terminal.
        let _ = master.read_to_end(&mut screen);
        String::from_utf8_lossy(&screen).into_owned()
    });
    let status = child.wait().unwrap();
    (status.code(), reader.join().unwrap())
}

/// The karpathy walkthrough on a real terminal: in the autoresearch layout (train.py the agent
/// edits, `python3 train.py` prints val_bpb, prepare.py the harness) the interactive `init`
/// answered with the walkthrough's evaluation command and metric and Enter for everything else
/// (three researchers, builtin:tune, Allowed changes: the train.py the evaluation names), then
/// `start`, keeps an improving train.py edit: best is better than the baseline, and differs
/// from it in train.py only.
#[test]
fn the_walkthrough_on_a_terminal_with_the_default_answers_improves_train_py() {
    let repo = TestRepo::from_fixture("autoresearch");
    repo.git(&["rm", "-q", "conference.md", "agent.sh"]);
    repo.commit_all("the project, before git-conference");
    // Count, devil's advocate, unattended, partitioning: Enter; the evaluation command and the
    // metric: typed; direction, agent, Allowed changes, Frozen: Enter.
    let (code, screen) = on_a_terminal(
        &repo,
        &["init"],
        b"\n\n\n\npython3 train.py\nval_bpb\n\n\n\n\n",
    );
    assert_eq!(code, Some(0), "{screen}");
    assert!(
        screen.contains("Which files may the researchers change (Allowed changes)?")
            && screen.contains("none = every file that is not frozen [train.py]"),
        "{screen}"
    );
    let text = repo.read("conference.md");
    assert!(
        text.contains("**Allowed changes:**\n- train.py\n"),
        "{text}"
    );
    assert!(text.contains("- **Command:** builtin:tune"), "{text}");
    let (code, screen) = on_a_terminal(&repo, &["start"], b"");
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("rules: allowed: train.py"), "{screen}");
    let name = "repo";
    let baseline = repo.events_named(name, "baseline.measured")[0]["payload"]["metric_value"]
        .as_f64()
        .unwrap();
    let best = repo.status_json(name)["best"]["metric"].as_f64().unwrap();
    assert!(
        best < baseline,
        "best {best}, baseline {baseline}\n{screen}"
    );
    let changed = repo.git(&[
        "diff",
        "--name-only",
        "HEAD",
        &format!("conference/{name}/best"),
    ]);
    assert_eq!(changed, "train.py\n", "{screen}");
    let kept = iterations(&repo, name)
        .into_iter()
        .filter(|e| e["payload"]["status"] == "kept")
        .count();
    assert!(kept >= 1, "{screen}");
}

/// `start` does not begin an unattended night in which the file the evaluation names
/// (`python3 train.py` → train.py) is frozen by inference while Allowed changes is empty: exit
/// 2 with the line and both ways out, nothing created; either way out then starts.
#[test]
fn start_refuses_a_night_on_a_train_py_frozen_by_inference() {
    let repo = TestRepo::from_fixture("autoresearch");
    let walkthrough = repo.read("conference.md");
    let open = walkthrough.replace("**Allowed changes:**\n- train.py\n", "");
    let run = repo.start("frozen", &open);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let line = line_of(&open, "- command: python3 train.py");
    assert!(
        run.stderr.contains(&format!(
            "conference.md:{line}: `python3 train.py` names train.py, so train.py is frozen (no researcher may change it) while Allowed changes is empty"
        )),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("(`- train.py`)")
            && run
                .stderr
                .contains("confirm with `- frozen: train.py` under ## Evaluation"),
        "{}",
        run.stderr
    );
    assert_eq!(
        repo.git(&["for-each-ref", "refs/conference/", "refs/heads/conference/"]),
        "",
        "nothing was created"
    );
    // Way out 1: frozen on purpose. The run starts, and an edit to train.py is rejected.
    let confirmed = open.replace("- frozen: prepare.py", "- frozen: prepare.py, train.py");
    repo.start("confirmed", &confirmed).ok();
    assert_eq!(
        iterations(&repo, "confirmed")[0]["payload"]["reason"],
        "changes frozen path train.py (Frozen: train.py)"
    );
    // Way out 2: allowed. The same edit is kept.
    repo.start("allowed", &walkthrough).ok();
    assert_eq!(iterations(&repo, "allowed")[0]["payload"]["status"], "kept");
    // A run that pauses is watched: it starts, with the warning.
    let paused = open.replace(
        "- **Max total iterations:** 10",
        "- **Max total iterations:** 10\n- **Pause every:** 1",
    );
    let run = repo.start("paused", &paused);
    assert!(
        run.stderr.contains("warning: Allowed changes is empty"),
        "{}",
        run.stderr
    );
}

/// The commands between backquotes in the line of `text` that says how to go on, as printed.
fn printed_commands(text: &str) -> Vec<Vec<String>> {
    let advice = text
        .lines()
        .find(|l| l.contains("To go on:"))
        .unwrap_or_else(|| panic!("no advice in {text}"));
    advice
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| c.starts_with("git conference "))
        .map(|c| c.split_whitespace().skip(2).map(str::to_string).collect())
        .collect()
}

/// The advice a failed baseline prints works when followed literally, also for a conference
/// started with `--config FILE`: both commands it prints name that file. Changing the timeout
/// in that file and running the second command measures the baseline; in another conference,
/// committing the fixed harness and running the first does.
#[test]
fn the_failed_baseline_advice_works_as_printed_with_another_config_file() {
    let repo = TestRepo::from_fixture("autoresearch");
    let walkthrough = repo.read("conference.md");
    repo.git(&["rm", "-q", "conference.md"]);
    repo.commit_all("settings elsewhere");
    let slow = walkthrough.replace("- timeout: 1m", "- timeout: 1ms");
    repo.write("mine.md", &slow);
    let run = repo.conference(&["start", "--config", "mine.md"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("change `## Evaluation` in mine.md"),
        "{}",
        run.stderr
    );
    let commands = printed_commands(&run.stderr);
    assert_eq!(
        commands,
        [
            vec![
                "resume",
                "autoresearch",
                "--base",
                "HEAD",
                "--config",
                "mine.md"
            ],
            vec!["resume", "autoresearch", "--config", "mine.md"]
        ],
        "{}",
        run.stderr
    );
    // Way 2: change `## Evaluation` in the file it names, run the command as printed.
    repo.write("mine.md", &walkthrough);
    let args: Vec<&str> = commands[1].iter().map(String::as_str).collect();
    repo.conference(&args).ok();
    let baseline = repo.events_named("autoresearch", "baseline.measured");
    assert_eq!(baseline.len(), 1);

    // Way 1: a harness that fails, fixed and committed, then the first command as printed.
    let repo = TestRepo::from_fixture("autoresearch");
    repo.git(&["rm", "-q", "conference.md"]);
    let prepare = repo.read("prepare.py");
    repo.write(
        "prepare.py",
        &prepare.replace("return 1.0 + mse", "return 1.0 + mse + undefined_name"),
    );
    repo.commit_all("a broken harness");
    repo.write("mine.md", &walkthrough);
    let run = repo.conference(&["start", "--config", "mine.md"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    repo.write("prepare.py", &prepare);
    repo.commit_all("fix the harness");
    let fixed = repo.git(&["rev-parse", "HEAD"]);
    let commands = printed_commands(&run.stderr);
    let args: Vec<&str> = commands[0].iter().map(String::as_str).collect();
    repo.conference(&args).ok();
    let baseline = repo.events_named("autoresearch", "baseline.measured");
    assert_eq!(baseline[0]["payload"]["commit"], fixed.trim());
}

/// `- brief: program.md` under `## Goal` puts the committed file into every researcher's prompt,
/// cut to its budget with a line saying so, and freezes it: an agent editing it is rejected. A
/// brief missing at the baseline stops `start` with exit 2 and the line.
#[test]
fn a_program_md_brief_is_in_every_prompt_and_frozen() {
    let repo = TestRepo::from_fixture("autoresearch");
    let mut program = String::from("# program.md\nTry the learning rate first.\n");
    while program.len() < 20_000 {
        program.push_str("Keep the training under five minutes; never touch prepare.py.\n");
    }
    program.push_str("THE LAST LINE\n");
    repo.write("program.md", &program);
    repo.write_executable(
        "brief-agent.sh",
        "#!/bin/sh\ncp \"$CONFERENCE_PROMPT_FILE\" \"$(git rev-parse --git-common-dir)/prompt-$CONFERENCE_ITERATION.md\"\n\
         case \"$CONFERENCE_ITERATION\" in\n\
         1) sed 's/^LEARNING_RATE = 0.1$/LEARNING_RATE = 0.5/' train.py >t && mv t train.py ;;\n\
         *) echo 'Ignore prepare.py rules.' >>program.md ;;\n\
         esac\n",
    );
    repo.commit_all("program.md and an agent");
    let text = repo
        .read("conference.md")
        .replace("in train.py.\n", "in train.py.\n- brief: program.md\n")
        .replace(
            "- **Iterations per round:** 3",
            "- **Iterations per round:** 2",
        )
        .replace("- command: ./agent.sh", "- command: ./brief-agent.sh");
    let run = repo.start("brief", &text).ok();
    assert!(
        run.stderr.contains("program.md (the Goal's brief)"),
        "{}",
        run.stderr
    );
    for iteration in [1, 2] {
        let prompt = repo.git_dir_file(&format!("prompt-{iteration}.md"));
        assert!(
            prompt.contains("## Brief (the user's program.md, frozen)\n# program.md\nTry the learning rate first.\n"),
            "{prompt}"
        );
        assert!(!prompt.contains("THE LAST LINE"), "{prompt}");
        assert!(
            prompt.contains("bytes are shown; the prompt holds at most 8192)")
                && prompt.contains(&format!("of its {} bytes", program.len())),
            "{prompt}"
        );
    }
    let its = iterations(&repo, "brief");
    assert_eq!(its[0]["payload"]["status"], "kept");
    assert_eq!(its[1]["payload"]["status"], "rejected");
    assert_eq!(
        its[1]["payload"]["reason"],
        "changes frozen path program.md (the Goal's brief)"
    );
    assert_eq!(
        repo.show("conference/brief/best", "program.md").unwrap(),
        program
    );

    let missing = text
        .replace("- brief: program.md", "- brief: missing.md")
        .replace("Autoresearch", "Missing");
    let run = repo.start("missing", &missing);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "conference.md:{}: brief: missing.md is not a file committed at",
            line_of(&missing, "- brief: missing.md")
        )),
        "{}",
        run.stderr
    );
}

/// The line of `text` that holds `needle` after line `after` (1-based), as a number.
fn line_after(text: &str, after: usize, needle: &str) -> usize {
    text.lines()
        .enumerate()
        .skip(after)
        .find(|(_, l)| l.contains(needle))
        .unwrap_or_else(|| panic!("no `{needle}` after line {after} in:\n{text}"))
        .0
        + 1
}

/// A setting conference.md writes twice (in its section and in the Pre-Flight Gate) changed in
/// one copy only before `resume` is taken, from either copy: the file then holds the new value
/// in both (the stale line rewritten, and said), the stored copy too, and the run goes on with
/// it.
#[test]
fn one_edit_of_a_repeated_setting_is_enough_for_resume() {
    let repo = TestRepo::from_fixture("loop");
    repo.conference(&[
        "init",
        "Repeated",
        "--yes",
        "--count",
        "1",
        "--eval",
        "./eval.sh",
        "--frozen",
        "eval.sh, agents/**",
        "--metric",
        "score",
        "--direction",
        "minimize",
        "--agent",
        "./agents/seq.sh improve",
        "--iterations-per-round",
        "1",
        "--max-rounds",
        "1",
    ])
    .ok();
    repo.conference(&["start"]).ok();
    let text = repo.read("conference.md");
    let gate = line_of(&text, "## Pre-Flight Gate");
    let constraints = line_of(&text, "## Constraints");
    // Max rounds: edited in the Pre-Flight Gate only. Max total iterations: in Constraints only.
    let rounds = line_after(&text, gate, "- **Max rounds:** 1");
    let total = line_after(&text, constraints, "- **Max total iterations:** 1");
    let edited: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| match i + 1 {
            n if n == rounds => "- **Max rounds:** 2".to_string(),
            n if n == total => "- **Max total iterations:** 10".to_string(),
            _ => l.to_string(),
        })
        .collect();
    repo.write("conference.md", &(edited.join("\n") + "\n"));
    let run = repo.conference(&["resume"]).ok();
    let own_rounds = line_of(&text, "- **Max rounds:** 1");
    let gate_total = line_after(&text, gate, "- **Max total iterations:** 1");
    for said in [
        format!("Max rounds: you changed it to 2 at line {rounds} (## Pre-Flight Gate); line {own_rounds} (## Researchers) still said 1: both now say 2 (line {own_rounds} rewritten)"),
        format!("Max total iterations: you changed it to 10 at line {total} (## Constraints); line {gate_total} (## Pre-Flight Gate) still said 1: both now say 10 (line {gate_total} rewritten)"),
    ] {
        assert!(run.stderr.contains(&said), "no `{said}` in\n{}", run.stderr);
    }
    let now = repo.read("conference.md");
    assert_eq!(now.matches("- **Max rounds:** 2\n").count(), 2, "{now}");
    assert_eq!(
        now.matches("- **Max total iterations:** 10\n").count(),
        2,
        "{now}"
    );
    let stored = repo
        .show("refs/conference/repeated/events", "conference.md")
        .unwrap();
    assert_eq!(
        stored.matches("- **Max rounds:** 2\n").count(),
        2,
        "{stored}"
    );
    assert_eq!(repo.status_json("repeated")["round"], 2, "{}", run.stderr);
}

/// `git conference man --install` puts every manual page into the user's manual folder, no sudo
/// ($XDG_DATA_HOME/man/man1, else ~/.local/share/man/man1), says where, and says when `man`
/// does not search there (and that it does once ~/.local/bin is on PATH, as man-db maps it).
#[test]
fn man_install_needs_no_sudo_and_says_where() {
    let repo = TestRepo::new();
    let home = repo.dir.parent().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let env = |extra: &[(&str, &str)]| {
        let mut vars = vec![("HOME", home.to_str().unwrap())];
        vars.extend_from_slice(extra);
        vars.into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
    };
    let run_with = |vars: Vec<(String, String)>| {
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        repo.conference_env(&["man", "--install"], &vars).ok()
    };
    let man = home.join(".local/share/man");
    let run = run_with(env(&[("XDG_DATA_HOME", "")]));
    assert!(
        run.stdout
            .contains(&format!("manual pages into {}", man.join("man1").display())),
        "{}",
        run.stdout
    );
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    let mut count = 0;
    for entry in std::fs::read_dir(&shipped).unwrap() {
        let entry = entry.unwrap();
        let installed = std::fs::read(man.join("man1").join(entry.file_name())).unwrap();
        assert_eq!(installed, std::fs::read(entry.path()).unwrap());
        count += 1;
    }
    assert!(count >= 16, "{count}");
    // Where man-db is installed (it is on the machines CI and this project use), what `manpath`
    // says decides the last line.
    if std::process::Command::new("manpath").output().is_ok() {
        assert!(
            run.stdout.contains(&format!(
                "{} is not on your manual path (`manpath` does not list it)",
                man.display()
            )) && run
                .stdout
                .contains(&format!("export MANPATH=\"{}:$MANPATH\"", man.display())),
            "{}",
            run.stdout
        );
        let bin = home.join(".local/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let program = std::path::Path::new(env!("CARGO_BIN_EXE_git-conference"));
        let path = format!(
            "{}:{}:{}",
            bin.display(),
            program.parent().unwrap().display(),
            std::env::var("PATH").unwrap()
        );
        let run = run_with(env(&[("XDG_DATA_HOME", ""), ("PATH", &path)]));
        assert!(
            run.stdout
                .contains("`man git-conference` and `git conference --help` open them."),
            "{}",
            run.stdout
        );
    }
    let data = home.join("data");
    let run = run_with(env(&[("XDG_DATA_HOME", data.to_str().unwrap())]));
    assert!(
        run.stdout
            .contains(&format!("into {}", data.join("man/man1").display())),
        "{}",
        run.stdout
    );
    assert!(data.join("man/man1/git-conference-man.1").exists());
}

/// `cargo run --release -- demo` runs the binary before git-conference is on PATH: every
/// command the demo prints (follow the log, read the report, look around) then works as
/// printed, from the shell it was started in, with a PATH that has git but no git-conference.
#[test]
fn the_demo_hints_work_before_the_install() {
    let repo = TestRepo::new();
    let dir = repo.dir.parent().unwrap().join("demo");
    let git = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let git_dir = std::path::Path::new(git.trim())
        .parent()
        .unwrap()
        .to_path_buf();
    // git's folder and the system's, without the test harness's git-conference.
    let path = format!("{}:/usr/bin:/bin", git_dir.display());
    let shell = |line: &str| {
        let out = repo
            .command("sh")
            .args(["-c", line])
            .env("PATH", &path)
            .current_dir(repo.dir.parent().unwrap())
            .output()
            .unwrap();
        let said = format!(
            "`{line}`: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{said}");
        said
    };
    assert!(
        !shell("command -v git-conference || true").contains("git-conference\n"),
        "this PATH must not have git-conference"
    );
    let out = repo
        .command(env!("CARGO_BIN_EXE_git-conference"))
        .args(["demo", "--dir"])
        .arg(&dir)
        .env("PATH", &path)
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{printed}");
    let follow = printed
        .split("follow it with `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no follow hint in {printed}"));
    assert!(shell(follow).contains("conference.completed"));
    let report = printed
        .lines()
        .find_map(|l| l.strip_prefix("Report: cd "))
        .and_then(|l| l.split("   ·   ").next())
        .unwrap_or_else(|| panic!("no report hint in {printed}"));
    let out_dir = repo.dir.parent().unwrap().join("report-out");
    shell(&format!("cd {}", report).replace("<dir>", out_dir.to_str().unwrap()));
    assert!(out_dir.join("final_report.md").exists());
    let look = printed
        .lines()
        .find_map(|l| l.strip_prefix("Look around: "))
        .unwrap_or_else(|| panic!("no look-around hint in {printed}"));
    assert!(shell(look).contains("demo"));
}
