//! The page in a real headless Chromium: it shows a running conference, follows its events
//! without a reload, opens an attempt's diff, and keeps what agents wrote as text.

use std::time::{Duration, Instant};

use super::webdriver::Browser;
use super::{
    markup_conference, paused_conference, paused_conference_of, Served, XSS_IMG, XSS_SCRIPT,
};
use crate::common::TestRepo;

/// For each reading on the chart, what the browser drew where the page says its marker is:
/// `[verdict, the centre pixel's colour, the researcher's colour, whether a pixel of that colour
/// lies within 5 pixels]`, read back from the chart's canvas.
const MARKER_PIXELS: &str = "const c = document.querySelector('#chart canvas'), r = c.getBoundingClientRect(); \
    const g = c.getContext('2d'), sx = c.width / r.width, sy = c.height / r.height; \
    const hex = d => '#' + [...d.slice(0, 3)].map(v => v.toString(16).padStart(2, '0')).join(''); \
    return page.data.attempts.filter(a => a.metric !== null).map(a => { \
      const p = chartPoint(a.n), x = Math.floor((p.x - r.left) * sx), y = Math.floor((p.y - r.top) * sy); \
      const colour = researcherColor(a.researcher), near = g.getImageData(x - 5, y - 5, 11, 11).data; \
      let ring = false; for (let i = 0; i < near.length; i += 4) ring ||= hex(near.subarray(i, i + 3)) === colour; \
      return [a.verdict, hex(g.getImageData(x, y, 1, 1).data), colour, ring]; })";

