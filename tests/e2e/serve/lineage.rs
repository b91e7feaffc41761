//! The attempt tree on the page (issue 41, Lineage): `/api/NAME/tree` folded to the alive
//! branches and the path to best, or whole; `/api/NAME/ancestry/COMMIT`; and in a real headless
//! Chromium, a best-first run's tree folded, expanded to every node, and an attempt's ancestry
//! from the baseline when its row or its node is clicked. Every figure is checked against
//! `git conference log --graph --format json` and plain git (`git rev-parse COMMIT^`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;

use super::webdriver::Browser;
use super::{paused_conference, Served};
use crate::common::TestRepo;
use crate::tree::{fixture, run, NAME};

/// A best-first run of the tree fixture: the first gain (`x`) a dead end, the way on from the
/// baseline with `y`; 12 attempts, reverted ones among them.
fn best_first_run() -> TestRepo {
    let repo = fixture("best-first", 12, 3);
    let plan: Vec<&str> = ["x"].into_iter().chain(["y"; 11]).collect();
    run(&repo, &plan.join(" "));
    repo
}

/// `log --graph --format json`'s nodes.
fn graph_nodes(repo: &TestRepo, name: &str) -> Vec<Value> {
    let out = repo
        .conference(&["log", name, "--graph", "--format", "json"])
        .ok()
        .stdout;
    let json: Value = serde_json::from_str(&out).unwrap();
    json["nodes"].as_array().unwrap().clone()
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_string()
}

/// The commits the folded tree must show: the roots, the alive heads, the path to best, and
/// every node below one of them; computed here from the JSON's parents.
fn folded_commits(nodes: &[Value]) -> BTreeSet<String> {
    let parent: BTreeMap<String, String> = nodes
        .iter()
        .map(|n| (text(n, "commit"), text(n, "parent")))
        .collect();
    let mut shown = BTreeSet::new();
    for n in nodes {
        if n["alive"] == true || n["on_best_path"] == true || n["parent"].is_null() {
            let mut at = text(n, "commit");
            while parent.contains_key(&at) && shown.insert(at.clone()) {
                at = parent[&at].clone();
            }
        }
    }
    shown
}

/// A node's labels from the baseline down to it, by the JSON's parents.
fn labels_down_to(nodes: &[Value], commit: &str) -> Vec<String> {
    let by: BTreeMap<String, &Value> = nodes.iter().map(|n| (text(n, "commit"), n)).collect();
    let mut path = vec![];
    let mut at = Some(commit.to_string());
    while let Some(n) = at.and_then(|c| by.get(&c).copied()) {
        path.push(text(n, "label"));
        at = n["parent"].as_str().map(str::to_string);
    }
    path.reverse();
    path
}

/// The commits of a tree the endpoint sent, and how many nodes its nodes say are folded.
fn shown_and_folded(tree: &Value) -> (BTreeSet<String>, usize) {
    let nodes = tree["nodes"].as_array().unwrap();
    let folded: u64 = nodes.iter().filter_map(|n| n["folded"].as_u64()).sum();
    (
        nodes.iter().map(|n| text(n, "commit")).collect(),
        folded as usize,
    )
}

