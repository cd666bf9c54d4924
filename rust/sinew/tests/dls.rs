//! The damped-least-squares solver (`Method::Dls`) on the paper's models: it reaches targets
//! inside the limits, never leaves a limit, tracks the constrained humanoid, is a fixed point at
//! a solution, and rejects bad input with typed errors.

mod common;

use common::{Rng, load, max_violation};
use glam::{DQuat, DVec3};
use sinew::{Dls, Error, Method, Pose, Solver, StopReason};

#[test]
fn dls_reaches_in_limit_targets_on_the_paper_chains_from_rest() {
    for file in ["paper_chain10.json", "paper_chain10_constrained.json"] {
        let lp = load(file);
        let rig = lp.problem.rig();
        let effector = lp.problem.goals()[0].bone;
        let mut rng = Rng::new(42);
        let mut solver = Dls::new(lp.settings);
        let mut iterations = 0;
        for case in 0..300 {
            // FK of a random pose inside the limits: reachable within them by construction.
            let truth = Pose {
                rotations: rig.bones().iter().map(|b| b.limit.clamp(rng.rotation(1.2))).collect(),
                root_translation: DVec3::ZERO,
                scales: Vec::new(),
            };
            let mut p = lp.problem.clone();
            p.set_target(0, rig.forward(&truth).tails[effector]).unwrap();
            let sol = solver.solve(&p, &lp.pose).unwrap();
            assert!(sol.reached, "{file} case {case}: {:?} {:?} after {}", sol.stop, sol.residuals, sol.iterations);
            assert!(max_violation(rig, &sol.pose).0 < 1e-9, "{file} case {case} leaves a limit");
            iterations += sol.iterations;
        }
        let mean = f64::from(iterations) / 300.0;
        assert!(mean < 15.0, "{file}: mean {mean} iterations");
    }
}

#[test]
fn dls_tracks_the_constrained_humanoid() {
    let lp = load("paper_humanoid13_constrained.json");
    let mut solver = Method::Dls.solver(lp.settings).unwrap();
    assert_eq!(solver.name(), "dls");
    let mut pose = lp.pose.clone();
    for (f, targets) in common::humanoid_tracks(300, 60.0, 7).iter().enumerate() {
        let mut p = lp.problem.clone();
        for (gi, t) in targets.iter().enumerate() {
            p.set_target(gi, *t).unwrap();
        }
        let sol = solver.solve(&p, &pose).unwrap();
        assert!(sol.reached, "frame {f}: {:?} {:?}", sol.stop, sol.residuals);
        assert!(max_violation(p.rig(), &sol.pose).0 < 1e-9, "frame {f} leaves a limit");
        pose = sol.pose;
    }
}

#[test]
fn dls_is_a_fixed_point_at_a_solution() {
    let lp = load("paper_humanoid13.json");
    let mut solver = Dls::new(lp.settings);
    let first = solver.solve(&lp.problem, &lp.pose).unwrap();
    assert!(first.reached, "{:?}", first.residuals);
    let again = solver.solve(&lp.problem, &first.pose).unwrap();
    assert_eq!((again.iterations, again.stop), (0, StopReason::Converged));
    assert!(again.pose.max_angle_to(&first.pose) < 1e-12);
}

#[test]
fn dls_rejects_a_start_pose_that_does_not_fit() {
    let lp = load("paper_chain10.json");
    let mut solver = Dls::new(lp.settings);
    let short = Pose::rest(lp.problem.rig().len() - 1);
    assert!(matches!(solver.solve(&lp.problem, &short), Err(Error::ShapeMismatch { .. })));
    let mut nan = lp.pose.clone();
    nan.rotations[3] = DQuat::from_xyzw(f64::NAN, 0.0, 0.0, 1.0);
    assert!(solver.solve(&lp.problem, &nan).is_err());
    assert_eq!(Method::from_name("DLS").unwrap(), Method::Dls);
}
