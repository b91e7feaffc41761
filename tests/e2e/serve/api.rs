//! The JSON endpoints, the stream, and the server's guards, over plain TCP.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{http, paused_conference, Served};
use crate::common::{ConfigBuilder, TestRepo};

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[test]
fn every_endpoint_answers_with_the_conference_data() {
    let repo = TestRepo::complement_conference("api");
    let served = Served::start(&repo, &["api"]);
    assert!(
        served
            .url
            .ends_with(&format!("/c/api?token={}", served.token)),
        "{}",
        served.url
    );

    // /api/<name>/status is what `status --format json` prints.
    let (code, body) = served.get("/api/api/status");
    assert_eq!(code, 200);
    let printed = repo.conference(&["status", "api", "--format", "json"]).ok();
    assert_eq!(json(&body), json(&printed.stdout));

    let (code, body) = served.get("/api/conferences");
    assert_eq!(code, 200);
    assert_eq!(json(&body)[0]["name"], "api");

    // Every attempt, in order, each with its index; ?since=N from the N-th on.
    let all = json(&served.get("/api/api/attempts").1);
    let all = all.as_array().unwrap();
    let st = repo.status_json("api");
    assert_eq!(all.len() as u64, st["total_iterations"].as_u64().unwrap());
    assert_eq!(all.len(), 4);
    let later = json(&served.get("/api/api/attempts?since=3").1);
    assert_eq!(later.as_array().unwrap().len(), 1);
    assert_eq!(later[0]["n"], 3);
    assert_eq!(later[0]["commit"], all[3]["commit"]);
    assert_eq!(served.get("/api/api/attempts?since=x").0, 400);

    // An attempt's diff is git's change of its commit; its note is git's note.
    let commit = all[0]["commit"].as_str().unwrap();
    let (code, diff) = served.get(&format!("/api/api/diff/{commit}"));
    assert_eq!(code, 200);
    let git_diff = repo.git(&["show", "--format=", commit]);
    for line in git_diff.lines().filter(|l| l.starts_with(['+', '-'])) {
        assert!(
            diff.contains(line),
            "{line:?} missing from the served diff:\n{diff}"
        );
    }
    let (code, note) = served.get(&format!("/api/api/note/{commit}"));
    assert_eq!(code, 200);
    assert_eq!(
        note.trim(),
        repo.git(&["notes", "--ref", "conference", "show", commit])
            .trim()
    );

    // Review and transfer per round; budgets, time and the metric.
    let rounds = json(&served.get("/api/api/rounds").1);
    assert_eq!(rounds[0]["round"], 1);
    assert_eq!(rounds[0]["findings"].as_array().unwrap().len(), 2);
    assert!(!rounds[0]["picks"].as_array().unwrap().is_empty());
    let summary = json(&served.get("/api/api/summary").1);
    assert_eq!(summary["metric"], "score");
    assert_eq!(summary["minimize"], true);
    assert!(summary["running_lines"][0]
        .as_str()
        .unwrap()
        .starts_with("Running:"));

    // The page carries its first paint's data; the index lists the conferences.
    let (code, page) = served.get("/c/api");
    assert_eq!(code, 200);
    assert!(page.contains("\"total_iterations\":4"), "{page}");
    let (code, index) = served.get("/");
    assert_eq!(code, 200);
    assert!(index.contains("\"conferences\":[{"));
}

