//! Bend direction of hinged limbs: a straight leg or arm whose knee or elbow is a one-sided hinge
//! must bend the way the hinge allows, in the hinge's plane, and turn its bend plane to a pole
//! target when it has one. Millimetres, Blender axes (Z up, the character faces -Y).
//!
//! - Leg: hip at (0, 0, 1000), thigh 450 mm straight down, shin 450 mm straight down. The thigh's
//!   local X is world +X and its local Z world +Y, so the knee hinge (about local X, range
//!   [0, 150°]) swings the foot backward (+Y) and the knee ends up forward (-Y), in the YZ plane.
//! - Arm: shoulder at (200, 0, 1400), upper arm 300 mm along +X, forearm 250 mm along +X, roll
//!   90° so that local X is world -Z and local Z world -Y: the elbow hinge (about local X,
//!   [0, 150°]) folds the hand forward (-Y) and the elbow ends up behind (+Y), in the horizontal
//!   plane z = 1400.

mod common;

use std::f64::consts::FRAC_PI_2;

use common::check_solution;
use glam::DVec3;
use serde_json::json;
use sinew::{Fabrik, Pose, Problem, Solution, Solver};

const HIP: DVec3 = DVec3::new(0.0, 0.0, 1000.0);
const SHOULDER: DVec3 = DVec3::new(200.0, 0.0, 1400.0);

fn hinge(lo_deg: f64, hi_deg: f64) -> serde_json::Value {
    json!({"swing": {"hinge": {"axis": [1.0, 0.0, 0.0], "min": lo_deg.to_radians(), "max": hi_deg.to_radians()}}})
}

/// A two-bone limb problem: `upper` then `lower` from `head` along `dir`, knee/elbow a hinge.
fn limb(
    head: DVec3,
    dir: DVec3,
    lengths: (f64, f64),
    roll: f64,
    upper_limit: serde_json::Value,
    goal: serde_json::Value,
) -> (Problem, sinew::SolveSettings) {
    let mid = head + dir * lengths.0;
    let end = mid + dir * lengths.1;
    let mut upper = json!({"name": "upper", "head": head.to_array(), "tail": mid.to_array(), "roll": roll});
    if !upper_limit.is_null() {
        upper["limit"] = upper_limit;
    }
    let doc = json!({
        "format": "sinew.problem/1",
        "bones": [
            upper,
            {"name": "lower", "parent": "upper", "head": mid.to_array(), "tail": end.to_array(), "roll": roll, "limit": hinge(0.0, 150.0)}
        ],
        "goals": [goal],
        "settings": {"max_iterations": 200, "tolerance": 1e-3}
    });
    let lp = Problem::from_json(&doc.to_string()).unwrap();
    (lp.problem, lp.settings)
}

fn leg(target: DVec3, thigh_limit: serde_json::Value) -> (Problem, sinew::SolveSettings) {
    limb(HIP, -DVec3::Z, (450.0, 450.0), 0.0, thigh_limit, json!({"bone": "lower", "target": target.to_array()}))
}

fn arm(target: DVec3) -> (Problem, sinew::SolveSettings) {
    limb(
        SHOULDER,
        DVec3::X,
        (300.0, 250.0),
        FRAC_PI_2,
        serde_json::Value::Null,
        json!({"bone": "lower", "target": target.to_array()}),
    )
}

fn solve(problem: &Problem, settings: sinew::SolveSettings, start: &Pose) -> Solution {
    let sol = Fabrik::new(settings).solve(problem, start).unwrap();
    if let Err(e) = check_solution(problem, start, &sol, settings.tolerance, 1e-9) {
        panic!("{e}");
    }
    sol
}

/// The joint between the two bones (the lower bone's head) in the solution.
fn joint(problem: &Problem, sol: &Solution) -> DVec3 {
    problem.rig().forward(&sol.pose).heads[1]
}

/// The joint's offset from the line through `a` and `b`, perpendicular to it.
fn off_line(p: DVec3, a: DVec3, b: DVec3) -> DVec3 {
    let axis = (b - a).normalize();
    let r = p - a;
    r - axis * r.dot(axis)
}

