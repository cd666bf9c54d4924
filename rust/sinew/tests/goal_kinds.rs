//! Goal kinds (Jack §5: orientation only, aim, line, plane, half-space) through every method:
//! each kind met by `nlp`, `fabrik` and `dls` on a small chain, measured here with geometry
//! written out independently of the core's `Goal::demand`; every method either meets it, keeps
//! the solve contract, or refuses the problem with a typed error; a half-space goal already
//! satisfied moves nothing; `nlp`'s objective never rises from one iteration to the next; the
//! kinds load from the problem format (`sinew.problem/2`) and bad kinds are refused clearly.

mod common;

use common::Rng;
use glam::{DQuat, DVec3};
use sinew::geometry::angle_between;
use sinew::{Bone, ConeLimit, Error, Goal, GoalKind, JointLimit, Method, Pose, Problem, ProblemFile, Reference, Rig, RootMode, SolveSettings, Swing, TwistLimit};

const TOL: f64 = 1e-4;

/// A chain of 4 bones of length 1 up +Y, each bent 0.3 rad about X at rest (so no start is
/// singular), with cones of 100° and twist of ±60° when `limited`.
fn chain(limited: bool) -> Rig {
    let limit = if limited {
        let a = 100f64.to_radians();
        JointLimit {
            swing: Swing::Cone(ConeLimit { x_pos: a, x_neg: a, z_pos: a, z_neg: a, shape: Default::default() }),
            twist: Some(TwistLimit { min: -1.0, max: 1.0 }),
            ..JointLimit::default()
        }
    } else {
        JointLimit::default()
    };
    Rig::new(
        (0..4usize)
            .map(|i| Bone {
                name: format!("b{i}"),
                parent: i.checked_sub(1),
                rest_head: if i == 0 { DVec3::ZERO } else { DVec3::Y },
                rest_rotation: DQuat::from_rotation_x(if i == 0 { 0.0 } else { 0.3 }),
                length: 1.0,
                limit,
            })
            .collect(),
    )
    .unwrap()
}

/// How far goal `g` is from met at `pose`, as (distance, angle), from first principles.
fn miss(rig: &Rig, g: &Goal, pose: &Pose) -> (f64, f64) {
    let f = rig.forward(pose);
    let e = f.effector(g.bone, g.use_tail);
    let rot = f.rotations[g.bone];
    let angle_to = |q: Option<DQuat>| q.map_or(0.0, |q| angle_between(q, rot));
    match g.kind {
        GoalKind::Position => ((e - g.target).length(), angle_to(g.orientation)),
        GoalKind::Line { direction } => {
            let d = direction.normalize();
            let v = e - g.target;
            ((v - d * d.dot(v)).length(), angle_to(g.orientation))
        }
        GoalKind::Plane { normal } => (normal.normalize().dot(e - g.target).abs(), angle_to(g.orientation)),
        GoalKind::HalfSpace { normal } => ((-normal.normalize().dot(e - g.target)).max(0.0), angle_to(g.orientation)),
        GoalKind::Orientation => (0.0, angle_to(g.orientation)),
        GoalKind::Aim { axis } => {
            let pointing = (rot * axis).normalize();
            let wanted = (g.target - f.heads[g.bone]).normalize();
            (0.0, pointing.cross(wanted).length().atan2(pointing.dot(wanted)))
        }
    }
}

