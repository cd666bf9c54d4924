//! Hardening: no finite input gives a non-finite pose, and what cannot be solved safely is a typed
//! error naming the field and the bound.
//!
//! - Named regressions for the inputs that used to come back as NaN or infinity with a success:
//!   huge orientation and start-quaternion components, huge coordinates, weights, narrow cones.
//! - Every saved fuzzer input in `fuzz/regressions/` (see `fuzz/README.md`), replayed through the
//!   same check the fuzz target makes, so the normal `cargo test` keeps them fixed.
//! - A property test putting extreme magnitudes into every numeric field of a small problem.

use std::path::PathBuf;

#[path = "common/limbs.rs"]
mod limbs;

use glam::{DQuat, DVec3};
use proptest::prelude::*;
use sinew::format::check_solution_finite;
use sinew::problem::{MAX_COUPLED_GOALS, MAX_GOALS, rescaled_quat};
use sinew::rig::MAX_COORDINATE;
use sinew::{Error, Goal, Method, Pose, Problem, RootMode, Solution, SolveSettings, StopReason};

/// What the fuzz target (`fuzz/fuzz_targets/load_solve.rs`) checks: loading never panics; a
/// loaded problem solves with both methods without panicking, and a solution is finite, with
/// unit quaternions. Returns the load error, if any.
fn check_text(text: &str) -> Result<(), Error> {
    let lp = Problem::from_json(text)?;
    for method in Method::ALL {
        let mut solver = method.solver(lp.settings).expect("validated settings");
        let Ok(sol) = solver.solve(&lp.problem, &lp.pose) else { continue };
        check_solution_finite(&sol).unwrap_or_else(|e| panic!("{}: {e}\n{text}", method.name()));
        for q in &sol.pose.rotations {
            assert!((q.length() - 1.0).abs() < 1e-9, "{}: non-unit {q:?}\n{text}", method.name());
        }
    }
    Ok(())
}

/// A three-bone chain with `goal` as its goal list, `extra` appended to the top level and `limit`
/// on the middle bone.
fn chain(goals: &str, extra: &str, limit: &str) -> String {
    format!(
        r#"{{"format": "sinew.problem/1", "bones": [
            {{"name": "a", "head": [0,0,0], "tail": [0,0,1]}},
            {{"name": "b", "parent": "a", "head": [0,0,1], "tail": [0,0,2]{limit}}},
            {{"name": "c", "parent": "b", "head": [0,0,2], "tail": [0,0,3]}}],
          "goals": [{goals}]{extra}}}"#
    )
}

const REACH: &str = r#"{"bone": "c", "target": [1, 0, 1]}"#;

#[track_caller]
fn assert_solves(text: &str) {
    check_text(text).unwrap_or_else(|e| panic!("expected to load: {e}\n{text}"));
}

#[track_caller]
fn assert_refused(text: &str, needles: &[&str]) {
    let e = check_text(text).expect_err("expected an error");
    let msg = e.to_string();
    for n in needles {
        assert!(msg.contains(n), "{msg:?} lacks {n:?}");
    }
}