/// The hinge angle of the lower bone (radians), read from its local rotation about local X.
fn hinge_angle(sol: &Solution) -> f64 {
    sinew::geometry::twist_angle(sol.pose.rotations[1], DVec3::X)
}

#[test]
fn a_straight_leg_bends_its_knee_forward_for_a_close_target_below_the_hip() {
    for depth in [880.0, 800.0, 650.0, 500.0, 300.0] {
        for thigh in [
            serde_json::Value::Null,
            json!({"swing": {"cone": {"x_pos": 0.35, "x_neg": 1.9, "z_pos": 0.45, "z_neg": 0.8}}}),
        ] {
            let target = HIP - DVec3::Z * depth;
            let (problem, settings) = leg(target, thigh.clone());
            let sol = solve(&problem, settings, &Pose::rest(2));
            assert!(sol.reached, "depth {depth}: {:?} after {} iterations", sol.residuals, sol.iterations);
            let knee = joint(&problem, &sol);
            let off = off_line(knee, HIP, target);
            // Forward (-Y), in the hinge's plane (x = 0), by a real bend.
            assert!(
                off.y < -1.0,
                "depth {depth}, thigh {thigh}: knee at {knee:?} is not forward of the hip-ankle line"
            );
            assert!(knee.x.abs() < 1e-6 * 1000.0, "depth {depth}: knee at {knee:?} left the hinge plane x = 0");
            let a = hinge_angle(&sol);
            assert!(a > 0.0 && a <= 150f64.to_radians() + 1e-9, "depth {depth}: knee angle {a}");
        }
    }
}

#[test]
fn a_straight_leg_never_bends_backward_for_targets_around_the_foot() {
    // Targets a little in front of, behind and beside the straight foot, all closer than full
    // extension: the knee always ends up forward of the hip-ankle line and in range.
    for dy in [-150.0, -50.0, 0.0, 50.0, 150.0] {
        for dx in [-100.0, 0.0, 100.0] {
            let target = DVec3::new(dx, dy, 200.0);
            let (problem, settings) = leg(target, serde_json::Value::Null);
            let sol = solve(&problem, settings, &Pose::rest(2));
            assert!(sol.reached, "target {target:?}: {:?}", sol.residuals);
            let knee = joint(&problem, &sol);
            let thigh_dir = (knee - HIP).normalize();
            let shin_dir = (target - knee).normalize();
            // The bend: the shin turns from the thigh's direction toward the back (+Y side of
            // the thigh), i.e. the knee's hinge angle is positive.
            let a = hinge_angle(&sol);
            assert!(a > 1e-3, "target {target:?}: knee angle {a} (knee {knee:?})");
            assert!(thigh_dir.cross(shin_dir).length() > 1e-3);
        }
    }
}

#[test]
fn a_straight_arm_bends_its_elbow_the_way_the_hinge_allows() {
    for reach in [540.0, 450.0, 350.0, 200.0] {
        let target = SHOULDER + DVec3::X * reach;
        let (problem, settings) = arm(target);
        let sol = solve(&problem, settings, &Pose::rest(2));
        assert!(sol.reached, "reach {reach}: {:?} after {} iterations", sol.residuals, sol.iterations);
        let elbow = joint(&problem, &sol);
        let off = off_line(elbow, SHOULDER, target);
        // The hand folds forward (-Y), so the elbow is behind the shoulder-wrist line (+Y) and
        // stays in the horizontal plane of the hinge.
        assert!(off.y > 1.0, "reach {reach}: elbow at {elbow:?} is not behind the line");
        assert!((elbow.z - SHOULDER.z).abs() < 1e-6 * 1000.0, "reach {reach}: elbow at {elbow:?} left the hinge plane");
        let a = hinge_angle(&sol);
        assert!(a > 0.0 && a <= 150f64.to_radians() + 1e-9, "reach {reach}: elbow angle {a}");
    }
}

