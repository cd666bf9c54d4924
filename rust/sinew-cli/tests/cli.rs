//! Runs the built `sinew` binary on good and bad problem files.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use sinew::{Problem, SolutionFile};

fn data(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(file)
}

fn sinew(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sinew")).args(args).output().expect("run sinew")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// A scratch file with `text`, unique per test.
fn scratch(test: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sinew-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{test}.json"));
    std::fs::write(&p, text).unwrap();
    p
}

fn chain_text() -> String {
    std::fs::read_to_string(data("ffi_chain10.json")).unwrap()
}

#[track_caller]
fn assert_fails(o: &Output, code: i32, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}\nstdout: {}", stdout(o));
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}: {err}");
    }
    assert!(o.stdout.is_empty(), "nothing on stdout on failure: {}", stdout(o));
}

fn core_solution(path: &Path, tweak: impl FnOnce(&mut sinew::SolveSettings)) -> sinew::Solution {
    let lp = Problem::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut settings = lp.settings;
    tweak(&mut settings);
    lp.method.solver(settings).unwrap().solve(&lp.problem, &lp.pose).unwrap()
}

#[track_caller]
fn assert_close(got: &[[f64; 4]], want: &[[f64; 4]], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        for (a, b) in g.iter().zip(w) {
            assert!((a - b).abs() <= 1e-15, "{what}: {g:?} vs core {w:?}");
        }
    }
}