/// One goal of each kind on the chain's tip, each met by some pose inside the limits.
fn goals_of_every_kind(rig: &Rig) -> Vec<(&'static str, Goal)> {
    // A pose inside the limits whose tip frame gives reachable orientations and points.
    let bent =
        Pose::new(vec![DQuat::from_rotation_z(0.4), DQuat::from_rotation_x(0.5), DQuat::from_rotation_z(-0.6), DQuat::from_rotation_x(0.3)], DVec3::ZERO);
    let f = rig.forward(&bent);
    let tip = f.tails[3];
    vec![
        ("line", Goal::new(3, tip + DVec3::new(0.0, 0.0, 0.7)).with_kind(GoalKind::Line { direction: DVec3::new(0.0, 0.0, 2.0) })),
        ("plane", Goal::new(3, DVec3::new(0.0, 0.0, 1.2)).with_kind(GoalKind::Plane { normal: DVec3::Z })),
        ("half_space", Goal::new(3, DVec3::new(0.0, 0.0, 1.0)).with_kind(GoalKind::HalfSpace { normal: DVec3::Z })),
        ("orientation", Goal::new(3, DVec3::ZERO).with_orientation(f.rotations[3]).with_kind(GoalKind::Orientation)),
        ("aim along the bone", Goal::new(3, DVec3::new(2.0, 2.0, 1.5)).with_kind(GoalKind::Aim { axis: DVec3::Y })),
        ("aim along +X", Goal::new(3, DVec3::new(-2.0, 3.0, 1.0)).with_kind(GoalKind::Aim { axis: DVec3::X }).with_chain_length(2)),
        ("line with orientation", Goal::new(3, tip).with_orientation(f.rotations[3]).with_kind(GoalKind::Line { direction: DVec3::X })),
    ]
}

/// The chain's reach from its top bone's head (bones of length 1): what a radian of orientation
/// error counts as (`Problem::goal_met`).
fn reach(goal: &Goal) -> f64 {
    if goal.chain_length == 0 { 4.0 } else { goal.chain_length as f64 }
}

fn settings(max_iterations: u32) -> SolveSettings {
    SolveSettings { max_iterations, tolerance: TOL, stall_tolerance: 1e-12 }
}

/// Every kind is met by the methods that guarantee a local solution from a good start (within
/// `TOL`, and its orientation within `TOL / reach`), inside the limits, with the residuals the
/// solution reports equal to the misses measured here.
#[test]
fn every_kind_is_met_by_nlp_fabrik_and_dls() {
    for limited in [false, true] {
        let rig = chain(limited);
        for (what, goal) in goals_of_every_kind(&rig) {
            let problem = Problem::new(rig.clone(), vec![goal], RootMode::Pinned).unwrap();
            let goal = problem.goals()[0];
            for method in [Method::Nlp, Method::Fabrik, Method::Dls] {
                let sol = method.solver(settings(500)).unwrap().solve(&problem, &Pose::rest(4)).unwrap();
                let (d, a) = miss(&rig, &goal, &sol.pose);
                let label = format!("{} on a {what} goal (limits {limited})", method.name());
                assert!(sol.reached, "{label}: not reached ({:?}; miss {d:e}, {a:e} rad)", sol.stop);
                assert!(d <= TOL && a * reach(&goal) <= TOL * 1.0001, "{label}: misses by {d:e}, {a:e} rad");
                assert!(
                    (sol.residuals[0] - d).abs() < 1e-9 && (sol.orientation_residuals[0] - a).abs() < 1e-9,
                    "{label}: residuals {:?} {:?} against {d} {a}",
                    sol.residuals,
                    sol.orientation_residuals
                );
                for (b, q) in sol.pose.rotations.iter().enumerate() {
                    assert!(rig.bone(b).limit.violation(*q) < 1e-9, "{label}: bone {b} violates its limit");
                }
            }
        }
    }
}

/// Every method either solves each kind within its contract (residuals as measured here,
/// `reached` agreeing with them, limits kept) or refuses it with a typed error; none ignores it.
#[test]
fn every_method_honours_or_refuses_every_kind() {
    let rig = chain(true);
    for (what, goal) in goals_of_every_kind(&rig) {
        let problem = Problem::new(rig.clone(), vec![goal], RootMode::Pinned).unwrap();
        let goal = problem.goals()[0];
        for method in Method::ALL {
            let label = format!("{} on a {what} goal", method.name());
            match method.solver(settings(2000)).unwrap().solve(&problem, &Pose::rest(4)) {
                Err(Error::Unsupported { .. }) => assert!(goal.orientation.is_some() || matches!(goal.kind, GoalKind::Aim { .. }), "{label}: refused"),
                Err(e) => panic!("{label}: {e}"),
                Ok(sol) => {
                    let (d, a) = miss(&rig, &goal, &sol.pose);
                    assert!((sol.residuals[0] - d).abs() < 1e-9 && (sol.orientation_residuals[0] - a).abs() < 1e-9, "{label}: residuals");
                    assert_eq!(sol.reached, d <= TOL && a * reach(&goal) <= TOL, "{label}: reached");
                    for (b, q) in sol.pose.rotations.iter().enumerate() {
                        assert!(rig.bone(b).limit.violation(*q) < 1e-9, "{label}: bone {b} violates its limit");
                    }
                    // The methods that converge locally meet position-like kinds from rest.
                    if !matches!(method, Method::JacobianTranspose | Method::Triangulation)
                        && goal.orientation.is_none()
                        && !matches!(goal.kind, GoalKind::Aim { .. })
                    {
                        assert!(sol.reached, "{label}: not reached ({:?}, miss {d:e})", sol.stop);
                    }
                }
            }
        }
    }
}