/// A straight limb with a hinge has every swivel about the shoulder/hip→target line open to it
/// (the upper bone is free); it must keep the hinge's plane rather than pick one arbitrarily, and
/// tracking a target that moves along the limb's axis must not make it swivel frame to frame.
#[test]
fn a_straight_hinged_limb_does_not_pick_an_arbitrary_swivel() {
    let (mut problem, settings) = leg(HIP - DVec3::Z * 890.0, serde_json::Value::Null);
    let mut solver = Fabrik::new(settings);
    let mut pose = Pose::rest(2);
    for k in 0..40 {
        // In and out along the leg's axis, including fully straight (900 mm) and a deep bend.
        let depth = 600.0 + 300.0 * (f64::from(k) * 0.3).cos().abs();
        problem.set_target(0, HIP - DVec3::Z * depth).unwrap();
        let sol = solver.solve(&problem, &pose).unwrap();
        check_solution(&problem, &pose, &sol, settings.tolerance, 1e-9).unwrap();
        assert!(sol.reached, "frame {k}: {:?}", sol.residuals);
        let knee = joint(&problem, &sol);
        assert!(knee.x.abs() < 1e-6 * 1000.0, "frame {k} (depth {depth:.1}): knee at {knee:?} swivelled out of x = 0");
        assert!(knee.y <= 1e-6, "frame {k} (depth {depth:.1}): knee at {knee:?} went backward");
        pose = sol.pose;
    }
}

/// A small move of the foot from a straight leg needs only a small bend: no bone turns far.
#[test]
fn a_small_foot_move_from_a_straight_leg_turns_the_leg_a_little() {
    let rest_foot = HIP - DVec3::Z * 900.0;
    for d in
        [DVec3::new(0.0, -5.8, 1.3), DVec3::new(-1.1, -5.8, 1.3), DVec3::new(4.0, 3.0, 2.0), DVec3::new(0.0, 0.0, 2.0)]
    {
        let (problem, settings) = leg(rest_foot + d, serde_json::Value::Null);
        let sol = solve(&problem, settings, &Pose::rest(2));
        assert!(sol.reached, "move {d:?}: {:?}", sol.residuals);
        // Shortening the 900 mm leg by ≤ 2 mm needs a knee bend of ~0.13 rad and a thigh swing
        // of half that; allow 0.25 rad.
        let turn = sol.pose.max_angle_to(&Pose::rest(2));
        assert!(turn < 0.25, "move {d:?}: a bone turned {turn:.3} rad (knee angle {:.3})", hinge_angle(&sol));
    }
}

/// A pole target turns the bend plane to contain it, on the pole's side.
#[test]
fn a_pole_target_puts_the_knee_in_the_plane_of_the_pole() {
    let target = HIP - DVec3::Z * 650.0;
    // Poles at knee height: front, front-left, left, behind-right.
    for pole in [
        DVec3::new(0.0, -600.0, 550.0),
        DVec3::new(400.0, -400.0, 550.0),
        DVec3::new(600.0, 0.0, 550.0),
        DVec3::new(-300.0, 500.0, 550.0),
    ] {
        for angle in [FRAC_PI_2, -FRAC_PI_2] {
            let goal = json!({"bone": "lower", "target": target.to_array(), "pole": {"target": pole.to_array(), "angle": angle}});
            let (problem, settings) = limb(HIP, -DVec3::Z, (450.0, 450.0), 0.0, serde_json::Value::Null, goal);
            let sol = solve(&problem, settings, &Pose::rest(2));
            assert!(sol.reached, "pole {pole:?}, angle {angle}: {:?}", sol.residuals);
            let knee = joint(&problem, &sol);
            let normal = (target - HIP).cross(pole - HIP).normalize();
            let out_of_plane = (knee - HIP).dot(normal);
            assert!(
                out_of_plane.abs() < 1e-3,
                "pole {pole:?}, angle {angle}: knee {knee:?} is {out_of_plane:.3} mm off the pole's plane"
            );
            // Blender's convention: the thigh's X·cos a + Z·sin a aims at the pole. This knee bends
            // toward the thigh's local -Z, so -90° (the usual Blender pole angle for such legs)
            // puts the knee on the pole's side and +90° on the opposite side.
            let side = off_line(knee, HIP, target).dot(off_line(pole, HIP, target));
            assert_eq!(side > 0.0, angle < 0.0, "pole {pole:?}, angle {angle}: knee {knee:?}");
        }
    }
}