/// Where the page's screenshot is kept (printed by the test that takes it).
fn artifact(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs Chromium and ChromeDriver: .ci/run installs them"
)]
fn the_page_follows_a_running_conference_and_opens_a_diff() {
    let repo = paused_conference("watched");
    let served = Served::start(&repo, &["watched"]);
    let browser = Browser::start();
    browser.open(&served.url);
    // Its researchers, from the first paint.
    let (rows, _) = browser.wait_for(
        "return [...document.querySelectorAll('#researchers tr')].slice(1).map(r => r.cells[0].textContent).join(',')",
        Duration::from_secs(10),
    );
    assert_eq!(rows, "A,B");
    browser.wait_for(
        "return document.getElementById('live').textContent === 'live'",
        Duration::from_secs(10),
    );
    browser.run("window.notReloaded = true; return 1");

    // Round 2 runs; once its last event is recorded, the page shows it within 2 s, unreloaded.
    let resumed = repo.conference(&["resume", "watched"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    let recorded = Instant::now();
    let events = repo.status_json("watched")["events"].as_u64().unwrap();
    let (_, took) = browser.wait_for(
        &format!(
            "return document.getElementById('headline').textContent.includes('{events} events')"
        ),
        Duration::from_secs(10),
    );
    let shown = recorded.elapsed();
    assert!(
        shown <= Duration::from_secs(2),
        "the last event reached the page after {shown:?} ({took:?} of waiting)"
    );
    assert_eq!(browser.run("return window.notReloaded === true"), true);
    assert_eq!(
        browser.run("return [...document.querySelectorAll('#events li code')].some(c => c.textContent === 'conference.completed')"),
        true
    );
    assert_eq!(
        browser.run("return document.querySelectorAll('#attempts tr.attempt').length"),
        8
    );
    // The chart has a marker per reading, each drawn where it says; pointing at one names its
    // attempt.
    browser.wait_for(
        "return document.querySelector('#chart canvas').dataset.drawn === String(page.data.attempts.filter(a => a.metric !== null).length)",
        Duration::from_secs(10),
    );
    let marks: Vec<(String, String, String, bool)> =
        serde_json::from_value(browser.run(MARKER_PIXELS)).unwrap();
    assert_eq!(marks.len(), 8, "{marks:?}");
    assert!(marks.iter().all(|(.., ring)| *ring), "{marks:?}");
    let hover = browser.run("const p = chartPoint(0); document.querySelector('#chart .plot').dispatchEvent(new MouseEvent('mousemove', { clientX: p.x, clientY: p.y, bubbles: true })); return document.getElementById('hover').textContent");
    assert!(
        hover
            .as_str()
            .unwrap()
            .starts_with("#0 · round 1 · researcher "),
        "{hover}"
    );

    // A row opens its attempt's diff (from git) and note.
    let commit = browser.run("const r = document.querySelector('#attempts tr.attempt'); r.click(); return r.cells[11].textContent");
    let commit = commit.as_str().unwrap().to_string();
    let (diff, _) = browser.wait_for(
        "const d = document.getElementById('diff'); return d && d.textContent.startsWith('diff --git') && d.textContent",
        Duration::from_secs(10),
    );
    let full = repo.git(&["rev-parse", &commit]).trim().to_string();
    let git_diff = repo.git(&["show", "--format=", &full]);
    let changed: Vec<&str> = git_diff
        .lines()
        .filter(|l| l.starts_with(['+', '-']))
        .collect();
    assert!(!changed.is_empty());
    for line in changed {
        assert!(
            diff.as_str().unwrap().contains(line),
            "{line:?} not in the page's diff: {diff}"
        );
    }
    let (note, _) = browser.wait_for("return document.getElementById('note').textContent.includes('verdict') && document.getElementById('note').textContent", Duration::from_secs(10));
    assert!(note.as_str().unwrap().contains(&full));

    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG"));
    let path = artifact("serve-page.png");
    std::fs::write(&path, png).unwrap();
    println!("screenshot of the page: {}", path.display());
}

/// The page's chart speaks the report's language: a kept reading is filled in its researcher's
/// colour, any other hollow (white inside its coloured ring), whatever the run; the legend says
/// so.
#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs Chromium and ChromeDriver: .ci/run installs them"
)]
fn kept_readings_are_filled_and_the_others_hollow_as_in_the_report() {
    let repo = paused_conference_of(
        TestRepo::from_fixture("loop"),
        "marks",
        "./agents/each.sh improve worsen",
    );
    let served = Served::start(&repo, &["marks"]);
    let browser = Browser::start();
    browser.open(&served.url);
    browser.wait_for(
        "const c = document.querySelector('#chart canvas'); return c && Number(c.dataset.drawn) > 0",
        Duration::from_secs(10),
    );
    let marks: Vec<(String, String, String, bool)> =
        serde_json::from_value(browser.run(MARKER_PIXELS)).unwrap();
    assert!(marks.iter().any(|(v, ..)| v == "kept"), "{marks:?}");
    assert!(marks.iter().any(|(v, ..)| v != "kept"), "{marks:?}");
    for (verdict, centre, colour, ring) in &marks {
        assert!(
            ring,
            "each marker is ringed in its researcher's colour: {marks:?}"
        );
        if verdict == "kept" {
            assert_eq!(centre, colour, "a kept reading is filled: {marks:?}");
        } else {
            assert_eq!(
                centre, "#ffffff",
                "a {verdict} reading is hollow: {marks:?}"
            );
        }
    }
    let legend = browser.run("return document.querySelector('#chart .legend').textContent");
    assert!(
        legend
            .as_str()
            .unwrap()
            .contains("filled ● kept, hollow ◯ reverted"),
        "{legend}"
    );
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs Chromium and ChromeDriver: .ci/run installs them"
)]
fn markup_that_agents_wrote_stays_text_in_the_browser() {
    let repo = markup_conference("markup");
    let served = Served::start(&repo, &["markup"]);
    let browser = Browser::start();
    browser.open(&served.url);
    let (count, _) = browser.wait_for(
        "return document.querySelectorAll('#attempts tr.attempt').length",
        Duration::from_secs(10),
    );
    assert_eq!(count, 2);
    // Both descriptions are on the page as the very characters the agent wrote…
    let cells = browser.run("return [...document.querySelectorAll('#attempts tr.attempt')].map(r => r.cells[12].textContent)");
    let cells: Vec<String> = serde_json::from_value(cells).unwrap();
    assert!(cells.contains(&XSS_IMG.to_string()), "{cells:?}");
    assert!(cells.contains(&XSS_SCRIPT.to_string()), "{cells:?}");
    // …and nothing of them became markup: no image, no script beyond the page's two, no alert.
    browser.run("document.querySelectorAll('#attempts tr.attempt')[0].click(); return 1");
    browser.wait_for("const d = document.getElementById('diff'); return d && d.textContent.startsWith('diff --git')", Duration::from_secs(10));
    browser.run("document.querySelectorAll('#attempts tr.attempt')[1].click(); return 1");
    browser.wait_for(
        "const d = document.getElementById('note'); return d && d.textContent.includes('verdict')",
        Duration::from_secs(10),
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(browser.alert(), None, "an alert opened");
    assert_eq!(
        browser.run("return document.querySelectorAll('img').length"),
        0
    );
    assert_eq!(
        browser.run("return document.querySelectorAll('script').length"),
        2
    );
    let detail = browser.run("return document.getElementById('attempt-detail').textContent");
    assert!(detail.as_str().unwrap().contains("<"), "{detail}");
    // The attempt tree and the ancestry show the same words as text.
    let (tree, _) = browser.wait_for(
        "const t = document.getElementById('tree-table'); return t && t.textContent",
        Duration::from_secs(10),
    );
    for words in [XSS_IMG, XSS_SCRIPT] {
        assert!(tree.as_str().unwrap().contains(words), "{tree}");
    }
    let (ancestry, _) = browser.wait_for(
        "const t = document.querySelector('#ancestry table'); return t && t.textContent",
        Duration::from_secs(10),
    );
    assert!(ancestry.as_str().unwrap().contains(XSS_IMG), "{ancestry}");
    assert_eq!(browser.alert(), None, "an alert opened");
    assert_eq!(
        browser.run("return document.querySelectorAll('img').length"),
        0
    );
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs Chromium and ChromeDriver: .ci/run installs them"
)]
fn steer_from_the_page_is_recorded_and_reaches_the_next_prompt() {
    // Researchers that keep a copy of each prompt they get, then do the complement agent's work.
    let repo = TestRepo::from_fixture("complement");
    let prompts = repo.dir.join("..").join("prompts");
    std::fs::create_dir_all(&prompts).unwrap();
    repo.write_executable(
        "keep-prompt.sh",
        "#!/bin/sh\ncp \"$CONFERENCE_PROMPT_FILE\" \"$1/$CONFERENCE_RESEARCHER-$CONFERENCE_ROUND-$CONFERENCE_ITERATION.md\"\nexec ./agent.sh\n",
    );
    repo.commit_all("an agent that keeps its prompts");
    let agent = format!(
        "./keep-prompt.sh {}",
        prompts.canonicalize().unwrap().display()
    );
    let repo = paused_conference_of(repo, "steered", &agent);
    let served = Served::start(&repo, &["steered"]);
    let browser = Browser::start();
    browser.open(&served.url);
    browser.wait_for(
        "return document.getElementById('live').textContent === 'live'",
        Duration::from_secs(10),
    );

    let guidance = "try halving b.txt <b>first</b>";
    browser.run(&format!(
        "document.getElementById('steer-text').value = {}; document.getElementById('steer').click(); return 1",
        serde_json::to_string(guidance).unwrap()
    ));
    // The event is in the log, and the page (live, as text) shows the guidance in force.
    let (said, _) = browser.wait_for(
        "const g = document.getElementById('guidance'); return g && g.textContent",
        Duration::from_secs(10),
    );
    assert!(said.as_str().unwrap().contains(guidance), "{said}");
    let events = repo.events_named("steered", "conference.guidance");
    assert_eq!(events.len(), 1);
    assert!(
        events[0].to_string().contains("halving b.txt"),
        "{}",
        events[0]
    );
    assert_eq!(
        browser.run("return document.querySelectorAll('#guidance b').length"),
        0
    );

    // Round 2's prompts carry it.
    let resumed = repo.conference(&["resume", "steered"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    let prompt = std::fs::read_to_string(prompts.join("A-2-1.md")).unwrap();
    assert!(
        prompt.contains(guidance),
        "round 2's prompt lacks the guidance:\n{prompt}"
    );
    let before = std::fs::read_to_string(prompts.join("A-1-1.md")).unwrap();
    assert!(!before.contains("halving"));
}