#[test]
fn the_events_stream_carries_each_event_as_it_is_recorded() {
    let repo = paused_conference("live");
    let served = Served::start(&repo, &[]);
    let before = repo.status_json("live")["events"].as_u64().unwrap();
    let mut stream = TcpStream::connect(&served.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    use std::io::Write;
    write!(
        stream,
        "GET /api/live/events HTTP/1.1\r\nHost: {}\r\n\r\n",
        served.addr
    )
    .unwrap();
    let mut lines = BufReader::new(stream).lines();
    assert!(lines.next().unwrap().unwrap().starts_with("HTTP/1.1 200"));
    // Connected: nothing recorded yet, then the resume records round 2.
    while lines.next().unwrap().unwrap() != ": connected" {}
    let resumed = repo.conference(&["resume", "live"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    let after = repo.status_json("live")["events"].as_u64().unwrap();
    let (mut ids, mut names) = (Vec::new(), Vec::new());
    while names.len() < ids.len() || ids.last() != Some(&after) {
        let line = lines.next().unwrap().unwrap();
        if let Some(id) = line.strip_prefix("id: ") {
            ids.push(id.parse::<u64>().unwrap());
        } else if let Some(data) = line.strip_prefix("data: ") {
            names.push(json(data)["event"].as_str().unwrap().to_string());
        }
    }
    // Every event after the pause, once, in order, each the seed's JSON line.
    assert_eq!(ids, ((before + 1)..=after).collect::<Vec<_>>());
    assert_eq!(names.len(), ids.len());
    assert_eq!(
        names.first().map(String::as_str),
        Some("conference.resumed")
    );
    assert!(names.iter().any(|n| n == "researcher.iteration"));
    assert_eq!(
        names.last().map(String::as_str),
        Some("conference.completed")
    );
}

#[test]
fn actions_need_the_token_and_the_servers_own_origin() {
    let repo = TestRepo::complement_conference("guard");
    let served = Served::start(&repo, &["guard"]);
    let origin = format!("http://{}", served.addr);
    let with = format!("/api/guard/stop?token={}", served.token);
    let post =
        |path: &str, headers: &[(&str, &str)]| http(&served.addr, "POST", path, headers, "{}").0;
    assert_eq!(post("/api/guard/stop", &[("Origin", &origin)]), 401);
    assert_eq!(
        post("/api/guard/stop?token=0000", &[("Origin", &origin)]),
        401
    );
    assert_eq!(post(&with, &[]), 403);
    assert_eq!(post(&with, &[("Origin", "http://evil.example")]), 403);
    // A page of another site whose name points at 127.0.0.1 (DNS rebinding) reads nothing.
    let (code, _) = http(
        &served.addr,
        "GET",
        "/api/guard/status",
        &[("Host", "evil.example")],
        "",
    );
    assert_eq!(code, 403);
    // On 127.0.0.1 reading needs no token.
    assert_eq!(served.get("/api/guard/status").0, 200);
}

#[test]
fn another_address_than_loopback_needs_the_token_for_every_request() {
    let repo = TestRepo::complement_conference("open");
    let served = Served::start(&repo, &["open", "--bind", "0.0.0.0"]);
    for path in [
        "/",
        "/c/open",
        "/api/open/status",
        "/api/open/attempts",
        "/api/open/events",
    ] {
        assert_eq!(served.get(path).0, 401, "{path} without the token");
    }
    let (code, _) = served.get(&format!("/api/open/status?token={}", served.token));
    assert_eq!(code, 200);
    let (code, _) = http(
        &served.addr,
        "GET",
        "/api/open/status",
        &[("X-Conference-Token", &served.token)],
        "",
    );
    assert_eq!(code, 200);
}

#[test]
fn url_paths_name_only_conferences_and_their_commits_never_files() {
    let repo = TestRepo::complement_conference("paths");
    // A commit of the repository that is not the conference's.
    repo.write("other.txt", "secret\n");
    repo.commit_all("not the conference's");
    let other = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
    let served = Served::start(&repo, &["paths"]);
    for path in [
        "/../../../../etc/passwd",
        "/etc/passwd",
        "/c/..%2f..%2fetc%2fpasswd",
        "/api/..%2f..%2f/status",
        "/api/%2e%2e/status",
        "/api/paths/../paths/status",
        "/api/paths/diff/..%2f..%2fconfig",
        "/api/paths/note/HEAD",
        "/api/nope/status",
        "/api/conference.md",
        &format!("/api/paths/diff/{other}"),
        &format!("/api/paths/note/{other}"),
    ] {
        let (code, body) = served.get(path);
        assert_eq!(code, 404, "{path}: {body}");
        assert!(
            !body.contains("secret") && !body.contains("root:"),
            "{path}: {body}"
        );
    }
    let (code, _) = http(&served.addr, "GET", "/api/paths/status", &[], "");
    assert_eq!(code, 200);
}

#[test]
fn serve_costs_no_cpu_between_events() {
    let repo = TestRepo::complement_conference("idle");
    let served = Served::start(&repo, &["idle"]);
    assert_eq!(served.get("/c/idle").0, 200);
    // An open stream, as a page keeps one.
    let _stream = TcpStream::connect(&served.addr).and_then(|mut s| {
        use std::io::Write;
        write!(
            s,
            "GET /api/idle/events HTTP/1.1\r\nHost: {}\r\n\r\n",
            served.addr
        )?;
        Ok(s)
    });
    std::thread::sleep(Duration::from_millis(500));
    let ticks = || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", served.pid())).unwrap();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    let (start, at) = (ticks(), Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    let used = ticks() - start;
    // A clock tick is 10 ms: no more than one in three seconds of waiting.
    assert!(
        used <= 1,
        "serve used {used} ticks of CPU in {:?} without an event",
        at.elapsed()
    );
}

#[test]
fn steer_answer_and_stop_from_the_api_are_recorded_as_the_commands_record_them() {
    let repo = TestRepo::from_fixture("complement");
    repo.write_executable(
        "ask.sh",
        "#!/bin/sh\n./agent.sh\necho 'QUESTION: may I change b.txt too?' >> \"$CONFERENCE_NOTE_FILE\"\n",
    );
    repo.commit_all("an agent that asks");
    let repo = super::paused_conference_of(repo, "talk", "./ask.sh");
    let served = Served::start(&repo, &["talk"]);
    let origin = format!("http://{}", served.addr);
    let post = |what: &str, body: &str| {
        let path = format!("/api/talk/{what}?token={}", served.token);
        http(&served.addr, "POST", &path, &[("Origin", &origin)], body)
    };
    let (code, said) = post("steer", r#"{"text": "prefer small steps"}"#);
    assert_eq!(code, 200, "{said}");
    assert!(
        json(&said)["said"].as_str().unwrap().contains("recorded"),
        "{said}"
    );
    let guidance = repo.events_named("talk", "conference.guidance");
    assert_eq!(guidance.len(), 1);
    assert_eq!(
        repo.status_json("talk")["guidance"][0]["text"],
        "prefer small steps"
    );

    let st = repo.status_json("talk");
    let question = st["questions"][0]["id"].as_str().unwrap().to_string();
    let (code, said) = post(
        "answer",
        &format!(r#"{{"question": "{question}", "text": "yes"}}"#),
    );
    assert_eq!(code, 200, "{said}");
    assert_eq!(repo.status_json("talk")["questions"][0]["answer"], "yes");
    let (code, said) = post("answer", r#"{"question": "Q999", "text": "yes"}"#);
    assert_eq!(code, 400, "{said}");
    let (code, said) = post("steer", r#"{"words": "no text field"}"#);
    assert_eq!(code, 400, "{said}");
    assert!(said.contains("\"text\""), "{said}");
    // Nothing runs it: a stop has nothing to stop, as the command says.
    let (code, said) = post("stop", "{}");
    assert_eq!(code, 200, "{said}");
    let (code, _) = post("restart", "{}");
    assert_eq!(code, 404);
    let (code, _) = http(
        &served.addr,
        "POST",
        &format!("/api/nope/stop?token={}", served.token),
        &[("Origin", &origin)],
        "{}",
    );
    assert_eq!(code, 404);
}

#[test]
fn a_clone_follows_a_conference_that_runs_elsewhere_with_fetch() {
    let repo = paused_conference("far");
    let remote = repo.bare_origin();
    let pushed = repo.conference(&["push"]);
    assert_eq!(pushed.code, 0, "{}{}", pushed.stdout, pushed.stderr);
    let clone = repo.tmp.path().join("clone");
    repo.git(&[
        "clone",
        "-q",
        remote.to_str().unwrap(),
        clone.to_str().unwrap(),
    ]);
    let fetched = repo.conference_in(&clone, &["fetch"]);
    assert_eq!(fetched.code, 0, "{}{}", fetched.stdout, fetched.stderr);
    let served = Served::start_in(&repo, &clone, &["far", "--fetch", "1s"]);
    let events = |body: &str| json(body)["events"].as_u64().unwrap();
    let before = events(&served.get("/api/far/status").1);
    assert_eq!(before, repo.status_json("far")["events"].as_u64().unwrap());

    // The conference goes on in the first clone and is pushed; the server of the second sees it.
    let resumed = repo.conference(&["resume", "far"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert_eq!(repo.conference(&["push"]).code, 0);
    let after = repo.status_json("far")["events"].as_u64().unwrap();
    assert!(after > before);
    let deadline = Instant::now() + Duration::from_secs(15);
    while events(&served.get("/api/far/status").1) != after {
        assert!(
            Instant::now() < deadline,
            "the clone's server never showed the pushed events"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let attempts = json(&served.get("/api/far/attempts").1);
    assert_eq!(attempts.as_array().unwrap().len(), 8);
}

#[test]
fn serve_refuses_what_it_cannot_serve_with_what_to_write_instead() {
    let repo = TestRepo::complement_conference("refused");
    let run = repo.conference(&["serve", "nope", "--port", "0"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("no conference named `nope`") && run.stderr.contains("refused"),
        "{}",
        run.stderr
    );
    let run = repo.conference(&["serve", "refused", "--fetch", "soon", "--port", "0"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("--fetch soon: write an interval such as 10s"),
        "{}",
        run.stderr
    );
    // A port another server holds.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let run = repo.conference(&["serve", "refused", "--port", &port]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot listen on 127.0.0.1:") && run.stderr.contains("--port 0"),
        "{}",
        run.stderr
    );
}

/// The devices queue: with `devices: 0` and two researchers whose evaluations wait for a file,
/// `/api/<name>/queue` shows one on device 0 and the other waiting; once the run has ended there
/// is no queue (null), whatever its last file said.
#[test]
fn the_devices_queue_shows_who_runs_on_which_device_and_who_waits() {
    let repo = TestRepo::new();
    repo.write_executable(
        "eval.sh",
        r#"#!/bin/sh
common=$(git rev-parse --git-common-dir)
v=$(cat value.txt)
if [ "$v" != 5 ]; then
    touch "$common/evaluating-$CONFERENCE_RESEARCHER"
    while [ ! -f "$common/go" ]; do sleep 0.1; done
fi
echo "score: $v"
"#,
    );
    repo.write_executable(
        "agent.sh",
        "#!/bin/sh\ncase $CONFERENCE_RESEARCHER in A) echo 4 ;; *) echo 3 ;; esac >value.txt\necho lower >\"$CONFERENCE_NOTE_FILE\"\n",
    );
    repo.write("value.txt", "5\n");
    repo.commit_all("an evaluation that waits for go");
    let config = ConfigBuilder::new("Queue", "./agent.sh")
        .count(2)
        .iterations(1)
        .frozen("eval.sh, agent.sh")
        .build();
    repo.write(
        "conference.md",
        &format!("{config}\n## Environment\n- devices: 0\n"),
    );
    let runner = repo.start_until("queue", "conference/queue/lock");
    // The run lock is taken before the conference's first event is recorded: `serve queue`
    // needs the conference to exist.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while repo
        .git(&["for-each-ref", "refs/conference/queue/events"])
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let served = Served::start(&repo, &["queue"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let queue = loop {
        let (code, body) = served.get("/api/queue/queue");
        assert_eq!(code, 200, "{body}");
        let queue = json(&body);
        if queue["running"].as_array().is_some_and(|r| r.len() == 1)
            && queue["waiting"].as_array().is_some_and(|w| w.len() == 1)
        {
            break queue;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never queued: {queue}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let running = &queue["running"][0];
    assert_eq!(running["device"], "0", "{queue}");
    let (runs, waits) = (
        running["who"].as_str().unwrap(),
        queue["waiting"][0]["who"].as_str().unwrap(),
    );
    assert!(runs.starts_with('A') || runs.starts_with('B'), "{queue}");
    assert_ne!(runs[..1], waits[..1], "{queue}");
    let summary = json(&served.get("/api/queue/summary").1);
    assert_eq!(summary["queue"]["waiting"][0]["who"], waits, "{summary}");
    std::fs::write(repo.git_dir().join("go"), "").unwrap();
    let out = runner.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&served.get("/api/queue/queue").1), Value::Null);
}

/// The server keeps the attempts it read for the events tip it read them at: asked again after
/// a run recorded more, it answers with the new ones (the page and a reload alike).
#[test]
fn attempts_asked_for_again_after_new_events_include_them() {
    let repo = paused_conference("again");
    let served = Served::start(&repo, &["again"]);
    let before = json(&served.get("/api/again/attempts").1);
    let before = before.as_array().unwrap().len();
    assert_eq!(
        json(&served.get("/api/again/attempts").1)
            .as_array()
            .unwrap()
            .len(),
        before
    );
    let resumed = repo.conference(&["resume", "again"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    let total = repo.status_json("again")["total_iterations"]
        .as_u64()
        .unwrap() as usize;
    assert!(
        total > before,
        "round 2 recorded attempts: {before} -> {total}"
    );
    let after = json(&served.get("/api/again/attempts").1);
    assert_eq!(after.as_array().unwrap().len(), total);
    let fresh = json(&served.get(&format!("/api/again/attempts?since={before}")).1);
    assert_eq!(fresh.as_array().unwrap().len(), total - before);
    let page = served.get("/c/again").1;
    let last = after[total - 1]["commit"].as_str().unwrap();
    assert!(
        page.contains(last),
        "the page's first data holds the newest attempt"
    );
}

/// Requests are answered on a bounded number of threads, whatever arrives at once: a page left
/// open for days spreads its memory over no more malloc arenas than that.
#[test]
fn many_requests_at_once_are_answered_on_a_bounded_number_of_threads() {
    let repo = TestRepo::complement_conference("many");
    let served = Served::start(&repo, &["many"]);
    let threads = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", served.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u32>()
            .unwrap()
    };
    let idle = threads();
    let mut most = idle;
    std::thread::scope(|s| {
        let askers: Vec<_> = (0..24)
            .map(|_| s.spawn(|| served.get("/api/many/attempts").0))
            .collect();
        while askers.iter().any(|a| !a.is_finished()) {
            most = most.max(threads());
            std::thread::sleep(Duration::from_millis(2));
        }
        for asker in askers {
            assert_eq!(asker.join().unwrap(), 200);
        }
    });
    // The main thread, the events watch, and at most two answering.
    assert!(
        most <= idle + 2 && most <= 4,
        "{idle} threads idle, {most} while answering"
    );
}
