//! Continuity where limits bind: the steps toward the reference pose (`Problem::set_reference`)
//! move to the pose nearest it among those that meet the goals and respect the limits, so an
//! answer solved cold from the reference moves little when a target moves little, even while a
//! spine bone's cone holds it at its bound.

use glam::{DQuat, DVec3};
use sinew::{Bone, ConeLimit, Goal, HingeLimit, JointLimit, Method, Pose, Problem, Reference, Rig, RootMode, SolveSettings, Swing, TwistLimit};

/// A hip, three spine bones with cones (Blender's ellipse, 0.12, 0.2 and 0.25 rad) and twist
/// limits, a shoulder on the top one, and a two-bone arm (a cone-limited upper arm, a hinged
/// forearm): a small copy of the metarig's torso and arm. With `lock_twist` the upper arm only
/// swings (its twist range one value, as Blender's `lock_ik_y`).
fn torso_and_arm(lock_twist: bool) -> Rig {
    let cone = |a: f64| JointLimit {
        swing: Swing::Cone(ConeLimit::from_blender(-a, a, -a, a)),
        twist: Some(TwistLimit { min: -0.17, max: 0.17 }),
        ..JointLimit::FREE
    };
    let bone = |name: &str, parent: Option<usize>, head: f64, rest_rotation: DQuat, length: f64, limit: JointLimit| Bone {
        name: name.into(),
        parent,
        rest_head: DVec3::new(0.0, head, 0.0),
        rest_rotation,
        length,
        limit,
    };
    let twist = if lock_twist { TwistLimit { min: 0.0, max: 0.0 } } else { TwistLimit { min: -0.9, max: 0.9 } };
    let arm = JointLimit { swing: Swing::Cone(ConeLimit::from_blender(-1.4, 1.4, -1.2, 1.2)), twist: Some(twist), ..JointLimit::FREE };
    let hinge = JointLimit { swing: Swing::Hinge(HingeLimit { axis: DVec3::X, min: -0.3, max: 2.2 }), ..JointLimit::FREE };
    Rig::new(vec![
        bone("hips", None, 0.0, DQuat::IDENTITY, 0.12, JointLimit::FREE),
        bone("spine", Some(0), 0.12, DQuat::IDENTITY, 0.15, cone(0.12)),
        bone("spine.001", Some(1), 0.15, DQuat::IDENTITY, 0.15, cone(0.2)),
        bone("spine.002", Some(2), 0.15, DQuat::IDENTITY, 0.15, cone(0.25)),
        bone("shoulder", Some(3), 0.15, DQuat::from_rotation_z(std::f64::consts::FRAC_PI_2), 0.15, JointLimit::FREE),
        bone("upper_arm", Some(4), 0.15, DQuat::IDENTITY, 0.28, arm),
        bone("forearm", Some(5), 0.28, DQuat::IDENTITY, 0.25, hinge),
    ])
    .unwrap()
}

/// The torso bent forward (and aside) further than its lowest cone allows (clamped into it) and
/// the arm reaching forward; goals on the spine's top (chain 3) and the hand (chain 2), the rest
/// pose as the reference, so the nearest pose shares the bend and spine bones sit on their
/// bounds. The hand's target moves 4 mm in 40 steps; each step is solved cold from the
/// reference at the add-on's 100 iterations, and a spine bone is held at a bound of its limit. Before the steps held bones at their bounds as an
/// active set (see `DlsSteps::refine_toward`) the pull stopped wherever 40 steps got it while
/// the cone caught and released the bone, and adjacent answers differed by up to 0.49 rad.
///
/// The last two cases lock the upper arm's twist: a bone that only swings is held by its cone
/// alone, never by the twist bound it always sits on.
#[test]
fn cold_solves_stay_continuous_while_a_cone_holds_a_spine_bone() {
    for (bend, side, elbow, lock_twist) in [(0.18, 0.0, 0.6, false), (0.18, 0.05, 0.1, false), (0.18, 0.05, 0.4, true), (0.18, 0.0, 0.9, true)] {
        let rig = torso_and_arm(lock_twist);
        let n = rig.len();
        let mut truth = Pose::rest(n);
        for b in 1..4 {
            truth.rotations[b] = DQuat::from_rotation_x(bend) * DQuat::from_rotation_z(side);
        }
        truth.rotations[5] = DQuat::from_rotation_x(1.3) * DQuat::from_rotation_z(-0.4);
        truth.rotations[6] = DQuat::from_rotation_x(elbow);
        for b in 0..n {
            truth.rotations[b] = rig.bone(b).limit.clamp(truth.rotations[b]);
        }
        let f = rig.forward(&truth);
        let mut solver = Method::Fabrik.solver(SolveSettings { max_iterations: 100, tolerance: 1e-4, ..SolveSettings::default() }).unwrap();
        let mut previous: Option<Pose> = None;
        let (mut worst, mut held) = (0.0f64, 0);
        for k in 0..=40 {
            let hand = f.tails[6] + DVec3::new(0.004 * k as f64 / 40.0, 0.0, 0.0);
            let goals = vec![Goal::new(3, f.tails[3]).with_chain_length(3), Goal::new(6, hand).with_chain_length(2)];
            let mut problem = Problem::new(rig.clone(), goals, RootMode::Pinned).unwrap();
            problem.set_reference(Reference::Pose(Pose::rest(n))).unwrap();
            let solution = solver.solve(&problem, &Pose::rest(n)).unwrap();
            assert!(solution.reached, "bend {bend}, side {side}, step {k}: not reached ({:?})", solution.residuals);
            let at_bound = |b: usize| {
                let state = rig.bone(b).limit.state(solution.pose.rotations[b], 1e-3);
                state.swing_at_bound || state.twist_at_bound
            };
            held += usize::from((1..4).any(at_bound));
            if let Some(p) = &previous {
                worst = worst.max(p.max_angle_to(&solution.pose));
            }
            previous = Some(solution.pose);
        }
        eprintln!("bend {bend}, side {side}, elbow {elbow}, twist locked {lock_twist}: worst {worst:.2e} rad, a spine bone held in {held} of 41");
        assert!(worst <= 0.01, "bend {bend}, side {side}, elbow {elbow}: a 0.1 mm move of the hand turned a bone by {worst} rad");
        assert!(held > 30, "bend {bend}, side {side}: a spine bone is at a bound in only {held} of 41 answers");
    }
}