#[test]
fn huge_orientations_are_normalised_safely() {
    for v in ["1e150", "1.4e154", "1e300", "-1.7e308"] {
        let goal = format!(r#"{{"bone": "c", "target": [1, 0, 1], "orientation": [{v}, 0, {v}, 0]}}"#);
        assert_solves(&chain(&goal, "", ""));
    }
    // The same through the core API: the stored orientation is the unit quaternion.
    let lp = Problem::from_json(&chain(REACH, "", "")).unwrap();
    let rig = lp.problem.rig().clone();
    let g = Goal::new(2, DVec3::new(1.0, 0.0, 1.0)).with_orientation(DQuat::from_xyzw(0.0, 1e300, 0.0, 1e300));
    let mut p = Problem::new(rig, vec![g], RootMode::Pinned).unwrap();
    let q = p.goals()[0].orientation.unwrap();
    assert!((q.length() - 1.0).abs() < 1e-15 && (q.y - q.w).abs() < 1e-15, "{q:?}");
    p.set_orientation(0, Some(DQuat::from_xyzw(-1e308, 0.0, 0.0, 0.0))).unwrap();
    assert_eq!(p.goals()[0].orientation.unwrap(), DQuat::from_xyzw(-1.0, 0.0, 0.0, 0.0));
}

#[test]
fn huge_start_quaternions_are_rescaled_by_the_format_and_refused_by_the_core() {
    for v in ["1e150", "1.4e154", "1e300"] {
        let extra = format!(r#", "pose": {{"rotations": [[{v}, 0, 0, {v}], [1, 0, 0, 0], [1, 0, 0, 0]]}}"#);
        assert_solves(&chain(REACH, &extra, ""));
    }
    // Rescaling is exact (a power of two) and leaves ordinary quaternions alone, bit for bit.
    let q = DQuat::from_xyzw(0.1, 0.2, 0.3, 0.9);
    assert_eq!(rescaled_quat(q), q);
    let big = rescaled_quat(DQuat::from_xyzw(3e300, 0.0, 0.0, -1e300));
    assert!(big.x > 0.5 && big.x < 1.0 && (big.x / big.w + 3.0).abs() < 1e-15, "{big:?}");
    // A core caller passing such a start gets a typed error, not NaN.
    let lp = Problem::from_json(&chain(REACH, "", "")).unwrap();
    let mut start = Pose::rest(3);
    start.rotations[0] = DQuat::from_xyzw(0.0, 0.0, 0.0, 1e300);
    for method in Method::ALL {
        let e = method.solver(lp.settings).unwrap().solve(&lp.problem, &start).unwrap_err();
        assert!(matches!(e, Error::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("rotation of bone \"a\""), "{e}");
    }
}

#[test]
fn coordinates_beyond_the_bound_are_refused_naming_the_field() {
    assert_eq!(MAX_COORDINATE, 1e12);
    for v in ["1.35e154", "1e300", "1e13"] {
        let target = format!(r#"{{"bone": "c", "target": [{v}, 0, 1]}}"#);
        assert_refused(&chain(&target, "", ""), &["goal 0", "target", "1e12"]);
        let pole = format!(r#"{{"bone": "c", "target": [1, 0, 1], "pole": {{"target": [0, {v}, 0]}}}}"#);
        assert_refused(&chain(&pole, "", ""), &["goal 0", "pole target", "1e12"]);
        let root = format!(r#", "root": "free", "pose": {{"rotations": [[1,0,0,0],[1,0,0,0],[1,0,0,0]], "root_translation": [{v}, 0, 0]}}"#);
        assert_refused(&chain(REACH, &root, ""), &["root translation", "1e12"]);
        let head = chain(REACH, "", "").replace(r#""head": [0,0,2]"#, &format!(r#""head": [0,0,{v}]"#));
        assert_refused(&head, &["bone \"c\""]);
        let matrix = format!(
            r#"{{"format": "sinew.problem/1", "bones": [
                {{"name": "a", "matrix": [[1,0,0,{v}],[0,1,0,0],[0,0,1,0],[0,0,0,1]], "length": 1}},
                {{"name": "b", "parent": "a", "matrix": [[1,0,0,{v}],[0,1,0,1],[0,0,1,0],[0,0,0,1]], "length": 1}}],
              "goals": [{{"bone": "b", "target": [1, 1, 1]}}]}}"#
        );
        assert_refused(&matrix, &["rest head of bone \"a\"", "1e12"]);
        let length = matrix.replacen(&format!("0,{v}],[0,1,0,0]"), "0,0],[0,1,0,0]", 1).replacen(r#""length": 1}"#, &format!(r#""length": {v}}}"#), 1);
        assert_refused(&length, &["length of bone \"a\"", "1e12"]);
    }
    // Many bones each within the bound can add up beyond it in rig space.
    let mut bones = vec![r#"{"name": "b0", "matrix": [[1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]], "length": 9e11}"#.to_owned()];
    for i in 1..3 {
        bones.push(format!(
            r#"{{"name": "b{i}", "parent": "b{}", "matrix": [[1,0,0,0],[0,1,0,{}],[0,0,1,0],[0,0,0,1]], "length": 9e11}}"#,
            i - 1,
            9e11 * f64::from(i)
        ));
    }
    let text = format!(r#"{{"format": "sinew.problem/1", "bones": [{}]}}"#, bones.join(","));
    assert_refused(&text, &["in rig space", "1e12"]);
    // At the bound, a problem still solves to finite numbers.
    let far = r#"{"bone": "c", "target": [1e12, -1e12, 1e12], "pole": {"target": [-1e12, 1e12, 0]}}"#;
    assert_solves(&chain(far, "", ""));
}

#[test]
fn weights_outside_their_range_are_refused() {
    for w in ["1e150", "1e300", "1e13", "1e-13", "1e-300"] {
        let goals = format!(r#"{{"bone": "c", "target": [1, 0, 1], "weight": {w}}}, {{"bone": "b", "target": [1, 0, 1]}}"#);
        assert_refused(&chain(&goals, "", ""), &["goal 0", "weight", "[1e-12, 1e12]"]);
    }
    for w in ["1e12", "1e-12"] {
        let goals = format!(r#"{{"bone": "c", "target": [1, 0, 1], "weight": {w}}}, {{"bone": "b", "target": [1, 0, 1]}}"#);
        assert_solves(&chain(&goals, "", ""));
    }
}

#[test]
fn cones_narrower_than_the_core_floor_are_refused() {
    for v in ["1e-300", "1e-100", "1e-7"] {
        let limit = format!(r#", "limit": {{"swing": {{"cone": {{"x_pos": {v}, "x_neg": 1, "z_pos": 1, "z_neg": 1}}}}}}"#);
        assert_refused(&chain(REACH, "", &limit), &["limit on bone \"b\"", "cone x_pos", "1e-6"]);
    }
    let limit = r#", "limit": {"swing": {"cone": {"x_pos": 1e-6, "x_neg": 1e-6, "z_pos": 1e-6, "z_neg": 1e-6}}}"#;
    assert_solves(&chain(REACH, "", limit));
    // Through the setter too; the rig is unchanged on error.
    let mut p = Problem::from_json(&chain(REACH, "", "")).unwrap().problem;
    let cone = sinew::JointLimit { swing: sinew::Swing::Cone(sinew::ConeLimit::new(1.0, 1e-300, 1.0, 1.0)), ..Default::default() };
    assert!(matches!(p.set_limit(1, cone), Err(Error::LimitOutOfRange { .. })));
    assert!(p.rig().bone(1).limit.is_free());
}

#[test]
fn goal_count_is_capped() {
    let rig = Problem::from_json(&chain(REACH, "", ""))
        .unwrap()
        .problem
        .rig()
        .clone();
    // Goals that move bones in common share one dense system: at most MAX_COUPLED_GOALS.
    let goals = vec![Goal::new(2, DVec3::ONE); MAX_COUPLED_GOALS + 1];
    let e = Problem::new(rig.clone(), goals, RootMode::Pinned).unwrap_err();
    assert!(
        matches!(e, Error::BadGoal { goal: 0, .. })
            && e.to_string()
                .contains("257 goals, from goal 0 on, move bones in common"),
        "{e}"
    );
    assert!(e.to_string().contains("at most 256 may"), "{e}");
    assert!(
        Problem::new(
            rig.clone(),
            vec![Goal::new(2, DVec3::ONE); MAX_COUPLED_GOALS],
            RootMode::Pinned
        )
        .is_ok()
    );
    let e = Problem::new(
        rig,
        vec![Goal::new(2, DVec3::ONE); MAX_GOALS + 1],
        RootMode::Pinned,
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::BadGoal {
                goal: MAX_GOALS,
                ..
            }
        ) && e.to_string().contains("at most 65536 goals"),
        "{e}"
    );
}

/// 1000 goals on 10,100 bones, each moving its own limb: both methods reach every goal (their
/// damped-least-squares systems are a 3-row block per goal; `benches/scale.rs` times them).
#[test]
fn a_thousand_independent_goals_are_solved() {
    let (problem, rest) = limbs::limbs(100, 1000, 10, 10, RootMode::Pinned).unwrap();
    assert_eq!(problem.rig().len(), 10_100);
    for method in [Method::Fabrik, Method::Dls] {
        let s = method
            .solver(SolveSettings::default())
            .unwrap()
            .solve(&problem, &rest)
            .unwrap();
        assert!(
            s.reached,
            "{method:?}: worst residual {}",
            s.worst_residual()
        );
        check_solution_finite(&s).unwrap();
    }
}

#[test]
fn a_bone_that_is_its_own_parent_says_so() {
    let text = chain(REACH, "", "").replace(r#""parent": "b""#, r#""parent": "c""#);
    assert_refused(&text, &["bone \"c\" names itself as its parent"]);
    let text = chain(REACH, "", "").replace(r#""parent": "a""#, r#""parent": "c""#);
    assert_refused(&text, &["parent \"c\" comes after it"]);
}

#[test]
fn worst_residual_for_the_adapters_propagates_nan() {
    let sol = |residuals: Vec<f64>| Solution {
        pose: Pose::rest(1),
        iterations: 1,
        orientation_residuals: vec![0.0; residuals.len()],
        residuals,
        reached: false,
        stop: StopReason::Stalled,
    };
    assert_eq!(sol(vec![]).worst_residual(), 0.0);
    assert_eq!(sol(vec![0.5, 2.0, 1.0]).worst_residual(), 2.0);
    assert!(sol(vec![0.5, f64::NAN, 1.0]).worst_residual().is_nan());
    assert!(sol(vec![f64::NAN]).worst_residual().is_nan());
    assert!(check_solution_finite(&sol(vec![f64::NAN])).is_err());
    assert!(check_solution_finite(&sol(vec![1.0])).is_ok());
    let mut bad = sol(vec![]);
    bad.pose.rotations[0] = DQuat::from_xyzw(f64::NAN, 0.0, 0.0, 1.0);
    assert!(matches!(check_solution_finite(&bad), Err(Error::NonFinite { .. })));
}

/// The directory of saved fuzzer inputs.
fn regressions_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions")
}

#[test]
fn saved_fuzz_inputs_replay_cleanly() {
    let mut count = 0;
    let mut entries: Vec<_> = std::fs::read_dir(regressions_dir()).expect("fuzz/regressions exists").flatten().collect();
    entries.sort_by_key(std::fs::DirEntry::path);
    for entry in entries {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "md") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        // The fuzz target feeds raw bytes; only UTF-8 reaches the loader.
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let _ = check_text(text);
        }
        count += 1;
    }
    assert!(count > 0, "no saved inputs in {}", regressions_dir().display());
}

/// Magnitudes around every threshold that matters: the bound, where squares overflow, the top
/// of f64, and tiny ones.
fn extreme() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(1.0),
        Just(-1.0),
        Just(1e12),
        Just(1.0000001e12),
        Just(1e150),
        Just(1.35e154),
        Just(1e300),
        Just(-1.7e308),
        Just(f64::MAX),
        Just(1e-300),
        Just(5e-324),
        -10.0..10.0f64,
    ]
}

/// A problem that loads and solves as it is, in the 23 numbers [`tree_problem`] takes:
/// orientation (4), pole target and angle (4), rest (head x, tail z, tail x), cone x_pos, rest
/// tail y, target (3), weight, second target y, second weight, start rotations (3), root x.
const TREE: [f64; 23] = [1.0, 0.0, 0.3, 0.0, 1.0, 1.0, 0.0, 0.2, 0.0, 1.0, 0.1, 1.0, 0.1, 0.5, 0.2, 2.0, 1.0, 0.5, 2.0, 1.0, 0.1, 0.1, 0.0];

/// A four-bone tree (a chain of three with a branch off the root) with two goals, a cone, and a
/// start pose, from the numbers `v` (see [`TREE`]).
fn tree_problem(v: &[f64; 23], with_orientation: bool, with_pole: bool, free_root: bool) -> String {
    let f = |i: usize| format!("{:e}", v[i]);
    let orientation = if with_orientation { format!(r#", "orientation": [{}, {}, {}, {}]"#, f(0), f(1), f(2), f(3)) } else { String::new() };
    let pole = if with_pole { format!(r#", "pole": {{"target": [{}, {}, {}], "angle": {}}}"#, f(4), f(5), f(6), f(7)) } else { String::new() };
    format!(
        r#"{{"format": "sinew.problem/1", "bones": [
            {{"name": "a", "head": [{}, 0, 0], "tail": [0, 0, {}]}},
            {{"name": "b", "parent": "a", "head": [0, 0, 1], "tail": [{}, 0, 2],
              "limit": {{"swing": {{"cone": {{"x_pos": {}, "x_neg": 1, "z_pos": 1, "z_neg": 1}}}}}}}},
            {{"name": "c", "parent": "b", "head": [0, 0, 2], "tail": [0, {}, 3]}},
            {{"name": "d", "parent": "a", "head": [0, 0, 1], "tail": [1, 0, 1]}}],
          "goals": [{{"bone": "c", "target": [{}, {}, {}], "weight": {}{orientation}{pole}}},
                    {{"bone": "d", "target": [1, {}, 1], "weight": {}}}],
          "root": "{}",
          "pose": {{"rotations": [[{}, {}, 0, 0], [1, 0, 0, 0], [1, 0, {}, 0], [1, 0, 0, 0]], "root_translation": [{}, 0, 0]}}}}"#,
        f(8), f(9), f(10), f(11).trim_start_matches('-'), f(12), f(13), f(14), f(15), f(16), f(17), f(18),
        if free_root { "free" } else { "pinned" }, f(19), f(20), f(21), f(22)
    )
}

#[test]
fn the_property_tests_base_problem_solves() {
    for flags in 0..8 {
        assert_solves(&tree_problem(&TREE, flags & 1 != 0, flags & 2 != 0, flags & 4 != 0));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// Extreme values in one to three numeric fields of a problem that solves as it is: an
    /// error, or a finite solution with unit quaternions from both methods, never a panic.
    #[test]
    fn extreme_magnitudes_never_give_non_finite_output(
        changes in proptest::collection::vec((0usize..23, extreme()), 1..4),
        with_orientation in any::<bool>(),
        with_pole in any::<bool>(),
        free_root in any::<bool>(),
    ) {
        let mut v = TREE;
        for (i, x) in changes {
            v[i] = x;
        }
        let _ = check_text(&tree_problem(&v, with_orientation, with_pole, free_root));
    }
}