/// The right leg of `paper_humanoid13_constrained.json` on its own: hip (-95, 0, 985), knee
/// (-100, -10, 540), ankle (-100, 15, 90), bent 4.5° at rest the way its hinge bends (knee
/// forward); knee hinge [0, 150°] about local X, thigh free.
fn bent_leg(knee: serde_json::Value, target: DVec3) -> (Problem, sinew::SolveSettings) {
    let mut shin =
        json!({"name": "shin", "parent": "thigh", "head": [-100.0, -10.0, 540.0], "tail": [-100.0, 15.0, 90.0]});
    if !knee.is_null() {
        shin["limit"] = knee;
    }
    let doc = json!({
        "format": "sinew.problem/1",
        "bones": [{"name": "thigh", "head": [-95.0, 0.0, 985.0], "tail": [-100.0, -10.0, 540.0]}, shin],
        "goals": [{"bone": "shin", "target": target.to_array()}],
        "settings": {"max_iterations": 300, "tolerance": 1e-3}
    });
    let lp = Problem::from_json(&doc.to_string()).unwrap();
    (lp.problem, lp.settings)
}

const BENT_ANKLE: DVec3 = DVec3::new(-100.0, 15.0, 90.0);
const SMALL_MOVE: DVec3 = DVec3::new(-1.07087382096863, -5.802869758293802, 1.25284511348991);

/// Moving the ankle target of the slightly bent leg 6 mm (up 1.3, forward 5.8, inward 1.1)
/// should barely move the knee. Instead the thigh rolls 3.09 rad about its axis and the knee
/// ends up 44 mm back, behind the hip-ankle line: the leg bends backward while its hinge angle
/// stays in range. Inside the constrained humanoid (chain_length 2) the same move swivels the
/// thigh 0.61 rad and moves the knee 17 mm sideways; with the whole chain to the root it turns
/// the pelvis 0.63 rad; this is what breaks `humanoid13_constrained_tracks_smoothly_moving_targets`.
/// Regression test: fixed on the core by 91a4de0/5197955 (it was ignored as a core bug before).
#[test]
fn a_slightly_bent_hinged_leg_keeps_its_bend_plane_for_a_small_move() {
    let (problem, settings) = bent_leg(hinge(0.0, 150.0), BENT_ANKLE + SMALL_MOVE);
    let sol = solve(&problem, settings, &Pose::rest(2));
    assert!(sol.reached, "{:?}", sol.residuals);
    let knee = joint(&problem, &sol);
    let moved = knee - DVec3::new(-100.0, -10.0, 540.0);
    let turn = sol.pose.max_angle_to(&Pose::rest(2));
    assert!(turn < 0.1 && moved.x.abs() < 3.0, "a bone turned {turn:.3} rad; the knee moved {moved:?} mm");
}

/// The same small move with a free knee: FABRIK's point steps on a nearly straight two-bone
/// chain close the gap linearly (the closed-form finish waits for 99% of the gap to close
/// first), so a 6 mm move takes 257 iterations.
/// Regression test: fixed on the core by 91a4de0/5197955 (it was ignored as a core bug before).
#[test]
fn a_small_move_of_a_nearly_straight_free_leg_converges_quickly() {
    let (problem, settings) = bent_leg(serde_json::Value::Null, BENT_ANKLE + SMALL_MOVE);
    let sol = solve(&problem, settings, &Pose::rest(2));
    assert!(sol.reached, "{:?}", sol.residuals);
    assert!(sol.iterations <= 30, "{} iterations", sol.iterations);
}