/// A half-space goal its effector already satisfies asks nothing: without a reference every
/// method returns the start (inside the limits) unchanged, and with the rest pose (the default,
/// which meets it too) every method returns the rest pose.
#[test]
fn a_satisfied_half_space_moves_nothing() {
    let rig = chain(true);
    let start = Pose::new(vec![DQuat::from_rotation_z(0.2), DQuat::from_rotation_x(0.1), DQuat::IDENTITY, DQuat::from_rotation_z(-0.3)], DVec3::ZERO);
    let tip = rig.forward(&start).tails[3];
    for normal in [DVec3::Y, DVec3::new(0.3, -0.2, 0.9)] {
        // The plane passes 0.5 below the tip along the normal: the tip is inside.
        let goal = Goal::new(3, tip - normal.normalize() * 0.5).with_kind(GoalKind::HalfSpace { normal });
        let mut problem = Problem::new(rig.clone(), vec![goal], RootMode::Pinned).unwrap();
        for (reference, expected) in [(Reference::LeastMotion, start.clone()), (Reference::Rest, Pose::rest(4))] {
            problem.set_reference(reference).unwrap();
            for method in Method::ALL {
                let sol = method.solver(settings(100)).unwrap().solve(&problem, &start).unwrap();
                assert!(sol.reached, "{}", method.name());
                assert_eq!(sol.residuals[0], 0.0, "{}", method.name());
                let moved = sol.pose.rotations.iter().zip(&expected.rotations).map(|(a, b)| angle_between(*a, *b)).fold(0.0, f64::max);
                assert_eq!(sol.pose, expected, "{} {:?}: moved (by {moved:e} rad, {:?}, {} iterations)", method.name(), problem.reference(), sol.stop, sol.iterations);
            }
        }
    }
}

/// `nlp`'s objective (the goals' weighted potentials: squared distance plus squared angle times
/// the chain's reach) never rises from one iteration to the next (Jack's appendix, Powell's
/// line-search condition), on seeded random targets with limits, position goals with and without
/// orientation: the solve capped at `k + 1` iterations ends no higher than the one capped at `k`.
/// Goals of the other kinds are met in rounds of position goals, whose potentials bound theirs
/// from above: their objective never rises from the start to the answer (checked here too),
/// though within a round it may rise a little while the round's position potential falls.
#[test]
fn nlp_never_raises_its_objective() {
    let rig = chain(true);
    let mut rng = Rng::new(14);
    for case in 0..24 {
        let target = rng.in_ball(5.0);
        let mut goal = Goal::new(3, target);
        match case % 4 {
            0 => {}
            1 => goal = goal.with_orientation(rng.rotation(3.0)),
            2 => goal = goal.with_kind(GoalKind::Plane { normal: rng.unit() }),
            _ => goal = goal.with_kind(GoalKind::Aim { axis: rng.unit() }),
        }
        let problem = Problem::new(rig.clone(), vec![goal], RootMode::Pinned).unwrap();
        let goal = problem.goals()[0];
        let objective = |pose: &Pose| {
            let (d, a) = miss(&rig, &goal, pose);
            d * d + (a * reach(&goal)).powi(2)
        };
        let mut last = objective(&Pose::rest(4));
        if case % 4 >= 2 {
            let sol = Method::Nlp.solver(settings(200)).unwrap().solve(&problem, &Pose::rest(4)).unwrap();
            assert!(objective(&sol.pose) <= last, "case {case}: the objective rose from {last:e} to {:e}", objective(&sol.pose));
            continue;
        }
        for k in 1..=40 {
            let sol = Method::Nlp.solver(settings(k)).unwrap().solve(&problem, &Pose::rest(4)).unwrap();
            let now = objective(&sol.pose);
            assert!(now <= last * (1.0 + 1e-12) + 1e-24, "case {case}: the objective rose from {last:e} to {now:e} at iteration {k}");
            last = now;
            if sol.iterations < k {
                break;
            }
        }
    }
}