#[test]
fn solve_prints_the_core_solution_as_json() {
    for f in ["ffi_chain10.json", "ffi_y_shape.json", "ffi_humanoid13.json"] {
        let path = data(f);
        let o = sinew(&["solve", path.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let sol: SolutionFile = serde_json::from_str(&stdout(&o)).unwrap();
        let core = core_solution(&path, |_| {});
        assert_eq!(sol.format, "sinew.solution/1");
        assert_eq!(sol.iterations, core.iterations);
        assert_eq!(sol.reached, core.reached);
        assert_eq!(sol.stop, core.stop);
        assert_eq!(sol.residuals.len(), core.residuals.len());
        assert!(sol.residuals.iter().zip(&core.residuals).all(|(a, b)| (a - b).abs() <= 1e-15));
        let want: Vec<[f64; 4]> = core.pose.rotations.iter().map(|q| [q.w, q.x, q.y, q.z]).collect();
        // The CLI writes each f64 exactly (shortest round-trip form), but serde_json's default
        // parser, used here to read it back, may be 1 ULP off.
        assert_close(&sol.rotations, &want, f);
        let lp = Problem::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let names: Vec<String> = lp.problem.rig().bones().iter().map(|b| b.name.clone()).collect();
        assert_eq!(sol.bones, names);
    }
}

/// Every method by name, from `--method` and from the file's `settings.method`: the core's
/// solution, with the method named in it; a set-up the method cannot honour is a problem error
/// (exit 1) naming the method and what it cannot honour.
#[test]
fn every_method_solves_by_name() {
    for method in sinew::Method::ALL {
        for f in ["ffi_chain10.json", "ffi_y_shape.json"] {
            let path = data(f);
            let text = std::fs::read_to_string(&path).unwrap();
            let lp = Problem::from_json(&text).unwrap();
            let core = method.solver(lp.settings).unwrap().solve(&lp.problem, &lp.pose);
            let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
            value["settings"]["method"] = method.name().into();
            let in_file = scratch(&format!("method_{}_{f}", method.name()), &value.to_string());
            for args in [vec!["solve", path.to_str().unwrap(), "--method", method.name()], vec!["solve", in_file.to_str().unwrap()]] {
                let o = sinew(&args);
                match &core {
                    Ok(core) => {
                        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
                        let sol: SolutionFile = serde_json::from_str(&stdout(&o)).unwrap();
                        assert_eq!(sol.method, method, "{args:?}");
                        assert_eq!((sol.iterations, sol.reached, sol.stop), (core.iterations, core.reached, core.stop), "{args:?}");
                        assert_close(&sol.rotations, &core.pose.rotations.iter().map(|q| [q.w, q.x, q.y, q.z]).collect::<Vec<_>>(), f);
                    }
                    Err(e) => {
                        assert!(matches!(e, sinew::Error::Unsupported { .. }), "{args:?}: {e}");
                        assert_fails(&o, 1, &[&format!("method \"{}\" cannot solve this problem", method.name())]);
                    }
                }
            }
        }
    }
}

#[test]
fn solve_options_override_the_file() {
    let path = data("ffi_humanoid13.json");
    let p = path.to_str().unwrap();
    let o = sinew(&["solve", p, "--iterations", "1", "--method", "fabrik", "--tolerance=0.5", "--stall-tolerance", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sol: SolutionFile = serde_json::from_str(&stdout(&o)).unwrap();
    let core = core_solution(&path, |s| {
        s.max_iterations = 1;
        s.tolerance = 0.5;
        s.stall_tolerance = 0.0;
    });
    assert!(sol.iterations <= 1);
    assert_eq!(sol.iterations, core.iterations);
    assert_eq!(sol.reached, core.reached);
    assert_close(&sol.rotations, &core.pose.rotations.iter().map(|q| [q.w, q.x, q.y, q.z]).collect::<Vec<_>>(), "overrides");

    // --output writes the file and nothing to stdout.
    let out = std::env::temp_dir().join(format!("sinew-cli-out-{}.json", std::process::id()));
    let o = sinew(&["solve", p, "-o", out.to_str().unwrap()]);
    assert!(o.status.success() && o.stdout.is_empty(), "{}", stderr(&o));
    let written: SolutionFile = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written.bones.len(), 13);
    let _ = std::fs::remove_file(out);
}

#[test]
fn solve_reads_standard_input() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sinew"))
        .args(["solve", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(chain_text().as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let sol: SolutionFile = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(sol.bones.len(), 10);
}

#[test]
fn require_reached_fails_on_an_unreachable_target() {
    let far = chain_text().replace("[0.45, 0.2, 0.6]", "[5.0, 0.0, 0.0]");
    let p = scratch("unreachable", &far);
    let o = sinew(&["solve", p.to_str().unwrap(), "--require-reached"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("not every goal was reached"), "{}", stderr(&o));
    // The solution is still printed, for inspection; the message names the stop reason as the
    // file does.
    let sol: SolutionFile = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(!sol.reached);
    let stop = serde_json::to_value(sol.stop).unwrap();
    assert!(stderr(&o).contains(&format!("({} after", stop.as_str().unwrap())), "{}", stderr(&o));
    // Without the flag, not reaching is not an error.
    assert!(sinew(&["solve", p.to_str().unwrap()]).status.success());
}

#[test]
fn check_prints_sub_bases_and_moved_bones_by_name() {
    let p = data("ffi_humanoid13.json");
    let o = sinew(&["check", p.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains(": ok"), "{out}");
    assert!(out.contains("13 bones, 4 goals, root pinned, method fabrik"), "{out}");
    assert!(out.contains("sub-bases: chest\n"), "{out}");
    assert!(out.contains("goal 0 (forearm.L -> [0.3, -0.3, 1.2]) moves: forearm.L, upper_arm.L, chest, spine, hips"), "{out}");
    assert!(out.contains("goal 2 (shin.L -> [0.12, -0.2, 0.2]) moves: shin.L, thigh.L\n"), "{out}");

    let o = sinew(&["check", data("ffi_y_shape.json").to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["valid"], true);
    assert_eq!(v["sub_bases"], serde_json::json!(["trunk2"]));
    assert_eq!(v["goals"][1]["moves"], serde_json::json!(["branch2.R", "branch1.R", "branch0.R", "trunk2", "trunk1", "trunk0"]));

    let o = sinew(&["check", data("ffi_chain10.json").to_str().unwrap()]);
    assert!(stdout(&o).contains("sub-bases: none"), "{}", stdout(&o));
}

#[test]
fn bad_files_are_clear_errors() {
    let chain = chain_text();
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        ("syntax", "{\"format\": \"sinew.problem/1\",\n  \"bones\": [}".into(), vec!["syntax.json:2:13:", "expected value"]),
        ("empty", String::new(), vec!["empty.json:1:0:", "EOF"]),
        ("wrong_type", chain.replacen("\"tail\": [0, 0, 0.1]", "\"tail\": \"up\"", 1), vec!["wrong_type.json:", "invalid type"]),
        ("unknown_field", chain.replacen("\"goals\"", "\"goalz\"", 1), vec!["unknown field `goalz`"]),
        ("format_tag", chain.replace("sinew.problem/1", "sinew.problem/9"), vec!["\"sinew.problem/9\"", "sinew.problem/1"]),
        ("unknown_goal_bone", chain.replace("\"bone\": \"link9\"", "\"bone\": \"hand\""), vec!["goal 0", "unknown bone \"hand\""]),
        ("unknown_parent", chain.replace("\"parent\": \"link3\"", "\"parent\": \"nope\""), vec!["unknown_parent.json: bone \"link4\": unknown parent bone \"nope\""]),
        (
            "bad_limit",
            chain.replacen("\"tail\": [0, 0, 0.1]}", "\"tail\": [0, 0, 0.1], \"limit\": {\"swing\": {\"cone\": {\"x_pos\": 4, \"x_neg\": 1, \"z_pos\": 1, \"z_neg\": 1}}}}", 1),
            vec!["limit on bone \"link0\"", "x_pos = 4"],
        ),
        ("bad_setting", chain.replace("\"max_iterations\": 100", "\"max_iterations\": 0"), vec!["max_iterations"]),
        ("duplicate", chain.replace("\"name\": \"link9\"", "\"name\": \"link8\""), vec!["two bones are named \"link8\""]),
    ];
    for (name, text, needles) in cases {
        let p = scratch(name, &text);
        for cmd in ["check", "solve"] {
            let o = sinew(&[cmd, p.to_str().unwrap()]);
            let mut all = needles.clone();
            all.push("sinew: error:");
            assert_fails(&o, 1, &all);
        }
    }
    let o = sinew(&["solve", "/nonexistent/problem.json"]);
    assert_fails(&o, 1, &["/nonexistent/problem.json: cannot read"]);
}

/// Goal kinds come in `sinew.problem/2` files (what the add-on's Export IK Problem writes for
/// them), as the Python module and the C library read them; a kind in a `/1` file is refused.
#[test]
fn goal_kinds_solve_from_format_2_files_only() {
    let plane = chain_text()
        .replace("sinew.problem/1", "sinew.problem/2")
        .replace("{\"bone\": \"link9\", \"target\": [0.45, 0.2, 0.6]}", "{\"bone\": \"link9\", \"target\": [0.45, 0.2, 0.6], \"kind\": \"plane\", \"normal\": [0, 0, 1]}");
    assert!(plane.contains("\"kind\": \"plane\""), "the fixture changed");
    let p = scratch("kind_v2", &plane);
    let o = sinew(&["solve", p.to_str().unwrap(), "--require-reached"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v["residuals"][0].as_f64().unwrap() < 1e-4, "{v}");
    assert!(sinew(&["check", p.to_str().unwrap()]).status.success());
    let p = scratch("kind_v1", &plane.replace("sinew.problem/2", "sinew.problem/1"));
    for cmd in ["check", "solve"] {
        assert_fails(&sinew(&[cmd, p.to_str().unwrap()]), 1, &["kind_v1.json", "goal 0 has a kind", "sinew.problem/2"]);
    }
}

#[test]
fn bad_command_lines_exit_2_with_a_hint() {
    let good = data("ffi_chain10.json");
    let g = good.to_str().unwrap();
    for (args, needle) in [
        (vec![], "no command given"),
        (vec!["frobnicate"], "unknown command \"frobnicate\""),
        (vec!["solve"], "solve needs a problem file"),
        (vec!["solve", g, "--method", "newton"], "unknown method \"newton\"; available: fabrik, dls, fabrik_classic, ccd, triangulation, jacobian_transpose, jacobian_pinv, svd_dls, sdls"),
        (vec!["solve", g, "--method"], "--method needs a method name"),
        (vec!["solve", g, "--iterations", "many"], "not a whole number"),
        (vec!["solve", g, "--iterations", "0"], "max_iterations"),
        (vec!["solve", g, "--tolerance", "nan"], "not a finite number"),
        (vec!["solve", g, "--tolerance", "-1"], "tolerance"),
        (vec!["solve", g, "--frobnicate"], "unknown option --frobnicate"),
        (vec!["check", g, "--iterations", "3"], "unknown option --iterations for check"),
        (vec!["solve", g, g], "one problem file at a time"),
    ] {
        let o = sinew(&args);
        assert_fails(&o, 2, &[needle, "sinew --help"]);
    }
}

#[test]
fn help_and_version() {
    let o = sinew(&["--version"]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), format!("sinew {}\n", env!("CARGO_PKG_VERSION")));
    for flag in ["--help", "-h", "help"] {
        let o = sinew(&[flag]);
        assert!(o.status.success());
        assert!(stdout(&o).contains("usage: sinew solve PROBLEM.json"), "{}", stdout(&o));
    }
    assert!(stdout(&sinew(&["solve", "--help"])).contains("--require-reached"));
}

/// Inputs whose squares overflow are refused naming the field and the bound (exit 1, nothing on
/// stdout: the solution is never printed with `null` in it), and huge orientations solve.
#[test]
fn extreme_numbers_are_refused_or_solved_finite() {
    let chain = chain_text();
    let goal_start = chain.find("\"target\": [").expect("a target");
    let goal_end = goal_start + chain[goal_start..].find(']').unwrap() + 1;
    let huge_target = format!("{}\"target\": [1.35e154, 0, 0.5]{}", &chain[..goal_start], &chain[goal_end..]);
    let p = scratch("huge_target", &huge_target);
    for cmd in ["check", "solve"] {
        assert_fails(&sinew(&[cmd, p.to_str().unwrap()]), 1, &["goal 0", "target", "1e12"]);
    }
    let oriented = format!("{}\"target\": [0.1, 0.2, 0.5], \"orientation\": [1e300, 0, 1e300, 0]{}", &chain[..goal_start], &chain[goal_end..]);
    let p = scratch("huge_orientation", &oriented);
    // (Every method but triangulation, which refuses orientation goals: below.)
    for method in sinew::Method::ALL.map(sinew::Method::name).into_iter().filter(|&m| m != "triangulation") {
        let o = sinew(&["solve", p.to_str().unwrap(), "--method", method]);
        assert!(o.status.success(), "{}", stderr(&o));
        let text = stdout(&o);
        assert!(!text.contains("null") && !text.contains("NaN"), "{text}");
    }
    // Triangulation refuses an orientation goal (a problem error, not a solution with NaN).
    assert_fails(&sinew(&["solve", p.to_str().unwrap(), "--method", "triangulation"]), 1, &["\"triangulation\"", "orientation"]);
}

/// Loading is linear in the bones: a 100 000-bone chain through `sinew check` (a benchmark-style
/// check; the time is printed, not asserted). The parent-name check used to scan the bones for
/// every bone: 9.0 s in a release build on the 2-core development machine, 0.22 s now.
#[test]
fn a_100k_bone_chain_checks() {
    const N: usize = 100_000;
    let mut s = String::from(r#"{"format": "sinew.problem/1", "bones": [{"name": "b0", "head": [0,0,0], "tail": [0,0,0.01]}"#);
    for i in 1..N {
        s.push_str(&format!(r#", {{"name": "b{i}", "parent": "b{}", "head": [0,0,{}], "tail": [0,0,{}]}}"#, i - 1, 0.01 * i as f64, 0.01 * (i + 1) as f64));
    }
    s.push_str(&format!(r#"], "goals": [{{"bone": "b{}", "target": [1,0,1], "chain_length": 3}}]}}"#, N - 1));
    let p = scratch("chain100k", &s);
    let t = std::time::Instant::now();
    let o = sinew(&["check", p.to_str().unwrap()]);
    let elapsed = t.elapsed();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("100000 bones, 1 goals"), "{}", stdout(&o));
    eprintln!("sinew check of a {N}-bone chain: {:.3} s", elapsed.as_secs_f64());
}

/// The chain problem with its goal's target moved to `target`, an optional goal orientation and
/// an optional `"reference"` object.
fn chain_with(target: [f64; 3], orientation: Option<[f64; 4]>, reference: Option<&str>) -> String {
    let goal = match orientation {
        Some(q) => format!("{{\"bone\": \"link9\", \"target\": {target:?}, \"orientation\": {q:?}}}"),
        None => format!("{{\"bone\": \"link9\", \"target\": {target:?}}}"),
    };
    let mut text = chain_text().replace("{\"bone\": \"link9\", \"target\": [0.45, 0.2, 0.6]}", &goal);
    if let Some(r) = reference {
        text = text.replace("\"settings\":", &format!("\"reference\": {r},\n  \"settings\":"));
    }
    text
}

#[test]
fn solve_falls_back_to_the_reference_and_reports_orientation_residuals() {
    // A bent reference pose, and the target exactly where it puts the effector: the solution
    // is the reference itself (nothing else to do), and not what the rest-pose reference gives.
    let lp = Problem::from_json(&chain_text()).unwrap();
    let n = lp.problem.rig().len();
    let bend: Vec<glam::DQuat> = (0..n).map(|i| glam::DQuat::from_rotation_x(0.12 + 0.01 * i as f64)).collect();
    let reference = sinew::Pose::new(bend.clone(), glam::DVec3::ZERO);
    let tail = lp.problem.rig().forward(&reference).tails[n - 1].to_array();
    let rotations: Vec<[f64; 4]> = bend.iter().map(|q| [q.w, q.x, q.y, q.z]).collect();
    let ref_json = format!("{{\"rotations\": {rotations:?}}}");

    let with_ref = scratch("reference", &chain_with(tail, None, Some(&ref_json)));
    let o = sinew(&["solve", with_ref.to_str().unwrap(), "--require-reached"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sol: SolutionFile = serde_json::from_str(&stdout(&o)).unwrap();
    let got: Vec<glam::DQuat> = sol.rotations.iter().map(|q| glam::DQuat::from_xyzw(q[1], q[2], q[3], q[0])).collect();
    let worst = got.iter().zip(&bend).map(|(a, b)| a.angle_between(*b)).fold(0.0, f64::max);
    assert!(worst < 1e-3, "the solution leaves the reference by {worst} rad");
    assert_eq!(sol.orientation_residuals, vec![0.0], "a position goal has no orientation residual");

    let without = scratch("no_reference", &chain_with(tail, None, None));
    let o = sinew(&["solve", without.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plain: SolutionFile = serde_json::from_str(&stdout(&o)).unwrap();
    let moved = plain.rotations.iter().zip(&sol.rotations).map(|(a, b)| (0..4).map(|k| (a[k] - b[k]).abs()).fold(0.0, f64::max)).fold(0.0, f64::max);
    assert!(moved > 1e-3, "the reference made no difference");
    // A file without a reference falls back to the rest pose, as one that names it; one that asks
    // for none ("least_motion") is solved too.
    let rest = scratch("rest_reference", &chain_with(tail, None, Some("\"rest\"")));
    let o = sinew(&["solve", rest.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(serde_json::from_str::<SolutionFile>(&stdout(&o)).unwrap().rotations, plain.rotations);
    let least = scratch("least_motion", &chain_with(tail, None, Some("\"least_motion\"")));
    let o = sinew(&["solve", least.to_str().unwrap(), "--require-reached"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let unknown = scratch("unknown_reference", &chain_with(tail, None, Some("\"none\"")));
    assert_fails(&sinew(&["solve", unknown.to_str().unwrap()]), 1, &["reference", "none"]);

    // An orientation goal: its residual in the solution equals the core's.
    let q = glam::DQuat::from_rotation_x(0.6);
    let text = chain_with([0.0, -0.3, 0.9], Some([q.w, q.x, q.y, q.z]), Some(&ref_json));
    let oriented = scratch("oriented", &text);
    let o = sinew(&["solve", oriented.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sol: SolutionFile = serde_json::from_str(&stdout(&o)).unwrap();
    let core = core_solution(&oriented, |_| {});
    assert_eq!(sol.orientation_residuals.len(), 1);
    assert!((sol.orientation_residuals[0] - core.orientation_residuals[0]).abs() <= 1e-15);
    let frames = Problem::from_json(&text).unwrap().problem.rig().forward(&core.pose);
    let angle = frames.rotations[n - 1].angle_between(q);
    assert!((sol.orientation_residuals[0] - angle).abs() < 1e-9, "{} vs {angle}", sol.orientation_residuals[0]);
}

#[test]
fn bad_references_are_problem_errors() {
    let short = scratch("short_reference", &chain_with([0.45, 0.2, 0.6], None, Some("{\"rotations\": [[1, 0, 0, 0]]}")));
    assert_fails(&sinew(&["solve", short.to_str().unwrap()]), 1, &["reference", "10", "1"]);
    let zeros = vec![[0.0f64; 4]; 10];
    let zero = scratch("zero_reference", &chain_with([0.45, 0.2, 0.6], None, Some(&format!("{{\"rotations\": {zeros:?}}}"))));
    assert_fails(&sinew(&["solve", zero.to_str().unwrap()]), 1, &["reference", "link0"]);
    let typo = scratch("typo_reference", &chain_with([0.45, 0.2, 0.6], None, Some("{\"rotation\": []}")));
    assert_fails(&sinew(&["solve", typo.to_str().unwrap()]), 1, &["rotation"]);
}

/// A problem whose bones stretch (`"stretch"` per bone): `solve` writes each bone's length scale
/// (`"scales"`, the core's) and reaches beyond the rigid chain's length; `check` lists the
/// stretchy bones; a rigid problem's solution has no `"scales"`.
#[test]
fn stretch_in_and_scales_out() {
    let text = chain_text().replace("[0.45, 0.2, 0.6]", "[0.3, 0.2, 1.3]");
    let rigid = scratch("stretch_rigid", &text);
    let o = sinew(&["solve", rigid.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("scales"), "{}", stdout(&o));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut v = v;
    for b in v["bones"].as_array_mut().unwrap().iter_mut().skip(5) {
        b["stretch"] = serde_json::json!(0.1);
    }
    let p = scratch("stretch", &serde_json::to_string(&v).unwrap());
    let o = sinew(&["solve", p.to_str().unwrap(), "--require-reached"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sol: SolutionFile = serde_json::from_str(&stdout(&o)).unwrap();
    let core = core_solution(&p, |_| {});
    assert!(sol.reached && core.reached);
    assert_eq!(sol.scales, core.pose.scales);
    assert!(sol.scales[..5].iter().all(|&s| s == 1.0) && sol.scales[5..].iter().all(|&s| s > 1.0), "{:?}", sol.scales);
    let o = sinew(&["check", p.to_str().unwrap()]);
    assert!(stdout(&o).contains("  stretch: link5 (0.1), link6 (0.1)"), "{}", stdout(&o));
    let o = sinew(&["check", p.to_str().unwrap(), "--json"]);
    let c: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(c["stretch"]["link9"], serde_json::json!(0.1));
}

/// Every method is selectable by `--method` and by the problem file's `settings.method`, and the
/// solution names it and matches the core's solve.
#[test]
fn every_method_is_selectable_by_flag_and_by_file() {
    let chain = chain_text();
    for method in sinew::Method::ALL {
        let name = method.name();
        let o = sinew(&["solve", data("ffi_chain10.json").to_str().unwrap(), "--method", name, "--iterations", "3000"]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let sol: SolutionFile = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(sol.method, method);
        assert!(stdout(&o).contains(&format!("\"method\": \"{name}\"")), "{name}: {}", stdout(&o));
        let in_file = chain.replace("\"method\": \"fabrik\", \"max_iterations\": 100", &format!("\"method\": \"{name}\", \"max_iterations\": 3000"));
        assert_ne!(in_file, chain);
        let p = scratch(&format!("method_{name}"), &in_file);
        let o = sinew(&["solve", p.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let from_file: SolutionFile = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(from_file.method, method);
        let core = core_solution(&p, |_| {});
        assert_eq!(from_file.iterations, core.iterations, "{name}");
        assert!(core.reached, "{name}: {:?}", core.residuals);
    }
}