fn get_json(served: &Served, path: &str) -> Value {
    let (code, body) = served.get(path);
    assert_eq!(code, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn the_tree_endpoint_folds_to_alive_branches_and_best_and_gives_each_ancestry() {
    let repo = best_first_run();
    let nodes = graph_nodes(&repo, NAME);
    let served = Served::start(&repo, &[NAME]);

    let whole = get_json(&served, &format!("/api/{NAME}/tree?whole=1"));
    assert_eq!(whole["branching"], "best-first");
    assert_eq!(whole["whole"], true);
    assert_eq!(
        whole["nodes"].as_array().unwrap(),
        &nodes,
        "as log --graph lists them"
    );

    let folded = get_json(&served, &format!("/api/{NAME}/tree"));
    assert_eq!(folded["total"].as_u64().unwrap() as usize, nodes.len());
    let (shown, counted) = shown_and_folded(&folded);
    assert_eq!(shown, folded_commits(&nodes));
    assert!(shown.len() < nodes.len(), "the run has nodes to fold");
    assert_eq!(counted, nodes.len() - shown.len(), "{folded}");

    // Each node's ancestry: its parents down from the baseline, as git has them.
    for n in &nodes {
        let commit = text(n, "commit");
        let an = get_json(&served, &format!("/api/{NAME}/ancestry/{commit}"));
        let steps = an["steps"].as_array().unwrap();
        let labels: Vec<String> = steps.iter().map(|s| text(s, "label")).collect();
        assert_eq!(labels, labels_down_to(&nodes, &commit));
        assert_eq!(steps[0]["verdict"], "baseline");
        for pair in steps.windows(2) {
            let parent = repo.git(&["rev-parse", &format!("{}^", text(&pair[1], "commit"))]);
            assert_eq!(parent.trim(), text(&pair[0], "commit"));
            if let (Some(m), Some(b)) = (pair[1]["metric"].as_f64(), pair[0]["metric"].as_f64()) {
                let delta = pair[1]["delta"].as_f64().unwrap();
                assert!((delta - (m - b)).abs() < 1e-9, "{pair:?}");
            }
        }
    }
    // Nothing but a node of the tree, and only the words the endpoint knows.
    let head = repo.git(&["rev-parse", "HEAD~1"]);
    let (code, _) = served.get(&format!("/api/{NAME}/ancestry/{}", head.trim()));
    assert_eq!(code, 404);
    assert_eq!(served.get(&format!("/api/{NAME}/ancestry/HEAD")).0, 404);
    let (code, body) = served.get(&format!("/api/{NAME}/tree?whole=yes"));
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("whole is 1"), "{body}");
}

/// The server keeps the picks merged onto best between events and reads only the events since:
/// after another round, with picks of its own, its whole tree is still the one `log --graph`
/// reads from every event.
#[test]
fn after_another_round_the_kept_tree_is_the_one_read_anew() {
    let repo = paused_conference("again");
    let served = Served::start(&repo, &["again"]);
    let merged = |tree: &Value| {
        let nodes = tree["nodes"].as_array().unwrap();
        nodes.iter().filter(|n| n["verdict"] == "merged").count()
    };
    let before = get_json(&served, "/api/again/tree?whole=1");
    assert_eq!(
        before["nodes"].as_array().unwrap(),
        &graph_nodes(&repo, "again")
    );
    let resumed = repo.conference(&["resume", "again"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    let after = get_json(&served, "/api/again/tree?whole=1");
    assert!(
        merged(&after) > merged(&before),
        "round 2 merged picks: {after}"
    );
    assert_eq!(
        after["nodes"].as_array().unwrap(),
        &graph_nodes(&repo, "again")
    );
}

/// With branching off the tree is each researcher's chain: the folded view shows each one's
/// head and the path to best.
#[test]
fn with_branching_off_the_tree_is_each_researchers_chain() {
    let repo = paused_conference("chains");
    let nodes = graph_nodes(&repo, "chains");
    let served = Served::start(&repo, &["chains"]);
    let folded = get_json(&served, "/api/chains/tree");
    assert_eq!(folded["branching"], "off");
    let (shown, counted) = shown_and_folded(&folded);
    assert_eq!(shown, folded_commits(&nodes));
    assert_eq!(counted, nodes.len() - shown.len(), "{folded}");
    let status = repo.status_json("chains");
    for (id, r) in status["researchers"].as_object().unwrap() {
        let head = text(r, "head");
        assert!(shown.contains(&head), "researcher {id}'s head {head}");
    }
}

#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs Chromium and ChromeDriver: .ci/run installs them"
)]
fn the_page_shows_the_folded_tree_expands_it_and_gives_an_attempts_ancestry() {
    let repo = best_first_run();
    let nodes = graph_nodes(&repo, NAME);
    let served = Served::start(&repo, &[NAME]);
    let browser = Browser::start();
    browser.open(&served.url);
    let rows = "return [...document.querySelectorAll('#tree-table tr.tnode')].map(r => { \
                const n = treeView.data.nodes[Number(r.getAttribute('data-i'))]; \
                return [n.commit, r.cells[0].textContent, r.cells[1].textContent]; })";
    browser.wait_for(
        "return document.querySelectorAll('#tree-table tr.tnode').length > 0",
        Duration::from_secs(10),
    );
    // Folded: the alive branches and the path to best, each with its verdict, the path starred.
    let shown: Vec<(String, String, String)> = serde_json::from_value(browser.run(rows)).unwrap();
    let commits: BTreeSet<String> = shown.iter().map(|(c, _, _)| c.clone()).collect();
    assert_eq!(commits, folded_commits(&nodes));
    assert_eq!(commits.len(), shown.len());
    let by: BTreeMap<String, &Value> = nodes.iter().map(|n| (text(n, "commit"), n)).collect();
    for (commit, mark, verdict) in &shown {
        let n = by[commit];
        assert_eq!(mark == "★", n["on_best_path"] == true, "{n}");
        assert_eq!(verdict, &text(n, "verdict"));
    }
    let page_text = browser.run("return document.getElementById('tree').textContent");
    let page_text = page_text.as_str().unwrap();
    for n in nodes.iter().filter(|n| n["alive"] == true) {
        assert!(page_text.contains(&text(n, "label")), "{page_text}");
    }
    assert!(page_text.contains("folded"), "{page_text}");

    // Expanded: every node of the tree.
    browser.run("document.getElementById('tree-toggle').click(); return 1");
    browser.wait_for(
        &format!(
            "return document.querySelectorAll('#tree-table tr.tnode').length === {}",
            nodes.len()
        ),
        Duration::from_secs(10),
    );
    let all: Vec<(String, String, String)> = serde_json::from_value(browser.run(rows)).unwrap();
    let all: BTreeSet<String> = all.into_iter().map(|(c, _, _)| c).collect();
    assert_eq!(all, by.keys().cloned().collect());

    // An attempt's row in the table: its ancestry, one line per step from the baseline.
    let deepest = nodes
        .iter()
        .filter(|n| n["iteration"].is_u64())
        .max_by_key(|n| labels_down_to(&nodes, &text(n, "commit")).len())
        .unwrap();
    let steps = labels_down_to(&nodes, &text(deepest, "commit"));
    assert!(steps.len() >= 4, "{steps:?}");
    let ancestry = "const t = document.querySelectorAll('#ancestry tr.step'); \
                    return t.length > 0 && [...t].map(r => r.cells[1].textContent)";
    browser.run(&format!(
        "[...document.querySelectorAll('#attempts tr.attempt')].find(r => r.cells[11].textContent === '{}').click(); return 1",
        &text(deepest, "commit")[..10]
    ));
    let (got, _) = browser.wait_for(ancestry, Duration::from_secs(10));
    assert_eq!(serde_json::from_value::<Vec<String>>(got).unwrap(), steps);
    let first = browser.run(
        "return [...document.querySelector('#ancestry tr.step').cells].map(c => c.textContent)",
    );
    assert_eq!(first[1], "baseline");
    let said = browser
        .run("return document.getElementById('ancestry').firstChild.nextSibling.textContent");
    assert_eq!(said, "", "nothing between the title and the table: {said}");

    // A node of the tree: the same, for the node clicked.
    let other = nodes
        .iter()
        .find(|n| n["verdict"] == "reverted")
        .expect("a reverted attempt");
    let i = browser.run(&format!(
        "return treeView.data.nodes.findIndex(n => n.commit === '{}')",
        text(other, "commit")
    ));
    browser.run(&format!(
        "document.querySelector('#tree-table tr[data-i=\"{i}\"] td.label').click(); return 1"
    ));
    let want = labels_down_to(&nodes, &text(other, "commit"));
    let (got, _) = browser.wait_for(
        &format!(
            "const t = document.querySelectorAll('#ancestry tr.step'); \
             return t.length === {} && [...t].map(r => r.cells[1].textContent)",
            want.len()
        ),
        Duration::from_secs(10),
    );
    assert_eq!(serde_json::from_value::<Vec<String>>(got).unwrap(), want);
    let selected = browser
        .run("return document.querySelector('#tree-table tr.selected td.label').textContent");
    assert!(
        selected.as_str().unwrap().contains(&text(other, "label")),
        "{selected}"
    );
    browser.run("document.getElementById('tree-toggle').click(); return 1");
    browser.wait_for(
        &format!(
            "return document.querySelectorAll('#tree-table tr.tnode').length === {}",
            shown.len()
        ),
        Duration::from_secs(10),
    );
    // The pictures of docs/tree.md: the folded tree with the deepest attempt selected, and its
    // ancestry.
    browser.run(&format!(
        "document.querySelector('#tree-table tr[data-i=\"' + treeView.data.nodes.findIndex(n => n.commit === '{}') + '\"] td.label').click(); return 1",
        text(deepest, "commit")
    ));
    browser.wait_for(
        &format!(
            "return document.querySelectorAll('#ancestry tr.step').length === {}",
            steps.len()
        ),
        Duration::from_secs(10),
    );
    for (part, file) in [
        ("tree", "serve-tree.png"),
        ("attempt-detail", "serve-ancestry.png"),
    ] {
        browser.run(&format!(
            "document.getElementById('{part}').scrollIntoView(); return 1"
        ));
        let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(file);
        std::fs::write(&path, browser.screenshot()).unwrap();
        println!("screenshot: {}", path.display());
    }
}

/// At a thousand attempts that are each a node (reverted children of the researchers' heads),
/// the folded tree is a handful of nodes that count every other as folded, and the whole tree
/// has them all.
#[test]
fn a_thousand_reverted_nodes_fold_under_their_head() {
    let repo = TestRepo::complement_conference("wide");
    super::grow::grow(&repo.dir, "wide", 10, 100, true);
    let nodes = graph_nodes(&repo, "wide");
    assert!(nodes.len() > 1_000, "{}", nodes.len());
    let served = Served::start(&repo, &["wide"]);
    let folded = get_json(&served, "/api/wide/tree");
    let (shown, counted) = shown_and_folded(&folded);
    assert!(shown.len() < 20, "{}", shown.len());
    assert_eq!(counted + shown.len(), nodes.len());
    let whole = get_json(&served, "/api/wide/tree?whole=1");
    assert_eq!(whole["nodes"].as_array().unwrap().len(), nodes.len());
    let last = nodes.last().unwrap();
    let an = get_json(
        &served,
        &format!("/api/wide/ancestry/{}", text(last, "commit")),
    );
    let labels: Vec<String> = an["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| text(s, "label"))
        .collect();
    assert_eq!(labels, labels_down_to(&nodes, &text(last, "commit")));
}

/// A whole tree of a thousand nodes is drawn a window of rows at a time as it scrolls: scrolling
/// through it shows every node, while the page holds only the rows in view.
#[test]
#[cfg_attr(
    not(has_chromium),
    ignore = "needs Chromium and ChromeDriver: .ci/run installs them"
)]
fn a_whole_tree_of_a_thousand_nodes_scrolls_through_every_node() {
    let repo = TestRepo::complement_conference("wide");
    super::grow::grow(&repo.dir, "wide", 10, 100, true);
    let total = graph_nodes(&repo, "wide").len();
    let served = Served::start(&repo, &["wide"]);
    let browser = Browser::start();
    browser.open(&served.url);
    browser.wait_for(
        "return document.getElementById('tree-toggle')",
        Duration::from_secs(20),
    );
    browser.run("document.getElementById('tree-toggle').click(); return 1");
    browser.wait_for(
        "return treeView.data && treeView.data.whole && document.querySelector('#tree-table.windowed tr.tnode')",
        Duration::from_secs(20),
    );
    let seen = browser.run(&format!(
        "const s = document.getElementById('tree-scroll'), seen = new Set(); let most = 0; \
         for (let top = 0; top <= {total} * 20; top += 400) {{ \
           s.scrollTop = top; s.dispatchEvent(new Event('scroll')); \
           const rows = document.querySelectorAll('#tree-table tr.tnode'); most = Math.max(most, rows.length); \
           rows.forEach(r => seen.add(r.getAttribute('data-i'))); }} \
         return [seen.size, most]"
    ));
    let (seen, most): (usize, usize) = serde_json::from_value(seen).unwrap();
    assert_eq!(seen, total, "every node shows once scrolled to");
    assert!(most <= 80, "{most} rows held at once");
}