/// `nlp` reaches the reachable targets of seeded random chains with limits, as the other local
/// methods do (a reachable target: the tip of a random pose inside the limits).
#[test]
fn nlp_reaches_reachable_targets() {
    let rig = chain(true);
    let mut rng = Rng::new(9);
    let mut reached = 0;
    let cases = 60;
    for _ in 0..cases {
        let truth = Pose::new((0..4).map(|b| rig.bone(b).limit.clamp(rng.rotation(1.2))).collect(), DVec3::ZERO);
        let f = rig.forward(&truth);
        let problem = Problem::new(rig.clone(), vec![Goal::new(3, f.tails[3])], RootMode::Pinned).unwrap();
        let sol = Method::Nlp.solver(settings(1000)).unwrap().solve(&problem, &Pose::rest(4)).unwrap();
        reached += usize::from(sol.reached);
    }
    // A local method may stop at a local minimum from the rest pose; measured 60 of 60.
    assert!(reached * 100 >= cases * 95, "nlp reached {reached} of {cases}");
}

/// The problem format carries kinds in `sinew.problem/2`; `/1` refuses them by its tag; a kind
/// without the field it needs, with a field it does not use, or unknown is refused by name.
#[test]
fn kinds_load_from_the_format_and_bad_kinds_are_refused() {
    let file = |format: &str, goal: &str| {
        format!(
            r#"{{"format": "{format}", "bones": [
                {{"name": "a", "head": [0, 0, 0], "tail": [0, 1, 0]}},
                {{"name": "b", "parent": "a", "head": [0, 1, 0], "tail": [0, 2, 0.3]}}],
              "goals": [{goal}]}}"#
        )
    };
    let plane = r#"{"bone": "b", "target": [0, 0, 0.5], "kind": "plane", "normal": [0, 0, 2]}"#;
    let lp = ProblemFile::from_json(&file("sinew.problem/2", plane)).unwrap().load().unwrap();
    assert_eq!(lp.problem.goals()[0].kind, GoalKind::Plane { normal: DVec3::Z });
    let sol = Method::Nlp.solver(settings(200)).unwrap().solve(&lp.problem, &lp.pose).unwrap();
    assert!(sol.reached && (lp.problem.rig().forward(&sol.pose).tails[1].z - 0.5).abs() <= TOL);
    let aim = r#"{"bone": "b", "target": [3, 1, 0], "kind": "aim"}"#;
    let lp = ProblemFile::from_json(&file("sinew.problem/2", aim)).unwrap().load().unwrap();
    assert_eq!(lp.problem.goals()[0].kind, GoalKind::Aim { axis: DVec3::Y });

    let error = |format: &str, goal: &str| ProblemFile::from_json(&file(format, goal)).and_then(|f| f.load()).unwrap_err().to_string();
    assert!(error("sinew.problem/1", plane).contains("goal kinds need \"format\": \"sinew.problem/2\""));
    assert!(error("sinew.problem/2", r#"{"bone": "b", "target": [0, 0, 0], "kind": "plane"}"#).contains("a plane goal needs a normal"));
    assert!(error("sinew.problem/2", r#"{"bone": "b", "target": [0, 0, 0], "kind": "line", "normal": [0, 0, 1]}"#).contains("a line goal has no normal"));
    assert!(error("sinew.problem/2", r#"{"bone": "b", "target": [0, 0, 0], "kind": "cone"}"#).contains("unknown goal kind \"cone\""));
    assert!(error("sinew.problem/2", r#"{"bone": "b", "target": [0, 0, 0], "kind": "plane", "normal": [0, 0, 0]}"#).contains("normal"));
    assert!(error("sinew.problem/2", r#"{"bone": "b", "target": [0, 0, 0], "kind": "orientation"}"#).contains("needs an orientation"));
    assert!(error("sinew.problem/2", r#"{"bone": "b", "target": [0, 0, 0], "kind": "aim", "orientation": [1, 0, 0, 0]}"#).contains("no orientation"));
}

/// `Problem::set_kind` and `set_orientation` keep a goal valid: nothing changes on error.
#[test]
fn kinds_are_validated_when_set() {
    let mut problem = Problem::new(chain(false), vec![Goal::new(3, DVec3::new(1.0, 2.0, 0.0))], RootMode::Pinned).unwrap();
    assert!(problem.set_kind(0, GoalKind::Line { direction: DVec3::ZERO }).is_err());
    assert!(problem.set_kind(0, GoalKind::Line { direction: DVec3::new(f64::NAN, 0.0, 1.0) }).is_err());
    assert!(problem.set_kind(0, GoalKind::Orientation).is_err());
    assert_eq!(problem.goals()[0].kind, GoalKind::Position);
    problem.set_kind(0, GoalKind::HalfSpace { normal: DVec3::new(0.0, 3.0, 4.0) }).unwrap();
    assert_eq!(problem.goals()[0].kind, GoalKind::HalfSpace { normal: DVec3::new(0.0, 3.0, 4.0).normalize() });
    problem.set_orientation(0, Some(DQuat::IDENTITY)).unwrap();
    problem.set_kind(0, GoalKind::Orientation).unwrap();
    assert!(problem.set_orientation(0, None).is_err());
    assert!(problem.set_kind(0, GoalKind::Aim { axis: DVec3::Y }).is_err(), "an aim with an orientation");
    assert!(problem.set_kind(9, GoalKind::Position).is_err());
}

/// With a reference pose, what a kind asks is measured on the reference, not on the start: a
/// half-space the reference meets lets `fabrik` and `dls` return the reference itself from any
/// start (the pose falls back to the reference, as an animator's keyed pose when the floor drops
/// away), and a line takes the reference effector's nearest point, whatever the start.
#[test]
fn kinds_are_measured_on_the_reference() {
    let rig = chain(true);
    let reference = Pose::new(vec![DQuat::from_rotation_z(0.3), DQuat::from_rotation_x(0.4), DQuat::from_rotation_z(-0.2), DQuat::from_rotation_x(0.2)], DVec3::ZERO);
    let start = Pose::new(vec![DQuat::from_rotation_x(-0.3), DQuat::from_rotation_z(0.5), DQuat::IDENTITY, DQuat::from_rotation_z(0.4)], DVec3::ZERO);
    let tip = rig.forward(&reference).tails[3];
    let floor = Goal::new(3, tip - DVec3::Y * 0.5).with_kind(GoalKind::HalfSpace { normal: DVec3::Y });
    let line = Goal::new(3, tip + DVec3::new(0.3, 0.0, 0.0)).with_kind(GoalKind::Line { direction: DVec3::Z });
    for method in [Method::Fabrik, Method::Dls] {
        let mut problem = Problem::new(rig.clone(), vec![floor], RootMode::Pinned).unwrap();
        problem.set_reference(Reference::Pose(reference.clone())).unwrap();
        let sol = method.solver(settings(500)).unwrap().solve(&problem, &start).unwrap();
        assert!(sol.reached, "{}", method.name());
        let off = sol.pose.rotations.iter().zip(&reference.rotations).map(|(a, b)| angle_between(*a, *b)).fold(0.0, f64::max);
        assert!(off < 1e-3, "{}: {off} rad from the reference", method.name());

        let mut problem = Problem::new(rig.clone(), vec![line], RootMode::Pinned).unwrap();
        problem.set_reference(Reference::Pose(reference.clone())).unwrap();
        let sol = method.solver(settings(500)).unwrap().solve(&problem, &start).unwrap();
        let got = rig.forward(&sol.pose).tails[3];
        let want = DVec3::new(line.target.x, line.target.y, tip.z);
        assert!(sol.reached && (got - want).length() < 1e-3, "{}: tip at {got}, the reference's nearest point {want}", method.name());
    }
}
